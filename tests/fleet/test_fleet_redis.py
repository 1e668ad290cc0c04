"""The Redis backend against a real redis-server: atomic claims, TTLs on every key, outages.

ten replicas claim one probe at once      exactly one wins
every key written                         has a TTL (none outlives its cooldown, pause or window)
Redis gone                                publish and claim answer at once (a claim: granted
                                          locally), one WARNING, the gauge event; spend kept
Redis back                                INFO once; the spend kept reaches Redis
1,000 tool-call claims at once            every one decided in Redis (more calls than the pool's
                                          connections wait for one: no outage, no local decision)

The claims, the TTLs, the burst and the reset run on a single Redis and on a Redis Cluster (``redis_target``,
tests/redis_cluster.py); the outages kill or stop the one Redis (the cluster's outage, a primary killed under
load, is tests/fleet/test_fleet_cluster.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sidecar.core.circuit import CircuitState
from sidecar.core.clock import FakeClock
from sidecar.core.details import Trigger
from sidecar.core.fleet_view import FleetView
from sidecar.core.model_throttle import ModelThrottle
from sidecar.core.observer import NullObserver, StateBackendChanged
from sidecar.core.service_guards import ServiceGuards
from sidecar.core.settings import CircuitConfig
from sidecar.core.spend import SpendLedger
from sidecar.core.state import (
    Change,
    CircuitClosed,
    CircuitOpened,
    ModelPause,
    ModelRaised,
    PauseLifted,
    ServiceRaised,
    SpendAdded,
    SpendReset,
    SpendTotal,
)
from sidecar.state.redis import RedisState
from sidecar.state.redis.connection import MAX_CONNECTIONS
from sidecar.state.redis.keys import key
from tests.redis_cluster import Target, redis_cluster, redis_target  # noqa: F401  (the fixtures)
from tests.redis_server import RedisServer, redis_server  # noqa: F401  (the fixture)

POLL_S = 20.0


class View:
    def __init__(self) -> None:
        self.applied: list[Change] = []

    def apply(self, change: Change) -> None:
        self.applied.append(change)

    def snapshot(self) -> list[Change]:
        return []


async def _until(check: Any, what: str) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + POLL_S
    while not check():
        if loop.time() > end:
            pytest.fail(f"not within {POLL_S:g} s: {what}")
        await asyncio.sleep(0.02)


async def test_one_probe_is_granted_among_ten_replicas(redis_target: Target) -> None:  # noqa: F811
    states = [redis_target.backend("claims", 200) for _ in range(10)]
    for state in states:
        await state.start(View())
    try:
        won = await asyncio.gather(*(s.claim_probe("svc", 30.0) for s in states))
        assert sum(won) == 1
    finally:
        for state in states:
            await state.close()


async def test_every_key_has_a_ttl(redis_target: Target) -> None:  # noqa: F811
    state = redis_target.backend("ttl", 200)
    await state.start(View())
    try:
        since = datetime.now(UTC)
        for change in (
            ModelRaised("m", 0.5, 0.5),
            ModelPause("m", 5.0),
            ServiceRaised("s", 1.0),
            CircuitOpened("s", 30.0, 30.0, Trigger(500, "down"), since, "test", 60.0),
            SpendAdded("wf", 0.25),
        ):
            state.publish(change)
        await state.claim_probe("s2", 10.0)
        client = redis_target.client()

        def written() -> list[str]:
            return [k.decode() for k in client.scan_iter(match="ttl:*")]

        # the writer sends each slot's changes as they come (on a cluster, to several primaries at once): wait
        # for all of them, not for the one that happens to be last on a single Redis
        await _until(lambda: len(written()) >= 7, "every change written")
        keys = written()
        assert client.exists(key("ttl", "spend", "wf"))
        assert all(client.pttl(k) > 0 for k in keys), {k: client.pttl(k) for k in keys}
        assert client.pttl(key("ttl", "open", "s")) <= 90_000  # open 30 s + the probe timeout 60 s
        assert client.pttl(key("ttl", "mpause", "m")) <= 5_000
    finally:
        await state.close()


async def test_an_outage_is_local_state_one_warning_and_nothing_lost(
    redis_server: RedisServer,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    observer = NullObserver(keep=True)
    state = RedisState(redis_server.url, "outage", 50, observer=observer)
    await state.start(View())
    try:
        redis_server.kill()
        with caplog.at_level(logging.INFO, logger="sidecar.state"):
            await _until(lambda: not state.available, "the outage noticed")
            for _ in range(20):
                state.publish(SpendAdded("wf", 0.5))  # never raises, never blocks
                state.publish(ModelPause("m", 1.0))
                assert await asyncio.wait_for(state.claim_probe("svc", 5.0), 1.0) is True  # granted locally
            redis_server.start()
            await _until(lambda: state.available, "back")
            client = redis_server.client()
            spend = key("outage", "spend", "wf")
            await _until(lambda: client.get(spend) is not None, "the spend kept sent")
            assert float(client.get(spend) or 0) == pytest.approx(10.0)
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        infos = [r for r in caplog.records if "available again" in r.getMessage()]
        assert len(warnings) == 1
        assert len(infos) == 1
        changes = [e for e in observer.events if isinstance(e, StateBackendChanged)]
        assert [e.available for e in changes][:2] == [False, False]  # noticed; then the first call's span
        assert changes[-1].available is True
    finally:
        await state.close()


async def test_more_calls_at_once_than_connections_wait_for_one_not_an_outage(
    redis_target: Target,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    """redis-py's default pool raised MaxConnectionsError at its 101st connection: 220 tool calls at once
    fell back to local state, and a replica killed under them had recorded nothing (test_tool_once_kill)."""
    observer = NullObserver(keep=True)
    state = redis_target.backend("burst", 10_000, observer=observer)  # generous: a slow machine waits
    await state.start(View())
    calls = 10 * MAX_CONNECTIONS
    try:
        with caplog.at_level(logging.INFO, logger="sidecar.state"):
            claims = await asyncio.gather(*(state.claim_call(f"call-{i}", 60.0, 0.0) for i in range(calls)))
        assert all(claim is not None for claim in claims)  # None: decided locally
        assert state.available
        assert not [e for e in observer.events if isinstance(e, StateBackendChanged)]
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(list(redis_target.client().scan_iter(match="burst:call:*"))) == calls
    finally:
        await state.close()


def _redis_ms(client: Any) -> int:
    """Redis's own clock (TIME), in ms: what every instant kept in Redis is on."""
    sec, usec = client.time()
    return int(sec) * 1000 + int(usec) // 1000


