"""The sidecar's own refusals, as failures, whichever port the call came in by.

A refusal is not a failure of a model or a tool: the sidecar itself declines the call before any
work (the in-flight limit, ``admission.Admission``; a caller's own limit, ``callers.Callers``). Each
port answers it in its own shape: the gRPC port as a rich status (``grpc.refusals``), the HTTP port
as its status and error body (``http.failures``), which tells a refusal by the service its detail
names, ``SIDECAR_SERVICE``.
"""

from __future__ import annotations

from sidecar.core.details import ServiceDetail
from sidecar.core.taxonomy import SidecarFailure, UpstreamThrottle

__all__ = [
    "CALLER_LIMIT_DETAIL",
    "DRAINING_DETAIL",
    "SIDECAR_SERVICE",
    "caller_limited_failure",
    "draining_failure",
    "overloaded_failure",
]

SIDECAR_SERVICE = "sidecar"
"""The service named in a refusal's detail: the sidecar itself, not anything behind it."""


DRAINING_DETAIL = "draining"
"""The ServiceDetail.detail of the refusal while the process drains (each port answers it as its own kind)."""
CALLER_LIMIT_DETAIL = "caller limit"
"""How the ServiceDetail.detail of a caller's refusal at its own limit begins (``callers.Callers``): the HTTP
doors answer it 429, as a provider's rate limit, not 503 as a shed call."""


def overloaded_failure(method: str, limit: int, retry_after_s: float) -> SidecarFailure:
    """The failure of a call shed at the in-flight limit (the HTTP doors answer it in their own shape)."""
    return UpstreamThrottle.worded(
        f"The sidecar is serving its limit of {limit} calls at once (server.max_in_flight) "
        f"and refused this one; retry after {retry_after_s:g} s.",
        detail=ServiceDetail(service=SIDECAR_SERVICE, endpoint=method, detail=f"max_in_flight {limit}"),
        retry_after=retry_after_s,
    )


def draining_failure(method: str, retry_after_s: float) -> SidecarFailure:
    """The failure of a call refused while the process drains (the HTTP doors answer it in their own shape)."""
    return UpstreamThrottle.worded(
        "The sidecar is shutting down: it finishes the calls in flight and takes no new ones; "
        f"send this one to another replica, or retry after {retry_after_s:g} s.",
        detail=ServiceDetail(service=SIDECAR_SERVICE, endpoint=method, detail=DRAINING_DETAIL),
        retry_after=retry_after_s,
    )


def caller_limited_failure(method: str, caller: str, limit: str, value: float, retry_after_s: float) -> SidecarFailure:
    """The failure of a call refused at its caller's own limit (``limit``: ``requests_per_second`` or
    ``tokens_per_minute`` of the caller's ``server.auth.tokens`` entry). Names the caller, never its token."""
    unit = "requests a second" if limit == "requests_per_second" else "tokens a minute"
    return UpstreamThrottle.worded(
        f"Caller {caller} is over its limit of {value:g} {unit} (server.auth.tokens {limit}) and the sidecar "
        f"refused this call before any work; retry after {retry_after_s:g} s.",
        detail=ServiceDetail(
            service=SIDECAR_SERVICE, endpoint=method, detail=f"{CALLER_LIMIT_DETAIL} {caller}: {limit} {value:g}"
        ),
        retry_after=retry_after_s,
    )
