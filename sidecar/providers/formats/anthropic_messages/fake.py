"""The Anthropic Messages wire as the fake provider speaks it (the format: ``formats.anthropic_messages``).

A stream (``"stream": true``) is named events, each with its ``type`` in the data too, each in its part::

    open   message_start        {"message": {..., "content": [], "stop_reason": null,
                                 "usage": {"input_tokens": N, "cache_*": N, "output_tokens": 1}}}
    body   content_block_start  {"index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}
    delta  content_block_delta  {"index": 0, "delta": {"type": "thinking_delta", "thinking": "..."}}
    delta  content_block_delta  {"index": 0, "delta": {"type": "signature_delta", "signature": "..."}}
    body   content_block_stop   {"index": 0}                  (those three with thinking on; redacted:
                                                               one content_block_start redacted_thinking {data})
    body   content_block_start  {"index": 1, "content_block": {"type": "text", "text": ""}}
    body   ping                 (once, after the first content_block_start; before the end when none)
    delta  content_block_delta  {"index": 1, "delta": {"type": "text_delta", "text": "..."}}
    body   content_block_stop   {"index": 1}
    body   content_block_start  {"index": 2, "content_block": {"type": "tool_use", "id", "name", "input": {}}}
    delta  content_block_delta  {"index": 2, "delta": {"type": "input_json_delta", "partial_json": "..."}}
    body   content_block_stop   {"index": 2}
    close  message_delta        {"delta": {"stop_reason", "stop_sequence"}, "usage": {...}}
    close  message_stop

The blocks are those of the non-streamed body (a refusal streams as text).  An error after the
stream began is ``event: error`` with ``{"type": "error", "error": {"type", "message"}}``. The presets
``content_policy`` and ``content_filter`` are both Anthropic's 400 "Output blocked by content filtering
policy" (Anthropic names no category: a step's ``categories`` are Azure's, and this wire sends none).
``account_blocked`` is Anthropic's 400 ``invalid_request_error`` "This organization has been disabled.".

What it checks, as the API does, is described in ``_anthropic_checks``; what it answers beyond the
brain's reply (thinking, the prompt cache, stop sequences), in ``_anthropic_answers``; the thinking
blocks' signatures are ``_anthropic_signing``'s.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from sidecar.core.stream import ReasoningDelta
from sidecar.fakes._brain import Reply, tokens_for
from sidecar.fakes._conversation import Conversation, Hints, conversation_of
from sidecar.fakes._limits import Taken
from sidecar.fakes._sse import Part as StreamPart
from sidecar.fakes._sse import Plan, SseEvent, split_text
from sidecar.fakes._wire import ErrorSpec, Exchange, Wire
from sidecar.providers.formats.anthropic_messages import FORMAT
from sidecar.providers.formats.anthropic_messages.fake_answers import (
    Asked,
    account,
    asked_of,
    stopped,
    stopped_plan,
    thought_of,
)
from sidecar.providers.formats.anthropic_messages.fake_checks import (
    check_cache,
    check_keys,
    check_prefill,
    check_signatures,
    check_sources,
    check_thinking,
)
from sidecar.providers.formats.anthropic_messages.vocab import RATE_LIMIT_HEADERS
from sidecar.providers.formats.chat import ChatReply
from sidecar.providers.formats.protocol import Sse

__all__ = ["ANTHROPIC", "CREDIT_MESSAGE"]

CONTENT_FILTER_MESSAGE = "Output blocked by content filtering policy"
"""Anthropic's 400 when its filter blocks the output (both content-policy presets; mid-stream, an error event)."""
CREDIT_MESSAGE = (
    "Your credit balance is too low to access the Anthropic API. "
    "Please go to Plans & Billing to upgrade or purchase credits."
)
_PASSED = ("output_format", "service_tier", "inference_geo", "speed", "container")
"""Keys of the API the front does not carry that the fake takes (and ignores), so a provider option can set them."""
_PARTS: dict[str, StreamPart] = {
    "message_start": "open",
    "content_block_delta": "delta",
    "message_delta": "close",
    "message_stop": "close",
}
"""Every other event (a block's start and stop, ping) is ``body``."""


