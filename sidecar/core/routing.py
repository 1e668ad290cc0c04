"""Routes: the order of hops for one call, whether a failure moves on, what a deployment's circuit learns.

A route is a model id of the catalog whose calls go to its *deployments* (catalog models):
``balance`` (weighted), then ``fallbacks`` (in order), and ``context_fallback`` for a
conversation that does not fit. This module is the policy; ``providers/routes.py`` runs a hop
as the one model call it is (its own retry budget, the call's one deadline).

The order of hops for one call::

    balance            a weighted draw without replacement (the injected rng): deployment d comes
                       first with probability w_d / sum(w); after it, the rest of balance, drawn the
                       same way
    fallbacks          then each, in the order written (one already tried is not tried again)
    context_fallback   only after a conversation that does not fit (below)

What the chain does after a hop fails (``next_step``)::

    the hop's failure                                     next
    TOKEN_ESTIMATE_EXCEEDS_LIMIT, CONTEXT_OVERFLOW         context_fallback, when the route has one and has not
                                                           tried it: the rest of the order is dropped (it
                                                           would not fit there either)
    a kind in the route's move_on (DEFAULT_MOVE_ON)        the next hop of the order; none left: the chain fails
    any other kind                                         the chain fails with it
    (before each hop) the caller's deadline has passed     the chain fails: JOB_TIMEOUT, naming what was not tried

DEFAULT_MOVE_ON, a route's ``move_on`` when it names none::

    UPSTREAM_RETRIES_EXHAUSTED  rate limits, overloads, transient faults outlasted this deployment's budget
    CIRCUIT_OPEN                this deployment's circuit is open: the hop is skipped without an attempt
    QUOTA_EXHAUSTED             this key (account) is out of quota; another key or provider is not
    MODEL_NOT_FOUND             this provider does not serve the model (the catalog entry is wrong: an id, an
                                inference profile needed, a region without it)
    UNAUTHORIZED                this key, or its account, was refused (a location, billing, an organization)
    JOB_TIMEOUT                 this deployment's next wait (a backoff, a throttle, a pause) would not end
                                before the deadline; the next deployment may answer at once
    EXTERNAL_SERVICE            this deployment did not answer in time (TIMED_OUT, below), or answered what
                                no provider should (a status that is neither success nor error)

A timed-out deployment moves on at once. An attempt past its header or first-token timeout
(``providers.*.header_timeout_s``, ``first_token_timeout_s``: the provider accepted the request and
is silent) is a transient fault, retried on the same deployment like any other, except on a hop
with another deployment after it whose route's move_on lists TIMED_OUT (``timeout_moves_on``):
there it ends the hop at once as TIMED_OUT, charging the deployment's circuit, and the next
deployment is tried without a wait. The last hop of the order (nothing to move on to) retries as
a plain model call does. A route that leaves EXTERNAL_SERVICE out of its move_on spends the hop's
budget on the silent deployment first (and moves on with UPSTREAM_RETRIES_EXHAUSTED, if listed).
A stream that stalls after its first delta on such a hop ends it too (STREAM_INTERRUPTED): a stalled
deployment stalls again, and the stream is continued (or restarted) on the next one.

NEVER_MOVE_ON, which no route may list (the config refuses it, naming the key)::

    INVALID_INPUT        the caller's own mistake: the same request fails on every deployment
    JSON_PARSE           the reply stayed unusable after the corrections: the caller's schema or prompt
    RESPONSE_VALIDATION  (a warning on a reply, never a failure of a call)
    SPEND_CAP_EXCEEDED   the workflow's cap holds on every deployment
    JOB_CANCELLED        the caller has left
    STREAM_INTERRUPTED   deltas reached the caller: the stream's restart policy decides, not the route
    SYSTEM               a bug: moving on would hide it

The other kinds a model call can end with (MOVABLE_KINDS less the defaults: UPSTREAM_THROTTLE,
PERMISSION_DENIED, OUTPUT_TRUNCATED, PROVIDER_REFUSAL, and the two context kinds for a route without
a context_fallback) move on only when a route lists them. PROVIDER_REFUSAL is not a default: a
content filter's verdict is on the request, and trying deployment after deployment until one lets
it through is shopping for the laxest filter, a choice for the operator to make (say, a strict
Azure filter in front of another provider), never the sidecar's. A refusal that moves on does not
charge the deployment's circuit: the deployment answered.

A deployment's circuit is ``core.circuit.ServiceGuard``, the code that guards tool services,
with DEPLOYMENT_CIRCUIT unless the route gives its own ``circuit``; one guard per deployment,
shared by every route and call that uses it (``settle``)::

    before the hop                       guard.check(): open -> the hop is skipped (CIRCUIT_OPEN, no attempt,
                                         the refusal quoting what opened it); half-open -> the one probe, one
                                         attempt: on the side when a closed circuit follows (this hop skipped),
                                         else this hop
    served                               success (a probe closes the circuit)
    a failure in move_on that is the     charged (CHARGED: DEPLOYMENT_FAULTS & move_on); the
    deployment's own (DEPLOYMENT_FAULTS) third failed hop in a row opens it for cooldown_s
    any other failure after an attempt   success: the deployment answered (a probe proves it is up)
    no attempt, JOB_TIMEOUT, cancelled   charged to no one (a probe is lost: reopened, cooldown unchanged)

A 429/529 still paces the deployment's own model throttle within the hop, as for any call.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sidecar.core.hedging import Hedge
from sidecar.core.kinds import FailureKind
from sidecar.core.settings import CircuitConfig

__all__ = [
    "CONTEXT_KINDS",
    "DEFAULT_MOVE_ON",
    "DEPLOYMENT_CIRCUIT",
    "DEPLOYMENT_FAULTS",
    "MAX_ROUTE_DEPLOYMENTS",
    "MAX_ROUTE_WEIGHT",
    "MOVABLE_KINDS",
    "NEVER_MOVE_ON",
    "TIMED_OUT",
    "HopRole",
    "Next",
    "Route",
    "Settle",
    "never_reason",
    "next_step",
    "settle",
    "timeout_moves_on",
]

K = FailureKind

MAX_ROUTE_DEPLOYMENTS = 8
"""A route names at most this many deployments (balance, fallbacks and context_fallback together):
every hop is quoted in a chain failure, which must fit gRPC's trailers."""
MAX_ROUTE_WEIGHT = 1_000_000.0
"""A balance weight is in (0, MAX_ROUTE_WEIGHT]: weights are proportions, not counts."""

