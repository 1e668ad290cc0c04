"""A call to a route: one hop per deployment, each the one model call it is, under the call's one deadline.

    the request's checks, once       INVALID_INPUT before any hop (no hops); max_output_tokens at most the
                                     smallest maximum output among the route's deployments
    for each hop of the order        core.routing: a weighted draw among ``balance``, then ``fallbacks``
        deadline passed              -> the chain fails: JOB_TIMEOUT naming the deployments not tried
        observer.hop(...)            the ``route.hop {deployment}`` span; the hop's attempts run under it
        the deployment's circuit     open -> skipped (CIRCUIT_OPEN, no attempt); half-open -> the one probe,
                                     claimed fleet-wide, one attempt (CallOptions.probe: no retry, so no
                                     backoff): with a deployment whose circuit is closed after it in the
                                     order (and CIRCUIT_OPEN in move_on) sent on the side, a task of its own
                                     (its deadline probe_timeout_s, its reply discarded, its own route.hop
                                     span in the call's trace; ``aclose`` cancels it: lost) while this hop
                                     is skipped (CIRCUIT_OPEN) and the call goes on at once; else this hop
        run(request, options, hop)   ModelService's one model call for that deployment: its own Tally and
                                     retry budget, its throttle, the call's deadline (no second retry loop);
                                     with another hop after it, a timed-out attempt may end it at once
                                     (core.routing.timeout_moves_on)
        raced (hedge_after, once)    no first token by the route's hedge_after: the next deployment of the
                                     order runs the same request beside it, its hop ``hedge``; the first
                                     token wins, the other is cancelled (``cancelled``), ``providers.hedging``
        served                       -> the reply: served_by, hops, attempts, tokens and cost of every hop
        failed                       -> core.routing.next_step: the next hop, the context fallback, or stop
    the chain fails                  -> the last hop's failure (its kind, detail, http, Retry-After and retry
                                        line) in words naming the route and every hop with its reason

The chain's bookkeeping (what each hop spent, how the reply or the failure reads) is ``providers.chain``'s.
Each deployment's circuit is a ``core.circuit.ServiceGuard`` (the tool services' code), kept in a
``ServiceGuards`` of the deployments, one per deployment whatever the route.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import random
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import replace
from typing import Any

from sidecar.config import Config
from sidecar.core import overhead
from sidecar.core.circuit import Admission, ServiceGuard
from sidecar.core.clock import Clock
from sidecar.core.conversation import CallOptions, MidStream, ModelRequest, ModelResponse
from sidecar.core.details import Hop
from sidecar.core.kinds import CircuitState, FailureKind
from sidecar.core.observer import HopStart, ModelCallStart, Observer
from sidecar.core.routing import (
    DEPLOYMENT_CIRCUIT,
    HopRole,
    Next,
    Route,
    Settle,
    next_step,
    settle,
    timeout_moves_on,
)
from sidecar.core.service_guards import ServiceGuards
from sidecar.core.settings import ServiceConfig
from sidecar.core.state import DEPLOYMENT_NAMESPACE, MEMORY, Namespaced, StateBackend
from sidecar.core.stream import RestartCause
from sidecar.core.taxonomy import (
    CircuitOpen,
    InvalidInput,
    JobCancelled,
    NotCarried,
    SidecarFailure,
    as_failure,
)
from sidecar.core.text import cap
from sidecar.core.uncorrectable_failures import SHUTTING_DOWN
from sidecar.providers.chain import (
    HOP_MESSAGE_CHARS,
    HOP_REASON_CHARS,
    SERVED,
    Chain,
    HopTally,
    probed_aside_reason,
    skipped_reason,
    trigger_of,
)
from sidecar.providers.hedging import Hedges, Race, lost_reason
from sidecar.providers.schemas import CallChecks, check_request
from sidecar.providers.streaming.outlet import Outlet
from sidecar.providers.streaming.prefills import PrefillMemory

__all__ = ["HOP_MESSAGE_CHARS", "HOP_REASON_CHARS", "MIXED_PROVIDERS", "SERVED", "RouteCaller", "route_of"]

MIXED_PROVIDERS = "multiple"
"""The provider of a route's chat span when its deployments speak different wire formats."""

