"""The OpenAI Chat Completions wire format, whole (``chat.completion``) and streamed.

A stream (``"stream": true``) is ``data: {chat.completion.chunk}`` events::

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

import time
from typing import Any

from ._brain import Reply, tokens_for
from ._conversation import Conversation, parse_openai
from ._sse import Part, Piece, Plan, SseEvent
from ._wire import ErrorSpec, Exchange, Wire, mask_key

__all__ = ["OPENAI"]

_FINISH = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
    "refusal": "stop",
}

_BY_STATUS = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "not_found"),
    409: ("invalid_request_error", "conflict"),
    413: ("invalid_request_error", "request_too_large"),
    422: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
    529: ("overloaded_error", "overloaded_error"),
}


class _OpenAI(Wire):
    name = "openai"
    stream_error_event = None

    def parse(self, body: dict[str, Any]) -> Conversation:
        return parse_openai(body)

    def api_key(self, headers: dict[str, str]) -> str:
        auth = headers.get("authorization", "")
        return auth[7:].strip() if auth.lower().startswith("bearer ") else auth

    def reply_body(self, reply: Reply, ex: Exchange) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.text,
            "refusal": reply.refusal,
            "annotations": [],
        }
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_fake{ex.n:08d}_{i}",
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments_json()},
                }
                for i, c in enumerate(reply.tool_calls)
            ]
        prompt = tokens_for(ex.conversation.input_chars)
        completion = tokens_for(reply.output_chars())
        return {
            "id": f"chatcmpl-fake{ex.n:08d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": ex.model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": _FINISH[reply.finish]}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
            "system_fingerprint": "fp_fake",
        }

    def error_body(self, spec: ErrorSpec, ex: Exchange) -> dict[str, Any]:
        return {"error": {"message": spec.message, "type": spec.type, "param": spec.param, "code": spec.code}}

    def error_fields(self, body: dict[str, Any]) -> dict[str, Any]:
        inner = body.get("error")
        return inner if isinstance(inner, dict) else body

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
        kind, code = _BY_STATUS.get(status, ("server_error" if status >= 500 else "invalid_request_error", None))
        return ErrorSpec(status, kind, f"Fake provider error (HTTP {status}).", code)

    def headers(self, ex: Exchange, status: int) -> dict[str, str]:
        limited = status == 429
        return {
            "x-request-id": f"req_fake{ex.n:08d}",
            "openai-processing-ms": "1",
            "openai-version": "2020-10-01",
            "x-ratelimit-limit-requests": "10000",
            "x-ratelimit-remaining-requests": "0" if limited else "9999",
            "x-ratelimit-reset-requests": "1s" if limited else "6ms",
            "x-ratelimit-limit-tokens": "2000000",
            "x-ratelimit-remaining-tokens": "1999000",
            "x-ratelimit-reset-tokens": "30ms",
        }

    # ---- streaming --------------------------------------------------------------------------

    def stream_events(self, plan: Plan, ex: Exchange) -> list[SseEvent]:
        reply, created = plan.reply, int(time.time())
        usage = ex.conversation.include_usage

        def chunk(choices: list[dict[str, Any]], part: Part, **extra: Any) -> SseEvent:
            body: dict[str, Any] = {
                "id": f"chatcmpl-fake{ex.n:08d}",
                "object": "chat.completion.chunk",
                "created": created,
                "model": ex.model,
                "system_fingerprint": "fp_fake",
                "choices": choices,
            }
            if usage:
                body["usage"] = None
            body.update(extra)
            return SseEvent.of(body, part=part)

        def delta(fields: dict[str, Any], part: Part, finish: str | None = None) -> SseEvent:
            return chunk([{"index": 0, "delta": fields, "logprobs": None, "finish_reason": finish}], part)

        opening = {"role": "assistant", "content": None if reply.text is None else "", "refusal": None}
        events = [delta(opening, "open")]
        events += [delta(_piece_delta(p, ex), "delta" if p.is_delta else "body") for p in plan.pieces]
        events.append(delta({}, "close", _FINISH[reply.finish]))
        if usage:
            total = plan.input_tokens + plan.output_tokens
            counts = {
                "prompt_tokens": plan.input_tokens,
                "completion_tokens": plan.output_tokens,
                "total_tokens": total,
            }
            events.append(chunk([], "close", usage=counts))
        events.append(SseEvent("[DONE]", part="close"))
        return events

    def stream_error_body(self, spec: ErrorSpec, ex: Exchange) -> dict[str, Any]:
        return self.error_body(spec, ex)

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


def _piece_delta(piece: Piece, ex: Exchange) -> dict[str, Any]:
    if piece.kind == "text":
        return {"content": piece.text}
    if piece.kind == "refusal":
        return {"refusal": piece.text}
    if piece.kind == "tool":
        call = {
            "index": piece.index,
            "id": f"call_fake{ex.n:08d}_{piece.index}",
            "type": "function",
            "function": {"name": piece.text, "arguments": ""},
        }
        return {"tool_calls": [call]}
    return {"tool_calls": [{"index": piece.index, "function": {"arguments": piece.text}}]}


OPENAI = _OpenAI()
