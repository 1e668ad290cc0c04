"""CallModel failures rebuilt from the gRPC status details: one exception class per kind.

SidecarError                       kind, correctable, message, explanation, http, retry_after,
├── CorrectableError               attempts, detail, hops, grpc_code, failure (the sidecar.v1.Failure)
│   └── InvalidInputError, ResourceNotFoundError, GuardrailError, JsonParseError,
│       ResponseValidationError
└── UncorrectableError
    └── ExternalServiceError, UpstreamThrottleError, UnauthorizedError, PermissionDeniedError,
        SystemFailureError, CircuitOpenError, UpstreamRetriesExhaustedError, QuotaExhaustedError,
        SpendCapExceededError, ModelNotFoundError, ProviderRefusalError,
        TokenEstimateExceedsLimitError, ContextOverflowError, OutputTruncatedError,
        JobTimeoutError, JobCancelledError, StreamInterruptedError (+ stream, partial_text)

Which kinds are correctable and the two retry lines are read from the contract itself: the options
of ``FailureKind`` in the generated stubs (``(sidecar.v1.correctable)``, ``correctable_line``,
``uncorrectable_line``).
"""

from __future__ import annotations

from typing import Any

import grpc
from google.rpc import error_details_pb2, status_pb2
from sidecar_contract.v1 import sidecar_pb2 as pb

__all__ = [
    "CORRECTABLE_KINDS",
    "CORRECTABLE_LINE",
    "UNCORRECTABLE_LINE",
    "CircuitOpenError",
    "ContextOverflowError",
    "CorrectableError",
    "ExternalServiceError",
    "GuardrailError",
    "InvalidInputError",
    "JobCancelledError",
    "JobTimeoutError",
    "JsonParseError",
    "ModelNotFoundError",
    "OutputTruncatedError",
    "PermissionDeniedError",
    "ProviderRefusalError",
    "QuotaExhaustedError",
    "ResourceNotFoundError",
    "ResponseValidationError",
    "SidecarError",
    "SpendCapExceededError",
    "StreamInterruptedError",
    "SystemFailureError",
    "TokenEstimateExceedsLimitError",
    "UnauthorizedError",
    "UncorrectableError",
    "UpstreamRetriesExhaustedError",
    "UpstreamThrottleError",
    "error_class",
    "from_failure",
    "from_rpc_error",
]


def _options(descriptor: Any) -> Any:
    """A descriptor's options. Untyped: the stubs (protoc's .pyi) type an extension as a plain
    FieldDescriptor, which ``Extensions[...]`` is not typed to take."""
    return descriptor.GetOptions()


_KINDS = pb.FailureKind.DESCRIPTOR
CORRECTABLE_KINDS = frozenset(value.number for value in _KINDS.values if _options(value).Extensions[pb.correctable])
"""The kinds the contract marks ``(sidecar.v1.correctable)``: a corrected call may succeed."""
CORRECTABLE_LINE: str = _options(_KINDS).Extensions[pb.correctable_line]
"""The line the model reads after a correctable failure's message (the contract's ``correctable_line``)."""
UNCORRECTABLE_LINE: str = _options(_KINDS).Extensions[pb.uncorrectable_line]
"""The line the model reads after an uncorrectable failure's message (the contract's ``uncorrectable_line``)."""


