"""The OpenAI Chat Completions wire format (also vLLM, Ollama and the compatible servers), whole and streamed.

A stream (``"stream": true``, ``"stream_options": {"include_usage": true}``) is ``data:`` events,
read by ``OpenAIStream``::

    data                                         becomes
    {"choices": [{"delta": {"content": "..."}}]}   TextDelta (an empty string: nothing)
    {"delta": {"refusal": "..."}}                  kept for the reply's refusal (never sent as text)
    {"delta": {"tool_calls": [{"index", "id",      ToolCallDelta: the call numbered in the order its
       "function": {"name", "arguments"}}]}}         first fragment came; id and name on that fragment
    {"choices": [{"finish_reason": ...}]}          the reply's finish
    {"choices": [], "usage": {...}}                the reply's tokens (any chunk's usage counts)
    {"error": {...}}                               StreamFault with the error body (classified as an error)
    [DONE]                                         the end marker
    not JSON, not an object                        StreamFault (garbled)
    anything else (new fields, empty choices,      ignored, as the API asks of clients
      no data, a named event other than error)     (``event: error`` is an error event, as some servers send)

``OpenAIAdapter.body`` renders a request, ``parse_request`` reads one back (its inverse)::

    core (ModelRequest / ChatRequest)           OpenAI body
    system                                      {"role": "system"} first ("developer" read as system too)
    Message(USER, text)                         {"role": "user", "content": text}
    Message(ASSISTANT, text, tool_calls)        {"role": "assistant", "content": text or null, "tool_calls": [...]}
    Message(TOOL, tool_results)                 one {"role": "tool", "tool_call_id", "content"} per result; a
                                                result with is_error has TOOL_ERROR_PREFIX before its content
                                                (the wire has no flag); its name is the call's, by id
    tools                                       [{"type": "function", "function": {name, description, parameters}}]
    response schema                             response_format {"type": "json_schema", "json_schema": {schema}}
                                                ({"type": "json_object"} reads as {"type": "object"})
    max_tokens, temperature                     max_tokens (max_completion_tokens read too), temperature

What ``parse_request`` cannot carry is INVALID_INPUT naming the field (content other than text);
other request keys (stream, tool_choice, n ...) are the front's business and ignored here.

The OpenAI-compatible HTTP front (``server/http/openai_front.py``) answers in this format with
``render_response``, ``ChunkWriter`` and ``render_error``::

    core                                        OpenAI answer
    ModelResponse                               {"object": "chat.completion", "choices": [{"message": {"role":
                                                "assistant", "content", "tool_calls"}, "finish_reason"}], "usage"}
      content                                   the text; the parsed object as compact JSON when a schema was
                                                asked (null when the reply is only tool calls)
      finish_reason                             tool_calls when it has any, else stop / length / content_filter
      usage                                     the last attempt's prompt_tokens / completion_tokens / total_tokens
    a stream                                    "chat.completion.chunk" events: the role first, then
      TextDelta                                 {"delta": {"content": text}}
      ToolCallDelta                             {"delta": {"tool_calls": [{"index", "id", "type", "function":
                                                {"name", "arguments"}}]}} (id, type and name on the first fragment)
      Final                                     {"delta": {}, "finish_reason"}, then, when include_usage was asked,
                                                {"choices": [], "usage"}; the front ends with ``[DONE]``
    a failure                                   {"error": {"message", "type", "param", "code"}}
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sidecar.core.conversation import (
    Message,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolCallResult,
    ToolDefinition,
    Usage,
)
from sidecar.core.kinds import FinishReason, Role
from sidecar.core.stream import Delta, TextDelta, ToolCallDelta
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.tool_shapes import render_tool
from sidecar.providers.wire import (
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
    "END_MARKER",
    "TOOL_ERROR_PREFIX",
    "ChunkWriter",
    "OpenAIAdapter",
    "OpenAIStream",
    "finish_name",
    "parse_request",
    "render_error",
    "render_response",
]

TOOL_ERROR_PREFIX = "[tool error] "
"""Before the content of a tool result that is an error: the OpenAI wire has no is_error flag."""
END_MARKER = "[DONE]"

_FINISH = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,
    "content_filter": FinishReason.CONTENT_FILTER,
}


class OpenAIAdapter:
    wire = "openai"

    def path(self) -> str:
        return "/chat/completions"

    def headers(self, api_key: str | None) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    def body(self, request: ChatRequest, *, stream: bool = False) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        for m in request.messages:
            messages.extend(_message(m))
        body: dict[str, Any] = {
            "model": request.upstream_model,
            "messages": messages,
            "max_tokens": request.max_tokens,
        }
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.tools:
            body["tools"] = [
                render_tool(
                    "openai", t.name, t.description, json.loads(t.parameters_json) if t.parameters_json else None
                )
                for t in request.tools
            ]
        if request.response_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": request.response_schema, "strict": False},
            }
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def stream_decoder(self) -> OpenAIStream:
        return OpenAIStream()

    def parse(self, body: dict[str, Any]) -> ChatReply:
        choice = (body.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        raw_finish = str(choice.get("finish_reason") or "")
        calls = [
            ToolCall(
                id=str(c.get("id", "")),
                name=str((c.get("function") or {}).get("name", "")),
                arguments_json=str((c.get("function") or {}).get("arguments") or "{}"),
            )
            for c in message.get("tool_calls") or []
        ]
        usage = body.get("usage") or {}
        content = message.get("content") or ""
        if not isinstance(content, str):
            raise ValueError("the reply's content is not text")
        return ChatReply(
            text=content,
            tool_calls=calls,
            finish=_FINISH.get(raw_finish, FinishReason.UNSPECIFIED),
            raw_finish=raw_finish,
            refusal=message.get("refusal") or None,
            input_tokens=int(usage.get("prompt_tokens") or 0),
            output_tokens=int(usage.get("completion_tokens") or 0),
            response_model=str(body.get("model") or ""),
            response_id=str(body.get("id") or ""),
        )


class _Call:
    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []


class OpenAIStream:
    """One streamed Chat Completions reply, chunk by chunk (the table of the module)."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[int, _Call] = {}
        """Tool calls by the wire's index, in the order their first fragment came."""
        self._finish: str | None = None
        self._input_tokens = 0
        self._output_tokens = 0
        self._model = ""
        self._id = ""
        self.complete = False

    def feed(self, event: str, data: str) -> list[Delta]:
        if event not in ("", "message", "error") or not data.strip():
            return []  # a named event this wire does not define, or one with no data
        if data.strip() == END_MARKER:
            self.complete = True
            return []
        if event == "error":
            raise StreamFault("the stream sent an error event", error_body=data)
        try:
            chunk = json.loads(data)
        except (ValueError, RecursionError):
            raise StreamFault("the stream sent an event that is not JSON") from None
        if not isinstance(chunk, dict):
            raise StreamFault("the stream sent an event that is not a JSON object")
        if "error" in chunk:
            raise StreamFault("the stream sent an error event", error_body=data)
        self._model = _text_of(chunk.get("model")) or self._model
        self._id = _text_of(chunk.get("id")) or self._id
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._input_tokens = _count(usage.get("prompt_tokens")) or self._input_tokens
            self._output_tokens = _count(usage.get("completion_tokens")) or self._output_tokens
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return []
        out: list[Delta] = []
        for choice in choices:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                out.extend(self._choice(choice))
        return out

    def _choice(self, choice: dict[str, Any]) -> list[Delta]:
        if choice.get("finish_reason"):
            self._finish = str(choice["finish_reason"])
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return []
        out: list[Delta] = []
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._text.append(content)
            out.append(TextDelta(content))
        refusal = delta.get("refusal")
        if isinstance(refusal, str):
            self._refusal.append(refusal)
        for piece in delta.get("tool_calls") or []:
            if isinstance(piece, dict):
                out.append(self._tool_piece(piece))
        return out

    def _tool_piece(self, piece: dict[str, Any]) -> ToolCallDelta:
        wire_index = piece.get("index", 0)
        key = wire_index if isinstance(wire_index, int) else 0
        call = self._calls.setdefault(key, _Call())
        function = piece.get("function")
        function = function if isinstance(function, dict) else {}
        new_id = "" if call.id else _text_of(piece.get("id"))  # each is sent once, when first known
        new_name = "" if call.name else _text_of(function.get("name"))
        call.id = call.id or new_id
        call.name = call.name or new_name
        fragment = _text_of(function.get("arguments"))
        call.arguments.append(fragment)
        return ToolCallDelta(list(self._calls).index(key), new_id, new_name, fragment)

    def reply(self) -> ChatReply | None:
        if self._finish is None:
            return None
        calls = [ToolCall(c.id, c.name, "".join(c.arguments) or "{}") for c in self._calls.values()]
        return ChatReply(
            text="".join(self._text),
            tool_calls=calls,
            finish=_FINISH.get(self._finish, FinishReason.UNSPECIFIED),
            raw_finish=self._finish,
            refusal="".join(self._refusal) or None,
            input_tokens=self._input_tokens,
            output_tokens=self._output_tokens,
            response_model=self._model,
            response_id=self._id,
        )


