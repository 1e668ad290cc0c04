"""Compaction's summaries shared by a fleet: two sidecars on one real Redis summarize a prefix once.

The first sidecar summarizes (one call to the fake summarizer) and stores the summary under
``{prefix}:summary:{k:<hash>}`` with a TTL; the second, asked to compact the same conversation, reads it
back and makes no call of its own. On a single Redis and on the Redis Cluster (``redis_target``,
tests/redis_cluster.py): the summary's key lands on the shard of its hash tag.
"""

from __future__ import annotations

from typing import Any

import grpc
from sidecar_contract.v1 import sidecar_pb2 as pb
from sidecar_contract.v1 import sidecar_pb2_grpc as pb_grpc

from tests.conftest import Running, Start, until
from tests.policy.test_compaction import chatty, compacting
from tests.redis_cluster import Target, redis_cluster, redis_target  # noqa: F401  (the fixtures)

SUMMARY = "The user asked me to remember lorem ipsum."


async def _start(start_sidecar: Start, redis: Target) -> Running:
    running = await start_sidecar(state=redis.state("compact", 2000), models=compacting())
    await until(lambda: bool(getattr(running.app.state, "available", False)), "Redis available")
    return running


async def _compact(running: Running) -> Any:
    async with grpc.aio.insecure_channel(running.app.address) as channel:
        return await pb_grpc.SidecarStub(channel).CallModel(pb.CallModelRequest(model="gpt", messages=chatty()))


async def test_two_sidecars_on_one_redis_summarize_a_prefix_once(
    start_sidecar: Start,
    redis_target: Target,  # noqa: F811
) -> None:
    redis = redis_target
    one = await _start(start_sidecar, redis)
    two = await _start(start_sidecar, redis)
    one.provider.script("fake-cheap", [{"preset": "reply", "text": SUMMARY}])
    first = await _compact(one)
    assert first.compaction.summarizer_calls == 1
    client = redis.client()
    keys = [k.decode() for k in client.scan_iter(match="compact:summary:{k:*}")]
    assert len(keys) == 1
    assert 0 < client.pttl(keys[0]) <= 24 * 3600 * 1000
    assert client.get(keys[0]).decode() == SUMMARY
    second = await _compact(two)
    assert second.compaction.summarizer_calls == 0
    assert [m.text for m in second.compaction.messages] == [m.text for m in first.compaction.messages]
    assert len(one.provider.requests(model="fake-cheap")) == 1
    print(
        f"\nfleet ({redis.mode}): {first.compaction.tokens_before} -> {first.compaction.tokens_after} tokens, "
        "summarizer calls 1 + 0"
    )
