"""The Anthropic Messages wire as the fake provider speaks it (the format: ``formats.anthropic_messages``).

A stream (``"stream": true``) is named events, each with its ``type`` in the data too, each in its part::

    open   message_start        {"message": {..., "content": [], "stop_reason": null,
                                 "usage": {"input_tokens": N, "output_tokens": 1}}}
    body   content_block_start  {"index": 0, "content_block": {"type": "text", "text": ""}}
    body   ping                 (once, after the first content_block_start; before the end when none)
    delta  content_block_delta  {"index": 0, "delta": {"type": "text_delta", "text": "..."}}
    body   content_block_stop   {"index": 0}
    body   content_block_start  {"index": 1, "content_block": {"type": "tool_use", "id", "name", "input": {}}}
    delta  content_block_delta  {"index": 1, "delta": {"type": "input_json_delta", "partial_json": "..."}}
    body   content_block_stop   {"index": 1}
    close  message_delta        {"delta": {"stop_reason", "stop_sequence": null}, "usage": {...}}
    close  message_stop

The blocks are those of the non-streamed body (a refusal streams as text).  An error after the
stream began is ``event: error`` with ``{"type": "error", "error": {"type", "message"}}``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from sidecar.providers.formats.anthropic_messages import FORMAT
from sidecar.providers.formats.anthropic_messages.vocab import RATE_LIMIT_HEADERS

from ._conversation import Hints
from ._sse import Part, Plan, SseEvent
from ._wire import ErrorSpec, Exchange, Wire

__all__ = ["ANTHROPIC", "CREDIT_MESSAGE"]

CREDIT_MESSAGE = (
    "Your credit balance is too low to access the Anthropic API. "
    "Please go to Plans & Billing to upgrade or purchase credits."
)
_PARTS: dict[str, Part] = {
    "message_start": "open",
    "content_block_delta": "delta",
    "message_delta": "close",
    "message_stop": "close",
}
"""Every other event (a block's start and stop, ping) is ``body``."""


def _rfc3339(offset_s: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + offset_s))


class _Anthropic(Wire):
    name = FORMAT.name
    front = FORMAT.front
    reply_prefix = "msg_fake"
    call_prefix = "toolu_fake"

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
        rest = {k: v for k, v in body.items() if k not in ("tool_choice", "output_format")}
        return Hints(forced_tool=forced, tools_disabled=disabled, json_schema=schema, json_mode=mode), rest

    def part_of(self, name: str, data: dict[str, Any] | str) -> Part:
        return _PARTS.get(name, "body")

    def stream_events(self, plan: Plan, ex: Exchange, created: int) -> list[SseEvent]:
        events = super().stream_events(plan, ex, created)
        starts = [i for i, e in enumerate(events) if e.event == "content_block_start"]
        at = starts[0] + 1 if starts else next(i for i, e in enumerate(events) if e.part == "close")
        ping = SseEvent.of({"type": "ping"}, "ping", "body")  # as the API sends one; clients skip it
        start = json.loads(events[0].data)
        start["message"]["usage"]["output_tokens"] = 1  # as the API counts the first token at the start
        return [SseEvent.of(start, "message_start", "open"), *events[1:at], ping, *events[at:]]

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
        }
        return specs.get(preset)

    def status_error(self, status: int) -> ErrorSpec:
        return ErrorSpec(status, self.front.error_type(status), f"Fake provider error (HTTP {status}).")

    def headers(self, ex: Exchange, status: int) -> dict[str, str]:
        limited = status == 429
        values = ("4000", "0" if limited else "3999", _rfc3339(1 if limited else 0), "400000", "399000", _rfc3339(0))
        return {"request-id": f"req_fake{ex.n:08d}", **dict(zip(RATE_LIMIT_HEADERS, values, strict=True))}

    def unknown_events(self, ex: Exchange) -> list[SseEvent]:
        data = {"type": "fake_future_event", "note": "an event type this client does not know yet"}
        return [SseEvent.of(data, "fake_future_event", "body")]


ANTHROPIC = _Anthropic()
