"""HTTP/1.1 connections kept per origin: the pool under the sidecar's httpx transport.

httpcore's own ``AsyncConnectionPool`` walks every connection it holds, several times, for each
request and for each response closed (``_assign_requests_to_connections``), and it counts every
connection, busy or not, against ``max_keepalive_connections``: with more connections open than
that limit (65 calls in flight against the default 50) each one that goes idle is closed and the
next request opens a new one. Under load that walk was a fifth of the sidecar's CPU
(BENCHMARKS.md). This pool keeps the same limits with state it updates as connections come and
go, and each connection is httpcore's own ``AsyncHTTPConnection`` (connect, TLS, HTTP/1.1):

    a request     an idle connection to its origin (the one used last; an expired one, or one the
                  server closed, is closed and the next tried), else a new connection while fewer
                  than ``max_connections`` are open, else the oldest idle connection to another
                  origin is closed for a new one, else it waits its turn (first come, first served)
                  up to the request's pool timeout: httpcore.PoolTimeout
    a response    when its body is closed the connection goes to the first waiting request (to
    closed        its origin; another origin's waiter gets a new connection in its place), else it
                  is kept idle; past ``max_keepalive_connections`` idle the oldest idle is closed;
                  a connection that cannot be reused (closed, broken) is dropped
    expiry        ``keepalive_expiry`` after its last response; idle connections are checked when
                  taken and swept at most every SWEEP_INTERVAL_S, on a request
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
import typing
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Iterable

import httpcore

__all__ = ["SWEEP_INTERVAL_S", "ConnectionPool"]

SWEEP_INTERVAL_S = 1.0
"""Idle connections past their keep-alive expiry are closed this often at most (on a request)."""

_SCHEMES = (b"http", b"https", b"ws", b"wss")
Key = tuple[bytes, bytes, int]
SockOpt = tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]


def _key(origin: httpcore.Origin) -> Key:
    return origin.scheme, origin.host, origin.port


class _Waiter:
    __slots__ = ("future", "key", "origin")

    def __init__(self, key: Key, origin: httpcore.Origin, future: asyncio.Future[httpcore.AsyncHTTPConnection]):
        self.key = key
        self.origin = origin
        self.future = future


class ConnectionPool:
    """Connections by origin, at most ``max_connections`` open, at most ``max_keepalive_connections`` idle."""

    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext,
        max_connections: int | None,
        max_keepalive_connections: int | None,
        keepalive_expiry: float | None,
        network_backend: httpcore.AsyncNetworkBackend,
        uds: str | None = None,
        socket_options: Iterable[SockOpt] | None = None,
    ) -> None:
        self._ssl_context = ssl_context
        self._max_open = max_connections if max_connections is not None else float("inf")
        idle_limit = max_keepalive_connections if max_keepalive_connections is not None else float("inf")
        self._max_idle = min(idle_limit, self._max_open)
        self._keepalive_expiry = keepalive_expiry
        self._backend = network_backend
        self._uds = uds
        self._socket_options = socket_options
        self._keys: dict[httpcore.AsyncHTTPConnection, Key] = {}  # every connection open, and its origin
        self._idle: dict[Key, list[httpcore.AsyncHTTPConnection]] = {}  # per origin, the most recent last
        self._idle_order: dict[httpcore.AsyncHTTPConnection, None] = {}  # every idle one, the oldest first
        self._waiters: deque[_Waiter] = deque()
        self._next_sweep = 0.0

    @property
    def connections(self) -> list[httpcore.AsyncHTTPConnection]:
        """Every connection open (or opening), in the order they were opened."""
        return list(self._keys)

    def _new(self, key: Key, origin: httpcore.Origin) -> httpcore.AsyncHTTPConnection:
        connection = httpcore.AsyncHTTPConnection(
            origin=origin,
            ssl_context=self._ssl_context,
            keepalive_expiry=self._keepalive_expiry,
            http1=True,
            http2=False,
            uds=self._uds,
            network_backend=self._backend,
            socket_options=self._socket_options,
        )
        self._keys[connection] = key
        return connection

    def _drop(self, connection: httpcore.AsyncHTTPConnection, closing: list[httpcore.AsyncHTTPConnection]) -> None:
        del self._keys[connection]
        if not connection.is_closed():
            closing.append(connection)

    def _unidle(self, connection: httpcore.AsyncHTTPConnection) -> None:
        del self._idle_order[connection]
        self._idle[self._keys[connection]].remove(connection)

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        origin = request.url.origin
        if origin.scheme == b"":
            raise httpcore.UnsupportedProtocol("Request URL is missing an 'http://' or 'https://' protocol.")
        if origin.scheme not in _SCHEMES:
            raise httpcore.UnsupportedProtocol(
                f"Request URL has an unsupported protocol '{origin.scheme.decode()}://'."
            )
        timeouts = request.extensions.get("timeout", {})
        while True:
            connection = await self._acquire(_key(origin), origin, timeouts.get("pool"))
            try:
                response = await connection.handle_async_request(request)
            except httpcore.ConnectionNotAvailable:  # it could not take the request after all: another one
                await self.release(connection)
                continue
            except BaseException:
                await self.release(connection)
                raise
            return httpcore.Response(
                status=response.status,
                headers=response.headers,
                content=_PooledStream(typing.cast(AsyncIterable[bytes], response.stream), self, connection),
                extensions=response.extensions,
            )

    async def _acquire(self, key: Key, origin: httpcore.Origin, timeout: float | None) -> httpcore.AsyncHTTPConnection:
        closing: list[httpcore.AsyncHTTPConnection] = []
        try:
            self._sweep(closing)
            waiters = self._waiters
            while waiters and waiters[0].future.done():  # timed out or cancelled, not yet gone
                waiters.popleft()
            if not waiters:  # nobody queued before this request
                connection = self._take(key, origin, closing)
                if connection is not None:
                    return connection
        finally:
            await _close(closing)
        loop = asyncio.get_running_loop()
        waiter = _Waiter(key, origin, loop.create_future())
        self._waiters.append(waiter)
        timer = None if timeout is None else loop.call_later(timeout, _expire, waiter.future)
        try:
            return await waiter.future
        except BaseException:
            future = waiter.future
            if future.done() and not future.cancelled() and future.exception() is None:
                await self.release(future.result())  # handed over, then cancelled: passed on
            raise
        finally:
            if timer is not None:
                timer.cancel()
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def _take(
        self, key: Key, origin: httpcore.Origin, closing: list[httpcore.AsyncHTTPConnection]
    ) -> httpcore.AsyncHTTPConnection | None:
        """An idle connection to ``origin``, a new one, or a new one in place of another origin's idle one."""
        idle = self._idle.get(key)
        while idle:
            connection = idle.pop()
            del self._idle_order[connection]
            if connection.has_expired():
                self._drop(connection, closing)
                continue
            return connection
        if len(self._keys) < self._max_open:
            return self._new(key, origin)
        if self._idle_order:  # full, but another origin has one idle: it makes room
            oldest = next(iter(self._idle_order))
            self._unidle(oldest)
            self._drop(oldest, closing)
            return self._new(key, origin)
        return None

    def _sweep(self, closing: list[httpcore.AsyncHTTPConnection]) -> None:
        if self._keepalive_expiry is None or not self._idle_order:
            return
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + SWEEP_INTERVAL_S
        for connection in [c for c in self._idle_order if c.has_expired()]:
            self._unidle(connection)
            self._drop(connection, closing)

    async def release(self, connection: httpcore.AsyncHTTPConnection) -> None:
        """A connection its request is done with: to the first waiter, kept idle, or dropped."""
        closing: list[httpcore.AsyncHTTPConnection] = []
        try:
            key = self._keys.get(connection)
            if key is None:  # the pool was closed meanwhile
                closing.append(connection)
                return
            reusable = connection.is_idle() and not connection.has_expired()
            waiter = self._next_waiter()
            if waiter is not None:
                if reusable and waiter.key == key:
                    waiter.future.set_result(connection)
                    return
                self._drop(connection, closing)  # makes room for the waiter's origin
                waiter.future.set_result(self._new(waiter.key, waiter.origin))
                return
            if not reusable:
                self._drop(connection, closing)
                return
            self._idle.setdefault(key, []).append(connection)
            self._idle_order[connection] = None
            if len(self._idle_order) > self._max_idle:
                oldest = next(iter(self._idle_order))
                self._unidle(oldest)
                self._drop(oldest, closing)
        finally:
            await _close(closing)

    def _next_waiter(self) -> _Waiter | None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.future.done():  # else it timed out, or was cancelled, meanwhile
                return waiter
        return None

    async def aclose(self) -> None:
        """Close every connection; requests waiting for one fail with PoolTimeout."""
        closing = list(self._keys)
        self._keys.clear()
        self._idle.clear()
        self._idle_order.clear()
        while (waiter := self._next_waiter()) is not None:
            waiter.future.set_exception(httpcore.PoolTimeout("the connection pool was closed"))
        await _close(closing)


def _expire(future: asyncio.Future[httpcore.AsyncHTTPConnection]) -> None:
    if not future.done():
        future.set_exception(httpcore.PoolTimeout("no connection was free in time"))


async def _close(connections: list[httpcore.AsyncHTTPConnection]) -> None:
    for connection in connections:
        with contextlib.suppress(Exception):  # a broken connection's close: nothing waits on it
            await connection.aclose()


class _PooledStream:
    """A response body on a pooled connection: closing it hands the connection back."""

    __slots__ = ("_closed", "_connection", "_pool", "_stream")

    def __init__(
        self, stream: AsyncIterable[bytes], pool: ConnectionPool, connection: httpcore.AsyncHTTPConnection
    ) -> None:
        self._stream = stream
        self._pool = pool
        self._connection = connection
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for part in self._stream:
                yield part
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            aclose = getattr(self._stream, "aclose", None)
            if aclose is not None:
                await aclose()
        finally:
            await self._pool.release(self._connection)
