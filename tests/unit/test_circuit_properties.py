"""sidecar.core.circuit.ServiceGuard as a state machine: any sequence of calls, outcomes and waits.

The model follows the guard only through what it reports (its ``CircuitChanged`` events, its
public ``state`` and ``cooldown``) and predicts every ``check()`` exactly::

    CLOSED                                       admitted, no probe
    OPEN, now <  open_until                      refused
    OPEN, now >= open_until                      the probe (HALF_OPEN)
    HALF_OPEN, probe out < probe_timeout_s       refused: one probe at a time
    HALF_OPEN, probe out >= probe_timeout_s      the probe was lost when its time ran out: OPEN again for
                                                 one cooldown from that moment, so refused until
                                                 started + probe_timeout_s + cooldown, the probe after

so the circuit is never wedged open: whatever happened, a check at or past the time above is granted
the probe. ``refusal()`` (the look without taking) agrees with ``check()``; a ClassifyFailure report
settles a probe only from the owner it was granted to (``reported_probe``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, multiple, rule

from sidecar.core.circuit import Admission, CircuitState, ServiceGuard
from sidecar.core.clock import FakeClock
from sidecar.core.details import Trigger
from sidecar.core.observer import CircuitChanged, CircuitEvent, NullObserver
from sidecar.core.settings import CircuitConfig, ServiceConfig
from sidecar.core.taxonomy import CircuitOpen
from tests.unit.profile import STATEFUL

T503 = Trigger(503, "service unavailable")
OWNERS = st.sampled_from([None, "job-a", "job-b"])
REPORTERS = st.sampled_from(["job-a", "job-b", "job-c"])
RETRY_AFTER = st.none() | st.sampled_from([0.0, 1.0, 45.0, 5000.0]) | st.floats(min_value=0, max_value=10_000)


@dataclass
class Probe:
    admission: Admission
    owner: str | None

    @property
    def started(self) -> float:
        return self.admission.started


class CircuitMachine(RuleBasedStateMachine):
    admissions = Bundle("admissions")

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock(start=0.0)
        self.observer = NullObserver(keep=True)
        self.guard: ServiceGuard | None = None
        self.seen = 0
        self.open_until: float | None = None
        self.probe: Probe | None = None

    # ------------------------------------------------------------ set-up

    @initialize(
        failures_to_open=st.integers(min_value=1, max_value=3),
        max_throttle=st.sampled_from([1.0, 2.0, 9.0]),
        cooldown_s=st.sampled_from([0.001, 1.0, 30.0]),
        growth=st.sampled_from([1.0, 4.0, 120.0]),
        probe_timeout_s=st.sampled_from([0.001, 1.0, 60.0]),
    )
    def build(
        self, failures_to_open: int, max_throttle: float, cooldown_s: float, growth: float, probe_timeout_s: float
    ) -> None:
        circuit = CircuitConfig(
            failures_to_open=failures_to_open,
            max_throttle=max_throttle,
            cooldown_s=cooldown_s,
            max_cooldown_s=cooldown_s * growth,
            probe_timeout_s=probe_timeout_s,
        )
        self.guard = ServiceGuard("svc", ServiceConfig(rate=1000), circuit, self.clock, observer=self.observer)

    @property
    def g(self) -> ServiceGuard:
        assert self.guard is not None
        return self.guard

    # ------------------------------------------------------------ the model

    def lost_at(self) -> float:
        assert self.probe is not None
        return self.probe.started + self.g.circuit.probe_timeout_s

    def grant_at(self) -> float | None:
        """When a check is granted the probe (None: closed, granted at once, no probe)."""
        if self.g.state is CircuitState.OPEN:
            assert self.open_until is not None
            return self.open_until
        if self.g.state is CircuitState.HALF_OPEN:
            return self.lost_at() + self.g.cooldown
        return None

    def expect_refused(self) -> bool:
        now = self.clock.now
        due = self.grant_at()
        return due is not None and now < due

    def follow(self, *, reopened_at: float | None = None) -> list[CircuitEvent]:
        """Read the events the last call reported and move the model along them."""
        new = [e for e in self.observer.events[self.seen :] if isinstance(e, CircuitChanged)]
        self.seen = len(self.observer.events)
        for event in new:
            if event.what in (CircuitEvent.OPENED, CircuitEvent.REOPENED):
                assert event.cooldown_s is not None
                base = self.clock.now if reopened_at is None or event.what is CircuitEvent.OPENED else reopened_at
                self.open_until = base + event.cooldown_s
                self.probe = None
            elif event.what in (CircuitEvent.CLOSED, CircuitEvent.PROBE_LOST):
                self.probe = None
                if event.what is CircuitEvent.CLOSED:
                    self.open_until = None
        return [e.what for e in new if e.what is not CircuitEvent.REFUSED]

    # ------------------------------------------------------------ calls

    @rule(target=admissions, owner=OWNERS)
    def check(self, owner: str | None) -> object:
        refused = self.expect_refused()
        timed_out = self.g.state is CircuitState.HALF_OPEN and self.clock.now >= self.lost_at()
        lost_at = self.lost_at() if timed_out else None
        looked = self.g.refusal()
        self.follow()
        assert (looked is not None) is refused, "refusal() disagrees with what check() does"
        was_open = self.g.state is not CircuitState.CLOSED
        refusal: CircuitOpen | None = None
        try:
            admission = self.g.check(owner)
        except CircuitOpen as raised:
            refusal = raised
        if refusal is not None:
            assert refused, f"refused at {self.clock.now} though a probe was due at {self.grant_at()}"
            assert looked is not None
            assert refusal.retry_after == looked.retry_after  # the look says what the refusal says
            assert refusal.retry_after is not None
            assert refusal.retry_after >= 0
            self.follow(reopened_at=lost_at)
            return multiple()
        assert not refused, f"admitted at {self.clock.now} though refused until {self.grant_at()}"
        changes = self.follow(reopened_at=lost_at)
        assert admission.probe is was_open
        if admission.probe:
            assert self.probe is None, "a second probe while one is out"
            assert changes[-1] is CircuitEvent.HALF_OPEN
            assert admission.owner == owner
            self.probe = Probe(admission, owner)
        return admission

    @rule(admission=admissions, how=st.sampled_from(["success", "failure", "lost"]), retry_after=RETRY_AFTER)
    def settle(self, admission: Admission, how: str, retry_after: float | None) -> None:
        """What the call saw: a success, a service failure (its Retry-After), or no verdict. Again: a no-op."""
        if how == "success":
            self.g.success(admission)
        elif how == "failure":
            self.g.failure(admission, T503, retry_after)
        else:
            self.g.lost(admission)
        self.follow()

    @rule(retry_after=RETRY_AFTER)
    def a_failure_charged_with_no_admission(self, retry_after: float | None) -> None:
        before = self.probe
        self.g.failure(None, T503, retry_after)
        changes = self.follow()
        if before is not None:
            assert changes == [], "a charge that holds no probe changed a half-open circuit"
            assert self.probe is before

    @rule(reporter=REPORTERS, outcome=st.sampled_from(["success", "failure", "answered", "no answer"]))
    def a_report_of_a_probe(self, reporter: str, outcome: str) -> None:
        """What ClassifyFailure does with a report that says it was the probe (tools/reports.py)."""
        before = self.probe
        probe = self.g.reported_probe(reporter)
        if probe is not None:
            assert before is not None, "a probe handed out that no check granted"
            assert probe is before.admission
            assert before.owner == reporter
            assert not probe.settled
        else:
            assert before is None or before.owner != reporter or before.admission.settled
        if outcome == "success":
            self.g.success(probe or Admission(probe=False, started=self.clock.now))
        elif outcome == "failure":
            self.g.failure(probe, T503, None)
        elif outcome == "answered" and probe is not None:
            self.g.success(probe)
        elif probe is not None:
            self.g.lost(probe)
        changes = self.follow()
        if probe is None and before is not None:
            assert changes == [], f"{reporter} settled the probe of {before.owner}"
            assert self.probe is before
            assert not before.admission.settled

    # ------------------------------------------------------------ time

    @rule(
        how=st.sampled_from(["seconds", "to the probe", "just before it", "just after it", "to the probe's timeout"]),
        seconds=st.sampled_from([0.0005, 0.5, 1.0, 29.0, 59.0, 600.0]) | st.floats(min_value=0, max_value=200),
    )
    def wait(self, how: str, seconds: float) -> None:
        """Some seconds; or to the very time a probe is due (a float step either side), or a probe times out."""
        due = self.grant_at() if how != "to the probe's timeout" else (self.lost_at() if self.probe else None)
        if how == "seconds" or due is None:
            self.clock.advance(seconds)
            return
        if how == "just before it":
            due = math.nextafter(due, -math.inf)
        elif how == "just after it":
            due = math.nextafter(due, math.inf)
        self.clock.now = max(self.clock.now, due)

    @rule()
    def open_the_circuit(self) -> None:
        """Failures, each admitted and charged, until the circuit opens (or a check is refused)."""
        for _ in range(1000):
            if self.g.state is not CircuitState.CLOSED:
                return
            self.g.failure(self.g.check(), T503, None)
            self.follow()
        raise AssertionError("a thousand failures did not open the circuit")

    # ------------------------------------------------------------ invariants

    @invariant()
    def the_model_matches_the_state(self) -> None:
        if self.guard is None:
            return
        state = self.g.state
        if state is CircuitState.CLOSED:
            assert self.probe is None
        elif state is CircuitState.OPEN:
            assert self.probe is None
            assert self.open_until is not None
        else:
            assert self.probe is not None
            assert not self.probe.admission.settled
        assert self.g.circuit.cooldown_s <= self.g.cooldown <= self.g.circuit.max_cooldown_s
        assert 0 <= self.g.throttle <= self.g.circuit.max_throttle

    @invariant()
    def no_circuit_is_open_past_its_longest_wait(self) -> None:
        """However it opened (a Retry-After floor included), a probe is due within the longest cooldown."""
        if self.guard is None or self.g.state is not CircuitState.OPEN:
            return
        assert self.open_until is not None
        assert self.open_until - self.clock.now <= self.g.circuit.max_cooldown_s + 1e-6  # float noise only


CircuitMachine.TestCase.settings = STATEFUL
test_no_sequence_of_outcomes_wedges_the_circuit = CircuitMachine.TestCase


# ---------------------------------------------------------------- the cases the machine found, written out


def guard(clock: FakeClock) -> ServiceGuard:
    circuit = CircuitConfig(failures_to_open=1, max_throttle=1.0, cooldown_s=30.0, probe_timeout_s=60.0)
    return ServiceGuard("svc", ServiceConfig(rate=1000), circuit, clock)


def opened(clock: FakeClock) -> ServiceGuard:
    g = guard(clock)
    for _ in range(2):
        g.failure(g.check(), T503, None)
    assert g.state is CircuitState.OPEN
    return g


def test_a_probe_lost_long_ago_does_not_refuse_the_next_caller_for_another_cooldown() -> None:
    clock = FakeClock(start=0.0)
    g = opened(clock)
    clock.advance(30)
    assert g.check().probe  # the probe's holder vanishes
    clock.advance(3600)  # long past its probe timeout and the cooldown after it
    assert g.check().probe


def test_a_lost_probe_keeps_the_circuit_open_for_one_cooldown_from_its_loss() -> None:
    clock = FakeClock(start=0.0)
    g = opened(clock)
    clock.advance(30)
    g.check()
    clock.advance(60 + 29)  # lost at 60 s; open until 30 s after that
    with pytest.raises(CircuitOpen) as caught:
        g.check()
    assert caught.value.retry_after == pytest.approx(1.0)
    clock.advance(1)
    assert g.check().probe


def test_a_report_from_another_owner_never_settles_the_probe() -> None:
    clock = FakeClock(start=0.0)
    g = opened(clock)
    clock.advance(30)
    probe = g.check(owner="job-a")
    assert g.reported_probe("job-b") is None
    assert g.reported_probe("job-a") is probe
    g.success(Admission(probe=False, started=clock.now))  # what job-b's report settles: no probe
    g.failure(g.reported_probe("job-b"), T503, None)
    assert g.state is CircuitState.HALF_OPEN
    assert not probe.settled
    g.success(probe)
    assert g.reported_probe("job-a") is None  # settled: never handed out again
    assert g.refusal() is None
    assert not g.check().probe  # closed
