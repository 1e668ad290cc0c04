"""aiolimiter's leaky bucket, on the injected clock, with a window that can stretch.

A throttle stretches the refill window to ``(1 + throttle) x`` the base window; the bucket's
capacity (the burst) stays. ``wait_time`` tells how long an acquisition would wait now.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiolimiter import AsyncLimiter

from sidecar.core.clock import Clock

__all__ = ["StretchLimiter"]

_EPSILON = 1e-9
"""Waits shorter than this are float noise, not capacity still owed."""


class _ClockLoop:
    """The three loop methods AsyncLimiter uses, answered by the injected clock."""

    __slots__ = ("_clock",)

    def __init__(self, clock: Clock) -> None:
        self._clock = clock

    def time(self) -> float:
        return self._clock.time()

    def create_future(self) -> asyncio.Future[None]:
        return asyncio.get_running_loop().create_future()

    def call_soon(self, callback: Callable[..., object], *args: object) -> asyncio.Handle:
        return asyncio.get_running_loop().call_soon(callback, *args)

    def call_at(self, when: float, callback: Callable[[], object]) -> _Cancel:
        loop = asyncio.get_running_loop()

        def fire() -> None:
            loop.call_soon(callback)

        return _Cancel(self._clock.call_at(when, fire))

    def is_closed(self) -> bool:
        return False


class _Cancel:
    __slots__ = ("_cancel", "_cancelled")

    def __init__(self, cancel: Callable[[], None]) -> None:
        self._cancel = cancel
        self._cancelled = False

    def cancel(self) -> None:
        self._cancelled = True
        self._cancel()

    def cancelled(self) -> bool:
        return self._cancelled

    def when(self) -> float:
        return 0.0


class StretchLimiter(AsyncLimiter):
    """A leaky bucket of ``rate`` per ``period`` seconds whose period stretches under a throttle.

    It reaches into aiolimiter 1.x (``_leak``, ``_level``, ``_rate_per_sec``, ``_wake_next``,
    ``_event_loop``); the dependency is pinned below 2 and tests/test_limiter.py pins that surface.
    """

    __slots__ = ("_clock", "base_period", "factor")

    def __init__(self, rate: float, period: float, clock: Clock) -> None:
        super().__init__(rate, period)
        self._clock = clock
        self.base_period = period
        self.factor = 1.0

    @property
    def _loop(self) -> asyncio.AbstractEventLoop:
        try:
            return self._event_loop
        except AttributeError:
            loop = _ClockLoop(self._clock)
            self._event_loop = loop  # type: ignore[assignment]
            return loop  # type: ignore[return-value]

    def stretch(self, factor: float) -> None:
        """Set the window to ``factor`` x the base window (level drained at the old rate first)."""
        if factor == self.factor:
            return
        self._leak()
        self.factor = factor
        self.time_period = self.base_period * factor
        self._rate_per_sec = self.max_rate / self.time_period
        self._wake_next()

    async def take(self, amount: float = 1) -> float:
        """Take ``amount`` from the bucket, sleeping on the injected clock until it has room.

        Waiting on the clock (rather than on aiolimiter's own timer) keeps virtual time exact in
        tests; between the last check and the acquisition nothing else runs, so it never waits twice.
        Returns the seconds waited.
        """
        waited = 0.0
        while (wait := self.wait_time(amount)) > _EPSILON:
            await self._clock.sleep(wait)
            waited += wait
        if not self.has_capacity(amount):  # only float noise is left after the wait
            self._level = self.max_rate - amount
        await self.acquire(amount)
        return waited

    def wait_time(self, amount: float = 1) -> float:
        """Seconds an acquisition of ``amount`` would wait now (0 when capacity is free)."""
        self._leak()
        needed = amount - self.max_rate + self._level
        return max(needed / self._rate_per_sec, 0.0)
