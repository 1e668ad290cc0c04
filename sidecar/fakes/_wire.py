"""A provider wire format as the fake speaks it: the format's front half, and the fake's own parts.

What the format says (how a request reads, how a reply, a stream and an error look) is the
format's ``Front`` (``providers.formats``), the very reader and renderers of the sidecar's HTTP
doors; a ``Wire`` adds only what makes a provider a fake one: its ids, its error presets' words,
its rate-limit headers, where a stream's events fall (``part_of``, for the stream faults) and
the events a client must skip (``unknown_events``).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sidecar.core.conversation import ToolCall as CoreToolCall
from sidecar.core.kinds import FinishReason
from sidecar.core.stream import TextDelta, ToolCallDelta
from sidecar.providers.formats.chat import ChatReply
from sidecar.providers.formats.protocol import Front, ReplyHead, Sse, StreamWriter

from ._brain import Reply, tokens_for
from ._conversation import Conversation, Hints, conversation_of
from ._http import Request
from ._limits import Taken
from ._sse import Part, Plan, SseEvent

__all__ = ["BAD_GATEWAY_HTML", "FILTER_CATEGORIES", "USAGE_FIELDS", "ErrorSpec", "Exchange", "Wire", "mask_key"]

BAD_GATEWAY_HTML = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>cloudflare</center>\r\n"
    "</body>\r\n</html>\r\n"
)
FINGERPRINT = "fp_fake"

_FINISH = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "tool_calls": FinishReason.TOOL_CALLS,
    "content_filter": FinishReason.CONTENT_FILTER,
    "refusal": FinishReason.CONTENT_FILTER,
}
"""The brain's neutral finish as the core's (a refusal is one with its explanation)."""


@dataclass(frozen=True)
class ErrorSpec:
    status: int
    type: str
    message: str
    code: str | None = None
    param: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    """More fields of the error object, as the provider sends them (Azure's ``innererror``)."""


@dataclass(frozen=True)
class Exchange:
    """Facts about the request being answered that renderers need."""

    n: int  # sequence number, for deterministic ids
    model: str
    api_key: str
    conversation: Conversation
    usage: Mapping[str, int] = field(default_factory=dict)
    """The step's ``usage`` (``USAGE_FIELDS``): cache and reasoning tokens the reply reports."""
    prompt_cache: set[str] = field(default_factory=set)
    """The provider's prompt cache: the prefixes it has seen (a wire that caches keeps its own keys here)."""
    categories: tuple[str, ...] = ()
    """The step's ``categories``: what a content filter flagged (``FILTER_CATEGORIES``), for the wires that say."""


FILTER_CATEGORIES = ("hate", "jailbreak", "self_harm", "sexual", "violence")
"""The categories of Azure OpenAI's content filter a step's ``categories`` may name."""

USAGE_FIELDS = ("cache_read_input_tokens", "cache_write_input_tokens", "reasoning_tokens")
"""What a step's ``usage`` may say: the reply reports that many tokens read from and written to the prompt
cache (within its input tokens, raised to hold them) and reasoned (added to its output tokens)."""


def mask_key(key: str) -> str:
    """Mask an API key the way OpenAI echoes it back: ``sk-a***********wxyz``."""
    if len(key) <= 8:
        return "***"
    return key[:4] + "*" * (len(key) - 8) + key[-4:]


class Wire(ABC):
    """A format the fake provider speaks: its front half (``front``) and the fake's parts."""

    name: str
    front: Front
    reply_prefix: str
    """The fake's reply ids: this, then the request's number (``chatcmpl-fake00000001``)."""
    call_prefix: str
    """The fake's tool call ids: this, the request's number, the call's index."""
    stream_content_type = "text/event-stream; charset=utf-8"
    """What a stream of the format comes as (``encode`` writes each event so)."""

    # ---- what the format says, through its front ------------------------------------------

    def refuse(self, body: dict[str, Any]) -> ErrorSpec | None:
        """The 400 the provider answers a request with that breaks one of its API's rules, in its words;
        None when it breaks none of those this wire checks (what the format cannot read at all
        ``parse`` refuses)."""
        return None

    def gate(self, request: Request) -> ErrorSpec | None:
        """The error the provider answers a request with before reading its body (a missing key, a URL it
        does not serve); None to read it."""
        return None

    def budget_headers(self, taken: Taken, now: datetime) -> dict[str, str]:
        """The headers that tell a request limit's budget (``FakeProvider.limit_requests``) in the format's
        words; none for a format that tells none."""
        return {}

    def routed(self, path: str, body: Any) -> dict[str, Any] | None:
        """For a format whose URL says what the body does not (Gemini's model and streaming): the body with
        it, when ``path`` is one of the format's routes; None otherwise (the route is ``front.path``)."""
        return None

    def unauthorized(self, request: Request) -> ErrorSpec | None:
        """The 401/403 the provider answers a request whose credentials do not hold (a signature that does
        not verify); None for one it lets through (the fakes take any key)."""
        return None

    def encode(self, event: SseEvent) -> bytes:
        """One event as the format frames it on the wire (server-sent events: ``SseEvent.encode``)."""
        return event.encode()

    def error_headers(self, spec: ErrorSpec) -> dict[str, str]:
        """Headers an error answer carries beyond ``headers`` (Bedrock's ``x-amzn-ErrorType``)."""
        return {}

    def blocked_stream(self, body: dict[str, Any], ex: Exchange) -> list[SseEvent]:
        """A block that answers 200 (``error_body`` of a status below 400), asked for as a stream: its events."""
        return [self.stream_error(body, ex)]

    def parse(self, body: dict[str, Any]) -> Conversation:
        """The request, read as the format reads it (INVALID_INPUT raised for what it cannot carry)."""
        hints, rest = self.hints(body)
        return conversation_of(self.front.parse(rest), hints, body.get("tools"))

    def api_key(self, headers: dict[str, str]) -> str:
        return self.front.api_key(headers)

    def head(self, ex: Exchange, created: int) -> ReplyHead:
        return ReplyHead(f"{self.reply_prefix}{ex.n:08d}", ex.model, created, FINGERPRINT)

    def chat_reply(self, reply: Reply, ex: Exchange, input_tokens: int, output_tokens: int) -> ChatReply:
        """The brain's reply as the core's (its calls numbered with the fake's ids)."""
        calls = [
            CoreToolCall(f"{self.call_prefix}{ex.n:08d}_{i}", c.name, c.arguments_json())
            for i, c in enumerate(reply.tool_calls)
        ]
        cache_read, cache_write, reasoning = (ex.usage.get(name, 0) for name in USAGE_FIELDS)
        return ChatReply(
            text=reply.text or "",
            tool_calls=calls,
            finish=_FINISH[reply.finish],
            raw_finish=reply.finish,
            refusal=reply.refusal,
            input_tokens=max(input_tokens, cache_read + cache_write),
            output_tokens=output_tokens + reasoning,
            response_model=ex.model,
            cache_read_input_tokens=cache_read,
            cache_write_input_tokens=cache_write,
            reasoning_tokens=reasoning,
        )

    def reply_body(self, reply: Reply, ex: Exchange, created: int) -> dict[str, Any]:
        prompt, completion = tokens_for(ex.conversation.input_chars), tokens_for(reply.output_chars())
        return self.front.render(self.chat_reply(reply, ex, prompt, completion), self.head(ex, created))

    def error_body(self, spec: ErrorSpec, ex: Exchange, *, in_stream: bool = False) -> dict[str, Any]:
        request_id = None if in_stream else f"req_fake{ex.n:08d}"
        body = self.front.error_body(spec.message, spec.type, code=spec.code, param=spec.param, request_id=request_id)
        self.error_fields(body).update(spec.extra)
        return body

    @staticmethod
    def error_fields(body: dict[str, Any]) -> dict[str, Any]:
        """The object inside an error body where extra error fields are merged."""
        inner = body.get("error")
        return inner if isinstance(inner, dict) else body

    def stream_events(self, plan: Plan, ex: Exchange, created: int) -> list[SseEvent]:
        """The whole reply as server-sent events, tagged with their part (see :mod:`._sse`)."""
        reply = plan.reply
        writer = self.front.writer(self.head(ex, created), include_usage=ex.conversation.include_usage)
        events: list[Sse] = writer.start(plan.input_tokens)
        events += self.piece_events(writer, plan, ex)
        events += writer.final(self.chat_reply(reply, ex, plan.input_tokens, plan.output_tokens))
        return self.tagged(events)

    def piece_events(self, writer: StreamWriter, plan: Plan, ex: Exchange) -> list[Sse]:
        """The plan's pieces (text, a refusal, a tool call's name and its argument fragments) as ``writer``'s events."""
        events: list[Sse] = []
        for piece in plan.pieces:
            if piece.kind == "text":
                events += writer.delta(TextDelta(piece.text))
            elif piece.kind == "refusal":
                events += writer.refusal(piece.text)
            elif piece.kind == "tool":
                call_id = f"{self.call_prefix}{ex.n:08d}_{piece.index}"
                events += writer.delta(ToolCallDelta(piece.index, call_id, piece.text, ""))
            else:
                events += writer.delta(ToolCallDelta(piece.index, "", "", piece.text))
        return events

    def stream_error(self, body: dict[str, Any], ex: Exchange) -> SseEvent:
        """An error object (``error_body(..., in_stream=True)``) sent after the stream began (with HTTP 200)."""
        [(name, data)] = self.front.writer(self.head(ex, 0)).error(body)
        return SseEvent.of(data, name or None)

    def tagged(self, events: list[Sse]) -> list[SseEvent]:
        out = []
        for name, data in events:
            text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
            out.append(SseEvent(text, name or None, self.part_of(name, data)))
        return out

    # ---- what makes the provider a fake one ------------------------------------------------

    @abstractmethod
    def hints(self, body: dict[str, Any]) -> tuple[Hints, dict[str, Any]]:
        """What the brain follows that the core's request does not carry, and the body without it."""

    @abstractmethod
    def part_of(self, name: str, data: dict[str, Any] | str) -> Part:
        """Which part of the stream an event of the format is (``_sse``)."""

    @abstractmethod
    def preset_error(self, preset: str, ex: Exchange) -> ErrorSpec | None:
        """The error a preset stands for on this wire; ``None`` if not an error preset."""

    @abstractmethod
    def status_error(self, status: int) -> ErrorSpec:
        """A plausible error for a bare status code."""

    @abstractmethod
    def headers(self, ex: Exchange, status: int) -> dict[str, str]:
        """Request-id and rate-limit headers for a response with ``status``."""

    @abstractmethod
    def unknown_events(self, ex: Exchange) -> list[SseEvent]:
        """Events of a kind a client must skip: what a newer API version might add."""
