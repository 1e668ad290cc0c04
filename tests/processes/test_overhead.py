"""The sidecar's own time per call (``core.overhead``): upstream time and deliberate waits left out.

The stopwatch reads real time; the waits here cost real time too (``SlowClock``: the fake clock's
sleep, plus a real pause), and the fake provider's ``delay_ms`` is a real upstream delay. A call
whose upstream took 300 ms and whose retry waited 250 ms still reports an overhead of a few ms,
on the trailer of gRPC and the header of the HTTP port.
"""

from __future__ import annotations

import asyncio
import time

import grpc
import httpx
import pytest
from sidecar_client import pb, user
from sidecar_contract.v1 import sidecar_pb2_grpc as pb_grpc

from sidecar.core import overhead
from sidecar.core.clock import FakeClock
from sidecar.server.http.hosting import _Joined
from tests.conftest import Running, Start

UPSTREAM_MS = 300
PAUSE_S = 0.25
LIMIT_MS = 150.0
"""Far under the upstream's 300 ms plus the wait's 250 ms, far over the sidecar's own milliseconds."""


class SlowClock(FakeClock):
    """The fake clock, whose every sleep also takes PAUSE_S of real time (a wait that costs)."""

    async def sleep(self, seconds: float) -> None:
        await super().sleep(seconds)
        await asyncio.sleep(PAUSE_S)


@pytest.fixture
def clock() -> FakeClock:
    return SlowClock()


def test_the_stopwatch_leaves_out_excluded_time_once_however_blocks_overlap() -> None:
    now = [0.0]
    with overhead.measured("grpc", lambda: now[0]) as watch:
        now[0] += 0.002  # own work
        with overhead.upstream():
            now[0] += 1.0
            with overhead.waiting():  # nested: counted once
                now[0] += 5.0
        now[0] += 0.003
        with overhead.joined() as same:
            assert same is watch
    assert watch.seconds() == pytest.approx(0.005)
    assert watch.milliseconds() == "5.000"
    assert overhead.current() is None


def test_the_figure_is_reported_once_when_the_block_that_began_it_ends() -> None:
    now = [0.0]
    reported: list[float] = []
    with overhead.measured("http", lambda: now[0], began=-0.001):  # the request's bytes read 1 ms before
        now[0] += 0.002
        with overhead.joined() as watch:  # the service's block: names what is reported
            watch.at_end(reported.append)
            now[0] += 0.001
        assert reported == []  # the door's block has not ended: its render and its write still count
        now[0] += 0.004
    assert reported == [pytest.approx(0.008)]
    with overhead.joined() as fresh:  # no door: the service's own block ends it (real time)
        fresh.at_end(reported.append)
        assert len(reported) == 1
    assert len(reported) == 2
    assert 0 <= reported[1] < 1


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.sent: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.sent.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


async def test_an_answers_head_and_body_leave_the_http_port_in_one_write() -> None:
    real = _Transport()
    joined = _Joined(real)
    joined.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    joined.write(b"{}")
    joined.write(b"")
    assert real.sent == []  # written at the end of the loop's step
    await asyncio.sleep(0)
    assert real.sent == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]
    joined.write(b"bye")
    joined.close()  # what is held goes out first
    assert real.sent[-1] == b"bye"
    assert real.closed


async def test_the_http_header_is_read_again_as_the_answer_is_written() -> None:
    """The head's x-sidecar-overhead-ms counts what comes after it was set (h11's encoding, the app's way
    out): the joined write reads the call's stopwatch again; the body and other writes are left alone."""
    now = [0.0]
    real = _Transport()
    joined = _Joined(real)
    body = b"x-sidecar-overhead-ms: 9.000\r\n"
    with overhead.measured("http", lambda: now[0]):
        now[0] += 0.002
        joined.write(b"HTTP/1.1 200 OK\r\nx-sidecar-overhead-ms: 2.000\r\ncontent-length: 29\r\n\r\n")
        joined.write(body)
        now[0] += 0.001  # the rest of the step: encoding the body, the app's return
        with overhead.upstream():
            now[0] += 1.0  # excluded, as anywhere
    await asyncio.sleep(0)
    assert real.sent == [b"HTTP/1.1 200 OK\r\nx-sidecar-overhead-ms: 3.000\r\ncontent-length: 29\r\n\r\n" + body]
    joined.write(body)  # not a head: as it is
    await asyncio.sleep(0)
    assert real.sent[-1] == body
    joined.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # a head without the header, no stopwatch
    await asyncio.sleep(0)
    assert real.sent[-1] == b"HTTP/1.1 100 Continue\r\n\r\n"


