"""The sidecar's own refusals, as failures, whichever port the call came in by.

A refusal is not a failure of a model or a tool: the sidecar itself declines the call before any
work (the in-flight limit, ``admission.Admission``). Each port answers it in its own shape: the
gRPC port as a rich status (``grpc.refusals``), the HTTP port as its status and error body
(``http.failures``), which tells a refusal by the service its detail names, ``SIDECAR_SERVICE``.
"""

from __future__ import annotations

from sidecar.core.details import ServiceDetail
from sidecar.core.taxonomy import SidecarFailure, UpstreamThrottle

__all__ = ["DRAINING_DETAIL", "SIDECAR_SERVICE", "draining_failure", "overloaded_failure"]

SIDECAR_SERVICE = "sidecar"
"""The service named in a refusal's detail: the sidecar itself, not anything behind it."""


DRAINING_DETAIL = "draining"
"""The ServiceDetail.detail of the refusal while the process drains (each port answers it as its own kind)."""


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
