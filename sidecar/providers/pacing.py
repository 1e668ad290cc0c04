"""A model's shared throttle as the retry engine's Pacer: who may send to the model, and when.

admit(deadline)   books the call's slot after everyone queued (a Retry-After pause, the request
                  and token pacers: core.model_throttle); a slot that cannot fit before the
                  deadline is JOB_TIMEOUT at once, nothing booked
ready()           waits for the slot on the injected clock (a pause that arrives meanwhile moves
                  it; past the deadline then: JOB_TIMEOUT)
settle(outcome)   Done -> a success (the throttle recovers); Retry -> the signal (429 +0.5, 529 +1.5,
                  a Retry-After pauses every caller, at most max_wait_s); Fail -> neither, unless it
                  stands in for a Retry (``Fail.instead_of``: a mid-stream fault the caller asked
                  not to restart): that Retry's signal
release()         cancelled or a bug: the slot, if unused, is given back

heard(budget, status)   every answer's rate-limit headers (``Upstream.budget``), a success's too: when
                  ``core.rate_budget.hold_s`` says the budget is about to run out, the model is held
                  until its reset (at most max_wait_s), for every caller and the fleet; a 429 adds
                  nothing (its Retry-After and the throttle's rise pace it)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sidecar.core.clock import Clock
from sidecar.core.model_throttle import ModelThrottle, Overdue, Ticket
from sidecar.core.observer import Target
from sidecar.core.rate_budget import Budget, hold_s
from sidecar.core.retry import Done, Fail, Retry, Tally
from sidecar.core.taxonomy import JobTimeout

__all__ = ["ModelPacer"]


def _late(model: str, late: Overdue, clock: Clock, deadline: float | None, tally: Tally) -> JobTimeout:
    left = max((deadline or 0.0) - clock.time(), 0.0)
    return JobTimeout(
        f"model {model}",
        f"{late.reason} for {late.wait:.1f} s, but only {left:.1f} s remain",
        retry_after=late.wait,
        budget=tally.budget,
    )


@dataclass(slots=True)
class _Admission:
    pacer: ModelPacer
    ticket: Ticket
    deadline: float | None
    wait_s: float

    @property
    def throttle(self) -> float:
        return self.pacer.throttle_.throttle

    async def ready(self) -> None:
        p = self.pacer
        try:
            await p.throttle_.wait(self.ticket)
        except Overdue as late:
            raise _late(p.name, late, p.clock, self.deadline, p.tally) from None

    def settle(self, outcome: Done[Any] | Fail | Retry) -> None:
        throttle = self.pacer.throttle_
        if isinstance(outcome, Fail) and outcome.instead_of is not None:
            outcome = outcome.instead_of
        if isinstance(outcome, Done):
            throttle.success(self.ticket)
        elif isinstance(outcome, Retry):
            pause = None if outcome.retry_after is None else min(outcome.retry_after, self.pacer.max_pause_s)
            throttle.signal(self.ticket, outcome.signal, pause)
        else:
            throttle.settle(self.ticket)

    def release(self) -> None:
        self.pacer.throttle_.settle(self.ticket)  # idempotent: a no-op once settled


@dataclass(slots=True)
class ModelPacer:
    """The pacing of one call to one model (``tokens``: the call's estimate)."""

    throttle_: ModelThrottle
    tokens: int
    clock: Clock
    tally: Tally
    max_pause_s: float

    @property
    def target(self) -> Target:
        return Target.MODEL

    @property
    def name(self) -> str:
        return self.throttle_.model

    def heard(self, budget: Budget, status: int) -> None:
        """An answer's rate-limit budget (the module's table)."""
        throttle = self.throttle_
        hold = hold_s(budget, status=status, tokens=self.tokens, others_in_flight=throttle.in_flight - 1)
        if hold is not None:
            throttle.hold(min(hold, self.max_pause_s))

    def admit(self, deadline: float | None) -> _Admission:
        try:
            ticket = self.throttle_.reserve(self.tokens, deadline)
        except Overdue as late:
            raise _late(self.name, late, self.clock, deadline, self.tally) from None
        return _Admission(self, ticket, deadline, max(ticket.at - self.clock.time(), 0.0))
