"""A plain-asyncio HTTP/1.1 transport for httpx: httpcore's connection pool on a stream we own.

httpcore's default network backend goes through anyio, whose typed-attribute lookups dominated
the cost of every request on a busy pool (each request asks every idle connection whether it is
readable; see BENCHMARKS.md). Here each connection is our own ``asyncio.Protocol``, so that
question and every other one is answered from state we hold, and httpx sees only public APIs:

    httpx.AsyncClient
      AsyncioTransport               httpx.AsyncBaseTransport: httpx.Request -> httpcore.Request,
        httpcore.AsyncConnectionPool   the response back, httpcore's errors -> httpx's (HTTPCORE_TO_HTTPX)
          AsyncioBackend             httpcore.AsyncNetworkBackend: TCP (TCP_NODELAY) or a unix socket
            AsyncioStream            httpcore.AsyncNetworkStream and asyncio.Protocol, one per connection

What the stream does, and what it answers:

    write          held until the next read, so a request goes out in one send; past
                   _HOLD_BYTES it is sent at once and waits while the transport is paused
                   (pause_writing / resume_writing), up to the write timeout
    read           from the bytes the loop delivered (data_received); reading is paused while
                   more than _READ_HIGH_BYTES wait, and resumes below _READ_LOW_BYTES
    is_readable    an idle connection that has bytes, an EOF or a close waiting: the server
                   closed it or wrote to it, so the pool drops it (no system call)
    start_tls      loop.start_tls on the same protocol

Errors are httpcore's, exactly as its own backends raise them:

    connect: timeout -> ConnectTimeout   OSError (refused, DNS, TLS) -> ConnectError
    read:    timeout -> ReadTimeout      closed with an error (reset) -> ReadError   closed -> b""
    write:   timeout -> WriteTimeout     closed -> WriteError
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import typing
from collections.abc import AsyncIterable, AsyncIterator, Iterable

import httpcore
import httpx

__all__ = ["HTTPCORE_TO_HTTPX", "AsyncioBackend", "AsyncioStream", "AsyncioTransport", "fast_transport", "httpx_error"]

_HOLD_BYTES = 64 * 1024
"""Writes are held (coalesced) up to this many bytes; a larger body is sent as it comes."""
_READ_HIGH_BYTES = 1024 * 1024
"""Received bytes waiting to be read above which the connection stops reading from the socket ..."""
_READ_LOW_BYTES = 256 * 1024
"""... until fewer than this many wait."""

SockOpt = tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]

HTTPCORE_TO_HTTPX: dict[type[Exception], type[httpx.TransportError]] = {
    httpcore.TimeoutException: httpx.TimeoutException,
    httpcore.ConnectTimeout: httpx.ConnectTimeout,
    httpcore.ReadTimeout: httpx.ReadTimeout,
    httpcore.WriteTimeout: httpx.WriteTimeout,
    httpcore.PoolTimeout: httpx.PoolTimeout,
    httpcore.NetworkError: httpx.NetworkError,
    httpcore.ConnectError: httpx.ConnectError,
    httpcore.ReadError: httpx.ReadError,
    httpcore.WriteError: httpx.WriteError,
    httpcore.ProxyError: httpx.ProxyError,
    httpcore.UnsupportedProtocol: httpx.UnsupportedProtocol,
    httpcore.ProtocolError: httpx.ProtocolError,
    httpcore.LocalProtocolError: httpx.LocalProtocolError,
    httpcore.RemoteProtocolError: httpx.RemoteProtocolError,
}
"""httpcore's exceptions and the httpx exception each becomes: the mapping httpx's own transport
makes. httpcore.ConnectionNotAvailable is not here: the pool handles it and it never escapes."""


def httpx_error(exc: Exception) -> httpx.TransportError | None:
    """The httpx exception for an httpcore one (its most specific class in the table), else None."""
    for cls in type(exc).__mro__:
        target = HTTPCORE_TO_HTTPX.get(cls)
        if target is not None:
            return target(str(exc))
    return None


class AsyncioStream(httpcore.AsyncNetworkStream, asyncio.Protocol):
    """One connection: the event loop feeds it as an asyncio.Protocol, httpcore uses it as a stream."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._transport: asyncio.Transport  # set by connection_made, before httpcore has the stream
        self._buffer = bytearray()  # received, not yet read
        self._pending: list[bytes] = []  # written, not yet sent
        self._pending_bytes = 0
        self._eof = False  # the peer sent EOF, or the connection is lost
        self._lost = False
        self._error: Exception | None = None  # why the connection was lost, if not cleanly
        self._reading_paused = False
        self._writing_paused = False
        self._read_waiter: asyncio.Future[None] | None = None
        self._write_waiter: asyncio.Future[None] | None = None

    # asyncio.Protocol: the event loop calls these.

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = typing.cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if len(self._buffer) > _READ_HIGH_BYTES and not self._reading_paused:
            self._reading_paused = True
            self._transport.pause_reading()
        _wake(self._read_waiter)

    def eof_received(self) -> None:
        self._eof = True  # returning None: the transport closes itself
        _wake(self._read_waiter)

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = self._lost = True
        self._error = exc
        _wake(self._read_waiter)
        _wake(self._write_waiter)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        _wake(self._write_waiter)

    # httpcore.AsyncNetworkStream: httpcore calls these.

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self._pending:
            self._send()
        if not self._buffer and not self._eof:
            self._read_waiter = waiter = self._loop.create_future()
            try:
                await _wait(self._loop, waiter, timeout, httpcore.ReadTimeout, "read timed out")
            finally:
                self._read_waiter = None
        buffer = self._buffer
        if buffer:
            if len(buffer) <= max_bytes:
                data = bytes(buffer)
                buffer.clear()
            else:
                data = bytes(buffer[:max_bytes])
                del buffer[:max_bytes]
            if self._reading_paused and len(buffer) < _READ_LOW_BYTES:
                self._reading_paused = False
                self._transport.resume_reading()
            return data
        if self._error is not None:
            raise httpcore.ReadError(str(self._error) or type(self._error).__name__)
        return b""

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        if self._lost:
            raise httpcore.WriteError(str(self._error) if self._error else "connection closed")
        self._pending.append(buffer)
        self._pending_bytes += len(buffer)
        if self._pending_bytes < _HOLD_BYTES:
            return
        self._send()
        while self._writing_paused and not self._lost:
            self._write_waiter = waiter = self._loop.create_future()
            try:
                await _wait(self._loop, waiter, timeout, httpcore.WriteTimeout, "write timed out")
            finally:
                self._write_waiter = None
        if self._lost:
            raise httpcore.WriteError(str(self._error) if self._error else "connection closed")

    def _send(self) -> None:
        pending = self._pending
        data = pending[0] if len(pending) == 1 else b"".join(pending)
        pending.clear()
        self._pending_bytes = 0
        if not self._lost:
            self._transport.write(data)

    async def aclose(self) -> None:
        self._pending.clear()
        self._pending_bytes = 0
        self._transport.close()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                tls = await self._loop.start_tls(self._transport, self, ssl_context, server_hostname=server_hostname)
        except TimeoutError as exc:
            self._transport.close()
            raise httpcore.ConnectTimeout(str(exc) or "TLS handshake timed out") from exc
        except OSError as exc:  # ssl.SSLError is one
            self._transport.close()
            raise httpcore.ConnectError(str(exc)) from exc
        if tls is None:  # typeshed allows it; CPython returns the TLS transport or raises
            raise httpcore.ConnectError("the connection closed during the TLS handshake")
        self._transport = tls
        return self

    def get_extra_info(self, info: str) -> typing.Any:
        if info == "is_readable":
            return self._eof or bool(self._buffer)
        if info in ("ssl_object", "socket"):
            return self._transport.get_extra_info(info)
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        return None