@pytest.mark.parametrize("skew_s", [0.0, 3600.0, -3600.0], ids=["synced", "wall-1h-ahead", "wall-1h-behind"])
async def test_actions_made_while_redis_is_away_reach_it_first_and_undo_only_what_is_older(
    redis_server: RedisServer,  # noqa: F811
    skew_s: float,
) -> None:
    """An operator's lift, reset and closes while Redis does not answer (stopped: SIGSTOP, its data kept)
    are kept and sent when it answers again (SIGCONT), before the re-sync reads the fleet back: the
    pause, the spend and the opening made before them are gone, and not read back into the view; a
    pause and an opening made after them stay. The actions were made 60 s before Redis answered (the
    fake monotonic clock); the fleet's pause and opening are 90 s old (older) and 30 s old (newer), on
    Redis's clock. The replica's wall clock is off by ``skew_s``: it changes nothing (before, an action
    was timed by it: an hour ahead, it deleted the newer pause and opening; behind, it undid nothing)."""
    real = datetime.now(UTC)
    clock = FakeClock(wall=real + timedelta(seconds=skew_s))
    client = redis_server.client()
    now = _redis_ms(client)
    old, new = now - 90_000, now - 30_000
    client.set(key("act", "mpause", "gpt"), str(old), px=120_000)  # paused before the lift
    client.set(key("act", "mpause", "claude"), str(new), px=120_000)  # paused after it, on another replica
    client.set(key("act", "spend", "wf"), "1.25", px=120_000)
    client.set(key("act", "open", "old"), json.dumps({"cooldown": 30, "since": 0, "probe": 60, "at": old}), px=120_000)
    client.set(key("act", "open", "new"), json.dumps({"cooldown": 30, "since": 0, "probe": 60, "at": new}), px=120_000)
    view = View()
    state = RedisState(redis_server.url, "act", 100, clock=clock)
    await state.start(view)
    assert redis_server.proc is not None
    try:
        assert state.available
        assert {c.model for c in view.applied if isinstance(c, ModelPause)} == {"gpt", "claude"}
        redis_server.proc.send_signal(signal.SIGSTOP)
        try:
            await _until(lambda: not state.available, "the outage noticed")
            for change in (
                PauseLifted("gpt"),
                PauseLifted("claude"),
                SpendReset("wf", 1.25),
                CircuitClosed("old"),
                CircuitClosed("new"),
            ):
                state.publish(change)
            assert state.pending_actions == 5
            view.applied.clear()
            clock.advance(60.0)  # the actions are 60 s old when Redis answers
        finally:
            redis_server.proc.send_signal(signal.SIGCONT)
        await _until(lambda: state.available, "back")
        assert state.pending_actions == 0
        undone = (key("act", "mpause", "gpt"), key("act", "spend", "wf"), key("act", "open", "old"))
        assert client.exists(*undone) == 0  # undone, before the read back
        assert client.exists(key("act", "mpause", "claude"), key("act", "open", "new")) == 2  # newer: kept
        back = _redis_ms(client)
        records = (key("act", "mlift", "gpt"), key("act", "sreset", "wf"), key("act", "closed", "old"))
        for record in records:  # remembered for later re-syncs
            at = float(client.get(record) or 0)  # when, on Redis's clock: 60 s before it answered
            assert back - 60_000 - 5_000 <= at <= back - 60_000 + 1_000, (record, back - at)
        pauses = {c.model for c in view.applied if isinstance(c, ModelPause)}
        assert pauses == {"claude"}  # the re-sync read back only the newer pause
        claude = next(c for c in view.applied if isinstance(c, ModelPause))
        assert 29.0 <= claude.age_s <= 40.0  # with its age, on Redis's clock
        assert not [c for c in view.applied if isinstance(c, SpendTotal) and c.usd > 0]
        opened = {c.service for c in view.applied if isinstance(c, CircuitOpened)}
        assert opened == {"new"}
        lifted = [c for c in view.applied if isinstance(c, PauseLifted | SpendReset | CircuitClosed)]
        assert {type(c).__name__ for c in lifted} == {"PauseLifted", "SpendReset", "CircuitClosed"}  # read first
        assert view.applied.index(lifted[0]) < min(
            view.applied.index(c) for c in view.applied if isinstance(c, ModelPause | CircuitOpened)
        )
    finally:
        await state.close()


