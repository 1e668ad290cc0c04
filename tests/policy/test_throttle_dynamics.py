"""How the model throttle behaves over time: a simulated upstream on the fake clock, no HTTP.

N callers in a closed loop each send, wait for the answer (a round trip of LATENCY_S ± 20 %),
and send again at once (Retry-After: 0, as in the benchmark's fault mix). The upstream answers a
seeded 20 % of the attempts with 429 (or, in the last test, every attempt past a real limit).
The driver moves the fake clock from event to event, and every caller takes its slot from the
throttle exactly when the slot comes, so time is exact. The unthrottled reference is the same
run with the 429s not signalled to the throttle.

Stated and asserted here:

- F: under a constant 20 % of 429s the successes per second settle at >= SETTLED_SHARE (50 %) of
  the unthrottled successes per second, for every concurrency from 1 to 256 callers (measured:
  61-88 %, lower as the concurrency grows);
- T: after the faults stop, the pacing is back within 5 % of the unthrottled rate within
  RECOVERY_S (10 s = 10 round trips; measured: at most 2.5 s), and so is the throughput after it;
- under a real limit at half the demand the throttle keeps the successes at the limit and sends
  at most half the 429s the unthrottled callers meet.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import random
from dataclasses import dataclass, field

import pytest

from sidecar.core.clock import FakeClock
from sidecar.core.kinds import RetrySignal
from sidecar.core.model_throttle import ModelThrottle, Ticket

LATENCY_S = 1.0
"""The simulated upstream's mean round trip."""
FAULT_SHARE = 0.2
SETTLE_S = 60.0
"""Faults from the start; the settled throughput is measured from here ..."""
FAULTS_END_S = 200.0
"""... to here, when the faults stop."""
SETTLED_SHARE = 0.5
"""F: the settled throughput under the faults, as a share of the unthrottled throughput, at least."""
RECOVERY_S = 10.0
"""T: after the faults stop, back within 5 % of the unthrottled rate within this many seconds."""
WITHIN = 0.05
MEASURE_S = 30.0
"""The throughput after the recovery is measured over this long."""


@dataclass
class Run:
    successes: list[float] = field(default_factory=list)
    limited: list[float] = field(default_factory=list)
    shares: list[tuple[float, float]] = field(default_factory=list)
    """(time, 1 / (1 + throttle)) after every answer."""

    def rate(self, start: float, end: float) -> float:
        return sum(start <= t < end for t in self.successes) / (end - start)

    def share_back(self, since: float) -> float:
        """The first time after ``since`` from which the pacing share stays within 5 % of 1."""
        back = since
        for t, share in self.shares:
            if t >= since and share < 1 - WITHIN:
                back = t
        return back - since


_runs: dict[tuple[int, bool, int], Run] = {}


async def simulate(callers: int, *, throttled: bool = True, limit: int = 0, seed: int = 7) -> Run:
    """One run (cached: the tests of F and T read the same runs). ``limit``: 429 past that many a second."""
    key = (callers, throttled, limit)
    if key not in _runs:
        _runs[key] = await _simulate(callers, throttled, limit, seed)
    return _runs[key]


async def _simulate(callers: int, throttled: bool, limit: int, seed: int) -> Run:
    clock = FakeClock(start=0.0)
    throttle = ModelThrottle("m", clock)
    rng = random.Random(seed)
    events: list[tuple[float, int, str, Ticket]] = []
    order = itertools.count()
    run = Run()
    accepted: collections.deque[float] = collections.deque()  # for a real limit: the last second's

    def reserve() -> None:
        ticket = throttle.reserve()
        heapq.heappush(events, (ticket.at, next(order), "send", ticket))

    for _ in range(callers):
        reserve()
    end = FAULTS_END_S + RECOVERY_S + MEASURE_S
    while events and events[0][0] < end:
        when, _, kind, ticket = heapq.heappop(events)
        clock.advance(when - clock.now)
        if kind == "send":
            await throttle.wait(ticket)  # the slot is now: no sleep
            assert clock.sleeps == []
            if limit:
                while accepted and accepted[0] <= clock.now - 1.0:
                    accepted.popleft()
                fault = len(accepted) >= limit
                if not fault:
                    accepted.append(clock.now)
            else:
                fault = clock.now < FAULTS_END_S and rng.random() < FAULT_SHARE
            latency = LATENCY_S * rng.uniform(0.8, 1.2)
            heapq.heappush(events, (clock.now + latency, next(order), "429" if fault else "200", ticket))
            continue
        if kind == "429" and throttled:
            throttle.signal(ticket, RetrySignal.RATE_LIMIT, None)
        else:
            throttle.success(ticket)
        (run.successes if kind == "200" else run.limited).append(clock.now)
        run.shares.append((clock.now, 1 / (1 + throttle.throttle)))
        reserve()
    return run


CALLERS = [1, 4, 16, 64, 256]


@pytest.mark.parametrize("callers", CALLERS)
async def test_a_constant_fault_mix_settles_at_a_stated_share_of_the_unthrottled_rate(callers: int) -> None:
    throttled = await simulate(callers)
    unthrottled = await simulate(callers, throttled=False)
    settled = throttled.rate(SETTLE_S, FAULTS_END_S)
    reference = unthrottled.rate(SETTLE_S, FAULTS_END_S)
    assert settled >= SETTLED_SHARE * reference


@pytest.mark.parametrize("callers", CALLERS)
async def test_once_the_faults_stop_the_rate_is_back_within_a_stated_time(callers: int) -> None:
    run = await simulate(callers)
    unthrottled = await simulate(callers, throttled=False)
    back = run.share_back(FAULTS_END_S)
    after = FAULTS_END_S + RECOVERY_S
    assert back <= RECOVERY_S
    assert run.rate(after, after + MEASURE_S) >= (1 - WITHIN) * unthrottled.rate(after, after + MEASURE_S)


async def test_under_a_real_limit_it_holds_the_limit_with_half_the_429s() -> None:
    callers, limit = 64, 32  # a demand of 64 calls a second against a limit of 32
    throttled = await simulate(callers, limit=limit)
    unthrottled = await simulate(callers, throttled=False, limit=limit)

    def share_limited(run: Run) -> float:
        limited = sum(SETTLE_S <= t < FAULTS_END_S for t in run.limited)
        return limited / (limited + run.rate(SETTLE_S, FAULTS_END_S) * (FAULTS_END_S - SETTLE_S))

    assert throttled.rate(SETTLE_S, FAULTS_END_S) >= 0.9 * limit
    assert share_limited(throttled) <= 0.5 * share_limited(unthrottled)
