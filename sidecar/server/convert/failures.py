"""Out: a failure as its ``sidecar.v1.Failure``, the one place that builds one.

``failure`` sets every field and the detail in its oneof field (``core.details`` -> its message);
``report_failure`` is ClassifyFailure's answer; ``hop`` a route's hop, as a failure and a reply
carry it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from google.protobuf import duration_pb2, timestamp_pb2
from sidecar_contract.v1 import sidecar_pb2 as pb

from sidecar.core import details as d
from sidecar.core.conversation import ReportAnswer
from sidecar.core.taxonomy import SidecarFailure

__all__ = ["failure", "hop", "report_failure"]


def hop(h: d.Hop) -> pb.Hop:
    return pb.Hop(
        deployment=h.deployment,
        kind=int(h.kind),  # type: ignore[arg-type]
        attempts=h.attempts,
        reason=h.reason,
        skipped=h.skipped,
        hedge=h.hedge,
        cancelled=h.cancelled,
    )


def report_failure(answer: ReportAnswer) -> pb.Failure:
    """ClassifyFailure's answer: the failure, or an empty Failure (a granted probe says so)."""
    if answer.failure is not None:
        return failure(answer.failure)
    granted = pb.Failure()
    if answer.probe_granted:
        granted.circuit.service = answer.service
        granted.circuit.state = pb.CIRCUIT_STATE_HALF_OPEN
    return granted


def failure(f: SidecarFailure) -> pb.Failure:
    """The ``sidecar.v1.Failure`` of a failure: every field, the detail in its oneof field."""
    msg = pb.Failure(
        kind=int(f.kind),  # type: ignore[arg-type]
        correctable=f.correctable,
        message=f.message,
        explanation=f.explain_to_llm(),
        attempts=f.attempts,
        hops=[hop(h) for h in f.hops],
    )
    if f.http is not None:
        msg.http.CopyFrom(_http(f.http))
    if f.retry_after is not None:
        msg.retry_after.CopyFrom(_duration(f.retry_after))
    if f.detail is not None:
        field, value = _detail(f.detail)
        getattr(msg, field).CopyFrom(value)
    return msg


def _http(h: d.HttpInfo) -> pb.HttpDetail:
    msg = pb.HttpDetail(status_code=h.status_code, service=h.service, endpoint=h.endpoint, body=h.body)
    if h.retry_after_raw is not None:
        msg.retry_after_raw = h.retry_after_raw
    return msg


def _duration(seconds: float) -> duration_pb2.Duration:
    out = duration_pb2.Duration()
    out.FromNanoseconds(round(seconds * 1e9))
    return out


def _timestamp(when: datetime) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(when.astimezone(UTC))
    return out


def _trigger(t: d.Trigger) -> pb.TriggerResponse:
    msg = pb.TriggerResponse(status_code=t.status_code or 0, status=t.status, detail=t.detail)
    if t.retry_after_raw is not None:
        msg.retry_after_raw = t.retry_after_raw
    return msg


def _detail(detail: d.Detail) -> tuple[str, Any]:
    """The ``Failure.detail`` oneof field and message of a core detail."""
    match detail:
        case d.InvalidInputDetail():
            return "invalid_input", pb.InvalidInputDetail(
                parameter=detail.parameter, value=detail.value, rule=detail.rule
            )
        case d.ResourceDetail():
            return "resource", pb.ResourceDetail(
                resource_type=detail.resource_type, identifier=detail.identifier, available=list(detail.available)
            )
        case d.ProviderDetail():
            return "provider", pb.ProviderDetail(
                provider=detail.provider,
                account=detail.account,
                model=detail.model,
                provider_message=detail.provider_message,
            )
        case d.TokenLimitDetail():
            return "token_limit", pb.TokenLimitDetail(
                estimate=detail.estimate,
                limit=detail.limit,
                overflow=detail.overflow,
                ratio=detail.ratio,
                model=detail.model,
            )
        case d.RefusalDetail():
            return "refusal", pb.RefusalDetail(
                model=detail.model, category=detail.category, explanation=detail.explanation
            )
        case d.CircuitDetail():
            return "circuit", pb.CircuitDetail(
                service=detail.service,
                state=int(detail.state),  # type: ignore[arg-type]
                since=_timestamp(detail.since),
                cooldown=_duration(detail.cooldown_s),
                opened_by=_trigger(detail.opened_by),
            )
        case d.ServiceDetail():
            return "service", pb.ServiceDetail(
                service=detail.service,
                endpoint=detail.endpoint,
                detail=detail.detail,
                fault=int(detail.fault),  # type: ignore[arg-type]
            )
        case d.RetryDetail():
            retry = pb.RetryDetail(
                budget=detail.budget,
                last_signal=int(detail.last_signal),  # type: ignore[arg-type]
                target=detail.target,
            )
            if detail.next_wait_s is not None:
                retry.next_wait.CopyFrom(_duration(detail.next_wait_s))
            return "retry", retry
        case d.SpendDetail():
            return "spend", pb.SpendDetail(
                workflow_id=detail.workflow_id, spent_usd=detail.spent_usd, cap_usd=detail.cap_usd
            )
        case d.ReplyDetail():
            return "reply", pb.ReplyDetail(
                parser_reason=detail.parser_reason,
                expected_shape=detail.expected_shape,
                fields=[pb.FieldProblem(field=p.field, problem=p.problem) for p in detail.fields],
                model=detail.model,
            )
        case d.SystemDetail():
            return "system", pb.SystemDetail(component=detail.component)
        case d.TruncationDetail():
            return "truncation", pb.TruncationDetail(
                model=detail.model,
                max_output_tokens=detail.max_output_tokens,
                model_max_output_tokens=detail.model_max_output_tokens,
            )
        case d.PermissionDetail():
            return "permission", pb.PermissionDetail(resource=detail.resource)
        case d.StreamDetail():
            return "stream", pb.StreamDetail(
                partial_text=detail.partial_text, reason=detail.reason, deltas_sent=detail.deltas_sent
            )
    raise TypeError(f"no sidecar.v1 detail for {type(detail).__name__}")  # pragma: no cover - exhaustive above
