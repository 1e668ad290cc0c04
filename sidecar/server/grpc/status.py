"""CallModel's failure carrier: a Failure as a gRPC status with rich details.

``grpc-status-details-bin`` carries a ``google.rpc.Status`` holding the ``sidecar.v1.Failure``
and the standard details generic tooling reads: exactly one ``ErrorInfo`` (reason = the kind,
domain ``sidecar``, metadata with every dynamic value), ``RetryInfo`` when a wait is known, and
``QuotaFailure``, ``BadRequest``, ``ResourceInfo`` where they fit.

    INVALID_ARGUMENT     INVALID_INPUT (a malformed request), GUARDRAIL, RESPONSE_VALIDATION
    NOT_FOUND            MODEL_NOT_FOUND, RESOURCE_NOT_FOUND
    RESOURCE_EXHAUSTED   QUOTA_EXHAUSTED, SPEND_CAP_EXCEEDED
    UNAVAILABLE          UPSTREAM_RETRIES_EXHAUSTED, EXTERNAL_SERVICE, CIRCUIT_OPEN, UPSTREAM_THROTTLE
    DEADLINE_EXCEEDED    JOB_TIMEOUT
    CANCELLED            JOB_CANCELLED
  FAILED_PRECONDITION  TOKEN_ESTIMATE_EXCEEDS_LIMIT, CONTEXT_OVERFLOW, PROVIDER_REFUSAL, OUTPUT_TRUNCATED, UNAUTHORIZED
    PERMISSION_DENIED    PERMISSION_DENIED
    ABORTED              JSON_PARSE (after the corrections), STREAM_INTERRUPTED
    INTERNAL             SYSTEM
"""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from sidecar_contract.v1 import sidecar_pb2 as pb

from sidecar.core.kinds import FailureKind
from sidecar.core.taxonomy import SidecarFailure
from sidecar.server import convert

__all__ = ["DOMAIN", "GRPC_CODE", "TRAILER_BODY_CHARS", "to_status"]

DOMAIN = "sidecar"
_C = grpc.StatusCode
GRPC_CODE: dict[FailureKind, grpc.StatusCode] = {
    FailureKind.INVALID_INPUT: _C.INVALID_ARGUMENT,
    FailureKind.GUARDRAIL: _C.INVALID_ARGUMENT,
    FailureKind.RESPONSE_VALIDATION: _C.INVALID_ARGUMENT,
    FailureKind.RESOURCE_NOT_FOUND: _C.NOT_FOUND,
    FailureKind.MODEL_NOT_FOUND: _C.NOT_FOUND,
    FailureKind.QUOTA_EXHAUSTED: _C.RESOURCE_EXHAUSTED,
    FailureKind.SPEND_CAP_EXCEEDED: _C.RESOURCE_EXHAUSTED,
    FailureKind.UPSTREAM_RETRIES_EXHAUSTED: _C.UNAVAILABLE,
    FailureKind.EXTERNAL_SERVICE: _C.UNAVAILABLE,
    FailureKind.CIRCUIT_OPEN: _C.UNAVAILABLE,
    FailureKind.UPSTREAM_THROTTLE: _C.UNAVAILABLE,
    FailureKind.JOB_TIMEOUT: _C.DEADLINE_EXCEEDED,
    FailureKind.JOB_CANCELLED: _C.CANCELLED,
    FailureKind.TOKEN_ESTIMATE_EXCEEDS_LIMIT: _C.FAILED_PRECONDITION,
    FailureKind.CONTEXT_OVERFLOW: _C.FAILED_PRECONDITION,
    FailureKind.PROVIDER_REFUSAL: _C.FAILED_PRECONDITION,
    FailureKind.OUTPUT_TRUNCATED: _C.FAILED_PRECONDITION,
    FailureKind.UNAUTHORIZED: _C.FAILED_PRECONDITION,
    FailureKind.PERMISSION_DENIED: _C.PERMISSION_DENIED,
    FailureKind.JSON_PARSE: _C.ABORTED,
    FailureKind.SYSTEM: _C.INTERNAL,
    FailureKind.STREAM_INTERRUPTED: _C.ABORTED,
}


def _pack(message: object) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)  # type: ignore[arg-type]
    return packed


TRAILER_BODY_CHARS = 4096
"""``http.body`` is cut to this in the status trailer: gRPC refuses trailers over 16 KiB, and a
status that cannot be sent loses every detail."""
TRAILER_BUDGET_BYTES = 12 * 1024
"""What one status may take in the trailers: ``grpc-message`` (percent-encoded) plus
``grpc-status-details-bin`` (base64). The failures bound what they echo of a caller (a few hundred
characters), but characters of several bytes each can still outgrow that; then every string of
the status is cut, tighter and tighter (``_CUTS``), until it fits: the kind, the code and every
field arrive, some of them shortened."""
_CUTS = (1024, 256, 64)
"""The successive limits (characters per string) tried when a status is over budget."""


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.capitalize() for w in rest)


