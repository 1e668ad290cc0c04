"""Tool calls that happen once, through the running sidecar against the fake tool backend.

    idempotency_header                  one key on every retry and on the agent's re-send (the backend's
                                        log); a non-idempotent tool with one is retried; none without it
    a re-send within the window         the recorded outcome (a result or a failure), no second request
    a re-send while the first is out    waits for it, answers what it answered, one request (in the
                                        same process, or on another replica of the same Redis)
    after the window                    sent again (memory: the fake clock; Redis: its TTL, waited for)
    not the same call                   other arguments, no job id, no call id: sent
    nothing reached the service         not recorded: a re-send is sent (connection refused)
    the caller cancels mid-send         a re-send answers "outcome unknown, not sent again"
    the outcome's write to Redis        after the answer, on both doors: while a proxy cuts or stalls its first
                                        write, a re-send here is answered from this process, one at another
                                        replica waits on the live intent; tried again until it lands (the
                                        caller has its answer: nothing of it waits on the write)

Each is run with the memory backend, with a real Redis (tests/redis_server.py) and with a Redis Cluster
(tests/redis_cluster.py) inside one process (the proxied writes: the single Redis);
tests/fleet/test_tool_once_kill.py kills a process with -9 under 200 calls.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sidecar_client import job, pb

from sidecar.fakes import FakeToolBackend, ThreadedServer
from sidecar.fakes.tool_backend import IDEMPOTENCY_HEADER
from sidecar.state.redis.calls import RECORD_TRIES
from sidecar.tools.once import KEY_PREFIX, UNKNOWN
from tests.conftest import Running, Start, tool
from tests.fronts.test_mcp_front import mcp_client, url
from tests.redis_cluster import redis_cluster, target  # noqa: F401  (the fixture)
from tests.redis_proxy import Fault, RedisProxy
from tests.redis_server import RedisServer

NOTE_PARAMS = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
POLL_S = 30.0
WRITE_MS = 3000
"""The proxied replica's timeout_ms where a stalled write must outlast the answer and a re-send."""
Backend = ThreadedServer[FakeToolBackend]