def _text_of(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _message(m: Message) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if m.role == Role.ASSISTANT:
        msg: dict[str, Any] = {"role": "assistant", "content": m.text or None}
        if m.tool_calls:
            msg["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json or "{}"}}
                for c in m.tool_calls
            ]
        return [msg]
    for r in m.tool_results:
        content = TOOL_ERROR_PREFIX + r.content if r.is_error else r.content
        out.append({"role": "tool", "tool_call_id": r.call_id, "content": content})
    if m.text or not m.tool_results:
        out.append({"role": "user", "content": m.text})
    return out


# ---------------------------------------------------------------------------- requests read back


def parse_request(body: Mapping[str, Any]) -> ModelRequest:
    """An OpenAI Chat Completions request as the core's ModelRequest (the module's table)."""
    model = body.get("model")
    if not isinstance(model, str):
        raise InvalidInput("model", shown(model), "must be the model's name (a string)")
    system: list[str] = []
    messages: list[Message] = []
    results: list[ToolCallResult] = []
    names: dict[str, str] = {}
    for i, m in enumerate(object_list(body, "messages", required=True)):
        role = m.get("role")
        where = f"messages[{i}]"
        if role != "tool" and results:
            messages.append(Message(Role.TOOL, tool_results=tuple(results)))
            results = []
        if role in ("system", "developer"):
            system.append(_text(m.get("content"), f"{where}.content"))
        elif role == "user":
            messages.append(Message(Role.USER, _text(m.get("content"), f"{where}.content")))
        elif role == "assistant":
            calls = tuple(_call(c, f"{where}.tool_calls[{j}]") for j, c in enumerate(object_list(m, "tool_calls")))
            names.update((c.id, c.name) for c in calls)
            messages.append(Message(Role.ASSISTANT, _text(m.get("content"), f"{where}.content"), calls))
        elif role == "tool":
            content = _text(m.get("content"), f"{where}.content")
            error = content.startswith(TOOL_ERROR_PREFIX)
            call_id = str(m.get("tool_call_id") or "")
            content = content.removeprefix(TOOL_ERROR_PREFIX) if error else content
            results.append(ToolCallResult(call_id, content, error, names.get(call_id, "")))
        else:
            raise InvalidInput(f"{where}.role", shown(role), "must be system, developer, user, assistant or tool")
    if results:
        messages.append(Message(Role.TOOL, tool_results=tuple(results)))
    max_tokens = number_field(body, "max_tokens", int)
    if max_tokens is None:
        max_tokens = number_field(body, "max_completion_tokens", int)
    return ModelRequest(
        model=model,
        messages=tuple(messages),
        system="\n\n".join(system),
        tools=tuple(_tool(t, f"tools[{i}]") for i, t in enumerate(object_list(body, "tools"))),
        response_schema_json=_response_schema(body.get("response_format")),
        max_output_tokens=max_tokens,
        temperature=number_field(body, "temperature", float),
    )


def _text(content: Any, where: str) -> str:
    """A message's content: a string, null, or a list of text parts (joined)."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise InvalidInput(where, shown(content), "must be a string or a list of text parts")
    parts = []
    for j, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
            kind = part.get("type") if isinstance(part, dict) else part
            raise InvalidInput(f"{where}[{j}]", shown(kind), "must be a text part (the sidecar carries text only)")
        parts.append(part["text"])
    return "".join(parts)


def _call(c: dict[str, Any], where: str) -> ToolCall:
    function = c.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise InvalidInput(f"{where}.function", shown(function), "must name the function called")
    arguments = function.get("arguments")
    text = arguments if isinstance(arguments, str) else compact_json(arguments if arguments is not None else {})
    return ToolCall(str(c.get("id") or ""), function["name"], text)


def _tool(t: dict[str, Any], where: str) -> ToolDefinition:
    function = t.get("function")
    if t.get("type", "function") != "function" or not isinstance(function, dict):
        raise InvalidInput(where, shown(t.get("type")), 'must be {"type": "function", "function": {...}}')
    name = function.get("name")
    if not isinstance(name, str):
        raise InvalidInput(f"{where}.function.name", shown(name), "must be the tool's name")
    parameters = function.get("parameters")
    params = "" if parameters is None else schema_text(parameters, f"{where}.function.parameters")
    return ToolDefinition(name, str(function.get("description") or ""), params)


def _response_schema(fmt: Any) -> str:
    if fmt is None:
        return ""
    if not isinstance(fmt, dict):
        raise InvalidInput("response_format", shown(fmt), "must be an object")
    kind = fmt.get("type")
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        return schema_text(schema, "response_format.json_schema.schema")
    if kind == "json_object":
        return compact_json({"type": "object"})
    if kind in (None, "text"):
        return ""
    raise InvalidInput("response_format.type", shown(kind), "must be text, json_object or json_schema")


# ---------------------------------------------------------------------------- answers rendered (the HTTP front)

_FINISH_NAMES = {
    FinishReason.STOP: "stop",
    FinishReason.LENGTH: "length",
    FinishReason.TOOL_CALLS: "tool_calls",
    FinishReason.CONTENT_FILTER: "content_filter",
}


def finish_name(response: ModelResponse) -> str:
    """The reply's ``finish_reason``: ``tool_calls`` whenever it calls a tool."""
    if response.message.tool_calls:
        return "tool_calls"
    return _FINISH_NAMES.get(response.finish_reason, "stop")


def _content(response: ModelResponse) -> str | None:
    if response.parsed is not None:
        return compact_json(response.parsed)
    return response.message.text or (None if response.message.tool_calls else "")


def _usage(usage: Usage) -> dict[str, int]:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


def render_response(
    response: ModelResponse, *, response_id: str, created: int, model: str, extension: Mapping[str, Any]
) -> dict[str, Any]:
    """A whole reply as a ``chat.completion`` object; ``extension`` rides along as ``sidecar``."""
    message: dict[str, Any] = {"role": "assistant", "content": _content(response), "refusal": None}
    if response.message.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json or "{}"}}
            for c in response.message.tool_calls
        ]
    return {
        "id": response_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_name(response)}],
        "usage": _usage(response.usage),
        "system_fingerprint": None,
        "sidecar": dict(extension),
    }


