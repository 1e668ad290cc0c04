"""What the core tells the outside world about a call while it runs: the observer protocol.

The core imports no OpenTelemetry. It reports, in its own terms, to an ``Observer``;
``sidecar.telemetry`` implements one that turns every report into spans, span events and
metrics, and ``NULL_OBSERVER`` ignores them all (unit tests, or telemetry off)::

    observer.attempt(AttemptStart)   -> with ... as record   one upstream attempt (a CLIENT span);
                                                             record.* says what it saw; ends with the block
    observer.wait(WaitStart)         -> with ...             a backoff or a throttle wait (a span + a metric)
    observer.event(Event)                                    a state change: a throttle, a pause, a circuit,
                                                             a correction, a raised output budget, a retry

Every report is a frozen dataclass or a method with typed arguments: nothing here knows an
attribute name. Events are reported where they happen; the telemetry observer attaches them
to the span current at that moment (the call that caused them).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Protocol

from sidecar.core.kinds import RetrySignal

__all__ = [
    "NULL_OBSERVER",
    "AttemptRecord",
    "AttemptStart",
    "CircuitChanged",
    "CircuitEvent",
    "Correction",
    "Event",
    "ModelPaused",
    "NullObserver",
    "Observer",
    "OutputBudgetRaised",
    "Retried",
    "StreamRestarted",
    "Target",
    "ThrottleChanged",
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
    """The model id or the tool service."""
    number: int
    """1-based, across the whole call (corrections and re-runs included)."""
    method: str
    url: str
    """Safe to show: query string cut, secrets masked."""
    host: str = ""
    port: int | None = None
    output_budget: int | None = None


class AttemptRecord(Protocol):
    """What one attempt saw, told while it runs."""

    def answered(self, status: int) -> None:
        """An HTTP response came back with this status."""

    def transport_fault(self, error_type: str, detail: str) -> None:
        """No (complete) response: ``error_type`` is e.g. ``timeout`` or ``connection_reset``."""

    def failed(self, error_type: str) -> None:
        """The attempt's outcome is a failure of this type (a kind's name or an HTTP status)."""

    def retry_signal(self, signal: RetrySignal, retry_after: float | None) -> None:
        """The attempt is a retry signal; ``retry_after`` is what the upstream asked for."""

    def will_wait(self, seconds: float) -> None:
        """The next attempt waits this long first."""

    def usage(self, input_tokens: int, output_tokens: int, finish: str, response_model: str) -> None:
        """A model's reply: tokens, the raw finish reason, the model that answered."""

    def correction(self, reason: str) -> None:
        """This reply is sent back to the model with the fix asked for (``reason`` is the kind)."""

    def first_token(self) -> None:
        """A stream's first delta reached the caller."""

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
    """A Retry-After paused every call to the model."""

    model: str
    seconds: float


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
    trigger: str = ""
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
class StreamRestarted:
    """A stream that had already sent deltas to the caller starts again, for ``reason``."""

    reason: str
    attempt: int


Event = ThrottleChanged | ModelPaused | CircuitChanged | Correction | OutputBudgetRaised | Retried | StreamRestarted


class Observer(Protocol):
    def attempt(self, start: AttemptStart) -> AbstractContextManager[AttemptRecord]: ...

    def wait(self, start: WaitStart) -> AbstractContextManager[None]: ...

    def event(self, event: Event) -> None: ...


class _NullRecord:
    __slots__ = ()

    def answered(self, status: int) -> None:
        pass

    def transport_fault(self, error_type: str, detail: str) -> None:
        pass

    def failed(self, error_type: str) -> None:
        pass

    def retry_signal(self, signal: RetrySignal, retry_after: float | None) -> None:
        pass

    def will_wait(self, seconds: float) -> None:
        pass

    def usage(self, input_tokens: int, output_tokens: int, finish: str, response_model: str) -> None:
        pass

    def correction(self, reason: str) -> None:
        pass

    def first_token(self) -> None:
        pass

    def ended(self, reason: str) -> None:
        pass


_NULL_RECORD = _NullRecord()


@dataclass(slots=True)
class NullObserver:
    """Ignores every report (``events`` keeps them when ``keep`` is set, for unit tests)."""

    keep: bool = False
    events: list[Event] = field(default_factory=list)

    @contextmanager
    def attempt(self, start: AttemptStart) -> Iterator[AttemptRecord]:
        yield _NULL_RECORD

    @contextmanager
    def wait(self, start: WaitStart) -> Iterator[None]:
        yield

    def event(self, event: Event) -> None:
        if self.keep:
            self.events.append(event)


NULL_OBSERVER = NullObserver()
