"""The structured fields of each failure kind, as plain frozen records.

A failure carries at most one detail; ``sidecar.server.convert`` maps each to its
``sidecar.v1`` message (the ``Failure.detail`` oneof) at the gRPC boundary::

    InvalidInputDetail    INVALID_INPUT, GUARDRAIL                parameter, value, rule
    ResourceDetail        RESOURCE_NOT_FOUND, MODEL_NOT_FOUND     resource_type, identifier, available
    ProviderDetail        QUOTA_EXHAUSTED, CONTEXT_OVERFLOW,      provider, account, model, provider_message
                          UNAUTHORIZED by a provider
    TokenLimitDetail      TOKEN_ESTIMATE_EXCEEDS_LIMIT            estimate, limit, overflow, ratio, model
    RefusalDetail         PROVIDER_REFUSAL                        model, category, explanation
    CircuitDetail         CIRCUIT_OPEN                            service, state, since, cooldown_s, opened_by
    ServiceDetail         EXTERNAL_SERVICE, UPSTREAM_THROTTLE,    service, endpoint, detail, fault
                          UNAUTHORIZED by a tool service
    RetryDetail           UPSTREAM_RETRIES_EXHAUSTED,             budget, last_signal, target, next_wait_s
                          JOB_TIMEOUT, JOB_CANCELLED
    SpendDetail           SPEND_CAP_EXCEEDED                      workflow_id, spent_usd, cap_usd
    ReplyDetail           JSON_PARSE, RESPONSE_VALIDATION         parser_reason, expected_shape, fields, model
    SystemDetail          SYSTEM                                  component
    TruncationDetail      OUTPUT_TRUNCATED                        model, max_output_tokens, model_max_output_tokens
    PermissionDetail      PERMISSION_DENIED                       resource
    StreamDetail          STREAM_INTERRUPTED                      partial_text, reason, deltas_sent

``HttpInfo`` is what an upstream answered (only when a response came back); ``Trigger`` is the
response that opened a circuit, quoted in every refusal; ``Hop`` is one deployment a route tried.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sidecar.core.kinds import CircuitState, FailureKind, RetrySignal, TransportFault
from sidecar.core.text import cap

__all__ = [
    "CircuitDetail",
    "Detail",
    "FieldProblem",
    "Hop",
    "HttpInfo",
    "InvalidInputDetail",
    "PermissionDetail",
    "ProviderDetail",
    "RefusalDetail",
    "ReplyDetail",
    "ResourceDetail",
    "RetryDetail",
    "ServiceDetail",
    "SpendDetail",
    "StreamDetail",
    "SystemDetail",
    "TokenLimitDetail",
    "Trigger",
    "TruncationDetail",
]


@dataclass(frozen=True, slots=True)
class HttpInfo:
    """What an upstream answered. Exists only when a response came back."""

    status_code: int
    service: str
    endpoint: str
    body: str = ""
    retry_after_raw: str | None = None


@dataclass(frozen=True, slots=True)
class Trigger:
    """The response that opened a circuit: status (or none), detail, Retry-After asked for."""

    status_code: int | None
    detail: str
    retry_after_raw: str | None = None

    @property
    def status(self) -> str:
        return f"HTTP {self.status_code}" if self.status_code else "no response"

    def describe(self) -> str:
        asked = f", Retry-After: {cap(self.retry_after_raw, 40)}" if self.retry_after_raw is not None else ""
        return f"{self.status} ({cap(self.detail, 120)}{asked})"


@dataclass(frozen=True, slots=True)
class InvalidInputDetail:
    parameter: str
    value: str
    rule: str


@dataclass(frozen=True, slots=True)
class ResourceDetail:
    resource_type: str
    identifier: str
    available: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ProviderDetail:
    provider: str
    account: str = ""
    model: str = ""
    provider_message: str = ""


@dataclass(frozen=True, slots=True)
class TokenLimitDetail:
    estimate: int
    limit: int
    overflow: int
    ratio: float
    model: str


@dataclass(frozen=True, slots=True)
class RefusalDetail:
    model: str
    category: str
    """Why, in the provider's terms (``taxonomy.ProviderRefusal``): the filtered categories, comma-separated
    (``hate,violence``), else its error code (``content_policy_violation``), else ``refusal``."""
    explanation: str

    @property
    def categories(self) -> tuple[str, ...]:
        """``category`` split at its commas."""
        return tuple(c for c in self.category.split(",") if c)


@dataclass(frozen=True, slots=True)
class CircuitDetail:
    service: str
    state: CircuitState
    since: datetime
    cooldown_s: float
    opened_by: Trigger


@dataclass(frozen=True, slots=True)
class ServiceDetail:
    service: str
    endpoint: str
    detail: str
    fault: TransportFault = TransportFault.UNSPECIFIED


@dataclass(frozen=True, slots=True)
class RetryDetail:
    target: str
    budget: int = 0
    last_signal: RetrySignal = RetrySignal.UNSPECIFIED
    next_wait_s: float | None = None


@dataclass(frozen=True, slots=True)
class SpendDetail:
    workflow_id: str
    spent_usd: float
    cap_usd: float


@dataclass(frozen=True, slots=True)
class FieldProblem:
    field: str
    problem: str


@dataclass(frozen=True, slots=True)
class ReplyDetail:
    parser_reason: str = ""
    expected_shape: str = ""
    fields: tuple[FieldProblem, ...] = ()
    model: str = ""


@dataclass(frozen=True, slots=True)
class SystemDetail:
    component: str


@dataclass(frozen=True, slots=True)
class TruncationDetail:
    model: str
    max_output_tokens: int
    model_max_output_tokens: int


@dataclass(frozen=True, slots=True)
class PermissionDetail:
    resource: str


@dataclass(frozen=True, slots=True)
class StreamDetail:
    partial_text: str
    reason: str
    deltas_sent: int


@dataclass(frozen=True, slots=True)
class Hop:
    """One deployment a route tried, and how it ended (``kind`` UNSPECIFIED: it served)."""

    deployment: str
    kind: FailureKind
    attempts: int
    reason: str
    skipped: bool = False
    hedge: bool = False
    """Sent as a hedge: the hop before it had no first token within the route's hedge_after."""
    cancelled: bool = False
    """It lost a hedged race: the other hop's first token came first, this one was cancelled."""


Detail = (
    InvalidInputDetail
    | ResourceDetail
    | ProviderDetail
    | TokenLimitDetail
    | RefusalDetail
    | CircuitDetail
    | ServiceDetail
    | RetryDetail
    | SpendDetail
    | ReplyDetail
    | SystemDetail
    | TruncationDetail
    | PermissionDetail
    | StreamDetail
)
