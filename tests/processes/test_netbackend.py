"""The aiohttp transport under httpx, against real servers on loopback.

HTTP and TLS; one connection reused; an idle connection the server closed is dropped and the
request goes on a new one; a body read to its end gives its connection back, one closed early
does not; resets, refusals, DNS and timeouts raise the httpx errors the sidecar maps to transport
faults; large bodies both ways; flow control against a slow reader on either side; compressed
bodies decoded once (by httpx); and every aiohttp error has its httpx counterpart.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import socket
import ssl
import struct
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
import httpx
import pytest
from sidecar_contract.v1 import sidecar_pb2 as pb

from sidecar.net.backend import AiohttpTransport, fast_transport, httpx_error
from sidecar.net.transport import fault_of
from tests.socket_buffers import receive_buffer_max, send_buffer_max

LIMITS = httpx.Limits(max_connections=4)
OK_BODY = b'{"ok": 1 }'
MiB = 1024 * 1024
CHUNK = 64 * 1024

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Server:
    """A loopback server running ``handler`` per connection; counts the connections it accepted."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.accepted = 0
        self.url = ""
        self.tasks: set[asyncio.Task[object]] = set()

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        task = asyncio.current_task()
        if task is not None:
            self.tasks.add(task)
        try:
            await self.handler(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client left, or the test ended
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def serving(
    handler: Handler, *, tls: ssl.SSLContext | None = None, unix: Path | None = None
) -> AsyncIterator[Server]:
    server = Server(handler)
    if unix is not None:
        srv = await asyncio.start_unix_server(server, str(unix))
        server.url = "http://localhost"
    else:
        srv = await asyncio.start_server(server, "127.0.0.1", 0, ssl=tls)
        port = srv.sockets[0].getsockname()[1]
        server.url = f"https://localhost:{port}" if tls else f"http://127.0.0.1:{port}"
    try:
        yield server
    finally:
        srv.close()
        for task in server.tasks:
            task.cancel()
        await asyncio.gather(*server.tasks, return_exceptions=True)


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return head, await reader.readexactly(length) if length else b""


async def respond(writer: asyncio.StreamWriter, body: bytes = OK_BODY) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body))
    writer.write(body)
    await writer.drain()