Run = Callable[[ModelRequest, CallOptions, Any, "Outlet | None"], Awaitable[ModelResponse]]
"""ModelService's one model call for a deployment (the request's model is the deployment)."""
ServerOf = Callable[[str], tuple[str, int | None] | None]
Place = tuple[str, HopRole, int]
"""A hop's deployment, its role and its number in the chain (1-based)."""
HopResult = tuple[Hop, "HopTally | None", ModelResponse | None, SidecarFailure | None]
"""One hop tried: the hop as listed, what it spent, and its reply or its failure (neither: it lost a race)."""
_log = logging.getLogger("sidecar.routes")


def _served(tried: HopResult) -> bool:
    """Whether a racer's hop returned a reply (for a non-streamed call, its first token)."""
    return tried[2] is not None


def route_of(route_id: str, config: Config) -> Route:
    """The policy's view of a configured route."""
    r = config.routes[route_id].route
    return Route(
        name=route_id,
        balance=tuple(r.balance.items()),
        fallbacks=tuple(r.fallbacks),
        context_fallback=r.context_fallback,
        move_on=r.move_on_kinds,
        hedge=r.hedge,
    )


class RouteCaller:
    """Every configured route, its deployments' circuits, and the chain of one call."""

    def __init__(
        self,
        config: Config,
        clock: Clock,
        observer: Observer,
        rng: random.Random,
        *,
        run: Run,
        checks: CallChecks,
        server_of: ServerOf,
        state: StateBackend = MEMORY,
    ) -> None:
        self._config = config
        self.prefills = PrefillMemory()
        """The deployments found to refuse a prefill, every call's (``ModelService`` carries it across reloads)."""
        self._clock = clock
        self._observer = observer
        self._rng = rng
        self._run = run
        self._checks = checks
        self._server_of = server_of
        self._routes = {rid: route_of(rid, config) for rid in config.routes}
        circuits = {
            d: ServiceConfig(circuit=entry.route.deployment_circuit)
            for entry in config.routes.values()
            for d, _ in entry.route.named()
        }
        shared = Namespaced(state, DEPLOYMENT_NAMESPACE)  # fleet-wide with a shared backend, like tool services'
        self._guards = ServiceGuards(circuits, DEPLOYMENT_CIRCUIT, clock, observer=observer, state=shared)
        self._hedges = Hedges(clock, config.model_retries, self._closed)
        """Whether and when a hop is hedged; each raced deployment's times to first token."""
        self._aside: set[asyncio.Task[None]] = set()
        """The probes out on the side (``_probe_aside``), cancelled by ``aclose``."""

    def is_route(self, model_id: str) -> bool:
        return model_id in self._routes

    @property
    def guards(self) -> ServiceGuards:
        """Every deployment's circuit (for the fleet view and the circuit gauge)."""
        return self._guards

    def guard(self, deployment: str) -> ServiceGuard:
        """The circuit of a deployment (created on first use, shared by every route using it)."""
        return self._guards.get(deployment)

    def call_start(self, request: ModelRequest, *, streamed: bool = False) -> ModelCallStart:
        """The route's ``chat`` span: its provider is the deployments' wire format when they share one."""
        route = self._routes[request.model]
        models, providers = self._config.models, self._config.providers
        formats = {providers[models[d].provider].wire_format for d, _, _ in route.deployments}
        provider = formats.pop() if len(formats) == 1 else MIXED_PROVIDERS
        return ModelCallStart(
            request, known=True, provider=provider, max_tokens=request.max_output_tokens, streamed=streamed
        )

    async def call(
        self, request: ModelRequest, options: CallOptions, record: Any, outlet: Outlet | None = None
    ) -> ModelResponse:
        """The reply of the first deployment that serves it, or the chain's failure raised.

        A stream (``outlet``) fails over as a call does until deltas have reached the caller; after
        that, only under the restart policy (``mid_stream``), with a FAILOVER restart voiding them,
        or under continue to a deployment that accepts a prefill, continuing them.
        """
        route = self._routes[request.model]
        await self._check(route, request, options)
        chain = Chain(route, self._config)
        queue = route.order(self._rng)
        stopped = hedged = False
        try:
            while queue:
                deployment, role = queue.pop(0)
                if options.deadline is not None and self._clock.time() >= options.deadline:
                    raise chain.failure(True, [deployment, *(d for d, _ in queue)])
                number = len(chain.hops) + 1
                hop_options = replace(
                    options,
                    timeouts_move_on=timeout_moves_on(route, bool(queue)),
                    overflow_moves_on=route.context_fallback not in (None, deployment, *chain.tried),
                )
                aside = self._may_probe_aside(route, queue)
                place = (deployment, role, number)
                after = queue[0][0] if queue else None
                if route.hedge is None or hedged or not self._hedges.may_hedge(deployment, after, options, outlet):
                    tried = [await self._hop(route, place, request, hop_options, outlet, aside=aside)]
                else:
                    tried, hedged = await self._raced(route, place, request, hop_options, outlet, aside, queue)
                response = failure = None
                for hop, tally, served, failed in tried:
                    chain.hops.append(hop)
                    if tally is not None:
                        chain.tallies.append((hop.deployment, tally))
                    if served is not None and response is None:  # two replies at once: the first one
                        response, deployment = served, hop.deployment
                    elif failed is not None:
                        failure, deployment = failed, hop.deployment
                if response is not None:
                    return chain.served(response, deployment)
                assert failure is not None
                chain.last = failure
                step = next_step(route, failure.kind, chain.tried, not_carried=isinstance(failure, NotCarried))
                if outlet is not None and outlet.deltas:
                    step = self._after_deltas(step, request, failure, deployment, queue, outlet)
                if step is Next.STOP:
                    stopped = True
                    break
                if step is Next.CONTEXT:
                    assert route.context_fallback is not None
                    queue = [(route.context_fallback, HopRole.CONTEXT)]
                following = queue[0][0] if queue else "nothing: the chain fails"
                _log.warning(
                    "route %s: %s ended with %s; next: %s",
                    route.name,
                    deployment,
                    failure.kind_name,
                    following,
                    extra={"failure_kind": failure.kind_name, "model": route.name, "deployment": deployment},
                )
            raise chain.failure(stopped, [])
        finally:
            record.tally(*chain.totals())

    def _after_deltas(
        self,
        step: Next,
        request: ModelRequest,
        failure: SidecarFailure,
        deployment: str,
        queue: list[tuple[str, HopRole]],
        outlet: Outlet,
    ) -> Next:
        """A hop failed after deltas reached the caller: the stream's mid-stream policy decides.

        restart   a deployment that broke off mid-stream (STREAM_INTERRUPTED: no restart was left on
                  it) or failed in a way that moves on: the next hop, its deltas after a FAILOVER
                  restart that voids what the caller holds
        continue  the same, when the outlet has a continuation to make: the next hop that accepts a
                  prefill (the others are dropped from the queue) continues what the caller holds,
                  after a FAILOVER Continued; none left: the chain stops with this hop's failure
        fail      the chain stops with this hop's failure
        """
        policy = request.mid_stream or self._config.policy.mid_stream
        restarts = policy == MidStream.RESTART
        if failure.kind is FailureKind.STREAM_INTERRUPTED and queue:
            step = Next.MOVE_ON
        if policy == MidStream.CONTINUE:
            return self._continue_on(step, failure, deployment, queue, outlet)
        if step is Next.STOP or not restarts:
            return Next.STOP
        if step is Next.MOVE_ON and not queue:
            return step  # nothing follows: the chain fails with this hop's failure
        going_to = queue[0][0] if step is Next.MOVE_ON else "the context fallback"
        outlet.void(RestartCause.FAILOVER, f"{deployment} failed ({failure.kind_name}); failover to {going_to}")
        return step

    def _continue_on(
        self, step: Next, failure: SidecarFailure, deployment: str, queue: list[tuple[str, HopRole]], outlet: Outlet
    ) -> Next:
        """``_after_deltas`` under continue: on to the next deployment that accepts a prefill, or stop."""
        if step is Next.STOP or not outlet.resumable or step is Next.CONTEXT:
            return Next.STOP  # a context fallback takes a shorter conversation: not this one continued
        queue[:] = [(d, role) for d, role in queue if self._accepts_prefill(d)]
        if not queue:
            return Next.STOP
        going_to = queue[0][0]
        outlet.resume(RestartCause.FAILOVER, f"{deployment} failed ({failure.kind_name}); continued on {going_to}")
        return Next.MOVE_ON

    def _accepts_prefill(self, deployment: str) -> bool:
        model = self._config.models[deployment]
        return self.prefills.accepts(model, self._config.providers[model.provider])

    async def _check(self, route: Route, request: ModelRequest, options: CallOptions) -> None:
        """The request's own checks, before any hop: the same on every deployment."""
        check_request(request, options, self._config)
        await self._checks.request(request)
        asked = request.max_output_tokens
        if asked is not None:
            smallest = min(self._config.models[d].max_output_tokens for d, _, _ in route.deployments)
            if asked > smallest:
                raise InvalidInput(
                    "max_output_tokens",
                    str(asked),
                    f"must be between 1 and {smallest} (the smallest maximum output among route {route.name}'s "
                    "deployments)",
                )

    def _may_probe_aside(self, route: Route, queue: list[tuple[str, HopRole]]) -> bool:
        """Whether a probe here may go on the side: a deployment after it has a closed circuit, and the
        route moves on from a skipped hop (CIRCUIT_OPEN)."""
        if FailureKind.CIRCUIT_OPEN not in route.move_on:
            return False
        return any(self._closed(d) for d, _ in queue)

    def _closed(self, deployment: str) -> bool:
        """Whether a deployment's circuit is closed (or not yet made: no failure seen)."""
        return (guard := self._guards.peek(deployment)) is None or guard.state is CircuitState.CLOSED

    async def _raced(
        self,
        route: Route,
        place: Place,
        request: ModelRequest,
        options: CallOptions,
        outlet: Outlet | None,
        aside: bool,
        queue: list[tuple[str, HopRole]],
    ) -> tuple[list[HopResult], bool]:
        """The hop raced by the next deployment of ``queue`` (taken from it when the hedge goes out): each
        racer's result in the order they started, and whether the hedge went out."""
        deployment, _, number = place
        after, after_role = queue[0]
        race: Race[HopResult] = Race(self._clock, (deployment, after))

        def first() -> Coroutine[Any, Any, HopResult]:
            return self._hop(route, place, request, options, outlet, aside=aside)

        def second() -> Coroutine[Any, Any, HopResult]:
            del queue[0]
            hedge_options = replace(options, timeouts_move_on=timeout_moves_on(route, bool(queue)))
            return self._hop(route, (after, after_role, number + 1), request, hedge_options, outlet, hedge=True)

        if outlet is not None:
            outlet.claim = race.claim
        try:
            tried = await race.run(first, second, self._hedges.at(route.hedge, deployment, options), _served)
        finally:
            if outlet is not None:
                outlet.claim = None
        self._hedges.timed(route.hedge, race)
        return tried, race.hedged

    async def _hop(
        self,
        route: Route,
        place: Place,
        request: ModelRequest,
        options: CallOptions,
        outlet: Outlet | None,
        *,
        aside: bool = False,
        hedge: bool = False,
    ) -> HopResult:
        """One deployment tried: the hop as listed, what it spent, and its reply or its failure.

        A half-open circuit's probe is one attempt: sent on the side when ``aside`` (this call skips
        the deployment at once, CIRCUIT_OPEN), else as this hop, whose failure moves on at once."""
        deployment, role, number = place
        model = self._config.models[deployment]
        server = self._server_of(deployment) or ("", None)
        wire = self._config.providers[model.provider].wire_format
        start = HopStart(route.name, deployment, number, role.value, wire, server[0], server[1])
        guard = self._guards.get(deployment)
        context = contextvars.copy_context()  # the call's span: a probe on the side is its own hop beside this one
        with self._observer.hop(start) as record:
            try:
                admission = await self._admit(guard)
            except CircuitOpen as refusal:
                reason = skipped_reason(deployment, refusal)
                hop = Hop(deployment, FailureKind.CIRCUIT_OPEN, 0, reason, skipped=True, hedge=hedge)
                record.ended(hop)
                return hop, None, None, refusal
            probe = admission.probe and not admission.settled  # settled: the claim lost to a close, an ordinary call
            half_open = guard.refusal() if probe and aside else None  # what this call, skipping it, is told
            if half_open is not None:
                self._probe_aside(route, start, request, guard, admission, context)
                hop = Hop(deployment, FailureKind.CIRCUIT_OPEN, 0, probed_aside_reason(deployment), skipped=True)
                record.ended(hop)
                return hop, None, None, half_open
            tally = HopTally(record)
            hop_options = replace(options, probe=True) if probe else options
            ran = await self._ran(route, guard, admission, request, hop_options, tally, outlet, hedge=hedge)
            return ran[0], tally, ran[1], ran[2]

    async def _ran(
        self,
        route: Route,
        guard: ServiceGuard,
        admission: Admission,
        request: ModelRequest,
        options: CallOptions,
        tally: HopTally,
        outlet: Outlet | None,
        *,
        hedge: bool = False,
    ) -> tuple[Hop, ModelResponse | None, SidecarFailure | None]:
        """The hop's model call run (its circuit settled, its record ended): its reply or its failure; a racer
        that lost (``providers.hedging``): neither, its hop ``cancelled`` (its circuit charged nothing)."""
        deployment, record = guard.name, tally.record
        try:
            response = await self._run(replace(request, model=deployment), options, tally, outlet)
        except asyncio.CancelledError as exc:
            lost = lost_reason(exc)
            why = lost or (SHUTTING_DOWN if JobCancelled.cut(exc) else "cancelled by the caller")
            hop = Hop(deployment, FailureKind.JOB_CANCELLED, tally.attempts, why, hedge=hedge, cancelled=bool(lost))
            record.ended(hop)
            if lost is None:
                raise
            return hop, None, None  # the race's own cancellation, of its own task: the winner goes on
        except Exception as exc:  # a failure of the taxonomy, or a bug (SYSTEM, logged by as_failure)
            failure = as_failure(exc, "the model caller")
            self._settle(route, guard, admission, failure)
            reason = cap(failure.message, HOP_REASON_CHARS)
            hop = Hop(deployment, failure.kind, failure.attempts, reason, hedge=hedge)
            record.ended(hop)
            return hop, None, failure
        else:
            self._settle(route, guard, admission, None)
        finally:
            guard.lost(admission)  # a no-op once settled: only a cancellation is left to release
        hop = Hop(deployment, FailureKind.UNSPECIFIED, response.attempts, SERVED, hedge=hedge)
        record.ended(hop)
        return hop, response, None

    def _probe_aside(
        self,
        route: Route,
        start: HopStart,
        request: ModelRequest,
        guard: ServiceGuard,
        admission: Admission,
        context: contextvars.Context,
    ) -> None:
        """Send the probe on the side: the caller's request, one attempt, within the circuit's probe_timeout_s."""
        options = CallOptions(deadline=self._clock.time() + guard.circuit.probe_timeout_s, probe=True)
        probe = self._probe(route, start, request, guard, admission, options)
        task = asyncio.get_running_loop().create_task(probe, context=context)
        self._aside.add(task)
        task.add_done_callback(self._aside.discard)

    async def _probe(
        self,
        route: Route,
        start: HopStart,
        request: ModelRequest,
        guard: ServiceGuard,
        admission: Admission,
        options: CallOptions,
    ) -> None:
        """The probe on the side: its own ``route.hop`` span in the call's trace; its reply is discarded."""
        with overhead.measured("probe"), self._observer.hop(start) as record:  # not the caller's overhead
            _, _, failure = await self._ran(route, guard, admission, request, options, HopTally(record), None)
        if failure is not None:
            _log.warning(
                "route %s: the probe of %s failed (%s); its circuit reopens",
                route.name,
                start.deployment,
                failure.kind_name,
                extra={"failure_kind": failure.kind_name, "model": route.name, "deployment": start.deployment},
            )

    async def aclose(self) -> None:
        """Cancel the probes still out on the side (each one lost: its circuit reopens, cooldown unchanged)."""
        for task in self._aside:
            task.cancel()
        if self._aside:
            await asyncio.wait(self._aside)

    @staticmethod
    async def _admit(guard: ServiceGuard) -> Admission:
        """The circuit's leave for one hop (CircuitOpen raised: the hop is skipped); a half-open circuit's
        probe is claimed for the fleet before it is sent, as a tool service's is (``ServiceGuard.claim``)."""
        admission = guard.check()
        try:
            await guard.claim(admission)  # shared state only: another replica's probe refuses this call
        except BaseException:
            guard.lost(admission)  # a no-op once settled (a claim lost elsewhere settles it)
            raise
        return admission

    @staticmethod
    def _settle(route: Route, guard: ServiceGuard, admission: Admission, failure: SidecarFailure | None) -> None:
        verdict = settle(route, None if failure is None else failure.kind, 0 if failure is None else failure.attempts)
        if verdict is Settle.SUCCESS:
            guard.success(admission)
        elif verdict is Settle.CHARGE and failure is not None:
            guard.failure(admission, trigger_of(failure), failure.retry_after)
        else:
            guard.lost(admission)
