"""The fleet rules of the core, on the fake clock: two replicas' throttles, guards and ledgers joined
by an in-memory backend that delivers every change at once (the Redis backend is tested for real in
tests/fleet/test_fleet.py and tests/fleet/test_fleet_redis.py).
"""

from __future__ import annotations

import pytest

from sidecar.core.circuit import CircuitState
from sidecar.core.clock import FakeClock
from sidecar.core.details import Trigger
from sidecar.core.fleet_view import FleetView
from sidecar.core.kinds import RetrySignal
from sidecar.core.model_throttle import ModelThrottle, Overdue
from sidecar.core.service_guards import ServiceGuards
from sidecar.core.settings import CircuitConfig
from sidecar.core.spend import SpendLedger
from sidecar.core.state import (
    MEMORY,
    Change,
    CircuitClosed,
    CircuitOpened,
    ModelPause,
    ModelRaised,
    PauseLifted,
    Replicas,
    SpendAdded,
    SpendTotal,
)
from sidecar.core.taxonomy import CircuitOpen, SpendCapExceeded

CIRCUIT = CircuitConfig(max_throttle=1.0, failure_step=1.0, failures_to_open=1, cooldown_s=30, probe_timeout_s=60)


class Loopback:
    """Every replica's changes delivered to the others at once; one probe holder per service."""

    def __init__(self) -> None:
        self.views: list[tuple[Loopback.Link, FleetView]] = []
        self.probes: dict[str, object] = {}
        self.spend: dict[str, float] = {}

    class Link:
        def __init__(self, hub: Loopback) -> None:
            self.hub = hub

        @property
        def shared(self) -> bool:
            return True

        def publish(self, change: Change) -> None:
            self.hub.deliver(self, change)

        async def claim_probe(self, service: str, seconds: float) -> bool:
            return self.hub.probes.setdefault(service, self) is self

    def deliver(self, origin: Loopback.Link, change: Change) -> None:
        if isinstance(change, SpendAdded):
            total = self.spend[change.workflow] = self.spend.get(change.workflow, 0.0) + change.usd
            for _, view in self.views:
                view.apply(SpendTotal(change.workflow, total))
            return
        for link, view in self.views:
            if link is not origin:
                view.apply(change)


class Replica:
    def __init__(self, hub: Loopback, clock: FakeClock, rpm: int = 0) -> None:
        self.link = Loopback.Link(hub)
        self.throttle = ModelThrottle("m", clock, requests_per_minute=rpm)
        self.throttle.share(self.link)
        self.guards = ServiceGuards({}, CIRCUIT, clock, ["svc"], state=self.link)
        self.ledger = SpendLedger({"wf": 1.0}, state=self.link)
        self.view = FleetView({"m": self.throttle}, self.guards, self.ledger)
        hub.views.append((self.link, self.view))


@pytest.fixture
def pair(clock: FakeClock) -> tuple[Replica, Replica]:
    hub = Loopback()
    return Replica(hub, clock), Replica(hub, clock)


async def test_a_429_on_one_raises_and_pauses_the_other(pair: tuple[Replica, Replica], clock: FakeClock) -> None:
    a, b = pair
    ticket = a.throttle.reserve()
    await a.throttle.wait(ticket)
    a.throttle.signal(ticket, RetrySignal.RATE_LIMIT, 10.0)
    assert b.throttle.throttle == 0.5
    assert b.throttle.paused_until == clock.time() + 10.0
    with pytest.raises(Overdue, match="paused by the provider's Retry-After"):
        b.throttle.reserve(deadline=clock.time() + 5)


async def test_a_hold_for_the_budget_on_one_pauses_the_other_and_raises_no_throttle(
    pair: tuple[Replica, Replica], clock: FakeClock
) -> None:
    a, b = pair
    a.throttle.hold(42.0)  # a's answer said the provider's budget is about to run out: hold until its reset
    assert (a.throttle.throttle, b.throttle.throttle) == (0.0, 0.0)
    assert a.throttle.paused_until == b.throttle.paused_until == clock.time() + 42.0
    with pytest.raises(Overdue, match="held until the provider's rate-limit budget resets"):
        a.throttle.reserve(deadline=clock.time() + 5)
    with pytest.raises(Overdue, match="paused by the provider"):  # told as a pause: the other knows no more
        b.throttle.reserve(deadline=clock.time() + 5)
    a.throttle.hold(10.0)  # a shorter hold shortens nothing
    assert b.throttle.paused_until == clock.time() + 42.0
    ticket = b.throttle.reserve()
    await b.throttle.wait(ticket)
    assert clock.sleeps == [42.0]


async def test_a_raise_from_elsewhere_opens_an_epoch_so_calls_already_out_add_nothing(
    pair: tuple[Replica, Replica],
) -> None:
    a, b = pair
    out = b.throttle.reserve()
    await b.throttle.wait(out)  # sent before the raise
    ticket = a.throttle.reserve()
    await a.throttle.wait(ticket)
    a.throttle.signal(ticket, RetrySignal.RATE_LIMIT, None)
    b.throttle.signal(out, RetrySignal.RATE_LIMIT, None)  # the same pressure, seen late: nothing more
    assert b.throttle.throttle == 0.5
    assert a.throttle.throttle == 0.5


