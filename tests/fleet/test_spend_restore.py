"""A capped workflow's spend restored into a Redis restarted empty: exact, with its total published in steps.

Three replicas, a real ledger and ``RedisState`` each, each through its own proxy (tests/redis_proxy.py), so that
which one re-syncs first is the test's choice: a proxy points at a port where nothing listens until the replica's
turn. The cap is 1 USD: the total is published per 0.01 USD crossed.

    before the kill      A adds 0.004, then B 0.003: Redis holds 0.007; A knows 0.004 (its own reply, no
                         step crossed: nothing published), B knows 0.007 (its reply)
    during the outage    A adds 0.005, B 0.001, each kept for Redis
    restarted empty      C joins it first (nothing to read back); then A and B re-sync, A first, B first or at
                         once: Redis holds 0.013 each time
    then                 C adds 0.001; Redis stopped (SIGSTOP: its data kept) and continued, A adding 0.002
                         meanwhile: every re-sync finds the spend kept, Redis holds 0.016

Before the fix, A first: A pushed what it knew (0.004) and its 0.005 (Redis: 0.009); B read 0.009 back, its view
max(0.008, 0.009), and pushed 0.009 less its own 0.001 as a floor (no-op), then its 0.001: 0.010, 0.003 short. A
floor counted before the restart now raises the base the restore started from (``scripts.SPEND_FLOOR``), not a
total that already holds the adds made since. A later re-sync that finds the spend kept adds nothing, C's
included: it learnt the key's life with every total Redis told it after the restore (the floors' publishes, its
own reply); without it, C's floor would count as one from before the loss and raise the base by all C knew.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Iterator

import pytest

from sidecar.core.clock import FakeClock
from sidecar.core.fleet_view import FleetView
from sidecar.core.service_guards import ServiceGuards
from sidecar.core.settings import CircuitConfig
from sidecar.core.spend import SpendLedger
from sidecar.state.redis import RedisState
from sidecar.state.redis.keys import key
from tests.redis_proxy import RedisProxy
from tests.redis_server import RedisServer, free_port, redis_server  # noqa: F401  (the fixture)

POLL_S = 20.0
CAP = 1.0
PREFIX = "restore"


class Replica:
    """One replica's ledger and view (real ones), its backend through a proxy of its own."""

    def __init__(self, server: RedisServer) -> None:
        self.proxy = RedisProxy(server.port).start()
        clock = FakeClock()
        self.state = RedisState(self.proxy.url, PREFIX, 200, clock=clock)
        self.ledger = SpendLedger({"wf": CAP}, state=self.state)
        self.view = FleetView({}, ServiceGuards({}, CircuitConfig(), clock, []), self.ledger)


async def _until(check: Callable[[], object], what: str) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + POLL_S
    while not check():
        if loop.time() > end:
            pytest.fail(f"not within {POLL_S:g} s: {what}")
        await asyncio.sleep(0.02)


def _stored(server: RedisServer) -> float:
    value = server.client().get(key(PREFIX, "spend", "wf"))
    return float(value) if value is not None else 0.0


@pytest.fixture
def replicas(redis_server: RedisServer) -> Iterator[tuple[Replica, Replica, Replica]]:  # noqa: F811
    three = Replica(redis_server), Replica(redis_server), Replica(redis_server)
    try:
        yield three
    finally:
        for r in three:
            r.proxy.stop()


async def _add(r: Replica, usd: float, server: RedisServer, total: float) -> None:
    r.ledger.record("wf", usd)
    await _until(lambda: _stored(server) == pytest.approx(total, abs=1e-12), f"{total} counted in Redis")
    await _until(lambda: r.ledger.spent("wf") == pytest.approx(total, abs=1e-12), "the reply read")


@pytest.mark.parametrize("first", ["lagging", "knowing", "both"])
async def test_the_spend_restored_into_an_emptied_redis_is_exact_whoever_re_syncs_first(
    redis_server: RedisServer,  # noqa: F811
    replicas: tuple[Replica, Replica, Replica],
    first: str,
) -> None:
    a, b, c = replicas
    for r in (a, b):
        await r.state.start(r.view)
    try:
        await _add(a, 0.004, redis_server, 0.004)
        await _add(b, 0.003, redis_server, 0.007)
        assert a.ledger.spent("wf") == pytest.approx(0.004)  # no step crossed: A was told nothing
        redis_server.kill()
        for r in (a, b):
            await _until(lambda r=r: not r.state.available, "the outage noticed")
        a.ledger.record("wf", 0.005)
        b.ledger.record("wf", 0.001)
        dead = free_port()  # nothing listens there: a replica's re-sync waits while its proxy points at it
        for r in (a, b):
            r.proxy.upstream_port = dead
        redis_server.start()
        await c.state.start(c.view)  # C joins the emptied Redis before any re-sync: nothing to read back
        assert c.state.available
        for released in {"lagging": [(a,), (b,)], "knowing": [(b,), (a,)], "both": [(a, b)]}[first]:
            for r in released:
                r.proxy.upstream_port = redis_server.port
            for r in released:
                await _until(lambda r=r: r.state.available, "re-synced")
        assert _stored(redis_server) == pytest.approx(0.013, abs=1e-12)

        await _add(c, 0.001, redis_server, 0.014)
        assert redis_server.proc is not None  # a re-sync that finds the spend kept: nothing added
        redis_server.proc.send_signal(signal.SIGSTOP)
        try:
            for r in (a, b, c):
                await _until(lambda r=r: not r.state.available, "the stop noticed")
            a.ledger.record("wf", 0.002)
        finally:
            redis_server.proc.send_signal(signal.SIGCONT)
        for r in (a, b, c):
            await _until(lambda r=r: r.state.available, "every replica back")
        assert _stored(redis_server) == pytest.approx(0.016, abs=1e-12)
    finally:
        for r in (a, b, c):
            await r.state.close()