def _wake(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


def _expire(waiter: asyncio.Future[None], expired: type[Exception], message: str) -> None:
    if not waiter.done():
        waiter.set_exception(expired(message))


async def _wait(
    loop: asyncio.AbstractEventLoop,
    waiter: asyncio.Future[None],
    timeout: float | None,
    expired: type[Exception],
    message: str,
) -> None:
    """Wait for ``waiter``; past ``timeout`` seconds it fails with ``expired(message)``. One timer, no task."""
    if timeout is None:
        await waiter
        return
    timer = loop.call_later(timeout, _expire, waiter, expired, message)
    try:
        await waiter
    finally:
        timer.cancel()


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """Opens connections for httpcore's pool: TCP (with TCP_NODELAY) or a unix socket."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SockOpt] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        stream = AsyncioStream(loop)
        local_addr = (local_address, 0) if local_address else None
        try:
            async with asyncio.timeout(timeout):
                await loop.create_connection(lambda: stream, host, port, local_addr=local_addr)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(str(exc) or "connect timed out") from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        sock = stream.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for option in socket_options or ():
            sock.setsockopt(*option)
        return stream

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[SockOpt] | None = None
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        stream = AsyncioStream(loop)
        try:
            async with asyncio.timeout(timeout):
                await loop.create_unix_connection(lambda: stream, path)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(str(exc) or "connect timed out") from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        sock = stream.get_extra_info("socket")
        for option in socket_options or ():
            sock.setsockopt(*option)
        return stream

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class _ResponseStream(httpx.AsyncByteStream):
    """httpcore's response body as httpx's, with its errors as httpx's."""

    def __init__(self, stream: AsyncIterable[bytes]) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for part in self._stream:
                yield part
        except Exception as exc:
            mapped = httpx_error(exc)
            if mapped is None:
                raise
            raise mapped from exc

    async def aclose(self) -> None:
        aclose = getattr(self._stream, "aclose", None)
        if aclose is not None:
            await aclose()


class AsyncioTransport(httpx.AsyncBaseTransport):
    """An httpx transport: httpcore's connection pool (HTTP/1.1) on AsyncioBackend."""

    def __init__(
        self,
        limits: httpx.Limits,
        *,
        ssl_context: ssl.SSLContext | None = None,
        uds: str | None = None,
        socket_options: Iterable[SockOpt] | None = None,
    ) -> None:
        self.pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context if ssl_context is not None else httpx.create_ssl_context(trust_env=False),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            http1=True,
            http2=False,
            uds=uds,
            socket_options=socket_options,
            network_backend=AsyncioBackend(),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        try:
            response = await self.pool.handle_async_request(core_request)
        except Exception as exc:
            mapped = httpx_error(exc)
            if mapped is None:
                raise
            raise mapped from exc
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(typing.cast(AsyncIterable[bytes], response.stream)),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.pool.aclose()


def fast_transport(limits: httpx.Limits) -> AsyncioTransport:
    """The transport the sidecar's clients use: HTTP/1.1, certifi's CA bundle, nothing from the environment."""
    return AsyncioTransport(limits)
