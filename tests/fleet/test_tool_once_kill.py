"""A sidecar killed with -9 under 200 non-idempotent tool calls, then the agent re-sends every one.

    sidecar serve (state: Redis) -> the fake tool backend's POST /notes, each note's text unique
    20 calls answered first (recorded), then 200 in flight: the backend holds each one, the request
    read (the note created), its answer not sent; kill -9; sidecar serve again on the same port;
    the agent re-sends all 220 (same job id, call id, arguments)

    must hold   0 texts reach the backend twice (docs/reliability.md measured 8 of 100 before)
                the 20 get their recorded answers, the same as before the kill
                the 200 get EXTERNAL_SERVICE "outcome unknown, not sent again", not correctable
                no record in Redis holds the tool's token or a note's text (only outcomes are kept)

The same through the MCP front (the official MCP SDK's client, a JSON-RPC id as the call id), with
a proxy in front of Redis (tests/redis_proxy.py) that cuts the first write of one call's outcome:

    1 call answered though its outcome's first write was cut, then 50 answered, then 100 in flight
    held at the backend; kill -9; serve again; each session re-sent as it was sent (same ids)

    must hold   0 texts reach the backend twice
                the 51 answered get their answers, exactly as first answered: none "outcome unknown"
                the 100 get "outcome unknown, not sent again" (is_error, EXTERNAL_SERVICE)

And between one call's answer and its outcome's write (the write goes after the answer, in the background):
the proxy holds that write (up to timeout_ms), then

    kill -9     must hold   the answer was OK; a re-send to the new process is "outcome unknown, not sent
                            again" (a dead replica's intent), and the text reached the backend once
    SIGTERM     must hold   the process exits 0 only once the held write has landed (tried again): Redis
                            holds the outcome, and a re-send to the new process gets the first answer

The first runs on a single Redis and on a Redis Cluster (``redis_target``); the proxied ones on the single
Redis. Nothing is timed: each step polls for a state within a generous bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from mcp import ClientSession, types
from sidecar_client import AsyncSidecarClient, job, pb

from sidecar.fakes import FakeToolBackend, ThreadedServer
from sidecar.tools.once import UNKNOWN
from tests.conftest import base_config, tool
from tests.fronts.test_mcp_front import mcp_client
from tests.redis_cluster import Target, redis_cluster, redis_target  # noqa: F401  (the fixtures)
from tests.redis_proxy import RedisProxy
from tests.redis_server import RedisServer, free_port

IN_FLIGHT = 200
ANSWERED = 20
KEY_ENV = "ONCE_KILL_KEY"
TOKEN_ENV = "ONCE_NOTES_TOKEN"
TOKEN = "notes-token-SECRET-0123456789abcdef"
POLL_S = 60.0
CALL_TIMEOUT_S = 120.0
JOB = "kill-job"


def _config(backend: str, state: dict[str, Any], port: int) -> dict[str, Any]:
    note = tool(
        backend + "/notes",
        "fetch",
        "notes",
        "POST",
        body="arguments",
        headers={"authorization": "Bearer ${" + TOKEN_ENV + "}"},
        parameters={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        timeout_s=300,
    )
    cfg = base_config(
        "http://127.0.0.1:9",  # no model is called
        backend,
        server={"listen": f"127.0.0.1:{port}", "grace_period_s": 1},
        tools={"note": note},
        state=state,
        telemetry={"log_level": "INFO"},
    )
    for p in cfg["providers"].values():
        p["api_key"] = "${" + KEY_ENV + "}"  # a file holds no secret
    return cfg


class Serve:
    """One ``sidecar serve`` process."""

    def __init__(self, config: Path, log: Path) -> None:
        env = {**os.environ, KEY_ENV: "sk-test-KILLKEY1234567890", TOKEN_ENV: TOKEN, "OTEL_TRACES_EXPORTER": "none"}
        with log.open("a") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "sidecar", "serve", "--config", str(config)],
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=env,
            )
        self.banner = self.proc.stdout.readline() if self.proc.stdout else ""

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def world(
    tmp_path: Path,
    redis_target: Target,  # noqa: F811
) -> Iterator[tuple[Target, ThreadedServer[FakeToolBackend], Path, Path, int]]:
    backend = ThreadedServer(FakeToolBackend()).start()
    port = free_port()
    config = tmp_path / "sidecar.yaml"
    config.write_text(yaml.safe_dump(_config(backend.url, redis_target.state("kill", 1000), port)))
    try:
        yield redis_target, backend, config, tmp_path / "sidecar.log", port
    finally:
        backend.stop()


async def _until(check: Any, what: str) -> None:
    end = time.monotonic() + POLL_S
    while not check():
        if time.monotonic() > end:
            pytest.fail(f"not within {POLL_S:g} s: {what}")
        await asyncio.sleep(0.05)


async def _note(client: AsyncSidecarClient, i: int) -> pb.ExecuteToolResponse:
    return await client.execute_tool(
        "note", {"text": f"text-{i}"}, call_id=f"call-{i}", job=job(JOB), timeout=CALL_TIMEOUT_S
    )


async def test_kill_9_under_200_calls_then_every_one_re_sent_reaches_the_backend_once(
    world: tuple[Target, ThreadedServer[FakeToolBackend], Path, Path, int],
) -> None:
    redis, threaded, config, log, port = world
    backend = threaded.server
    address = f"127.0.0.1:{port}"
    first = Serve(config, log)
    assert "listening on" in first.banner, log.read_text()
    try:
        async with AsyncSidecarClient(address) as client:
            answered = await asyncio.gather(*(_note(client, i) for i in range(ANSWERED)))
            assert all(r.WhichOneof("outcome") == "result" for r in answered), answered
            backend.script("/notes", [{"delay_ms": 600_000, "repeat": IN_FLIGHT}])  # read, note created, held
            flying = [asyncio.create_task(_note(client, i)) for i in range(ANSWERED, ANSWERED + IN_FLIGHT)]
            await _until(lambda: backend.notes_received == ANSWERED + IN_FLIGHT, "200 calls at the backend")
            assert not any(t.done() for t in flying)
            first.kill()  # -9, with the 200 in flight
            died = await asyncio.gather(*flying, return_exceptions=True)
        assert all(isinstance(d, BaseException) for d in died)  # each cut with the process
    finally:
        first.kill()
    again = Serve(config, log)  # the same port, a new replica: its predecessor's intents are in Redis
    assert "listening on" in again.banner, log.read_text()
    try:
        async with AsyncSidecarClient(address) as client:
            resent = await asyncio.gather(*(_note(client, i) for i in range(ANSWERED + IN_FLIGHT)))
    finally:
        again.kill()

    assert backend.notes_repeated() == {}  # 0 of 220 reached the backend twice
    assert backend.notes_received == ANSWERED + IN_FLIGHT
    assert resent[:ANSWERED] == answered  # the recorded answers, across the kill
    for resp in resent[ANSWERED:]:
        assert resp.WhichOneof("outcome") == "failure", resp
        f = resp.failure
        assert f.kind == pb.FAILURE_KIND_EXTERNAL_SERVICE
        assert not f.correctable
        assert UNKNOWN in f.message.lower()
        assert "stopped before its outcome was recorded" in f.message
        assert resp.attempts == 0
    values = [redis.client().get(k) or b"" for k in redis.client().scan_iter(match="kill:call:*")]
    assert len(values) == ANSWERED + IN_FLIGHT
    assert not [v for v in values if TOKEN.encode() in v or b"text-" in v]
    assert all(redis.client().pttl(k) > 0 for k in redis.client().scan_iter(match="kill:call:*"))


# ---------------------------------------------------------------------------- through the MCP front

MCP_ANSWERED = 50
MCP_IN_FLIGHT = 100
MCP_JOB = "kill-mcp-job"
BACK_AGAIN = "available again"
"""The sidecar's INFO once it has re-synced with Redis (docs/fleet.md)."""