async def test_a_reset_takes_off_only_what_the_operator_saw(redis_target: Target) -> None:  # noqa: F811
    """Cost another replica added after the reset's view (the total grew in Redis) stays counted."""
    state = redis_target.backend("forgive", 200)
    await state.start(View())
    client = redis_target.client()
    spend = key("forgive", "spend", "wf")
    try:
        client.set(spend, "2.0", px=120_000)  # 1.5 seen here, 0.5 added elsewhere since
        state.publish(SpendReset("wf", 1.5))
        await _until(lambda: float(client.get(spend) or 0) == pytest.approx(0.5), "0.5 left")
    finally:
        await state.close()


class Relay:
    """The backend a replica's core publishes to: its current RedisState (a new one after a restart)."""

    def __init__(self) -> None:
        self.target: RedisState | None = None

    @property
    def shared(self) -> bool:
        return True

    def publish(self, change: Change) -> None:
        if self.target is not None:
            self.target.publish(change)

    async def claim_probe(self, service: str, seconds: float) -> bool:
        return True if self.target is None else await self.target.claim_probe(service, seconds)


class Fleet:
    """One replica's real local view (a model throttle, the guards of ``svc``, a ledger) on the fake clock."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.relay = Relay()
        self.throttle = ModelThrottle("gpt", clock)
        self.throttle.share(self.relay)
        circuit = CircuitConfig(cooldown_s=30, probe_timeout_s=60)
        self.guards = ServiceGuards({}, circuit, clock, ["svc"], state=self.relay)
        self.ledger = SpendLedger({"wf": 5.0}, state=self.relay)
        self.view = FleetView({"gpt": self.throttle}, self.guards, self.ledger)

    def share(self, state: RedisState) -> None:
        """As the app does: the core publishes to ``state`` (from now on)."""
        self.relay.target = state

    def circuit(self) -> CircuitState:
        return self.guards.get("svc").snapshot().state


@pytest.mark.parametrize("order", ["closer-first", "at-once"])
async def test_a_close_on_a_replica_cut_off_is_read_back_by_the_fleet(
    redis_server: RedisServer,  # noqa: F811
    order: str,
) -> None:
    """``svc`` is open across the fleet (read from Redis by both replicas). Redis dies (killed: it comes
    back empty); on replica A an operator closes the circuit (queued). Replica B, cut off too, still
    holds the opening. When Redis answers, whichever re-syncs first, both end closed and Redis holds
    no opening: A's close (the ``closed`` record, with when) is read back by B's re-sync and undoes
    B's older opening, or, B first, A's replay deletes what B pushed and B hears the close. Before,
    B re-synced after A kept its opening (the closed record only stopped the push): refusing alone
    until its own cooldown and probe."""
    clock_a, clock_b = FakeClock(), FakeClock(start=5000.0)
    client = redis_server.client()
    opened = {"cooldown": 30, "since": datetime.now(UTC).timestamp(), "probe": 60, "at": _redis_ms(client) - 5000}
    client.set(key("cut", "open", "svc"), json.dumps(opened), px=600_000)
    a, b = Fleet(clock_a), Fleet(clock_b)
    for f in (a, b):
        f.guards.get("svc")
    state_a = RedisState(redis_server.url, "cut", 100, clock=clock_a)
    state_b = RedisState(redis_server.url, "cut", 100, clock=clock_b)
    await state_a.start(a.view)
    await state_b.start(b.view)
    a.share(state_a)
    b.share(state_b)
    try:
        assert a.circuit() is CircuitState.OPEN
        assert b.circuit() is CircuitState.OPEN
        await state_b.close()  # B cut off: its view stays as it was
        redis_server.kill()
        await _until(lambda: not state_a.available, "A to notice the outage")
        clock_a.advance(10.0)
        clock_b.advance(10.0)
        assert a.guards.get("svc").close() is True  # the operator, on A
        assert state_a.pending_actions == 1
        assert b.circuit() is CircuitState.OPEN
        clock_a.advance(20.0)  # the close is 20 s old when Redis answers
        clock_b.advance(20.0)
        redis_server.start()
        state_b = RedisState(redis_server.url, "cut", 100, clock=clock_b)
        if order == "closer-first":
            await _until(lambda: state_a.available, "A to re-sync")
            assert client.get(key("cut", "closed", "svc")) is not None
            await state_b.start(b.view)  # B's re-sync reads the close back
        else:
            await state_b.start(b.view)  # B pushes its opening (no close recorded yet)
            b.share(state_b)
            await _until(lambda: state_a.available, "A to re-sync")
        b.share(state_b)
        await _until(lambda: b.circuit() is CircuitState.CLOSED, "B to close")
        assert a.circuit() is CircuitState.CLOSED
        assert client.exists(key("cut", "open", "svc")) == 0
        closed_at = float(client.get(key("cut", "closed", "svc")) or 0)
        assert _redis_ms(client) - closed_at >= 19_000  # when the operator closed it, on Redis's clock
        await asyncio.sleep(1.5)  # real time: a heartbeat and any late re-push
        assert (a.circuit(), b.circuit()) == (CircuitState.CLOSED, CircuitState.CLOSED)
        assert client.exists(key("cut", "open", "svc")) == 0
    finally:
        await state_a.close()
        await state_b.close()


async def test_a_newer_opening_on_the_cut_off_replica_outlives_an_older_close(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """The converse: B's circuit opened *after* the operator's close (a fresh failure during the outage,
    10 s after it): B's re-sync keeps it and pushes it, and A opens too."""
    clock_a, clock_b = FakeClock(), FakeClock(start=5000.0)
    client = redis_server.client()
    opened = {"cooldown": 30, "since": datetime.now(UTC).timestamp(), "probe": 60, "at": _redis_ms(client) - 5000}
    client.set(key("newer", "open", "svc"), json.dumps(opened), px=600_000)
    a, b = Fleet(clock_a), Fleet(clock_b)
    for f in (a, b):
        f.guards.get("svc")
    state_a = RedisState(redis_server.url, "newer", 100, clock=clock_a)
    state_b = RedisState(redis_server.url, "newer", 100, clock=clock_b)
    await state_a.start(a.view)
    await state_b.start(b.view)
    a.share(state_a)
    b.share(state_b)
    try:
        await state_b.close()
        redis_server.kill()
        await _until(lambda: not state_a.available, "A to notice the outage")
        assert a.guards.get("svc").close() is True
        b.guards.get("svc").closed_elsewhere()  # B's own probe closed it, then it failed again:
        clock_a.advance(10.0)
        clock_b.advance(10.0)
        guard = b.guards.get("svc")
        for _ in range(30):  # at max throttle, three failures: open again, 10 s after A's close
            guard.failure(None, Trigger(503, "down again"), None)
        assert b.circuit() is CircuitState.OPEN
        clock_a.advance(5.0)
        clock_b.advance(5.0)
        redis_server.start()
        await _until(lambda: state_a.available, "A to re-sync")
        state_b = RedisState(redis_server.url, "newer", 100, clock=clock_b)
        await state_b.start(b.view)
        b.share(state_b)
        assert b.circuit() is CircuitState.OPEN  # the close read back is older: the opening stands
        await _until(lambda: a.circuit() is CircuitState.OPEN, "A to hear B's newer opening")
        assert client.exists(key("newer", "open", "svc")) == 1
    finally:
        await state_a.close()
        await state_b.close()