CONTEXT_KINDS = frozenset({K.TOKEN_ESTIMATE_EXCEEDS_LIMIT, K.CONTEXT_OVERFLOW})
"""The conversation does not fit this deployment: the route's context_fallback takes it."""

DEFAULT_MOVE_ON = frozenset(
    {
        K.UPSTREAM_RETRIES_EXHAUSTED,
        K.CIRCUIT_OPEN,
        K.QUOTA_EXHAUSTED,
        K.MODEL_NOT_FOUND,
        K.UNAUTHORIZED,
        K.JOB_TIMEOUT,
        K.EXTERNAL_SERVICE,
    }
)
"""The failures that move on to the next deployment when a route names no ``move_on`` (module docstring)."""

TIMED_OUT = K.EXTERNAL_SERVICE
"""What a hop ends with when an attempt timed out (header or first token) and the route moves on at once:
the deployment did not answer (``ExternalService``, no HTTP status, fault TIMEOUT)."""

_NEVER: dict[FailureKind, str] = {
    K.INVALID_INPUT: "the caller's own mistake fails on every deployment",
    K.JSON_PARSE: "a reply unusable after the corrections is the caller's schema or prompt to fix",
    K.RESPONSE_VALIDATION: "it is a warning on a reply, never a failed call",
    K.SPEND_CAP_EXCEEDED: "the workflow's spend cap holds on every deployment",
    K.JOB_CANCELLED: "the caller has left",
    K.STREAM_INTERRUPTED: "after deltas reached the caller the stream's restart policy decides",
    K.SYSTEM: "a bug must not be hidden by another deployment",
}
NEVER_MOVE_ON = frozenset(_NEVER)
"""The failures no route may move on from (a config that lists one is refused)."""

MOVABLE_KINDS = frozenset(
    {
        *DEFAULT_MOVE_ON,
        K.EXTERNAL_SERVICE,
        K.UPSTREAM_THROTTLE,
        K.PERMISSION_DENIED,
        K.OUTPUT_TRUNCATED,
        K.PROVIDER_REFUSAL,
        *CONTEXT_KINDS,
    }
)
"""The kinds a route's ``move_on`` may list: every kind a model call ends with, but NEVER_MOVE_ON."""

DEPLOYMENT_FAULTS = frozenset(
    {
        K.UPSTREAM_RETRIES_EXHAUSTED,
        K.QUOTA_EXHAUSTED,
        K.MODEL_NOT_FOUND,
        K.UNAUTHORIZED,
        K.EXTERNAL_SERVICE,
        K.UPSTREAM_THROTTLE,
        K.PERMISSION_DENIED,
    }
)
"""The failures that are the deployment's own (its provider, its key, its catalog entry): they charge its
circuit when they move on. Not the caller's deadline, not a conversation too long, not a skipped hop."""