@pytest.fixture
def mcp_world(tmp_path: Path) -> Iterator[tuple[RedisProxy, FakeToolBackend, Path, Path, str]]:
    redis = RedisServer().start()
    proxy = RedisProxy(redis.port).start()
    backend = ThreadedServer(FakeToolBackend()).start()
    http_port = free_port()
    cfg = _config(
        backend.url, {"backend": "redis", "url": proxy.url, "prefix": "kill", "timeout_ms": 1000}, free_port()
    )
    cfg["http"] = {"listen": f"127.0.0.1:{http_port}"}
    config = tmp_path / "sidecar.yaml"
    config.write_text(yaml.safe_dump(cfg))
    try:
        yield proxy, backend.server, config, tmp_path / "sidecar.log", f"http://127.0.0.1:{http_port}/mcp"
    finally:
        backend.stop()
        proxy.stop()
        redis.kill()


@contextlib.asynccontextmanager
async def _session(address: str) -> AsyncIterator[ClientSession]:
    """An MCP session as an agent's: initialized (id 0) and the tools listed (id 1), so each tools/call
    after it takes the next JSON-RPC id, the same in every session that makes the same calls in order."""
    limits = httpx.Limits(max_connections=MCP_IN_FLIGHT + 10)
    async with mcp_client(address, headers={"x-sidecar-job-id": MCP_JOB}, limits=limits) as mcp:
        await mcp.list_tools()
        yield mcp