@pytest.mark.parametrize("order", ["lifter-first", "at-once"])
async def test_a_pause_begun_after_a_queued_lift_survives_it_on_every_replica(
    redis_server: RedisServer,  # noqa: F811
    order: str,
) -> None:
    """Redis dies; on A an operator lifts gpt's pause (queued); 10 s later B, cut off too, is told a
    fresh Retry-After (120 s). When Redis answers, whichever re-syncs first, the newer pause stands on
    B, reaches A and Redis: B's re-pushed pause carries its age, the lift read back carries its own.
    Before, B's re-sync lifted it (the lift record undid any pause) or A's lift deleted B's re-push
    (which carried no time, so counted as older than any action)."""
    clock_a, clock_b = FakeClock(), FakeClock(start=5000.0)
    a, b = Fleet(clock_a), Fleet(clock_b)
    state_a = RedisState(redis_server.url, "fresh", 100, clock=clock_a)
    state_b = RedisState(redis_server.url, "fresh", 100, clock=clock_b)
    await state_a.start(a.view)
    await state_b.start(b.view)
    a.share(state_a)
    b.share(state_b)
    client = redis_server.client()
    try:
        await state_b.close()  # B cut off
        redis_server.kill()
        await _until(lambda: not state_a.available, "A to notice the outage")
        a.throttle.lift_pause()  # the operator, on A
        assert state_a.pending_actions == 1
        for clock in (clock_a, clock_b):
            clock.advance(10.0)
        b.throttle.paused_elsewhere(120.0)  # as a 429 with Retry-After: 120 on B does, 10 s after the lift
        for clock in (clock_a, clock_b):
            clock.advance(5.0)
        redis_server.start()
        state_b = RedisState(redis_server.url, "fresh", 100, clock=clock_b)
        if order == "lifter-first":
            await _until(lambda: state_a.available, "A to re-sync")
            assert client.get(key("fresh", "mlift", "gpt")) is not None
        await state_b.start(b.view)
        b.share(state_b)
        await _until(lambda: state_a.available, "A to re-sync")
        await _until(lambda: a.throttle.pause_left() > 100, "A to hear B's newer pause")
        assert b.throttle.pause_left() == pytest.approx(115.0)
        assert client.exists(key("fresh", "mpause", "gpt")) == 1
        assert 100_000 < client.pttl(key("fresh", "mpause", "gpt")) <= 115_000  # not extended by the re-push
        began = float(client.get(key("fresh", "mpause", "gpt")) or 0)
        lifted = float(client.get(key("fresh", "mlift", "gpt")) or 0)
        assert began - lifted >= 9_000  # on Redis's clock: the pause began 10 s after the lift
        await asyncio.sleep(1.5)  # real time: a heartbeat and any late message
        assert a.throttle.pause_left() > 100
        assert b.throttle.pause_left() > 100
    finally:
        await state_a.close()
        await state_b.close()