DEPLOYMENT_CIRCUIT = CircuitConfig(
    failure_step=9.0, max_throttle=9.0, failures_to_open=2, cooldown_s=4.0, max_cooldown_s=8.0
)
"""A deployment's circuit: the first charged hop takes the guard to its maximum throttle, the second and
third count at the maximum, so the third failed hop in a row opens it (three successes in between take
it below the maximum, and the count starts again); 4 s cooldown, doubled on a failed probe up to 8 s.

Made for calls a person waits on: while a deployment is down, one call in every 4 to 8 s probes it
with one attempt (on the side, when a deployment with a closed circuit follows: that call, like the
others, goes straight to the next deployment), so a deployment that comes back serves again within
8 s of its recovery (and the next call after that). A route whose deployments are batch work may
give a longer ``circuit: {cooldown_s, max_cooldown_s}``; a key left out keeps these values."""


def never_reason(kind: FailureKind) -> str | None:
    """Why ``kind`` never moves on, or None when a route may list it."""
    return _NEVER.get(kind)


class HopRole(enum.Enum):
    """Why a deployment is in the order (ListModels' RouteDeployment.role)."""

    BALANCE = "balance"
    FALLBACK = "fallback"
    CONTEXT = "context"


class Next(enum.Enum):
    """What the chain does after a failed hop."""

    MOVE_ON = "move_on"
    """The next hop of the order."""
    CONTEXT = "context"
    """The context_fallback, and nothing after it."""
    STOP = "stop"
    """The chain fails with this hop's failure."""


class Settle(enum.Enum):
    """What a deployment's circuit learns from a hop."""

    SUCCESS = "success"
    CHARGE = "charge"
    LOST = "lost"


@dataclass(frozen=True, slots=True)
class Route:
    """One route, as the policy reads it (built from the config by ``providers/routes.py``)."""

    name: str
    balance: tuple[tuple[str, float], ...] = ()
    fallbacks: tuple[str, ...] = ()
    context_fallback: str | None = None
    move_on: frozenset[FailureKind] = DEFAULT_MOVE_ON
    hedge: Hedge | None = None
    """Its hedge (``core.hedging``), or None: no hop is raced."""

    @property
    def deployments(self) -> tuple[tuple[str, HopRole, float], ...]:
        """Every deployment once, in the order the config lists them: balance, fallbacks, context."""
        out = [(d, HopRole.BALANCE, w) for d, w in self.balance]
        seen = {d for d, _ in self.balance}
        out += [(d, HopRole.FALLBACK, 0.0) for d in self.fallbacks if d not in seen]
        seen.update(self.fallbacks)
        if self.context_fallback is not None and self.context_fallback not in seen:
            out.append((self.context_fallback, HopRole.CONTEXT, 0.0))
        return tuple(out)

    def order(self, rng: random.Random) -> list[tuple[str, HopRole]]:
        """The hops of one call, first to last (the context fallback is not among them)."""
        hops = [(d, HopRole.BALANCE) for d in weighted_order(self.balance, rng)]
        seen = {d for d, _ in hops}
        for d in self.fallbacks:
            if d not in seen:
                seen.add(d)
                hops.append((d, HopRole.FALLBACK))
        return hops


def weighted_order(weights: Sequence[tuple[str, float]], rng: random.Random) -> list[str]:
    """The names drawn one by one without replacement, each with probability weight / remaining total."""
    left = list(weights)
    out: list[str] = []
    while left:
        total = sum(w for _, w in left)
        point = rng.random() * total
        index = len(left) - 1  # the last one when rounding leaves the point at the very top
        for i, (_, w) in enumerate(left):
            if point < w:
                index = i
                break
            point -= w
        out.append(left.pop(index)[0])
    return out


def next_step(route: Route, kind: FailureKind, tried: Iterable[str], *, not_carried: bool = False) -> Next:
    """What the chain does after a hop failed with ``kind`` (the module's table); ``not_carried``: the
    hop's wire format refused the request before sending (``NotCarried``), so the next may carry it."""
    if not_carried:
        return Next.MOVE_ON
    if kind in NEVER_MOVE_ON:
        return Next.STOP
    if kind in CONTEXT_KINDS and route.context_fallback is not None:
        return Next.STOP if route.context_fallback in set(tried) else Next.CONTEXT
    return Next.MOVE_ON if kind in route.move_on else Next.STOP


def timeout_moves_on(route: Route, following: bool) -> bool:
    """Whether a hop's timed-out attempt ends the hop at once (``following``: another hop comes after it)."""
    return following and TIMED_OUT in route.move_on


def settle(route: Route, kind: FailureKind | None, attempts: int) -> Settle:
    """What the deployment's circuit learns from a hop that ended with ``kind`` (None: it served)."""
    if kind is None:
        return Settle.SUCCESS
    if kind in DEPLOYMENT_FAULTS and kind in route.move_on:
        return Settle.CHARGE
    if attempts == 0 or kind in (K.JOB_TIMEOUT, K.JOB_CANCELLED):
        return Settle.LOST
    return Settle.SUCCESS
