"""A model call, whole: checks, the catalog, the spend cap, the token estimate, then attempts.

    request checks -> catalog -> spend cap -> token estimate
    run_attempts (the one retry engine: model throttle, signals, windows, Retry-After, budget, deadline)
    each reply, judged while its attempt's span is open:
        refusal / content filter     -> PROVIDER_REFUSAL (never re-rolled)
        cut off at the output limit  -> once more at the model's maximum, else OUTPUT_TRUNCATED
        schema asked, reply unusable -> the failure's explanation sent back (at most max_corrections);
                                        past them a parse failure fails, empty fields are a warning
        else                         -> the reply

Corrections and re-runs are further runs of the engine within the same call: they share its
attempt count, its retry budget and its deadline. Every door (gRPC, the HTTP fronts) runs this.
The request fitted to its deployment (the token estimate) is ``fitting``'s, each reply's verdict
``judging``'s, what giving up means ``give_up``'s.

CallModel and StreamModel are one path (``_observed`` -> ``_run``); a stream differs only in
what it hands the engine and what it tells its caller on the way::

                          call(request, options)         stream(request, options)
    the call's span       chat {model}                   the same, sidecar.streamed = true
    one attempt           client.ModelSender (whole)     streaming.sender.StreamSender (SSE, deltas to the Outlet)
    giving up             UPSTREAM_RETRIES_EXHAUSTED,    the same, but STREAM_INTERRUPTED (the partial text)
                          JOB_TIMEOUT at the deadline    when a mid-stream fault left no restart
    a truncation re-run   the engine again               the same; what the caller holds is voided
    a correction          the engine again               (Restart TRUNCATED / CORRECTION before the next deltas)
    mid-stream, continue  -                              the engine's next attempt, prefilled with the text the
                                                         caller holds (Continued before its deltas)
    the reply             returned                       the Final event (the same ModelResponse), last
    a failure             raised                         raised by the iterator after the events before it
    cancelled             JOB_CANCELLED                  the same; JOB_TIMEOUT when the deadline had passed

``stream`` runs the call in a task of its own that fills the Outlet (``STREAM_BUFFER_EVENTS``)
while the iterator drains it; closing the iterator (the caller cancelled, the deadline) cancels
that task, which closes the upstream response and ends the attempt span "cancelled".

A model id that is a route runs ``providers.routes.RouteCaller``: one hop per deployment, each
hop this same call (``_run``) for that deployment, with its own budget and the call's deadline;
a stream's hops share its Outlet (a hop after deltas reached the caller goes on only under the
restart policy, announced by a FAILOVER restart, or under continue to a deployment that accepts a
prefill, announced by a FAILOVER Continued).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncGenerator
from dataclasses import replace
from functools import partial

from sidecar.config import Config, ModelConfig
from sidecar.core import overhead
from sidecar.core.clock import Clock
from sidecar.core.compaction.cache import SharedSummaries
from sidecar.core.content import check_content
from sidecar.core.conversation import (
    CallOptions,
    Compaction,
    Message,
    ModelRequest,
    ModelResponse,
    Overflow,
    Usage,
)
from sidecar.core.draining import CallCount
from sidecar.core.failure_log import FailureLog
from sidecar.core.kinds import FailureKind, Role
from sidecar.core.model_throttle import ModelThrottle
from sidecar.core.observer import CallRecord, ModelCallStart, Observer, OutputBudgetRaised, OverheadMeasured
from sidecar.core.observer import Correction as CorrectionEvent
from sidecar.core.retry import RetryPolicy, Sender, Tally, run_attempts
from sidecar.core.spend import SpendLedger, cost_of
from sidecar.core.state import MEMORY, StateBackend
from sidecar.core.stream import RestartCause, StreamEvent
from sidecar.core.taxonomy import (
    InvalidInput,
    JobCancelled,
    JobTimeout,
    ModelNotFound,
    NotCarried,
    SidecarFailure,
    TokenEstimateExceedsLimit,
    as_failure,
)
from sidecar.core.text import clause
from sidecar.providers.client import CallScope, ModelSender, ProviderClient
from sidecar.providers.compacting import Compactor, plan
from sidecar.providers.fitting import estimate_tokens, limits, own_reasoning
from sidecar.providers.formats.chat import ChatReply, ChatRequest
from sidecar.providers.formats.registry import check_options
from sidecar.providers.give_up import GiveUp, StreamGiveUp
from sidecar.providers.hedging import lost_reason
from sidecar.providers.judging import Call, Verdict, response_of
from sidecar.providers.pacing import ModelPacer
from sidecar.providers.routes import RouteCaller
from sidecar.providers.schemas import CallChecks, check_request
from sidecar.providers.streaming.outlet import Outlet
from sidecar.providers.streaming.sender import StreamSender

__all__ = ["ModelService"]

_log = logging.getLogger("sidecar.models")


class ModelService:
    """Every catalog model, its provider's client and its shared throttle.

    Built again for each config a reload applies, from the one before (``carry``): a model kept
    keeps its throttle (the same object while its rates stay, else a new one at the new rates
    that starts at the old level and pause), a route deployment kept keeps its circuit. The calls
    in flight on the old service finish there (``calls``); new calls go to the new one.
    """

    def __init__(
        self,
        config: Config,
        clock: Clock,
        ledger: SpendLedger,
        observer: Observer,
        *,
        embedded: dict[str, str] | None = None,
        rng: random.Random | None = None,
        state: StateBackend = MEMORY,
        carry: ModelService | None = None,
    ) -> None:
        self._config = config
        self._clock = clock
        self.failures: FailureLog = carry.failures if carry is not None else FailureLog(clock)  # kept across reloads
        self._ledger = ledger
        self.calls = CallCount()
        """The calls in flight on this service (a reload waits for them before closing it)."""
        self._observer = observer
        self._rng = rng or random.Random()
        self._secrets = config.secrets
        self._checks = CallChecks(config.policy.max_argument_bytes, config.policy.check_time_limit_s)
        self._providers = {
            name: ProviderClient.build(name, p, embedded or {}, self._secrets) for name, p in config.providers.items()
        }
        self._throttles = {mid: self._throttle_of(mid, m, carry) for mid, m in config.models.items()}
        self.routes = RouteCaller(
            config,
            clock,
            observer,
            self._rng,
            run=self._run,
            checks=self._checks,
            server_of=self.server_of,
            state=state,
        )
        self.compactor = Compactor(
            lambda asked, opts: self._observed(asked, opts, None),
            observer,
            state if isinstance(state, SharedSummaries) else None,
            self.model_config,
        )
        if carry is not None:  # a reload: the summaries made are still good
            self.compactor.cache = carry.compactor.cache
        if carry is not None:  # a reload: the route deployments kept keep their circuits
            self.routes.guards.carry(carry.routes.guards)
            self.routes.prefills.carry(carry.routes.prefills)  # and what was learned of prefills

    def _throttle_of(self, model_id: str, model: ModelConfig, carry: ModelService | None) -> ModelThrottle:
        """A model's throttle: the one ``carry`` held for it while its rates stay, else a new one (at
        the old one's level and pause, when there was one)."""
        rates = (model.requests_per_minute, model.tokens_per_minute)
        old = carry._throttles.get(model_id) if carry is not None else None
        before = carry._config.models.get(model_id) if carry is not None else None
        if old is not None and before is not None and (before.requests_per_minute, before.tokens_per_minute) == rates:
            return old
        throttle = ModelThrottle(model_id, self._clock, *rates, observer=self._observer)
        if old is not None:  # new rates: its pacing starts again, its pressure does not
            throttle.raised_elsewhere(old.throttle, 0.0)
            if (left := old.pause_left()) > 0:
                throttle.paused_elsewhere(left, old.pause_age())
        return throttle

    def throttle(self, model_id: str) -> ModelThrottle:
        return self._throttles[model_id]

    def model_config(self, model_id: str) -> ModelConfig | None:
        return self._config.models.get(model_id)

    def server_of(self, model_id: str) -> tuple[str, int | None] | None:
        """The provider host and port a model's calls go to (embedded fakes resolved), for spans."""
        model = self._config.models.get(model_id)
        return None if model is None else self._providers[model.provider].server

    async def aclose(self) -> None:
        await self.routes.aclose()  # the probes out on the side, before their providers' clients close
        for p in self._providers.values():
            await p.aclose()

    # ------------------------------------------------------------------ the call

    async def call(self, request: ModelRequest, options: CallOptions) -> ModelResponse:
        """The reply, or the call's failure raised (a SidecarFailure; anything else became SYSTEM)."""
        return await self._observed(request, options, None)

    def stream(self, request: ModelRequest, options: CallOptions) -> AsyncGenerator[StreamEvent, None]:
        """The reply as events (``core.stream``), ``Final`` last; the call's failure raised after the
        events sent before it. Closing the iterator early cancels the call (JOB_CANCELLED).

        Counted in ``calls`` from this call on (a door may start iterating later), until the
        iterator ends."""
        self.calls.__enter__()
        return self._stream(request, options)

    async def _stream(self, request: ModelRequest, options: CallOptions) -> AsyncGenerator[StreamEvent, None]:
        try:
            outlet = Outlet(self._observer, self._secrets)
            producer = asyncio.get_running_loop().create_task(self._produce(request, options, outlet))
            why: tuple[object, ...] = ()
            try:
                async for event in outlet.drain():
                    yield event
            except asyncio.CancelledError as exc:
                why = exc.args  # a shutdown's cut says so (SHUTTING_DOWN): the producer hears the same
                raise
            finally:
                if not producer.done():
                    producer.cancel(*why)
                await asyncio.wait([producer])  # the upstream closed, the spans ended, before the door answers
        finally:
            self.calls.__exit__(None, None, None)

    async def _produce(self, request: ModelRequest, options: CallOptions, outlet: Outlet) -> None:
        try:
            response = await self._observed(request, options, outlet)
        except SidecarFailure as failure:
            await outlet.end(failure)
            return
        await outlet.final(response)
        await outlet.end(None)

    async def _observed(self, request: ModelRequest, options: CallOptions, outlet: Outlet | None) -> ModelResponse:
        """The call inside its span (``chat {model}``): the one boundary of its failures."""
        with self.calls:
            return await self._observed_call(request, options, outlet)

    async def _observed_call(self, request: ModelRequest, options: CallOptions, outlet: Outlet | None) -> ModelResponse:
        model = self._config.models.get(request.model)
        server = self.server_of(request.model)
        start = ModelCallStart(
            request,
            known=model is not None,
            provider=self._config.providers[model.provider].wire_format if model else "unknown",
            max_tokens=request.max_output_tokens or (model.output_budget if model else None),
            host=server[0] if server else "",
            port=server[1] if server else None,
            streamed=outlet is not None,
        )
        routed = self.routes.is_route(request.model)
        if routed:
            start = self.routes.call_start(request, streamed=outlet is not None)
        with overhead.joined() as watch:
            event, name, known = self._observer.event, request.model, start.known
            watch.at_end(lambda seconds: event(OverheadMeasured("chat", name, known, watch.door, seconds)))
            return await self._recorded(request, options, outlet, start, routed)

    async def _recorded(
        self, request: ModelRequest, options: CallOptions, outlet: Outlet | None, start: ModelCallStart, routed: bool
    ) -> ModelResponse:
        failure: SidecarFailure | None = None
        with self._observer.model_call(start) as record:
            try:
                if routed:
                    call = await self.routes.call(request, options, record, outlet)
                else:
                    call = await self._run(request, options, record, outlet)
            except asyncio.CancelledError as exc:
                cancelled = self._cancelled(request, options, outlet, by_shutdown=JobCancelled.cut(exc))
                self.failures.failed(cancelled, model=request.model)
                record.failed(cancelled)
                raise
            except Exception as exc:  # the one boundary: anything not of the taxonomy is SYSTEM
                failure = as_failure(exc, "the model caller")
                if failure is exc:
                    self.failures.failed(failure, model=request.model)
                record.failed(failure)
            else:
                record.succeeded(call)
                return call
        raise failure

    def _cancelled(
        self, request: ModelRequest, options: CallOptions, outlet: Outlet | None, *, by_shutdown: bool = False
    ) -> SidecarFailure:
        """What a cancelled call is: JOB_CANCELLED; a stream the door closed at its deadline: JOB_TIMEOUT."""
        target = f"model {request.model}"
        deadline = options.deadline
        if outlet is not None and deadline is not None and self._clock.time() >= deadline:
            return JobTimeout(target, "the deadline passed while the reply was streaming")
        return JobCancelled(target, by_shutdown=by_shutdown)

    async def _compactor_run(
        self,
        request: ModelRequest,
        model: ModelConfig,
        strategies: tuple[str, ...],
        trigger: str,
        budget: int,
        options: CallOptions,
        warnings: list[str],
    ) -> tuple[ModelRequest, Compaction]:
        """The request compacted (``providers.compacting``); CONTEXT_OVERFLOW when even that does not fit."""
        compacted, compaction = await self.compactor.compact(
            request, model, strategies, trigger=trigger, budget=budget, options=options, warnings=warnings
        )
        _log.info(
            "%s: compacted (%s) from %d to %d estimated tokens: %s",
            request.model,
            trigger,
            compaction.tokens_before,
            compaction.tokens_after,
            ", ".join(s.strategy for s in compaction.steps),
        )
        return compacted, compaction

    async def _run(
        self, request: ModelRequest, options: CallOptions, record: CallRecord, outlet: Outlet | None = None
    ) -> ModelResponse:
        max_tokens = check_request(request, options, self._config)
        schema = await self._checks.request(request)  # schemas and history JSON: bounded, large ones off the loop
        model = self._config.models.get(request.model)
        if model is None:
            raise ModelNotFound(request.model, self._config.catalog)
        check_content(request, limits(request.model, model))
        check_options(request.controls.provider_options_json)
        provider = self._providers[model.provider]
        request, dropped = own_reasoning(request, provider.config.wire_format)
        try:
            provider.upstream.check(request, request.model)
        except InvalidInput as refused:  # this deployment's format: a route's next deployment may carry it
            raise NotCarried.of(refused) from None
        workflow = request.job.workflow_id
        self._ledger.check(workflow)
        budget_tokens = max_tokens or model.output_budget
        overflow = plan(request, model)
        # a route's context_fallback not tried yet takes an overflow first: the whole conversation, nothing lost
        compacts = overflow.compact and not options.overflow_moves_on
        compaction: Compaction | None = None
        compaction_warnings: list[str] = []
        estimate = estimate_tokens(request) + budget_tokens
        if estimate > model.context_window:
            if not compacts:
                raise TokenEstimateExceedsLimit(request.model, estimate, model.context_window)
            request, compaction = await self._compactor_run(
                request, model, overflow.strategies, Overflow.ESTIMATE, budget_tokens, options, compaction_warnings
            )
            estimate = estimate_tokens(request) + budget_tokens
        policy = self._config.policy
        # a circuit's probe is one attempt: the caller's time is not spent retrying a deployment still down
        tally = Tally(0 if options.probe else self._config.model_retries(request.model, options.upstream_retries))
        windows = policy.windows_for(model.preset, model.windows, options.preset)
        max_corrections = model.max_corrections if model.max_corrections is not None else policy.max_corrections
        call = Call(request, model, self._checks, schema, budget_tokens, max_corrections, tally, list(request.messages))
        call.warnings.extend(compaction_warnings)
        if dropped:
            call.warnings.append(dropped)
            _log.warning("%s: %s", request.model, dropped)
        give_up = GiveUp(request.model, provider.name, tally, probe=options.probe)
        retry = RetryPolicy(windows, give_up if outlet is None else StreamGiveUp(give_up, outlet), self._rng)
        mid_stream = request.mid_stream or policy.mid_stream
        # a prefill continues text only where the format allows it (Anthropic: not with thinking on)
        prefill = self.routes.prefills.accepts(model, provider.config) and request.controls.reasoning is None
        learns = self.routes.prefills.learns(model, provider.config)
        input_tokens = estimate - budget_tokens  # estimate_tokens(request), counted once above
        pacer = ModelPacer(self._throttles[request.model], estimate, self._clock, tally, windows.max_wait_s)
        scope = CallScope(
            provider,
            request.model,
            model,
            call.judge,
            call.spent,
            self._ledger,
            workflow,
            self._secrets,
            self._clock,
            heard=pacer.heard,
        ).timed(
            model.timeouts(provider.config, policy.preset or options.preset),
            moves_on=options.timeouts_move_on,
            probe=options.probe,
        )
        try:
            while True:
                chat = ChatRequest(
                    upstream_model=model.upstream_model,
                    system=request.system,
                    messages=call.conversation,
                    tools=list(request.tools),
                    response_schema=schema,
                    max_tokens=call.budget_tokens,
                    temperature=request.temperature,
                    controls=request.controls,
                    carried=request.carried,
                )
                sender: Sender[Verdict] = (
                    ModelSender(scope, chat)
                    if outlet is None
                    else StreamSender(
                        scope,
                        chat,
                        outlet=outlet,
                        mid_stream=mid_stream,
                        prefill=prefill,
                        input_tokens=input_tokens,
                        refused=partial(self.routes.prefills.refused, request.model, model, provider.config)
                        if learns
                        else None,
                    )
                )
                try:
                    verdict: Verdict = await run_attempts(
                        sender,
                        policy=retry,
                        clock=self._clock,
                        deadline=options.deadline,
                        pacer=pacer,
                        observer=self._observer,
                        tally=tally,
                    )
                except SidecarFailure as said:
                    # the provider's count beat the estimate: compacted once more, then tried again once
                    if not (
                        compacts
                        and said.kind is FailureKind.CONTEXT_OVERFLOW
                        and (compaction is None or compaction.trigger != Overflow.PROVIDER)
                        and (outlet is None or not outlet.deltas)
                        and call.corrections == 0
                    ):
                        raise
                    request, compaction = await self._compactor_run(
                        request,
                        model,
                        overflow.strategies,
                        Overflow.PROVIDER,
                        call.budget_tokens,
                        options,
                        call.warnings,
                    )
                    if not compaction.steps:  # nothing to compact: the provider's own words stand
                        raise
                    call.request = request
                    call.conversation = list(request.messages)
                    continue
                if verdict.failure is not None:
                    raise verdict.failure
                if verdict.raise_budget:
                    if outlet is not None:
                        cut = f"the reply was cut off at {call.budget_tokens} output tokens"
                        outlet.void(RestartCause.TRUNCATED, f"{cut}: run again with {model.max_output_tokens}")
                    call.raised = True
                    call.budget_tokens = model.max_output_tokens
                    self._observer.event(OutputBudgetRaised(call.budget_tokens))
                    continue
                if verdict.correction is not None:
                    if outlet is not None:
                        problem = verdict.correction
                        reason = f"the reply was not the JSON asked for ({clause(problem.message)}): sent back"
                        outlet.void(RestartCause.CORRECTION, reason)
                    self._correct(call, verdict.reply, verdict.correction)
                    continue
                if verdict.warning:
                    call.warnings.append(verdict.warning)
                    _log.warning(
                        "%s: %s", request.model, verdict.warning, extra={"failure_kind": "RESPONSE_VALIDATION"}
                    )
                if outlet is not None:  # a re-run that wrote nothing still voids what the caller holds
                    await outlet.flush(tally.attempts)
                response = response_of(call, provider.name, verdict, outlet)
                return response if compaction is None else replace(response, compaction=compaction)
        except SidecarFailure as failure:
            failure.with_attempts(tally.attempts)
            raise
        except asyncio.CancelledError as exc:
            if tally.attempts and lost_reason(exc) is not None:
                self._bill_lost(call, model, workflow, input_tokens)
            raise
        finally:
            record.tally(tally.attempts, call.corrections, call.spent.usage)

    def _bill_lost(self, call: Call, model: ModelConfig, workflow: str, input_tokens: int) -> None:
        """A hop cancelled for losing a hedged race: what its provider bills, estimated (the prompt it read; no
        token of its had come, or it would have won; what it generated unsent is not known, so not counted)."""
        usage = Usage(input_tokens, 0)
        call.spent.usage += usage
        usd = cost_of(model, usage)
        call.spent.cost_usd += usd
        self._ledger.record(workflow, usd)

    def _correct(self, call: Call, reply: ChatReply, problem: SidecarFailure) -> None:
        call.corrections += 1
        call.conversation.append(Message(Role.ASSISTANT, reply.text, tuple(reply.tool_calls)))
        call.conversation.append(Message(Role.USER, problem.explain_to_llm()))
        self._observer.event(CorrectionEvent(problem.kind_name, call.corrections))
        _log.warning("correction %d: %s", call.corrections, problem.message, extra={"failure_kind": problem.kind_name})
