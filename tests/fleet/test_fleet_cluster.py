"""The Redis backend on a Redis Cluster moving under it (tests/redis_cluster.py: three primaries, three replicas).

    a slot migrated while calls run     the slot of a workflow's spend and a tool call's record moved to another
                                        primary (CLUSTER SETSLOT IMPORTING / MIGRATING, MIGRATE, SETSLOT NODE)
                                        under a stream of claims and spend: redis-py follows ASK while it moves
                                        and MOVED after; every claim decided in Redis (none locally), no
                                        outage, and the spend in Redis is what was added
    the keys of one script              share a slot (the hash tags of sidecar/state/redis/keys.py)
    the subscriber's primary killed     its replica promoted; the replica whose subscription it held re-reads
                                        the slots, subscribes again and hears the other replica's changes
    cluster mode misconfigured          refused at load, naming state.nodes[i] / state.url (no URL shown)

    a primary killed under load         the primary of a capped workflow's spend (and of a third of the tool
                                        calls' slots) killed with SIGKILL under CallModel and run-once
                                        ExecuteTool through two ``sidecar serve``: 0 calls failed (fail-open),
                                        its replica promoted, both sidecars back; every tool call re-sent to
                                        the replica that answered it (0 sent twice), and to the other when its
                                        record was in Redis (0 sent twice); the rest (answered around the kill,
                                        or during an outage: recorded on their own replica only, fail-open)
                                        re-sent to the other last, the ones sent again counted

The kill -9 of the spend's primary under three replicas' calls, the spend converging, is also
tests/fleet/test_fleet.py's "Redis killed" scenario, on the cluster. The failover test follows
tests/fleet/test_fleet_sentinel.py's (its load, its outages read from the logs: tests/failover.py).
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from redis.crc import key_slot
from sidecar_client import AsyncSidecarClient

from sidecar.config import ConfigError
from sidecar.config.loading import parse_config
from sidecar.core.state import Change, ModelPause, SpendAdded
from sidecar.fakes import FakeProvider, FakeToolBackend, ThreadedServer
from sidecar.state.redis.keys import key
from tests.conftest import base_config, until
from tests.failover import AFTER, BEFORE, WORKERS, WORKFLOW, Load, note, outages, replication_offset, until_async
from tests.fleet.test_fleet_tls import Serve
from tests.redis_cluster import Cluster, ClusterNodeProcess, Target, redis_cluster  # noqa: F401  (the fixture)

PREFIX = "moving"
ADDS = 0.25


class View:
    def __init__(self) -> None:
        self.applied: list[Change] = []

    def apply(self, change: Change) -> None:
        self.applied.append(change)

    def snapshot(self) -> list[Change]:
        return []


def test_the_keys_of_each_script_share_a_slot() -> None:
    for kinds, name in (
        (("mthrottle", "mpause", "mlift"), "gpt-4o"),
        (("sthrottle", "open", "closed", "probe"), "search}{odd"),
        (("spend", "sreset"), "wf-1"),
    ):
        assert len({key_slot(key(PREFIX, kind, name).encode()) for kind in kinds}) == 1, kinds
    assert key_slot(key(PREFIX, "spend", "a").encode()) != key_slot(key(PREFIX, "spend", "b").encode())


@pytest.mark.parametrize(
    ("state", "says"),
    [
        ({"mode": "cluster"}, "state.mode: cluster needs seed nodes"),
        ({"mode": "cluster", "nodes": ["10.0.0.5:6379", "nohost"]}, "state.nodes[1] must be host:port"),
        ({"mode": "cluster", "url": "redis://u:hunter2@h:7000/3"}, "state.url in cluster mode names database 0"),
        ({"mode": "cluster", "url": "unix:///run/redis.sock"}, "state.url in cluster mode must be a redis://"),
        ({"url": "redis://h:6379/0", "nodes": ["10.0.0.5:6379"]}, "state.nodes is for state.mode: cluster"),
    ],
)
def test_cluster_mode_misconfigured_is_refused_naming_the_key(
    state: dict[str, Any], says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("H39_KEY", "sk-test-CLUSTERKEY1234567890")
    cfg = base_config("http://127.0.0.1:9", "http://127.0.0.1:9", state={"backend": "redis", **state})
    for provider in cfg["providers"].values():
        provider["api_key"] = "${H39_KEY}"
    with pytest.raises(ConfigError) as refused:
        parse_config(yaml.safe_dump(cfg))
    assert says in str(refused.value)
    assert "hunter2" not in str(refused.value)


def test_cluster_mode_takes_a_url_and_seed_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("H39_KEY", "sk-test-CLUSTERKEY1234567890")
    state = {"backend": "redis", "mode": "cluster", "url": "redis://h:7000", "nodes": ["10.0.0.5:6379", "[::1]:7001"]}
    cfg = base_config("http://127.0.0.1:9", "http://127.0.0.1:9", state=state)
    for provider in cfg["providers"].values():
        provider["api_key"] = "${H39_KEY}"
    loaded = parse_config(yaml.safe_dump(cfg)).state
    assert (loaded.mode, loaded.nodes) == ("cluster", ["10.0.0.5:6379", "[::1]:7001"])


def _migrate(
    cluster: Cluster, slot: int, source: ClusterNodeProcess, dest: ClusterNodeProcess, go: threading.Event
) -> None:
    """The slot from ``source`` to ``dest`` as redis-cli --cluster reshard does, its keys one batch at a time."""
    src, dst = source.client(), dest.client()
    src_id = src.execute_command("CLUSTER MYID").decode()
    dst_id = dst.execute_command("CLUSTER MYID").decode()
    dst.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", src_id)
    src.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", dst_id)
    go.set()  # the calls now meet ASK for a key moved, the source for the rest
    while True:
        keys = src.execute_command("CLUSTER GETKEYSINSLOT", slot, 1)
        if not keys:
            break
        src.execute_command("MIGRATE", "127.0.0.1", dest.port, "", 0, 5000, "KEYS", *keys)
    for node in (dst, src, *(n.client() for n in cluster.primaries() if n not in (source, dest))):
        node.execute_command("CLUSTER SETSLOT", slot, "NODE", dst_id)


async def test_a_slot_migrated_under_calls_is_followed_and_loses_nothing(redis_cluster: Cluster) -> None:  # noqa: F811
    cluster = redis_cluster
    cluster.wait_ok()
    cluster.flush()
    spend = key(PREFIX, "spend", "wf")
    slot = key_slot(spend.encode())
    call = next(f"c{i}" for i in range(1_000_000) if key_slot(key(PREFIX, "call", f"c{i}").encode()) == slot)
    source = cluster.owner(spend)
    dest = next(n for n in cluster.primaries() if n.port != source.port)
    state = Target(None, cluster).backend(PREFIX, 2000)
    await state.start(View())
    client = cluster.client()
    added = 0.0
    claims: list[object] = []
    try:
        assert state.available
        claims.append(await state.claim_call(call, 600.0, 0.0))
        await state.finish_call(call, '{"r": 1}', 600.0)
        go = threading.Event()
        mover = asyncio.create_task(asyncio.to_thread(_migrate, cluster, slot, source, dest, go))
        while not mover.done():  # claims and spend on the moving slot until it has moved
            claims.append(await state.claim_call(call, 600.0, 0.0))
            state.publish(SpendAdded("wf", ADDS))
            added += ADDS
            await asyncio.sleep(0.01)
        await mover
        for _ in range(20):  # and after: MOVED, then the new owner
            claims.append(await state.claim_call(call, 600.0, 0.0))
            state.publish(SpendAdded("wf", ADDS))
            added += ADDS
        assert go.is_set()
        assert cluster.owner(spend).port == dest.port
        assert all(c is not None for c in claims), claims  # None: decided on local state (Redis not reached)
        await until(lambda: float(client.get(spend) or 0) >= added - 1e-9, "the spend in Redis")
        assert float(client.get(spend) or 0) == pytest.approx(added)
        assert state.outages == 0, state.last_error
        assert len(claims) > 20
    finally:
        await state.close()


async def test_the_subscribers_primary_killed_it_subscribes_again_on_the_promoted_replica(
    redis_cluster: Cluster,  # noqa: F811
) -> None:
    cluster = redis_cluster
    cluster.wait_ok()
    cluster.flush()
    prefix = "resub"
    victim = cluster.owner(f"{prefix}:events")  # the channel's slot: where the cluster client subscribes
    heard, told = View(), View()
    listener = Target(None, cluster).backend(prefix, 200)
    speaker = Target(None, cluster).backend(prefix, 200)
    await listener.start(heard)
    await speaker.start(told)
    try:
        speaker.publish(ModelPause("before", 30.0))
        await until(lambda: any(isinstance(c, ModelPause) for c in heard.applied), "the first change heard")
        victim.kill()
        await until(lambda: not listener.available, "the listener's outage (its subscription cut)")
        await until(lambda: listener.available, "the listener back, subscribed on the promoted replica")
        await until(lambda: speaker.available, "the speaker back (its stub view pushes nothing queued meanwhile)")
        assert cluster.owner(f"{prefix}:events").port != victim.port
        speaker.publish(ModelPause("after", 30.0))
        await until(lambda: any(isinstance(c, ModelPause) and c.model == "after" for c in heard.applied), "heard after")
    finally:
        await listener.close()
        await speaker.close()
        victim.start()  # back as a replica: the cluster whole again for the tests after
        await asyncio.to_thread(cluster.wait_ok)


def _promoted(cluster: Cluster, spend: str, victim: ClusterNodeProcess, heir: ClusterNodeProcess) -> bool:
    """The victim's replica is a primary, and the cluster names it as the spend's slot's."""
    try:
        role = heir.client().info("replication").get("role")
        return role == "master" and cluster.owner(spend).port == heir.port
    except (AssertionError, redis.RedisError):  # the slot's primary still the dead one (no election yet)
        return False


