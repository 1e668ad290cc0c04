"""The h11 server underneath both fakes: keep-alive, faults, disconnect detection, concurrency."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from sidecar.fakes import ThreadedServer
from sidecar.fakes._http import Chunk, Fault, HttpServer, Request, Response, StreamEnd


class _Echo(HttpServer):
    """Answers per path: /delay/<ms>, /together/<n>, /reset, /hang, /drop, /boom, /stream/<end>, anything
    else echoes. ``/together/<n>`` answers once n of them have arrived: only a server that serves them
    at once can."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Request] = []
        self._together = 0
        self._all_here = asyncio.Event()

    async def handle(self, request: Request) -> Response:
        self.seen.append(request)
        path = request.path
        if path.startswith("/delay/"):
            return Response(status=200, body=b"late", delay_ms=float(path.rsplit("/", 1)[1]))
        if path.startswith("/together/"):
            self._together += 1
            if self._together >= int(path.rsplit("/", 1)[1]):
                self._all_here.set()
            await self._all_here.wait()
            return Response(status=200, body=b"together")
        faults = {"/reset": Fault.RESET, "/hang": Fault.HANG, "/drop": Fault.DROP_MID_BODY}
        if path in faults:
            return Response(status=200, body=b"y" * 400, fault=faults[path])
        if path == "/boom":
            raise RuntimeError("handler bug")
        if path.startswith("/stream/"):
            chunks = (Chunk(b"one\n"), Chunk(b"two\n", delay_ms=20), Chunk(b"three\n"))
            return Response(status=200, stream=chunks, stream_end=StreamEnd(path.rsplit("/", 1)[1]))
        return Response.json(
            {
                "method": request.method,
                "path": path,
                "query": request.query,
                "headers": request.headers,
                "body": request.body_for_record(),
            }
        )


def _wait(predicate: Callable[[], bool], timeout: float = 2.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)


@pytest.fixture
def echo() -> Iterator[ThreadedServer[_Echo]]:
    with ThreadedServer(_Echo()) as srv:
        yield srv


def test_echo_parses_query_headers_json(echo: ThreadedServer[_Echo], client: httpx.Client) -> None:
    resp = client.post(echo.url + "/a%20b?x=1&y=", json={"k": [1, 2]}, headers={"X-Mixed-Case": "v"})
    body = resp.json()
    assert resp.status_code == 200
    assert body["path"] == "/a b"
    assert body["query"] == {"x": "1", "y": ""}
    assert body["headers"]["x-mixed-case"] == "v"
    assert body["body"] == {"k": [1, 2]}


def test_keep_alive_reuses_one_connection(echo: ThreadedServer[_Echo], client: httpx.Client) -> None:
    for _ in range(5):
        assert client.get(echo.url + "/").status_code == 200
    assert echo.server.connections_accepted == 1


def test_url_is_loopback_with_ephemeral_port(echo: ThreadedServer[_Echo]) -> None:
    assert echo.url.startswith("http://127.0.0.1:")
    assert echo.port > 0


def test_delay_then_answer(echo: ThreadedServer[_Echo], client: httpx.Client) -> None:
    start = time.monotonic()
    resp = client.get(echo.url + "/delay/120")
    assert resp.content == b"late"
    assert time.monotonic() - start >= 0.11
    assert echo.server.seen[-1].status_sent == 200
    assert echo.server.seen[-1].client_disconnected is False


def test_client_giving_up_during_delay_is_recorded(echo: ThreadedServer[_Echo], client: httpx.Client) -> None:
    with pytest.raises(httpx.ReadTimeout):
        client.get(echo.url + "/delay/5000", timeout=0.1)
    _wait(lambda: echo.server.seen[-1].client_disconnected)
    assert echo.server.seen[-1].status_sent is None


def test_hang_until_client_leaves(echo: ThreadedServer[_Echo], client: httpx.Client) -> None:
    with pytest.raises(httpx.ReadTimeout):
        client.get(echo.url + "/hang", timeout=0.15)
    _wait(lambda: echo.server.seen[-1].client_disconnected)
    assert echo.server.seen[-1].fault == "hang"


def test_reset_aborts_without_response(echo: ThreadedServer[_Echo], client: httpx.Client) -> None:
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        client.get(echo.url + "/reset")
    assert echo.server.seen[-1].status_sent is None
    # The server keeps serving on a fresh connection.
    assert client.get(echo.url + "/").status_code == 200


