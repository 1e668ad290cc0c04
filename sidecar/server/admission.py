"""The in-flight limit: at most ``server.max_in_flight`` calls that wait on an upstream, at once.

    limited   CallModel, StreamModel, ExecuteTool    a slot from the handler's start to its answer
                                                     (a stream's: to its last event)
              the HTTP doors' calls (MCP tools/call)  ``enter`` / ``leave``: the same slots
    exempt    ListTools, ListModels, ClassifyFailure answer from memory, never wait on an upstream
              grpc.health.v1, reflection             not Sidecar methods: never wrapped

While the process drains (SIGTERM: ``drain()``), a limited call is answered UNAVAILABLE at once
(``refusals.draining``, RetryInfo ``SHED_RETRY_AFTER_S``) and the calls in flight finish; health
answers NOT_SERVING meanwhile (``app.SidecarApp.stop``).

A call past the limit is answered at once, before any work: RESOURCE_EXHAUSTED with a packed
Failure (UPSTREAM_THROTTLE, service ``sidecar``), ErrorInfo and RetryInfo of
``SHED_RETRY_AFTER_S`` (``refusals.overloaded``). Logging is one WARNING for the first call shed,
then at most one line per ``SHED_LOG_WINDOW_S`` counting the calls shed in that window, so that an
overload does not become a flood of log lines on the loop it is overloading.

Why here and not in gRPC: ``grpc.aio.server(maximum_concurrent_rpcs=...)`` counts health checks
too, and gRPC core's own backlog protection (``grpc.server.max_pending_requests``, 1,000 soft and
3,000 hard by default) drops calls the application has not picked up yet as CANCELLED with no
message and no log line: 4,041 of 5,000 simultaneous calls in bench/overload.py. ``app.py`` raises
that backlog above any burst (``PENDING_CALLS_LIMIT``) so that the refusal is this one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from grpc_status import rpc_status

from sidecar.core.clock import Clock
from sidecar.core.taxonomy import SidecarFailure
from sidecar.server.grpc.refusals import draining, overloaded
from sidecar.server.refusals import draining_failure, overloaded_failure

__all__ = ["LIMITED_METHODS", "SHED_LOG_WINDOW_S", "SHED_RETRY_AFTER_S", "Admission", "Behavior", "StreamBehavior"]

LIMITED_METHODS = frozenset({"CallModel", "StreamModel", "ExecuteTool"})
SHED_RETRY_AFTER_S = 1.0
"""The RetryInfo of a shed call: long enough for the calls in flight to move on, short for an agent."""
SHED_LOG_WINDOW_S = 5.0
"""After the first shed call is logged, one line per this many seconds counts the rest."""

Behavior = Callable[[Any, grpc.aio.ServicerContext[Any, Any]], Awaitable[Any]]
StreamBehavior = Callable[[Any, grpc.aio.ServicerContext[Any, Any]], AsyncIterator[Any]]
_log = logging.getLogger("sidecar.server")


class Admission:
    """Counts the limited calls in flight and sheds those past ``limit``."""

    __slots__ = ("_cancel_flush", "_clock", "_idle", "_window_shed", "draining", "in_flight", "limit", "shed")

    def __init__(self, limit: int, clock: Clock) -> None:
        self.limit = limit
        self.in_flight = 0
        self.shed = 0
        """Calls shed since the start."""
        self.draining = False
        """Set by ``drain``: new limited calls are refused, those in flight finish."""
        self._idle: asyncio.Event | None = None
        self._clock = clock
        self._window_shed = 0
        self._cancel_flush: Callable[[], None] | None = None

    def __repr__(self) -> str:
        return f"Admission(in_flight={self.in_flight}, limit={self.limit}, shed={self.shed})"

    def wrap(self, service: str, method: str, behavior: Behavior) -> Behavior:
        """``behavior`` under the limit when ``method`` (of ``service``) is limited; else ``behavior`` itself."""
        if method not in LIMITED_METHODS:
            return behavior
        full = f"{service}/{method}"
        refusal = rpc_status.to_status(overloaded(full, self.limit, SHED_RETRY_AFTER_S))  # built once, sent to each
        leaving = rpc_status.to_status(draining(full, SHED_RETRY_AFTER_S))

        async def admitted(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            if self.draining:
                await context.abort_with_status(leaving)
                raise AssertionError("unreachable: abort_with_status raises")
            if self.in_flight >= self.limit:
                self._record_shed(full)
                await context.abort_with_status(refusal)
                raise AssertionError("unreachable: abort_with_status raises")
            self.in_flight += 1
            try:
                return await behavior(request, context)
            finally:
                self._done()

        return admitted

    def wrap_stream(self, service: str, method: str, behavior: StreamBehavior) -> StreamBehavior:
        """A server-streaming ``behavior`` under the limit: the slot is held until its last event."""
        if method not in LIMITED_METHODS:
            return behavior
        full = f"{service}/{method}"
        refusal = rpc_status.to_status(overloaded(full, self.limit, SHED_RETRY_AFTER_S))
        leaving = rpc_status.to_status(draining(full, SHED_RETRY_AFTER_S))

        async def admitted(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
            if self.draining:
                await context.abort_with_status(leaving)
                raise AssertionError("unreachable: abort_with_status raises")
            if self.in_flight >= self.limit:
                self._record_shed(full)
                await context.abort_with_status(refusal)
                raise AssertionError("unreachable: abort_with_status raises")
            self.in_flight += 1
            try:
                async for event in behavior(request, context):
                    yield event
            finally:
                self._done()

        return admitted

    def enter(self, method: str) -> SidecarFailure | None:
        """A slot for a call of another door (HTTP, MCP): None when taken (``leave`` gives it back), else
        the refusal to answer in the door's own shape: draining, or ``limit`` calls in flight (shed,
        counted and logged as one)."""
        if self.draining:
            return draining_failure(method, SHED_RETRY_AFTER_S)
        if self.in_flight >= self.limit:
            self._record_shed(method)
            return overloaded_failure(method, self.limit, SHED_RETRY_AFTER_S)
        self.in_flight += 1
        return None

    def leave(self) -> None:
        """Give back a slot ``enter`` took."""
        self._done()

    def _record_shed(self, method: str) -> None:
        self.shed += 1
        if self._cancel_flush is not None:  # inside a window: counted, logged when it closes
            self._window_shed += 1
            return
        _log.warning(
            "shed a call to %s: %d calls in flight is the limit (server.max_in_flight); answered "
            "RESOURCE_EXHAUSTED, retry after %g s",
            method,
            self.limit,
            SHED_RETRY_AFTER_S,
            extra={"shed": 1, "max_in_flight": self.limit, "rpc_method": method},
        )
        self._open_window()

    def _open_window(self) -> None:
        self._window_shed = 0
        self._cancel_flush = self._clock.call_at(self._clock.time() + SHED_LOG_WINDOW_S, self._flush)

    def _flush(self) -> None:
        self._cancel_flush = None
        if not self._window_shed:
            return
        _log.warning(
            "shed %d more calls in the last %g s: %d calls in flight is the limit (server.max_in_flight)",
            self._window_shed,
            SHED_LOG_WINDOW_S,
            self.limit,
            extra={"shed": self._window_shed, "max_in_flight": self.limit},
        )
        self._open_window()

    def _done(self) -> None:
        self.in_flight -= 1
        if self._idle is not None and self.in_flight <= 0:
            self._idle.set()

    async def drain(self) -> None:
        """Refuse new limited calls from now on (UNAVAILABLE); return once none is in flight."""
        self.draining = True
        self._idle = asyncio.Event()
        if self.in_flight > 0:
            await self._idle.wait()

    def close(self) -> None:
        """Stop the log window's timer (the server is stopping); a count not yet logged is logged now."""
        if self._cancel_flush is not None:
            cancel, self._cancel_flush = self._cancel_flush, None
            cancel()
            if self._window_shed:
                _log.warning(
                    "shed %d more calls before stopping (server.max_in_flight %d)",
                    self._window_shed,
                    self.limit,
                    extra={"shed": self._window_shed, "max_in_flight": self.limit},
                )
                self._window_shed = 0
