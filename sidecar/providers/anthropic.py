"""The Anthropic Messages wire format, whole and streamed.

A stream (``"stream": true``) is named events, read by ``AnthropicStream``::

    event                 data                                       becomes
    message_start         message: id, model, usage.input_tokens      the reply's id, model, tokens
    content_block_start   text block (its text, if any)               TextDelta
                          tool_use block: id, name                    ToolCallDelta (the call numbered among
                                                                      the reply's tool calls, from 0)
                          any other block (thinking ...)              ignored, and its deltas too
    content_block_delta   text_delta                                  TextDelta
                          input_json_delta (partial_json)             ToolCallDelta: an arguments fragment
    content_block_stop    -                                           -
    message_delta         delta.stop_reason, usage.output_tokens      the reply's finish and tokens
    message_stop          -                                           the end marker
    ping                  -                                           -
    error                 {"type": "error", "error": {...}}           StreamFault with the error body
    not JSON, not an object                                           StreamFault (garbled)
    any other event, an event with no data                            ignored, as the API asks of clients

A tool call's arguments are the fragments joined, as JSON re-serialized like a whole reply's
``input`` (so a streamed reply and a whole one are the same reply).

``AnthropicAdapter.body`` renders a request, ``parse_request`` reads one back (its inverse)::

    core (ModelRequest / ChatRequest)           Anthropic body
    system                                      "system" (a string; a list of text blocks is read too)
    response schema                             appended to system: "\n\n" JSON_INSTRUCTION "\n" compact schema
                                                (read back from the end of system)
    Message(USER, text)                         {"role": "user", "content": [{"type": "text"}]}
    Message(ASSISTANT, text, tool_calls)        {"role": "assistant", "content": [text, {"type": "tool_use", input}]}
                                                (arguments that are not JSON: input {"_raw": text})
    Message(TOOL, tool_results)                 {"role": "user", "content": [{"type": "tool_result", tool_use_id,
                                                content, is_error}]}; its name is the call's, by id
    consecutive messages of one role            merged into one (the API wants roles to alternate); read back
                                                one message per text block, tool results apart
    tools                                       [{name, description, input_schema}]
    max_tokens, temperature                     max_tokens, temperature

What ``parse_request`` cannot carry is INVALID_INPUT naming the field (blocks other than text,
tool_use and tool_result); other request keys are the front's business and ignored here
(``output_schema`` reads the structured-output one, ``output_config.format``).

The Anthropic-compatible HTTP front (``server/http/anthropic_front.py``) answers in this format
with ``render_message``, ``EventWriter`` and ``render_error``::

    core                                        Anthropic answer
    ModelResponse                               {"type": "message", "role": "assistant", "content": [...],
                                                "stop_reason", "usage": {input_tokens, output_tokens}}
      text                                      a text block (the parsed object as compact JSON when a
                                                schema was asked); none when empty
      tool calls                                tool_use blocks: id, name, input (arguments not JSON: {"_raw"})
      stop_reason                               tool_use when it calls a tool, else end_turn / max_tokens / refusal
    a stream                                    message_start (usage 0), then blocks in order:
      TextDelta                                 content_block_start text (when the open block is not text),
                                                content_block_delta text_delta
      ToolCallDelta                             content_block_start tool_use (id, name) on a call's first
                                                fragment, content_block_delta input_json_delta
      Final                                     content_block_stop, message_delta (stop_reason, usage), message_stop
    a failure                                   {"type": "error", "error": {"type", "message"}}
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sidecar.core.conversation import Message, ModelRequest, ModelResponse, ToolCall, ToolCallResult, ToolDefinition
from sidecar.core.kinds import FinishReason, Role
from sidecar.core.stream import Delta, TextDelta, ToolCallDelta
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.tool_shapes import render_tool
from sidecar.providers.wire import (
    JSON_INSTRUCTION,
    ChatReply,
    ChatRequest,
    StreamFault,
    compact_json,
    number_field,
    object_list,
    schema_text,
    shown,
)

__all__ = [
    "RAW_ARGUMENTS",
    "AnthropicAdapter",
    "AnthropicStream",
    "EventWriter",
    "output_schema",
    "parse_request",
    "render_error",
    "render_message",
    "stop_reason",
]

RAW_ARGUMENTS = "_raw"
"""The one key of a tool_use input that carries arguments that were not JSON, as written."""
_SCHEMA_MARK = f"{JSON_INSTRUCTION}\n"
REFUSAL_TEXT = "the model declined to answer"
"""A refusal's explanation when the model wrote none."""

