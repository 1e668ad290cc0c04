"""Pace before the 429: what a provider's rate-limit headers say is left, and how long to hold for it.

Every answer of a provider may say what is left of its rate limits (OpenAI and Azure OpenAI
``x-ratelimit-remaining-*`` with ``x-ratelimit-reset-*``; Anthropic ``anthropic-ratelimit-*-remaining``
with ``-reset``). Each format reads its headers into one plain ``Budget`` (``Upstream.budget``); this
module decides, with no I/O, whether the model's shared throttle holds the calls that follow::

    the answer says                                  the model is held (every caller, the fleet too)
    requests remaining <= REQUESTS_FLOOR + the       until the requests reset
      other calls in flight here
    tokens remaining < this call's estimate x (1 +   until the tokens reset
      the other calls in flight here)
    a budget spent with no reset told (Azure sends   UNKNOWN_RESET_S (10 s)
      remaining counts only)
    both                                             the longer of the two
    a 429's headers, whatever they say               not held: a 429 is paced as a retry signal
    anything else, or no headers                     not held

A hold is a pause of the model (``ModelThrottle.hold``) as a Retry-After is: the calls queued and
those that come wait until the reset on the injected clock, and the pause crosses the fleet
(``core.state.ModelPause``), so every replica waits for the reset instead of sending into the 429.
It does not raise the throttle: nobody was told off. A 429 is paced as ever (its Retry-After, the
throttle's rise): its headers add nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RATE_LIMITED", "REQUESTS_FLOOR", "UNKNOWN_RESET_S", "Allowance", "Budget", "hold_s"]

RATE_LIMITED = 429
"""The status whose rate-limit headers hold nothing more (its Retry-After and the throttle's rise pace it)."""

REQUESTS_FLOOR = 1
"""Requests left at or below which the model is held (plus the calls still in flight here): the last
request is kept as slack for what is on its way from elsewhere in the fleet."""
UNKNOWN_RESET_S = 10.0
"""How long a budget spent with no reset told holds the model (seconds): Azure OpenAI tells its remaining
requests and tokens only, counted in windows of at most 10 s."""


@dataclass(frozen=True, slots=True)
class Allowance:
    """One budget of a rate limit: how much is left, and the seconds until it is whole again."""

    remaining: int
    reset_s: float | None = None
    """None: the provider did not say."""


@dataclass(frozen=True, slots=True)
class Budget:
    """What one answer said of the provider's rate limits (None: that budget was not told)."""

    requests: Allowance | None = None
    tokens: Allowance | None = None

    def __bool__(self) -> bool:
        return self.requests is not None or self.tokens is not None


def _reset(allowance: Allowance) -> float:
    return UNKNOWN_RESET_S if allowance.reset_s is None else max(allowance.reset_s, 0.0)


def hold_s(budget: Budget | None, *, status: int = 200, tokens: int = 0, others_in_flight: int = 0) -> float | None:
    """Seconds to hold the model's calls after an answer of ``status`` that said ``budget`` (the module's table);
    None: not held. ``tokens``: the answered call's estimate; ``others_in_flight``: calls sent here and not yet
    answered."""
    if not budget or status == RATE_LIMITED:
        return None
    others = max(others_in_flight, 0)
    holds: list[float] = []
    requests = budget.requests
    if requests is not None and requests.remaining <= REQUESTS_FLOOR + others:
        holds.append(_reset(requests))
    left = budget.tokens
    if left is not None and tokens > 0 and left.remaining < tokens * (1 + others):
        holds.append(_reset(left))
    longest = max(holds, default=0.0)
    return longest if longest > 0 else None