def _slow_then_retry(r: Running) -> None:
    r.provider.script(
        "fake-gpt",
        [{"status": 429, "headers": {"retry-after": "2"}, "delay_ms": UPSTREAM_MS}, {"delay_ms": UPSTREAM_MS}],
    )


async def test_grpc_trailer_excludes_the_upstream_delay_and_the_retry_wait(start_sidecar: Start) -> None:
    r = await start_sidecar()
    _slow_then_retry(r)
    began = time.perf_counter()
    async with grpc.aio.insecure_channel(r.app.address) as channel:
        call = pb_grpc.SidecarStub(channel).CallModel(pb.CallModelRequest(model="gpt", messages=[user("hi")]))
        reply = await call
        trailer = dict(await call.trailing_metadata())
    took_ms = (time.perf_counter() - began) * 1000
    assert reply.attempts == 2
    assert took_ms > 2 * UPSTREAM_MS + PAUSE_S * 1000
    assert 0 < float(trailer[overhead.HEADER]) < LIMIT_MS


async def test_grpc_trailer_on_a_failure_a_tool_and_a_stream(start_sidecar: Start) -> None:
    r = await start_sidecar()
    async with grpc.aio.insecure_channel(r.app.address) as channel:
        stub = pb_grpc.SidecarStub(channel)
        failed = stub.CallModel(pb.CallModelRequest(model="nope", messages=[user("hi")]))
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await failed
        assert overhead.HEADER in dict(caught.value.trailing_metadata() or ())
        tool = stub.ExecuteTool(pb.ExecuteToolRequest(tool="fetch", arguments_json='{"id": "a"}'))
        await tool
        assert float(dict(await tool.trailing_metadata())[overhead.HEADER]) < LIMIT_MS
        stream = stub.StreamModel(pb.CallModelRequest(model="gpt", messages=[user("hi")]))
        events = [e async for e in stream]
        assert events
        assert float(dict(await stream.trailing_metadata())[overhead.HEADER]) < LIMIT_MS


async def test_http_header_at_the_model_front_and_the_mcp_front(start_sidecar: Start) -> None:
    r = await start_sidecar(http={"listen": "127.0.0.1:0"})
    assert r.app.http is not None
    base = f"http://127.0.0.1:{r.app.http.port}"
    _slow_then_retry(r)
    body = {"model": "gpt", "messages": [{"role": "user", "content": "hi"}]}
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        answer = await http.post("/v1/chat/completions", json=body)
        assert answer.status_code == 200
        assert answer.headers["x-sidecar-attempts"] == "2"
        assert 0 < float(answer.headers[overhead.HEADER]) < LIMIT_MS
        mcp = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "fetch", "arguments": {"id": "a"}}}
        headers = {"accept": "application/json, text/event-stream"}
        answer = await http.post("/mcp", json=mcp, headers=headers)
        assert answer.status_code == 200, answer.text
        assert float(answer.headers[overhead.HEADER]) < LIMIT_MS


async def test_http_header_on_streams_and_at_the_anthropic_front(start_sidecar: Start) -> None:
    """The header on each kind of HTTP answer: a stream's head (its figure up to the head, sent with the
    first event) at the OpenAI front, and the Anthropic front's whole answer and stream; each call
    slowed upstream and retried after a wait, none of which the figure counts."""
    r = await start_sidecar(http={"listen": "127.0.0.1:0"})
    assert r.app.http is not None
    base = f"http://127.0.0.1:{r.app.http.port}"
    calls = [
        ("/v1/chat/completions", "fake-gpt", {"model": "gpt", "stream": True}),
        ("/v1/messages", "fake-claude", {"model": "claude", "max_tokens": 64}),
        ("/v1/messages", "fake-claude", {"model": "claude", "max_tokens": 64, "stream": True}),
    ]
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        for path, upstream, extra in calls:
            r.provider.script(
                upstream,
                [{"status": 429, "headers": {"retry-after": "2"}, "delay_ms": UPSTREAM_MS}, {"delay_ms": UPSTREAM_MS}],
            )
            body = {"messages": [{"role": "user", "content": "hi"}], **extra}
            began = time.perf_counter()
            async with http.stream("POST", path, json=body) as answer:
                text = (await answer.aread()).decode()
            took_ms = (time.perf_counter() - began) * 1000
            assert answer.status_code == 200, (path, text)
            assert took_ms > 2 * UPSTREAM_MS + PAUSE_S * 1000, path
            assert 0 < float(answer.headers[overhead.HEADER]) < LIMIT_MS, (path, extra)
            if extra.get("stream"):
                assert "data:" in text, path
