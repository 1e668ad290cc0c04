"""Slow and idle clients at both ports of a real ``sidecar serve`` process, over real sockets (issue 36).

The HTTP port (``http.connections``): a head dribbled byte by byte, a body that stalls, connections
that never send a byte and kept-alive ones left idle are each closed past their limit; past
``max_connections`` the longest idle connection is closed first, and with every connection reading or
answering a request, the new one. The gRPC port (``server.connections``): a connection that never
finishes its handshake, one whose call stalls mid-message and never answers a ping, and idle channels
are closed; past its cap a new connection is closed at once. Meanwhile an SDK call through
``/v1/chat/completions``, a stream that outlasts every limit, and gRPC calls are served, and the
process's file descriptors (``/proc/PID/fd``) come back to their count before the clients came.

The limits are 1 s and a close is awaited for ``CLOSED_WITHIN_S``: no machine 2-3 times slower crosses
that. Nothing here asserts that a connection lived some minimum time.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import openai
import pytest
import pytest_asyncio
import sidecar_client as sc
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sidecar_client import AsyncSidecarClient, user

from sidecar.fakes import FakeProvider, FakeToolBackend, ThreadedServer
from tests.conftest import base_config
from tests.redis_server import free_port

LIMIT_S = 1
CLOSED_WITHIN_S = 15.0
"""How long a connection past a 1 s limit may take to be seen closed."""
SETTLED_S = 60.0
"""How long the process's descriptors may take to come back (its upstream pool keeps a connection 5 s)."""
DRIBBLE_S = 0.2
"""A dribbling client's pause between two bytes: its 4 KiB head would take 800 s."""
SLOW = 50
"""Connections of each slow kind at once."""
KEY = "sk-test-SLOWCLIENTS1234567890"
HEAD = (
    b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
    + b"x-padding: " + b"p" * 4096 + b"\r\n\r\n"
)  # fmt: skip
BODY = json.dumps({"model": "gpt", "messages": [{"role": "user", "content": "hi"}]}).encode()
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
"""An empty HTTP/2 SETTINGS frame: with the preface, the handshake done."""

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class Served:
    """``sidecar serve`` with both ports and the Prometheus scrape, its log in a file."""

    def __init__(self, tmp: Path, provider: str, backend: str, http: dict[str, Any], grpc_: dict[str, Any]) -> None:
        self.grpc, self.http, self.prom = free_port(), free_port(), free_port()
        cfg = base_config(
            provider,
            backend,
            server={"listen": f"127.0.0.1:{self.grpc}", "grace_period_s": 1, "connections": grpc_},
            http={"listen": f"127.0.0.1:{self.http}", "connections": http},
            telemetry={"prometheus_port": self.prom},
        )
        for p in cfg["providers"].values():
            p["api_key"] = "${SLOW_CLIENTS_KEY}"  # a file holds no secret
        path = tmp / "sidecar.yaml"
        path.write_text(yaml.safe_dump(cfg))
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env |= {"OTEL_TRACES_EXPORTER": "none", "SLOW_CLIENTS_KEY": KEY}
        self.log = tmp / "stderr.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sidecar", "serve", "--config", str(path)],
            stdout=subprocess.PIPE,
            stderr=self.log.open("w"),
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        banner = self.proc.stdout.readline()
        assert "listening on" in banner, self.log.read_text()
        self.baseline = self.fds()

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def lines(self, reason: str) -> list[dict[str, Any]]:
        """The log lines about connections closed for ``reason``."""
        records = [json.loads(line) for line in self.log.read_text().splitlines() if line.startswith("{")]
        return [r for r in records if r.get("reason") == reason]

    def errors(self) -> list[str]:
        return [line for line in self.log.read_text().splitlines() if '"level": "ERROR"' in line]

    def closed_count(self, reason: str) -> float:
        """``sidecar_http_connections_closed_total`` for ``reason``, from the scrape (0 before the first)."""
        text = httpx.get(f"http://127.0.0.1:{self.prom}/metrics", timeout=10).text
        pattern = rf'^sidecar_http_connections_closed_total\{{[^}}]*reason="{reason}"[^}}]*\}} (\S+)$'
        found = re.search(pattern, text, re.MULTILINE)
        return float(found.group(1)) if found else 0.0

    async def back_to_baseline(self) -> None:
        """Until the process holds no more descriptors than before the clients came."""
        end = time.monotonic() + SETTLED_S
        while (now := self.fds()) > self.baseline:
            assert time.monotonic() < end, f"{now} descriptors open, {self.baseline} before the clients came"
            await asyncio.sleep(0.1)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


