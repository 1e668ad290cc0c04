"""Policy state shared by every replica of a fleet: what a state backend offers the core.

The core decides on its *local view* (a model's throttle and pause, a service's throttle and
circuit, a workflow's spend), as it always has, with no await on the way of a healthy call. A
state backend carries the changes that matter to the rest of the fleet, and brings theirs into
the local view::

    the core  --publish(change)-->  backend  --(Redis: a Lua script, then pub/sub)-->  every other replica
    the core  <--view.apply(change)--  backend  <--------------------------------------  what the others published

    change            published when                        applied by a replica that receives it
    ModelRaised       a signal raised a model's throttle     throttle = max(own, theirs); a new pacing epoch
    ModelPause        a Retry-After paused the model         paused until max(own, now + seconds)
    ServiceRaised     a failure raised a service throttle    throttle = max(own, theirs)
    CircuitOpened     a circuit opened or re-opened          open for the seconds left, quoting the same trigger
    ProbeTaken        a replica won the half-open probe      half-open: refuse, the probe is out elsewhere
    CircuitClosed     a probe succeeded                      closed, cooldown back to its base
    SpendAdded        a call's cost was recorded             (the backend adds it up: SpendTotal comes back)
    SpendTotal        a workflow's fleet total is known      spent = max(own view, the total)
    Replicas          the count of live replicas changed     configured rates split across them

Rules every backend keeps:

- ``publish`` never blocks and never raises: a change that cannot cross (the backend is slow or
  down) is dropped, and the local view alone decides (``snapshot`` re-pushes it on reconnect).
- Time crosses as *seconds left*, read against the receiver's own clock on arrival, never as
  an instant of another machine's clock.
- ``claim_probe`` is the one await the shared state adds, and only on a half-open circuit: the
  one probe of the fleet. It answers within the backend's timeout; a backend that cannot answer
  says True (the local decision stands: a probe more, never a call hung).
- Raises and totals are merged by ``max``: a change applied twice, late, or re-pushed by a
  reconnecting replica is harmless.

``MemoryState`` is the default and today's behaviour: nothing crosses, every probe is granted
by the local circuit alone, one replica.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sidecar.core.details import Trigger

__all__ = [
    "MEMORY",
    "Change",
    "CircuitClosed",
    "CircuitOpened",
    "LocalView",
    "MemoryState",
    "ModelPause",
    "ModelRaised",
    "ProbeTaken",
    "Replicas",
    "ServiceRaised",
    "SpendAdded",
    "SpendTotal",
    "StateBackend",
]


@dataclass(frozen=True, slots=True)
class ModelRaised:
    """A retry signal raised a model's throttle to ``throttle`` (by ``step``, the signal's increment)."""

    model: str
    throttle: float
    step: float


@dataclass(frozen=True, slots=True)
class ModelPause:
    """A Retry-After paused every call to the model for ``seconds`` more."""

    model: str
    seconds: float


@dataclass(frozen=True, slots=True)
class ServiceRaised:
    """A service failure raised a tool service's throttle to ``throttle``."""

    service: str
    throttle: float


@dataclass(frozen=True, slots=True)
class CircuitOpened:
    """A service's circuit opened (or re-opened after a probe): refuse for ``seconds`` more."""

    service: str
    seconds: float
    cooldown_s: float
    """The cooldown in force (doubled by each failed probe): the next opening's base."""
    trigger: Trigger | None
    """The response that opened it: every refusal, on every replica, quotes it."""
    since: datetime
    """When it opened (wall clock, UTC), as the refusals say."""
    reason: str = ""
    probe_timeout_s: float = 60.0
    """How long after ``seconds`` the opening still matters (a probe may be out that long)."""


@dataclass(frozen=True, slots=True)
class ProbeTaken:
    """A replica holds the half-open circuit's one probe for at most ``seconds``."""

    service: str
    seconds: float


@dataclass(frozen=True, slots=True)
class CircuitClosed:
    """A probe succeeded: the service's circuit is closed."""

    service: str


@dataclass(frozen=True, slots=True)
class SpendAdded:
    """This replica recorded ``usd`` against a workflow (only workflows with a cap are published)."""

    workflow: str
    usd: float


@dataclass(frozen=True, slots=True)
class SpendTotal:
    """A workflow's recorded spend across the fleet, as the backend added it up."""

    workflow: str
    usd: float


@dataclass(frozen=True, slots=True)
class Replicas:
    """How many replicas share the state now (1 when alone, or the backend is unavailable)."""

    count: int


Change = (
    ModelRaised
    | ModelPause
    | ServiceRaised
    | CircuitOpened
    | ProbeTaken
    | CircuitClosed
    | SpendAdded
    | SpendTotal
    | Replicas
)


class StateBackend(Protocol):
    """Where the core's changes go, and whether they go anywhere."""

    @property
    def shared(self) -> bool:
        """Whether other replicas may hold the same state (False: every decision is local)."""

    def publish(self, change: Change) -> None:
        """Send a change to the fleet: never blocks, never raises (see the module docstring)."""

    async def claim_probe(self, service: str, seconds: float) -> bool:
        """Claim the fleet's one probe of ``service`` for ``seconds``; False when another replica holds it."""


class LocalView(Protocol):
    """What a backend feeds: the replica's throttles, circuits and ledger (``core.fleet_view``)."""

    def apply(self, change: Change) -> None:
        """A change another replica published (or a value read back on re-sync)."""

    def snapshot(self) -> list[Change]:
        """This replica's state as changes, pushed again when the backend comes back."""


class MemoryState:
    """Nothing is shared: one process, every decision local (the default, ``state.backend: memory``)."""

    __slots__ = ()

    @property
    def shared(self) -> bool:
        return False

    def publish(self, change: Change) -> None:
        pass

    async def claim_probe(self, service: str, seconds: float) -> bool:
        return True


MEMORY = MemoryState()
