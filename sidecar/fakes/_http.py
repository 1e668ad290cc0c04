"""A small asyncio HTTP/1.1 server on h11, with fault injection.

Subclass :class:`HttpServer` and implement :meth:`HttpServer.handle`; it gets a
fully read :class:`Request` and returns a :class:`Response`.  The response may
ask the server to wait (``delay_ms``) or to misbehave (``fault``).  While the
server is waiting or hanging it watches the socket, and when the client goes
away it sets ``request.client_disconnected`` -- the proof, for tests, that a
cancellation reached the server.

A response with ``stream`` (a sequence of :class:`Chunk`) is sent piece by piece:
no content-length, so h11 frames it with chunked transfer-encoding for an HTTP/1.1
client (close-delimited for HTTP/1.0), and every chunk is written and drained on its
own, after its own ``delay_ms``, so the client sees each as it comes.  How the body
ends is ``stream_end``:

    COMPLETE  the terminating zero-length chunk: a whole body
    DROP      close the connection (FIN) with the body unfinished
    RESET     abort the connection (RST) with the body unfinished
    HANG      send nothing more, keep the connection open until the client leaves

``request.chunks_sent`` counts the chunks that went out.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import http
import json
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any, Self
from urllib.parse import parse_qsl, unquote, urlsplit

import h11

__all__ = ["Chunk", "Fault", "HttpServer", "Request", "Response", "StreamEnd"]

_READ_SIZE = 65536
_REASONS = {529: b"Site Overloaded"}


class StreamEnd(enum.Enum):
    """How a streamed body ends (see the module docstring)."""

    COMPLETE = "complete"
    DROP = "drop"
    RESET = "reset"
    HANG = "hang"


@dataclass(frozen=True)
class Chunk:
    """One piece of a streamed body, written and flushed on its own after ``delay_ms``."""

    data: bytes
    delay_ms: float = 0.0


class Fault(enum.Enum):
    """Ways a response can go wrong on purpose."""

    RESET = "reset"  # abort the TCP connection (RST) instead of answering
    HANG = "hang"  # never answer; wait until the client gives up
    DROP_MID_BODY = "drop_mid_body"  # send headers and part of the body, then close

    @classmethod
    def parse(cls, value: str) -> Fault:
        try:
            return cls(value)
        except ValueError:
            names = ", ".join(f.value for f in cls)
            raise ValueError(f"unknown fault {value!r} (expected one of: {names})") from None


@dataclass
class Request:
    """One request, fully read.  ``headers`` keys are lower-case."""

    method: str
    target: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    received_at: float = field(default_factory=time.time)
    # Filled in by the server as the exchange goes on.
    status_sent: int | None = None
    client_disconnected: bool = False
    fault: str | None = None
    chunks_sent: int | None = None  # streamed responses only

    _parsed: Any = field(default=None, init=False, repr=False, compare=False)
    _parse_error: ValueError | None = field(default=None, init=False, repr=False, compare=False)

    def json(self) -> Any:
        """The body parsed as JSON (once; callers must not mutate it); ``ValueError`` if not JSON."""
        if self._parsed is None and self._parse_error is None:
            try:
                self._parsed = json.loads(self.body.decode("utf-8"))
            except ValueError as exc:
                self._parse_error = exc
        if self._parse_error is not None:
            raise self._parse_error
        return self._parsed

    def json_or_none(self) -> Any:
        try:
            return self.json()
        except ValueError:
            return None

    def body_for_record(self) -> Any:
        """The parsed JSON body, else the text, else ``None`` when empty."""
        if not self.body:
            return None
        parsed = self.json_or_none()
        if parsed is not None:
            return parsed
        return self.body.decode("utf-8", errors="replace")


@dataclass
class Response:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    delay_ms: float = 0.0
    fault: Fault | None = None
    stream: tuple[Chunk, ...] | None = None  # set: the body is sent chunk by chunk, ``body`` unused
    stream_end: StreamEnd = StreamEnd.COMPLETE

    @classmethod
    def json(cls, obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
        hdrs = {"content-type": "application/json"}
        hdrs.update(headers or {})
        return cls(status=status, headers=hdrs, body=json.dumps(obj).encode("utf-8"))

    @classmethod
    def text(cls, text: str, status: int = 200, headers: dict[str, str] | None = None) -> Response:
        hdrs = {"content-type": "text/plain; charset=utf-8"}
        hdrs.update(headers or {})
        return cls(status=status, headers=hdrs, body=text.encode("utf-8"))


def _reason(status: int) -> bytes:
    if status in _REASONS:
        return _REASONS[status]
    try:
        return http.HTTPStatus(status).phrase.encode("ascii")
    except ValueError:
        return b""


def _make_request(event: h11.Request, body: bytes) -> Request:
    target = event.target.decode("latin-1")
    parts = urlsplit(target)
    headers: dict[str, str] = {}
    for name, value in event.headers:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return Request(
        method=event.method.decode("ascii"),
        target=target,
        path=unquote(parts.path) or "/",
        query=dict(parse_qsl(parts.query, keep_blank_values=True)),
        headers=headers,
        body=body,
    )


class _Conn:
    """One client connection: an h11 state machine over an asyncio stream."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.h11 = h11.Connection(h11.SERVER)

    async def _feed(self) -> bool:
        """Read more bytes into h11; ``False`` when the peer closed or reset."""
        try:
            data = await self.reader.read(_READ_SIZE)
        except (ConnectionError, OSError):
            data = b""
        self.h11.receive_data(data)
        return bool(data)

    async def read_request(self) -> Request | None:
        head: h11.Request | None = None
        chunks: list[bytes] = []
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                await self._feed()
            elif isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                return _make_request(head, b"".join(chunks))
            elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return None

    async def wait_or_disconnect(self, seconds: float | None) -> bool:
        """Wait ``seconds`` (``None``: forever); ``True`` if the client left meanwhile.

        Bytes that arrive meanwhile (a pipelined request) are kept for later.
        """
        loop = asyncio.get_running_loop()
        deadline = None if seconds is None else loop.time() + seconds
        while True:
            timeout = None if deadline is None else deadline - loop.time()
            if timeout is not None and timeout <= 0:
                return False
            try:
                data = await asyncio.wait_for(self.reader.read(_READ_SIZE), timeout)
            except TimeoutError:
                return False
            except (ConnectionError, OSError):
                return True
            if not data:
                return True
            self.h11.receive_data(data)

    async def send(self, resp: Response, *, cut_body: bool = False) -> None:
        body = resp.body
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in resp.headers.items()]
        headers = [h for h in headers if h[0].lower() not in (b"content-length", b"transfer-encoding")]
        headers.append((b"content-length", str(len(body)).encode("ascii")))
        out = self.h11.send(h11.Response(status_code=resp.status, headers=headers, reason=_reason(resp.status)))
        assert out is not None
        if cut_body:
            out += body[: len(body) // 2]
            self.writer.write(out)
            await self.writer.drain()
            return
        if body:
            out += self.h11.send(h11.Data(data=body)) or b""
        out += self.h11.send(h11.EndOfMessage()) or b""
        self.writer.write(out)
        await self.writer.drain()

    async def send_head(self, resp: Response) -> None:
        """Status line and headers of a streamed response (no content-length: h11 picks the framing)."""
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in resp.headers.items()]
        headers = [h for h in headers if h[0].lower() not in (b"content-length", b"transfer-encoding")]
        out = self.h11.send(h11.Response(status_code=resp.status, headers=headers, reason=_reason(resp.status)))
        assert out is not None
        self.writer.write(out)
        await self.writer.drain()

    async def send_chunk(self, data: bytes) -> None:
        self.writer.write(self.h11.send(h11.Data(data=data)) or b"")
        await self.writer.drain()

    async def send_end(self) -> None:
        self.writer.write(self.h11.send(h11.EndOfMessage()) or b"")
        await self.writer.drain()

    def reset(self) -> None:
        """Abort with an RST rather than a polite FIN."""
        sock = self.writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()

    async def send_bad_request(self) -> None:
        with contextlib.suppress(Exception):
            await self.send(Response.text("bad request\n", status=400, headers={"connection": "close"}))


