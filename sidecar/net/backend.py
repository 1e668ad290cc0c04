"""The HTTP/1.1 transport under every httpx client of the sidecar: aiohttp's client beneath httpx.

httpx stays the API the senders, httpx-sse and the MCP SDK speak; beneath it this transport sends
each request on an ``aiohttp.ClientSession`` (its C parser and its connection pool). The pure-Python
stack it replaced (httpcore's pool, h11, a stream of our own) cost about a sixth more CPU per
CallModel at c=64: httpcore walks every pooled connection twice per request (BENCHMARKS.md)::

    httpx.AsyncClient                    the request built (base URL, default headers), cookies (none:
                                         net.cookies); model and tool attempts skip its send layers:
      AiohttpTransport.send              the request on the transport itself (no auth, redirects, hooks)
      AiohttpTransport                   httpx.AsyncBaseTransport: httpx.Request -> aiohttp, its errors
        aiohttp.ClientSession              -> httpx's (below); one session per transport, made on first use
          aiohttp.TCPConnector             the pool: ``max_connections``, ``keepalive_expiry``, TCP_NODELAY

What each httpx setting becomes:

    Limits.max_connections      TCPConnector(limit=)            0 / None: no limit
    Limits.keepalive_expiry     TCPConnector(keepalive_timeout=)
    Limits.max_keepalive_…      (aiohttp keeps every idle connection up to ``limit``)
    Timeout.connect             ClientTimeout(sock_connect=)     TCP and the TLS handshake
    Timeout.pool + connect      ClientTimeout(connect=)          a free slot in the pool, then the connect
    Timeout.read                ClientTimeout(sock_read=)        between two reads of the response
    Timeout.write               aiohttp has none (its sock_read does not run while a body is written):
                                sending the request and reading its head is bounded by
                                connect + pool + max(write, read); past it, WriteTimeout while
                                the body was still going out, else ReadTimeout

A pooled connection the server closed while it was idle is dropped and the request goes on a new
one. One the server *wrote to* while idle and left open is not noticed (aiohttp reads what it wrote
as the next request's response; httpcore's pool asked each idle connection first); servers that
write there (a 408 on an idle timeout) close the connection with it, and the close is noticed.

The upstream's time is left out of the call's overhead (``core.overhead``) here: a whole request
body's time from its write (``_Sent``, an ``aiohttp.BytesPayload``: aiohttp has built the request
and got its connection) to the response's head; a request without one, or streamed, aiohttp's
whole send; each wait for a body chunk. The sidecar's code around them counts.

Responses are read raw (``auto_decompress=False``): httpx decodes ``content-encoding`` itself. A
response's body streams as aiohttp reads it; past its buffer, aiohttp stops reading the socket, so
a slow reader slows the server (flow control). Closing a response before its end closes its
connection; a body read to its end gives the connection back to the pool.

Errors, as httpx's (``httpx_error``; ``net.transport.fault_of`` maps those onto transport faults)::

    ClientConnectorDNSError              ConnectError ("name resolution failed: …")
    ClientConnectorError, ClientSSLError ConnectError (refused, TLS verification)
    ConnectionTimeoutError               ConnectTimeout (no connection, or no pool slot, in time)
    SocketTimeoutError, ServerTimeout…   ReadTimeout
    ServerDisconnectedError              RemoteProtocolError ("… disconnected without sending a response")
    ClientPayloadError, ClientResponse…  RemoteProtocolError (a body cut short, a malformed response)
    ClientOSError, other ClientError     ReadError (a reset, …)
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import httpx

from sidecar.core import overhead

__all__ = [
    "BODY_SLICE_BYTES",
    "MAX_HEADER_BYTES",
    "WHOLE_BODY_BYTES",
    "AiohttpTransport",
    "fast_transport",
    "httpx_error",
]

MAX_HEADER_BYTES = 16 * 1024
"""The longest status line and header line read (aiohttp's default is 8,190; h11's was 16 KiB)."""
WHOLE_BODY_BYTES = 1024 * 1024
"""A request body up to this size is handed to aiohttp whole; a larger one in ``BODY_SLICE_BYTES``
slices, each written as the socket drains (aiohttp warns that a large body written at once can
hold the loop)."""
BODY_SLICE_BYTES = 256 * 1024
RESENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})
"""The methods aiohttp re-sends on a reset (idempotent, RFC 9112 9.3.1.1): only their requests pass
``_no_hidden_retry``; a POST (every model call) skips the middleware chain, a tenth of a millisecond."""
KEEPALIVE_S = 5.0
"""An idle pooled connection is closed after this long when the limits name none (httpx's default)."""


@functools.cache
def _verified() -> ssl.SSLContext:
    """The TLS context of every transport given none: certifi's CA bundle, nothing from the environment. Made
    once, at the first session a transport opens, and shared (an ``SSLContext`` is): reading the bundle is
    15-40 ms, which each transport made at start paid before (three on the embedded default)."""
    return httpx.create_ssl_context(trust_env=False)


class _Unretried(aiohttp.ClientError):
    """A reset or a disconnect on its way out of ``_no_hidden_retry``: aiohttp re-sends an idempotent
    request once when one of those escapes its handler, an attempt no span, throttle or circuit would
    see. The retry engine decides what is re-sent, so they leave wrapped, and are unwrapped here."""

    def __init__(self, cause: aiohttp.ClientError) -> None:
        super().__init__(str(cause))
        self.cause = cause


async def _no_hidden_retry(
    request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
) -> aiohttp.ClientResponse:
    try:
        return await handler(request)
    except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError) as exc:
        raise _Unretried(exc) from exc


