"""The one mapping from what a tool call saw to the taxonomy, by what the model should do.

    transport fault (refused, dns, reset, timeout)  -> EXTERNAL_SERVICE, no http; after the request went out
                                                       (reset, read timeout) it may have been delivered, and the
                                                       message says so unless the call is idempotent
    2xx                                              -> success (a search with nothing is a valid empty result)
    a configured quirk of the service                -> the kind it names (an existing kind, never a new one)
    400 / 413 / 422                                  -> INVALID_INPUT (correctable)
  401 / 403  -> UNAUTHORIZED, or UPSTREAM_THROTTLE when body/headers say throttling
    404                                              -> RESOURCE_NOT_FOUND on a fetch; an empty result on a search
    429                                              -> UPSTREAM_THROTTLE, Retry-After kept raw
    500 and above, and any status not listed         -> EXTERNAL_SERVICE

ExecuteTool and ClassifyFailure both call ``classify``: identical answers give identical Failures,
but for a transport fault after the request went out: ExecuteTool knows whether the tool is
idempotent, a report does not (its message says to check "unless it is idempotent").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from sidecar.core.backoff import parse_retry_after, retry_after_raw
from sidecar.core.details import HttpInfo, Trigger
from sidecar.core.json_depth import loads
from sidecar.core.kinds import FailureKind, TransportFault
from sidecar.core.redact import mask_keys, redact_body
from sidecar.core.settings import Quirk
from sidecar.core.taxonomy import (
    ExternalService,
    InvalidInput,
    PermissionDenied,
    ResourceNotFound,
    SidecarFailure,
    Unauthorized,
    UpstreamThrottle,
)
from sidecar.core.text import cap

__all__ = [
    "FAULT_WORDS",
    "NEVER_REACHED",
    "Observation",
    "classify",
    "is_service_failure",
    "is_transient",
    "said",
    "trigger_of",
]

FAULT_WORDS: dict[TransportFault, str] = {
    TransportFault.REFUSED: "connection refused",
    TransportFault.TIMEOUT: "no response in time",
    TransportFault.RESET: "connection reset",
    TransportFault.DNS: "the host name did not resolve",
    TransportFault.UNSPECIFIED: "transport failure",
}
TRIGGER_RETRY_AFTER_CHARS = 100
"""A circuit keeps this much of the Retry-After that opened it (a real one is under 30 characters)."""
NEVER_REACHED = frozenset({TransportFault.REFUSED, TransportFault.DNS})
"""Reported faults that certainly came before the request went out (a reported timeout may be a read's)."""
_THROTTLE_WORDS = re.compile(r"(?i)rate.?limit|too many requests|throttl|slow down|quota exceeded|request limit")
_THROTTLE_HEADERS = ("retry-after", "x-ratelimit-remaining", "ratelimit-remaining", "x-rate-limit-remaining")


@dataclass(frozen=True, slots=True)
class Observation:
    """What one tool call saw: a response, or a transport fault."""

    service: str
    endpoint: str
    kind: str  # "search" | "fetch"
    parameter: str = ""
    value: str = ""
    resource_type: str = "resource"
    status: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    body: str = ""
    fault: TransportFault = TransportFault.UNSPECIFIED
    fault_detail: str = ""
    may_have_reached: bool | None = None
    """Whether a transport fault came after the request went out; None (a report): judged by the fault."""
    idempotent: bool | None = None
    """Whether the call may simply be repeated; None (a report): not known."""


def _fault_words(fault: TransportFault) -> str:
    return FAULT_WORDS.get(fault, FAULT_WORDS[TransportFault.UNSPECIFIED])


def said(body: str) -> str:
    """What the service said: the error message inside a JSON body, else the text."""
    try:
        parsed = loads(body)
    except ValueError:
        return body.strip()
    for path in (("error", "message"), ("error",), ("message",), ("detail",), ("error_description",), ("title",)):
        node: object = parsed
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, str) and node.strip():
            return node.strip()
    return body.strip()


def _http(obs: Observation, secrets: Iterable[str]) -> HttpInfo:
    assert obs.status is not None
    return HttpInfo(
        status_code=obs.status,
        service=obs.service,
        endpoint=obs.endpoint,
        body=redact_body(obs.body, obs.status, secrets),
        retry_after_raw=_raw_retry_after(obs.headers, secrets),
    )


def _raw_retry_after(headers: Mapping[str, str], secrets: Iterable[str]) -> str | None:
    """Retry-After as sent, for the host to read, but with any secret or key-shaped token in it masked."""
    raw = retry_after_raw(headers)
    return None if raw is None else mask_keys(raw, secrets)


def _says_throttle(obs: Observation) -> bool:
    if _THROTTLE_WORDS.search(obs.body):
        return True
    lowered = {k.lower(): v for k, v in obs.headers.items()}
    if "retry-after" in lowered:
        return True
    return any(lowered.get(h, "").strip() == "0" for h in _THROTTLE_HEADERS[1:])


