"""The HTTP port's connections: a time limit on each part of a request the client sends, a timeout for
idle ones, and a cap on how many are open (``http.connections``).

    phase      from                               until                         limit
    idle       accepted, or its last answer sent  the first byte of a request   idle_timeout_s
    head       the first byte of a request        its head read whole           head_timeout_s
    body       its head read                      its body read whole           body_timeout_s
    answering  its body read whole                its answer's last byte        none: a stream may last hours

A connection past its phase's limit is closed, with no answer: its request never arrived whole, so
no door has it to answer (a body cut short reaches the door as the caller leaving). An answer is
never cut, and the time a client takes to read it is not timed (``hosting._Stamped`` tells the
phases from h11's states).

The cap: a connection accepted past ``max_connections`` closes the one idle longest; with none idle,
the one whose head has been arriving longest; with neither, itself, at once (every open one is
reading or answering a request, which is never cut for a new one). The client of a closed new
connection sees it closed before any answer, as at gRPC's ``max_connections`` (an SDK retries it as
a connection error).

Every close is counted (``closed``: ``sidecar_http_connections_closed_total{reason}``) and logged: the
first of each reason at once, then at most one line per ``LOG_WINDOW_S`` counting the rest, so a
flood of slow clients is not a flood of log lines.

The limits run on the event loop's time, checked every tenth of the shortest limit (at most every
``TICK_MAX_S``): a connection is closed at most that long past its limit. A TLS handshake happens
before a connection is seen here; asyncio gives it 60 s.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from sidecar.config import HttpConnectionsConfig

__all__ = ["LOG_WINDOW_S", "REASONS", "TICK_MAX_S", "Connection", "Connections", "Phase"]

LOG_WINDOW_S = 60.0
"""After a reason's first close is logged, one line per this many seconds counts the rest."""
TICK_MAX_S = 1.0
"""The longest wait between two checks of the limits."""
TICK_MIN_S = 0.05
_log = logging.getLogger("sidecar.server")


class Phase(enum.Enum):
    IDLE = "idle"
    HEAD = "head"
    BODY = "body"
    ANSWERING = "answering"
    CLOSED = "closed"


REASONS = ("idle_timeout", "head_timeout", "body_timeout", "evicted", "refused")
"""Why a connection was closed: the metric's label values, each a line of the log."""
_TIMEOUT = {Phase.IDLE: "idle_timeout", Phase.HEAD: "head_timeout", Phase.BODY: "body_timeout"}
_SAID = {
    "idle_timeout": "the HTTP port closed {n} connection(s) idle for {limit:g} s (http.connections.idle_timeout_s)",
    "head_timeout": (
        "the HTTP port closed {n} connection(s) whose request head did not arrive whole within {limit:g} s "
        "(http.connections.head_timeout_s)"
    ),
    "body_timeout": (
        "the HTTP port closed {n} connection(s) whose request body did not arrive whole within {limit:g} s "
        "of its head (http.connections.body_timeout_s)"
    ),
    "evicted": (
        "the HTTP port closed {n} connection(s), idle or still sending a request head, for new ones past "
        "http.connections.max_connections ({cap})"
    ),
    "refused": (
        "the HTTP port closed {n} new connection(s) at once: http.connections.max_connections ({cap}) were "
        "open, each reading or answering a request"
    ),
}
"""Each reason's log line; after the first, ``n`` counts the closes since the one before."""


@dataclass(eq=False, slots=True)
class Connection:
    """One accepted connection, as the limits see it."""

    transport: asyncio.BaseTransport
    phase: Phase = Phase.IDLE
    since: float = 0.0
    """When it entered its phase (the event loop's time)."""


@dataclass(slots=True)
class _Tally:
    """A reason's closes not logged yet, and when its last line was written."""

    count: int = 0
    logged: float = -math.inf


class Connections:
    """The open connections of one HTTP port, by phase, oldest first; the limits of the module docstring."""

    def __init__(
        self,
        limits: HttpConnectionsConfig,
        *,
        closed: Callable[[str], None] | None = None,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits
        self._closed = closed
        self._now = now
        self._waits = {Phase.IDLE: limits.idle_timeout_s, Phase.HEAD: limits.head_timeout_s}
        self._waits[Phase.BODY] = limits.body_timeout_s
        self._open: dict[Phase, dict[Connection, None]] = {p: {} for p in Phase if p is not Phase.CLOSED}
        self._tallies = {reason: _Tally() for reason in REASONS}
        self._timer: asyncio.TimerHandle | None = None
        self.tick_s = min(max(min(self._waits.values()) / 10, TICK_MIN_S), TICK_MAX_S)

    def __len__(self) -> int:
        return sum(map(len, self._open.values()))

    def count(self, phase: Phase) -> int:
        return len(self._open[phase]) if phase is not Phase.CLOSED else 0

    def opened(self, transport: asyncio.BaseTransport) -> Connection:
        """A connection just accepted, idle; past the cap another, or this one, is closed."""
        new = Connection(transport, Phase.IDLE, self._now())
        self._open[Phase.IDLE][new] = None
        if len(self) > self.limits.max_connections:
            victim = next((c for c in self._open[Phase.IDLE] if c is not new), None)
            victim = victim or next(iter(self._open[Phase.HEAD]), None)
            if victim is not None:
                self._close(victim, "evicted")
            else:
                self._close(new, "refused")
        return new

    def enter(self, conn: Connection, phase: Phase) -> None:
        """``conn`` is now in ``phase`` (its time there counted from now, unless it was already in it)."""
        if conn.phase is phase or conn.phase is Phase.CLOSED:
            return
        del self._open[conn.phase][conn]
        conn.phase, conn.since = phase, self._now()
        self._open[phase][conn] = None

    def lost(self, conn: Connection) -> None:
        """``conn`` is closed (by either side)."""
        if conn.phase is not Phase.CLOSED:
            del self._open[conn.phase][conn]
            conn.phase = Phase.CLOSED

    def expire(self) -> None:
        """Close every connection past its phase's limit; write the log lines that are due."""
        now = self._now()
        for phase, wait in self._waits.items():
            waiting = self._open[phase]
            while waiting:
                oldest = next(iter(waiting))
                if oldest.since + wait > now:
                    break  # the rest of the phase came later
                self._close(oldest, _TIMEOUT[phase])
        for reason, tally in self._tallies.items():
            if tally.count and now - tally.logged >= LOG_WINDOW_S:
                self._report(reason, tally, now)

    def start(self) -> None:
        """Check the limits every ``tick_s`` on the running loop, until ``stop``."""
        loop = asyncio.get_running_loop()

        def tick() -> None:
            self.expire()
            self._timer = loop.call_later(self.tick_s, tick)

        self._timer = loop.call_later(self.tick_s, tick)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _close(self, conn: Connection, reason: str) -> None:
        self.lost(conn)
        conn.transport.close()
        if self._closed is not None:
            self._closed(reason)
        tally = self._tallies[reason]
        tally.count += 1
        now = self._now()
        if now - tally.logged >= LOG_WINDOW_S:
            self._report(reason, tally, now)

    def _report(self, reason: str, tally: _Tally, now: float) -> None:
        """One line for ``reason``: INFO for idle connections (a client's pool left open), WARNING for the rest."""
        limit = next((self._waits[p] for p, r in _TIMEOUT.items() if r == reason), 0.0)
        said = _SAID[reason].format(n=tally.count, limit=limit, cap=self.limits.max_connections)
        level = logging.INFO if reason == "idle_timeout" else logging.WARNING
        _log.log(level, "%s", said, extra={"closed": tally.count, "reason": reason})
        tally.count, tally.logged = 0, now