def test_reset_is_a_tcp_rst() -> None:
    with ThreadedServer(_Echo()) as srv, socket.create_connection(("127.0.0.1", srv.port), timeout=2) as sock:
        sock.sendall(b"GET /reset HTTP/1.1\r\nHost: x\r\n\r\n")
        with pytest.raises(ConnectionResetError):
            sock.recv(1024)


def test_drop_mid_body(echo: ThreadedServer[_Echo], client: httpx.Client) -> None:
    with pytest.raises(httpx.RemoteProtocolError):
        client.get(echo.url + "/drop")
    assert echo.server.seen[-1].status_sent == 200


def test_stream_is_chunked_and_keeps_the_connection(echo: ThreadedServer[_Echo], client: httpx.Client) -> None:
    with client.stream("GET", echo.url + "/stream/complete") as resp:
        assert resp.headers["transfer-encoding"] == "chunked"
        assert list(resp.iter_lines()) == ["one", "two", "three"]
    assert echo.server.seen[-1].chunks_sent == 3
    assert client.get(echo.url + "/").status_code == 200
    assert echo.server.connections_accepted == 1


@pytest.mark.parametrize(
    ("end", "error"), [("drop", httpx.RemoteProtocolError), ("reset", (httpx.ReadError, httpx.RemoteProtocolError))]
)
def test_stream_cut_short(echo: ThreadedServer[_Echo], client: httpx.Client, end: str, error: type[Exception]) -> None:
    with pytest.raises(error), client.stream("GET", echo.url + "/stream/" + end) as resp:
        resp.read()
    assert echo.server.seen[-1].chunks_sent == 3
    assert client.get(echo.url + "/").status_code == 200


def test_stream_hang_after_the_chunks(echo: ThreadedServer[_Echo], client: httpx.Client) -> None:
    lines: list[str] = []
    with pytest.raises(httpx.ReadTimeout), client.stream("GET", echo.url + "/stream/hang", timeout=0.3) as resp:
        lines.extend(resp.iter_lines())
    assert lines == ["one", "two", "three"]  # each chunk was flushed, though the body never ended
    _wait(lambda: echo.server.seen[-1].client_disconnected)


def test_handler_exception_becomes_500(echo: ThreadedServer[_Echo], client: httpx.Client) -> None:
    resp = client.get(echo.url + "/boom")
    assert resp.status_code == 500
    assert "handler bug" in resp.text


def test_malformed_request_gets_400(echo: ThreadedServer[_Echo]) -> None:
    with socket.create_connection(("127.0.0.1", echo.port), timeout=2) as sock:
        sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        assert sock.recv(1024).startswith(b"HTTP/1.1 400")


def test_stop_ends_hanging_requests(client: httpx.Client) -> None:
    srv = ThreadedServer(_Echo()).start()
    try:
        with pytest.raises(httpx.ReadTimeout):
            client.get(srv.url + "/hang", timeout=0.05)
    finally:
        start = time.monotonic()
        srv.stop()
    assert time.monotonic() - start < 2.0


async def _raw_get(port: int, path: str) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")).split(b":")[1])
    body = await reader.readexactly(length)
    writer.close()
    await writer.wait_closed()
    return head.split(b" ", 2)[1] + b" " + body


@pytest.mark.asyncio
async def test_async_usage() -> None:
    async with _Echo() as server, httpx.AsyncClient() as client:
        resp = await client.get(server.url + "/x?a=1")
    assert resp.json()["query"] == {"a": "1"}


@pytest.mark.asyncio
async def test_many_concurrent_connections() -> None:
    async with _Echo() as server:
        gets = asyncio.gather(*[_raw_get(server.port, "/together/100") for _ in range(100)])
        results = await asyncio.wait_for(gets, 60)  # served one after another, the first would wait for ever
    assert results == [b"200 together"] * 100
    assert server.connections_accepted == 100


@pytest.mark.asyncio
async def test_async_disconnect_detection() -> None:
    async with _Echo() as server, httpx.AsyncClient() as client:
        task = asyncio.create_task(client.get(server.url + "/hang"))
        for _ in range(400):
            if server.seen:
                break
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(200):
            if server.seen[0].client_disconnected:
                break
            await asyncio.sleep(0.005)
    assert server.seen[0].client_disconnected