Serve = Callable[..., Served]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[tuple[Serve, FakeProvider]]:
    """``serve(http=..., grpc=...)``: a process with those connection limits, and its fake provider."""
    started: list[Served] = []
    with ThreadedServer(FakeProvider()) as provider, ThreadedServer(FakeToolBackend()) as backend:

        def start(http: dict[str, Any] | None = None, grpc: dict[str, Any] | None = None) -> Served:
            served = Served(tmp_path, provider.url, backend.url, http or {}, grpc or {})
            started.append(served)
            return served

        try:
            yield start, provider.server
        finally:
            for served in started:
                served.stop()


async def closed(conn: Streams, what: str, within_s: float = CLOSED_WITHIN_S) -> None:
    """Until the server closes ``conn`` (its end, or a reset), whatever it sends first; else fail naming it."""
    reader, writer = conn
    try:
        async with asyncio.timeout(within_s):
            while await reader.read(65536):
                pass
    except TimeoutError:
        raise AssertionError(f"{what}: not closed within {within_s:g} s") from None
    except ConnectionError:
        pass
    finally:
        writer.close()


class Clients:
    """The test's raw connections and dribbling tasks: all closed and stopped when the test ends, however."""

    def __init__(self) -> None:
        self.writers: list[asyncio.StreamWriter] = []
        self.tasks: list[asyncio.Task[None]] = []

    async def connect(self, port: int, send: bytes = b"") -> Streams:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        self.writers.append(writer)
        if send:
            writer.write(send)
            await writer.drain()
        return reader, writer

    def dribble(self, conn: Streams, data: bytes) -> None:
        """``data`` a byte at a time, ``DRIBBLE_S`` apart, until it is sent or the connection is gone."""
        self.tasks.append(asyncio.create_task(_dribble(conn[1], data)))

    async def aclose(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for writer in self.writers:
            writer.close()


async def _dribble(writer: asyncio.StreamWriter, data: bytes) -> None:
    for i in range(len(data)):
        if writer.is_closing():
            return
        writer.write(data[i : i + 1])
        try:
            await writer.drain()
        except ConnectionError:
            return
        await asyncio.sleep(DRIBBLE_S)


@pytest_asyncio.fixture
async def clients() -> AsyncIterator[Clients]:
    held = Clients()
    try:
        yield held
    finally:
        await held.aclose()


async def answer(conn: Streams) -> tuple[int, bytes]:
    """One HTTP/1.1 answer with a ``content-length``: its status and body."""
    reader, _ = conn
    head = (await reader.readuntil(b"\r\n\r\n")).decode()
    length = re.search(r"(?im)^content-length: *(\d+)", head)
    assert length is not None, head
    return int(head.split(" ", 2)[1]), await reader.readexactly(int(length.group(1)))


def healthz(port: int) -> bytes:
    return f"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n\r\n".encode()


def post_head(port: int) -> bytes:
    return (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(BODY)}\r\n\r\n"
    ).encode()


async def all_closed(conns: list[Streams], what: str) -> None:
    await asyncio.gather(*(closed(c, f"{what} {i}") for i, c in enumerate(conns)))


# ---------------------------------------------------------------- the HTTP port


