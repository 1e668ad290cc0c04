"""The OpenAI Chat Completions front: a caller's request read (``request.py``), the answer rendered.

``render``, ``writer`` and ``error_body`` answer in the format (``shapes.Completion``, ``shapes.Chunk``)::

    core                    OpenAI answer
    ChatReply.text          content: null when there is none and the reply is tool calls, a refusal or filtered
    finish                  tool_calls when it calls a tool (unless cut off or filtered), else stop / length /
                            content_filter; a refusal is stop
    usage                   prompt_tokens (cached included), completion_tokens (reasoning included),
                            prompt_tokens_details.cached_tokens, completion_tokens_details.reasoning_tokens
    reasoning               none: Chat Completions has no field for it, whole or streamed
    a stream                the role first; each TextDelta a content delta, a refusal a refusal delta, a
                            ToolCallDelta a tool_calls delta (id, type and name on a call's first fragment);
                            then the finish, the usage chunk when include_usage was asked ({"choices": [],
                            "usage"}; every chunk before it "usage": null), and ``[DONE]``
    the sidecar's restart   a chunk with empty ``choices`` and ``sidecar.restart``
    a failure               {"error": {"message", "type", "param", "code"}}; in a stream the same object as a
                            data event, and no [DONE]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from sidecar.core.conversation import (
    ToolCall,
)
from sidecar.core.kinds import FinishReason
from sidecar.core.stream import Delta, ReasoningDelta, TextDelta
from sidecar.providers.formats.chat import ChatReply
from sidecar.providers.formats.fields import positive_budget
from sidecar.providers.formats.openai_chat import shapes
from sidecar.providers.formats.openai_chat.request import REQUEST_KEYS, parse_request
from sidecar.providers.formats.openai_chat.vocab import (
    END_MARKER,
    ERROR_TYPES,
    FINISH_NAMES,
    api_key_of,
)
from sidecar.providers.formats.protocol import Ask, ParamNames, ReplyHead, Sse

__all__ = ["CHAT_ROUTE", "REQUEST_KEYS", "ChunkWriter", "OpenAIFront", "finish_name", "parse_request"]

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
_PARAMS: ParamNames = {
    "max_output_tokens": ("max_tokens", "max_completion_tokens"),
    "system": "messages",
    "system_cache": "messages",
    "tools[].name": "tools[].function.name",
    "tools[].parameters_json": "tools[].function.parameters",
    "tools[].strict": "tools[].function.strict",
    "tools[].cache": "tools[]",
    "response_schema_json": "response_format.json_schema.schema",
    "reasoning": "reasoning_effort",
    "tool_choice.mode": "tool_choice",
    "tool_choice.name": "tool_choice.function.name",
    "end_user": "user",
}
"""The core's parameters by the names this front's callers send (``ParamNames``)."""


class OpenAIFront:
    """The OpenAI Chat Completions format as a provider speaks it (the module's tables)."""

    path = CHAT_ROUTE
    words = "an OpenAI-compatible"
    id_prefix = "chatcmpl-"
    params = _PARAMS

    def parse(self, body: dict[str, Any]) -> Ask:
        request = parse_request(body)
        positive_budget(request, "max_tokens" if body.get("max_tokens") is not None else "max_completion_tokens")
        stream = body.get("stream") is True
        include_usage = (body.get("stream_options") or {}).get("include_usage") is True
        return Ask(request, stream, include_usage and stream)

    def render(self, reply: ChatReply, head: ReplyHead, extension: Mapping[str, Any] | None = None) -> dict[str, Any]:
        message: shapes.ReplyMessage = {
            "role": "assistant",
            "content": _content(reply),
            "refusal": reply.refusal,
            "annotations": [],
        }
        if reply.tool_calls:
            message["tool_calls"] = [_call(c) for c in reply.tool_calls]
        out: shapes.Completion = {
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
        return _wire(out)

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


def _wire(answer: shapes.Completion | shapes.Chunk) -> dict[str, Any]:
    """A declared answer as the plain JSON object the protocol hands on (the same object)."""
    return cast("dict[str, Any]", answer)


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


def _call(c: ToolCall) -> shapes.ReplyToolCall:
    return {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json or "{}"}}


def _usage(reply: ChatReply) -> shapes.Usage:
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
        "prompt_tokens_details": {"cached_tokens": reply.cache_read_input_tokens},
        "completion_tokens_details": {"reasoning_tokens": reply.reasoning_tokens},
    }


class ChunkWriter:
    """One streamed reply as ``chat.completion.chunk`` objects (the module's table)."""

    def __init__(self, head: ReplyHead, *, include_usage: bool = False) -> None:
        self._head = head
        self._usage = include_usage
        self._started: set[int] = set()
        """Tool calls whose first fragment (id, type, name) went out."""

    def _chunk(self, choices: list[shapes.ChunkChoice]) -> shapes.Chunk:
        head = self._head
        chunk: shapes.Chunk = {
            "id": head.reply_id,
            "object": "chat.completion.chunk",
            "created": head.created,
            "model": head.model,
            "system_fingerprint": head.fingerprint,
            "choices": choices,
        }
        if self._usage:
            chunk["usage"] = None  # on every chunk but the usage one, as the API sends them
        return chunk

    def _choice(self, delta: shapes.Delta, finish: str | None = None) -> Sse:
        return ("", _wire(self._chunk([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}])))

    def start(self, input_tokens: int = 0) -> list[Sse]:
        """The first chunk: the assistant's role, no content yet."""
        return [self._choice({"role": "assistant", "content": "", "refusal": None})]

    def delta(self, delta: Delta) -> list[Sse]:
        if isinstance(delta, ReasoningDelta):
            return []  # Chat Completions has no reasoning field, whole or streamed (the module's table)
        if isinstance(delta, TextDelta):
            return [self._choice({"content": delta.text})]
        piece: shapes.ChunkToolCall = {"index": delta.index, "function": {"arguments": delta.arguments_fragment}}
        if delta.index not in self._started:
            self._started.add(delta.index)
            function = {"name": delta.name, "arguments": delta.arguments_fragment}
            piece = {"index": delta.index, "id": delta.id, "type": "function", "function": function}
        return [self._choice({"tool_calls": [piece]})]

    def refusal(self, text: str) -> list[Sse]:
        return [self._choice({"refusal": text})]

    def restarted(self, words: Mapping[str, Any]) -> list[Sse]:
        self._started.clear()  # a new reply follows: its tool calls start afresh
        chunk = self._chunk([])
        chunk["sidecar"] = {"restart": dict(words)}
        return [("", _wire(chunk))]

    def final(self, reply: ChatReply, extension: Mapping[str, Any] | None = None) -> list[Sse]:
        last = self._chunk([{"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish_name(reply)}])
        if self._usage:
            out = [("", _wire(last))]
            last = self._chunk([])
            last["usage"] = _usage(reply)
        else:
            out = []
        if extension is not None:
            last["sidecar"] = dict(extension)
        return [*out, ("", _wire(last)), ("", END_MARKER)]

    def error(self, body: dict[str, Any]) -> list[Sse]:
        return [("", body)]
