"""Limits per caller at the doors: each ``server.auth.tokens`` entry's buckets, and its use.

    limit                  bucket (``aiolimiter.AsyncLimiter``)          charged, as the call starts
    requests_per_second r  max(1, r) per max(1, r) / r seconds: a burst  1 per CallModel, StreamModel, ExecuteTool,
                           of max(1, r) at once, then r a second         a model front's POST, MCP's tools/call
    tokens_per_minute t    t per 60 seconds                              a model call's input estimate
                                                                         (``providers.fitting.estimate_tokens``)
                                                                         plus its output budget
                                                                         (``max_output_tokens``, else the model's;
                                                                         a route: its largest deployment's)

Who the caller is, each door knows from the token it checked (``auth.Tokens.which``: the entry's
index): the gRPC port's bearer interceptor sets ``CALLER`` for the RPC's task; the HTTP port's
``Access`` puts it in the ASGI scope (``SCOPE_KEY``). No ``server.auth``: no caller, no limit.

A call over a limit is refused at once, before any work, and charges nothing: every bucket is asked
``has_capacity`` first, and only when all have room is each ``acquire``d, which then returns
without waiting (nothing else runs between: no await suspends). No caller is ever queued. The refusal
(``refusals.caller_limited_failure``) is UPSTREAM_THROTTLE, service ``sidecar``, naming the caller and
its limit, never its token: RESOURCE_EXHAUSTED with RetryInfo on gRPC, 429 with Retry-After in the
front's own error shape over HTTP. Its wait is the time the bucket takes to leak the call's whole
amount (amount / rate): a bound the caller's retry surely meets (the level is at most the bucket's
size), computed without reading the bucket's level, which aiolimiter keeps private. A model call
larger than the whole tokens_per_minute bucket could never be admitted: INVALID_INPUT naming
``max_output_tokens`` instead, the part the caller can lower.

Tokens are charged before the call and not reconciled with its usage after: aiolimiter gives no
capacity back, and an estimate held to the output budget is the most a call can spend (a call that
writes less has paid for the budget it reserved, as a provider's own token limit counts it).

Why aiolimiter here and the GCRA pacer (``core.pacer``) elsewhere: this is a local leaky bucket
with an at-once refusal (``has_capacity``); the pacer books a slot in the future for a call that
will wait for it within its deadline, and shares the booking across a fleet (``core.fleet_view``).
A caller's limit books nothing and waits for nothing. It is local to each process (each worker of
``server.workers`` its own, docs/fleet.md says why).

aiolimiter reads the running loop's ``time()`` (as ``core.clock.RealClock`` does), not the injected
clock: ``tests/unit/test_callers.py`` runs it on an event loop whose ``time()`` is virtual.
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from aiolimiter import AsyncLimiter
from opentelemetry import trace

from sidecar.config import CallerConfig, Config
from sidecar.core.conversation import ModelRequest
from sidecar.core.taxonomy import InvalidInput, SidecarFailure
from sidecar.providers.fitting import estimate_tokens
from sidecar.server.refusals import caller_limited_failure
from sidecar.telemetry import names as n
from sidecar.telemetry.metrics import Metrics

__all__ = ["CALLER", "SCOPE_KEY", "Caller", "Callers", "model_charge"]

CALLER: contextvars.ContextVar[int | None] = contextvars.ContextVar("sidecar_caller", default=None)
"""The index of the gRPC call's ``server.auth.tokens`` entry (set by ``grpc.auth``); None: no auth."""
SCOPE_KEY = "sidecar.caller"
"""The ASGI scope's key holding the HTTP request's caller index (set by ``http.access.Access``)."""
RPS = "requests_per_second"
TPM = "tokens_per_minute"
MINUTE_S = 60.0


def _bucket(rate_per_s: float) -> AsyncLimiter:
    """A leaky bucket of ``rate_per_s``, holding at least one unit (a rate under 1/s still admits one call)."""
    size = max(1.0, rate_per_s)
    return AsyncLimiter(size, size / rate_per_s)


