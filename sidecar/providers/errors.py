"""The one boundary for provider answers that are not a reply: a retry signal or a terminal failure.

A format's ``classify`` first looks for its own content-policy refusal in the body (OpenAI's
``content_policy_violation``, Azure's ``content_filter``, Anthropic's "content filtering policy"),
whatever the status, a stream's error event included: ``refused`` makes it PROVIDER_REFUSAL, never
retried. Every other answer is decided from the body before the status, in this order::

    402, insufficient_quota, "credit balance is too low"        -> QUOTA_EXHAUSTED      (never retried)
    overloaded_error anywhere, or 529                            -> signal OVERLOAD      (+1.5 model throttle)
    429                                                          -> signal RATE_LIMIT    (+0.5; Retry-After: a pause)
    x-should-retry: true                                         -> signal TRANSIENT
    408, 5xx (unless x-should-retry: false)                      -> signal TRANSIENT     (slows no one)
    401 / 403                                                    -> UNAUTHORIZED          (body blanked)
    context_length_exceeded, "prompt is too long", 413           -> CONTEXT_OVERFLOW
    404                                                          -> MODEL_NOT_FOUND (at the provider)
    other 4xx                                                    -> INVALID_INPUT (the provider's words as the rule)
    anything else                                                -> EXTERNAL_SERVICE
    connection failure, read timeout, reset (no response)        -> signal TRANSIENT, no http
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sidecar.core.backoff import parse_retry_after, retry_after_raw
from sidecar.core.details import HttpInfo, ProviderDetail
from sidecar.core.json_depth import loads
from sidecar.core.kinds import RetrySignal
from sidecar.core.redact import mask_keys, redact_body
from sidecar.core.retry import Retry
from sidecar.core.taxonomy import (
    ContextOverflow,
    ExternalService,
    InvalidInput,
    ModelNotFound,
    ProviderRefusal,
    QuotaExhausted,
    SidecarFailure,
    Unauthorized,
)
from sidecar.core.text import cap

__all__ = ["Target", "classify_response", "refused"]

_QUOTA = re.compile(
    r"insufficient_quota|credit balance is too low|billing_hard_limit|exceeded your current quota", re.I
)
_CONTEXT = re.compile(
    r"context_length_exceeded|prompt is too long|maximum context length|context window|too many tokens|"
    r"input is too long|request_too_large",
    re.I,
)


@dataclass(frozen=True, slots=True)
class Target:
    provider: str
    account: str
    model_id: str
    upstream_model: str
    endpoint: str


def _error_fields(body: str) -> tuple[str, str, str]:
    """(message, type, code) of an OpenAI or Anthropic error body."""
    try:
        parsed: Any = loads(body)
    except ValueError:
        return body.strip(), "", ""
    err = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(err, dict):
        return str(err.get("message") or ""), str(err.get("type") or ""), str(err.get("code") or "")
    if isinstance(err, str):
        return err, "", ""
    if isinstance(parsed, dict) and parsed.get("message"):
        return str(parsed["message"]), str(parsed.get("type") or ""), ""
    return body.strip(), "", ""


def _error_param(body: str) -> str:
    """The parameter an error body names (OpenAI's ``error.param``, "tools[0].function.parameters"); "" when
    it names none."""
    try:
        parsed: Any = loads(body)
    except ValueError:
        return ""
    err = parsed.get("error") if isinstance(parsed, dict) else None
    param = err.get("param") if isinstance(err, dict) else None
    return param if isinstance(param, str) else ""


def _http(status: int, headers: Mapping[str, str], body: str, target: Target, secrets: Iterable[str]) -> HttpInfo:
    safe = redact_body(body, status, secrets)
    raw = retry_after_raw(headers)  # reported as sent, for the host, but never with a secret in it
    return HttpInfo(status, target.provider, target.endpoint, safe, None if raw is None else mask_keys(raw, secrets))


def refused(
    status: int,
    headers: Mapping[str, str],
    body: str,
    target: Target,
    secrets: Iterable[str],
    category: str,
    explanation: str,
) -> ProviderRefusal:
    """The refusal a format's ``classify`` found in an error answer: PROVIDER_REFUSAL with the answer kept
    (redacted) and the provider's words, secrets masked."""
    said = redact_body(explanation, None, secrets)
    return ProviderRefusal(target.model_id, category, said, http=_http(status, headers, body, target, secrets))


def classify_response(
    status: int,
    headers: Mapping[str, str],
    body: str,
    target: Target,
    secrets: Iterable[str],
    now: datetime,
) -> Retry | SidecarFailure:
    http = _http(status, headers, body, target, secrets)
    message, etype, code = _error_fields(redact_body(body, None, secrets))
    words = cap(message) or f"HTTP {status}"
    wait = parse_retry_after(headers, now)
    lowered = {k.lower(): v.strip().lower() for k, v in headers.items()}

    if status == 402 or _QUOTA.search(body):
        return QuotaExhausted(target.provider, target.account, target.model_id, words, http=http)
    if status == 529 or "overloaded_error" in (etype, code) or (not etype and "overloaded_error" in body):
        return Retry(RetrySignal.OVERLOAD, words, wait, http)
    if status == 429:
        return Retry(RetrySignal.RATE_LIMIT, words, wait, http)
    should_retry = lowered.get("x-should-retry")
    if should_retry == "true" or ((status == 408 or status >= 500) and should_retry != "false"):
        return Retry(RetrySignal.TRANSIENT, words, wait, http)
    if status in (401, 403):
        said = etype or code
        reason = f"HTTP {status} {'' if said == str(status) else said}".strip()  # Azure's code is the status
        detail = ProviderDetail(provider=target.provider, account=target.account, model=target.model_id)
        return Unauthorized(target.provider, reason, http=http, endpoint=target.endpoint, provider=detail)
    if status == 413 or _CONTEXT.search(code) or _CONTEXT.search(message):
        return ContextOverflow(target.provider, target.model_id, words, http=http)
    if status == 404:
        return ModelNotFound.at_provider(target.provider, target.upstream_model, target.model_id, words, http=http)
    if 400 <= status < 500:
        param = _error_param(body)  # the provider's name for it, in its wire format: as sent to it
        rule = f"the {target.provider} provider rejected the request (HTTP {status}: {words})"
        return InvalidInput(param or "body", "", rule, http=http, as_sent=bool(param))
    return ExternalService(target.provider, target.endpoint, words, http=http)
