"""Hedging's policy, no I/O: when a route sends the same request to its next deployment (docs/routing.md#hedging).

    Hedge            a route's ``hedge_after_s`` (fixed seconds) or ``hedge_after: pNN`` (a percentile)
    FirstTokens      one deployment's observed times to first token: the last FIRST_TOKEN_WINDOW of them
    Hedge.delay      the seconds after a hop's start at which it is hedged, or None (no hedge this call)

A percentile reads the deployment's window; with fewer than MIN_SAMPLES times in it there is no hedge
(a guess would double the calls of a cold deployment, and a floor would be a number nobody measured).
A time is a hop's start to its first token (a stream's first delta; a whole reply for a non-streamed
call, which shows no token before it is whole); a hop that lost a race adds the time it had waited when
cancelled, a lower bound, so that the slow tail the hedges cut off still weighs on the percentile.
"""

from __future__ import annotations

import math
import re
from collections import deque
from dataclasses import dataclass

__all__ = ["FIRST_TOKEN_WINDOW", "MIN_SAMPLES", "PERCENTILE", "FirstTokens", "Hedge", "percentile_of"]

FIRST_TOKEN_WINDOW = 200
"""The times to first token a deployment keeps for a percentile: the latest ones, the older dropped."""
MIN_SAMPLES = 20
"""A percentile needs this many times in the window; below it, no hedge."""
PERCENTILE = re.compile(r"p(\d{1,2}(?:\.\d{1,3})?)")
"""``hedge_after``'s spelling: ``p50`` .. ``p99.9`` (a percentile of the deployment's times to first token)."""


@dataclass(frozen=True, slots=True)
class Hedge:
    """A route's hedge: ``after_s`` seconds, or the ``percentile`` of the hedged deployment's times."""

    after_s: float | None = None
    percentile: float | None = None

    def delay(self, times: FirstTokens | None) -> float | None:
        """Seconds after the hop's start to hedge it, or None: no hedge for this call."""
        if self.after_s is not None:
            return self.after_s
        if self.percentile is None or times is None:
            return None
        return times.percentile(self.percentile)

    def describe(self) -> str:
        return f"{self.after_s:g} s" if self.after_s is not None else f"p{self.percentile:g}"


class FirstTokens:
    """One deployment's observed times to first token, the last FIRST_TOKEN_WINDOW of them."""

    __slots__ = ("_times",)

    def __init__(self, window: int = FIRST_TOKEN_WINDOW) -> None:
        self._times: deque[float] = deque(maxlen=window)

    def __len__(self) -> int:
        return len(self._times)

    def add(self, seconds: float) -> None:
        self._times.append(max(seconds, 0.0))

    def percentile(self, p: float) -> float | None:
        """The nearest-rank ``p``-th percentile of the window, or None with fewer than MIN_SAMPLES."""
        if len(self._times) < MIN_SAMPLES:
            return None
        ordered = sorted(self._times)
        rank = max(1, math.ceil(p / 100 * len(ordered)))
        return ordered[rank - 1]


def percentile_of(spelled: str) -> float | None:
    """``p95`` -> 95.0; None when it is not a percentile between 0 and 100 (exclusive)."""
    match = PERCENTILE.fullmatch(spelled)
    if match is None:
        return None
    p = float(match.group(1))
    return p if 0 < p < 100 else None