def _quirk(obs: Observation, quirks: Iterable[Quirk]) -> Quirk | None:
    lowered = {k.lower() for k in obs.headers}
    for q in quirks:
        if q.status is not None and q.status != obs.status:
            continue
        if q.body_contains is not None and q.body_contains.lower() not in obs.body.lower():
            continue
        if q.header is not None and q.header.lower() not in lowered:
            continue
        return q
    return None


def classify(
    obs: Observation, quirks: Iterable[Quirk] = (), secrets: Iterable[str] = (), now: datetime | None = None
) -> SidecarFailure | None:
    """The failure ``obs`` means, or None for a success (including a valid empty search result)."""
    if obs.status is None:
        detail = obs.fault_detail or _fault_words(obs.fault)
        sent = obs.may_have_reached if obs.may_have_reached is not None else obs.fault not in NEVER_REACHED
        return ExternalService(obs.service, obs.endpoint, detail, fault=obs.fault, sent=sent, idempotent=obs.idempotent)
    status = obs.status
    if 200 <= status < 300:
        return None
    http = _http(obs, secrets)
    words = cap(said(http.body)) if http.body else f"HTTP {status}"
    wait = parse_retry_after(obs.headers, now) if now is not None else None
    quirk = _quirk(obs, quirks)
    if quirk is not None:
        return _quirk_failure(obs, quirk, http, quirk.detail or words, wait)
    if status in (400, 413, 422):
        rule = (
            f"the {obs.service} service rejected it at {obs.endpoint} (HTTP {status}: {words}); send a corrected value"
        )
        return InvalidInput(obs.parameter or "arguments", obs.value, rule, http=http)
    if status in (401, 403):
        if _says_throttle(obs):
            words = cap(said(redact_body(obs.body, None, secrets))) or words
            return UpstreamThrottle(obs.service, obs.endpoint, words, http=http, retry_after=wait)
        return Unauthorized(obs.service, "HTTP " + str(status), http=http, endpoint=obs.endpoint)
    if status == 404:
        if obs.kind == "search":
            return None
        return ResourceNotFound(
            obs.resource_type, obs.value, http=http, where=f"the {obs.service} service ({obs.endpoint})"
        )
    if status == 429:
        return UpstreamThrottle(obs.service, obs.endpoint, words, http=http, retry_after=wait)
    return ExternalService(obs.service, obs.endpoint, words, http=http, retry_after=wait)


def _quirk_failure(obs: Observation, quirk: Quirk, http: HttpInfo, words: str, wait: float | None) -> SidecarFailure:
    kind = quirk.kind
    if kind == "INVALID_INPUT":
        rule = f"the {obs.service} service rejected it at {obs.endpoint} ({words}); send a corrected value"
        return InvalidInput(obs.parameter or "arguments", obs.value, rule, http=http)
    if kind == "RESOURCE_NOT_FOUND":
        return ResourceNotFound(
            obs.resource_type, obs.value, http=http, where=f"the {obs.service} service ({obs.endpoint})"
        )
    if kind == "UPSTREAM_THROTTLE":
        return UpstreamThrottle(obs.service, obs.endpoint, words, http=http, retry_after=wait)
    if kind == "UNAUTHORIZED":
        return Unauthorized(obs.service, words, http=http, endpoint=obs.endpoint)
    if kind == "PERMISSION_DENIED":
        return PermissionDenied(
            f"The {obs.service} service denied access at {obs.endpoint}: {words}.", obs.endpoint, http=http
        )
    return ExternalService(obs.service, obs.endpoint, words, http=http, retry_after=wait)


def is_service_failure(failure: SidecarFailure) -> bool:
    """Failures charged to the service's throttle and circuit."""
    return failure.kind in (FailureKind.EXTERNAL_SERVICE, FailureKind.UPSTREAM_THROTTLE)


def is_transient(obs: Observation, failure: SidecarFailure) -> bool:
    """Faults worth re-sending: transport faults, 5xx, and throttles (429 and its look-alikes)."""
    if failure.kind == FailureKind.UPSTREAM_THROTTLE:
        return True
    return failure.kind == FailureKind.EXTERNAL_SERVICE and (obs.status is None or obs.status >= 500)


def trigger_of(obs: Observation, failure: SidecarFailure) -> Trigger:
    """What a circuit records of the response that charged it."""
    if obs.status is None:
        return Trigger(None, obs.fault_detail or _fault_words(obs.fault))
    body = failure.http.body if failure.http else ""
    raw = failure.http.retry_after_raw if failure.http else None  # masked like the rest of the failure
    asked = None if raw is None else cap(raw, TRIGGER_RETRY_AFTER_CHARS)
    return Trigger(obs.status, cap(said(body)) if body else f"HTTP {obs.status}", asked)
