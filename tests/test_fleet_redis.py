"""The Redis backend against a real redis-server: atomic claims, TTLs on every key, outages.

ten replicas claim one probe at once      exactly one wins
every key written                         has a TTL (none outlives its cooldown, pause or window)
Redis gone                                publish and claim answer at once (a claim: granted
                                          locally), one WARNING, the gauge event; spend kept
Redis back                                INFO once; the spend kept reaches Redis
1,000 tool-call claims at once            every one decided in Redis (more calls than the pool's
                                          connections wait for one: no outage, no local decision)
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sidecar.core.clock import FakeClock
from sidecar.core.details import Trigger
from sidecar.core.observer import NullObserver, StateBackendChanged
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
from sidecar.state.redis import MAX_CONNECTIONS, RedisState
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


async def test_one_probe_is_granted_among_ten_replicas(redis_server: RedisServer) -> None:  # noqa: F811
    states = [RedisState(redis_server.url, "claims", 200) for _ in range(10)]
    for state in states:
        await state.start(View())
    try:
        won = await asyncio.gather(*(s.claim_probe("svc", 30.0) for s in states))
        assert sum(won) == 1
    finally:
        for state in states:
            await state.close()


async def test_every_key_has_a_ttl(redis_server: RedisServer) -> None:  # noqa: F811
    state = RedisState(redis_server.url, "ttl", 200)
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
        client = redis_server.client()
        await _until(lambda: client.exists("ttl:spend:wf"), "the spend written")
        keys = [k.decode() for k in client.scan_iter(match="ttl:*")]
        assert len(keys) >= 7
        assert all(client.pttl(k) > 0 for k in keys), {k: client.pttl(k) for k in keys}
        assert client.pttl("ttl:open:s") <= 90_000  # open 30 s + the probe timeout 60 s
        assert client.pttl("ttl:mpause:m") <= 5_000
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
            await _until(lambda: client.get("outage:spend:wf") is not None, "the spend kept sent")
            assert float(client.get("outage:spend:wf") or 0) == pytest.approx(10.0)
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
    redis_server: RedisServer,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    """redis-py's default pool raised MaxConnectionsError at its 101st connection: 220 tool calls at once
    fell back to local state, and a replica killed under them had recorded nothing (test_tool_once_kill)."""
    observer = NullObserver(keep=True)
    state = RedisState(redis_server.url, "burst", 10_000, observer=observer)  # generous: a slow machine waits
    await state.start(View())
    calls = 10 * MAX_CONNECTIONS
    try:
        with caplog.at_level(logging.INFO, logger="sidecar.state"):
            claims = await asyncio.gather(*(state.claim_call(f"call-{i}", 60.0, 0.0) for i in range(calls)))
        assert all(claim is not None for claim in claims)  # None: decided locally
        assert state.available
        assert not [e for e in observer.events if isinstance(e, StateBackendChanged)]
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(list(redis_server.client().scan_iter(match="burst:call:*"))) == calls
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
    client.set("act:mpause:gpt", str(old), px=120_000)  # paused before the lift
    client.set("act:mpause:claude", str(new), px=120_000)  # paused after it, on another replica
    client.set("act:spend:wf", "1.25", px=120_000)
    client.set("act:open:old", json.dumps({"cooldown": 30, "since": 0, "probe": 60, "at": old}), px=120_000)
    client.set("act:open:new", json.dumps({"cooldown": 30, "since": 0, "probe": 60, "at": new}), px=120_000)
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
        assert client.exists("act:mpause:gpt", "act:spend:wf", "act:open:old") == 0  # undone, before the read back
        assert client.exists("act:mpause:claude", "act:open:new") == 2  # newer than the actions: kept
        back = _redis_ms(client)
        for record in ("act:mlift:gpt", "act:sreset:wf", "act:closed:old"):  # remembered for later re-syncs
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


async def test_a_reset_takes_off_only_what_the_operator_saw(redis_server: RedisServer) -> None:  # noqa: F811
    """Cost another replica added after the reset's view (the total grew in Redis) stays counted."""
    state = RedisState(redis_server.url, "forgive", 200)
    await state.start(View())
    client = redis_server.client()
    try:
        client.set("forgive:spend:wf", "2.0", px=120_000)  # 1.5 seen here, 0.5 added elsewhere since
        state.publish(SpendReset("wf", 1.5))
        await _until(lambda: float(client.get("forgive:spend:wf") or 0) == pytest.approx(0.5), "0.5 left")
    finally:
        await state.close()
