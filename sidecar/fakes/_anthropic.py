"""The Anthropic Messages wire format, whole (``message``) and streamed.

A stream (``"stream": true``) is named events, each with its ``type`` in the data too::

    open   message_start        {"message": {..., "content": [], "stop_reason": null,
                                 "usage": {"input_tokens": N, "output_tokens": 1}}}
    body   content_block_start  {"index": 0, "content_block": {"type": "text", "text": ""}}
    body   ping                 (once, after the first content_block_start)
    delta  content_block_delta  {"index": 0, "delta": {"type": "text_delta", "text": "..."}}
    body   content_block_stop   {"index": 0}
    body   content_block_start  {"index": 1, "content_block": {"type": "tool_use", "id", "name", "input": {}}}
    delta  content_block_delta  {"index": 1, "delta": {"type": "input_json_delta", "partial_json": "..."}}
    body   content_block_stop   {"index": 1}
    close  message_delta        {"delta": {"stop_reason", "stop_sequence": null}, "usage": {"output_tokens"}}
    close  message_stop

The blocks are those of the non-streamed body (a refusal streams as text).  An error after the
stream began is ``event: error`` with ``{"type": "error", "error": {"type", "message"}}``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ._brain import Reply, ToolCall, tokens_for
from ._conversation import Conversation, parse_anthropic
from ._sse import Part, Plan, SseEvent
from ._wire import ErrorSpec, Exchange, Wire

__all__ = ["ANTHROPIC", "CREDIT_MESSAGE"]

CREDIT_MESSAGE = (
    "Your credit balance is too low to access the Anthropic API. "
    "Please go to Plans & Billing to upgrade or purchase credits."
)

_STOP = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
    "refusal": "refusal",
}

_BY_STATUS = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def _tool_input(call: ToolCall) -> Any:
    if not isinstance(call.arguments, str):
        return call.arguments
    try:
        return json.loads(call.arguments)
    except ValueError:
        return call.arguments  # broken on purpose: sent as a string


def _text_block(reply: Reply) -> str | None:
    """The text block's text (a refusal counts as text); ``None`` when the reply has no text block."""
    text = reply.refusal if reply.refusal is not None else reply.text
    if text or (text is not None and not reply.tool_calls):
        return text
    return None


def _event(kind: str, part: Part, **fields: Any) -> SseEvent:
    return SseEvent.of({"type": kind, **fields}, kind, part)


def _rfc3339(offset_s: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + offset_s))


class _Anthropic(Wire):
    name = "anthropic"
    stream_error_event = "error"

    def parse(self, body: dict[str, Any]) -> Conversation:
        return parse_anthropic(body)

    def api_key(self, headers: dict[str, str]) -> str:
        return headers.get("x-api-key", "")

    def reply_body(self, reply: Reply, ex: Exchange) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        text = _text_block(reply)
        if text is not None:
            content.append({"type": "text", "text": text})
        for i, call in enumerate(reply.tool_calls):
            content.append(
                {"type": "tool_use", "id": f"toolu_fake{ex.n:08d}_{i}", "name": call.name, "input": _tool_input(call)}
            )
        return {
            "id": f"msg_fake{ex.n:08d}",
            "type": "message",
            "role": "assistant",
            "model": ex.model,
            "content": content,
            "stop_reason": _STOP[reply.finish],
            "stop_sequence": None,
            "usage": {
                "input_tokens": tokens_for(ex.conversation.input_chars),
                "output_tokens": tokens_for(reply.output_chars()),
            },
        }

    def error_body(self, spec: ErrorSpec, ex: Exchange) -> dict[str, Any]:
        return {
            "type": "error",
            "error": {"type": spec.type, "message": spec.message},
            "request_id": f"req_fake{ex.n:08d}",
        }

    def error_fields(self, body: dict[str, Any]) -> dict[str, Any]:
        inner = body.get("error")
        return inner if isinstance(inner, dict) else body

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
        kind = _BY_STATUS.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return ErrorSpec(status, kind, f"Fake provider error (HTTP {status}).")

    def headers(self, ex: Exchange, status: int) -> dict[str, str]:
        limited = status == 429
        return {
            "request-id": f"req_fake{ex.n:08d}",
            "anthropic-ratelimit-requests-limit": "4000",
            "anthropic-ratelimit-requests-remaining": "0" if limited else "3999",
            "anthropic-ratelimit-requests-reset": _rfc3339(1 if limited else 0),
            "anthropic-ratelimit-tokens-limit": "400000",
            "anthropic-ratelimit-tokens-remaining": "399000",
            "anthropic-ratelimit-tokens-reset": _rfc3339(0),
        }

    # ---- streaming --------------------------------------------------------------------------

    def stream_events(self, plan: Plan, ex: Exchange) -> list[SseEvent]:
        reply = plan.reply
        message = self.reply_body(reply, ex)
        message.update(content=[], stop_reason=None, stop_sequence=None)
        message["usage"] = {"input_tokens": plan.input_tokens, "output_tokens": 1}
        events = [_event("message_start", "open", message=message)]
        has_text = _text_block(reply) is not None
        blocks: list[tuple[dict[str, Any], list[str]]] = []
        if has_text:
            kind = "refusal" if reply.refusal is not None else "text"
            texts = [p.text for p in plan.pieces if p.kind == kind]
            blocks.append(({"type": "text", "text": ""}, texts))
        for i, call in enumerate(reply.tool_calls):
            start = {"type": "tool_use", "id": f"toolu_fake{ex.n:08d}_{i}", "name": call.name, "input": {}}
            blocks.append((start, [p.text for p in plan.pieces if p.kind == "args" and p.index == i]))
        for index, (start, fragments) in enumerate(blocks):
            events.append(_event("content_block_start", "body", index=index, content_block=start))
            if index == 0:
                events.append(_event("ping", "body"))
            kind, key = ("text_delta", "text") if start["type"] == "text" else ("input_json_delta", "partial_json")
            events += [
                _event("content_block_delta", "delta", index=index, delta={"type": kind, key: f}) for f in fragments
            ]
            events.append(_event("content_block_stop", "body", index=index))
        if not blocks:
            events.append(_event("ping", "body"))
        stop = {"stop_reason": _STOP[reply.finish], "stop_sequence": None}
        events.append(_event("message_delta", "close", delta=stop, usage={"output_tokens": plan.output_tokens}))
        events.append(_event("message_stop", "close"))
        return events

    def stream_error_body(self, spec: ErrorSpec, ex: Exchange) -> dict[str, Any]:
        return {"type": "error", "error": {"type": spec.type, "message": spec.message}}

    def unknown_events(self, ex: Exchange) -> list[SseEvent]:
        return [_event("fake_future_event", "body", note="an event type this client does not know yet")]


ANTHROPIC = _Anthropic()
