"""Time, injected: every wait, window, circuit and deadline reads this clock.

``RealClock`` is the event loop's monotonic time (``time.monotonic``, which asyncio's loop reads).
``FakeClock`` is virtual time for tests:
``sleep`` advances it at once (recording the wait), ``advance`` moves it by hand, and timers
set through ``call_at`` fire as it passes them (``timers`` says which are set), so waits are tested
exactly and instantly.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["Clock", "FakeClock", "RealClock"]


class Clock(Protocol):
    def time(self) -> float:
        """Monotonic seconds."""

    def wall(self) -> datetime:
        """The wall-clock time now (UTC)."""

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds``; cancellable."""

    def call_at(self, when: float, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` at monotonic time ``when``; returns a canceller."""


class RealClock:
    __slots__ = ()

    def time(self) -> float:
        # the event loop's own clock (asyncio's ``BaseEventLoop.time`` is ``time.monotonic()``), read
        # without ``asyncio.get_running_loop()``: on Python 3.11 that asks the kernel for the pid each
        # time, and a call reads the clock a dozen times (py-spy: getpid 1.7 % of a CallModel's samples)
        return time.monotonic()

    def wall(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0.0))

    def call_at(self, when: float, callback: Callable[[], None]) -> Callable[[], None]:
        handle = asyncio.get_running_loop().call_at(when, callback)
        return handle.cancel


class FakeClock:
    """Virtual time. ``sleeps`` lists every wait asked for, in order."""

    __slots__ = ("_count", "_start_wall", "_timers", "now", "sleeps")

    def __init__(self, start: float = 1000.0, wall: datetime | None = None) -> None:
        self.now = start
        self._start_wall = (wall or datetime(2026, 1, 1, tzinfo=UTC)) - timedelta(seconds=start)
        self.sleeps: list[float] = []
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._count = itertools.count()

    def time(self) -> float:
        return self.now

    def wall(self) -> datetime:
        return self._start_wall + timedelta(seconds=self.now)

    async def sleep(self, seconds: float) -> None:
        seconds = max(seconds, 0.0)
        self.sleeps.append(seconds)
        self.advance(seconds)
        await asyncio.sleep(0)

    def advance(self, seconds: float) -> None:
        target = self.now + seconds
        while self._timers and self._timers[0][0] <= target:
            when, _, callback = heapq.heappop(self._timers)
            self.now = max(self.now, when)
            callback()
        self.now = target

    @property
    def timers(self) -> list[float]:
        """When each timer set through ``call_at``, not yet fired nor cancelled, falls due (soonest first):
        a test waits for the waiter's timer to be set before it advances the clock past it."""
        return sorted(when for when, _, _ in self._timers)

    def call_at(self, when: float, callback: Callable[[], None]) -> Callable[[], None]:
        entry = (when, next(self._count), callback)
        heapq.heappush(self._timers, entry)

        def cancel() -> None:
            if entry in self._timers:
                self._timers.remove(entry)
                heapq.heapify(self._timers)

        return cancel