async def test_a_circuit_opened_on_one_refuses_on_the_other_and_one_probe_closes_both(
    pair: tuple[Replica, Replica], clock: FakeClock
) -> None:
    a, b = pair
    ga, gb = a.guards.get("svc"), b.guards.get("svc")
    for _ in range(2):
        ga.failure(None, Trigger(503, "the service is down"), None)
    assert ga.state is CircuitState.OPEN
    with pytest.raises(CircuitOpen) as refused:
        gb.check()
    assert "HTTP 503 (the service is down)" in refused.value.message
    clock.advance(CIRCUIT.cooldown_s)
    probe_a, probe_b = ga.check(), gb.check()  # each replica's first call after the cooldown
    assert probe_a.probe
    assert probe_b.probe
    await ga.claim(probe_a)  # the fleet's one
    with pytest.raises(CircuitOpen) as half:
        await gb.claim(probe_b)
    assert "is being probed" in half.value.message
    with pytest.raises(CircuitOpen):
        gb.check()  # the probe is out elsewhere
    ga.success(probe_a)
    assert gb.state is CircuitState.CLOSED
    assert not gb.check().probe


def test_spend_on_one_counts_against_the_cap_on_the_other(pair: tuple[Replica, Replica]) -> None:
    a, b = pair
    a.ledger.record("wf", 0.6)
    b.ledger.record("wf", 0.5)
    assert a.ledger.spent("wf") == pytest.approx(1.1)
    with pytest.raises(SpendCapExceeded):
        a.ledger.check("wf")
    with pytest.raises(SpendCapExceeded):
        b.ledger.check("wf")


def test_an_uncapped_workflow_publishes_nothing(pair: tuple[Replica, Replica]) -> None:
    a, b = pair
    a.ledger.record("other", 5.0)
    assert b.ledger.spent("other") == 0.0


def test_configured_rates_are_split_across_live_replicas(clock: FakeClock) -> None:
    replica = Replica(Loopback(), clock, rpm=600)
    assert replica.throttle.paced_rate == pytest.approx(10.0)
    replica.view.apply(Replicas(4))
    assert replica.throttle.paced_rate == pytest.approx(2.5)
    replica.view.apply(Replicas(1))
    assert replica.throttle.paced_rate == pytest.approx(10.0)


async def test_the_snapshot_holds_what_a_reconnecting_backend_pushes_again(
    pair: tuple[Replica, Replica], clock: FakeClock
) -> None:
    a, _ = pair
    ticket = a.throttle.reserve()
    await a.throttle.wait(ticket)
    a.throttle.signal(ticket, RetrySignal.RATE_LIMIT, 10.0)
    guard = a.guards.get("svc")
    for _ in range(2):
        guard.failure(None, Trigger(500, "down"), None)
    a.ledger.record("wf", 0.25)
    kinds = {type(c) for c in a.view.snapshot()}
    assert {ModelRaised, ModelPause, CircuitOpened, SpendTotal} <= kinds


def test_a_lift_or_a_close_undoes_only_what_began_before_it(clock: FakeClock) -> None:
    """Ages, read on the receiver's clock: a lift 20 s old lifts a pause begun 30 s ago, not one begun
    10 s ago; a close 20 s old closes an opening 30 s old, not one 10 s old; the snapshot carries them."""
    replica = Replica(Loopback(), clock)
    view = replica.view
    view.apply(ModelPause("m", 120.0, 10.0))
    view.apply(PauseLifted("m", 20.0))
    assert replica.throttle.pause_left() == 120.0  # begun after the lift: stands
    snap = next(c for c in view.snapshot() if isinstance(c, ModelPause))
    assert (snap.seconds, snap.age_s) == (120.0, 10.0)
    clock.advance(5.0)
    assert next(c for c in view.snapshot() if isinstance(c, ModelPause)).age_s == 15.0
    view.apply(PauseLifted("m", 0.0))  # a lift just now
    assert replica.throttle.pause_left() == 0.0
    view.apply(ModelPause("m", 120.0, 30.0))
    view.apply(PauseLifted("m", 20.0))
    assert replica.throttle.pause_left() == 0.0  # begun before the lift: lifted

    replica.guards.get("svc")
    opened = CircuitOpened("svc", 60.0, 30.0, Trigger(503, "down"), clock.wall(), "test", 60.0, 10.0)
    view.apply(opened)
    view.apply(CircuitClosed("svc", 20.0))
    assert replica.guards.get("svc").state is CircuitState.OPEN  # opened after the close: stands
    assert next(c for c in view.snapshot() if isinstance(c, CircuitOpened)).age_s == 10.0
    view.apply(CircuitClosed("svc", 5.0))
    assert replica.guards.get("svc").state is CircuitState.CLOSED


def test_memory_shares_nothing_and_grants_every_probe() -> None:
    assert MEMORY.shared is False
    MEMORY.publish(SpendAdded("wf", 1.0))  # nothing to do, nothing raised