class HttpServer:
    """Base asyncio HTTP/1.1 server.  Use ``async with`` or ``start()``/``stop()``."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, backlog: int = 1024) -> None:
        self.host = host
        self._port = port
        self._backlog = backlog
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.connections_accepted = 0  # TCP connections so far (keep-alive reuses one)

    async def handle(self, request: Request) -> Response:
        raise NotImplementedError

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self._port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._on_client, self.host, self._port, backlog=self._backlog)
        self._port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections_accepted += 1
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        conn = _Conn(reader, writer)
        try:
            await self._serve(conn)
        except asyncio.CancelledError:
            writer.transport.abort()
        except (ConnectionError, OSError):
            pass
        finally:
            if task is not None:
                self._tasks.discard(task)
            if not writer.transport.is_closing():
                writer.close()

    async def _serve(self, conn: _Conn) -> None:
        while True:
            try:
                request = await conn.read_request()
            except h11.RemoteProtocolError:
                await conn.send_bad_request()
                return
            if request is None:
                return
            try:
                resp = await self.handle(request)
            except Exception as exc:  # a bug in a handler must not kill the server
                resp = Response.text(f"handler error: {exc!r}\n", status=500)
            if not await self._answer(conn, request, resp):
                return
            if conn.h11.our_state is not h11.DONE or conn.h11.their_state is not h11.DONE:
                return
            conn.h11.start_next_cycle()

    async def _answer(self, conn: _Conn, request: Request, resp: Response) -> bool:
        """Deliver ``resp`` with its delay and fault; ``False`` to close the connection."""
        fault = resp.fault
        request.fault = fault.value if fault else None
        if fault is Fault.HANG:
            request.client_disconnected = await conn.wait_or_disconnect(None)
            return False
        if resp.delay_ms > 0 and await conn.wait_or_disconnect(resp.delay_ms / 1000.0):
            request.client_disconnected = True
            return False
        if fault is Fault.RESET:
            conn.reset()
            return False
        request.status_sent = resp.status
        if resp.stream is not None:
            return await self._stream(conn, request, resp)
        if fault is Fault.DROP_MID_BODY:
            if len(resp.body) < 2:
                resp.body = b'{"partial": "this body is cut short on purpose"}'
            await conn.send(resp, cut_body=True)
            return False
        await conn.send(resp)
        return True

    async def _stream(self, conn: _Conn, request: Request, resp: Response) -> bool:
        """Send a streamed body chunk by chunk; ``False`` to close the connection.

        ``fault=drop_mid_body`` on a stream sends the first half of the chunks, then closes.
        """
        assert resp.stream is not None
        chunks, end = resp.stream, resp.stream_end
        if resp.fault is Fault.DROP_MID_BODY:
            chunks, end = chunks[: len(chunks) // 2], StreamEnd.DROP
        request.chunks_sent = 0
        try:
            await conn.send_head(resp)
            for chunk in chunks:
                if chunk.delay_ms > 0 and await conn.wait_or_disconnect(chunk.delay_ms / 1000.0):
                    request.client_disconnected = True
                    return False
                await conn.send_chunk(chunk.data)
                request.chunks_sent += 1
            if end is StreamEnd.COMPLETE:
                await conn.send_end()
                return True
        except (ConnectionError, OSError):
            request.client_disconnected = True
            return False
        if end is StreamEnd.RESET:
            conn.reset()
        elif end is StreamEnd.HANG:
            request.client_disconnected = await conn.wait_or_disconnect(None)
        return False
