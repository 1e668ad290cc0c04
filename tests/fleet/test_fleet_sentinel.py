"""A primary failover through Redis Sentinel, under load: real ``redis-server`` processes (a primary, a
replica, three ``redis-server --sentinel``) and two ``sidecar serve`` replicas on ``state.sentinel``.

    before           both replicas reach the primary the sentinels name; model calls (a capped workflow)
                     and run-once tool calls (a job id and a call id each, POST /notes) go round the two
    kill -9          the primary, with calls in flight; the sentinels (down-after 500 ms) promote the
                     replica; each sidecar's next connection asks them and finds it
    must hold        0 calls failed (fail-open: the outage is decided on local state)
                     the state converges: both sidecars reachable again, both in the new primary's
                     replica count
                     0 tool calls reached the backend twice when each is re-sent to the replica that
                     answered it, and 0 when a call whose record Redis held before the kill (replicated)
                     or after the recovery is re-sent to the *other* replica
    said, not held   a call decided while Redis was away is recorded in its replica only (fail-open,
                     docs/fleet.md): re-sent to the other replica it would be sent again; the test counts
                     those calls and re-sends them to their own replica only

Past the pool's connections through Sentinel, a call waits for one (a blocking pool, as with a URL).

Nothing is timed: each step polls for a state within a bound (the sentinels' timers are small).
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from sidecar_client import AsyncSidecarClient

from sidecar.fakes import FakeProvider, FakeToolBackend, ThreadedServer
from sidecar.state.redis.dial import Dial, SentinelNodes, client, close
from tests.failover import AFTER, BEFORE, POLL_S, WORKERS, Load, note, outages, replication_offset, until_async
from tests.fleet.test_fleet_tls import Serve
from tests.redis_server import REDIS_SERVER, RedisServer, free_port

SERVICE = "fleet-primary"
DOWN_AFTER_MS = 500
FAILOVER_TIMEOUT_MS = 2000
PREFIX = "sentinel"


def _until(check: Callable[[], bool], what: str) -> None:
    end = time.monotonic() + POLL_S
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"not within {POLL_S:g} s: {what}")
        time.sleep(0.05)


class Sentinels:
    """A primary, its replica, and three sentinels watching it as ``SERVICE`` (quorum 2)."""

    def __init__(self, where: Path) -> None:
        self.primary = RedisServer().start()
        self.replica = RedisServer()
        self.where = where
        self.ports = [free_port() for _ in range(3)]
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> Sentinels:
        r = self.replica
        args = [REDIS_SERVER, "--port", str(r.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        r.proc = subprocess.Popen(
            [*args, "--replicaof", "127.0.0.1", str(self.primary.port), "--dir", str(self.where)],  # its sync's RDB
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for port in self.ports:
            conf = self.where / f"sentinel-{port}.conf"  # sentinel rewrites its file: one each, writable
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self.where}\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary.port} 2\n"
                f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}\n"
                f"sentinel parallel-syncs {SERVICE} 1\n"
            )
            self.procs.append(
                subprocess.Popen(
                    [REDIS_SERVER, str(conf), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                )
            )
        _until(self._ready, "three sentinels that know each other and the replica")
        return self

    def sentinel(self, port: int) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=port, socket_timeout=2, decode_responses=True)

    def _ready(self) -> bool:
        try:
            for port in self.ports:
                state: Any = self.sentinel(port).sentinel_master(SERVICE)
                if int(state["num-other-sentinels"]) != 2 or int(state["num-slaves"]) != 1:
                    return False
            return bool(self.replica.client().info("replication").get("master_link_status") == "up")
        except redis.RedisError:
            return False

    def master_port(self) -> int | None:
        """The primary's port as a majority of the sentinels name it (None: no majority yet)."""
        named: list[int] = []
        for port in self.ports:
            try:
                got: Any = self.sentinel(port).sentinel_get_master_addr_by_name(SERVICE)
            except redis.RedisError:
                continue
            if got:
                named.append(int(got[1]))
        best = max(set(named), key=named.count, default=None)
        return best if best is not None and named.count(best) >= 2 else None

    @property
    def nodes(self) -> list[str]:
        return [f"127.0.0.1:{p}" for p in self.ports]

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        self.primary.kill()
        self.replica.kill()


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[Sentinels]:
    world = Sentinels(tmp_path)
    try:
        yield world.start()
    finally:
        world.stop()