class SidecarError(Exception):
    """A failure of the sidecar's taxonomy, as the client sees it."""

    kind: int = pb.FAILURE_KIND_UNSPECIFIED

    def __init__(self, failure: pb.Failure, grpc_code: grpc.StatusCode | None = None) -> None:
        super().__init__(failure.message)
        self.failure = failure
        self.grpc_code = grpc_code

    @property
    def kind_name(self) -> str:
        return pb.FailureKind.Name(self.failure.kind).removeprefix("FAILURE_KIND_")

    @property
    def correctable(self) -> bool:
        return self.failure.correctable

    @property
    def message(self) -> str:
        return self.failure.message

    @property
    def explanation(self) -> str:
        """Exactly what the model should read."""
        return self.failure.explanation

    @property
    def http(self) -> pb.HttpDetail | None:
        return self.failure.http if self.failure.HasField("http") else None

    @property
    def retry_after(self) -> float | None:
        """Seconds to wait before the same call could succeed, when known."""
        if not self.failure.HasField("retry_after"):
            return None
        return self.failure.retry_after.ToTimedelta().total_seconds()

    @property
    def attempts(self) -> int:
        return self.failure.attempts

    @property
    def detail(self) -> Any:
        """The kind's structured detail message, or None."""
        field = self.failure.WhichOneof("detail")
        return getattr(self.failure, field) if field else None

    @property
    def hops(self) -> list[pb.Hop]:
        """When the model id is a route: every deployment tried, in order (the last one failed so)."""
        return list(self.failure.hops)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class CorrectableError(SidecarError):
    """A corrected call may succeed."""


class UncorrectableError(SidecarError):
    """Only another approach can help."""


def _make(name: str, kind: int) -> type[SidecarError]:
    base = CorrectableError if kind in CORRECTABLE_KINDS else UncorrectableError
    return type(name, (base,), {"kind": kind, "__doc__": f"FAILURE_KIND_{pb.FailureKind.Name(kind)[13:]}."})


InvalidInputError = _make("InvalidInputError", pb.FAILURE_KIND_INVALID_INPUT)
ResourceNotFoundError = _make("ResourceNotFoundError", pb.FAILURE_KIND_RESOURCE_NOT_FOUND)
GuardrailError = _make("GuardrailError", pb.FAILURE_KIND_GUARDRAIL)
JsonParseError = _make("JsonParseError", pb.FAILURE_KIND_JSON_PARSE)
ResponseValidationError = _make("ResponseValidationError", pb.FAILURE_KIND_RESPONSE_VALIDATION)
ExternalServiceError = _make("ExternalServiceError", pb.FAILURE_KIND_EXTERNAL_SERVICE)
UpstreamThrottleError = _make("UpstreamThrottleError", pb.FAILURE_KIND_UPSTREAM_THROTTLE)
UnauthorizedError = _make("UnauthorizedError", pb.FAILURE_KIND_UNAUTHORIZED)
PermissionDeniedError = _make("PermissionDeniedError", pb.FAILURE_KIND_PERMISSION_DENIED)
SystemFailureError = _make("SystemFailureError", pb.FAILURE_KIND_SYSTEM)
CircuitOpenError = _make("CircuitOpenError", pb.FAILURE_KIND_CIRCUIT_OPEN)
UpstreamRetriesExhaustedError = _make("UpstreamRetriesExhaustedError", pb.FAILURE_KIND_UPSTREAM_RETRIES_EXHAUSTED)
QuotaExhaustedError = _make("QuotaExhaustedError", pb.FAILURE_KIND_QUOTA_EXHAUSTED)
SpendCapExceededError = _make("SpendCapExceededError", pb.FAILURE_KIND_SPEND_CAP_EXCEEDED)
ModelNotFoundError = _make("ModelNotFoundError", pb.FAILURE_KIND_MODEL_NOT_FOUND)
ProviderRefusalError = _make("ProviderRefusalError", pb.FAILURE_KIND_PROVIDER_REFUSAL)
TokenEstimateExceedsLimitError = _make("TokenEstimateExceedsLimitError", pb.FAILURE_KIND_TOKEN_ESTIMATE_EXCEEDS_LIMIT)
ContextOverflowError = _make("ContextOverflowError", pb.FAILURE_KIND_CONTEXT_OVERFLOW)
OutputTruncatedError = _make("OutputTruncatedError", pb.FAILURE_KIND_OUTPUT_TRUNCATED)
JobTimeoutError = _make("JobTimeoutError", pb.FAILURE_KIND_JOB_TIMEOUT)
JobCancelledError = _make("JobCancelledError", pb.FAILURE_KIND_JOB_CANCELLED)


