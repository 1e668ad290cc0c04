"""A failure as the HTTP fronts answer it: the status an SDK reads as its own exception class.

Each failure has a status and a code (OpenAI's ``error.code`` words); each format's front turns the
code into its own error type, and two into a status of its own (``Front.answer``: the type columns
below are ``providers/formats/openai_chat/front.py``'s and ``anthropic_messages/front.py``'s)::

    kind                          status   code                        OpenAI error.type      Anthropic (status) type
    INVALID_INPUT, GUARDRAIL      400      invalid_value               invalid_request_error  invalid_request_error
    TOKEN_ESTIMATE_EXCEEDS_LIMIT, 400      context_length_exceeded     invalid_request_error  invalid_request_error
      CONTEXT_OVERFLOW
    PROVIDER_REFUSAL              400      content_policy_violation    invalid_request_error  invalid_request_error
    OUTPUT_TRUNCATED              400      output_truncated            invalid_request_error  invalid_request_error
    PERMISSION_DENIED             403      permission_denied           permission_error       permission_error
    MODEL_NOT_FOUND,              404      model_not_found,            invalid_request_error  not_found_error
      RESOURCE_NOT_FOUND                     resource_not_found
    QUOTA_EXHAUSTED               429      insufficient_quota          insufficient_quota     (402) billing_error
    SPEND_CAP_EXCEEDED            429      spend_cap_exceeded          insufficient_quota     (402) billing_error
    UPSTREAM_THROTTLE             429      rate_limit_exceeded         rate_limit_error       rate_limit_error
    UPSTREAM_RETRIES_EXHAUSTED
      after rate limits           429      rate_limit_exceeded         rate_limit_error       rate_limit_error
      after overloads             503      overloaded                  server_error           (529) overloaded_error
      after transient faults      503      upstream_unavailable        server_error           api_error
    CIRCUIT_OPEN                  503      circuit_open                server_error           api_error
    EXTERNAL_SERVICE              502      upstream_error              server_error           api_error
    UNAUTHORIZED                  502      upstream_unauthorized       server_error           api_error
    JSON_PARSE,                   502      invalid_model_output        server_error           api_error
      RESPONSE_VALIDATION
    STREAM_INTERRUPTED            502      stream_interrupted          server_error           api_error
    SYSTEM                        500      internal_error              server_error           api_error
    JOB_TIMEOUT                   504      deadline_exceeded           timeout                timeout_error
    JOB_CANCELLED                 499      cancelled                   cancelled              api_error
    the sidecar's own refusals
      a caller over its limit     429      rate_limit_exceeded         rate_limit_error       rate_limit_error
        (server.auth.tokens)
      shed (server.max_in_flight) 503      overloaded                  server_error           (529) overloaded_error
      draining (SIGTERM)          503      draining                    server_error           api_error

The Anthropic status is the same unless given in brackets. The SDKs pick their exception class by
status alone (openai: BadRequestError 400, PermissionDeniedError 403, NotFoundError 404,
RateLimitError 429, InternalServerError >= 500; anthropic the same, PaymentRequiredError 402,
ServiceUnavailableError 503, GatewayTimeoutError 504, OverloadedError 529).

UNAUTHORIZED is 502, not 401: it means the *sidecar's* key was refused upstream, which the
caller can neither cause nor fix (an operator must); a 401 would raise the SDK's
AuthenticationError and send the agent's owner to check a key that is fine. A caller's own
missing or wrong token is the port's 401 (``access.py``).

Every failure answer carries::

    x-sidecar-attempts    the upstream attempts the call made
    retry-after,          when the failure knows a wait (RetryInfo): whole seconds (rounded up), and
      retry-after-ms        milliseconds (which the SDKs read first)
    x-should-retry        false: the sidecar already spent the call's retry budget (or retrying cannot
                          help), so an SDK that honours it (openai, anthropic) does not multiply
                          attempts; true only for the sidecar's own refusals before any work
                          (a caller's limit, shed, draining), where a retry costs no upstream attempt
    error.sidecar         kind, correctable, message, explanation (what the model reads, with the retry
                          line), retry_line, attempts, retry_after_s, hops, and the whole sidecar.v1
                          Failure in its JSON mapping (``failure``)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format

from sidecar.core.correctability import CORRECTABLE_LINE, UNCORRECTABLE_LINE
from sidecar.core.details import Hop, InvalidInputDetail, RetryDetail, ServiceDetail
from sidecar.core.kinds import FailureKind, RetrySignal
from sidecar.core.taxonomy import SidecarFailure
from sidecar.providers.formats.protocol import Front
from sidecar.server import convert
from sidecar.server.http.envelope import ATTEMPTS_HEADER, SHOULD_RETRY_HEADER
from sidecar.server.refusals import CALLER_LIMIT_DETAIL, DRAINING_DETAIL, SIDECAR_SERVICE

__all__ = ["Answer", "answer_of", "error_of", "failure_extension", "failure_headers", "hop_json"]


@dataclass(frozen=True, slots=True)
class Answer:
    """How one failure is answered at an HTTP door: its status and code (a format's front makes the rest)."""

    status: int
    code: str
    should_retry: bool = False


_K = FailureKind
_RATE = Answer(429, "rate_limit_exceeded")
_ANSWERS: dict[FailureKind, Answer] = {
    _K.INVALID_INPUT: Answer(400, "invalid_value"),
    _K.GUARDRAIL: Answer(400, "invalid_value"),
    _K.TOKEN_ESTIMATE_EXCEEDS_LIMIT: Answer(400, "context_length_exceeded"),
    _K.CONTEXT_OVERFLOW: Answer(400, "context_length_exceeded"),
    _K.PROVIDER_REFUSAL: Answer(400, "content_policy_violation"),
    _K.OUTPUT_TRUNCATED: Answer(400, "output_truncated"),
    _K.PERMISSION_DENIED: Answer(403, "permission_denied"),
    _K.MODEL_NOT_FOUND: Answer(404, "model_not_found"),
    _K.RESOURCE_NOT_FOUND: Answer(404, "resource_not_found"),
    _K.QUOTA_EXHAUSTED: Answer(429, "insufficient_quota"),
    _K.SPEND_CAP_EXCEEDED: Answer(429, "spend_cap_exceeded"),
    _K.UPSTREAM_THROTTLE: _RATE,
    _K.CIRCUIT_OPEN: Answer(503, "circuit_open"),
    _K.EXTERNAL_SERVICE: Answer(502, "upstream_error"),
    _K.UNAUTHORIZED: Answer(502, "upstream_unauthorized"),
    _K.JSON_PARSE: Answer(502, "invalid_model_output"),
    _K.RESPONSE_VALIDATION: Answer(502, "invalid_model_output"),
    _K.STREAM_INTERRUPTED: Answer(502, "stream_interrupted"),
    _K.SYSTEM: Answer(500, "internal_error"),
    _K.JOB_TIMEOUT: Answer(504, "deadline_exceeded"),
    _K.JOB_CANCELLED: Answer(499, "cancelled"),
}
_EXHAUSTED: dict[RetrySignal, Answer] = {
    RetrySignal.RATE_LIMIT: _RATE,
    RetrySignal.OVERLOAD: Answer(503, "overloaded"),
    RetrySignal.TRANSIENT: Answer(503, "upstream_unavailable"),
}
_SHED = Answer(503, "overloaded", should_retry=True)
_DRAINING = Answer(503, "draining", should_retry=True)
_CALLER_LIMITED = Answer(429, "rate_limit_exceeded", should_retry=True)


def answer_of(failure: SidecarFailure) -> Answer:
    """The row of the module's table for ``failure``."""
    detail = failure.detail
    if isinstance(detail, ServiceDetail) and detail.service == SIDECAR_SERVICE:  # the sidecar's own refusals
        if detail.detail.startswith(CALLER_LIMIT_DETAIL):
            return _CALLER_LIMITED
        return _DRAINING if detail.detail == DRAINING_DETAIL else _SHED
    if failure.kind is FailureKind.UPSTREAM_RETRIES_EXHAUSTED:
        signal = detail.last_signal if isinstance(detail, RetryDetail) else RetrySignal.TRANSIENT
        return _EXHAUSTED.get(signal, _EXHAUSTED[RetrySignal.TRANSIENT])
    return _ANSWERS.get(failure.kind, _ANSWERS[FailureKind.SYSTEM])


def error_of(front: Front, failure: SidecarFailure, answer: Answer) -> tuple[int, dict[str, Any]]:
    """The status and the error object ``front``'s format answers ``failure`` with."""
    status, error_type = front.answer(answer.code, answer.status)
    param = failure.detail.parameter if isinstance(failure.detail, InvalidInputDetail) else None
    body = front.error_body(
        failure.message, error_type, code=answer.code, param=param, extension=failure_extension(failure)
    )
    return status, body


def hop_json(hop: Hop) -> dict[str, Any]:
    return {
        "deployment": hop.deployment,
        "kind": hop.kind.name,
        "attempts": hop.attempts,
        "reason": hop.reason,
        "skipped": hop.skipped,
        "hedge": hop.hedge,
        "cancelled": hop.cancelled,
    }


def failure_extension(failure: SidecarFailure) -> dict[str, Any]:
    """``error.sidecar``: what the sidecar knows of the failure (the module's docstring)."""
    out: dict[str, Any] = {
        "kind": failure.kind_name,
        "correctable": failure.correctable,
        "message": failure.message,
        "explanation": failure.explain_to_llm(),
        "retry_line": CORRECTABLE_LINE if failure.correctable else UNCORRECTABLE_LINE,
        "attempts": failure.attempts,
    }
    if failure.retry_after is not None:
        out["retry_after_s"] = failure.retry_after
    if failure.hops:
        out["hops"] = [hop_json(h) for h in failure.hops]
    out["failure"] = json_format.MessageToDict(convert.failure(failure), preserving_proto_field_name=True)
    return out


def failure_headers(failure: SidecarFailure, answer: Answer) -> dict[str, str]:
    """``x-sidecar-attempts``, ``x-should-retry`` and, when a wait is known, ``retry-after(-ms)``."""
    headers = {ATTEMPTS_HEADER: str(failure.attempts), SHOULD_RETRY_HEADER: "true" if answer.should_retry else "false"}
    wait = failure.retry_after
    if wait is not None and math.isfinite(wait) and wait >= 0:
        headers["retry-after"] = str(math.ceil(wait))
        headers["retry-after-ms"] = str(round(wait * 1000))
    return headers