def httpx_error(exc: BaseException) -> httpx.TransportError | None:
    """The httpx exception for an aiohttp one (the table in the module docstring); None if not one."""
    if isinstance(exc, _Unretried):
        exc = exc.cause
    words = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return httpx.ConnectError(f"name resolution failed: {words}")
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(words)
    if isinstance(exc, aiohttp.ServerTimeoutError):  # SocketTimeoutError: sock_read
        return httpx.ReadTimeout(words)
    if isinstance(exc, aiohttp.ClientConnectorError | aiohttp.ClientSSLError):
        return httpx.ConnectError(words)
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return httpx.RemoteProtocolError("Server disconnected without sending a response.")
    if isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ClientResponseError):
        return httpx.RemoteProtocolError(words)
    if isinstance(exc, aiohttp.InvalidURL):
        return httpx.UnsupportedProtocol(words)
    if isinstance(exc, aiohttp.ClientError):  # ClientOSError (a reset) and the rest
        return httpx.ReadError(words)
    return None


class _Body(httpx.AsyncByteStream):
    """A response's body as aiohttp reads it; ``aclose`` gives back (or, unread, closes) its connection."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = self._response.content.iter_any()
        while True:
            try:
                with overhead.upstream():  # the wait for the upstream's bytes, not what is done with them
                    chunk = await anext(chunks)
            except StopAsyncIteration:
                return
            except aiohttp.ClientError as exc:
                raise _mapped(exc) from exc
            yield chunk

    async def aclose(self) -> None:
        self._response.release()


class _Connection:
    """``response.extensions["network_stream"]``: the connection's ``get_extra_info`` (socket, TLS)."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        connection = response.connection
        self._transport = connection.transport if connection is not None else None

    def get_extra_info(self, name: str) -> Any:
        return None if self._transport is None else self._transport.get_extra_info(name)


def _mapped(exc: aiohttp.ClientError) -> httpx.TransportError:
    mapped = httpx_error(exc)
    assert mapped is not None, "every aiohttp.ClientError has an httpx counterpart"
    return mapped


class _Upload:
    """A request body as aiohttp sends it, and whether all of it has gone out (for the timeout's name)."""

    def __init__(self) -> None:
        self.sent = True

    def body(self, request: httpx.Request) -> bytes | AsyncIterator[bytes] | None:
        try:
            content = request.content
        except httpx.RequestNotRead:  # a streamed upload: aiohttp reads it as it sends
            self.sent = False
            return self._stream(request.stream)  # type: ignore[arg-type]
        if not content:
            return None
        if len(content) <= WHOLE_BODY_BYTES:
            return content
        self.sent = False
        return self._slices(content)

    async def _slices(self, body: bytes) -> AsyncIterator[bytes]:
        view = memoryview(body)
        for at in range(0, len(body), BODY_SLICE_BYTES):
            yield bytes(view[at : at + BODY_SLICE_BYTES])
        self.sent = True

    async def _stream(self, stream: httpx.AsyncByteStream) -> AsyncIterator[bytes]:
        async for part in stream:
            yield part
        self.sent = True


class _Exchange:
    """One request's upstream time (``core.overhead``): from its body's write (aiohttp has built the
    request and got a connection) to the response's head; begun at most once, ended once."""

    __slots__ = ("_done", "_on", "_watch")

    def __init__(self, watch: overhead.Stopwatch) -> None:
        self._watch = watch
        self._on = self._done = False

    def begin(self) -> None:
        if not (self._on or self._done):
            self._on = True
            self._watch.enter()

    def end(self) -> None:
        self._done = True
        if self._on:
            self._on = False
            self._watch.leave()


