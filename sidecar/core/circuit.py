"""The per-service throttle and circuit, shared by every call to a tool service.

Throttle (a ``Pacer``: slots booked in order, a slot past the caller's deadline refused at once)::

    each EXTERNAL_SERVICE / UPSTREAM_THROTTLE failure   throttle += failure_step (1.0), capped at max_throttle (9.0)
    window                                              (1 + throttle) x the base window
    every third success                                 throttle -= 0.2
    every success after 5 minutes without pressure      throttle -= 0.5

Circuit::

    CLOSED --(failures_to_open-th failure while at max throttle)--> OPEN (cooldown 30 s; Retry-After is its floor)
    OPEN   --(cooldown passed; the next call is the one probe)---> HALF_OPEN (the others are refused)
    HALF_OPEN --probe succeeds--> CLOSED (cooldown back to 30 s)
    HALF_OPEN --probe fails-----> OPEN, cooldown doubled (up to 1 h)
    HALF_OPEN --probe lost------> OPEN, cooldown unchanged (cancelled, or no verdict in probe_timeout_s),
                                  counted from the loss: a probe that timed out long ago refuses no one

A route deployment's probe (``providers/routes.py``) is one upstream attempt, never retried whatever
the retry budget, its attempt span marked ``sidecar.circuit.probe``; with a deployment whose circuit is
closed after it in the call's order it goes on the side (the caller's request in a task of its own,
its reply discarded) while the call skips the deployment (CIRCUIT_OPEN) and goes on at once; else it
is the call's hop, whose failure moves on (or is the call's answer) at once::

    HALF_OPEN, a closed fallback after it   probe on the side; this call -> the fallback, no wait
    HALF_OPEN, none                         probe = this hop, one attempt; failed -> the next hop at once

Correctable failures (the caller's bad input) and cancelled calls are never charged.
Every refusal quotes the response that opened the circuit. State changes are reported to the
observer (``CircuitChanged``, ``ThrottleChanged``).

Agents that run their own tools report through ClassifyFailure: a pre-check that finds the
circuit half-open grants them the probe (``check(owner=job id)``), and only a report with
``probe`` set from that same owner settles it (``reported_probe``); a late report of an
earlier, lost probe settles nothing.

Shared by a fleet (``state``, a ``core.state`` backend; the memory default shares nothing)::

    a failure raising the throttle   published (ServiceRaised); receivers take max(own, theirs)
    OPEN / re-OPEN                   published (CircuitOpened: seconds left, cooldown, trigger, since);
                                     every replica refuses, quoting the same response
    OPEN -> HALF_OPEN                the call given the probe claims it fleet-wide before it is sent
                                     (``claim``: one atomic claim, held probe_timeout_s); the others
                                     learn ProbeTaken and refuse as half-open; a replica that loses
                                     the claim refuses its call the same way
    HALF_OPEN -> CLOSED              published (CircuitClosed, with its age): every replica closes an
                                     opening older than the close (a newer one stands)
    a probe held elsewhere           timed out after probe_timeout_s like a local one (reopens)

The guards of every service (own and reported, carried across a reload) are ``core.service_guards``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sidecar.core.clock import Clock
from sidecar.core.details import Trigger
from sidecar.core.kinds import CircuitState
from sidecar.core.observer import NULL_OBSERVER, CircuitChanged, CircuitEvent, Observer, Target, ThrottleChanged
from sidecar.core.pacer import Pacer, Reservation
from sidecar.core.pressure import Pressure
from sidecar.core.settings import CircuitConfig, ServiceConfig
from sidecar.core.state import MEMORY, CircuitClosed, CircuitOpened, ServiceRaised, StateBackend
from sidecar.core.taxonomy import CircuitOpen

__all__ = ["Admission", "CircuitState", "GuardSnapshot", "ServiceGuard"]


@dataclass(slots=True)
class Admission:
    """A call let through. ``probe`` is true for the one call that tests a half-open circuit."""

    probe: bool
    started: float
    settled: bool = False
    owner: str | None = None
    """Who holds a probe granted to a ClassifyFailure pre-check (its job id); None for ExecuteTool's."""
    remote: bool = False
    """A probe another replica of the fleet holds (this replica only waits for its verdict)."""


