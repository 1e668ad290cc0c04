"""What the core tells the outside world about a call while it runs: the observer protocol.

The core imports no OpenTelemetry. It reports, in its own terms, to an ``Observer``;
``sidecar.telemetry`` implements one that turns every report into spans, span events and
metrics, and ``NULL_OBSERVER`` ignores them all (unit tests, or telemetry off)::

    observer.model_call(ModelCallStart) -> with ... as call  one CallModel / StreamModel (the `chat` span);
                                                             call.finished(...) / call.failed(...)
    observer.tool_call(ToolCallStart)   -> with ... as call  one ExecuteTool (the `execute_tool` span)
    observer.hop(HopStart)           -> with ... as hop      one deployment a route tries, within a model call
                                                             (its attempts run inside); hop.tally(...), hop.ended(Hop)
    observer.attempt(AttemptStart)   -> with ... as record   one upstream attempt (a CLIENT span);
                                                             record.* says what it saw; ends with the block
    observer.wait(WaitStart)         -> with ...             a backoff or a throttle wait (a span + a metric)
    observer.compaction(CompactionStart) -> with ... as c    a conversation compacted to fit (its summarizer's
                                                             call runs inside); c.ended(Compaction) / c.failed(...)
    observer.event(Event)                                    a state change: a throttle, a pause, a circuit,
                                                             a correction, a raised output budget, a retry,
                                                             a stream's restart (StreamRestarted: on the call),
                                                             its continuation (StreamContinued: on the call),
                                                             an unreadable event skipped (StreamEventSkipped:
                                                             on the attempt)

Every report is a frozen dataclass or a method with typed arguments: nothing here knows an
attribute name. Events are reported where they happen; the telemetry observer attaches them
to the span current at that moment (the call that caused them).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from sidecar.core.kinds import RetrySignal

if TYPE_CHECKING:
    from sidecar.core.compaction.report import CompactionRecord, CompactionStart
    from sidecar.core.conversation import Job, ModelRequest, ModelResponse, ToolOutcome, Usage
    from sidecar.core.details import Hop
    from sidecar.core.taxonomy import SidecarFailure

__all__ = [
    "NULL_OBSERVER",
    "AttemptRecord",
    "AttemptStart",
    "CallRecord",
    "CircuitChanged",
    "CircuitEvent",
    "Correction",
    "Event",
    "HopRecord",
    "HopStart",
    "ModelCallStart",
    "ModelPaused",
    "NullObserver",
    "Observer",
    "OutputBudgetRaised",
    "OverheadMeasured",
    "ReportAccepted",
    "Retried",
    "StateBackendChanged",
    "StreamContinued",
    "StreamEventSkipped",
    "StreamRestarted",
    "Target",
    "ThrottleChanged",
    "ToolCallStart",
    "WaitKind",
    "WaitStart",
]


class Target(enum.Enum):
    """What an attempt, a wait or an event is about."""

    MODEL = "model"
    SERVICE = "service"


@dataclass(frozen=True, slots=True)
class AttemptStart:
    """One upstream attempt about to be sent."""

    target: Target
    name: str
    """The model id, or the tool's service."""
    number: int
    """1-based, across the whole call (corrections and re-runs included)."""
    method: str
    url: str
    """Safe to show: query string cut, secrets masked."""
    host: str = ""
    port: int | None = None
    output_budget: int | None = None
    provider: str = ""
    """A model attempt's wire format (``openai``, ``anthropic``), for its stream metrics."""
    streamed: bool = False
    """A StreamModel attempt: its deltas are timed (first_token, chunk)."""
    mcp_tool: str = ""
    """An MCP attempt: the server's name for the tool (``method`` is then the MCP method, not HTTP's)."""
    probe: bool = False
    """The one attempt that probes a half-open circuit (a route deployment's)."""


@dataclass(frozen=True, slots=True)
class ModelCallStart:
    """One model call about to run (CallModel or StreamModel)."""

    request: ModelRequest
    known: bool
    """Whether the catalog holds the model id (an unknown one is never a metric label)."""
    provider: str
    """The wire format of the model's provider (``openai``, ``anthropic``), or ``unknown``."""
    max_tokens: int | None
    host: str = ""
    port: int | None = None
    streamed: bool = False


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    """One tool call about to run (ExecuteTool)."""

    tool: str
    known: bool
    description: str
    service: str
    call_id: str
    job: Job
    arguments_json: str


@dataclass(frozen=True, slots=True)
class HopStart:
    """One deployment a route is about to try (``core.routing``), within the route's model call."""

    route: str
    deployment: str
    number: int
    """1-based, within the call's chain (a skipped deployment counts)."""
    role: str
    """``balance``, ``fallback`` or ``context`` (``core.routing.HopRole``)."""
    provider: str
    """The deployment's wire format (``openai``, ``anthropic``)."""
    host: str = ""
    port: int | None = None