class _Sent(aiohttp.BytesPayload):
    """A whole request body that begins its exchange's upstream time as aiohttp writes it (with the
    head it coalesces): what aiohttp did before, building the request, counts as the sidecar's."""

    def __init__(self, value: bytes, exchange: _Exchange) -> None:
        super().__init__(value)
        self._exchange = exchange

    async def write(self, writer: aiohttp.abc.AbstractStreamWriter) -> None:
        self._exchange.begin()
        await super().write(writer)

    async def write_with_length(self, writer: aiohttp.abc.AbstractStreamWriter, content_length: int | None) -> None:
        self._exchange.begin()
        await super().write_with_length(writer, content_length)


def _timeouts(request: httpx.Request) -> tuple[aiohttp.ClientTimeout, float | None]:
    """httpx's timeouts as aiohttp's, and the bound on sending the request and reading its head (the
    module docstring's table)."""
    given = request.extensions.get("timeout", {})
    connect, pool, read, write = (given.get(k) for k in ("connect", "pool", "read", "write"))
    acquire = None if connect is None or pool is None else connect + pool
    head = None if read is None or write is None else float((connect or 0) + (pool or 0) + max(read, write))
    return aiohttp.ClientTimeout(total=None, connect=acquire, sock_connect=connect, sock_read=read), head


class AiohttpTransport(httpx.AsyncBaseTransport):
    """An httpx transport over one aiohttp session (HTTP/1.1, nothing from the environment)."""

    def __init__(self, limits: httpx.Limits, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self._limits = limits
        self._ssl = ssl_context  # None: ``_verified()``, at the first session
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        """The session, made on the first request (aiohttp binds it to the running loop)."""
        if self._session is None:
            limits = self._limits
            connector = aiohttp.TCPConnector(
                limit=limits.max_connections or 0,
                limit_per_host=0,
                keepalive_timeout=limits.keepalive_expiry if limits.keepalive_expiry is not None else KEEPALIVE_S,
                ssl=self._ssl if self._ssl is not None else _verified(),
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),
                auto_decompress=False,
                trust_env=False,
                max_line_size=MAX_HEADER_BYTES,
                max_field_size=MAX_HEADER_BYTES,
                middlewares=(_no_hidden_retry,),
            )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session = self._open()
        upload = _Upload()
        data = upload.body(request)
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw]
        timeout, head = _timeouts(request)
        # upstream time (core.overhead): a whole body's write to the response's head read (_Sent), else
        # aiohttp's whole send (no body, or one it streams)
        watch = overhead.current()
        exchange = _Exchange(watch) if watch is not None and isinstance(data, bytes) else None
        body = _Sent(data, exchange) if exchange is not None and isinstance(data, bytes) else data
        try:
            with overhead.upstream() if exchange is None else contextlib.nullcontext():
                async with asyncio.timeout(head):
                    response = await session.request(
                        request.method,
                        str(request.url),
                        data=body,
                        headers=headers,
                        timeout=timeout,
                        allow_redirects=False,
                        compress=None,
                        middlewares=None if request.method in RESENT_METHODS else (),
                        skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
                    )
        except aiohttp.ClientError as exc:  # aiohttp's own timeouts among them
            raise _mapped(exc) from exc
        except TimeoutError:
            if upload.sent:
                raise httpx.ReadTimeout("no response in time") from None
            raise httpx.WriteTimeout("the request body was not taken in time") from None
        finally:
            if exchange is not None:
                exchange.end()
        return httpx.Response(
            status_code=response.status,
            headers=list(response.raw_headers),
            stream=_Body(response),
            extensions={
                "http_version": b"HTTP/1.1",
                "reason_phrase": (response.reason or "").encode("latin-1", "replace"),
                "network_stream": _Connection(response),
            },
        )

    async def send(self, request: httpx.Request) -> httpx.Response:
        """The response to ``request``, its body still to read (``aclose`` it): what ``AsyncClient.send(request,
        stream=True)`` answers for a client with no auth, cookies, redirects or event hooks (the sidecar's), without
        the client's per-request layers (about a fifth of a millisecond before a stream's first token, measured)."""
        response = await self.handle_async_request(request)
        response.request = request
        return response

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


def fast_transport(limits: httpx.Limits) -> AiohttpTransport:
    """The transport the sidecar's clients use: HTTP/1.1, certifi's CA bundle (one context, shared), nothing from
    the environment."""
    return AiohttpTransport(limits)
