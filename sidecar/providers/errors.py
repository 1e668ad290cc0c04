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
    an answer only an operator can fix (OPERATOR_FIXES, below)   -> UNAUTHORIZED or MODEL_NOT_FOUND, with the fix
    401 / 403                                                    -> UNAUTHORIZED          (body blanked)
    context_length_exceeded, "prompt is too long", 413           -> CONTEXT_OVERFLOW
    404                                                          -> MODEL_NOT_FOUND (at the provider)
    other 4xx                                                    -> INVALID_INPUT (the provider's words as the rule)
    anything else                                                -> EXTERNAL_SERVICE
    connection failure, read timeout, reset (no response)        -> signal TRANSIENT, no http

Some 400s (and 403s) no change to the request can fix: the model is not served as the catalog names
it, or the account may not use the API from where the sidecar runs. Told to the model as INVALID_INPUT
it would "retry with different parameters" and waste its turns (told "fix the configured key", an
operator would check a key that is fine); ``for_operator`` finds them by the provider's own error name
(OpenAI's and Anthropic's ``error.type`` / ``error.code``, Gemini's ``error.status``, Bedrock's
``x-amzn-ErrorType``) and words, one table for every format (``OPERATOR_FIXES``)::

    format            status name                   words                                 kind
    openai,           400 invalid_request_error     "organization must be verified" (to   UNAUTHORIZED
      openai_responses    (403, 404 too)            stream, to use the model, to generate
                                                    reasoning summaries)
    openai,           403 unsupported_country_      "Country, region, or territory not    UNAUTHORIZED
      openai_responses    region_territory          supported"
    openai (Azure)    400 OperationNotSupported     "does not work with the specified     MODEL_NOT_FOUND
                                                    model"
    anthropic         400 invalid_request_error     "organization has been disabled"      UNAUTHORIZED
    gemini            400 FAILED_PRECONDITION       "User location is not supported"      UNAUTHORIZED
    gemini            400 FAILED_PRECONDITION       "not available in your country",      UNAUTHORIZED
                                                    "enable billing"
    bedrock_converse  400 ValidationException       "on-demand throughput isn't           MODEL_NOT_FOUND
                                                    supported" (an inference profile)
    bedrock_converse  400 ValidationException       "provided model identifier is         MODEL_NOT_FOUND
                                                    invalid" (not in this region)
    bedrock_converse  403 AccessDeniedException     "don't have access to the model"      UNAUTHORIZED
                                                    (a model not enabled for the account)

Each is uncorrectable, its explanation says what an operator must change (the catalog's
``upstream_model``, the account, where the sidecar runs), and both kinds are in a route's default
``move_on`` and charge the deployment's circuit (``core.routing.DEPLOYMENT_FAULTS``): the next call is
as doomed as this one until an operator acts.
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

__all__ = ["OPERATOR_FIXES", "OperatorFix", "Target", "classify_response", "for_operator", "refused"]

_QUOTA = re.compile(
    r"insufficient_quota|credit balance is too low|billing_hard_limit|exceeded your current quota", re.I
)
_CONTEXT = re.compile(
    r"context_length_exceeded|prompt is too long|maximum context length|context window|too many tokens|"
    r"input is too long|request_too_large",
    re.I,
)


@dataclass(frozen=True, slots=True)
class OperatorFix:
    """A provider's 400 that only an operator can fix (the module's table): its statuses, the provider's name
    for the error, its words, and what to change (``account``: the account, an UNAUTHORIZED; else the
    catalog entry, a MODEL_NOT_FOUND)."""

    formats: tuple[str, ...]
    statuses: tuple[int, ...]
    name: str
    words: re.Pattern[str]
    account: bool
    fix: str


OPERATOR_FIXES: tuple[OperatorFix, ...] = (
    OperatorFix(
        ("openai", "openai_responses"),
        (400, 403, 404),
        "invalid_request_error",
        re.compile(r"organization must be verified", re.I),
        True,
        "verify the OpenAI organization of the configured key (its organization settings), or route the model "
        "to another provider",
    ),
    OperatorFix(
        ("openai", "openai_responses"),
        (403,),
        "unsupported_country_region_territory",
        re.compile(r"not supported", re.I),
        True,
        "run the sidecar (its egress) in a country or region OpenAI serves, or route the model to another provider",
    ),
    OperatorFix(
        ("openai", "openai_responses"),
        (400,),
        "OperationNotSupported",
        re.compile(r"does not work with the specified model", re.I),
        False,
        "point the catalog's upstream_model at a deployment of a model that serves this API",
    ),
    OperatorFix(
        ("anthropic",),
        (400,),
        "invalid_request_error",
        re.compile(r"organization has been disabled", re.I),
        True,
        "re-enable the Anthropic organization of the configured key, or configure another key",
    ),
    OperatorFix(
        ("gemini",),
        (400,),
        "FAILED_PRECONDITION",
        re.compile(r"location is not supported", re.I),
        True,
        "run the sidecar (its egress) in a region Gemini serves, or route the model to another provider",
    ),
    OperatorFix(
        ("gemini",),
        (400,),
        "FAILED_PRECONDITION",
        re.compile(r"not available in your country|enable billing", re.I),
        True,
        "enable billing on the project of the configured key, or route the model to another provider",
    ),
    OperatorFix(
        ("bedrock_converse",),
        (400,),
        "ValidationException",
        re.compile(r"on-demand throughput (?:is ?n[o'’]t|is not) supported|doesn'?t support on-demand", re.I),
        False,
        "set the catalog's upstream_model to the ID or ARN of an inference profile that contains the model",
    ),
    OperatorFix(
        ("bedrock_converse",),
        (400,),
        "ValidationException",
        re.compile(r"provided model identifier is invalid", re.I),
        False,
        "check the catalog's upstream_model, and that the model is offered in the provider's region and "
        "enabled for the account",
    ),
    OperatorFix(
        ("bedrock_converse",),
        (403,),
        "AccessDeniedException",
        re.compile(r"do(?:n'?t| not) have access to the model", re.I),
        True,
        "enable the model for the account (Bedrock's model access, in the provider's region), or change the "
        "catalog's upstream_model",
    ),
)
"""The 400s no change to the request can fix, every format's (the module's table)."""


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


def _error_names(body: str) -> tuple[str, ...]:
    """The names an error body gives its error: ``error.type``, ``error.code`` (OpenAI, Anthropic, Azure) and
    ``error.status`` (Google's); () when it gives none."""
    try:
        parsed: Any = loads(body)
    except ValueError:
        return ()
    err = parsed.get("error") if isinstance(parsed, dict) else None
    if not isinstance(err, dict):
        return ()
    return tuple(v for v in (err.get("type"), err.get("code"), err.get("status")) if isinstance(v, str) and v)


def for_operator(
    names: Iterable[str], status: int, message: str, target: Target, http: HttpInfo | None, secrets: Iterable[str]
) -> ModelNotFound | Unauthorized | None:
    """The failure a provider's answer is when only an operator can fix it (``OPERATOR_FIXES``: its
    ``status``, one of the error's ``names``, its ``message``), explained with the fix; None when it is not
    one of them."""
    named = set(names)
    row = next(
        (r for r in OPERATOR_FIXES if status in r.statuses and r.name in named and r.words.search(message)), None
    )
    if row is None:
        return None
    said = cap(redact_body(message, None, secrets)) or f"HTTP {status} {row.name}"
    if row.account:
        detail = ProviderDetail(
            provider=target.provider, account=target.account, model=target.model_id, provider_message=said
        )
        return Unauthorized.account(target.provider, target.endpoint, said, row.fix, http=http, detail=detail)
    return ModelNotFound.at_provider(
        target.provider, target.upstream_model, target.model_id, said, http=http, fix=row.fix
    )


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
    operator = for_operator(_error_names(body), status, message, target, http, secrets)
    if operator is not None:
        return operator
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