class HopRecord(Protocol):
    """How one hop ended, told once (``tally`` first when the hop ran, then ``ended``)."""

    def tally(self, attempts: int, corrections: int, spent: Usage) -> None:
        """What the hop spent on its deployment."""

    def ended(self, hop: Hop) -> None:
        """The hop as the response or the failure lists it (kind UNSPECIFIED: it served)."""


class CallRecord(Protocol):
    """How one call ended, told once (``tally`` first, then exactly one of the others)."""

    def tally(self, attempts: int, corrections: int, spent: Usage) -> None:
        """What the call spent, whatever its end."""

    def succeeded(self, response: ModelResponse) -> None:
        """A model call's reply."""

    def tool_finished(self, outcome: ToolOutcome) -> None:
        """A tool call's outcome (a result, or a failure for the model to read)."""

    def failed(self, failure: SidecarFailure) -> None:
        """The call failed (a cancellation included, as JOB_CANCELLED)."""


class AttemptRecord(Protocol):
    """What one attempt saw, told while it runs."""

    def active(self) -> AbstractContextManager[None]:
        """Within it the attempt is what runs now (its trace goes upstream); outside it, events the
        attempt's outcome causes (a throttle raised, a circuit closed) belong to the call."""

    def trace_headers(self) -> dict[str, str]:
        """Headers that carry this attempt's trace to the upstream (empty when nothing records)."""

    def answered(self, status: int) -> None:
        """An HTTP response came back with this status."""

    def transport_fault(self, error_type: str, detail: str) -> None:
        """No (complete) response: ``error_type`` is e.g. ``timeout`` or ``connection_reset``."""

    def failed(self, error_type: str) -> None:
        """The attempt's outcome is a failure of this type (a kind's name or an HTTP status)."""

    def failure_kind(self, kind: str) -> None:
        """The taxonomy's kind of what the attempt saw (a tool attempt's classification)."""

    def retry_signal(self, signal: RetrySignal) -> None:
        """The attempt is a retry signal."""

    def asked_to_wait(self, seconds: float) -> None:
        """The upstream asked for this wait (Retry-After)."""

    def will_wait(self, seconds: float) -> None:
        """The next attempt waits this long first."""

    def usage(self, input_tokens: int, output_tokens: int, finish: str, response_model: str) -> None:
        """A model's reply: tokens, the raw finish reason, the model that answered."""

    def correction(self, reason: str) -> None:
        """This reply is sent back to the model with the fix asked for (``reason`` is the kind)."""

    def first_token(self) -> None:
        """A stream's first delta arrived and goes to the caller (time to first chunk)."""

    def chunk(self) -> None:
        """Each later delta of the stream (time per output chunk: since the delta before)."""

    def ended(self, reason: str) -> None:
        """The attempt ended early (cancelled, the caller's deadline, a restart) for ``reason``."""


class WaitKind(enum.Enum):
    BACKOFF = "backoff"
    """After a retry signal, before the next attempt."""
    THROTTLE = "throttle"
    """In a shared throttle (the model's or the service's), before an attempt."""


@dataclass(frozen=True, slots=True)
class WaitStart:
    kind: WaitKind
    target: Target
    name: str
    seconds: float
    signal: RetrySignal = RetrySignal.UNSPECIFIED
    attempt: int = 0
    throttle: float = 0.0


@dataclass(frozen=True, slots=True)
class ThrottleChanged:
    target: Target
    name: str
    throttle: float


@dataclass(frozen=True, slots=True)
class ModelPaused:
    """A Retry-After paused every call to the model, or its rate-limit budget held them until the reset."""

    model: str
    seconds: float
    reason: str = ""
    """Why (``core.model_throttle``'s PAUSED or HELD); "" when another replica said so."""


class CircuitEvent(enum.Enum):
    OPENED = "opened"
    REOPENED = "reopened"
    HALF_OPEN = "half_open"
    CLOSED = "closed"
    PROBE_LOST = "probe_lost"
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class CircuitChanged:
    service: str
    what: CircuitEvent
    reason: str = ""
    cooldown_s: float | None = None
    trigger: str | None = None
    """What opened the circuit (set on OPENED, "" when nothing was recorded)."""
    state: str = ""
    remaining_s: float | None = None


@dataclass(frozen=True, slots=True)
class Correction:
    """A reply sent back to the model with the fix asked for."""

    reason: str
    number: int


@dataclass(frozen=True, slots=True)
class OutputBudgetRaised:
    """A truncated reply re-run with a larger output budget."""

    budget: int


@dataclass(frozen=True, slots=True)
class Retried:
    """An attempt is re-sent after a retry signal (counted per signal and target)."""

    target: Target
    name: str
    signal: RetrySignal


@dataclass(frozen=True, slots=True)
class ReportAccepted:
    """Whether a ClassifyFailure report about ``service`` may feed its circuit (docs/trust.md)."""

    service: str
    accepted: bool


