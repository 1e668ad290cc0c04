"""The sidecar's own refusals of an RPC, as rich statuses every client already reads.

A refusal is not a failure of a model or a tool: the sidecar itself declines the call before any
work. It still travels the way CallModel's failures do (``status.to_status``: a packed
``sidecar.v1.Failure``, one ``ErrorInfo`` whose reason is the kind, ``RetryInfo`` when a wait is
known), so the clients of every language raise the kind below, never SYSTEM:

    refusal        gRPC code            Failure kind        RetryInfo   why
    overloaded     RESOURCE_EXHAUSTED   UPSTREAM_THROTTLE   yes         server.max_in_flight calls already in flight
    caller limited RESOURCE_EXHAUSTED   UPSTREAM_THROTTLE   yes         the caller is over its own limit
                                                                        (server.auth.tokens: server.callers)
                   INVALID_ARGUMENT     INVALID_INPUT       no          a call larger than its caller's whole
                                                                        tokens_per_minute
    draining       UNAVAILABLE          UPSTREAM_THROTTLE   yes         the process is shutting down (SIGTERM)
    unauthenticated UNAUTHENTICATED     UNAUTHORIZED        no          no valid bearer token (server.auth)
    undecodable    INVALID_ARGUMENT     INVALID_INPUT       no          the request bytes are not the method's message

The refusals both ports make (overloaded, draining) are built as failures in ``server.refusals``;
here they get their gRPC code. Messages never quote what the caller sent (a token, the bytes).
"""

from __future__ import annotations

import grpc
from google.rpc import status_pb2

from sidecar.core.details import InvalidInputDetail, ServiceDetail
from sidecar.core.kinds import FailureKind
from sidecar.core.taxonomy import InvalidInput, SidecarFailure, Unauthorized
from sidecar.server.grpc.status import to_status
from sidecar.server.refusals import SIDECAR_SERVICE, draining_failure, overloaded_failure

__all__ = ["caller_limited", "draining", "overloaded", "unauthenticated", "undecodable"]


def _status(failure: SidecarFailure, code: grpc.StatusCode) -> status_pb2.Status:
    """``to_status`` of the failure (which writes the explanation and every detail), with this code."""
    status = to_status(failure)
    status.code = code.value[0]
    return status


def overloaded(method: str, limit: int, retry_after_s: float) -> status_pb2.Status:
    """RESOURCE_EXHAUSTED: ``limit`` calls are in flight; retry after ``retry_after_s``."""
    return _status(overloaded_failure(method, limit, retry_after_s), grpc.StatusCode.RESOURCE_EXHAUSTED)


def caller_limited(failure: SidecarFailure) -> status_pb2.Status:
    """RESOURCE_EXHAUSTED: the caller is over its own limit (``callers.Callers.admit``'s refusal); a call
    that could never fit its limit keeps its own code (INVALID_INPUT: INVALID_ARGUMENT)."""
    if failure.kind is FailureKind.UPSTREAM_THROTTLE:
        return _status(failure, grpc.StatusCode.RESOURCE_EXHAUSTED)
    return to_status(failure)


def draining(method: str, retry_after_s: float) -> status_pb2.Status:
    """UNAVAILABLE: the process is shutting down, finishing the calls it has; another replica takes this one."""
    return _status(draining_failure(method, retry_after_s), grpc.StatusCode.UNAVAILABLE)


def unauthenticated(method: str) -> status_pb2.Status:
    """UNAUTHENTICATED: no ``authorization: Bearer`` metadata, or not one of the configured tokens."""
    failure = Unauthorized.worded(
        "The sidecar refused this call: it carries no valid bearer token "
        "(metadata 'authorization: Bearer <token>' with one of server.auth.tokens). "
        "An operator must fix the agent's configured token.",
        detail=ServiceDetail(service=SIDECAR_SERVICE, endpoint=method, detail="bearer token refused"),
    )
    return _status(failure, grpc.StatusCode.UNAUTHENTICATED)


def undecodable(method: str, message_type: str, size: int) -> status_pb2.Status:
    """INVALID_ARGUMENT: the ``size`` request bytes do not parse as ``message_type``."""
    rule = f"must be a serialized {message_type}"
    failure = InvalidInput.worded(
        f"The request to {method} could not be decoded as {message_type} ({size} bytes); {rule}.",
        detail=InvalidInputDetail(parameter="request", value=f"{size} bytes", rule=rule),
    )
    return _status(failure, grpc.StatusCode.INVALID_ARGUMENT)
