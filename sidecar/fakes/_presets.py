"""Turn a scripted step (or the default brain) into a provider response on one wire.

A reply (the brain's or a reply preset's) goes out as one JSON body, or, when the request asked
for ``"stream": true``, as server-sent events with the step's stream fields (:mod:`._stream`).
Errors are JSON either way.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ._brain import Reply, ToolCall, apply_budget, continued, default_reply
from ._http import Chunk, Response, StreamEnd
from ._schema import missing_fields_for
from ._script import Step
from ._stream import STREAM_PARAMS, StreamOptions, render_stream
from ._wire import BAD_GATEWAY_HTML, FILTER_CATEGORIES, USAGE_FIELDS, ErrorSpec, Exchange, Wire

__all__ = ["PRESETS", "PRESET_PARAMS", "render_default", "render_step", "validate_step"]

ERROR_PRESETS = (
    "rate_limit",
    "overloaded",
    "server_error",
    "bad_gateway",
    "insufficient_quota",
    "payment_required",
    "context_too_long",
    "invalid_key",
    "model_not_found",
    "content_policy",
    "content_filter",
    "account_blocked",
    "model_unavailable",
)
"""``account_blocked`` and ``model_unavailable`` are the 400s only an operator can fix (``providers.errors``'
OPERATOR_FIXES): the account may not use the API from here; the model is not served as the catalog names
it. A wire with no such answer of its own answers ``model_unavailable`` with its ``model_not_found``."""
REPLY_PRESETS = ("reply", "truncated", "bad_json", "missing_fields", "refusal")
PRESETS = ERROR_PRESETS + REPLY_PRESETS
PRESET_PARAMS = (
    "text",
    "tool_calls",
    "finish",
    "retry_after",
    "retry_after_ms",
    "extra_error_fields",
    "extra_body",
    "message",
    "usage",
    "refuse_prefill",
    "categories",
    "echo_headers",
    *STREAM_PARAMS,
)
FINISHES = ("stop", "length", "tool_calls", "content_filter", "refusal")
REFUSAL_TEXT = "I can't help with that."
BAD_JSON_TEXT = "Sure! Here is the answer: {name: 'x'"


def validate_step(step: Step) -> None:
    """Reject preset parameters of the wrong shape when the script is posted."""
    p = step.params
    if "finish" in p and p["finish"] not in FINISHES:
        raise ValueError(f"'finish' must be one of {list(FINISHES)}")
    calls = p.get("tool_calls", [])
    if not isinstance(calls, list) or not all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in calls):
        raise ValueError("'tool_calls' must be a list of {name, arguments}")
    for key in ("extra_error_fields", "extra_body"):
        if not isinstance(p.get(key, {}), dict):
            raise ValueError(f"{key!r} must be an object")
    if "message" in p and not isinstance(p["message"], str):
        raise ValueError("'message' must be a string")
    if not isinstance(p.get("refuse_prefill", False), bool):
        raise ValueError("'refuse_prefill' must be true or false")
    usage = p.get("usage", {})
    if not isinstance(usage, dict) or not all(
        k in USAGE_FIELDS and isinstance(v, int) and not isinstance(v, bool) and v >= 0 for k, v in usage.items()
    ):
        raise ValueError(f"'usage' must be an object of token counts: {', '.join(USAGE_FIELDS)}")
    if not isinstance(p.get("echo_headers", False), bool):
        raise ValueError("'echo_headers' must be true or false")
    if p.get("echo_headers") and (step.preset not in (None, "reply") or "text" in p or _is_error_step(step)):
        raise ValueError("'echo_headers' is a reply's text: no 'text', preset but 'reply', body or error status")
    categories = p.get("categories", [])
    if not isinstance(categories, list) or not all(c in FILTER_CATEGORIES for c in categories):
        raise ValueError(f"'categories' must be a list of: {', '.join(FILTER_CATEGORIES)}")
    opts = StreamOptions.from_params(p)
    if opts.fault is not None and _is_error_step(step):
        raise ValueError("'stream_fault' needs a step that answers with a reply (no error preset, body or status)")
    if opts.fault is not None and step.fault is not None:
        raise ValueError("'stream_fault' and 'fault' cannot go together")


def _is_error_step(step: Step) -> bool:
    if step.has_body or step.preset in ERROR_PRESETS:
        return True
    return step.status is not None and step.status >= 400


def _text_param(params: Mapping[str, Any]) -> str | None:
    text = params.get("text")
    if text is None or isinstance(text, str):
        return text
    return json.dumps(text)


def _json_response(body: dict[str, Any], status: int, wire: Wire, ex: Exchange, params: Mapping[str, Any]) -> Response:
    body.update(params.get("extra_body") or {})
    return Response.json(body, status=status, headers=wire.headers(ex, status))


def _error(spec: ErrorSpec, wire: Wire, ex: Exchange, params: Mapping[str, Any]) -> Response:
    if isinstance(params.get("message"), str):
        spec = replace(spec, message=params["message"])
    body = wire.error_body(spec, ex)
    wire.error_fields(body).update(params.get("extra_error_fields") or {})
    if spec.status < 400 and ex.conversation.stream:  # a block that answers 200 (Gemini's): its events
        headers = wire.headers(ex, 200)
        headers.update({"content-type": wire.stream_content_type, "cache-control": "no-cache"})
        chunks = tuple(Chunk(wire.encode(e), 0.0) for e in wire.blocked_stream(body, ex))
        return Response(status=200, headers=headers, stream=chunks, stream_end=StreamEnd.COMPLETE)
    response = _json_response(body, spec.status, wire, ex, params)
    response.headers.update(wire.error_headers(spec))
    return response


def _default_text(ex: Exchange) -> str:
    conv = ex.conversation
    reply = default_reply(conv)
    if reply.text is not None:
        return reply.text
    return "You said: " + conv.last_user_text


def _preset_reply(preset: str, params: Mapping[str, Any], ex: Exchange) -> Reply:
    text = _text_param(params)
    schema = ex.conversation.json_schema
    if preset == "refusal":
        return Reply(text=None, refusal=text or REFUSAL_TEXT, finish="refusal")
    if preset == "truncated":
        if text is None:
            full = _default_text(ex)
            text = full[: max(1, len(full) // 2)]
        return Reply(text=text, finish="length")
    if preset == "bad_json":
        return Reply(text=BAD_JSON_TEXT if text is None else text)
    if preset == "missing_fields":
        return Reply(text=json.dumps(missing_fields_for(schema) if schema else {}))
    calls = [ToolCall(c["name"], c.get("arguments", {})) for c in params.get("tool_calls", [])]
    finish = params.get("finish") or ("tool_calls" if calls else "stop")
    if finish == "refusal":
        return Reply(text=None, refusal=text or REFUSAL_TEXT, finish="refusal")
    if text is None and not calls and finish != "content_filter":
        text = _default_text(ex)
    return Reply(text=text, tool_calls=calls, finish=finish)


def _reply_response(reply: Reply, wire: Wire, ex: Exchange, params: Mapping[str, Any]) -> Response:
    reply = continued(reply, ex.conversation.prefill)
    if ex.conversation.stream:
        return render_stream(reply, wire, ex, params)
    return _json_response(wire.reply_body(reply, ex, int(time.time())), 200, wire, ex, params)


def render_default(wire: Wire, ex: Exchange, stream_params: Mapping[str, Any] | None = None) -> Response:
    """The brain's answer, cut to the request's ``max_tokens``; streamed (with ``stream_params``) if asked."""
    conv = ex.conversation
    reply = apply_budget(continued(default_reply(conv), conv.prefill), conv.max_tokens)
    if ex.conversation.stream:
        return render_stream(reply, wire, ex, stream_params or {})
    return _json_response(wire.reply_body(reply, ex, int(time.time())), 200, wire, ex, {})


def _raw(step: Step, wire: Wire, ex: Exchange) -> Response:
    status = step.status or 200
    headers = wire.headers(ex, status)
    if isinstance(step.body, str):
        headers["content-type"] = "application/json"
        return Response(status=status, headers=headers, body=step.body.encode("utf-8"))
    return Response.json(step.body, status=status, headers=headers)


def _body_for(step: Step, wire: Wire, ex: Exchange) -> Response:
    if step.has_body:
        return _raw(step, wire, ex)
    if step.preset == "bad_gateway":
        headers = wire.headers(ex, 502)
        headers["content-type"] = "text/html"
        return Response(status=502, headers=headers, body=BAD_GATEWAY_HTML.encode("utf-8"))
    if step.preset in REPLY_PRESETS:
        return _reply_response(_preset_reply(step.preset, step.params, ex), wire, ex, step.params)
    spec = wire.preset_error(step.preset, ex) if step.preset else None
    if spec is None and step.preset == "model_unavailable":
        spec = wire.preset_error("model_not_found", ex)
    if spec is None and step.status and step.status >= 400:
        spec = wire.status_error(step.status)
    if spec is not None:
        return _error(spec, wire, ex, step.params)
    return render_default(wire, ex, step.params)


def render_step(step: Step, wire: Wire, ex: Exchange) -> Response:
    """A step's answer: its raw body, else its preset, else an error for its status, else the brain."""
    resp = _body_for(step, wire, ex)
    if step.status:
        resp.status = step.status
    params = step.params
    if params.get("retry_after") is not None:
        resp.headers["retry-after"] = str(params["retry_after"])
    if params.get("retry_after_ms") is not None:
        resp.headers["retry-after-ms"] = str(params["retry_after_ms"])
    resp.headers.update(step.headers)
    resp.delay_ms = step.delay_ms
    resp.fault = step.fault
    return resp
