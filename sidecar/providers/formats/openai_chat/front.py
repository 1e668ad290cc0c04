"""The OpenAI Chat Completions front: a caller's request read, the answer rendered (whole, streamed, failed).

``OpenAIFront.parse`` reads a request into the core's (the inverse of ``upstream.OpenAIUpstream.body``)::

    request key                    what is read
    model                          the model id asked for (a catalog model or a route)
    messages                       system / developer -> system (joined); user, assistant (content, tool_calls),
                                   tool (tool_call_id, content: TOOL_ERROR_PREFIX marks an error); a message's
                                   content is a string, null, or a list of text parts (joined)
    tools                          [{"type": "function", "function": {name, description, parameters}}]
    response_format                json_schema -> its schema; json_object -> {"type": "object"}; text: none
    max_tokens /                   the output budget (at least 1)
      max_completion_tokens
    temperature                    temperature
    stream, stream_options         a streamed answer; include_usage: the usage chunk before [DONE]
      .include_usage
    n                              1 only (one choice): anything else is INVALID_INPUT
    tool_choice                    absent or "auto" (the model chooses): anything else is INVALID_INPUT
    anything else                  (top_p, seed, stop, user, parallel_tool_calls ...) not carried, ignored

Content other than text is INVALID_INPUT naming the part.

``render``, ``writer`` and ``error_body`` answer in the format::

    core                                        OpenAI answer
    ChatReply                                   {"object": "chat.completion", "choices": [{"message": {"role":
                                                "assistant", "content", "refusal", "tool_calls"}, "finish_reason"}],
                                                "usage", "system_fingerprint"}
      text                                      content (null when there is none and the reply is tool calls,
                                                a refusal, or filtered)
      finish_reason                             tool_calls when it calls a tool (unless cut off or filtered),
                                                else stop / length / content_filter; a refusal is stop
      usage                                     prompt_tokens / completion_tokens / total_tokens
    a stream                                    "chat.completion.chunk" events: the role first, then
      TextDelta, refusal                        {"delta": {"content": text}}, {"delta": {"refusal": text}}
      ToolCallDelta                             {"delta": {"tool_calls": [{"index", "id", "type", "function":
                                                {"name", "arguments"}}]}} (id, type and name on the first fragment)
      the end                                   {"delta": {}, "finish_reason"}, then, when include_usage was asked,
                                                {"choices": [], "usage"} (every chunk before it: "usage": null);
                                                ``[DONE]`` last
      the sidecar's restart                     a chunk with empty ``choices`` and ``sidecar.restart``
    a failure                                   {"error": {"message", "type", "param", "code"}}; in a stream,
                                                the same object as a data event, and no [DONE]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sidecar.core.conversation import Message, ModelRequest, ToolCall, ToolCallResult, ToolDefinition
from sidecar.core.kinds import FinishReason, Role
from sidecar.core.stream import Delta, ReasoningDelta, TextDelta
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.formats.chat import ChatReply, compact_json
from sidecar.providers.formats.fields import (
    bool_field,
    number_field,
    object_list,
    positive_budget,
    schema_text,
    shown,
)
from sidecar.providers.formats.openai_chat.vocab import (
    END_MARKER,
    ERROR_TYPES,
    FINISH_NAMES,
    TOOL_ERROR_PREFIX,
    api_key_of,
)
from sidecar.providers.formats.protocol import Ask, ReplyHead, Sse

__all__ = ["CHAT_ROUTE", "ChunkWriter", "OpenAIFront", "finish_name", "parse_request"]

CHAT_ROUTE = "/v1/chat/completions"

_INVALID = "invalid_request_error"
_SERVER = "server_error"
_TYPES: Mapping[str, str] = {
    "invalid_value": _INVALID,
    "context_length_exceeded": _INVALID,
    "content_policy_violation": _INVALID,
    "output_truncated": _INVALID,
    "model_not_found": _INVALID,
    "resource_not_found": _INVALID,
    "permission_denied": "permission_error",
    "insufficient_quota": "insufficient_quota",
    "spend_cap_exceeded": "insufficient_quota",
    "rate_limit_exceeded": "rate_limit_error",
    "deadline_exceeded": "timeout",
    "cancelled": "cancelled",
}
"""``error.type`` of a sidecar failure by its code (``server/http/failures.py``); every other code: server_error."""


class OpenAIFront:
    """The OpenAI Chat Completions format as a provider speaks it (the module's tables)."""

    path = CHAT_ROUTE
    words = "an OpenAI-compatible"
    id_prefix = "chatcmpl-"

    def parse(self, body: dict[str, Any]) -> Ask:
        request = parse_request(body)
        positive_budget(request, "max_tokens" if body.get("max_tokens") is not None else "max_completion_tokens")
        stream = bool_field(body, "stream")
        choices = body.get("n")
        if choices not in (None, 1):
            raise InvalidInput("n", shown(choices), "must be 1 (the sidecar answers with one choice)")
        choice = body.get("tool_choice")
        if choice not in (None, "auto"):
            raise InvalidInput("tool_choice", shown(choice), 'must be "auto": the sidecar lets the model choose')
        options = body.get("stream_options")
        include_usage = stream and isinstance(options, dict) and options.get("include_usage") is True
        return Ask(request, stream, include_usage)

    def render(self, reply: ChatReply, head: ReplyHead, extension: Mapping[str, Any] | None = None) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": _content(reply),
            "refusal": reply.refusal,
            "annotations": [],
        }
        if reply.tool_calls:
            message["tool_calls"] = [_call(c) for c in reply.tool_calls]
        out: dict[str, Any] = {
            "id": head.reply_id,
            "object": "chat.completion",
            "created": head.created,
            "model": head.model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_name(reply)}],
            "usage": _usage(reply),
            "system_fingerprint": head.fingerprint,
        }
        if extension is not None:
            out["sidecar"] = dict(extension)
        return out

    def writer(self, head: ReplyHead, *, include_usage: bool = False) -> ChunkWriter:
        return ChunkWriter(head, include_usage=include_usage)

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
        error: dict[str, Any] = {"message": message, "type": error_type, "param": param, "code": code}
        if extension is not None:
            error["sidecar"] = dict(extension)
        return {"error": error}

    def answer(self, code: str, status: int) -> tuple[int, str]:
        return status, _TYPES.get(code, _SERVER)

    def error_type(self, status: int) -> str:
        return ERROR_TYPES.get(status, (_SERVER if status >= 500 else _INVALID, None))[0]

    def api_key(self, headers: Mapping[str, str]) -> str:
        return api_key_of(headers)