@dataclass(slots=True, eq=False)
class Caller:
    """One entry of ``server.auth.tokens``: its name, its buckets, its use since the start."""

    name: str
    requests_per_second: float | None
    tokens_per_minute: int | None
    requests: AsyncLimiter | None = field(default=None, repr=False)
    tokens: AsyncLimiter | None = field(default=None, repr=False)
    admitted: int = 0
    refused: int = 0
    tokens_charged: int = 0

    @classmethod
    def of(cls, index: int, entry: CallerConfig) -> Caller:
        rps, tpm = entry.requests_per_second, entry.tokens_per_minute
        return cls(
            entry.name or f"tokens[{index}]",
            rps,
            tpm,
            requests=_bucket(rps) if rps is not None else None,
            tokens=AsyncLimiter(tpm, MINUTE_S) if tpm is not None else None,
        )

    def snapshot(self) -> dict[str, Any]:
        """The caller in the admin state view: its limits, what it was admitted, refused and charged."""
        return {
            "name": self.name,
            RPS: self.requests_per_second,
            TPM: self.tokens_per_minute,
            "admitted": self.admitted,
            "refused": self.refused,
            "tokens_charged": self.tokens_charged,
        }


class Callers:
    """Every caller of ``server.auth.tokens``, by index; ``admit`` is the check each door makes."""

    __slots__ = ("_callers", "_metrics")

    def __init__(self, entries: Sequence[CallerConfig] = (), metrics: Metrics | None = None) -> None:
        self._callers = [Caller.of(i, e) for i, e in enumerate(entries)]
        self._metrics = metrics

    def __len__(self) -> int:
        return len(self._callers)

    def of(self, index: int | None) -> Caller | None:
        """The caller at ``index`` (a door's ``CALLER`` / ``SCOPE_KEY``), None when there is none."""
        return self._callers[index] if index is not None and 0 <= index < len(self._callers) else None

    def snapshot(self) -> list[dict[str, Any]]:
        return [c.snapshot() for c in self._callers]

    async def admit(self, index: int | None, method: str, tokens: int = 0) -> SidecarFailure | None:
        """None: the call of the caller at ``index`` is admitted and charged 1 request and ``tokens``;
        else the refusal to answer (nothing charged). The current span gets the caller's name."""
        caller = self.of(index)
        if caller is None:
            return None
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attribute(n.CALLER, caller.name)
        refused = self._refusal(caller, method, tokens)
        if refused is not None:
            caller.refused += 1
            self._count(caller, "refused", refused[1], 0)
            return refused[0]
        if caller.requests is not None:
            await caller.requests.acquire()  # has_capacity said yes: returns at once
        if caller.tokens is not None and tokens:
            await caller.tokens.acquire(tokens)
        caller.admitted += 1
        caller.tokens_charged += tokens
        self._count(caller, "admitted", "none", tokens)
        return None

    def _refusal(self, caller: Caller, method: str, tokens: int) -> tuple[SidecarFailure, str] | None:
        bucket, tpm = caller.tokens, caller.tokens_per_minute
        if bucket is not None and tpm is not None and tokens > tpm:
            rule = (
                f"the call's input estimate and output budget ({tokens} tokens) must fit caller {caller.name}'s "
                f"whole tokens_per_minute ({tpm}); lower max_output_tokens or send less"
            )
            return InvalidInput("max_output_tokens", str(tokens), rule), TPM
        requests, rps = caller.requests, caller.requests_per_second
        if requests is not None and rps is not None and not requests.has_capacity():
            return caller_limited_failure(method, caller.name, RPS, rps, _wait(1, rps)), RPS
        if bucket is not None and tpm is not None and tokens and not bucket.has_capacity(tokens):
            return caller_limited_failure(method, caller.name, TPM, tpm, _wait(tokens, tpm / MINUTE_S)), TPM
        return None

    def _count(self, caller: Caller, outcome: str, limit: str, tokens: int) -> None:
        if self._metrics is not None:
            self._metrics.caller(caller.name, outcome, limit, tokens)


def _wait(amount: float, rate_per_s: float) -> float:
    """Seconds the bucket takes to leak ``amount``: the caller's retry then finds room (milliseconds, up)."""
    return math.ceil(amount / rate_per_s * 1000) / 1000


def model_charge(config: Config, request: ModelRequest) -> int:
    """A model call's tokens against its caller's tokens_per_minute: the input estimate plus the output budget
    (the request's ``max_output_tokens``, else the model's, else, for a route, its largest deployment's)."""
    budget = request.max_output_tokens
    if not budget:
        model = config.models.get(request.model)
        if model is not None:
            budget = model.output_budget
        elif (entry := config.routes.get(request.model)) is not None:
            route = entry.route
            names = [*route.balance, *route.fallbacks, *([route.context_fallback] if route.context_fallback else [])]
            budget = max((config.models[m].output_budget for m in names if m in config.models), default=0)
    return estimate_tokens(request) + (budget or 0)
