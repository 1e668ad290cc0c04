"""The one retry engine: every upstream attempt of the sidecar runs through ``run_attempts``.

A model call, a tool call, a streamed model call and each hop of a failover chain give it a
``Sender`` (what one attempt is) and a ``Pacer`` (who may send, and when); the engine owns the
rest: the budget, the windows, Retry-After, the deadline, the waits and the attempt spans::

    for every attempt (numbered across the whole call: corrections and re-runs included)
        admission = pacer.admit(deadline)       refuses at once what cannot fit (JOB_TIMEOUT, CIRCUIT_OPEN)
        await admission.ready()                 a throttle wait (its own wait span) when there is one
        with observer.attempt(...) as record:   one attempt, one span, ended in this block
            with record.active():               the attempt is current while it is sent
                outcome = await sender.send(attempt)
            admission.settle(outcome)           the throttle / circuit learns what the attempt saw (its
                                                events belong to the call, not to the attempt)
            Done(value)  -> return value
            Fail(failure) -> raise failure
            Retry(signal, retry_after)          -> the next wait, below, or give up
        with observer.wait(BACKOFF): await clock.sleep(wait)

The next wait, for the call's retry r (1-based; all signals draw on one budget per call)::

    r > budget                                   -> give_up.exhausted(retry)
    Retry-After asked for and > max_wait_s       -> give_up.too_long(retry)
    wait = Retry-After,                             when the upstream asked for a usable one
         = uniform(window.min_s, window.max_s) x min(r, factor_cap), at most max_wait_s, otherwise
           (window = the signal's: rate_limit, overload or transient)
    now + wait > deadline                        -> give_up.past_deadline(retry, wait, left)

What giving up means differs by caller (a model call fails with UPSTREAM_RETRIES_EXHAUSTED or
JOB_TIMEOUT; a tool reports its last failure as it is): ``GiveUp`` says it. A cancellation at
any point releases the admission (charged to no one) and ends the open span with the reason.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from sidecar.core import overhead
from sidecar.core.backoff import signal_window, window_wait
from sidecar.core.clock import Clock
from sidecar.core.details import HttpInfo, Trigger
from sidecar.core.kinds import RetrySignal
from sidecar.core.observer import AttemptRecord, AttemptStart, Observer, Retried, Target, WaitKind, WaitStart
from sidecar.core.settings import Windows
from sidecar.core.taxonomy import SidecarFailure

__all__ = [
    "MAX_UPSTREAM_RETRIES",
    "Admission",
    "Attempt",
    "Done",
    "Fail",
    "GiveUp",
    "Outcome",
    "Pacer",
    "Retry",
    "RetryPolicy",
    "Sender",
    "Tally",
    "run_attempts",
]

T = TypeVar("T")

MAX_UPSTREAM_RETRIES = 100
"""The most upstream retries a call may ask for (``job.upstream_retries``); the config allows no more."""


@dataclass(frozen=True, slots=True)
class Done(Generic[T]):
    """The attempt produced what the caller wanted."""

    value: T


@dataclass(frozen=True, slots=True)
class Fail:
    """The attempt failed in a way no wait fixes."""

    failure: SidecarFailure
    trigger: Trigger | None = None
    """The response to charge a service's circuit with, when the failure is the service's."""
    answered: bool = False
    """Whether the upstream answered at all (a probe it answered proves it is up)."""
    instead_of: Retry | None = None
    """The Retry this failure stands in for (a mid-stream fault under the ``fail`` policy): the
    pacer still hears its signal, so an overload mid-stream slows the model as one before it does."""


@dataclass(frozen=True, slots=True)
class Retry:
    """Nobody's mistake: wait and send again, within the budget."""

    signal: RetrySignal
    detail: str
    retry_after: float | None = None
    """Seconds the upstream asked us to wait, when it asked for a usable amount."""
    http: HttpInfo | None = None
    failure: SidecarFailure | None = None
    """What this attempt means if it turns out to be the last (a tool reports it as it is)."""
    trigger: Trigger | None = None
    """The response to charge a service's circuit with."""


Outcome = Done[T] | Fail | Retry


@dataclass(slots=True)
class Tally:
    """What one call has spent, across every run of the engine it makes (corrections, re-runs, hops)."""

    budget: int
    """Upstream retries this call may make, all signals together."""
    attempts: int = 0
    retries: int = 0

    @property
    def spent(self) -> bool:
        return self.retries >= self.budget


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt, as its sender sees it."""

    number: int
    record: AttemptRecord
    deadline: float | None
    clock: Clock

    def timeout(self, limit: float) -> float:
        """``limit`` seconds, clipped to what is left before the deadline (never below a millisecond)."""
        if self.deadline is None:
            return limit
        return max(min(limit, self.deadline - self.clock.time()), 0.001)

    def clipped(self, limit: float) -> bool:
        """Whether the deadline, not ``limit``, bounds this attempt's wait for an answer."""
        return self.deadline is not None and self.deadline - self.clock.time() < limit