def finish_name(reply: ChatReply) -> str:
    """The reply's ``finish_reason``: ``tool_calls`` whenever it calls a tool and was neither cut nor filtered;
    a refusal is ``stop``."""
    if reply.refusal is not None:
        return "stop"
    if reply.tool_calls and reply.finish not in (FinishReason.LENGTH, FinishReason.CONTENT_FILTER):
        return "tool_calls"
    return FINISH_NAMES.get(reply.finish, "stop")


def _content(reply: ChatReply) -> str | None:
    """The text; null when there is none and the reply is tool calls, a refusal, or filtered."""
    nothing = reply.tool_calls or reply.refusal is not None or reply.finish is FinishReason.CONTENT_FILTER
    return reply.text or (None if nothing else "")


def _call(c: ToolCall) -> dict[str, Any]:
    return {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json or "{}"}}


def _usage(reply: ChatReply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


class ChunkWriter:
    """One streamed reply as ``chat.completion.chunk`` objects (the module's table)."""

    def __init__(self, head: ReplyHead, *, include_usage: bool = False) -> None:
        self._head: dict[str, Any] = {
            "id": head.reply_id,
            "object": "chat.completion.chunk",
            "created": head.created,
            "model": head.model,
            "system_fingerprint": head.fingerprint,
        }
        if include_usage:
            self._head["usage"] = None  # on every chunk but the usage one, as the API sends them
        self._usage = include_usage
        self._started: set[int] = set()
        """Tool calls whose first fragment (id, type, name) went out."""

    def _chunk(self, choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return {**self._head, "choices": choices, **extra}

    def _choice(self, delta: dict[str, Any], finish: str | None = None) -> Sse:
        return ("", self._chunk([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]))

    def start(self, input_tokens: int = 0) -> list[Sse]:
        """The first chunk: the assistant's role, no content yet."""
        return [self._choice({"role": "assistant", "content": "", "refusal": None})]

    def delta(self, delta: Delta) -> list[Sse]:
        if isinstance(delta, ReasoningDelta):
            return []  # issue 21: not yet rendered by this front
        if isinstance(delta, TextDelta):
            return [self._choice({"content": delta.text})]
        piece: dict[str, Any] = {"index": delta.index, "function": {"arguments": delta.arguments_fragment}}
        if delta.index not in self._started:
            self._started.add(delta.index)
            function = {"name": delta.name, "arguments": delta.arguments_fragment}
            piece = {"index": delta.index, "id": delta.id, "type": "function", "function": function}
        return [self._choice({"tool_calls": [piece]})]

    def refusal(self, text: str) -> list[Sse]:
        return [self._choice({"refusal": text})]

    def restarted(self, words: Mapping[str, Any]) -> list[Sse]:
        self._started.clear()  # a new reply follows: its tool calls start afresh
        return [("", self._chunk([], sidecar={"restart": dict(words)}))]

    def final(self, reply: ChatReply, extension: Mapping[str, Any] | None = None) -> list[Sse]:
        extra = {} if extension is None else {"sidecar": dict(extension)}
        choice = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish_name(reply)}
        if not self._usage:
            return [("", self._chunk([choice], **extra)), ("", END_MARKER)]
        usage = {**self._head, "choices": [], "usage": _usage(reply), **extra}
        return [("", self._chunk([choice])), ("", usage), ("", END_MARKER)]

    def error(self, body: dict[str, Any]) -> list[Sse]:
        return [("", body)]


# ---------------------------------------------------------------------------- requests read


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
            calls = tuple(_read_call(c, f"{where}.tool_calls[{j}]") for j, c in enumerate(object_list(m, "tool_calls")))
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


def _read_call(c: dict[str, Any], where: str) -> ToolCall:
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