@pytest.fixture(params=["memory", "redis", "cluster"])
def backend_kind(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """The ``state`` section: this process's record, a real Redis, or a Redis Cluster."""
    if request.param == "memory":
        yield {"backend": "memory"}
        return
    with target("single" if request.param == "redis" else "cluster", request) as chosen:
        yield {**chosen.state("once", 2000), "_target": chosen}


def _state(section: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in section.items() if not k.startswith("_")}


def _keyed(url: str, **extra: Any) -> dict[str, Any]:
    return tool(
        url + "/notes",
        "fetch",
        "notes",
        "POST",
        body="arguments",
        parameters=NOTE_PARAMS,
        idempotency_header="Idempotency-Key",
        **extra,
    )


async def _start(start_sidecar: Start, state: dict[str, Any], **sections: Any) -> Running:
    running = await start_sidecar(state=_state(state), **sections)
    if state["backend"] == "redis":
        await _until(lambda: running.app.state.shared and getattr(running.app.state, "available", False), "Redis")
    return running


async def _until(check: Any, what: str) -> None:
    end = time.monotonic() + POLL_S
    while not check():
        if time.monotonic() > end:
            pytest.fail(f"not within {POLL_S:g} s: {what}")
        await asyncio.sleep(0.02)


def _posts(running: Running) -> list[dict[str, Any]]:
    return running.backend.requests(path="/notes", method="POST")


def _kind(resp: pb.ExecuteToolResponse) -> str:
    if resp.WhichOneof("outcome") == "result":
        return "OK"
    return pb.FailureKind.Name(resp.failure.kind).removeprefix("FAILURE_KIND_")


# ---------------------------------------------------------------------------- the idempotency key


async def test_retries_of_a_keyed_tool_carry_one_key_and_the_service_creates_one_note(
    start_sidecar: Start, backend: Backend
) -> None:
    running = await start_sidecar(tools={"keyed": _keyed(backend.url, dedupe_window_s=0)})
    running.backend.script("/notes", [{"status": 503}, {"fault": "reset"}])  # the reset one arrived, then cut
    resp = await running.client.execute_tool("keyed", {"text": "once"}, call_id="c1", job=job("j1"))
    assert _kind(resp) == "OK", resp
    assert resp.attempts == 3  # a POST, retried like an idempotent tool: it sends a key
    keys = {r["headers"].get(IDEMPOTENCY_HEADER) for r in _posts(running)}
    assert len(keys) == 1
    (key,) = keys
    assert key is not None
    assert key.startswith(KEY_PREFIX)
    assert len(key) == len(KEY_PREFIX) + 48
    assert running.backend.notes_received == 3
    assert running.backend.notes_created == 1  # the retry after the reset was answered the note it created
    again = await running.client.execute_tool("keyed", {"text": "once"}, call_id="c1", job=job("j1"))
    assert _posts(running)[-1]["headers"][IDEMPOTENCY_HEADER] == key  # the agent's re-send: the same key
    assert again.model_text == resp.model_text
    other = await running.client.execute_tool("keyed", {"text": "once"}, call_id="c2", job=job("j1"))
    assert _posts(running)[-1]["headers"][IDEMPOTENCY_HEADER] != key  # another call, another key
    assert other.model_text != resp.model_text
    assert running.backend.notes_created == 2


async def test_a_call_without_ids_still_sends_one_key_on_its_retries(start_sidecar: Start, backend: Backend) -> None:
    running = await start_sidecar(tools={"keyed": _keyed(backend.url)})
    running.backend.script("/notes", [{"status": 503}])
    await running.client.execute_tool("keyed", {"text": "anon"})
    await running.client.execute_tool("keyed", {"text": "anon"})
    keys = [r["headers"][IDEMPOTENCY_HEADER] for r in _posts(running)]
    assert len(keys) == 3
    assert keys[0] == keys[1] != keys[2]  # the retry kept its key; an unnamed re-send is a new call


async def test_a_post_without_a_key_is_not_retried_and_sends_no_key(sidecar: Running) -> None:
    sidecar.backend.script("/notes", [{"status": 503}])
    resp = await sidecar.client.execute_tool("note", {"text": "plain"}, call_id="c1", job=job("j-plain"))
    assert resp.attempts == 1
    assert IDEMPOTENCY_HEADER not in _posts(sidecar)[0]["headers"]


async def test_list_tools_says_a_keyed_post_is_idempotent(start_sidecar: Start, backend: Backend) -> None:
    running = await start_sidecar(tools={"keyed": _keyed(backend.url)})
    listed = {t.definition.name: t for t in await running.client.list_tools()}
    assert listed["keyed"].idempotent
    assert not listed["note"].idempotent


# ---------------------------------------------------------------------------- the record


async def test_a_re_send_within_the_window_gets_the_recorded_outcome(
    start_sidecar: Start,
    backend_kind: dict[str, Any],
) -> None:
    running = await _start(start_sidecar, backend_kind)
    ids = {"call_id": "c1", "job": job("j-window")}
    first = await running.client.execute_tool("note", {"text": "remember"}, **ids)
    assert _kind(first) == "OK"
    running.clock.advance(599)  # within the default window (600 s)
    again = await running.client.execute_tool("note", {"text": "remember"}, **ids)
    assert again == first
    assert len(_posts(running)) == 1
    running.backend.script("/notes", [{"status": 503}])
    failed = await running.client.execute_tool("note", {"text": "fails"}, call_id="c2", job=job("j-window"))
    refailed = await running.client.execute_tool("note", {"text": "fails"}, call_id="c2", job=job("j-window"))
    assert _kind(failed) == "EXTERNAL_SERVICE"
    assert refailed == failed  # a failure is an outcome too: the same words, not sent again
    assert len(_posts(running)) == 2


async def test_a_re_send_while_the_first_is_in_flight_waits_for_it(
    start_sidecar: Start,
    backend_kind: dict[str, Any],
) -> None:
    running = await _start(start_sidecar, backend_kind)
    running.backend.script("/notes", [{"delay_ms": 1500}])
    ids = {"call_id": "c1", "job": job("j-flight")}
    first = asyncio.create_task(running.client.execute_tool("note", {"text": "slow"}, **ids))
    await _until(lambda: len(_posts(running)) == 1, "the first call at the backend")
    second = await running.client.execute_tool("note", {"text": "slow"}, **ids)
    assert second == await first
    assert _kind(second) == "OK"
    assert len(_posts(running)) == 1


async def test_after_the_window_it_is_sent_again(start_sidecar: Start) -> None:
    running = await start_sidecar(policy={"dedupe_window_s": 60})
    ids = {"call_id": "c1", "job": job("j-after")}
    await running.client.execute_tool("note", {"text": "twice"}, **ids)
    running.clock.advance(59)
    await running.client.execute_tool("note", {"text": "twice"}, **ids)
    assert len(_posts(running)) == 1
    running.clock.advance(2)  # 61 s after the outcome was recorded
    await running.client.execute_tool("note", {"text": "twice"}, **ids)
    assert len(_posts(running)) == 2


async def test_after_the_window_it_is_sent_again_with_redis(
    start_sidecar: Start, backend: Backend, redis_backend: dict[str, Any]
) -> None:
    running = await _start(start_sidecar, redis_backend, tools={"short": _note(backend.url, dedupe_window_s=0.2)})
    ids = {"call_id": "c1", "job": job("j-after-redis")}
    await running.client.execute_tool("short", {"text": "twice"}, **ids)
    client = redis_backend["_target"].client()
    (key,) = [k for k in client.scan_iter(match="once:call:*")]
    kept: list[int] = []

    def outcome_kept() -> bool:  # the outcome's write follows the answer: until it lands, the intent
        value, ttl = client.get(key) or b"", client.pttl(key)
        kept.append(ttl)
        return value.startswith(b"o") or ttl < 0

    await _until(outcome_kept, "the outcome written")
    assert 0 < kept[-1] <= 200  # the outcome is kept for the window
    await _until(lambda: not client.exists(key), "the record expired in Redis")
    await running.client.execute_tool("short", {"text": "twice"}, **ids)
    assert len(_posts(running)) == 2


def _note(url: str, **extra: Any) -> dict[str, Any]:
    return tool(url + "/notes", "fetch", "notes", "POST", body="arguments", parameters=NOTE_PARAMS, **extra)


@pytest.fixture(params=["single", "cluster"])
def redis_backend(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    with target(request.param, request) as chosen:
        yield {**chosen.state("once", 2000), "_target": chosen}


async def test_not_the_same_call_is_sent(start_sidecar: Start, backend_kind: dict[str, Any]) -> None:
    running = await _start(start_sidecar, backend_kind)
    await running.client.execute_tool("note", {"text": "a"}, call_id="c1", job=job("j-same"))
    await running.client.execute_tool("note", {"text": "b"}, call_id="c1", job=job("j-same"))  # other arguments
    await running.client.execute_tool("note", {"text": "a"}, call_id="c1", job=job("j-other"))  # another job
    await running.client.execute_tool("note", {"text": "a"}, call_id="c1")  # no job id: not remembered
    await running.client.execute_tool("note", {"text": "a"}, call_id="c1")
    await running.client.execute_tool("note", {"text": "a"}, job=job("j-same"))  # no call id: not remembered
    await running.client.execute_tool("note", {"text": "a"}, job=job("j-same"))
    assert len(_posts(running)) == 7
    await running.client.execute_tool("note", '{"text":  "a"}', call_id="c1", job=job("j-same"))  # same JSON value
    assert len(_posts(running)) == 7


async def test_a_tool_with_window_zero_is_not_remembered(start_sidecar: Start, backend: Backend) -> None:
    running = await start_sidecar(tools={"forgetful": _note(backend.url, dedupe_window_s=0)})
    for _ in range(2):
        await running.client.execute_tool("forgetful", {"text": "x"}, call_id="c1", job=job("j-zero"))
    assert len(_posts(running)) == 2


async def test_a_call_that_never_reached_the_service_is_not_recorded(
    start_sidecar: Start,
    backend_kind: dict[str, Any],
) -> None:
    post = tool("http://127.0.0.1:1/x", "fetch", "down", "POST", body="arguments", parameters={"type": "object"})
    running = await _start(start_sidecar, backend_kind, tools={"post_down": post})
    ids = {"call_id": "c1", "job": job("j-down")}
    first = await running.client.execute_tool("post_down", {}, **ids)
    again = await running.client.execute_tool("post_down", {}, **ids)
    assert first.failure.message.endswith("it could not be reached (connection refused).")
    assert first.attempts == again.attempts == 3  # sent again: nothing had reached it


async def test_a_re_send_after_the_caller_cancelled_mid_send_is_not_sent_again(
    start_sidecar: Start,
    backend_kind: dict[str, Any],
) -> None:
    running = await _start(start_sidecar, backend_kind)
    running.backend.script("/notes", [{"delay_ms": 5000}])
    ids = {"call_id": "c1", "job": job("j-cancel")}
    first = asyncio.create_task(running.client.execute_tool("note", {"text": "cut"}, **ids))
    await _until(lambda: len(_posts(running)) == 1, "the first call at the backend")
    first.cancel()  # the agent gives up on it: the sidecar's call is cancelled mid-send
    with pytest.raises(asyncio.CancelledError):
        await first
    await _until(lambda: running.backend.requests(client_disconnected="true"), "the sidecar's call cut")
    again = await running.client.execute_tool("note", {"text": "cut"}, **ids)
    assert _kind(again) == "EXTERNAL_SERVICE"
    assert not again.failure.correctable
    assert UNKNOWN in again.failure.message.lower()
    assert "job 'j-cancel', call 'c1'" in again.failure.message
    assert "cancelled before the service answered" in again.failure.message
    assert again.failure.service.detail == UNKNOWN
    assert again.attempts == 0
    assert len(_posts(running)) == 1


async def test_a_re_send_to_another_replica_waits_for_the_first_and_gets_its_outcome(
    start_sidecar: Start, redis_backend: dict[str, Any]
) -> None:
    one = await _start(start_sidecar, redis_backend)
    two = await _start(start_sidecar, redis_backend)  # another replica of the same Redis and prefix
    one.backend.script("/notes", [{"delay_ms": 1500}])
    ids = {"call_id": "c1", "job": job("j-replicas")}
    first = asyncio.create_task(one.client.execute_tool("note", {"text": "shared"}, **ids))
    await _until(lambda: len(_posts(one)) == 1, "the first call at the backend")
    second = await two.client.execute_tool("note", {"text": "shared"}, **ids)  # no deadline: until it ends
    assert second == await first
    assert _kind(second) == "OK"
    assert len(_posts(one)) == 1
    later = await two.client.execute_tool("note", {"text": "shared"}, **ids)
    assert later == second
    assert len(_posts(one)) == 1


# ---------------------------------------------------------------------------- the outcome, before the answer


@pytest.fixture
def redis_proxy() -> Iterator[tuple[RedisServer, RedisProxy]]:
    """A real Redis behind a proxy that can fail the write of one outcome (tests/redis_proxy.py)."""
    server = RedisServer().start()
    proxy = RedisProxy(server.port).start()
    try:
        yield server, proxy
    finally:
        proxy.stop()
        server.kill()


async def _proxied(start_sidecar: Start, proxy: RedisProxy, timeout_ms: int = 1000) -> Running:
    state = {"backend": "redis", "url": proxy.url, "prefix": "once", "timeout_ms": timeout_ms}
    return await _start(start_sidecar, state, http={"listen": "127.0.0.1:0"})


async def _note_by(door: str, running: Running, text: str, job_id: str) -> Any:
    """One call of ``note`` by a door: ExecuteTool (call id c1), or the MCP SDK's tools/call (JSON-RPC id 1)."""
    if door == "grpc":
        return await running.client.execute_tool("note", {"text": text}, call_id="c1", job=job(job_id))
    async with mcp_client(url(running), headers={"x-sidecar-job-id": job_id}) as mcp:
        return await mcp.call_tool("note", {"text": text})


async def _back(running: Running) -> None:
    """Until the sidecar has re-synced after the fault (a failed write begins an outage: meanwhile every
    claim is this process's own, and a re-send would be sent, as docs/retries.md says of an outage)."""
    await _until(lambda: getattr(running.app.state, "available", False), "Redis available again")


def _recorded(redis: RedisServer) -> bytes:
    """What Redis holds for the one call: ``o`` and its outcome, or ``i`` and its intent."""
    client = redis.client()
    (key,) = client.scan_iter(match="once:call:*")
    return client.get(key) or b""


def _claims(proxy: RedisProxy) -> int:
    """How many round trips through ``proxy`` named a call's record (a claim, an outcome)."""
    return sum(1 for t in proxy.calls_trips() if any(b":call:" in a for c in t.commands for a in c))


@pytest.mark.parametrize("fault", ["reset", "stall"])
@pytest.mark.parametrize("door", ["grpc", "mcp"])
async def test_an_answer_leaves_before_its_outcome_is_written_and_a_re_send_meanwhile_is_answered_once(
    start_sidecar: Start,
    redis_proxy: tuple[RedisServer, RedisProxy],
    door: str,
    fault: Fault,
) -> None:
    redis, proxy = redis_proxy
    one = await _proxied(start_sidecar, proxy, WRITE_MS)
    watch = RedisProxy(redis.port).start()  # the other replica's own way to the same Redis, its trips seen
    try:
        state = {"backend": "redis", "url": watch.url, "prefix": "once", "timeout_ms": 2000}
        two = await _start(start_sidecar, state, http={"listen": "127.0.0.1:0"})
        job_id = f"j-{door}-{fault}"
        proxy.fail_next_outcome(fault)  # the first write of the outcome: its connection cut, or held past timeout_ms
        first = await _note_by(door, one, "kept", job_id)
        answered = time.monotonic()
        ok = _kind(first) == "OK" if door == "grpc" else not first.is_error
        assert ok, first
        if fault == "stall":  # held until timeout_ms: the answer has left while Redis holds only the intent
            await _until(proxy.failed.is_set, "the outcome's write held")
            assert _recorded(redis).startswith(b"i{")
            assert await _note_by(door, one, "kept", job_id) == first  # here: from this process, no claim
            watch.clear_trips()
            elsewhere = asyncio.create_task(_note_by(door, two, "kept", job_id))
            await _until(lambda: _claims(watch) > 0, "the other replica's claim")
            assert _recorded(redis).startswith(b"i{")  # its claim found the live intent: it waits
            assert not elsewhere.done()
        await _until(lambda: _recorded(redis).startswith(b"o{"), "the outcome in Redis")
        landed = time.monotonic() - answered
        assert landed < RECORD_TRIES * WRITE_MS / 1000, landed  # within the write's own tries
        if fault == "stall":
            assert await elsewhere == first
        else:
            assert await _note_by(door, two, "kept", job_id) == first
        assert len(_posts(one)) == 1  # sent once, whatever the re-sends met
    finally:
        watch.stop()


async def test_an_outcome_redis_never_took_is_answered_and_written_once_redis_is_back(
    start_sidecar: Start, redis_proxy: tuple[RedisServer, RedisProxy], caplog: pytest.LogCaptureFixture
) -> None:
    redis, proxy = redis_proxy
    one = await _proxied(start_sidecar, proxy)
    proxy.fail_next_outcome("reset", times=RECORD_TRIES)  # every write of the call's outcome cut
    ids = {"call_id": "c1", "job": job("j-kept")}
    first = await one.client.execute_tool("note", {"text": "kept here"}, **ids)
    assert _kind(first) == "OK", first  # answered all the same: the note was made
    await _until(
        lambda: "did not take the outcome of call c1" in caplog.text, "the 3 tries given up (after the answer)"
    )
    await _until(lambda: _recorded(redis).startswith(b"o{"), "the outcome written once Redis was back")
    direct = {"backend": "redis", "url": redis.url, "prefix": "once", "timeout_ms": 2000}
    two = await _start(start_sidecar, direct)  # another replica: it reads Redis, not one's memory
    assert await two.client.execute_tool("note", {"text": "kept here"}, **ids) == first
    assert len(_posts(one)) == 1