def _backs(log: Path) -> int:
    """How many times the sidecars have re-synced with Redis after an outage."""
    return log.read_text().count(BACK_AGAIN)


def _mcp_note(mcp: ClientSession, i: int) -> Any:
    return mcp.call_tool("note", {"text": f"mcp-{i}"})


async def _answered(address: str, proxy: RedisProxy | None, log: Path) -> list[types.CallToolResult]:
    """Call 0 (its outcome's first write cut, when ``proxy``), then the re-sync awaited, then the rest at once."""
    async with _session(address) as mcp:
        back = _backs(log)
        if proxy is not None:
            proxy.fail_next_outcome("reset")
        cut = await _mcp_note(mcp, 0)
        if proxy is not None:  # the cut began an outage: the calls after it claim in Redis once it is over
            assert proxy.failed.is_set()
            await _until(lambda: _backs(log) > back, "Redis re-synced after the cut write")
        rest = await asyncio.gather(*(_mcp_note(mcp, i) for i in range(1, MCP_ANSWERED + 1)))
    return [cut, *rest]


async def test_kill_9_under_mcp_calls_then_every_answered_call_re_sent_gets_its_first_answer(
    mcp_world: tuple[RedisProxy, FakeToolBackend, Path, Path, str],
) -> None:
    proxy, backend, config, log, address = mcp_world
    total = MCP_ANSWERED + 1 + MCP_IN_FLIGHT
    first = Serve(config, log)
    assert "listening on" in first.banner, log.read_text()
    try:
        answered = await _answered(address, proxy, log)
        assert not any(r.is_error for r in answered), answered
        backend.script("/notes", [{"delay_ms": 600_000, "repeat": MCP_IN_FLIGHT}])  # read, note created, held

        async def flying() -> list[Any]:
            async with _session(address) as mcp:
                calls = range(MCP_ANSWERED + 1, total)
                return await asyncio.gather(*(_mcp_note(mcp, i) for i in calls), return_exceptions=True)

        held = asyncio.create_task(flying())
        await _until(lambda: backend.notes_received == total, f"{MCP_IN_FLIGHT} calls at the backend")
        assert not held.done()
        first.kill()  # -9, with the 100 in flight: their session ends in the transport's error
        with contextlib.suppress(Exception):
            await asyncio.wait_for(held, CALL_TIMEOUT_S)
    finally:
        first.kill()
    again = Serve(config, log)  # the same ports, a new replica: its predecessor's intents are in Redis
    assert "listening on" in again.banner, log.read_text()
    try:
        resent = await _answered(address, None, log)
        async with _session(address) as mcp:
            unknown = await asyncio.gather(*(_mcp_note(mcp, i) for i in range(MCP_ANSWERED + 1, total)))
    finally:
        again.kill()

    assert backend.notes_repeated() == {}  # 0 of 151 reached the backend twice
    assert backend.notes_received == total
    assert resent == answered  # each as first answered: 0 "outcome unknown" for an answer the agent had
    for result in unknown:
        assert result.is_error, result
        assert result.meta is not None
        assert result.meta["sidecar/kind"] == "EXTERNAL_SERVICE"
        (block,) = result.content
        assert isinstance(block, types.TextContent)
        assert UNKNOWN in block.text.lower()


