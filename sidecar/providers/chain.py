"""One call's chain of hops on a route: what each hop spent, and how the chain's reply or failure reads.

    HopTally              the observer's hop record, remembering what the hop spent (ModelService tells it once)
    HopResult             one hop tried: the hop, its tally, its reply or its failure (neither: it lost a race)
    Chain                 one call's hops so far (``take``: a hop or a hedged race's two counted): the reply of
                          the one that served (served_by, hops, attempts, tokens and cost of every hop), or the
                          failure of the whole chain in words naming the
                          route and every hop with its reason (``failure``)
    describe              ``N) deployment, KIND after n attempts: reason.`` (a skipped one: ``skipped (KIND)``)
    skipped_reason        a skipped hop's reason: what opened the deployment's circuit
    probed_aside_reason   the reason of a hop whose half-open circuit this call's request probes on the side
    trigger_of            a failure as the circuit it charges quotes it

A hop's reason is its failure's message (at most HOP_REASON_CHARS), ``served``, or for a skipped
deployment what opened its circuit; a chain failure quotes each at most HOP_MESSAGE_CHARS.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from sidecar.config import Config
from sidecar.core.conversation import ModelResponse, Usage
from sidecar.core.details import CircuitDetail, Hop, RetryDetail, Trigger
from sidecar.core.kinds import CircuitState
from sidecar.core.observer import HopRecord
from sidecar.core.routing import CONTEXT_KINDS, Route
from sidecar.core.spend import cost_of
from sidecar.core.taxonomy import CircuitOpen, JobTimeout, SidecarFailure
from sidecar.core.text import clause

__all__ = [
    "HOP_MESSAGE_CHARS",
    "HOP_REASON_CHARS",
    "SERVED",
    "Chain",
    "HopResult",
    "HopTally",
    "describe",
    "probed_aside_reason",
    "skipped_reason",
    "trigger_of",
]

HOP_REASON_CHARS = 500
"""A hop's reason (``Hop.reason``) keeps its failure's message up to this many characters."""
HOP_MESSAGE_CHARS = 240
"""A chain failure's message quotes each hop's reason up to this many characters."""
SERVED = "served"
"""The reason of the hop that served the call."""


@dataclass(slots=True)
class HopTally:
    """The observer's hop record, remembering what the hop spent (ModelService tells it once)."""

    record: HopRecord
    attempts: int = 0
    corrections: int = 0
    spent: Usage = field(default_factory=Usage)

    def tally(self, attempts: int, corrections: int, spent: Usage) -> None:
        self.attempts, self.corrections, self.spent = attempts, corrections, spent
        self.record.tally(attempts, corrections, spent)


HopResult = tuple[Hop, HopTally | None, ModelResponse | None, SidecarFailure | None]
"""One hop tried: the hop as listed, what it spent, and its reply or its failure (neither: it lost a race)."""


@dataclass(slots=True)
class Chain:
    """One call's hops so far."""

    route: Route
    config: Config
    hops: list[Hop] = field(default_factory=list)
    tallies: list[tuple[str, HopTally]] = field(default_factory=list)
    last: SidecarFailure | None = None

    @property
    def tried(self) -> list[str]:
        return [h.deployment for h in self.hops]

    def take(self, tried: list[HopResult], deployment: str) -> tuple[ModelResponse | None, SidecarFailure | None, str]:
        """Count the hops just tried (one, or a hedged race's two): the reply (two at once: the first one)
        or else the failure, and the deployment it came from."""
        response = failure = None
        for hop, tally, served, failed in tried:
            self.hops.append(hop)
            if tally is not None:
                self.tallies.append((hop.deployment, tally))
            if served is not None and response is None:
                response, deployment = served, hop.deployment
            elif failed is not None and response is None:
                failure, deployment = failed, hop.deployment
        return response, failure, deployment

    def totals(self) -> tuple[int, int, Usage]:
        ts = [t for _, t in self.tallies]
        return sum(t.attempts for t in ts), sum(t.corrections for t in ts), sum((t.spent for t in ts), Usage())

    def served(self, response: ModelResponse, deployment: str) -> ModelResponse:
        attempts, corrections, spent = self.totals()
        cost = sum(cost_of(self.config.models[d], t.spent) for d, t in self.tallies)
        return replace(
            response,
            served_by=deployment,
            hops=tuple(self.hops),
            attempts=attempts,
            corrections=corrections,
            total_usage=spent,
            cost_usd=cost,
        )

    def failure(self, stopped: bool, untried: list[str]) -> SidecarFailure:
        """The last hop's failure, worded for the whole chain (``untried``: the deadline cut it short)."""
        last = self.last
        listed = " ".join(describe(i, h) for i, h in enumerate(self.hops, start=1))
        name = self.route.name
        if untried or last is None:
            not_tried = ", ".join(untried) or "every deployment"
            head = f"Route {name} ran out of time: the caller's deadline passed before {not_tried} could be tried."
            cls: type[SidecarFailure] = JobTimeout
            detail = last.detail if isinstance(last, JobTimeout) else RetryDetail(target=f"route {name}")
        else:
            cls, detail = type(last), last.detail
            kind, at = last.kind_name, self.hops[-1].deployment
            if not stopped:
                head = f"Route {name} found no deployment to serve the call; each one it tried failed."
            elif last.kind in CONTEXT_KINDS and self.route.context_fallback is None:
                head = (
                    f"Route {name} stopped at {at}: the conversation does not fit ({kind}) and the route has no "
                    "context_fallback."
                )
            else:
                head = f"Route {name} stopped at {at}: {kind} does not move on to another deployment."
        chained = cls.worded(
            f"{head} {listed}".strip(),
            detail=detail,
            http=last.http if last is not None else None,
            retry_after=last.retry_after if last is not None else None,
        )
        chained.hops = tuple(self.hops)
        chained.attempts = self.totals()[0]
        return chained


def describe(number: int, hop: Hop) -> str:
    """``N) deployment, KIND after n attempts: reason.`` (a skipped one: ``skipped (CIRCUIT_OPEN)``)."""
    reason = clause(hop.reason, HOP_MESSAGE_CHARS)
    if hop.skipped:
        return f"{number}) {hop.deployment}, skipped ({hop.kind.name}): {reason}."
    n = hop.attempts
    return f"{number}) {hop.deployment}, {hop.kind.name} after {n} attempt{'' if n == 1 else 's'}: {reason}."


def skipped_reason(deployment: str, refusal: CircuitOpen) -> str:
    detail = refusal.detail
    opened_by = detail.opened_by.describe() if isinstance(detail, CircuitDetail) else "unknown"
    wait = max(1, round(refusal.retry_after or 0.0))
    if isinstance(detail, CircuitDetail) and detail.state is CircuitState.HALF_OPEN:
        state = f"is being probed by another call (for up to about {wait} s)"
    else:
        state = f"is open for about {wait} s"
    return f"the circuit of {deployment} {state} after repeated failures; opened by {opened_by}"


def probed_aside_reason(deployment: str) -> str:
    return (
        f"the circuit of {deployment} is half-open: this call's request probes it on the side (one attempt) "
        "while the call goes on to a deployment whose circuit is closed"
    )


def trigger_of(failure: SidecarFailure) -> Trigger:
    http = failure.http
    return Trigger(
        http.status_code if http else None,
        f"{failure.kind_name}: {clause(failure.message, 120)}",
        http.retry_after_raw if http else None,
    )
