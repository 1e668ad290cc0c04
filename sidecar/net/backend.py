"""A plain-asyncio network backend for httpcore (under httpx): the same HTTP, less overhead per call.

httpcore's default backend goes through anyio, whose typed-attribute lookups dominate the cost
of every request on a busy connection pool (each request asks every idle connection whether it
is readable). This backend answers the same questions from the socket it holds.
``fast_transport()`` is an ``httpx.AsyncHTTPTransport`` on it; timeouts and errors map onto
httpcore's exceptions exactly as the default backend's do, so httpx raises the same errors.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import typing
from collections.abc import Iterable

import httpcore
import httpx

__all__ = ["AsyncioBackend", "fast_transport"]

_HOLD_BYTES = 64 * 1024
"""Writes are coalesced up to this size; a larger body is sent as it comes."""
SockOpt = tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]


class AsyncioStream(httpcore.AsyncNetworkStream):
    """One connection. Writes are held until the next read, so a request goes out in one send."""

    __slots__ = ("_pending", "_reader", "_writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._pending: list[bytes] = []

    async def _flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            self._writer.write(data)
            await self._writer.drain()

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            async with asyncio.timeout(timeout):
                await self._flush()
                return await self._reader.read(max_bytes)
        except TimeoutError as exc:
            raise httpcore.ReadTimeout(str(exc) or "read timed out") from exc
        except OSError as exc:
            raise httpcore.ReadError(str(exc)) from exc

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        self._pending.append(buffer)
        if sum(map(len, self._pending)) < _HOLD_BYTES:
            return
        try:
            async with asyncio.timeout(timeout):
                await self._flush()
        except TimeoutError as exc:
            raise httpcore.WriteTimeout(str(exc) or "write timed out") from exc
        except OSError as exc:
            raise httpcore.WriteError(str(exc)) from exc

    async def aclose(self) -> None:
        self._pending.clear()
        self._writer.close()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                await self._writer.start_tls(ssl_context, server_hostname=server_hostname)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(str(exc) or "TLS handshake timed out") from exc
        except (OSError, ssl.SSLError) as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        return self

    def get_extra_info(self, info: str) -> typing.Any:
        if info == "is_readable":
            # The event loop reads every open socket as data arrives, so an idle connection the
            # server closed (or wrote to) shows in the reader without a system call.
            buffered: bytearray = getattr(self._reader, "_buffer", bytearray())
            return self._reader.at_eof() or bool(buffered) or self._writer.is_closing()
        if info == "ssl_object":
            return self._writer.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._writer.get_extra_info("sockname")
        if info == "server_addr":
            return self._writer.get_extra_info("peername")
        if info == "socket":
            return self._writer.get_extra_info("socket")
        return None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SockOpt] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, local_addr=(local_address, 0) if local_address else None, limit=2**20
                )
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(str(exc) or "connect timed out") from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for option in socket_options or ():
                sock.setsockopt(*option)
        return AsyncioStream(reader, writer)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[SockOpt] | None = None
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_unix_connection(path, limit=2**20)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(str(exc) or "connect timed out") from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        return AsyncioStream(reader, writer)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def fast_transport(limits: httpx.Limits) -> httpx.AsyncHTTPTransport:
    """httpx's own transport, with its connection pool on the plain-asyncio backend."""
    transport = httpx.AsyncHTTPTransport(limits=limits, trust_env=False)
    pool = transport._pool
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=pool._ssl_context,
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        http1=True,
        http2=False,
        network_backend=AsyncioBackend(),
    )
    return transport