class ChunkWriter:
    """One streamed reply as ``chat.completion.chunk`` objects (the module's table)."""

    def __init__(self, *, response_id: str, created: int, model: str) -> None:
        self._head = {"id": response_id, "object": "chat.completion.chunk", "created": created, "model": model}
        self._started: set[int] = set()
        """Tool calls whose first fragment (id, type, name) went out."""

    def _chunk(self, choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return {**self._head, "choices": choices, **extra}

    def role(self) -> dict[str, Any]:
        """The first chunk: the assistant's role, no content yet."""
        return self._chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])

    def delta(self, delta: Delta) -> dict[str, Any]:
        if isinstance(delta, TextDelta):
            return self._chunk([{"index": 0, "delta": {"content": delta.text}, "finish_reason": None}])
        piece: dict[str, Any] = {"index": delta.index, "function": {"arguments": delta.arguments_fragment}}
        if delta.index not in self._started:
            self._started.add(delta.index)
            piece["id"] = delta.id
            piece["type"] = "function"
            piece["function"]["name"] = delta.name
        return self._chunk([{"index": 0, "delta": {"tool_calls": [piece]}, "finish_reason": None}])

    def restarted(self) -> None:
        """A new reply follows (a restart): its tool calls start afresh."""
        self._started.clear()

    def finish(self, response: ModelResponse, **extra: Any) -> dict[str, Any]:
        return self._chunk([{"index": 0, "delta": {}, "finish_reason": finish_name(response)}], **extra)

    def usage(self, response: ModelResponse, **extra: Any) -> dict[str, Any]:
        return self._chunk([], usage=_usage(response.usage), **extra)

    def extension(self, **extra: Any) -> dict[str, Any]:
        """A chunk with no choices carrying only ``extra`` (clients skip a chunk with empty choices)."""
        return self._chunk([], **extra)


def render_error(message: str, kind: str, code: str | None, param: str | None = None, **extra: Any) -> dict[str, Any]:
    """OpenAI's error body: ``{"error": {"message", "type", "param", "code", ...extra}}``."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code, **extra}}