@dataclass(frozen=True, slots=True)
class GuardSnapshot:
    """What one guard holds now, read-only (the admin state view)."""

    name: str
    state: CircuitState
    throttle: float
    trigger: str
    """The response that opened the circuit, as every refusal quotes it (redacted where it entered), or ""."""
    opened_at: datetime | None
    cooldown_s: float
    cooldown_left_s: float
    probe_holder: str
    """Who holds the half-open probe: a ClassifyFailure job id, ``this replica``, ``another replica``, or ""."""


class ServiceGuard:
    """Throttle and circuit of one service."""

    __slots__ = (
        "_clock",
        "_cooldown",
        "_failures_at_max",
        "_limiter",
        "_observer",
        "_open_until",
        "_opened_at",
        "_opened_mono",
        "_pressure",
        "_probe",
        "_state",
        "_trigger",
        "circuit",
        "name",
        "state",
        "throttle",
    )

    def __init__(
        self,
        name: str,
        service: ServiceConfig,
        circuit: CircuitConfig,
        clock: Clock,
        *,
        observer: Observer = NULL_OBSERVER,
        state: StateBackend = MEMORY,
    ) -> None:
        self.name = name
        self.circuit = circuit
        self._clock = clock
        self._observer = observer
        self._state = state
        self._limiter = Pacer(service.rate, service.per_s, clock)
        self.throttle = 0.0
        self.state = CircuitState.CLOSED
        self._pressure = Pressure()
        self._failures_at_max = 0
        self._cooldown = circuit.cooldown_s
        self._open_until = 0.0
        self._opened_at: datetime | None = None
        self._opened_mono = 0.0
        """When (this clock) the opening in force began: a close made before it leaves it open."""
        self._trigger: Trigger | None = None
        self._probe: Admission | None = None

    def reconfigure(self, service: ServiceConfig, circuit: CircuitConfig) -> None:
        """A reload's settings for this service: its state (throttle, circuit, probe) is kept; its
        rate and circuit are the new ones (a cooldown in force is kept within the new bounds)."""
        self.circuit = circuit
        self._limiter.rebase(service.rate, service.per_s, burst=service.rate)
        self._cooldown = min(max(self._cooldown, circuit.cooldown_s), circuit.max_cooldown_s)

    def __repr__(self) -> str:
        state = self.state.name.lower()
        return f"<ServiceGuard {self.name} {state} throttle={self.throttle:.1f} cooldown={self._cooldown}s>"

    @property
    def cooldown(self) -> float:
        return self._cooldown

    @property
    def trigger(self) -> Trigger | None:
        return self._trigger

    def snapshot(self) -> GuardSnapshot:
        """The guard's state now, for the admin view (nothing changes, no event)."""
        now = self._clock.time()
        probe = self._probe
        holder = ""
        if self.state is CircuitState.HALF_OPEN and probe is not None and not probe.settled:
            holder = "another replica" if probe.remote else (probe.owner or "this replica")
        trigger = (
            self._trigger.describe() if self._trigger is not None and self.state is not CircuitState.CLOSED else ""
        )
        left = max(self._open_until - now, 0.0) if self.state is CircuitState.OPEN else 0.0
        opened = self._opened_at if self.state is not CircuitState.CLOSED else None
        return GuardSnapshot(self.name, self.state, self.throttle, trigger, opened, self._cooldown, left, holder)

    def close(self) -> bool:
        """An operator closed the circuit (as a successful probe does, published); whether it was not closed."""
        if self.state is CircuitState.CLOSED:
            return False
        if self._probe is not None:
            self._probe.settled = True
        self._probe = None
        self.state = CircuitState.CLOSED
        self._cooldown = self.circuit.cooldown_s
        self._failures_at_max = 0
        self._event(CircuitEvent.CLOSED, reason="closed by an operator")
        self._state.publish(CircuitClosed(self.name))
        return True

    def check(self, owner: str | None = None) -> Admission:
        """Refuse at once (CircuitOpen) or admit without waiting for the throttle.

        Returns the admission; a half-open circuit's first caller gets the probe (``owner`` names
        a ClassifyFailure caller that will report the probe's outcome itself).
        """
        now = self._clock.time()
        if self.state is CircuitState.HALF_OPEN and self._probe is not None:
            lost_at = self._probe.started + self.circuit.probe_timeout_s
            if now >= lost_at:
                self._event(CircuitEvent.PROBE_LOST, reason="no verdict in time")
                self._probe = None
                self._reopen(doubled=False, at=lost_at)  # its cooldown counts from the loss, not from this call
            else:
                raise self._refusal(now, half_open=True)
        if self.state is CircuitState.OPEN:
            if now < self._open_until:
                raise self._refusal(now, half_open=False)
            self.state = CircuitState.HALF_OPEN
            self._probe = Admission(probe=True, started=now, owner=owner)
            self._event(CircuitEvent.HALF_OPEN)
            return self._probe
        return Admission(probe=False, started=now)

    def reported_probe(self, owner: str) -> Admission | None:
        """The probe a pre-check granted to ``owner``, while it is still the one in flight."""
        probe = self._probe
        if probe is not None and probe.owner is not None and probe.owner == owner and not probe.settled:
            return probe
        return None

    def reserve(self, deadline: float | None = None) -> Reservation:
        """Book the call's slot in the throttle; ``Overdue`` at once (nothing booked) past ``deadline``."""
        return self._limiter.reserve(deadline=deadline)

    def release(self, booking: Reservation) -> None:
        """Give a booked slot that will not be used back to the throttle."""
        self._limiter.release(booking)

    async def pace(self, booking: Reservation | None = None) -> None:
        """Wait until the booked slot (booking one now when none is given); cancelled: the slot is given back."""
        await self._limiter.wait(booking if booking is not None else self._limiter.reserve())

    def refusal(self) -> CircuitOpen | None:
        """The refusal ``check`` would raise now, without taking the probe or changing the state."""
        now = self._clock.time()
        if self.state is CircuitState.OPEN and now < self._open_until:
            return self._refusal(now, half_open=False)
        if self.state is CircuitState.HALF_OPEN and self._probe is not None:
            if self._probe_pending(now):
                return self._refusal(now, half_open=True)
            reopened_until = self._probe.started + self.circuit.probe_timeout_s + self._cooldown  # as check() reopens
            if now < reopened_until:
                return self._refusal(now, half_open=False, until=reopened_until)
        return None

    def holds_decision(self) -> bool:
        """Whether forgetting this guard would lose a circuit decision: open within its cooldown, or
        half-open with its probe out and not yet timed out. A closed guard's throttle is not one."""
        now = self._clock.time()
        if self.state is CircuitState.OPEN:
            return now < self._open_until
        return self.state is CircuitState.HALF_OPEN and self._probe_pending(now)

    def _probe_pending(self, now: float) -> bool:
        return self._probe is not None and now < self._probe.started + self.circuit.probe_timeout_s

    def throttle_wait(self) -> float:
        """How long a call would wait in the throttle right now (after everyone already booked)."""
        return self._limiter.wait_time()

    def success(self, admission: Admission) -> None:
        if admission.settled:
            return
        admission.settled = True
        if admission.probe and self._probe is admission:
            self._probe = None
            self.state = CircuitState.CLOSED
            self._cooldown = self.circuit.cooldown_s
            self._failures_at_max = 0
            self._event(CircuitEvent.CLOSED)
            self._state.publish(CircuitClosed(self.name))
        if self.throttle > 0 and (relief := self._pressure.relief(self._clock.time())):
            self._set_throttle(self.throttle - relief)

    def failure(self, admission: Admission | None, trigger: Trigger, retry_after: float | None) -> None:
        """Charge a service failure (EXTERNAL_SERVICE or UPSTREAM_THROTTLE) to the service."""
        if admission is not None:
            if admission.settled:
                return
            admission.settled = True
        self._pressure.pressed(self._clock.time())
        if self.state is CircuitState.CLOSED:  # an open circuit keeps quoting what opened it
            self._trigger = trigger
        if admission is not None and admission.probe and self._probe is admission:
            self._trigger = trigger
            self._probe = None
            self._cooldown = min(self._cooldown * 2, self.circuit.max_cooldown_s)
            self._open(retry_after, reason="probe failed")
            return
        at_max = self.throttle >= self.circuit.max_throttle
        before = self.throttle
        self._set_throttle(self.throttle + self.circuit.failure_step)
        if self.throttle > before:
            self._state.publish(ServiceRaised(self.name, self.throttle))
        if at_max and self.state is CircuitState.CLOSED:
            self._failures_at_max += 1
            if self._failures_at_max >= self.circuit.failures_to_open:
                self._open(retry_after, reason="repeated failures at maximum throttle")

    def lost(self, admission: Admission) -> None:
        """A call that ended with no verdict (cancelled, correctable): charged to no one."""
        if admission.settled:
            return
        admission.settled = True
        if admission.probe and self._probe is admission:
            self._probe = None
            self._event(CircuitEvent.PROBE_LOST, reason="cancelled or no verdict")
            self._reopen(doubled=False)

    # ------------------------------------------------------------------ the fleet

    async def claim(self, admission: Admission) -> None:
        """Make a probe ``check`` granted the fleet's one probe before it is sent.

        Nothing to do for a call that is no probe, or when nothing is shared. When another
        replica holds the probe, the admission is settled and the half-open refusal raised
        (or, if the circuit closed meanwhile, the call goes on as an ordinary one).
        """
        if not admission.probe or admission.settled or not self._state.shared:
            return
        if await self._state.claim_probe(self.name, self.circuit.probe_timeout_s):
            return
        admission.settled = True
        if self._probe is admission:
            self._probe = Admission(probe=True, started=self._clock.time(), remote=True)
        refusal = self.refusal()
        if refusal is not None:
            raise refusal

    def raised_elsewhere(self, throttle: float) -> None:
        """Another replica raised this service's throttle: take it if higher."""
        if throttle > self.throttle:
            self._pressure.pressed(self._clock.time())
            self._set_throttle(throttle)

    def opened_elsewhere(self, opened: CircuitOpened) -> None:
        """Another replica opened the circuit: refuse for the seconds left, quoting its trigger."""
        now = self._clock.time()
        until = now + opened.seconds
        if self.state is CircuitState.OPEN and self._open_until >= until:
            return
        self.state = CircuitState.OPEN
        self._open_until = until
        self._opened_mono = now - max(opened.age_s, 0.0)
        self._cooldown = min(max(opened.cooldown_s, self.circuit.cooldown_s), self.circuit.max_cooldown_s)
        self._trigger = opened.trigger or self._trigger
        self._opened_at = opened.since
        self._failures_at_max = 0
        self._probe = None
        trigger = self._trigger
        self._event(
            CircuitEvent.OPENED,
            reason=f"opened by another replica: {opened.reason}" if opened.reason else "opened by another replica",
            cooldown_s=opened.seconds,
            trigger=trigger.describe() if trigger else "",
        )

    def probe_elsewhere(self, seconds: float) -> None:
        """Another replica holds the probe for at most ``seconds``: half-open, refusing, until its verdict."""
        if self._probe is not None and not self._probe.remote:
            return  # this replica's own probe is out (its claim settles who holds it)
        if self.state is CircuitState.CLOSED:
            return  # a probe of an opening this replica never saw: its outcome will say
        started = self._clock.time() - max(self.circuit.probe_timeout_s - seconds, 0.0)
        self.state = CircuitState.HALF_OPEN
        self._probe = Admission(probe=True, started=started, remote=True)
        self._event(CircuitEvent.HALF_OPEN, reason="the probe is out on another replica")

    def closed_elsewhere(self, age_s: float = 0.0) -> None:
        """Another replica's probe succeeded, or an operator closed it there, ``age_s`` ago: closed,
        unless the opening in force here began after that (a newer failure stands)."""
        if self.state is CircuitState.CLOSED:
            return
        if self._opened_mono > self._clock.time() - max(age_s, 0.0) + 1e-6:
            return
        if self._probe is not None and not self._probe.remote:
            self._probe.settled = True  # this replica's own probe, if still out, decides nothing now
        self._probe = None
        self.state = CircuitState.CLOSED
        self._cooldown = self.circuit.cooldown_s
        self._failures_at_max = 0
        self._event(CircuitEvent.CLOSED, reason="closed by another replica (its probe, or an operator)")

    def shared_state(self) -> list[CircuitOpened | ServiceRaised]:
        """What this guard holds that the fleet should know (pushed again after a backend outage)."""
        out: list[CircuitOpened | ServiceRaised] = []
        if self.throttle > 0:
            out.append(ServiceRaised(self.name, self.throttle))
        if self.state is not CircuitState.CLOSED:
            out.append(self._opened(max(self._open_until - self._clock.time(), 0.0), "re-synced"))
        return out

    def _opened(self, seconds: float, reason: str) -> CircuitOpened:
        since = self._opened_at or self._clock.wall()
        age = max(self._clock.time() - self._opened_mono, 0.0)
        return CircuitOpened(
            self.name, seconds, self._cooldown, self._trigger, since, reason, self.circuit.probe_timeout_s, age
        )

    # ------------------------------------------------------------------ internals

    def _open(self, retry_after: float | None, reason: str) -> None:
        now = self._clock.time()
        length = max(self._cooldown, min(retry_after or 0.0, self.circuit.max_cooldown_s))
        self.state = CircuitState.OPEN
        self._open_until = now + length
        self._opened_at = self._clock.wall()
        self._opened_mono = now
        self._failures_at_max = 0
        trigger = self._trigger
        self._event(
            CircuitEvent.OPENED, reason=reason, cooldown_s=length, trigger=trigger.describe() if trigger else ""
        )
        self._state.publish(self._opened(length, reason))

    def _reopen(self, *, doubled: bool, at: float | None = None) -> None:
        if doubled:
            self._cooldown = min(self._cooldown * 2, self.circuit.max_cooldown_s)
        self.state = CircuitState.OPEN
        self._opened_mono = self._clock.time() if at is None else at
        self._open_until = self._opened_mono + self._cooldown
        self._event(CircuitEvent.REOPENED, cooldown_s=self._cooldown)
        self._state.publish(self._opened(self._cooldown, "the probe was lost"))

    def _refusal(self, now: float, *, half_open: bool, until: float | None = None) -> CircuitOpen:
        remaining = max((self._open_until if until is None else until) - now, 0.0)
        if half_open:
            remaining = max(self._cooldown, 1.0) if remaining <= 0 else remaining
        trigger = self._trigger or Trigger(None, "unknown")
        refusal = CircuitOpen(
            self.name,
            remaining=remaining,
            since=self._opened_at or self._clock.wall(),
            cooldown=self._cooldown,
            trigger=trigger,
            half_open=half_open,
        )
        self._event(CircuitEvent.REFUSED, state=self.state.name.lower(), remaining_s=round(remaining, 3))
        return refusal

    def _set_throttle(self, value: float) -> None:
        value = min(max(value, 0.0), self.circuit.max_throttle)
        if value == self.throttle:
            return
        self.throttle = round(value, 6)
        if self.throttle < self.circuit.max_throttle:
            self._failures_at_max = 0  # "the third failure while at maximum": below it, the count starts again
        self._limiter.stretch(1.0 + self.throttle)
        self._observer.event(ThrottleChanged(Target.SERVICE, self.name, self.throttle))

    def _event(
        self,
        what: CircuitEvent,
        *,
        reason: str = "",
        cooldown_s: float | None = None,
        trigger: str | None = None,
        state: str = "",
        remaining_s: float | None = None,
    ) -> None:
        self._observer.event(CircuitChanged(self.name, what, reason, cooldown_s, trigger, state, remaining_s))
