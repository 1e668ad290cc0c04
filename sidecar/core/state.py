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
- Time crosses as *seconds left* and *ages* (how long ago a pause began, a circuit opened or
  closed, an operator acted), read against the receiver's own monotonic clock on arrival, never as
  an instant of another machine's clock: an operator's action undoes only what began before it,
  whatever the replicas' wall clocks say (Redis keeps its own instants on its own clock, TIME).
- ``claim_probe`` is the one await the shared state adds, and only on a half-open circuit: the
  one probe of the fleet. It answers within the backend's timeout; a backend that cannot answer
  says True (the local decision stands: a probe more, never a call hung).
- Raises and totals are merged by ``max``: a change applied twice, late, or re-pushed by a
  reconnecting replica is harmless.

``MemoryState`` is the default and today's behaviour: nothing crosses, every probe is granted
by the local circuit alone, one replica.

The record of tool calls (``CallRecords``) is the one part that is not a change of the local
view: the tools' dedupe (``tools.once``) writes an *intent* before a call is sent and its
*outcome* after, under a key that names the call (its job id, call id, tool and arguments, hashed)::

    claim_call(key, ttl, since)   atomic: the key was free -> Claimed (the intent is written: send it);
                                  else Recorded (the outcome) or InProgress (whose intent, since when,
                                  whether its replica is alive)
    finish_call(key, outcome)     the outcome replaces the intent, kept for the window
    abandon_call(key, token)      the intent removed (only this claim's): nothing may have been sent

``MemoryRecords`` keeps them in this process (on the injected clock, within a size budget);
``state/redis/`` keeps them in Redis, so that they hold across the fleet and across a replica
killed with -9. A backend that cannot answer says None: the caller decides locally.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol, runtime_checkable

from sidecar.core.clock import Clock
from sidecar.core.details import Trigger

__all__ = [
    "DEPLOYMENT_NAMESPACE",
    "MEMORY",
    "MEMORY_RECORD_BYTES",
    "CallClaim",
    "CallRecords",
    "Change",
    "CircuitClosed",
    "CircuitOpened",
    "Claimed",
    "InProgress",
    "LocalView",
    "MemoryRecords",
    "MemoryState",
    "ModelPause",
    "ModelRaised",
    "Namespaced",
    "PauseLifted",
    "ProbeTaken",
    "Recorded",
    "Replicas",
    "ServiceRaised",
    "SpendAdded",
    "SpendReset",
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
    age_s: float = 0.0
    """How long ago the pause began (0: now): a lift made after it lifts it, one made before does not."""


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
    age_s: float = 0.0
    """How long ago it opened (0: now): a close made after it closes it, one made before does not."""


@dataclass(frozen=True, slots=True)
class ProbeTaken:
    """A replica holds the half-open circuit's one probe for at most ``seconds``."""

    service: str
    seconds: float


@dataclass(frozen=True, slots=True)
class CircuitClosed:
    """A probe succeeded (or an operator closed it): the service's circuit is closed."""

    service: str
    age_s: float = 0.0
    """How long ago it closed (0: now): an opening older than that closes, a newer one stands."""


@dataclass(frozen=True, slots=True)
class SpendAdded:
    """This replica recorded ``usd`` against a workflow (only workflows with a cap are published)."""

    workflow: str
    usd: float
    cap_usd: float = 0.0
    """The workflow's cap here: a backend may tell the fleet its total only at each step of the cap and
    at the cap itself (what a check decides on), not at every add (0: at every add)."""


@dataclass(frozen=True, slots=True)
class SpendTotal:
    """A workflow's recorded spend across the fleet, as the backend added it up."""

    workflow: str
    usd: float


@dataclass(frozen=True, slots=True)
class PauseLifted:
    """An operator lifted a model's Retry-After pause (``sidecar admin lift-pause``): every replica lifts it."""

    model: str
    age_s: float = 0.0
    """How long ago the operator lifted it (0: now): a pause begun after that stands."""


@dataclass(frozen=True, slots=True)
class SpendReset:
    """An operator reset a workflow's spend (``sidecar admin reset-spend``): every replica forgets it, and
    the fleet's total loses ``usd`` (what this replica knew of it: a cost added elsewhere since stays)."""

    workflow: str
    usd: float = 0.0


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
    | PauseLifted
    | SpendReset
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


DEPLOYMENT_NAMESPACE = "deployment:"
"""The names of route deployments' circuits in the shared state (a tool service may share a name)."""


class Namespaced:
    """A backend seen through a namespace: the circuits of one kind of target (route deployments).

    Their changes travel with ``namespace`` before the name, and ``FleetView`` hands those back
    to the guards of that kind, with the name as it was; a tool service named like a deployment
    never meets its circuit.
    """

    __slots__ = ("_inner", "namespace")

    def __init__(self, inner: StateBackend, namespace: str) -> None:
        self._inner = inner
        self.namespace = namespace

    @property
    def shared(self) -> bool:
        return self._inner.shared

    def publish(self, change: Change) -> None:
        if isinstance(change, ServiceRaised | CircuitOpened | ProbeTaken | CircuitClosed):
            change = replace(change, service=self.namespace + change.service)
        self._inner.publish(change)

    async def claim_probe(self, service: str, seconds: float) -> bool:
        return await self._inner.claim_probe(self.namespace + service, seconds)


# ---------------------------------------------------------------------------- the record of tool calls


@dataclass(frozen=True, slots=True)
class Claimed:
    """The key was free: this call's intent is written (``token`` is it, to abandon it by); send the call."""

    token: str


@dataclass(frozen=True, slots=True)
class Recorded:
    """The call's outcome, as the tools layer encoded it."""

    outcome: str


@dataclass(frozen=True, slots=True)
class InProgress:
    """An intent with no outcome yet: written by ``owner`` at ``since`` (wall-clock seconds, UTC)."""

    owner: str
    since: float
    alive: bool
    """Whether the owner is still serving (Redis: in the replicas' heartbeat set; memory: this process)."""


CallClaim = Claimed | Recorded | InProgress


@runtime_checkable
class CallRecords(Protocol):
    """Where tool calls' intents and outcomes are kept (see the module docstring)."""

    @property
    def owner(self) -> str:
        """The name this process writes its intents under."""

    async def claim_call(self, key: str, ttl_s: float, since: float) -> CallClaim | None:
        """Write the intent when the key is free, else say what is there; None when it cannot tell."""

    async def finish_call(self, key: str, outcome: str, ttl_s: float) -> bool:
        """Record the outcome for ``ttl_s``; False when it could not be written."""

    async def abandon_call(self, key: str, token: str) -> None:
        """Remove the intent ``token`` (a later claim's is left alone)."""


MEMORY_RECORD_BYTES = 64 * 1024 * 1024
"""What ``MemoryRecords`` may hold (characters of recorded outcomes); past it the oldest records go."""


class MemoryRecords:
    """The record of tool calls in this process, on the injected clock, its size bounded.

    Past ``max_chars`` the oldest records are forgotten first (a re-send of one is sent again, as
    after its window); an intent is never forgotten for size while its call runs here, since the
    tools layer waits for a call in flight in this process without asking the record.
    """

    __slots__ = ("_chars", "_clock", "_entries", "_max_chars", "owner")

    def __init__(self, clock: Clock, *, owner: str = "this process", max_chars: int = MEMORY_RECORD_BYTES) -> None:
        self._clock = clock
        self._max_chars = max_chars
        self._entries: OrderedDict[str, tuple[float, CallClaim]] = OrderedDict()
        self._chars = 0
        self.owner = owner

    def __len__(self) -> int:
        return len(self._entries)

    def peek(self, key: str) -> CallClaim | None:
        """What is held for ``key`` (nothing written)."""
        return self._get(key)

    async def claim_call(self, key: str, ttl_s: float, since: float) -> CallClaim | None:
        held = self._get(key)
        if held is not None:
            return held
        token = f"{self.owner}@{since!r}"
        self._put(key, ttl_s, InProgress(self.owner, since, alive=True), token)
        return Claimed(token)

    async def finish_call(self, key: str, outcome: str, ttl_s: float) -> bool:
        self._put(key, ttl_s, Recorded(outcome), "")
        return True

    async def abandon_call(self, key: str, token: str) -> None:
        held = self._entries.get(key)
        if held is not None and isinstance(held[1], InProgress) and f"{held[1].owner}@{held[1].since!r}" == token:
            self._drop(key)

    def _get(self, key: str) -> CallClaim | None:
        held = self._entries.get(key)
        if held is None:
            return None
        if held[0] <= self._clock.time():
            self._drop(key)
            return None
        return held[1]

    def _put(self, key: str, ttl_s: float, claim: CallClaim, token: str) -> None:
        self._drop(key)
        now = self._clock.time()
        while self._entries and next(iter(self._entries.values()))[0] <= now:  # the oldest, expired
            self._drop(next(iter(self._entries)))
        self._entries[key] = (now + ttl_s, claim)
        self._chars += _size(claim)
        while self._chars > self._max_chars and len(self._entries) > 1:
            self._drop(next(iter(self._entries)))

    def _drop(self, key: str) -> None:
        held = self._entries.pop(key, None)
        if held is not None:
            self._chars -= _size(held[1])


def _size(claim: CallClaim) -> int:
    return len(claim.outcome) if isinstance(claim, Recorded) else 64
