"""A requests limit the fake provider enforces, in fixed windows on a clock the caller gives.

``FakeProvider.limit_requests(limit, clock, window_s=60)``: the first request opens a window of
``window_s``; each request in it takes one of ``limit``; once they are taken, every request is
answered 429 (the wire's ``rate_limit`` preset, ``retry-after`` the seconds to the window's end)
until the window ends. Every answer carries the budget in the wire's own headers
(``Wire.budget_headers``: OpenAI's durations, Anthropic's RFC 3339 times, Azure's counts only).
Given the sidecar's injected clock, the windows turn on the sidecar's own time.
"""

from __future__ import annotations

from dataclasses import dataclass

from sidecar.core.clock import Clock

__all__ = ["RequestLimit", "Taken"]


@dataclass(frozen=True, slots=True)
class Taken:
    """What one request found: whether it got through, what is left, and the seconds to the window's end."""

    allowed: bool
    limit: int
    remaining: int
    reset_s: float


class RequestLimit:
    """``limit`` requests a window (not thread-safe: the provider holds its lock)."""

    __slots__ = ("_clock", "_start", "_used", "limit", "refused", "window_s")

    def __init__(self, limit: int, clock: Clock, window_s: float = 60.0) -> None:
        if limit < 1 or window_s <= 0:
            raise ValueError("a request limit needs limit >= 1 and window_s > 0")
        self.limit = limit
        self.window_s = window_s
        self._clock = clock
        self._start: float | None = None
        self._used = 0
        self.refused = 0
        """Requests answered 429 by the limit."""

    @property
    def clock(self) -> Clock:
        return self._clock

    def take(self) -> Taken:
        now = self._clock.time()
        if self._start is None or now >= self._start + self.window_s:
            self._start, self._used = now, 0
        reset = self._start + self.window_s - now
        if self._used >= self.limit:
            self.refused += 1
            return Taken(False, self.limit, 0, reset)
        self._used += 1
        return Taken(True, self.limit, self.limit - self._used, reset)
