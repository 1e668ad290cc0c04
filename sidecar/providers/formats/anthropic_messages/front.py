"""The Anthropic Messages front: a caller's request read, the answer rendered (whole, streamed, failed).

``AnthropicFront.parse`` reads a request into the core's (the inverse of ``upstream.AnthropicUpstream.body``)::

    request key                    what is read
    model                          the model id asked for (a catalog model or a route)
    system                         the system prompt (a string, or a list of text blocks); a response schema
                                   ``body`` appended to it (JSON_INSTRUCTION) is read back from its end
    messages                       user: text blocks (one message each) and tool_result blocks (tool_use_id,
                                   content: a string or text blocks, is_error); assistant: text blocks, each
                                   with the tool_use blocks after it (input {"_raw": text}: the text as written)
    tools                          [{name, description, input_schema}]
    max_tokens, temperature        the output budget (at least 1), temperature
    output_config.format           structured output: its ``json_schema`` is the call's response schema
    stream                         a streamed answer
    tool_choice                    absent or {"type": "auto"} (the model chooses): anything else is INVALID_INPUT
    anything else                  (top_k, stop_sequences, metadata, thinking ...) not carried, ignored

Blocks other than text, tool_use and tool_result are INVALID_INPUT naming the block.

``render``, ``writer`` and ``error_body`` answer in the format::

    core                                        Anthropic answer
    ChatReply                                   {"type": "message", "role": "assistant", "content": [...],
                                                "stop_reason", "usage": {input_tokens, output_tokens}}
      text                                      a text block (a refusal: its explanation); none when empty
      tool calls                                tool_use blocks: id, name, input (arguments not JSON: {"_raw"})
      stop_reason                               tool_use when it calls a tool (unless cut off or filtered), else
                                                end_turn / max_tokens / refusal
    a stream                                    message_start, then blocks in order:
      TextDelta (a refusal too)                 content_block_start text (when the open block is not text),
                                                content_block_delta text_delta
      ToolCallDelta                             content_block_start tool_use (id, name) on a call's first
                                                fragment, content_block_delta input_json_delta
      the end                                   content_block_stop, message_delta (stop_reason, usage), message_stop
      the sidecar's restart                     ``event: sidecar_restart`` {type, cause, reason, attempt}; the new
                                                reply's content blocks are numbered from 0 again
    a failure                                   {"type": "error", "error": {"type", "message"}}; in a stream,
                                                ``event: error``
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from sidecar.core.conversation import Message, ModelRequest, ToolCall, ToolCallResult, ToolDefinition
from sidecar.core.kinds import FinishReason, Role
from sidecar.core.stream import Delta, ReasoningDelta, TextDelta
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.formats.anthropic_messages.vocab import (
    API_KEY_HEADER,
    ERROR_TYPES,
    FINISH_NAMES,
    RAW_ARGUMENTS,
    input_of,
)
from sidecar.providers.formats.chat import JSON_INSTRUCTION, ChatReply, compact_json
from sidecar.providers.formats.fields import (
    bool_field,
    number_field,
    object_list,
    positive_budget,
    schema_text,
    shown,
)
from sidecar.providers.formats.protocol import Ask, ReplyHead, Sse

__all__ = ["MESSAGES_ROUTE", "RESTART_EVENT", "AnthropicFront", "EventWriter", "parse_request", "stop_reason"]

MESSAGES_ROUTE = "/v1/messages"
RESTART_EVENT = "sidecar_restart"
_SCHEMA_MARK = f"{JSON_INSTRUCTION}\n"

_INVALID = "invalid_request_error"
_API = "api_error"
_ANSWERS: Mapping[str, tuple[str, int | None]] = {
    "invalid_value": (_INVALID, None),
    "context_length_exceeded": (_INVALID, None),
    "content_policy_violation": (_INVALID, None),
    "output_truncated": (_INVALID, None),
    "permission_denied": ("permission_error", None),
    "model_not_found": ("not_found_error", None),
    "resource_not_found": ("not_found_error", None),
    "insufficient_quota": ("billing_error", 402),
    "spend_cap_exceeded": ("billing_error", 402),
    "rate_limit_exceeded": ("rate_limit_error", None),
    "overloaded": ("overloaded_error", 529),
    "deadline_exceeded": ("timeout_error", None),
}
"""``error.type`` of a sidecar failure by its code, and the status when it is not the door's (402, 529);
every other code: api_error."""


class AnthropicFront:
    """The Anthropic Messages format as a provider speaks it (the module's tables)."""

    path = MESSAGES_ROUTE
    words = "an Anthropic-compatible"
    id_prefix = "msg_"

    def parse(self, body: dict[str, Any]) -> Ask:
        request = parse_request(body)
        positive_budget(request, "max_tokens")
        schema = output_schema(body)
        if schema is not None:
            request = replace(request, response_schema_json=schema)
        choice = body.get("tool_choice")
        if choice is not None and choice != {"type": "auto"}:
            rule = 'must be {"type": "auto"}: the sidecar lets the model choose'
            raise InvalidInput("tool_choice", shown(choice), rule)
        return Ask(request, bool_field(body, "stream"))

    def render(self, reply: ChatReply, head: ReplyHead, extension: Mapping[str, Any] | None = None) -> dict[str, Any]:
        text = reply.text or reply.refusal or ""  # a refusal is its explanation, as text
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content += [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": input_of(c.arguments_json)}
            for c in reply.tool_calls
        ]
        out: dict[str, Any] = {
            "id": head.reply_id,
            "type": "message",
            "role": "assistant",
            "model": head.model,
            "content": content,
            "stop_reason": stop_reason(reply),
            "stop_sequence": None,
            "usage": _usage(reply),
        }
        if extension is not None:
            out["sidecar"] = dict(extension)
        return out

    def writer(self, head: ReplyHead, *, include_usage: bool = False) -> EventWriter:
        return EventWriter(head)

    def error_body(
        self,
        message: str,
        error_type: str,
        *,
        code: str | None = None,
        param: str | None = None,
        extension: Mapping[str, Any] | None = None,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        error: dict[str, Any] = {"type": error_type, "message": message}
        if extension is not None:
            error["sidecar"] = dict(extension)
        out: dict[str, Any] = {"type": "error", "error": error}
        if request_id is not None:
            out["request_id"] = request_id
        return out

    def answer(self, code: str, status: int) -> tuple[int, str]:
        error_type, own = _ANSWERS.get(code, (_API, None))
        return own or status, error_type

    def error_type(self, status: int) -> str:
        return ERROR_TYPES.get(status, _API if status >= 500 else _INVALID)

    def api_key(self, headers: Mapping[str, str]) -> str:
        return headers.get(API_KEY_HEADER, "")


def stop_reason(reply: ChatReply) -> str:
    """The reply's ``stop_reason``: ``tool_use`` whenever it calls a tool and was neither cut nor filtered."""
    if reply.tool_calls and reply.finish not in (FinishReason.LENGTH, FinishReason.CONTENT_FILTER):
        return "tool_use"
    if reply.refusal is not None:
        return "refusal"
    return FINISH_NAMES.get(reply.finish, "end_turn")


def _usage(reply: ChatReply) -> dict[str, int]:
    return {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens}


def _event(kind: str, **fields: Any) -> Sse:
    return (kind, {"type": kind, **fields})


class EventWriter:
    """One streamed reply as Messages events (the module's table)."""

    def __init__(self, head: ReplyHead) -> None:
        self._head = head
        self._index = -1
        """The content block open now (-1: none yet)."""
        self._open: int | None = None
        """What that block is: None a text block, else the tool call's index; -1 when it is closed."""
        self._calls: set[int] = set()

    def start(self, input_tokens: int = 0) -> list[Sse]:
        message: dict[str, Any] = {
            "id": self._head.reply_id,
            "type": "message",
            "role": "assistant",
            "model": self._head.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": 0},
        }
        return [_event("message_start", message=message)]

    def _close(self) -> list[Sse]:
        if self._index < 0 or self._open == -1:
            return []
        self._open = -1
        return [_event("content_block_stop", index=self._index)]

    def _begin(self, block: dict[str, Any], what: int | None) -> list[Sse]:
        out = self._close()
        self._index += 1
        self._open = what
        out.append(_event("content_block_start", index=self._index, content_block=block))
        return out

    def delta(self, delta: Delta) -> list[Sse]:
        if isinstance(delta, ReasoningDelta):
            return []  # issue 21: not yet rendered by this front
        out: list[Sse] = []
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
        out.append(_event("content_block_delta", index=self._index, delta=body))
        return out

    def refusal(self, text: str) -> list[Sse]:
        return self.delta(TextDelta(text))  # Anthropic streams a refusal as text

    def restarted(self, words: Mapping[str, Any]) -> list[Sse]:
        self._index, self._open = -1, None  # a new reply follows: its blocks are numbered from 0 again
        self._calls.clear()
        return [(RESTART_EVENT, {"type": RESTART_EVENT, **words})]

    def final(self, reply: ChatReply, extension: Mapping[str, Any] | None = None) -> list[Sse]:
        extra = {} if extension is None else {"sidecar": dict(extension)}
        delta = {"stop_reason": stop_reason(reply), "stop_sequence": None}
        return [
            *self._close(),
            _event("message_delta", delta=delta, usage=_usage(reply), **extra),
            _event("message_stop"),
        ]

    def error(self, body: dict[str, Any]) -> list[Sse]:
        return [("error", body)]


# ---------------------------------------------------------------------------- requests read


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