def _value(desc: Any, value: Any) -> str:
    if desc.enum_type is not None:
        return (
            str(desc.enum_type.values_by_number[value].name) if value in desc.enum_type.values_by_number else str(value)
        )
    if desc.message_type is not None:
        if desc.message_type.full_name == "google.protobuf.Timestamp":
            return str(value.ToJsonString())
        if desc.message_type.full_name == "google.protobuf.Duration":
            return f"{value.ToTimedelta().total_seconds():g}"
    return str(value)


def _flatten(msg: Any, prefix: str, out: dict[str, str]) -> None:
    for desc, value in msg.ListFields():
        key = _camel(desc.name) if not prefix else prefix + _camel(desc.name)[0].upper() + _camel(desc.name)[1:]
        if desc.is_repeated:
            if desc.message_type is None:
                out.setdefault(key, ",".join(str(v) for v in value))
            else:
                out.setdefault(key, "; ".join(", ".join(f"{d.name}={v}" for d, v in m.ListFields()) for m in value))
        elif desc.message_type is not None and desc.message_type.full_name.startswith("sidecar."):
            _flatten(value, key, out)
        else:
            out.setdefault(key, _value(desc, value))


def _metadata(f: pb.Failure, limit: int | None) -> dict[str, str]:
    md = {"kind": FailureKind(f.kind).name, "correctable": str(f.correctable).lower(), "attempts": str(f.attempts)}
    if f.HasField("http"):
        md["httpStatus"] = str(f.http.status_code)
        md["service"] = f.http.service
        md["endpoint"] = f.http.endpoint
        if f.http.HasField("retry_after_raw"):
            md["retryAfterRaw"] = f.http.retry_after_raw
    if f.HasField("retry_after"):
        md["retryAfterSeconds"] = f"{f.retry_after.ToTimedelta().total_seconds():g}"
    field = f.WhichOneof("detail")
    if field:
        _flatten(getattr(f, field), "", md)
    return md if limit is None else {k: _cut(v, limit) for k, v in md.items()}


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cut_strings(msg: Any, limit: int) -> None:
    """Every string field of ``msg`` and its sidecar sub-messages cut to ``limit`` characters."""
    for desc, value in msg.ListFields():
        if desc.type == desc.TYPE_STRING:
            if desc.is_repeated:
                value[:] = [_cut(v, limit) for v in value]
            else:
                setattr(msg, desc.name, _cut(value, limit))
        elif desc.message_type is not None and desc.message_type.full_name.startswith("sidecar."):
            for item in value if desc.is_repeated else [value]:
                _cut_strings(item, limit)


def _trailer_bytes(status: status_pb2.Status) -> int:
    """What the status takes on the wire: its message percent-encoded, its details base64-encoded."""
    message = sum(1 if 0x20 <= b <= 0x7E and b != 0x25 else 3 for b in status.message.encode("utf-8"))
    return message + (len(status.SerializeToString()) + 2) // 3 * 4


def to_status(failure: SidecarFailure) -> status_pb2.Status:
    """The google.rpc.Status of a failure: code, message (the failure's), and the details, within
    ``TRAILER_BUDGET_BYTES``."""
    status = _status(convert.failure(failure), None)
    for limit in _CUTS:
        if _trailer_bytes(status) <= TRAILER_BUDGET_BYTES:
            break
        status = _status(convert.failure(failure), limit)
    return status


def _status(f: pb.Failure, limit: int | None) -> status_pb2.Status:
    if f.HasField("http") and len(f.http.body) > TRAILER_BODY_CHARS:
        f.http.body = f.http.body[: TRAILER_BODY_CHARS - 1] + "…"
    if limit is not None:
        line = f.explanation.rsplit("\n", 1)[-1]
        _cut_strings(f, limit)
        f.explanation = f"{f.message}\n{line}"
    code = GRPC_CODE.get(FailureKind(f.kind), _C.INTERNAL)
    details = [
        _pack(f),
        _pack(
            error_details_pb2.ErrorInfo(reason=FailureKind(f.kind).name, domain=DOMAIN, metadata=_metadata(f, limit))
        ),
    ]
    if f.HasField("retry_after"):
        details.append(_pack(error_details_pb2.RetryInfo(retry_delay=f.retry_after)))
    detail = f.WhichOneof("detail")
    if f.kind == pb.FAILURE_KIND_INVALID_INPUT and detail == "invalid_input":
        violation = error_details_pb2.BadRequest.FieldViolation(
            field=f.invalid_input.parameter, description=f.invalid_input.rule, reason=FailureKind(f.kind).name
        )
        details.append(_pack(error_details_pb2.BadRequest(field_violations=[violation])))
    elif f.kind in (pb.FAILURE_KIND_QUOTA_EXHAUSTED, pb.FAILURE_KIND_SPEND_CAP_EXCEEDED):
        subject = f"workflow:{f.spend.workflow_id}" if detail == "spend" else f"provider:{f.provider.provider}"
        quota = error_details_pb2.QuotaFailure.Violation(subject=subject, description=f.message)
        details.append(_pack(error_details_pb2.QuotaFailure(violations=[quota])))
    elif detail == "resource":
        info = error_details_pb2.ResourceInfo(
            resource_type=f.resource.resource_type, resource_name=f.resource.identifier, description=f.message
        )
        details.append(_pack(info))
    return status_pb2.Status(code=code.value[0], message=f.message, details=details)


assert code_pb2.OK == 0
