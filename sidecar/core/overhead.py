"""The sidecar's own time in one call: its whole time less the upstream's and the deliberate waits.

    door (gRPC servicer, HTTP port)   with measured("grpc") as watch:   the call's stopwatch, from its arrival
                                      (the HTTP port: began=arrival()   from the request's first bytes read)
    the services                      with joined() as watch:           the door's, or a fresh one (no door)
                                      watch.at_end(report)              report(seconds) when the stopwatch's
                                                                        own block ends (the histogram)
    net.backend (the upstream's       watch.enter() / leave(),          a body's write to the response's head
    HTTP transport), a stream's       with upstream():                  (else aiohttp's send), each wait for a
    exchange, an MCP tool call                                          body chunk; a stream's exchange; an MCP call
    the engine, tools.once            with waiting():                   a backoff, a throttle, a Retry-After pause
    the door, at its answer           watch.seconds()                   x-sidecar-overhead-ms (header, trailer)

The stopwatch lives in a context variable, so a call's tasks (a stream's producer) share it. Time
excluded is counted once however the excluded blocks overlap (a depth, not a sum). It reads
``time.perf_counter``: the sidecar's work is real time even when the injected clock is a fake one
(whose waits then cost nothing, and are excluded all the same).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar, Token
from types import TracebackType

__all__ = ["HEADER", "Stopwatch", "arrival", "arrived", "current", "joined", "measured", "upstream", "waiting"]

HEADER = "x-sidecar-overhead-ms"
"""The answer's header (HTTP) and trailing metadata entry (gRPC): the overhead so far, in milliseconds."""


class Stopwatch:
    """One call's clock: ``seconds()`` is the time since it began, less the time excluded."""

    __slots__ = ("_began", "_depth", "_end", "_excluded", "_now", "_since", "door")

    def __init__(
        self, door: str = "", now: Callable[[], float] = time.perf_counter, began: float | None = None
    ) -> None:
        self._now = now
        self._began = now() if began is None else began
        self._excluded = 0.0
        self._depth = 0
        self._since = 0.0
        self._end: Callable[[float], None] | None = None
        self.door = door

    def at_end(self, report: Callable[[float], None]) -> None:
        """Call ``report(seconds())`` once, when the block that began this stopwatch ends (the door's,
        after its answer went out; a call no door measures: the service's own block)."""
        self._end = report

    def end(self) -> None:
        report, self._end = self._end, None
        if report is not None:
            report(self.seconds())

    def enter(self) -> None:
        if self._depth == 0:
            self._since = self._now()
        self._depth += 1

    def leave(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._excluded += self._now() - self._since

    def seconds(self) -> float:
        now = self._now()
        excluded = self._excluded + (now - self._since if self._depth else 0.0)
        return max(now - self._began - excluded, 0.0)

    def milliseconds(self) -> str:
        """``seconds()`` as the header's value: milliseconds, three decimals."""
        return f"{self.seconds() * 1000:.3f}"


_WATCH: ContextVar[Stopwatch | None] = ContextVar("sidecar_overhead", default=None)


def current() -> Stopwatch | None:
    """The stopwatch of the call running in this context, if one is measured."""
    return _WATCH.get()


class _Measured:
    __slots__ = ("_token", "_watch")

    def __init__(self, watch: Stopwatch | None) -> None:
        self._watch = watch
        self._token: Token[Stopwatch | None] | None = None

    def __enter__(self) -> Stopwatch:
        watch = self._watch
        if watch is None:  # joined() inside a measured call
            existing = _WATCH.get()
            assert existing is not None
            return existing
        self._token = _WATCH.set(watch)
        return watch

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        if self._token is not None:
            _WATCH.reset(self._token)
            self._token = None
            assert self._watch is not None
            self._watch.end()


def measured(door: str, now: Callable[[], float] = time.perf_counter, began: float | None = None) -> _Measured:
    """A new stopwatch for a call arriving at ``door`` (at ``began``, else now), current within the block."""
    return _Measured(Stopwatch(door, now, began))


_ARRIVAL: ContextVar[float | None] = ContextVar("sidecar_arrival", default=None)


def arrived(at: float) -> None:
    """The HTTP server read a request's first bytes at ``at`` (``perf_counter``): the request's task,
    made in this context, begins its stopwatch there (``arrival()``)."""
    _ARRIVAL.set(at)


def arrival() -> float | None:
    """When the HTTP server read this request's first bytes, if it said (``arrived``)."""
    return _ARRIVAL.get()


def joined() -> _Measured:
    """The stopwatch of the door's call, or a new one (a call no door measures) for the block."""
    return _Measured(None if _WATCH.get() is not None else Stopwatch())


class _Excluded:
    __slots__ = ("_watch",)

    def __init__(self) -> None:
        self._watch: Stopwatch | None = None

    def __enter__(self) -> None:
        watch = self._watch = _WATCH.get()
        if watch is not None:
            watch.enter()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        if self._watch is not None:
            self._watch.leave()


def upstream() -> _Excluded:
    """A block of upstream time (an attempt's request sent, its response read): not the sidecar's."""
    return _Excluded()


def waiting() -> _Excluded:
    """A block of deliberate waiting (a backoff, a throttle's slot, a Retry-After pause): not the sidecar's."""
    return _Excluded()
