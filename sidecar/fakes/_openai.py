"""The OpenAI Chat Completions wire as the fake provider speaks it (the format: ``formats.openai_chat``).

A stream (``"stream": true``) is ``data: {chat.completion.chunk}`` events, each in its part::

    open   {"delta": {"role": "assistant", "content": "" | null, "refusal": null}}
    delta  {"delta": {"content": "..."}} | {"delta": {"refusal": "..."}}
    body   {"delta": {"tool_calls": [{"index", "id", "type": "function", "function": {"name", "arguments": ""}}]}}
    delta  {"delta": {"tool_calls": [{"index", "function": {"arguments": "..."}}]}}
    close  {"delta": {}, "finish_reason": ...}
    close  {"choices": [], "usage": {...}}      only with stream_options.include_usage (then every
                                                 chunk before it has "usage": null)
    close  [DONE]

An error after the stream began is ``data: {"error": {...}}`` and nothing after it.
"""

from __future__ import annotations

import json
import time
from typing import Any

from sidecar.providers.formats.openai_chat import FORMAT
from sidecar.providers.formats.openai_chat.vocab import END_MARKER, ERROR_TYPES, RATE_LIMIT_HEADERS

from ._conversation import Hints
from ._sse import Part, Plan, SseEvent
from ._wire import ErrorSpec, Exchange, Wire, mask_key

__all__ = ["OPENAI"]


class _OpenAI(Wire):
    name = FORMAT.name
    front = FORMAT.front
    reply_prefix = "chatcmpl-fake"
    call_prefix = "call_fake"

    def hints(self, body: dict[str, Any]) -> tuple[Hints, dict[str, Any]]:
        choice = body.get("tool_choice")
        forced = None
        if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
            name = choice["function"].get("name")
            forced = name if isinstance(name, str) else None
        rest = {k: v for k, v in body.items() if k != "tool_choice"}
        return Hints(forced_tool=forced, tools_disabled=choice == "none"), rest

    def part_of(self, name: str, data: dict[str, Any] | str) -> Part:
        if data == END_MARKER or not isinstance(data, dict):
            return "close"
        choices = data.get("choices") or []
        if not choices:
            return "close"  # the usage chunk
        choice = choices[0]
        delta = choice.get("delta") or {}
        if choice.get("finish_reason"):
            return "close"
        if "role" in delta:
            return "open"
        calls = delta.get("tool_calls")
        if calls and "id" in calls[0]:
            return "body"  # a call's start: its id and name
        return "delta"

    def stream_events(self, plan: Plan, ex: Exchange, created: int) -> list[SseEvent]:
        events = super().stream_events(plan, ex, created)
        if plan.reply.text is not None:
            return events
        opening = json.loads(events[0].data)  # a reply with no text (tool calls, a refusal) opens with null content
        opening["choices"][0]["delta"]["content"] = None
        return [SseEvent.of(opening, part="open"), *events[1:]]

    def preset_error(self, preset: str, ex: Exchange) -> ErrorSpec | None:
        model = ex.model or "unknown"
        specs = {
            "rate_limit": ErrorSpec(
                429,
                "requests",
                f"Rate limit reached for {model} on requests per min (RPM): Limit 500, Used 500, "
                "Requested 1. Please try again in 1s. Visit https://platform.openai.com/account/rate-limits "
                "to learn more.",
                "rate_limit_exceeded",
            ),
            "overloaded": ErrorSpec(
                529, "overloaded_error", "The server is overloaded. Please try again later.", "overloaded_error"
            ),
            "server_error": ErrorSpec(
                500, "server_error", "The server had an error while processing your request. Sorry about that!"
            ),
            "insufficient_quota": ErrorSpec(
                429,
                "insufficient_quota",
                "You exceeded your current quota, please check your plan and billing details. For more "
                "information on this error, read the docs: "
                "https://platform.openai.com/docs/guides/error-codes/api-errors.",
                "insufficient_quota",
            ),
            "payment_required": ErrorSpec(
                402, "payment_required", "Payment required: this account has run out of credits.", "payment_required"
            ),
            "context_too_long": ErrorSpec(
                400,
                "invalid_request_error",
                "This model's maximum context length is 128000 tokens. However, your messages resulted in "
                "210000 tokens. Please reduce the length of the messages.",
                "context_length_exceeded",
                "messages",
            ),
            "invalid_key": ErrorSpec(
                401,
                "invalid_request_error",
                f"Incorrect API key provided: {mask_key(ex.api_key)}. You can find your API key at "
                "https://platform.openai.com/account/api-keys.",
                "invalid_api_key",
            ),
            "model_not_found": ErrorSpec(
                404,
                "invalid_request_error",
                f"The model `{model}` does not exist or you do not have access to it.",
                "model_not_found",
            ),
        }
        return specs.get(preset)

    def status_error(self, status: int) -> ErrorSpec:
        code = ERROR_TYPES.get(status, ("", None))[1]
        return ErrorSpec(status, self.front.error_type(status), f"Fake provider error (HTTP {status}).", code)

    def headers(self, ex: Exchange, status: int) -> dict[str, str]:
        limited = status == 429
        values = (
            "10000",
            "0" if limited else "9999",
            "1s" if limited else "6ms",
            "2000000",
            "1999000",
            "30ms",
        )
        return {
            "x-request-id": f"req_fake{ex.n:08d}",
            "openai-processing-ms": "1",
            "openai-version": "2020-10-01",
            **dict(zip(RATE_LIMIT_HEADERS, values, strict=True)),
        }

    def unknown_events(self, ex: Exchange) -> list[SseEvent]:
        # An SSE comment (proxies send keep-alives so), then a chunk with no choices and a field
        # this fake made up (Azure sends such chunks with ``prompt_filter_results``).
        extra: dict[str, Any] = {"usage": None} if ex.conversation.include_usage else {}
        body = {
            "id": f"chatcmpl-fake{ex.n:08d}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": ex.model,
            "choices": [],
            "fake_future_field": {"note": "a field this client does not know yet"},
            **extra,
        }
        return [SseEvent("keep-alive", comment=True), SseEvent.of(body)]


OPENAI = _OpenAI()