class StreamInterruptedError(UncorrectableError):
    """FAILURE_KIND_STREAM_INTERRUPTED: a stream was cut after deltas had reached the caller.

    Not restarted (the call's ``mid_stream`` policy, or no retry left): ``partial_text`` is what
    had been sent. Retry at a higher level, or keep the partial output.
    """

    kind = pb.FAILURE_KIND_STREAM_INTERRUPTED

    @property
    def stream(self) -> pb.StreamDetail:
        """What the stream had sent: partial_text, reason, deltas_sent."""
        return self.failure.stream

    @property
    def partial_text(self) -> str:
        return self.failure.stream.partial_text


_BY_KIND: dict[int, type[SidecarError]] = {
    c.kind: c
    for c in (
        InvalidInputError,
        ResourceNotFoundError,
        GuardrailError,
        JsonParseError,
        ResponseValidationError,
        ExternalServiceError,
        UpstreamThrottleError,
        UnauthorizedError,
        PermissionDeniedError,
        SystemFailureError,
        CircuitOpenError,
        UpstreamRetriesExhaustedError,
        QuotaExhaustedError,
        SpendCapExceededError,
        ModelNotFoundError,
        ProviderRefusalError,
        TokenEstimateExceedsLimitError,
        ContextOverflowError,
        OutputTruncatedError,
        JobTimeoutError,
        JobCancelledError,
        StreamInterruptedError,
    )
}

_FALLBACK_KIND = {
    grpc.StatusCode.DEADLINE_EXCEEDED: pb.FAILURE_KIND_JOB_TIMEOUT,
    grpc.StatusCode.CANCELLED: pb.FAILURE_KIND_JOB_CANCELLED,
    grpc.StatusCode.UNAVAILABLE: pb.FAILURE_KIND_EXTERNAL_SERVICE,
    grpc.StatusCode.RESOURCE_EXHAUSTED: pb.FAILURE_KIND_INVALID_INPUT,
    grpc.StatusCode.INVALID_ARGUMENT: pb.FAILURE_KIND_INVALID_INPUT,
}


def error_class(kind: int) -> type[SidecarError]:
    return _BY_KIND.get(kind, SystemFailureError)


def from_failure(failure: pb.Failure, grpc_code: grpc.StatusCode | None = None) -> SidecarError:
    return error_class(failure.kind)(failure, grpc_code)


def _explain(message: str, correctable: bool) -> str:
    return f"{message}\n{CORRECTABLE_LINE if correctable else UNCORRECTABLE_LINE}"


def from_status(status: status_pb2.Status, code: grpc.StatusCode) -> SidecarError:
    """The error a google.rpc.Status describes: its packed Failure, else ErrorInfo and the message."""
    reason = ""
    for detail in status.details:
        if detail.Is(pb.Failure.DESCRIPTOR):
            failure = pb.Failure()
            detail.Unpack(failure)
            return from_failure(failure, code)
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            reason = info.reason
    name = "FAILURE_KIND_" + reason
    known = bool(reason) and name in set(pb.FailureKind.keys())
    kind = pb.FailureKind.Value(name) if known else _FALLBACK_KIND.get(code, pb.FAILURE_KIND_SYSTEM)
    correctable = kind in CORRECTABLE_KINDS
    message = status.message or code.name
    failure = pb.Failure(correctable=correctable, message=message, explanation=_explain(message, correctable))
    failure.kind = kind  # type: ignore[assignment]
    return from_failure(failure, code)


def from_rpc_error(error: grpc.RpcError) -> SidecarError:
    """The typed error of a failed call, from ``grpc-status-details-bin`` when present."""
    code: grpc.StatusCode = error.code()
    details = ""
    raw = None
    metadata: Any = error.trailing_metadata() or ()
    for key, value in metadata:
        if key == "grpc-status-details-bin":
            raw = value
    if raw is not None:
        status = status_pb2.Status.FromString(raw)
        return from_status(status, code)
    details = error.details() or code.name
    return from_status(status_pb2.Status(code=code.value[0], message=details), code)
