"""The Anthropic Messages wire format."""

from __future__ import annotations

import json
import time
from typing import Any

from ._brain import Reply, ToolCall, tokens_for
from ._conversation import Conversation, parse_anthropic
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


def _rfc3339(offset_s: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + offset_s))


class _Anthropic(Wire):
    name = "anthropic"

    def parse(self, body: dict[str, Any]) -> Conversation:
        return parse_anthropic(body)

    def api_key(self, headers: dict[str, str]) -> str:
        return headers.get("x-api-key", "")

    def reply_body(self, reply: Reply, ex: Exchange) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        text = reply.refusal if reply.refusal is not None else reply.text
        if text or (text is not None and not reply.tool_calls):
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


ANTHROPIC = _Anthropic()
