"""Sessions with MCP servers: one per server, opened at start, kept open, opened again after a fault.

    transport     ``url``: the official SDK's streamable    ``command``: the SDK's stdio client (the
                  HTTP client (httpx2) on the sidecar's own  program started with a minimal environment
                  httpx transport (``tools.mcp_http``),      plus ``env``; its stderr is the sidecar's)
                  ``headers``
    endpoint      the URL, masked, query string cut          ``stdio:<command>``, masked
    opening       connect or spawn, ``initialize``: at most ``connect_timeout_s``; one opening at a time,
                  shared by the calls that wait for it, each within its own attempt's time (a call out
                  of time leaves the opening to go on for the next)

A session is held open by a task of its own (the SDK's transports are context managers whose task
groups one task must enter and leave); calls from any task share it. What one call sees::

    the server answered (``is_error`` included)            Answered(result)
    a JSON-RPC error of the server                         RpcError(code, message)
    an answer the SDK refused (not its tool's outputSchema) Unusable(detail)
    no answer within the attempt's time                    Broken(TIMEOUT; reached unless still opening)
    the session broke: a transport fault (httpx's, as       Broken(fault, may_have_reached, detail[, HTTP
      ``net.transport.fault_of`` reads it), an HTTP error     status]); the session is closed and the next
      status (``tools.mcp_http``), the stdio process exited   call opens another
    the server no longer knew the session (HTTP 404)       Broken(RESET, never reached): the call never ran
    it cannot be opened (refused, no such program, ...)    Broken(..., never reached)

The SDK leaves a call waiting when the transport under it fails (its task group ends, the answer
never comes), so a call waits for its answer or for its session's end, whichever is first.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
import httpx2
from mcp import ClientSession, MCPError, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from sidecar.config import McpServerConfig
from sidecar.core.kinds import TransportFault
from sidecar.core.redact import mask_keys
from sidecar.core.text import cap, endpoint_of
from sidecar.net.backend import fast_transport
from sidecar.net.transport import fault_of
from sidecar.tools.mcp_http import McpTransport

__all__ = [
    "MCP_CLIENT_LIMITS",
    "Answered",
    "Broken",
    "McpSession",
    "McpUnavailable",
    "RpcError",
    "Seen",
    "Unusable",
]

MCP_CLIENT_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)
"""The HTTP connections one streamable HTTP server may have from the sidecar."""
MAX_LIST_PAGES = 100
"""``tools/list`` pages read at start; a server that pages on past this is refused."""
CLOSE_WAIT_S = 5.0
"""Closing a session waits this long for its task (the SDK gives a stdio process 2 s, then SIGTERM)."""
COMMAND_CHARS = 200
"""A stdio server's command is shown up to this many characters."""
T = TypeVar("T")
_SESSION_GONE = (types.INVALID_REQUEST, "Session terminated")
"""What the SDK answers a call whose session the server answered 404 for (1.x said code 32600, unsigned)."""


class McpUnavailable(OSError):
    """An MCP server that could not be opened at start (the sidecar does not start without its tools)."""


@dataclass(frozen=True, slots=True)
class Answered:
    result: types.CallToolResult


@dataclass(frozen=True, slots=True)
class RpcError:
    code: int
    message: str


@dataclass(frozen=True, slots=True)
class Unusable:
    detail: str


@dataclass(frozen=True, slots=True)
class Broken:
    fault: TransportFault
    may_have_reached: bool
    detail: str
    status: int | None = None
    """The HTTP status the endpoint answered (a transport fault has none)."""
    headers: Mapping[str, str] = field(default_factory=dict)


Seen = Answered | RpcError | Unusable | Broken


class _Unopened(Exception):
    """The session could not be opened, or ended before it answered."""

    def __init__(self, broken: Broken) -> None:
        super().__init__(broken.detail)
        self.broken = broken


@dataclass(slots=True)
class _Held:
    """One open session and the task that holds it open."""

    session: ClientSession
    task: asyncio.Task[None]
    stop: asyncio.Event
    ended: asyncio.Future[BaseException | None]
    """Set when the task ends: what ended it (None: asked to stop)."""


