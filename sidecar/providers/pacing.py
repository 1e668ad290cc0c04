"""A model's shared throttle as the retry engine's Pacer: who may send to the model, and when.

admit(deadline)   the wait the throttle asks for now (a Retry-After pause, the request and token
                  buckets); a wait that cannot fit before the deadline is JOB_TIMEOUT at once
ready()           waits it out on the injected clock
settle(outcome)   Done -> a success (the throttle comes down); Retry -> the signal (429 +0.5,
                  529 +1.5, a Retry-After pauses every caller, at most max_wait_s); Fail -> nothing
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sidecar.core.clock import Clock
from sidecar.core.model_throttle import ModelThrottle
from sidecar.core.observer import Target
from sidecar.core.retry import Done, Fail, Retry, Tally
from sidecar.core.taxonomy import JobTimeout

__all__ = ["ModelPacer"]


@dataclass(slots=True)
class _Admission:
    throttle_: ModelThrottle
    tokens: int
    wait_s: float
    max_pause_s: float

    @property
    def throttle(self) -> float:
        return self.throttle_.throttle

    async def ready(self) -> None:
        await self.throttle_.acquire(self.tokens)

    def settle(self, outcome: Done[Any] | Fail | Retry) -> None:
        if isinstance(outcome, Done):
            self.throttle_.success()
        elif isinstance(outcome, Retry):
            pause = None if outcome.retry_after is None else min(outcome.retry_after, self.max_pause_s)
            self.throttle_.signal(outcome.signal, pause)

    def release(self) -> None:
        """Nothing to give back: the buckets were charged when the attempt went."""


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

    def admit(self, deadline: float | None) -> _Admission:
        wait = self.throttle_.wait_time(self.tokens)
        if wait > 0 and deadline is not None and self.clock.time() + wait > deadline:
            left = max(deadline - self.clock.time(), 0.0)
            raise JobTimeout(
                f"model {self.name}",
                f"the model is throttled for {wait:.1f} s, but only {left:.1f} s remain",
                retry_after=wait,
                budget=self.tally.budget,
            )
        return _Admission(self.throttle_, self.tokens, wait, self.max_pause_s)
