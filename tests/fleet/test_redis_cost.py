"""What a successful call costs Redis: round trips on its path, and round trips and commands in all.

A real sidecar on a real ``redis-server``, a counting proxy between them (tests/redis_proxy.py): every
round trip a client sends is logged with its commands (a replica's heartbeat and its subscriber's own
traffic set apart: they are paid per replica, not per call).

    on the path     the proxy holds every round trip DELAY_S before forwarding it: a call that awaits
                    k round trips takes k x DELAY_S longer than the same call with nothing held
    in all          round trips and commands (a script's inner commands not counted: they cost no trip)
                    per call over CALLS sequential calls, the background writer's included

    call                              on the path          in all (round trips)
    CallModel                         0                    0
    CallModel with a spend cap        0                    1 at most (the writer's SPEND script, coalesced)
    ExecuteTool                       0                    0
    ExecuteTool, run once             1: the claim before  2 (the outcome's SET after the answer,
                                      it is sent           in the background: docs/fleet.md)

    a capped workflow's total        published when it crosses a hundredth of the cap, and at every add
                                      from the cap on: not per call (each publish reaches every replica);
                                      the capped calls here (a cap of 1e9 USD) publish nothing (INFO
                                      commandstats; with every add published: 1 per call)

Every kind fails above 1 round trip on its path (docs/fleet.md#what-the-fleet-costs-redis).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
import redis
from sidecar_client import job, user

from sidecar.core.state import SpendAdded, SpendTotal
from sidecar.state.redis import RedisState
from sidecar.state.redis.keys import key
from sidecar.state.redis.scripts import SPEND
from tests.conftest import Running, Start
from tests.fleet.test_fleet_redis import View
from tests.redis_proxy import RedisProxy
from tests.redis_server import RedisServer, redis_server  # noqa: F401  (the fixture)

DELAY_S = 0.6
"""Each round trip held this long: far above a loaded machine's call without Redis (tens of ms)."""
CALLS = 20
WARM = 8
SETTLE_S = 30.0
ON_PATH_LIMIT = {"CallModel": 1, "CallModel, spend cap": 1, "ExecuteTool": 1, "ExecuteTool, run once": 1}
IN_ALL_LIMIT = {"CallModel": 0.0, "CallModel, spend cap": 1.0, "ExecuteTool": 0.0, "ExecuteTool, run once": 2.0}

Call = Callable[[int], Awaitable[bool]]


@pytest.fixture
def counted() -> Iterator[RedisProxy]:
    server = RedisServer().start()
    proxy = RedisProxy(server.port).start()
    try:
        yield proxy
    finally:
        proxy.stop()
        server.kill()


async def _until(check: Callable[[], bool], what: str) -> None:
    end = time.monotonic() + SETTLE_S
    while not check():
        if time.monotonic() > end:
            pytest.fail(f"not within {SETTLE_S:g} s: {what}")
        await asyncio.sleep(0.02)


async def _sidecar(start_sidecar: Start, proxy: RedisProxy) -> Running:
    running = await start_sidecar(
        state={"backend": "redis", "url": proxy.url, "prefix": "cost", "timeout_ms": 5000},
        policy={"spend_caps": {"capped": 1e9}},
    )
    await _until(lambda: bool(getattr(running.app.state, "available", False)), "Redis available")
    return running


def _calls(running: Running) -> dict[str, Call]:
    client = running.client

    async def model(i: int) -> bool:
        reply = await client.call_model("gpt", [user(f"hello {i}")], job=job("j-free"))
        return reply.HasField("message") and reply.cost_usd > 0

    async def capped(i: int) -> bool:
        reply = await client.call_model("gpt", [user(f"hello {i}")], job=job("j-cap", "capped"))
        return reply.HasField("message") and reply.cost_usd > 0

    async def tool(i: int) -> bool:
        reply = await client.execute_tool("fetch", {"id": "doc-1"})
        return reply.WhichOneof("outcome") == "result"

    async def once(i: int) -> bool:
        reply = await client.execute_tool("note", {"text": f"note {i}"}, call_id=f"c{i}", job=job("j-once"))
        return reply.WhichOneof("outcome") == "result"

    return {"CallModel": model, "CallModel, spend cap": capped, "ExecuteTool": tool, "ExecuteTool, run once": once}


async def _warm(calls: dict[str, Call]) -> None:
    """Every script loaded (a first EVALSHA is answered NOSCRIPT, then SCRIPT LOAD) and the pool holding
    WARM connections: a call never opens one (a new connection's handshake is the pool's cost, not the call's)."""
    for name, call in calls.items():
        assert await call(-1), name
    assert all(await asyncio.gather(*(calls["ExecuteTool, run once"](-2 - i) for i in range(WARM))))
    await asyncio.sleep(0.2)


