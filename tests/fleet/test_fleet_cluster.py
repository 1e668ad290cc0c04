"""The Redis backend on a Redis Cluster moving under it (tests/redis_cluster.py: three primaries, three replicas).

    a slot migrated while calls run     the slot of a workflow's spend and a tool call's record moved to another
                                        primary (CLUSTER SETSLOT IMPORTING / MIGRATING, MIGRATE, SETSLOT NODE)
                                        under a stream of claims and spend: redis-py follows ASK while it moves
                                        and MOVED after; every claim decided in Redis (none locally), no
                                        outage, and the spend in Redis is what was added
    the keys of one script              share a slot (the hash tags of sidecar/state/redis/keys.py)
    cluster mode misconfigured          refused at load, naming state.nodes[i] / state.url (no URL shown)

A primary killed under load (its replica promoted, the state converging) is tests/fleet/test_fleet.py's
"Redis killed" scenario, on the cluster.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
import yaml
from redis.crc import key_slot

from sidecar.config import ConfigError
from sidecar.config.loading import parse_config
from sidecar.core.state import Change, SpendAdded
from sidecar.state.redis.keys import key
from tests.conftest import base_config, until
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
