"""The HTTP port: one Starlette app, served by uvicorn on the gRPC server's event loop.

    what            how
    the server      ``uvicorn.Server(config).serve()`` as a task of the running loop: no thread, no
                    second process. No signal handlers of its own (``SidecarApp.stop`` ends it), no
                    logging config of its own (its lines go through the sidecar's JSON logging), no
                    access log, no ``Server`` header, no proxy headers trusted; h11 (``_Stamped``: each
                    request's first bytes read stamped, where its overhead stopwatch begins)
    connections     ``http.connections`` (``connections.py``): a request's head and body each within a
                    time limit, idle connections closed, at most ``max_connections`` open (past it the
                    longest idle goes first); an answer being sent is never cut
    the socket      bound here before serving: an address in use is an OSError at once, port 0 a free port;
                    SO_REUSEPORT for one of several workers serving the same host:port (``serve --workers``)
    TLS             ``server.tls`` (``security.server_ssl_context``: mTLS when ``client_ca`` is set)
    who may call    ``access.Access``: Origin / Host, then ``server.auth``'s bearer tokens
    routes          ``GET /healthz`` (open: probes send no token): 200 SERVING, 503 NOT_SERVING once the
                    process drains (SIGTERM); then every door's
    lifespans       each door's (the MCP front's session manager), entered at start and left at stop
    a fault         anything a door raises before its answer started (a bug: bad input is each door's
                    precise 400) is answered in that door's shape (``Door.fault``: the format's error
                    object, a JSON-RPC error), as SYSTEM, its details only in the log; never Starlette's
                    bare ``500 text/plain Internal Server Error``; a path no door claims: the OpenAI shape
    stop            no new connections; requests in flight get the grace period, then are cancelled;
                    the doors' lifespans end

A door is a front to the same core (``doors.py`` builds them): its routes, and a lifespan when
it holds something open. A door reads its own request bodies and bounds them (``bodies.bounded_body``:
the model fronts and the MCP front at ``server.max_message_bytes``, the admin door at its own limit).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import h11
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from uvicorn.protocols.http.h11_impl import H11Protocol

from sidecar.config import HttpConnectionsConfig, ServerConfig
from sidecar.core import overhead
from sidecar.core.taxonomy import SidecarFailure, as_failure
from sidecar.server.auth import Tokens
from sidecar.server.http.access import Access
from sidecar.server.http.connections import Connection, Connections, Phase
from sidecar.server.http.envelope import OVERHEAD_HEADER, Overhead
from sidecar.server.security import is_local, server_ssl_context

__all__ = ["HEALTH_PATH", "STOP_MARGIN_S", "Door", "Fault", "HttpHosting"]

HEALTH_PATH = "/healthz"
STOP_MARGIN_S = 5.0
"""Past the grace period, stopping waits this much longer for uvicorn to cancel what is left."""
LISTEN_BACKLOG = 2048
"""Connections the kernel holds for the port before uvicorn accepts them (uvicorn's default)."""
KEEP_ALIVE_BACKSTOP_S = 5
"""uvicorn's own idle timer (``timeout_keep_alive``, armed after each answer) fires this long after
``idle_timeout_s``: the port's own closes the connection first (and counts it)."""


Fault = Callable[[str, SidecarFailure], "tuple[int, dict[str, Any]] | None"]
"""A door's answer to a failure at a path: its status and JSON body, or None (not its path)."""


@dataclass(frozen=True, slots=True)
class Door:
    """One front on the HTTP port."""

    name: str
    routes: Sequence[BaseRoute]
    lifespan: Callable[[], AbstractAsyncContextManager[None]] | None = None
    """Held open while the port serves (entered at start, left at stop)."""
    fault: Fault | None = None
    """How the door answers a failure it raised instead of answering: the status and JSON body for a
    request to ``path``, or None when the path is not the door's."""
    open_paths: frozenset[str] = frozenset()
    """Paths the caller-token check (``server.auth``) leaves to the door (the admin view checks its own)."""


def _plain_fault(failure: SidecarFailure) -> tuple[int, dict[str, Any]]:
    """The answer at a path no door claims: OpenAI's error shape (the ``error`` object most clients read)."""
    error = {"message": failure.message, "type": "server_error", "param": None, "code": "internal_error"}
    return 500, {"error": error}


class _Stamped(H11Protocol):
    """uvicorn's h11 protocol, which stamps when it read bytes (``overhead.arrived``): a request's task is
    made while its head is parsed, in this context, so its stopwatch begins at its first bytes read. Its
    writes go through ``_Joined``: an answer's head and body leave in one write.

    It tells the port's ``port_connections`` (a subclass per port: ``_protocol``) each phase of the
    exchange, read from h11's states (h11's public API) after each read and each answer."""

    port_connections: ClassVar[Connections]
    _watched: Connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        joined = _Joined(transport)
        super().connection_made(joined)
        self._watched = self.port_connections.opened(joined)  # past the cap, another or this one is closed

    def data_received(self, data: bytes) -> None:
        overhead.arrived(time.perf_counter())
        watched = self._watched
        heading = watched.phase is Phase.IDLE or watched.phase is Phase.HEAD
        if watched.phase is Phase.IDLE:
            self.port_connections.enter(watched, Phase.HEAD)  # a request's first bytes
        super().data_received(data)
        self.port_connections.enter(watched, self._phase(Phase.HEAD if heading else Phase.IDLE))

    def on_response_complete(self) -> None:
        super().on_response_complete()  # the next request, when one is waiting, is under way now
        self.port_connections.enter(self._watched, self._phase(Phase.IDLE))

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.port_connections.lost(self._watched)

    def _phase(self, between: Phase) -> Phase:
        """The exchange's phase by h11's states; ``between``: what no request under way means here (after a
        read: a head arriving; after an answer: idle)."""
        theirs, ours = self.conn.their_state, self.conn.our_state
        if theirs is h11.SEND_BODY:
            return Phase.BODY  # the head read, its body arriving (the answer may have begun)
        if theirs is h11.IDLE and ours is h11.IDLE:
            return between
        if ours is h11.SEND_RESPONSE or ours is h11.SEND_BODY or theirs is h11.DONE or theirs is h11.MUST_CLOSE:
            return Phase.ANSWERING
        return Phase.IDLE  # closed or broken: uvicorn is closing it


def _protocol(connections: Connections) -> type[_Stamped]:
    """``_Stamped`` for one port: uvicorn makes each connection's protocol from the class alone."""

    class Watched(_Stamped):
        pass

    Watched.port_connections = connections
    return Watched


class _Joined(asyncio.Transport):
    """A connection's transport whose writes of one step of the loop are joined into one, written at the
    end of the step. uvicorn writes an answer's head, then its body: two sends, so two wakeups of the
    caller, which on a busy machine may take the CPU from the sidecar between them (0.05 ms idle, 0.8 ms
    on a loaded 2-core machine, measured). Joined, the head leaves with the body; the
    ``x-sidecar-overhead-ms`` it carries is read again as they are written (``_restamped``), so it
    counts h11's encoding of both and the app's way out (0.3 ms of 5, measured). Everything else is
    the transport's own."""

    def __init__(self, transport: asyncio.Transport) -> None:
        super().__init__()
        self._transport = transport
        self._parts: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self._parts:
            asyncio.get_running_loop().call_soon(self._flush)
        self._parts.append(bytes(data))

    def _flush(self) -> None:
        parts, self._parts = self._parts, []
        if parts and not self._transport.is_closing():
            self._transport.write(_restamped(b"".join(parts)))

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._parts = []
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(map(len, self._parts))

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()


_STAMP = b"\r\n" + OVERHEAD_HEADER.encode() + b": "
_HEAD_END = b"\r\n\r\n"


def _restamped(data: bytes) -> bytes:
    """A write that begins with an answer's head, its ``x-sidecar-overhead-ms`` read again now, as it is
    written: the stopwatch of the call whose step wrote it (the flush runs in the context of the write
    that scheduled it). Any other write, or a head without the header, as it is."""
    if not data.startswith(b"HTTP/") or (watch := overhead.current()) is None:
        return data
    at = data.find(_STAMP, 0, data.find(_HEAD_END))
    if at < 0:
        return data
    begin = at + len(_STAMP)
    return b"".join((data[:begin], watch.milliseconds().encode(), data[data.index(b"\r\n", begin) :]))


class _OnTheLoop(uvicorn.Server):
    """uvicorn on a loop that is not its own: the sidecar owns the signals and says when it is up."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.serving = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # SIGTERM / SIGINT are SidecarApp's (stop_on_signals): it stops this server

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.serving.set()


@dataclass
class HttpHosting:
    """The HTTP port of one sidecar: ``await start()``, ``await stop(grace)``."""

    listen: str
    server: ServerConfig
    doors: Sequence[Door]
    reuse_port: bool = False
    limits: HttpConnectionsConfig = field(default_factory=HttpConnectionsConfig)
    """``http.connections``: the time limits of a request's parts, idle connections, how many are open."""
    closed: Callable[[str], None] | None = None
    """Counts a connection the limits closed, by reason (``connections.REASONS``): the metric."""
    draining: bool = False
    """Set when the process drains: ``GET /healthz`` answers 503 NOT_SERVING."""
    address: str = ""
    port: int = 0
    connections: Connections | None = field(default=None, init=False)
    """The open connections, once started."""
    _uvicorn: _OnTheLoop | None = field(default=None, init=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False)

    @property
    def scheme(self) -> str:
        return "https" if self.server.tls is not None else "http"

    async def start(self) -> None:
        """Serve; ``ConfigError`` when the TLS files are unusable, ``OSError`` when it cannot listen or start."""
        context = server_ssl_context(self.server.tls) if self.server.tls is not None else None
        sock = _bind(self.listen, reuse_port=self.reuse_port)
        try:
            self.port = sock.getsockname()[1]
            host = self.listen.rpartition(":")[0]
            self.address = f"{host}:{self.port}"
            connections = self.connections = Connections(self.limits, closed=self.closed)
            config = uvicorn.Config(
                self._app(),
                log_config=None,
                log_level=None,
                access_log=False,
                lifespan="on",
                http=_protocol(connections),
                timeout_keep_alive=math.ceil(self.limits.idle_timeout_s) + KEEP_ALIVE_BACKSTOP_S,
                ws="none",
                interface="asgi3",
                server_header=False,
                proxy_headers=False,
                ssl_context_factory=_fixed(context) if context is not None else None,
            )
            server = self._uvicorn = _OnTheLoop(config)
            self._task = task = asyncio.create_task(self._serve(server, sock), name=f"http {self.address}")
        except BaseException:
            sock.close()
            raise
        serving = asyncio.ensure_future(server.serving.wait())
        await asyncio.wait({task, serving}, return_when=asyncio.FIRST_COMPLETED)
        if not server.serving.is_set():
            serving.cancel()
            task.result()  # raises what kept it from serving
            raise OSError(f"the HTTP port {self.listen} stopped before it served")
        connections.start()

    async def stop(self, grace: float) -> None:
        """Stop taking connections; requests in flight get ``grace`` seconds, then are cancelled."""
        server, task = self._uvicorn, self._task
        if self.connections is not None:
            self.connections.stop()
        if server is None or task is None:
            return
        server.config.timeout_graceful_shutdown = math.ceil(grace)
        server.should_exit = True
        try:
            async with asyncio.timeout(grace + STOP_MARGIN_S):
                await asyncio.shield(task)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        finally:
            self._uvicorn = self._task = None

    async def _serve(self, server: _OnTheLoop, sock: socket.socket) -> None:
        try:
            await server.serve(sockets=[sock])
        except SystemExit:  # uvicorn exits the process when its startup fails (a door's lifespan raised)
            raise OSError(f"the HTTP port {self.listen} could not start (the log says why)") from None

    def _app(self) -> Overhead:
        doors = list(self.doors)

        @contextlib.asynccontextmanager
        async def lifespan(_app: Starlette) -> AsyncIterator[None]:
            async with contextlib.AsyncExitStack() as stack:
                for door in doors:
                    if door.lifespan is not None:
                        await stack.enter_async_context(door.lifespan())
                yield

        async def health(_request: Request) -> JSONResponse:
            if self.draining:
                return JSONResponse({"status": "NOT_SERVING"}, status_code=503)
            return JSONResponse({"status": "SERVING"})

        async def fault(request: Request, exc: Exception) -> Response:
            """Starlette's last handler (its ServerErrorMiddleware): a SYSTEM failure in the door's shape."""
            path = request.url.path
            failure = as_failure(exc, f"the HTTP port ({path[:100]})")  # the details: logged, never answered
            answer = next((a for d in doors if d.fault is not None and (a := d.fault(path, failure))), None)
            status, body = answer or _plain_fault(failure)
            text = json.dumps(body, ensure_ascii=True)  # whatever the failure quotes, ASCII writes it
            return Response(
                text, status_code=status, media_type="application/json", headers={"x-should-retry": "false"}
            )

        routes: list[BaseRoute] = [Route(HEALTH_PATH, health, methods=["GET"])]
        for door in doors:
            routes.extend(door.routes)
        app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={Exception: fault})
        auth = self.server.auth
        tokens = Tokens(auth.values()) if auth is not None else None
        guarded = Access(
            app,
            tokens=tokens,
            loopback=is_local(self.listen),
            open_paths=frozenset({HEALTH_PATH}).union(*(d.open_paths for d in doors)),
        )
        return Overhead(guarded)


def _fixed(context: ssl.SSLContext) -> Callable[[uvicorn.Config, Callable[[], ssl.SSLContext]], ssl.SSLContext]:
    """uvicorn's ``ssl_context_factory`` for a context already built (and checked) by security.py."""

    def factory(_config: uvicorn.Config, _default: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
        return context

    return factory


def _bind(listen: str, *, reuse_port: bool) -> socket.socket:
    """A listening socket on ``listen`` (``host:port``), or OSError naming it.

    Made with getaddrinfo's protocol (TCP), as asyncio makes its own: asyncio turns Nagle off
    (TCP_NODELAY) only on connections of a socket that says it is TCP; without, every answer
    written in two parts (headers, body) waited for the client's delayed ACK, 40 ms each.
    """
    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    try:
        infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _name, address = infos[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise OSError(f"cannot listen on {listen} (http.listen): {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(LISTEN_BACKLOG)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {listen} (http.listen): {exc.strerror or exc}") from None
    return sock