@dataclass(frozen=True, slots=True)
class StreamRestarted:
    """A stream that had already sent deltas to the caller starts again, for ``reason``."""

    reason: str
    attempt: int
    """The attempt whose deltas follow."""
    cause: str = ""
    """``upstream_fault``, ``truncated``, ``correction`` (``core.stream.RestartCause``, lower case)."""


@dataclass(frozen=True, slots=True)
class StreamContinued:
    """A stream that had sent text to the caller broke and goes on from it: a new attempt prefilled
    with the ``chars`` characters the caller holds streams only the continuation."""

    reason: str
    attempt: int
    """The attempt whose deltas follow."""
    cause: str
    """``upstream_fault`` (the same deployment) or ``failover`` (a route's next deployment)."""
    chars: int


@dataclass(frozen=True, slots=True)
class StreamEventSkipped:
    """An event of a streamed attempt could not be read and was skipped; the stream went on."""

    detail: str
    attempt: int


@dataclass(frozen=True, slots=True)
class StateBackendChanged:
    """The shared state backend became unavailable (decisions go on under local state) or available again."""

    backend: str
    available: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class OverheadMeasured:
    """A call ended: the time the sidecar itself added to it (``core.overhead``: upstream time and waits left out)."""

    operation: str
    """``chat`` or ``execute_tool``."""
    name: str
    """The model or the tool (an unknown one is never a metric label: ``known``)."""
    known: bool
    door: str
    """``grpc``, ``http``, or "" (no door measured the call)."""
    seconds: float


Event = (
    OverheadMeasured
    | ThrottleChanged
    | ModelPaused
    | CircuitChanged
    | Correction
    | OutputBudgetRaised
    | Retried
    | StreamRestarted
    | StreamContinued
    | StreamEventSkipped
    | ReportAccepted
    | StateBackendChanged
)


class Observer(Protocol):
    def model_call(self, start: ModelCallStart) -> AbstractContextManager[CallRecord]: ...

    def tool_call(self, start: ToolCallStart) -> AbstractContextManager[CallRecord]: ...

    def hop(self, start: HopStart) -> AbstractContextManager[HopRecord]: ...

    def attempt(self, start: AttemptStart) -> AbstractContextManager[AttemptRecord]: ...

    def wait(self, start: WaitStart) -> AbstractContextManager[None]: ...

    def compaction(self, start: CompactionStart) -> AbstractContextManager[CompactionRecord]: ...

    def event(self, event: Event) -> None: ...


class _NullRecord:
    __slots__ = ()

    def active(self) -> AbstractContextManager[None]:
        return nullcontext()

    def trace_headers(self) -> dict[str, str]:
        return {}

    def failure_kind(self, kind: str) -> None:
        pass

    def asked_to_wait(self, seconds: float) -> None:
        pass

    def tally(self, attempts: int, corrections: int, spent: Usage) -> None:
        pass

    def succeeded(self, response: ModelResponse) -> None:
        pass

    def tool_finished(self, outcome: ToolOutcome) -> None:
        pass

    def answered(self, status: int) -> None:
        pass

    def transport_fault(self, error_type: str, detail: str) -> None:
        pass

    def failed(self, error_type: object) -> None:
        pass

    def retry_signal(self, signal: RetrySignal) -> None:
        pass

    def will_wait(self, seconds: float) -> None:
        pass

    def usage(self, input_tokens: int, output_tokens: int, finish: str, response_model: str) -> None:
        pass

    def correction(self, reason: str) -> None:
        pass

    def first_token(self) -> None:
        pass

    def chunk(self) -> None:
        pass

    def ended(self, reason: object) -> None:
        pass


_NULL_RECORD = _NullRecord()


@dataclass(slots=True)
class NullObserver:
    """Ignores every report (``events`` keeps them when ``keep`` is set, for unit tests)."""

    keep: bool = False
    events: list[Event] = field(default_factory=list)

    @contextmanager
    def model_call(self, start: ModelCallStart) -> Iterator[CallRecord]:
        yield _NULL_RECORD

    @contextmanager
    def tool_call(self, start: ToolCallStart) -> Iterator[CallRecord]:
        yield _NULL_RECORD

    @contextmanager
    def hop(self, start: HopStart) -> Iterator[HopRecord]:
        yield _NULL_RECORD

    @contextmanager
    def attempt(self, start: AttemptStart) -> Iterator[AttemptRecord]:
        yield _NULL_RECORD

    @contextmanager
    def wait(self, start: WaitStart) -> Iterator[None]:
        yield

    @contextmanager
    def compaction(self, start: CompactionStart) -> Iterator[CompactionRecord]:
        yield _NULL_RECORD

    def event(self, event: Event) -> None:
        if self.keep:
            self.events.append(event)


NULL_OBSERVER = NullObserver()