class Snapshotting(View):
    """A view that holds pauses, armed after the start; its snapshot takes ``slow_s`` of the fake clock
    (a re-sync slow enough for a pause to run out between the snapshot and its push)."""

    def __init__(self, clock: FakeClock, slow_s: float) -> None:
        super().__init__()
        self.clock, self.slow_s = clock, slow_s
        self.held: list[Change] = []

    def snapshot(self) -> list[Change]:
        held = list(self.held)
        self.clock.advance(self.slow_s)
        return held


async def test_a_re_pushed_pause_carries_its_age_and_neither_extends_nor_resurrects(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """Redis stopped (SIGSTOP) and resumed under a replica that holds three pauses: one begun 90 s
    ago, before an operator's lift recorded 30 s ago (not written again: it was lifted), one with 5 s
    left that runs out during the 8 s the re-sync takes (not written: resurrected, it would pause the
    fleet again), one begun 10 s ago with 60 s left (written with 52 s left, begun 18 s ago on Redis's
    clock: no longer than it is)."""
    clock = FakeClock()
    client = redis_server.client()
    view = Snapshotting(clock, slow_s=8.0)
    state = RedisState(redis_server.url, "repush", 100, clock=clock)
    await state.start(view)
    assert redis_server.proc is not None
    try:
        client.set(key("repush", "mlift", "old"), str(_redis_ms(client) - 30_000), px=60_000)  # another replica's lift
        redis_server.proc.send_signal(signal.SIGSTOP)
        try:
            await _until(lambda: not state.available, "the outage noticed")
            view.held = [ModelPause("old", 60.0, 90.0), ModelPause("short", 5.0, 1.0), ModelPause("new", 60.0, 10.0)]
        finally:
            redis_server.proc.send_signal(signal.SIGCONT)
        await _until(lambda: state.available, "back")
        assert client.exists(key("repush", "mpause", "old"), key("repush", "mpause", "short")) == 0
        assert 45_000 < client.pttl(key("repush", "mpause", "new")) <= 52_000
        began = _redis_ms(client) - float(client.get(key("repush", "mpause", "new")) or 0)
        assert 18_000 <= began <= 25_000
    finally:
        await state.close()


async def test_actions_still_queued_at_shutdown_are_sent_if_redis_answers_within_the_flush_time(
    redis_server: RedisServer,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    """SIGTERM while Redis is stopped (SIGSTOP) with a lift queued: ``close`` keeps trying (the keeper
    is gone), Redis resumes 0.5 s later, and the lift reaches it before the process leaves."""
    clock = FakeClock()
    state = RedisState(redis_server.url, "bye", 100, clock=clock, shutdown_flush_s=10.0)
    await state.start(View())
    assert redis_server.proc is not None
    proc = redis_server.proc
    client = redis_server.client()
    try:
        proc.send_signal(signal.SIGSTOP)
        try:
            await _until(lambda: not state.available, "the outage noticed")
            state.publish(PauseLifted("gpt"))
            asyncio.get_running_loop().call_later(0.5, proc.send_signal, signal.SIGCONT)
            with caplog.at_level(logging.INFO, logger="sidecar.state"):
                started = asyncio.get_running_loop().time()
                await state.close()
                took = asyncio.get_running_loop().time() - started
        finally:
            proc.send_signal(signal.SIGCONT)
        assert 0.4 <= took < 10.0
        assert state.pending_actions == 0
        assert client.exists(key("bye", "mlift", "gpt")) == 1
        assert any("sent to the fleet at shutdown" in r.getMessage() for r in caplog.records)
        assert not [r for r in caplog.records if "never reached the fleet" in r.getMessage()]
    finally:
        await state.close()


async def test_actions_still_queued_when_the_flush_time_runs_out_are_named_and_shutdown_does_not_hang(
    redis_server: RedisServer,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Redis stays stopped: ``close`` gives up after ``shutdown_flush_s`` (0.5 s, each try bounded by
    the timeout) and one WARNING names every action lost to the fleet, how old, and what to do."""
    clock = FakeClock()
    state = RedisState(redis_server.url, "lost", 100, clock=clock, shutdown_flush_s=0.5)
    await state.start(View())
    assert redis_server.proc is not None
    proc = redis_server.proc
    try:
        proc.send_signal(signal.SIGSTOP)
        await _until(lambda: not state.available, "the outage noticed")
        state.publish(PauseLifted("gpt"))
        clock.advance(12.0)
        state.publish(CircuitClosed("search"))
        state.publish(SpendReset("wf", 0.75))
        with caplog.at_level(logging.INFO, logger="sidecar.state"):
            started = asyncio.get_running_loop().time()
            await state.close()
            took = asyncio.get_running_loop().time() - started
        assert took < 3.0  # 0.5 s, one try's timeout past it at most, and the disconnect
        assert state.pending_actions == 3
        lost = [r for r in caplog.records if "never reached the fleet" in r.getMessage()]
        assert len(lost) == 1
        assert lost[0].levelno == logging.WARNING
        text = lost[0].getMessage()
        assert "3 operator actions never reached the fleet" in text
        assert "state.shutdown_flush_s (0.5 s)" in text
        assert "lift-pause gpt (made 12.0 s ago)" in text
        assert "close-circuit search (made 0.0 s ago)" in text
        assert "reset-spend wf (0.750000 USD)" in text
        assert "Repeat them" in text
    finally:
        proc.send_signal(signal.SIGCONT)
    lost = (key("lost", "mlift", "gpt"), key("lost", "closed", "search"), key("lost", "sreset", "wf"))
    assert redis_server.client().exists(*lost) == 0