_FINISH = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "pause_turn": FinishReason.STOP,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "tool_use": FinishReason.TOOL_CALLS,
    "refusal": FinishReason.CONTENT_FILTER,
}


class AnthropicAdapter:
    wire = "anthropic"

    def __init__(self, version: str = "2023-06-01") -> None:
        self._version = version

    def path(self) -> str:
        return "/v1/messages"

    def headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": self._version}
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def body(self, request: ChatRequest, *, stream: bool = False) -> dict[str, Any]:
        system = request.system
        if request.response_schema is not None:
            schema = json.dumps(request.response_schema, separators=(",", ":"))
            system = f"{system}\n\n{JSON_INSTRUCTION}\n{schema}".strip()
        messages: list[dict[str, Any]] = []
        for m in request.messages:
            role, blocks = _message(m)
            if messages and messages[-1]["role"] == role:
                messages[-1]["content"].extend(blocks)  # the API wants roles to alternate
            else:
                messages.append({"role": role, "content": blocks})
        body: dict[str, Any] = {
            "model": request.upstream_model,
            "max_tokens": request.max_tokens,
            "messages": messages,
        }
        if system:
            body["system"] = system
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.tools:
            body["tools"] = [
                render_tool(
                    "anthropic", t.name, t.description, json.loads(t.parameters_json) if t.parameters_json else None
                )
                for t in request.tools
            ]
        if stream:
            body["stream"] = True
        return body

    def stream_decoder(self) -> AnthropicStream:
        return AnthropicStream()

    def parse(self, body: dict[str, Any]) -> ChatReply:
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in body.get("content") or []:
            if block.get("type") == "text":
                texts.append(str(block.get("text", "")))
            elif block.get("type") == "tool_use":
                calls.append(
                    ToolCall(
                        id=str(block.get("id", "")),
                        name=str(block.get("name", "")),
                        arguments_json=json.dumps(block.get("input") or {}),
                    )
                )
        raw_finish = str(body.get("stop_reason") or "")
        usage = body.get("usage") or {}
        return ChatReply(
            text="".join(texts),
            tool_calls=calls,
            finish=_FINISH.get(raw_finish, FinishReason.UNSPECIFIED),
            raw_finish=raw_finish,
            refusal=("".join(texts) or REFUSAL_TEXT) if raw_finish == "refusal" else None,
            input_tokens=int(usage.get("input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
            response_model=str(body.get("model") or ""),
            response_id=str(body.get("id") or ""),
        )


class AnthropicStream:
    """One streamed Messages reply, event by event (the table of the module)."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._blocks: dict[int, int | None] = {}
        """Content block index -> the tool call it is (None: a text block); other blocks are absent."""
        self._calls: list[tuple[str, str, list[str]]] = []
        self._finish: str | None = None
        self._input_tokens = 0
        self._output_tokens = 0
        self._model = ""
        self._id = ""
        self.complete = False

    def feed(self, event: str, data: str) -> list[Delta]:
        if not data.strip():
            return []  # an event with no data: nothing this reader needs
        try:
            body = json.loads(data)
        except (ValueError, RecursionError):
            raise StreamFault("the stream sent an event that is not JSON") from None
        if not isinstance(body, dict):
            raise StreamFault("the stream sent an event that is not a JSON object")
        kind = event or str(body.get("type") or "")
        if kind == "error" or body.get("type") == "error":
            raise StreamFault("the stream sent an error event", error_body=data)
        if kind == "message_start":
            self._start(body.get("message"))
        elif kind == "content_block_start":
            return self._block_start(body)
        elif kind == "content_block_delta":
            return self._block_delta(body)
        elif kind == "message_delta":
            self._message_delta(body)
        elif kind == "message_stop":
            self.complete = True
        return []  # ping, content_block_stop, and every event type this reader does not know

    def _start(self, message: Any) -> None:
        if not isinstance(message, dict):
            return
        self._id = _text_of(message.get("id"))
        self._model = _text_of(message.get("model"))
        self._usage(message.get("usage"))

    def _usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self._input_tokens = _count(usage.get("input_tokens")) or self._input_tokens
            self._output_tokens = _count(usage.get("output_tokens")) or self._output_tokens

    def _block_start(self, body: dict[str, Any]) -> list[Delta]:
        index, block = body.get("index"), body.get("content_block")
        if not isinstance(index, int) or not isinstance(block, dict):
            return []
        if block.get("type") == "text":
            self._blocks[index] = None
            return self._text_delta(block.get("text"))
        if block.get("type") == "tool_use":
            call = len(self._calls)
            self._blocks[index] = call
            call_id, name = _text_of(block.get("id")), _text_of(block.get("name"))
            self._calls.append((call_id, name, []))
            return [ToolCallDelta(call, call_id, name, "")]
        return []

    def _block_delta(self, body: dict[str, Any]) -> list[Delta]:
        index, delta = body.get("index"), body.get("delta")
        if not isinstance(index, int) or index not in self._blocks or not isinstance(delta, dict):
            return []
        call = self._blocks[index]
        if call is None and delta.get("type") == "text_delta":
            return self._text_delta(delta.get("text"))
        if call is not None and delta.get("type") == "input_json_delta":
            fragment = _text_of(delta.get("partial_json"))
            self._calls[call][2].append(fragment)
            return [ToolCallDelta(call, "", "", fragment)]
        return []

    def _text_delta(self, text: Any) -> list[Delta]:
        if not isinstance(text, str) or not text:
            return []
        self._text.append(text)
        return [TextDelta(text)]

    def _message_delta(self, body: dict[str, Any]) -> None:
        delta = body.get("delta")
        if isinstance(delta, dict) and delta.get("stop_reason"):
            self._finish = str(delta["stop_reason"])
        self._usage(body.get("usage"))

    def reply(self) -> ChatReply | None:
        if self._finish is None:
            return None
        text = "".join(self._text)
        raw_finish = self._finish
        return ChatReply(
            text=text,
            tool_calls=[ToolCall(i, n, _streamed_arguments("".join(parts))) for i, n, parts in self._calls],
            finish=_FINISH.get(raw_finish, FinishReason.UNSPECIFIED),
            raw_finish=raw_finish,
            refusal=(text or REFUSAL_TEXT) if raw_finish == "refusal" else None,
            input_tokens=self._input_tokens,
            output_tokens=self._output_tokens,
            response_model=self._model,
            response_id=self._id,
        )


def _streamed_arguments(joined: str) -> str:
    """A streamed tool call's fragments as a whole reply's ``input`` renders them; as sent when not JSON."""
    try:
        return json.dumps(json.loads(joined or "{}"))
    except (ValueError, RecursionError):
        return joined


def _text_of(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _message(m: Message) -> tuple[str, list[dict[str, Any]]]:
    if m.role == Role.ASSISTANT:
        blocks: list[dict[str, Any]] = []
        if m.text:
            blocks.append({"type": "text", "text": m.text})
        for c in m.tool_calls:
            try:  # bounded before: CallChecks refused arguments past the size cap or nested past 64 deep
                args = json.loads(c.arguments_json or "{}")
            except (ValueError, RecursionError):
                args = {RAW_ARGUMENTS: c.arguments_json}
            blocks.append({"type": "tool_use", "id": c.id, "name": c.name, "input": args})
        return "assistant", blocks
    blocks = [
        {"type": "tool_result", "tool_use_id": r.call_id, "content": r.content, "is_error": r.is_error}
        for r in m.tool_results
    ]
    if m.text or not blocks:
        blocks.append({"type": "text", "text": m.text})
    return "user", blocks


# ---------------------------------------------------------------------------- requests read back


def parse_request(body: Mapping[str, Any]) -> ModelRequest:
    """An Anthropic Messages request as the core's ModelRequest (the module's table)."""
    model = body.get("model")
    if not isinstance(model, str):
        raise InvalidInput("model", shown(model), "must be the model's name (a string)")
    system, schema = _split_system(_system(body.get("system")))
    messages: list[Message] = []
    names: dict[str, str] = {}
    for i, m in enumerate(object_list(body, "messages", required=True)):
        role, where = m.get("role"), f"messages[{i}]"
        blocks = _blocks(m.get("content"), f"{where}.content")
        if role == "assistant":
            messages.extend(_assistant(blocks, where, names))
        elif role == "user":
            messages.extend(_user(blocks, where, names))
        else:
            raise InvalidInput(f"{where}.role", shown(role), "must be user or assistant")
    return ModelRequest(
        model=model,
        messages=tuple(messages),
        system=system,
        tools=tuple(_tool(t, f"tools[{i}]") for i, t in enumerate(object_list(body, "tools"))),
        response_schema_json=schema,
        max_output_tokens=number_field(body, "max_tokens", int),
        temperature=number_field(body, "temperature", float),
    )


def _system(value: Any) -> str:
    if value is None or isinstance(value, str):
        return value or ""
    return "".join(_text_block(b, f"system[{j}]") for j, b in enumerate(_blocks(value, "system")))


def _split_system(system: str) -> tuple[str, str]:
    """The system prompt and the response schema ``body`` appended to it ("" when there is none)."""
    at = system.rfind(_SCHEMA_MARK)
    if at < 0 or (at > 0 and not system[:at].endswith("\n\n")):
        return system, ""
    text = system[at + len(_SCHEMA_MARK) :]
    try:
        schema = json.loads(text)
    except ValueError:
        return system, ""
    if not isinstance(schema, dict) or compact_json(schema) != text:
        return system, ""
    return system[:at].removesuffix("\n\n"), text


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        raise InvalidInput(where, shown(content), "must be a string or a list of content blocks")
    return content


def _text_block(block: dict[str, Any], where: str) -> str:
    if block.get("type") != "text" or not isinstance(block.get("text"), str):
        raise InvalidInput(where, shown(block.get("type")), "must be a text block (the sidecar carries text only)")
    return str(block["text"])


def _assistant(blocks: list[dict[str, Any]], where: str, names: dict[str, str]) -> list[Message]:
    """One message per text block, the tool_use blocks after it belonging to it."""
    out: list[Message] = []
    for j, block in enumerate(blocks):
        if block.get("type") == "tool_use":
            name, call_id = block.get("name"), str(block.get("id") or "")
            if not isinstance(name, str):
                raise InvalidInput(f"{where}.content[{j}].name", shown(name), "must name the tool called")
            names[call_id] = name
            call = ToolCall(call_id, name, _arguments(block.get("input")))
            last = out.pop() if out else Message(Role.ASSISTANT)
            out.append(Message(Role.ASSISTANT, last.text, (*last.tool_calls, call)))
        else:
            out.append(Message(Role.ASSISTANT, _text_block(block, f"{where}.content[{j}]")))
    return out


def _arguments(value: Any) -> str:
    """A request's tool_use ``input`` as arguments JSON (the RAW_ARGUMENTS form: the text as written)."""
    if isinstance(value, dict) and list(value) == [RAW_ARGUMENTS] and isinstance(value[RAW_ARGUMENTS], str):
        return str(value[RAW_ARGUMENTS])
    return compact_json(value if value is not None else {})


def _user(blocks: list[dict[str, Any]], where: str, names: dict[str, str]) -> list[Message]:
    """Tool results (consecutive ones together) and one message per text block, in order."""
    out: list[Message] = []
    for j, block in enumerate(blocks):
        at = f"{where}.content[{j}]"
        if block.get("type") != "tool_result":
            out.append(Message(Role.USER, _text_block(block, at)))
            continue
        call_id = str(block.get("tool_use_id") or "")
        content = block.get("content")
        text = content if isinstance(content, str) else _result_text(content, f"{at}.content")
        result = ToolCallResult(call_id, text, block.get("is_error") is True, names.get(call_id, ""))
        if out and out[-1].role is Role.TOOL:
            out[-1] = Message(Role.TOOL, tool_results=(*out[-1].tool_results, result))
        else:
            out.append(Message(Role.TOOL, tool_results=(result,)))
    return out


def _result_text(content: Any, where: str) -> str:
    """A tool result's content given as text blocks (joined); none is ""."""
    if content is None:
        return ""
    return "".join(_text_block(b, f"{where}[{j}]") for j, b in enumerate(_blocks(content, where)))


def _tool(t: dict[str, Any], where: str) -> ToolDefinition:
    name = t.get("name")
    if not isinstance(name, str):
        raise InvalidInput(f"{where}.name", shown(name), "must be the tool's name")
    schema = t.get("input_schema")
    params = "" if schema is None else schema_text(schema, f"{where}.input_schema")
    return ToolDefinition(name, str(t.get("description") or ""), params)


def output_schema(body: Mapping[str, Any]) -> str | None:
    """The schema of ``output_config.format`` (structured outputs) as JSON text; None when not asked."""
    config = body.get("output_config")
    if config is None:
        return None
    if not isinstance(config, dict):
        raise InvalidInput("output_config", shown(config), "must be an object")
    fmt = config.get("format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        kind = fmt.get("type") if isinstance(fmt, dict) else fmt
        raise InvalidInput("output_config.format.type", shown(kind), "must be json_schema")
    return schema_text(fmt.get("schema"), "output_config.format.schema")


# ---------------------------------------------------------------------------- answers rendered (the HTTP front)

_STOP_REASONS = {
    FinishReason.STOP: "end_turn",
    FinishReason.LENGTH: "max_tokens",
    FinishReason.TOOL_CALLS: "tool_use",
    FinishReason.CONTENT_FILTER: "refusal",
}


def stop_reason(response: ModelResponse) -> str:
    """The reply's ``stop_reason``: ``tool_use`` whenever it calls a tool."""
    if response.message.tool_calls:
        return "tool_use"
    return _STOP_REASONS.get(response.finish_reason, "end_turn")


def _input(arguments_json: str) -> Any:
    try:
        return json.loads(arguments_json or "{}")
    except (ValueError, RecursionError):
        return {RAW_ARGUMENTS: arguments_json}


def render_message(
    response: ModelResponse, *, message_id: str, model: str, extension: Mapping[str, Any]
) -> dict[str, Any]:
    """A whole reply as a ``message`` object; ``extension`` rides along as ``sidecar``."""
    text = compact_json(response.parsed) if response.parsed is not None else response.message.text
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": _input(c.arguments_json)}
        for c in response.message.tool_calls
    ]
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(response),
        "stop_sequence": None,
        "usage": {"input_tokens": response.usage.input_tokens, "output_tokens": response.usage.output_tokens},
        "sidecar": dict(extension),
    }