class Sender(Protocol[T]):
    """One kind of attempt: how to describe it (for its span) and how to send it."""

    def describe(self, number: int) -> AttemptStart: ...

    async def send(self, attempt: Attempt) -> Done[T] | Fail | Retry: ...


class Admission(Protocol):
    """Leave to send one attempt: waited for, then told the outcome exactly once."""

    @property
    def wait_s(self) -> float:
        """Seconds until the attempt may go (0: now)."""

    @property
    def throttle(self) -> float:
        """The throttle in force, for the wait's span."""

    async def ready(self) -> None:
        """Wait until the attempt may go."""

    def settle(self, outcome: Done[Any] | Fail | Retry) -> None:
        """What the attempt saw (success, a failure to charge, a signal)."""

    def release(self) -> None:
        """No verdict (cancelled, or a bug): charged to no one."""


class Pacer(Protocol):
    """Who may send and when: a model's throttle, a service's throttle and circuit."""

    @property
    def target(self) -> Target: ...

    @property
    def name(self) -> str: ...

    def admit(self, deadline: float | None) -> Admission:
        """Leave for one attempt, or a failure raised at once (CIRCUIT_OPEN, or JOB_TIMEOUT when the
        wait cannot fit before ``deadline``)."""


class GiveUp(Protocol):
    """What it means, for this caller, to stop retrying."""

    def exhausted(self, retry: Retry, tally: Tally) -> SidecarFailure: ...

    def too_long(self, retry: Retry, max_wait_s: float) -> SidecarFailure: ...

    def past_deadline(self, retry: Retry, wait_s: float, left_s: float) -> SidecarFailure: ...


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    windows: Windows
    give_up: GiveUp
    rng: random.Random

    def next_wait(self, retry: Retry, number: int) -> float:
        """The wait before retry ``number`` (1-based) when the upstream asked for none."""
        return window_wait(signal_window(self.windows, retry.signal), number, self.windows, self.rng)


async def run_attempts(
    sender: Sender[T],
    *,
    policy: RetryPolicy,
    clock: Clock,
    deadline: float | None,
    pacer: Pacer,
    observer: Observer,
    tally: Tally,
) -> T:
    """Attempts until one is Done (its value returned) or the call gives up (a failure raised)."""
    while True:
        admission = pacer.admit(deadline)
        try:
            if admission.wait_s > 0:
                wait = WaitStart(
                    WaitKind.THROTTLE, pacer.target, pacer.name, admission.wait_s, throttle=admission.throttle
                )
                with observer.wait(wait), overhead.waiting():
                    await admission.ready()
            else:
                await admission.ready()
            tally.attempts += 1
            number = tally.attempts
            with observer.attempt(sender.describe(number)) as record:
                try:
                    with record.active():
                        outcome = await sender.send(Attempt(number, record, deadline, clock))
                except BaseException as exc:
                    record.ended("cancelled" if isinstance(exc, asyncio.CancelledError) else "internal")
                    raise
                admission.settle(outcome)
                if isinstance(outcome, Done):
                    return outcome.value
                if isinstance(outcome, Fail):
                    raise outcome.failure
                record.retry_signal(outcome.signal)
                if outcome.retry_after is not None:
                    record.asked_to_wait(outcome.retry_after)
                wait_s = _next_wait(outcome, policy, tally, clock, deadline)
                record.will_wait(wait_s)
        except BaseException:
            admission.release()  # a no-op once settled
            raise
        observer.event(Retried(pacer.target, pacer.name, outcome.signal))
        backoff = WaitStart(WaitKind.BACKOFF, pacer.target, pacer.name, wait_s, outcome.signal, number)
        with observer.wait(backoff), overhead.waiting():
            await clock.sleep(wait_s)


def _next_wait(retry: Retry, policy: RetryPolicy, tally: Tally, clock: Clock, deadline: float | None) -> float:
    """The wait before the next attempt, or the give-up failure raised (the formula is the module's)."""
    give_up = policy.give_up
    if tally.spent:
        raise give_up.exhausted(retry, tally)
    max_wait = policy.windows.max_wait_s
    if retry.retry_after is not None and retry.retry_after > max_wait:
        raise give_up.too_long(retry, max_wait)
    tally.retries += 1
    wait = retry.retry_after if retry.retry_after is not None else policy.next_wait(retry, tally.retries)
    if deadline is not None and clock.time() + wait > deadline:
        raise give_up.past_deadline(retry, wait, max(deadline - clock.time(), 0.0))
    return wait