async def test_http_slow_heads_stalled_bodies_and_idle_connections_are_closed_while_sdks_are_served(
    serve: tuple[Serve, FakeProvider], clients: Clients
) -> None:
    start, provider = serve
    limits = {"head_timeout_s": LIMIT_S, "body_timeout_s": LIMIT_S, "idle_timeout_s": LIMIT_S}
    s = start(http={**limits, "max_connections": 1000})
    began = time.monotonic()
    words = "one two three four five six seven eight nine ten"
    provider.script("fake-gpt", [{"delta_delay_ms": 400}])  # a stream of 4 s: longer than any limit
    async with openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{s.http}/v1", api_key="-", max_retries=0) as sdk:

        async def long_stream() -> tuple[str, float]:
            t0 = time.monotonic()
            chunks = await sdk.chat.completions.create(
                model="gpt", messages=[{"role": "user", "content": words}], stream=True
            )
            text = "".join([c.choices[0].delta.content or "" async for c in chunks if c.choices])
            return text, time.monotonic() - t0

        streaming = asyncio.create_task(long_stream())
        heads = [await clients.connect(s.http, HEAD[:1]) for _ in range(SLOW)]  # a head begun: not idle
        for conn in heads:
            clients.dribble(conn, HEAD[1:])
        bodies = [await clients.connect(s.http, post_head(s.http) + BODY[:10]) for _ in range(SLOW)]
        silent = [await clients.connect(s.http) for _ in range(SLOW)]
        kept = [await clients.connect(s.http, healthz(s.http)) for _ in range(SLOW)]
        for conn in kept:
            assert (await answer(conn))[0] == 200
        whole = await sdk.chat.completions.create(model="gpt", messages=[{"role": "user", "content": "hi"}])
        assert whole.choices[0].message.content == "You said: hi"  # served while the slow ones are held

        await all_closed(heads, "a dribbled head")
        await all_closed(bodies, "a stalled body")
        await all_closed(silent, "a connection that sent nothing")
        await all_closed(kept, "an idle kept-alive connection")
        text, lasted = await streaming
    assert text == f"You said: {words}"  # whole: an answer is never cut
    assert lasted > 2 * LIMIT_S  # it outlasted every limit (the fake's 400 ms before each of its words)
    await s.back_to_baseline()

    assert s.closed_count("head_timeout") == SLOW
    assert s.closed_count("body_timeout") == SLOW
    assert s.closed_count("idle_timeout") >= 2 * SLOW  # and the SDK's own, when it outlived a second idle
    windows = 1 + int((time.monotonic() - began) // 60)  # one line per reason per minute at most
    for reason in ("head_timeout", "body_timeout", "idle_timeout"):
        assert 1 <= len(s.lines(reason)) <= windows, s.lines(reason)
    assert s.errors() == []  # a body cut short reaches the door as its caller leaving, not as a fault


async def test_http_past_the_cap_the_longest_idle_goes_first_and_requests_are_never_cut(
    serve: tuple[Serve, FakeProvider], clients: Clients
) -> None:
    start, _ = serve
    long_s = 600  # no limit but the cap closes anything here
    s = start(http={"max_connections": 8, "head_timeout_s": long_s, "body_timeout_s": long_s, "idle_timeout_s": long_s})
    idle = []
    for _ in range(5):  # idle since their answers, in this order
        conn = await clients.connect(s.http, healthz(s.http))
        assert (await answer(conn))[0] == 200
        idle.append(conn)
    busy = [await clients.connect(s.http, post_head(s.http) + BODY[:10]) for _ in range(3)]  # bodies under way
    assert s.closed_count("evicted") == 0

    newcomers = []
    for i in range(5):  # each new one past the cap closes the connection idle longest
        newcomers.append(await clients.connect(s.http))
        await closed(idle[i], f"idle connection {i}")
        assert not any(c[0].at_eof() for c in idle[i + 1 :])
    assert s.closed_count("evicted") == 5
    for conn in newcomers:  # now every connection has a request under way
        conn[1].write(post_head(s.http) + BODY[:10])
        await conn[1].drain()

    await closed(await clients.connect(s.http), "a connection past the cap with none idle")
    for conn in busy + newcomers:  # none cut: each request ends and is answered
        conn[1].write(BODY[10:])
        status, body = await answer(conn)
        assert status == 200, body
        conn[1].close()
    assert s.closed_count("refused") == 1
    assert len(s.lines("evicted")) == 1  # the first at once; the other four wait for the next minute's line
    assert len(s.lines("refused")) == 1
    async with openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{s.http}/v1", api_key="-", max_retries=0) as sdk:
        whole = await sdk.chat.completions.create(model="gpt", messages=[{"role": "user", "content": "hi"}])
    assert whole.choices[0].message.content == "You said: hi"


# ---------------------------------------------------------------- the gRPC port


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def _literal(name: str, value: str) -> bytes:
    """An HPACK header field, literal and not indexed (short strings: one length byte each)."""
    return b"\x00" + bytes([len(name)]) + name.encode() + bytes([len(value)]) + value.encode()


def stalled_call(port: int) -> bytes:
    """The handshake, then a CallModel whose message says 100 bytes and sends 3 (no PING is ever answered)."""
    headers = b"".join(
        _literal(k, v)
        for k, v in (
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/sidecar.v1.Sidecar/CallModel"),
            (":authority", f"127.0.0.1:{port}"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        )
    )
    message = b"\x00" + (100).to_bytes(4, "big") + b"\x0a\x03g"
    return PREFACE + SETTINGS + _frame(0x1, 0x4, 1, headers) + _frame(0x0, 0x0, 1, message)


async def test_grpc_unfinished_handshakes_stalled_calls_and_idle_channels_are_closed_while_calls_are_served(
    serve: tuple[Serve, FakeProvider], clients: Clients
) -> None:
    start, provider = serve
    s = start(
        grpc={
            "handshake_timeout_s": LIMIT_S,
            "idle_timeout_s": LIMIT_S,
            "keepalive_time_s": LIMIT_S,
            "keepalive_timeout_s": LIMIT_S,
            "max_age_s": LIMIT_S,
            "age_grace_s": 60,
        }
    )
    provider.script("fake-gpt", [{"delta_delay_ms": 400}])  # 4 s: past the connection's age, within its grace
    client = AsyncSidecarClient(f"127.0.0.1:{s.grpc}")
    channels = [grpc.aio.insecure_channel(f"127.0.0.1:{s.grpc}") for _ in range(SLOW)]
    try:
        words = "one two three four five six seven eight nine ten"
        stream = client.stream_model("gpt", [user(words)])

        async def long_stream() -> tuple[str, float]:
            t0 = time.monotonic()
            events = [e async for e in stream]
            assert events[-1].WhichOneof("event") == "final"
            return "".join(e.text.text for e in events if e.WhichOneof("event") == "text"), time.monotonic() - t0

        streaming = asyncio.create_task(long_stream())
        silent = [await clients.connect(s.grpc) for _ in range(SLOW)]
        prefaces = [await clients.connect(s.grpc) for _ in range(SLOW)]
        for conn in prefaces:
            clients.dribble(conn, PREFACE + SETTINGS)
        stalled = [await clients.connect(s.grpc, stalled_call(s.grpc)) for _ in range(SLOW)]
        for channel in channels:  # a call each, then idle
            reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=30)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        served = await client.call_model("gpt", [user("hi")])
        assert served.message.text == "You said: hi"  # served while the slow ones are held

        await all_closed(silent, "a connection that sent nothing")
        await all_closed(prefaces, "a dribbled preface")
        await all_closed(stalled, "a call stalled mid-message")
        text, lasted = await streaming
        assert text == f"You said: {words}"  # whole: the age's grace covers it
        assert lasted > 2 * LIMIT_S
        await s.back_to_baseline()  # the idle channels' connections too, their channels still open
        again = await client.call_model("gpt", [user("again")])  # its channel reconnects by itself
        assert again.message.text == "You said: again"
    finally:
        await client.close()
        for channel in channels:
            await channel.close()


async def test_grpc_past_the_cap_a_new_connection_is_closed_at_once(
    serve: tuple[Serve, FakeProvider], clients: Clients
) -> None:
    start, _ = serve
    s = start(grpc={"max_connections": 4, "handshake_timeout_s": 600, "idle_timeout_s": 600})
    held = [await clients.connect(s.grpc, PREFACE + SETTINGS) for _ in range(4)]
    await closed(await clients.connect(s.grpc), "a connection past the cap")
    async with AsyncSidecarClient(f"127.0.0.1:{s.grpc}") as client:  # an SDK's connection too
        with pytest.raises(sc.SidecarError) as refused:
            await client.call_model("gpt", [user("hi")])
    assert isinstance(refused.value.__cause__, grpc.aio.AioRpcError)
    assert refused.value.__cause__.code() == grpc.StatusCode.UNAVAILABLE
    for conn in held:
        assert not conn[0].at_eof()
        conn[1].close()
    await _eventually(lambda: _called(s.grpc), "a CallModel once the held connections are gone")


async def _called(port: int) -> bool:
    client = AsyncSidecarClient(f"127.0.0.1:{port}")  # a new channel each time: no backoff carried over
    try:
        return (await client.call_model("gpt", [user("hi")])).message.text == "You said: hi"
    except Exception:
        return False
    finally:
        await client.close()


async def _eventually(check: Callable[[], Awaitable[bool]], what: str) -> None:
    end = time.monotonic() + CLOSED_WITHIN_S
    while not await check():
        assert time.monotonic() < end, f"not within {CLOSED_WITHIN_S:g} s: {what}"
        await asyncio.sleep(0.1)