class McpSession:
    """The session with one MCP server, shared by every call of its tools."""

    def __init__(self, name: str, config: McpServerConfig, secrets: tuple[str, ...]) -> None:
        self.name = name
        self._config = config
        self._secrets = secrets
        self._held: _Held | None = None
        self._opening: asyncio.Task[_Held] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._client: httpx2.AsyncClient | None = None
        self.host = ""
        self.port: int | None = None
        if config.url is not None:
            url = httpx.URL(config.url)
            self.endpoint = endpoint_of(config.url, secrets)
            self.host, self.port = url.host, url.port
        else:
            assert config.command is not None
            self.endpoint = cap("stdio:" + mask_keys(" ".join(config.command), secrets), COMMAND_CHARS)

    async def start(self) -> list[types.Tool]:
        """Open the session and list every tool the server has; McpUnavailable when it cannot be done
        within ``connect_timeout_s``."""
        limit = self._config.connect_timeout_s
        try:
            async with asyncio.timeout(limit):
                held = await self._session()
                tools: list[types.Tool] = []
                cursor: str | None = None
                for _ in range(MAX_LIST_PAGES):
                    params = types.PaginatedRequestParams(cursor=cursor)
                    page = await self._within(held, held.session.list_tools(params=params))
                    tools += page.tools
                    cursor = page.next_cursor
                    if not cursor:
                        return tools
        except _Unopened as exc:
            why = exc.broken.detail
        except TimeoutError:
            why = f"no session and tool list within {limit:g} s (mcp_servers.{self.name}.connect_timeout_s)"
        except MCPError as exc:
            why = f"tools/list was answered with JSON-RPC error {exc.error.code}: {cap(exc.error.message)}"
        else:
            why = f"tools/list went on past {MAX_LIST_PAGES} pages"
        raise McpUnavailable(f"the MCP server {self.name} ({self.endpoint}) cannot be used: {why}")

    async def call(self, tool: str, arguments: dict[str, Any], timeout: float, meta: types.RequestParamsMeta) -> Seen:
        """One ``tools/call``, answered within ``timeout`` seconds (a session opened first when needed)."""
        opening = True
        try:
            async with asyncio.timeout(timeout):
                held = await self._session()
                opening = False
                return await self._call(held, tool, arguments, meta)
        except _Unopened as exc:
            return exc.broken
        except TimeoutError:
            if opening:
                return Broken(TransportFault.TIMEOUT, False, "no session with the server in time")
            return Broken(TransportFault.TIMEOUT, True, "no response in time")

    async def aclose(self) -> None:
        """Close the session (a stdio server's stdin closed, then it is waited for) and the HTTP client."""
        if self._opening is not None and not self._opening.done():
            self._opening.cancel()
            await asyncio.wait({self._opening})
        if self._held is not None:
            self._discard(self._held)
        tasks = list(self._tasks)
        if tasks:
            _done, late = await asyncio.wait(tasks, timeout=CLOSE_WAIT_S)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    # ---------------------------------------------------------------- the session

    async def _session(self) -> _Held:
        """The open session, or the one being opened (one opening at a time, shared by every caller)."""
        held = self._held
        if held is not None and not held.ended.done():
            return held
        if held is not None:
            self._discard(held)
        opening = self._opening
        if opening is None or opening.done():
            opening = self._opening = asyncio.create_task(self._open(), name=f"mcp open {self.name}")
            opening.add_done_callback(_retrieved)
        return await asyncio.shield(opening)  # a caller out of time leaves it opening for the next one

    async def _open(self) -> _Held:
        """A new session, within ``connect_timeout_s``; _Unopened when it cannot be had."""
        loop = asyncio.get_running_loop()
        opened: asyncio.Future[ClientSession | None] = loop.create_future()
        ended: asyncio.Future[BaseException | None] = loop.create_future()
        stop = asyncio.Event()
        task = asyncio.create_task(self._hold(opened, ended, stop), name=f"mcp session {self.name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        try:
            async with asyncio.timeout(self._config.connect_timeout_s):
                session = await opened
        except TimeoutError:
            task.cancel()
            raise _Unopened(Broken(TransportFault.TIMEOUT, False, "no session with the server in time")) from None
        except asyncio.CancelledError:
            task.cancel()
            raise
        if session is None:
            reason = ended.result() if ended.done() else None
            raise _Unopened(self._broken(reason, opening=True))
        held = self._held = _Held(session, task, stop, ended)
        return held

    async def _hold(
        self,
        opened: asyncio.Future[ClientSession | None],
        ended: asyncio.Future[BaseException | None],
        stop: asyncio.Event,
    ) -> None:
        reason: BaseException | None = None
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await self._transport(stack)
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                opened.set_result(session)
                await stop.wait()
        except Exception as exc:  # a transport's task group ends with its fault (an ExceptionGroup)
            reason = exc
        finally:
            if not opened.done():
                opened.set_result(None)
            if not ended.done():
                ended.set_result(reason)

    async def _transport(self, stack: contextlib.AsyncExitStack) -> tuple[Any, Any]:
        cfg = self._config
        if cfg.url is not None:
            if self._client is None:
                self._client = httpx2.AsyncClient(
                    transport=McpTransport(fast_transport(MCP_CLIENT_LIMITS)),
                    headers=cfg.headers,
                    # no read timeout: a call's own time bounds it (the server's event stream stays open)
                    timeout=httpx2.Timeout(None, connect=cfg.connect_timeout_s),
                    follow_redirects=False,
                    trust_env=False,
                )
            return await stack.enter_async_context(streamable_http_client(cfg.url, http_client=self._client))
        assert cfg.command is not None
        params = StdioServerParameters(command=cfg.command[0], args=cfg.command[1:], env=dict(cfg.env), cwd=cfg.cwd)
        return await stack.enter_async_context(stdio_client(params, errlog=sys.stderr))

    def _discard(self, held: _Held) -> None:
        """Stop using ``held``: its task closes it in the background (``aclose`` waits for it)."""
        held.stop.set()
        if self._held is held:
            self._held = None

    # ---------------------------------------------------------------- one call

    async def _call(self, held: _Held, tool: str, arguments: dict[str, Any], meta: types.RequestParamsMeta) -> Seen:
        try:
            return Answered(await self._within(held, held.session.call_tool(tool, arguments, meta=meta or None)))
        except _Unopened as lost:
            return lost.broken
        except MCPError as exc:
            code, message = exc.error.code, exc.error.message
            if code == types.CONNECTION_CLOSED and (held.ended.done() or message == "Connection closed"):
                self._discard(held)
                # the SDK wakes the call as its streams close, before the session's task has ended with what
                # closed them (an HTTP status, a transport fault): its end is read, not guessed
                await asyncio.wait({held.ended}, timeout=CLOSE_WAIT_S)
                reason = held.ended.result() if held.ended.done() else None
                if reason is not None:
                    return self._broken(reason, opening=False)
                gone = "the server process exited" if self._config.command else "the session was closed"
                return Broken(TransportFault.RESET, True, gone)
            if (code, message) == _SESSION_GONE:
                self._discard(held)
                return Broken(TransportFault.RESET, False, "the server no longer knew the session (HTTP 404)")
            return RpcError(code, message)
        except RuntimeError as exc:  # the SDK checks a result against its tool's outputSchema
            return Unusable(cap(mask_keys(str(exc), self._secrets)))
        except Exception as exc:  # anything else the SDK raises breaks the session
            self._discard(held)
            return self._broken(exc, opening=False)

    async def _within(self, held: _Held, request: Coroutine[Any, Any, T]) -> T:
        """What ``request`` returns (or raises); _Unopened when the session ends before it answers."""
        task = asyncio.ensure_future(request)
        watched: set[asyncio.Future[Any]] = {task, held.ended}
        try:
            await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not task.done():
                task.cancel()
                await asyncio.wait({task})
        if task.cancelled() or (held.ended.done() and task.exception() is not None):
            self._discard(held)
            raise _Unopened(self._broken(held.ended.result(), opening=False))
        return task.result()

    def _broken(self, reason: BaseException | None, *, opening: bool) -> Broken:
        """What ended a session (or kept it from opening), as a transport fault."""
        leaf = _leaf(reason)
        if isinstance(leaf, httpx.HTTPStatusError):
            response = leaf.response
            status = response.status_code
            return Broken(TransportFault.UNSPECIFIED, True, f"HTTP {status}", status, dict(response.headers))
        if isinstance(leaf, httpx.HTTPError):
            fault = fault_of(leaf)
            return Broken(fault.fault, fault.may_have_reached and not opening, fault.detail)
        if isinstance(leaf, OSError) and self._config.command is not None:  # the program could not be started
            why = leaf.strerror or str(leaf)
            return Broken(TransportFault.REFUSED, False, f"cannot start {self._config.command[0]}: {why}")
        if isinstance(leaf, MCPError):
            return Broken(TransportFault.UNSPECIFIED, not opening, f"initialize failed: {cap(leaf.error.message)}")
        if leaf is None:
            what = "the server process exited" if self._config.command else "the session ended"
            return Broken(TransportFault.RESET, not opening, what)
        detail = cap(mask_keys(f"{type(leaf).__name__}: {leaf}", self._secrets))
        return Broken(TransportFault.UNSPECIFIED, not opening, detail)


def _retrieved(task: asyncio.Task[_Held]) -> None:
    """An opening nobody waited for to the end: its failure is read here, not reported as unretrieved."""
    if not task.cancelled():
        task.exception()


def _leaf(exc: BaseException | None) -> BaseException | None:
    """The fault inside a task group's ExceptionGroup: an httpx error when there is one, else the first."""
    if not isinstance(exc, BaseExceptionGroup):
        return exc
    leaves: list[BaseException] = []
    stack: list[BaseException] = [exc]
    while stack:
        item = stack.pop()
        if isinstance(item, BaseExceptionGroup):
            stack.extend(reversed(item.exceptions))
        else:
            leaves.append(item)
    for leaf in leaves:
        if isinstance(leaf, httpx.HTTPError):
            return leaf
    return leaves[0] if leaves else exc