async def test_a_primary_killed_under_load_fails_over_calls_go_on_and_no_claim_is_decided_twice(
    tmp_path: Path, sentinels: Sentinels
) -> None:
    state = {
        "backend": "redis",
        "sentinel": {"nodes": sentinels.nodes, "service": SERVICE},
        "prefix": PREFIX,
        "timeout_ms": 200,
        "shutdown_flush_s": 0,
    }
    with ThreadedServer(FakeProvider()) as provider, ThreadedServer(FakeToolBackend()) as threaded:
        backend = threaded.server
        fakes = (provider.url, threaded.url)
        replicas = [Serve(tmp_path, fakes, state), Serve(tmp_path, fakes, state)]
        try:
            _until(lambda: all(r.state()["state"]["reachable"] for r in replicas), "both on the primary")
            async with AsyncSidecarClient(replicas[0].grpc) as a, AsyncSidecarClient(replicas[1].grpc) as b:
                load = Load([a, b])
                workers = [asyncio.create_task(load.worker()) for _ in range(WORKERS)]
                await until_async(lambda: len(load.tools) >= BEFORE, f"{BEFORE} tool calls answered")
                safe_until = time.time()  # a call answered before this is in the primary's record...
                primary = sentinels.primary.client()
                offset = replication_offset(primary)
                replica = sentinels.replica.client()
                await until_async(
                    lambda: replication_offset(replica) >= offset, "the replica caught up"
                )  # ...and replicated
                sentinels.primary.kill()  # -9, with calls in flight
                killed_at = time.time()
                await until_async(lambda: sentinels.master_port() == sentinels.replica.port, "the replica promoted")
                promoted_s = time.time() - killed_at
                await until_async(
                    lambda: all("available again" in r.logs() for r in replicas),
                    "both sidecars re-synced on the new primary",
                )
                recovered = time.time()
                await until_async(
                    lambda: sum(1 for i in load.tools if load.started[i] > recovered) >= AFTER,
                    f"{AFTER} tool calls answered on the new primary",
                )
                load.stop = True
                await asyncio.gather(*workers)

                assert load.model_failures == [], load.model_failures[:5]
                assert load.tool_failures == [], load.tool_failures[:5]
                received = backend.notes_received
                assert received == len(load.tools)
                assert backend.notes_repeated() == {}

                new_primary = sentinels.replica.client()
                _until(lambda: new_primary.zcard(f"{PREFIX}:replicas") == 2, "both sidecars beating on it")
                assert all(r.state()["state"]["reachable"] for r in replicas)

                clients = [a, b]
                same = {i: await note(clients[which], i) for i, (which, _) in sorted(load.tools.items())}
                assert backend.notes_repeated() == {}  # 0 decided twice on the replica that answered
                assert all(same[i] == answer for i, (_, answer) in load.tools.items())

                away = [outages(r.logs()) for r in replicas]

                def through_redis(i: int) -> bool:
                    """Answered before the kill (replicated), or after it on a replica that had Redis throughout."""
                    start, end = load.started[i], load.ended[i]
                    if end < safe_until:
                        return True
                    clear = all(end < down or start > up for down, up in away[load.tools[i][0]])
                    return start > killed_at and clear

                held = [i for i in load.tools if through_redis(i)]
                window = sorted(set(load.tools) - set(held))
                other = {i: await note(clients[1 - load.tools[i][0]], i) for i in held}
                assert backend.notes_repeated() == {}  # 0 decided twice across the replicas
                assert all(other[i] == load.tools[i][1] for i in held)
                assert backend.notes_received == received
        finally:
            for r in replicas:
                r.stop()
    for r in replicas:  # each outage noticed once (a WARNING) and ended (an INFO): the kill's, and maybe a
        noticed = r.logs().count("unavailable (")  # short one when the sentinels named no primary for a moment
        assert noticed >= 1, r.logs()
        assert r.logs().count("available again") == noticed, r.logs()
    print(
        f"\nsentinel failover: promoted {promoted_s:.1f} s after kill -9; "
        f"{len(load.tools)} tool calls and as many model calls, 0 failed; "
        f"re-sent: {len(load.tools)} to their own replica, {len(held)} to the other, 0 sent twice; "
        f"{len(window)} decided during the outage (recorded on their replica only)"
    )


async def test_more_calls_at_once_than_sentinel_pool_connections_wait_for_one(sentinels: Sentinels) -> None:
    """The Sentinel pool blocks like the URL's (``dial.BlockingSentinelPool``): past max_connections a
    call waits for a connection, within the timeout, instead of redis-py's MaxConnectionsError."""
    nodes = tuple(("127.0.0.1", p) for p in sentinels.ports)
    redis_client = client(Dial(sentinel=SentinelNodes(nodes, SERVICE)), timeout_s=5.0, max_connections=3)
    try:
        begun = time.monotonic()
        waits = await asyncio.gather(*(redis_client.blpop(["nothing"], 0.2) for _ in range(9)))
        took = time.monotonic() - begun
    finally:
        await close(redis_client)
    assert waits == [None] * 9  # every one answered (each BLPOP held its connection 0.2 s)
    assert took >= 0.6  # three rounds of three: they waited for a connection
