"""A pacer that hands out send slots: a leaky bucket by virtual scheduling (GCRA), on the injected clock.

State is one number, the theoretical arrival time ``tat``: when the bucket would be empty if
nothing more came. With ``interval`` seconds per token (``per_s / rate``, times the stretch
factor) and a capacity of ``burst`` tokens::

    level(t)            = max(tat - t, 0) / interval                 tokens in the bucket at t
    slot(cost, nb)      = max(now, nb, tat - (burst - cost) x interval)   the first time cost fits
    reserve(cost, ...)  at = slot(...);  tat = max(tat, at) + cost x interval
    stretch(f)          interval = base x f; what is in the bucket stays, drained at the new rate
                        (the time past an anchor, max(now, the last not-before), is rescaled)

- Each admission *reserves* its slot, so a caller knows at once when it may go, counting everyone
  queued ahead of it; a slot past the caller's ``deadline`` is refused at once (``Overdue``) and
  nothing is reserved.
- A reservation is a promise: stretching the window changes the slots handed out after it, not it.
- A cancelled waiter gives its slot back when it can: at once if it was the last one booked,
  else when everyone booked after it has given theirs back too (their slots are promised).
- A cost above the capacity is charged as the capacity (it could never fit otherwise).
- Waits shorter than ``EPSILON`` are float noise: the slot is now.
- ``rate = math.inf`` is no pacing at all: every slot is now (or its not-before), and booking
  one holds no one else back.
"""

from __future__ import annotations

import math
from collections import deque

from sidecar.core.clock import Clock

__all__ = ["EPSILON", "Overdue", "Pacer", "Reservation"]

EPSILON = 1e-9
"""Seconds: a wait shorter than this is float noise, not capacity still owed."""


class Overdue(Exception):
    """The slot a caller would get starts after its deadline: refused, nothing reserved.

    ``wait`` is the seconds from now until that slot; ``reason`` says what holds the caller back.
    """

    def __init__(self, wait: float, reason: str = "the pacer is full") -> None:
        super().__init__(f"{reason} for {wait:.3f} s")
        self.wait = wait
        self.reason = reason


class Reservation:
    """One booked slot: go at ``at`` (monotonic seconds). ``tat_before`` restores the bucket on a give-back."""

    __slots__ = ("at", "cost", "released", "tat_before")

    def __init__(self, at: float, cost: float, tat_before: float) -> None:
        self.at = at
        self.cost = cost
        self.tat_before = tat_before
        self.released = False

    def __repr__(self) -> str:
        return f"<Reservation at={self.at:.6f} cost={self.cost:g}{' released' if self.released else ''}>"


class Pacer:
    """``rate`` tokens per ``per_s`` seconds, at most ``burst`` at once (default: ``rate``), stretchable."""

    __slots__ = ("_anchor", "_base_interval", "_booked", "_clock", "_factor", "_interval", "_tat", "burst")

    def __init__(self, rate: float, per_s: float, clock: Clock, burst: float | None = None) -> None:
        if not rate > 0 or not per_s > 0:
            raise ValueError(f"a pacer needs a positive rate and period, not {rate} per {per_s} s")
        self._clock = clock
        self.burst = max(float(burst if burst is not None else (rate if math.isfinite(rate) else 1.0)), 1.0)
        self._base_interval = per_s / rate
        self._factor = 1.0
        self._interval = self._base_interval
        self._tat = -math.inf
        self._anchor = -math.inf
        self._booked: deque[Reservation] = deque()

    def __repr__(self) -> str:
        rate = 1 / self._interval if self._interval > 0 else math.inf
        return (
            f"<Pacer {rate:.4g}/s (x{self._factor:g}) burst={self.burst:g} "
            f"level={self.level():.3f} booked={len(self._booked)}>"
        )

    @property
    def interval(self) -> float:
        """Seconds per token, stretched."""
        return self._interval

    @property
    def rate(self) -> float:
        """Tokens per second, stretched (``math.inf`` when unpaced)."""
        return 1 / self._interval if self._interval > 0 else math.inf

    def level(self) -> float:
        """Tokens in the bucket now."""
        if self._interval == 0:
            return 0.0
        return max(self._tat - self._clock.time(), 0.0) / self._interval

    def slot(self, cost: float = 1.0, not_before: float = 0.0) -> float:
        """The first time ``cost`` tokens fit, not before ``not_before`` (nothing is reserved)."""
        now = self._clock.time()
        cost = min(cost, self.burst)
        at = max(now, not_before, self._tat - (self.burst - cost) * self._interval)
        return now if at - now <= EPSILON else at

    def wait_time(self, cost: float = 1.0) -> float:
        """Seconds a reservation of ``cost`` would wait now."""
        return self.slot(cost) - self._clock.time()

    def reserve(self, cost: float = 1.0, *, deadline: float | None = None, not_before: float = 0.0) -> Reservation:
        """Book the first slot for ``cost`` tokens; ``Overdue`` at once if it starts after ``deadline``."""
        at = self.slot(cost, not_before)
        if deadline is not None and at > deadline + EPSILON:
            raise Overdue(at - self._clock.time())
        cost = min(cost, self.burst)
        now = self._clock.time()
        while self._booked and self._booked[0].at <= now:  # slots already due cannot be given back
            self._booked.popleft()
        booking = Reservation(at, cost, self._tat)
        if self._interval > 0:  # an unpaced bucket holds nothing (and holds no one back)
            self._tat = max(self._tat, at) + cost * self._interval
            self._booked.append(booking)
            if not_before > now:
                self._anchor = max(self._anchor, not_before)
        return booking

    def release(self, booking: Reservation) -> None:
        """Give a slot that will not be used back (at once when it is the last booked, else later)."""
        booking.released = True
        while self._booked and self._booked[-1].released:
            self._tat = self._booked.pop().tat_before

    async def wait(self, booking: Reservation) -> None:
        """Sleep on the clock until the booked slot; a cancelled waiter gives its slot back."""
        try:
            while (left := booking.at - self._clock.time()) > EPSILON:
                await self._clock.sleep(left)
        except BaseException:
            self.release(booking)
            raise

    def stretch(self, factor: float) -> None:
        """The window is ``factor`` x the base window from now on (the bucket's content stays)."""
        if factor != self._factor:
            self._factor = factor
            self._retime(self._base_interval * factor)

    def rebase(self, rate: float, per_s: float = 1.0, *, burst: float | None = None) -> None:
        """A new base rate (``math.inf``: unpaced), still stretched by the current factor; a new
        capacity when ``burst`` is given (at least 1)."""
        if not rate > 0:
            raise ValueError(f"a pacer needs a positive rate, not {rate}")
        if burst is not None:
            self.burst = max(float(burst), 1.0)
        base = per_s / rate
        if base != self._base_interval:
            self._base_interval = base
            self._retime(base * self._factor)

    def _retime(self, interval: float) -> None:
        old, self._interval = self._interval, interval
        if old in (interval, 0.0):  # an unpaced bucket holds nothing to rescale
            return
        anchor = max(self._clock.time(), self._anchor)
        scale = interval / old

        def rescale(t: float) -> float:
            return t if t <= anchor else anchor + (t - anchor) * scale

        self._tat = rescale(self._tat)
        for booking in self._booked:
            booking.tat_before = rescale(booking.tat_before)
        if interval == 0:
            self._booked.clear()