Event = tuple[str, dict[str, Any]]
"""A server-sent event: its name and its data."""


class EventWriter:
    """One streamed reply as Messages events (the module's table)."""

    def __init__(self, *, message_id: str, model: str) -> None:
        self._id = message_id
        self._model = model
        self._index = -1
        """The content block open now (-1: none yet)."""
        self._open: int | None = None
        """What that block is: None a text block, else the tool call's index; -1 when it is closed."""
        self._calls: set[int] = set()

    def start(self) -> list[Event]:
        message: dict[str, Any] = {
            "id": self._id,
            "type": "message",
            "role": "assistant",
            "model": self._model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return [("message_start", {"type": "message_start", "message": message})]

    def _close(self) -> list[Event]:
        if self._index < 0 or self._open == -1:
            return []
        self._open = -1
        return [("content_block_stop", {"type": "content_block_stop", "index": self._index})]

    def _begin(self, block: dict[str, Any], what: int | None) -> list[Event]:
        out = self._close()
        self._index += 1
        self._open = what
        start = {"type": "content_block_start", "index": self._index, "content_block": block}
        out.append(("content_block_start", start))
        return out

    def delta(self, delta: Delta) -> list[Event]:
        out: list[Event] = []
        if isinstance(delta, TextDelta):
            if self._index < 0 or self._open is not None:
                out += self._begin({"type": "text", "text": ""}, None)
            body = {"type": "text_delta", "text": delta.text}
        else:
            if delta.index not in self._calls or self._open != delta.index:
                self._calls.add(delta.index)
                out += self._begin({"type": "tool_use", "id": delta.id, "name": delta.name, "input": {}}, delta.index)
            if not delta.arguments_fragment:
                return out
            body = {"type": "input_json_delta", "partial_json": delta.arguments_fragment}
        out.append(("content_block_delta", {"type": "content_block_delta", "index": self._index, "delta": body}))
        return out

    def restarted(self) -> None:
        """A new reply follows (a restart): its blocks are numbered from 0 again."""
        self._index, self._open = -1, None
        self._calls.clear()

    def finish(self, response: ModelResponse, **extra: Any) -> list[Event]:
        usage = {"input_tokens": response.usage.input_tokens, "output_tokens": response.usage.output_tokens}
        delta = {"stop_reason": stop_reason(response), "stop_sequence": None}
        return [
            *self._close(),
            ("message_delta", {"type": "message_delta", "delta": delta, "usage": usage, **extra}),
            ("message_stop", {"type": "message_stop"}),
        ]


def render_error(message: str, kind: str, **extra: Any) -> dict[str, Any]:
    """Anthropic's error body: ``{"type": "error", "error": {"type", "message", ...extra}}``."""
    return {"type": "error", "error": {"type": kind, "message": message, **extra}}
