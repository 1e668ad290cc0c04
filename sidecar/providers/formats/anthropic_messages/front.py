"""The Anthropic Messages front: a caller's request read (``request.parse_request``), the answer rendered
(whole, streamed, failed).

``render``, ``writer`` and ``error_body`` answer in the format (``shapes.MessageReply``)::

    core                                        Anthropic answer
    ChatReply                                   a message: its content blocks, stop_reason, usage
      reasoning                                 thinking / redacted_thinking blocks first, as they came
      text                                      a text block (a refusal: its explanation); none when empty
      tool calls                                tool_use blocks (arguments not JSON: input {"_raw"})
      stop_reason                               tool_use when it calls a tool (unless cut off or filtered);
                                                the provider's own when it is Anthropic's (stop_sequence,
                                                pause_turn ...), else end_turn / max_tokens / refusal
      usage                                     input_tokens without the cache's (Anthropic's count), the
                                                cache's read and write, reasoning tokens as thinking_tokens
                                                (each of those three only when not 0)
    a stream                                    message_start, then blocks in order:
      ReasoningDelta                            content_block_start thinking (redacted_thinking with its
                                                data) on a part's first delta; thinking_delta for text,
                                                signature_delta for the signature
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

from collections.abc import Mapping
from typing import Any, cast

from sidecar.core.kinds import FinishReason
from sidecar.core.stream import Delta, ReasoningDelta, TextDelta
from sidecar.providers.formats.anthropic_messages import shapes
from sidecar.providers.formats.anthropic_messages.request import parse_request
from sidecar.providers.formats.anthropic_messages.shapes import MessageReply, ReplyBlock
from sidecar.providers.formats.anthropic_messages.vocab import (
    API_KEY_HEADER,
    ERROR_TYPES,
    FINISH,
    FINISH_NAMES,
    reasoning_block,
)
from sidecar.providers.formats.arguments import arguments_value
from sidecar.providers.formats.chat import ChatReply
from sidecar.providers.formats.protocol import Ask, ParamNames, ReplyHead, Sse

__all__ = ["MESSAGES_ROUTE", "RESTART_EVENT", "AnthropicFront", "EventWriter", "parse_request", "stop_reason"]

MESSAGES_ROUTE = "/v1/messages"
RESTART_EVENT = "sidecar_restart"

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
_PARAMS: ParamNames = {
    "max_output_tokens": "max_tokens",
    "tools[].name": "tools[].name",
    "tools[].parameters_json": "tools[].input_schema",
    "tools[].cache": "tools[].cache_control",
    "tools[].strict": "tools[].strict",
    "response_schema_json": "output_config.format.schema",
    "reasoning": "thinking",
    "reasoning.budget_tokens": "thinking.budget_tokens",
    "reasoning.effort": "output_config.effort",
    "tool_choice.mode": "tool_choice.type",
    "tool_choice.name": "tool_choice.name",
    "parallel_tool_calls": "tool_choice.disable_parallel_tool_use",
    "stop": "stop_sequences",
    "stop[]": "stop_sequences[]",
    "end_user": "metadata.user_id",
    "system_cache": "system",
}
"""The core's parameters by the names this front's callers send (``ParamNames``)."""


class AnthropicFront:
    """The Anthropic Messages format as a provider speaks it (the module's tables)."""

    path = MESSAGES_ROUTE
    words = "an Anthropic-compatible"
    id_prefix = "msg_"
    params = _PARAMS

    def parse(self, body: dict[str, Any]) -> Ask:
        return Ask(parse_request(body), body.get("stream") is True)

    def render(self, reply: ChatReply, head: ReplyHead, extension: Mapping[str, Any] | None = None) -> dict[str, Any]:
        text = reply.text or reply.refusal or ""  # a refusal is its explanation, as text
        content: list[ReplyBlock] = [reasoning_block(r) for r in reply.reasoning]
        if text:
            content.append({"type": "text", "text": text})
        content += [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": arguments_value(c.arguments_json)}
            for c in reply.tool_calls
        ]
        out: MessageReply = {
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
        return cast("dict[str, Any]", out)  # the protocol's plain JSON object

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
        if param is not None:
            error["param"] = param  # the field at fault, as OpenAI's error names it (Anthropic's has none)
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
    if FINISH.get(reply.raw_finish) is reply.finish and reply.finish is not FinishReason.TOOL_CALLS:
        return reply.raw_finish  # the provider's own words, when they are Anthropic's (stop_sequence ...)
    return FINISH_NAMES.get(reply.finish, "end_turn")


def _usage(reply: ChatReply) -> shapes.UsageReply:
    """Anthropic's usage: input_tokens without the cache's (the core's input_tokens counts them all); the
    cache's and the thinking's counts when there are any."""
    cached = reply.cache_read_input_tokens + reply.cache_write_input_tokens
    usage: shapes.UsageReply = {
        "input_tokens": max(reply.input_tokens - cached, 0),
        "output_tokens": reply.output_tokens,
    }
    if cached:
        usage["cache_creation_input_tokens"] = reply.cache_write_input_tokens
        usage["cache_read_input_tokens"] = reply.cache_read_input_tokens
    if reply.reasoning_tokens:
        usage["output_tokens_details"] = {"thinking_tokens": reply.reasoning_tokens}
    return usage


def _event(kind: str, **fields: Any) -> Sse:
    return (kind, {"type": kind, **fields})


class EventWriter:
    """One streamed reply as Messages events (the module's table)."""

    def __init__(self, head: ReplyHead) -> None:
        self._head = head
        self._index = -1
        """The content block open now (-1: none yet)."""
        self._open: tuple[str, int] | None = None
        """What that block is: ("text", 0), ("call", index), ("reasoning", index); None when it is closed."""
        self._started: set[tuple[str, int]] = set()

    def start(self, input_tokens: int = 0) -> list[Sse]:
        message: MessageReply = {
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
        if self._open is None:
            return []
        self._open = None
        return [_event("content_block_stop", index=self._index)]

    def _begin(self, block: ReplyBlock, what: tuple[str, int]) -> list[Sse]:
        out = self._close()
        self._index += 1
        self._open = what
        self._started.add(what)
        out.append(_event("content_block_start", index=self._index, content_block=block))
        return out

    def _delta(self, body: shapes.BlockDelta) -> Sse:
        return _event("content_block_delta", index=self._index, delta=body)

    def delta(self, delta: Delta) -> list[Sse]:
        if isinstance(delta, ReasoningDelta):
            return self._reasoning(delta)
        out: list[Sse] = []
        if isinstance(delta, TextDelta):
            if self._open is None or self._open[0] != "text":
                out += self._begin({"type": "text", "text": ""}, ("text", 0))
            return [*out, self._delta({"type": "text_delta", "text": delta.text})]
        what = ("call", delta.index)
        if what not in self._started or self._open != what:
            out += self._begin({"type": "tool_use", "id": delta.id, "name": delta.name, "input": {}}, what)
        if delta.arguments_fragment:
            out.append(self._delta({"type": "input_json_delta", "partial_json": delta.arguments_fragment}))
        return out

    def _reasoning(self, delta: ReasoningDelta) -> list[Sse]:
        what = ("reasoning", delta.index)
        if delta.redacted_data:
            return self._begin({"type": "redacted_thinking", "data": delta.redacted_data}, what)
        out = [] if self._open == what else self._begin({"type": "thinking", "thinking": "", "signature": ""}, what)
        if delta.text:
            out.append(self._delta({"type": "thinking_delta", "thinking": delta.text}))
        if delta.signature:
            out.append(self._delta({"type": "signature_delta", "signature": delta.signature}))
        return out

    def refusal(self, text: str) -> list[Sse]:
        return self.delta(TextDelta(text))  # Anthropic streams a refusal as text

    def restarted(self, words: Mapping[str, Any]) -> list[Sse]:
        self._index, self._open = -1, None  # a new reply follows: its blocks are numbered from 0 again
        self._started.clear()
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