async def answer_all(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        await read_request(reader)
        await respond(writer)


def client(transport: httpx.AsyncBaseTransport | None = None, **kw: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=transport or fast_transport(LIMITS), trust_env=False, **kw)  # type: ignore[arg-type]


async def until(condition: Callable[[], bool], turns: int = 1000) -> bool:
    """Let the event loop run until ``condition`` holds (at most ``turns`` turns, no real sleep)."""
    for _ in range(turns):
        if condition():
            return True
        await asyncio.sleep(0)
    return condition()


# Plain HTTP, reuse, one send, TCP_NODELAY.


async def test_plain_http_reuses_one_connection() -> None:
    transport = fast_transport(LIMITS)
    async with serving(answer_all) as server, client(transport) as c:
        for _ in range(5):
            r = await c.post(f"{server.url}/x", json={"a": 1})
            assert r.json() == {"ok": 1}
        assert server.accepted == 1


async def test_the_connection_has_tcp_nodelay() -> None:
    go_on = asyncio.Event()

    async def body_later(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(OK_BODY))
        await writer.drain()
        await go_on.wait()  # the body is not there yet: the response still holds its connection
        writer.write(OK_BODY)
        await writer.drain()

    async with serving(body_later) as server, client() as c, c.stream("GET", f"{server.url}/x") as r:
        sock = r.extensions["network_stream"].get_extra_info("socket")
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        go_on.set()
        assert await r.aread() == OK_BODY


# A pooled connection the server closed, or wrote to, while idle.


async def test_an_idle_connection_the_server_closed_is_dropped_and_the_request_goes_on_a_new_one() -> None:
    closed = asyncio.Event()
    connections = 0

    async def answer_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        if connections > 1:
            return await answer_all(reader, writer)
        await read_request(reader)
        await respond(writer)
        writer.close()  # the client has the whole response: its connection is idle in the pool
        await writer.wait_closed()
        closed.set()

    async with serving(answer_then_close) as server, client() as c:
        assert (await c.get(f"{server.url}/1")).json() == {"ok": 1}
        await closed.wait()
        await asyncio.sleep(0.01)  # the FIN reaches the client's loop
        assert (await c.get(f"{server.url}/2")).json() == {"ok": 1}
        assert server.accepted == 2


async def test_a_body_read_to_its_end_gives_its_connection_back_and_one_closed_early_does_not() -> None:
    big = b"b" * (4 * MiB)

    async def big_bodies(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await read_request(reader)
            await respond(writer, big)

    async with serving(big_bodies) as server, client() as c:
        for _ in range(3):
            async with c.stream("GET", f"{server.url}/x") as r:
                assert len(await r.aread()) == len(big)
        assert server.accepted == 1
        async with c.stream("GET", f"{server.url}/x") as r:
            async for _ in r.aiter_raw():
                break  # closed with most of its body unread: its connection cannot carry another request
        assert len((await c.get(f"{server.url}/x")).content) == len(big)
        assert server.accepted == 2


async def test_a_compressed_body_is_decoded_once() -> None:
    import gzip

    packed = gzip.compress(OK_BODY)

    async def gzipped(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await read_request(reader)
            head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\n"
            writer.write(head + b"content-length: %d\r\n\r\n" % len(packed) + packed)
            await writer.drain()

    async with serving(gzipped) as server, client() as c:
        assert (await c.get(f"{server.url}/x")).json() == {"ok": 1}


# Errors, as httpx raises them and the sidecar classifies them.


async def test_a_reset_is_a_transport_error() -> None:
    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        linger_zero = struct.pack("ii", 1, 0)  # close with an RST, not a FIN
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger_zero)
        writer.transport.abort()

    async with serving(reset) as server, client() as c:
        with pytest.raises(httpx.ReadError, match="reset") as info:
            await c.get(f"{server.url}/x")
    assert fault_of(info.value).fault == pb.TRANSPORT_FAULT_RESET


async def test_a_connection_closed_without_a_response_is_a_remote_protocol_error() -> None:
    async def close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)

    async with serving(close) as server, client() as c:
        with pytest.raises(httpx.RemoteProtocolError, match="disconnected without sending a response"):
            await c.get(f"{server.url}/x")


async def test_refused_is_a_connect_error() -> None:
    async with client() as c:
        with pytest.raises(httpx.ConnectError) as info:
            await c.get("http://127.0.0.1:1/x")
    assert fault_of(info.value).fault == pb.TRANSPORT_FAULT_REFUSED


async def test_a_name_that_does_not_resolve_is_a_dns_fault() -> None:
    async with client() as c:
        with pytest.raises(httpx.ConnectError) as info:
            await c.get("http://nonexistent.invalid/x")
    assert fault_of(info.value).fault == pb.TRANSPORT_FAULT_DNS


async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read()  # read nothing back to the client; wait until it leaves


async def test_read_timeout() -> None:
    async with serving(hang) as server, client(timeout=0.2) as c:
        with pytest.raises(httpx.ReadTimeout) as info:
            await c.get(f"{server.url}/x")
    assert fault_of(info.value).fault == pb.TRANSPORT_FAULT_TIMEOUT
    assert fault_of(info.value).may_have_reached


async def test_a_body_the_server_never_takes_is_a_write_timeout() -> None:
    async def never_read(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.Event().wait()  # until the test ends and serving() cancels it

    held = send_buffer_max() + receive_buffer_max()  # what the sockets between may take in
    async with serving(never_read) as server, client(timeout=httpx.Timeout(0.3)) as c:
        with pytest.raises(httpx.WriteTimeout) as info:
            await c.post(f"{server.url}/x", content=b"x" * max(16 * MiB, 2 * held))
    assert fault_of(info.value).may_have_reached


async def test_a_tls_handshake_that_never_comes_is_a_connect_timeout() -> None:
    async with serving(hang) as server, client(timeout=httpx.Timeout(5, connect=0.2)) as c:
        port = server.url.rsplit(":", 1)[1]
        with pytest.raises(httpx.ConnectTimeout) as info:
            await c.get(f"https://127.0.0.1:{port}/x")
    assert fault_of(info.value).fault == pb.TRANSPORT_FAULT_TIMEOUT
    assert not fault_of(info.value).may_have_reached


async def test_a_cancelled_request_leaves_the_pool_usable() -> None:
    calls = 0

    async def first_hangs(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            await hang(reader, writer)
        else:
            await answer_all(reader, writer)

    async with serving(first_hangs) as server, client() as c:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(c.get(f"{server.url}/1"), 0.2)
        assert (await c.get(f"{server.url}/2")).json() == {"ok": 1}


# TLS.


def _certificate(tmp_path: Path) -> tuple[Path, Path]:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost"),
            *("-addext", "subjectAltName=DNS:localhost", "-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return key, cert


async def test_tls_verified_against_its_certificate_and_reused(tmp_path: Path) -> None:
    key, cert = _certificate(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    transport = AiohttpTransport(LIMITS, ssl_context=ssl.create_default_context(cafile=str(cert)))
    async with serving(answer_all, tls=server_ctx) as server, client(transport) as c:
        for _ in range(3):
            async with c.stream("POST", f"{server.url}/x", content=b"x" * 100_000) as r:
                assert await r.aread() == OK_BODY
        assert server.accepted == 1


async def test_tls_with_an_untrusted_certificate_is_a_connect_error(tmp_path: Path) -> None:
    key, cert = _certificate(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    async with serving(answer_all, tls=server_ctx) as server, client() as c:
        with pytest.raises(httpx.ConnectError, match="certificate verify failed"):
            await c.get(f"{server.url}/x")


# Large bodies, and flow control.


async def test_large_bodies_both_ways() -> None:
    upload = bytes(range(256)) * (12 * MiB // 256 + 7)
    download = hashlib.sha256(upload).digest() * (10 * MiB // 32 + 3)

    async def digest_then_big(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            _, body = await read_request(reader)
            await respond(writer, hashlib.sha256(body).hexdigest().encode())
            await read_request(reader)
            await respond(writer, download)

    async with serving(digest_then_big) as server, client() as c:
        r = await c.post(f"{server.url}/up", content=upload)
        assert r.text == hashlib.sha256(upload).hexdigest()
        r = await c.get(f"{server.url}/down")
        assert r.content == download
        assert server.accepted == 1


async def test_an_upload_to_a_slow_reader_waits_for_it() -> None:
    """Without flow control the client would buffer the whole body before the server read any. What
    it may hold ahead of the server: its socket's send buffer, the server's (CHUNK) receive buffer,
    and a MiB of its own; the body is three times that at least."""
    bound = send_buffer_max() + 2 * CHUNK + MiB
    total = max(32 * MiB, -(-3 * bound // CHUNK) * CHUNK)
    received = 0
    lag = 0

    async def slow_reader(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal received
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, CHUNK)
        await reader.readuntil(b"\r\n\r\n")
        while received < total:
            received += len(await reader.read(CHUNK))
            if received % MiB < CHUNK:
                await asyncio.sleep(0.001)
        await respond(writer)

    async def body() -> AsyncIterator[bytes]:
        nonlocal lag
        chunk = b"u" * CHUNK
        for sent in range(CHUNK, total + 1, CHUNK):
            yield chunk
            lag = max(lag, sent - received)

    async with serving(slow_reader) as server, client() as c:
        r = await c.post(f"{server.url}/x", content=body(), headers={"content-length": str(total)})
        assert r.json() == {"ok": 1}
    assert received == total
    assert lag <= bound


async def test_a_download_to_a_slow_reader_stops_the_server() -> None:
    """Without flow control the client would take the whole body in while reading a little. What the
    server may write ahead of the client's reads: its (CHUNK) send buffer, the client socket's
    receive buffer, and a MiB the client holds; the body is three times that at least."""
    bound = 2 * CHUNK + receive_buffer_max() + MiB
    total = max(24 * MiB, -(-3 * bound // CHUNK) * CHUNK)
    sent = 0
    lag = 0

    async def fast_writer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal sent
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, CHUNK)
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % total)
        chunk = b"d" * CHUNK
        while sent < total:
            writer.write(chunk)
            await writer.drain()
            sent += CHUNK
        await reader.read()

    received = 0
    async with serving(fast_writer) as server, client() as c, c.stream("GET", f"{server.url}/x") as r:
        async for part in r.aiter_raw():
            received += len(part)
            lag = max(lag, sent - received)
            await asyncio.sleep(0.001)
    assert received == total
    assert lag <= bound


# aiohttp's errors, as httpx's.


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (aiohttp.ConnectionTimeoutError("x"), httpx.ConnectTimeout),
        (aiohttp.SocketTimeoutError("x"), httpx.ReadTimeout),
        (aiohttp.ServerDisconnectedError(), httpx.RemoteProtocolError),
        (aiohttp.ClientPayloadError("cut"), httpx.RemoteProtocolError),
        (aiohttp.ClientOSError(104, "Connection reset by peer"), httpx.ReadError),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, Exception) else v.__name__,
)
def test_each_aiohttp_error_becomes_the_httpx_one_the_faults_read(source: Exception, target: type) -> None:
    assert type(httpx_error(source)) is target


async def test_a_reset_idempotent_request_is_not_re_sent_beneath_the_engine() -> None:
    async def reset_each(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    async with serving(reset_each) as server, client() as c:
        for method in ("GET", "PUT", "DELETE"):
            with pytest.raises(httpx.ReadError):
                await c.request(method, f"{server.url}/x")
        assert server.accepted == 3  # one send each: aiohttp's own re-send of idempotent methods is off


def test_what_is_not_aiohttp_is_not_mapped() -> None:
    assert httpx_error(ValueError("x")) is None