async def test_a_successful_call_awaits_at_most_one_redis_round_trip(start_sidecar: Start, counted: RedisProxy) -> None:
    running = await _sidecar(start_sidecar, counted)
    calls = _calls(running)
    await _warm(calls)
    on_path: dict[str, int] = {}
    for n, (name, call) in enumerate(calls.items()):
        counted.delay_s = 0.0
        start = time.monotonic()
        assert await call(2000 + n), name
        alone = time.monotonic() - start  # the same call with nothing held: the machine's own time
        await asyncio.sleep(2 * DELAY_S)  # what the last call queued (the writer's spend) has gone by
        counted.delay_s = DELAY_S
        start = time.monotonic()
        assert await call(1000 + n), name
        on_path[name] = round((time.monotonic() - start - alone) / DELAY_S)
        await asyncio.sleep(2 * DELAY_S)
    over = {name: k for name, k in on_path.items() if k > ON_PATH_LIMIT[name]}
    assert not over, f"round trips awaited on the path of one successful call: {on_path} (limits {ON_PATH_LIMIT})"
    assert on_path["ExecuteTool, run once"] == 1, on_path  # the claim awaited; the outcome's SET is not


async def test_round_trips_and_commands_per_call_in_all(start_sidecar: Start, counted: RedisProxy) -> None:
    running = await _sidecar(start_sidecar, counted)
    calls = _calls(running)
    await _warm(calls)
    per_call: dict[str, float] = {}
    commands: dict[str, dict[str, float]] = {}
    published: dict[str, float] = {}
    direct = redis.Redis(host="127.0.0.1", port=counted.upstream_port)  # INFO past the proxy: no trip counted
    for name, call in calls.items():
        await asyncio.sleep(0.2)  # what the warm-up and the last kind queued has gone
        counted.clear_trips()
        before = _published(direct)
        for i in range(CALLS):
            assert await call(i), name
        await asyncio.sleep(0.2)  # the writer's last flush
        published[name] = (_published(direct) - before) / CALLS
        trips = counted.calls_trips()
        per_call[name] = len(trips) / CALLS
        counts = Counter(command for trip in trips for command in trip.names)
        commands[name] = {command: n / CALLS for command, n in counts.items()}
    over = {name: n for name, n in per_call.items() if n > IN_ALL_LIMIT[name]}
    assert not over, f"round trips per call: {per_call}; commands per call: {commands}"
    assert commands["ExecuteTool, run once"] == {"EVALSHA": 1.0, "SET": 1.0}, commands
    assert set(commands["CallModel, spend cap"]) <= {"EVALSHA"}, commands
    assert published == dict.fromkeys(calls, 0.0), published  # the cap never near: no step crossed, no fan-out


# ---------------------------------------------------------------------------- the spend's fan-out


def _published(client: Any) -> int:
    stats = client.info("commandstats").get("cmdstat_publish")
    return int(stats["calls"]) if stats else 0


def _totals(view: View, workflow: str) -> list[float]:
    return [c.usd for c in view.applied if isinstance(c, SpendTotal) and c.workflow == workflow]


async def test_a_workflows_total_is_published_per_hundredth_of_its_cap_and_at_it_not_per_call(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """Each publish reaches every replica: per capped call, 1,000 replicas would each receive the whole
    fleet's calls. The total goes out when it crosses a hundredth of the cap, and at every add from the cap
    on; the replica that added reads it in the reply."""
    client = redis_server.client()
    add = client.register_script(SPEND)
    spend, life = key("steps", "spend", "wf"), key("steps", "slife", "wf")
    view = View()
    other = RedisState(redis_server.url, "steps", 1000)
    one = RedisState(redis_server.url, "steps", 1000)
    await other.start(view)
    await one.start(View())
    try:
        before = _published(client)
        for _ in range(1000):  # 0.5 USD in adds of 0.0005 against a cap of 1 USD: steps of 0.01 USD
            add(keys=[spend, life], args=["0.0005", 60_000, "steps:events", "elsewhere", "wf", "0.01", "1.0", "l1"])
        assert 49 <= _published(client) - before <= 51  # one per step crossed, not 1,000
        await _until(lambda: bool(_totals(view, "wf")) and _totals(view, "wf")[-1] > 0.49, "the last step")
        before = _published(client)
        for _ in range(3):  # 0.75 (a step crossed), 1.0 (the cap), 1.25 (past it): each published
            add(keys=[spend, life], args=["0.25", 60_000, "steps:events", "elsewhere", "wf", "0.01", "1.0", "l1"])
        assert _published(client) - before == 3
        await _until(lambda: _totals(view, "wf")[-1] >= 1.25 - 1e-9, "the total past the cap")
        for _ in range(4):  # a replica's own spend: its writer sends the cap it was recorded under
            one.publish(SpendAdded("wf2", 0.3, 1.0))
            await _until(lambda: bool(client.get(key("steps", "spend", "wf2"))), "the add counted")
        await _until(lambda: bool(_totals(view, "wf2")) and _totals(view, "wf2")[-1] >= 1.0, "wf2 at its cap")
    finally:
        await one.close()
        await other.close()