async def test_a_primary_killed_under_load_calls_go_on_its_replica_is_promoted_no_claim_decided_twice(
    tmp_path: Path,
    redis_cluster: Cluster,  # noqa: F811
) -> None:
    """Two ``sidecar serve`` on the cluster, CallModel (a capped workflow) and run-once ExecuteTool round them;
    the primary of the workflow's spend (a third of the tool calls' slots too) killed with SIGKILL under them.
    Counted: calls failed (0), the replica promoted, both sidecars back and beating on the cluster, and each tool
    call re-sent: to the replica that answered it (0 sent twice), and to the other when its record was in Redis
    (answered before the kill and replicated, or after both were back: 0 sent twice). A call decided while a
    sidecar was out (fail-open) is recorded on that sidecar only, and one claimed on the killed primary just
    before the kill may not have reached its replica: re-sent to the other, such a call is sent again; the
    test re-sends the rest to the other last and counts those (printed, not held: docs/fleet.md's "What a
    failover can lose")."""
    cluster = redis_cluster
    cluster.wait_ok()
    cluster.flush()
    prefix = "failover"
    spend = key(prefix, "spend", WORKFLOW)  # Load's workflow: every model call adds to it
    victim = cluster.owner(spend)
    by_port = {n.port: n for n in cluster.live()}
    heir = by_port[int(victim.client().info("replication")["slave0"]["port"])]
    state = {**Target(None, cluster).state(prefix, 200), "shutdown_flush_s": 0}
    with ThreadedServer(FakeProvider()) as provider, ThreadedServer(FakeToolBackend()) as threaded:
        backend = threaded.server
        fakes = (provider.url, threaded.url)
        replicas = [Serve(tmp_path, fakes, state), Serve(tmp_path, fakes, state)]
        try:
            await until_async(lambda: all(r.state()["state"]["reachable"] for r in replicas), "both on the cluster")
            async with AsyncSidecarClient(replicas[0].grpc) as a, AsyncSidecarClient(replicas[1].grpc) as b:
                load = Load([a, b])
                workers = [asyncio.create_task(load.worker()) for _ in range(WORKERS)]
                await until_async(lambda: len(load.tools) >= BEFORE, f"{BEFORE} tool calls answered")
                safe_until = time.time()  # a call answered before this is in its primary's record...
                offset = replication_offset(victim.client())
                await until_async(
                    lambda: replication_offset(heir.client()) >= offset, "the replica caught up"
                )  # ...replicated
                victim.kill()  # -9, with calls in flight
                killed_at = time.time()
                await until_async(lambda: _promoted(cluster, spend, victim, heir), "the replica promoted")
                promoted_s = time.time() - killed_at
                await until_async(
                    lambda: all("available again" in r.logs() for r in replicas), "both sidecars re-synced"
                )
                recovered = time.time()
                await until_async(
                    lambda: sum(1 for i in load.tools if load.started[i] > recovered) >= AFTER,
                    f"{AFTER} tool calls answered after both were back",
                )
                load.stop = True
                await asyncio.gather(*workers)

                assert load.model_failures == [], load.model_failures[:5]
                assert load.tool_failures == [], load.tool_failures[:5]
                received = backend.notes_received
                assert received == len(load.tools)
                assert backend.notes_repeated() == {}

                client = cluster.client()
                await until_async(lambda: client.zcard(key(prefix, "replicas")) == 2, "both sidecars beating on it")
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
                for i in window:  # the fail-open caveat, measured: how many of these the other replica sends again
                    await note(clients[1 - load.tools[i][0]], i)
                twice = len(backend.notes_repeated())
        finally:
            for r in replicas:
                r.stop()
            victim.start()  # its nodes.conf kept: it rejoins as a replica of the one promoted
            await asyncio.to_thread(cluster.wait_ok)
    assert _role(victim) == "slave"  # the cluster whole again for the tests after, the roles swapped
    for r in replicas:  # each outage noticed once (a WARNING) and ended (an INFO)
        noticed = r.logs().count("unavailable (")
        assert noticed >= 1, r.logs()
        assert r.logs().count("available again") == noticed, r.logs()
    out = "; ".join(", ".join(f"{down - killed_at:+.1f}..{up - killed_at:+.1f} s" for down, up in o) for o in away)
    print(
        f"\ncluster failover: promoted {promoted_s:.1f} s after kill -9; each sidecar's outages: {out}; "
        f"{len(load.tools)} tool calls and as many model calls, 0 failed; "
        f"re-sent: {len(load.tools)} to their own replica, {len(held)} to the other, 0 sent twice; "
        f"{len(window)} answered around the kill or in an outage, re-sent to the other: {twice} sent again"
    )


def _role(node: ClusterNodeProcess) -> str:
    return str(node.client().info("replication").get("role"))