# ---------------------------------------------------------------------------- between an answer and its write

HELD_MS = 3000
"""timeout_ms of the proxied replica: how long the proxy can hold the outcome's first write."""


@pytest.fixture
def held_world(tmp_path: Path) -> Iterator[tuple[RedisServer, RedisProxy, FakeToolBackend, Path, Path, str]]:
    redis = RedisServer().start()
    proxy = RedisProxy(redis.port).start()
    backend = ThreadedServer(FakeToolBackend()).start()
    port = free_port()
    state = {"backend": "redis", "url": proxy.url, "prefix": "held", "timeout_ms": HELD_MS}
    config = tmp_path / "sidecar.yaml"
    config.write_text(yaml.safe_dump(_config(backend.url, state, port)))
    try:
        yield redis, proxy, backend.server, config, tmp_path / "sidecar.log", f"127.0.0.1:{port}"
    finally:
        backend.stop()
        proxy.stop()
        redis.kill()


def _held_record(redis: RedisServer) -> bytes:
    client = redis.client()
    (key,) = client.scan_iter(match="held:call:*")
    return client.get(key) or b""


@pytest.mark.parametrize("stop", ["kill", "term"])
async def test_a_replica_stopped_between_an_answer_and_its_outcomes_write_never_sends_it_twice(
    held_world: tuple[RedisServer, RedisProxy, FakeToolBackend, Path, Path, str], stop: str
) -> None:
    redis, proxy, backend, config, log, address = held_world
    first = Serve(config, log)
    assert "listening on" in first.banner, log.read_text()
    try:
        proxy.fail_next_outcome("stall")  # the outcome's write held (unanswered) until timeout_ms
        async with AsyncSidecarClient(address) as client:
            answered = await _note(client, 0)
        assert answered.WhichOneof("outcome") == "result", answered
        await _until(proxy.failed.is_set, "the outcome's write held at the proxy")
        assert _held_record(redis).startswith(b"i{")  # answered; Redis holds only the intent
        if stop == "kill":
            first.kill()  # -9 while the write is held: it never lands
        else:
            first.proc.send_signal(signal.SIGTERM)  # graceful: waits for the write (tried again after the hold)
            assert first.proc.wait(POLL_S) == 0, log.read_text()
    finally:
        first.kill()
    recorded = _held_record(redis)
    again = Serve(config, log)  # the same port, through the same proxy (its fault spent)
    assert "listening on" in again.banner, log.read_text()
    try:
        async with AsyncSidecarClient(address) as client:
            resent = await _note(client, 0)
    finally:
        again.kill()

    assert backend.notes_repeated() == {}
    assert backend.notes_received == 1  # never sent twice
    if stop == "term":
        assert recorded.startswith(b"o{")  # flushed before the process left
        assert resent == answered
    else:
        assert recorded.startswith(b"i{")  # the dead replica's intent
        assert resent.WhichOneof("outcome") == "failure", resent
        assert resent.failure.kind == pb.FAILURE_KIND_EXTERNAL_SERVICE
        assert not resent.failure.correctable
        assert UNKNOWN in resent.failure.message.lower()
        assert "stopped before its outcome was recorded" in resent.failure.message
        assert resent.attempts == 0