def _rfc3339(offset_s: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + offset_s))


def _patched(event: SseEvent, change: dict[str, Any], key: str) -> SseEvent:
    data = json.loads(event.data)
    data[key].update(change)
    return SseEvent.of(data, event.event, event.part)


class _Anthropic(Wire):
    name = FORMAT.name
    front = FORMAT.front
    reply_prefix = "msg_fake"
    call_prefix = "toolu_fake"

    def parse(self, body: dict[str, Any]) -> Conversation:
        check_keys(body)  # the API's schema first: a key it does not have (the front would carry it)
        hints, rest = self.hints(body)
        ask = self.front.parse(rest)
        for check in (check_thinking, check_prefill, check_signatures, check_cache, check_sources):
            check(body)
        return asked_of(conversation_of(ask, hints, body.get("tools")), ask.request)

    def hints(self, body: dict[str, Any]) -> tuple[Hints, dict[str, Any]]:
        choice = body.get("tool_choice")
        forced, disabled = None, False
        if isinstance(choice, dict):
            disabled = choice.get("type") == "none"
            if choice.get("type") == "tool" and isinstance(choice.get("name"), str):
                forced = choice["name"]
        fmt = body.get("output_format")  # the structured-outputs beta's name for output_config.format
        fmt = fmt if isinstance(fmt, dict) else {}
        mode = fmt.get("type") == "json_schema"
        schema = fmt.get("schema") if mode and isinstance(fmt.get("schema"), dict) else None
        rest = {k: v for k, v in body.items() if k not in _PASSED}
        return Hints(forced_tool=forced, tools_disabled=disabled, json_schema=schema, json_mode=mode), rest

    def chat_reply(self, reply: Reply, ex: Exchange, input_tokens: int, output_tokens: int) -> ChatReply:
        out = super().chat_reply(reply, ex, input_tokens, output_tokens)
        asked = ex.conversation
        if not isinstance(asked, Asked):
            return out
        thought = thought_of(asked, reply)
        if thought is not None:
            thinking = tokens_for(len(thought.text) or len(thought.redacted_data))
            out.reasoning, out.output_tokens, out.reasoning_tokens = [thought], out.output_tokens + thinking, thinking
        if asked.breakpoints:  # the prompt cache's own accounting; without breakpoints, the step's usage
            out.cache_read_input_tokens, out.cache_write_input_tokens, _, _ = account(asked, ex.prompt_cache)
        if asked.met_stop is not None:
            out.raw_finish = "stop_sequence"
        return out

    def _usage(self, ex: Exchange) -> dict[str, Any]:
        """What the rendered usage adds: the cache's writes by ttl."""
        asked = ex.conversation
        if not isinstance(asked, Asked) or not asked.breakpoints:
            return {}
        _, _, short, long = account(asked, ex.prompt_cache)
        return {"cache_creation": {"ephemeral_5m_input_tokens": short, "ephemeral_1h_input_tokens": long}}

    def reply_body(self, reply: Reply, ex: Exchange, created: int) -> dict[str, Any]:
        asked = ex.conversation
        if isinstance(asked, Asked):
            reply, asked.met_stop = stopped(reply, asked.stop)
        body = super().reply_body(reply, ex, created)
        body["usage"].update(self._usage(ex))
        if isinstance(asked, Asked) and asked.met_stop is not None:
            body["stop_sequence"] = asked.met_stop
        return body

    def part_of(self, name: str, data: dict[str, Any] | str) -> StreamPart:
        return _PARTS.get(name, "body")

    def stream_events(self, plan: Plan, ex: Exchange, created: int) -> list[SseEvent]:
        asked = ex.conversation
        if isinstance(asked, Asked):
            reply, asked.met_stop = stopped(plan.reply, asked.stop)
            plan = stopped_plan(plan, reply) if asked.met_stop is not None else plan
        final = self.chat_reply(plan.reply, ex, plan.input_tokens, plan.output_tokens)
        writer = self.front.writer(self.head(ex, created))
        raw: list[Sse] = writer.start(plan.input_tokens)
        for r in final.reasoning:
            if r.redacted_data:
                raw += writer.delta(ReasoningDelta(0, redacted_data=r.redacted_data))
                continue
            for words in split_text(r.text):
                raw += writer.delta(ReasoningDelta(0, text=words))
            raw += writer.delta(ReasoningDelta(0, signature=r.signature))
        raw += self.piece_events(writer, plan, ex)
        raw += writer.final(final)
        events = self.tagged(raw)
        starts = [i for i, e in enumerate(events) if e.event == "content_block_start"]
        at = starts[0] + 1 if starts else next(i for i, e in enumerate(events) if e.part == "close")
        ping = SseEvent.of({"type": "ping"}, "ping", "body")  # as the API sends one; clients skip it
        usage = json.loads(events[-2].data)["usage"]  # message_delta's: the message_start tells the input too
        opening = dict(usage, output_tokens=1, **self._usage(ex))  # the API counts the first token at the start
        opening.pop("output_tokens_details", None)
        events[0] = _patched(events[0], {"usage": opening}, "message")
        if isinstance(asked, Asked) and asked.met_stop is not None:
            events[-2] = _patched(events[-2], {"stop_sequence": asked.met_stop}, "delta")
        return [*events[:at], ping, *events[at:]]

    def preset_error(self, preset: str, ex: Exchange) -> ErrorSpec | None:
        specs = {
            "rate_limit": ErrorSpec(
                429,
                "rate_limit_error",
                "This request would exceed the rate limit for your organization of 50 requests per minute. "
                "Please try again later.",
            ),
            "overloaded": ErrorSpec(529, "overloaded_error", "Overloaded"),
            "server_error": ErrorSpec(500, "api_error", "Internal server error"),
            "insufficient_quota": ErrorSpec(400, "invalid_request_error", CREDIT_MESSAGE),
            "payment_required": ErrorSpec(
                402, "billing_error", "Payment required: this account has run out of credits."
            ),
            "context_too_long": ErrorSpec(
                400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"
            ),
            "invalid_key": ErrorSpec(401, "authentication_error", "invalid x-api-key"),
            "model_not_found": ErrorSpec(404, "not_found_error", f"model: {ex.model or 'unknown'}"),
            "account_blocked": ErrorSpec(400, "invalid_request_error", "This organization has been disabled."),
            "content_policy": ErrorSpec(400, "invalid_request_error", CONTENT_FILTER_MESSAGE),
            "content_filter": ErrorSpec(400, "invalid_request_error", CONTENT_FILTER_MESSAGE),
        }
        return specs.get(preset)

    def status_error(self, status: int) -> ErrorSpec:
        return ErrorSpec(status, self.front.error_type(status), f"Fake provider error (HTTP {status}).")

    def headers(self, ex: Exchange, status: int) -> dict[str, str]:
        limited = status == 429
        values = ("4000", "0" if limited else "3999", _rfc3339(1 if limited else 0), "400000", "399000", _rfc3339(0))
        return {"request-id": f"req_fake{ex.n:08d}", **dict(zip(RATE_LIMIT_HEADERS, values, strict=True))}

    def budget_headers(self, taken: Taken, now: datetime) -> dict[str, str]:
        reset = (now + timedelta(seconds=taken.reset_s)).astimezone(UTC).isoformat(timespec="milliseconds")
        return {
            "anthropic-ratelimit-requests-limit": str(taken.limit),
            "anthropic-ratelimit-requests-remaining": str(taken.remaining),
            "anthropic-ratelimit-requests-reset": reset.replace("+00:00", "Z"),
        }

    def unknown_events(self, ex: Exchange) -> list[SseEvent]:
        data = {"type": "fake_future_event", "note": "an event type this client does not know yet"}
        return [SseEvent.of(data, "fake_future_event", "body")]


ANTHROPIC = _Anthropic()
