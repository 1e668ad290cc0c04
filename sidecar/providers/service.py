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
A model id that is a route runs ``providers.routes.RouteCaller``: one hop per deployment, each
hop this same call (``_run``) for that deployment, with its own budget and the call's deadline.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from dataclasses import dataclass, field
from typing import Any

from sidecar.config import Config, ModelConfig
from sidecar.core.clock import Clock
from sidecar.core.conversation import CallOptions, Message, ModelRequest, ModelResponse, Usage
from sidecar.core.details import ReplyDetail
from sidecar.core.kinds import FinishReason, Role
from sidecar.core.model_throttle import ModelThrottle
from sidecar.core.observer import Correction as CorrectionEvent
from sidecar.core.observer import ModelCallStart, Observer, OutputBudgetRaised
from sidecar.core.retry import Attempt, Retry, RetryPolicy, Tally, run_attempts
from sidecar.core.spend import SpendLedger
from sidecar.core.taxonomy import (
    JobCancelled,
    JobTimeout,
    JsonParse,
    ModelNotFound,
    OutputTruncated,
    ProviderRefusal,
    SidecarFailure,
    TokenEstimateExceedsLimit,
    UpstreamRetriesExhausted,
    as_failure,
    log_failure,
)
from sidecar.providers.client import ModelSender, ProviderClient, Spent
from sidecar.providers.pacing import ModelPacer
from sidecar.providers.routes import RouteCaller
from sidecar.providers.schemas import CallChecks, check_request
from sidecar.providers.wire import ChatReply, ChatRequest

__all__ = ["CHARS_PER_TOKEN", "TOKENS_PER_MESSAGE", "ModelService", "estimate_tokens"]

CHARS_PER_TOKEN = 4
"""The estimate: a token per four characters, plus a few per message."""
TOKENS_PER_MESSAGE = 4
_log = logging.getLogger("sidecar.models")


def estimate_tokens(req: ModelRequest) -> int:
    """The conversation's input tokens, estimated (characters / 4, plus 4 per message)."""
    chars = len(req.system) + len(req.response_schema_json)
    for m in req.messages:
        chars += len(m.text) + sum(len(c.arguments_json) + len(c.name) for c in m.tool_calls)
        chars += sum(len(r.content) for r in m.tool_results)
    for t in req.tools:
        chars += len(t.name) + len(t.description) + len(t.parameters_json)
    return math.ceil(chars / CHARS_PER_TOKEN) + TOKENS_PER_MESSAGE * (len(req.messages) + 1)


@dataclass(frozen=True, slots=True)
class _GiveUp:
    """What stopping means for a model call: UPSTREAM_RETRIES_EXHAUSTED, or JOB_TIMEOUT at the deadline."""

    model_id: str
    provider: str
    tally: Tally

    def exhausted(self, retry: Retry, tally: Tally) -> SidecarFailure:
        return UpstreamRetriesExhausted(
            f"Model {self.model_id} ({self.provider})",
            tally.budget,
            retry.signal,
            retry.detail,
            http=retry.http,
            retry_after=retry.retry_after,
        )

    def too_long(self, retry: Retry, max_wait_s: float) -> SidecarFailure:
        return UpstreamRetriesExhausted(
            f"Model {self.model_id} ({self.provider})",
            self.tally.budget,
            retry.signal,
            retry.detail,
            http=retry.http,
            retry_after=retry.retry_after,
            asked_too_long=max_wait_s,
        )

    def past_deadline(self, retry: Retry, wait_s: float, left_s: float) -> SidecarFailure:
        return JobTimeout(
            f"model {self.model_id}",
            f"the next retry would wait {wait_s:.1f} s after a {retry.signal.words} ({retry.detail}), "
            f"but only {left_s:.1f} s remain",
            signal=retry.signal,
            http=retry.http,
            retry_after=wait_s,
            budget=self.tally.budget,
        )


@dataclass(frozen=True, slots=True)
class _Verdict:
    """What one reply means to the call."""

    reply: ChatReply
    parsed: dict[str, Any] | None = None
    raise_budget: bool = False
    correction: SidecarFailure | None = None
    failure: SidecarFailure | None = None
    warning: str = ""


@dataclass(slots=True)
class _Call:
    """One model call's running state, across its runs of the engine."""

    request: ModelRequest
    model: ModelConfig
    checks: CallChecks
    schema: dict[str, Any] | None
    budget_tokens: int
    max_corrections: int
    tally: Tally
    conversation: list[Message]
    spent: Spent = field(default_factory=Spent)
    corrections: int = 0
    raised: bool = False
    warnings: list[str] = field(default_factory=list)

    async def judge(self, reply: ChatReply, attempt: Attempt) -> _Verdict:
        """Refusal, truncation, then the schema; a correction is marked on the attempt's span."""
        model_id = self.request.model
        if reply.refusal is not None or reply.finish is FinishReason.CONTENT_FILTER:
            category = "refusal" if reply.raw_finish in ("refusal", "stop") or reply.refusal else reply.raw_finish
            refusal = ProviderRefusal(model_id, category or "content_filter", reply.refusal or "")
            return _Verdict(reply, failure=refusal)
        if reply.finish is FinishReason.LENGTH:
            if not self.raised and self.budget_tokens < self.model.max_output_tokens:
                return _Verdict(reply, raise_budget=True)
            return _Verdict(reply, failure=OutputTruncated(model_id, self.budget_tokens, self.model.max_output_tokens))
        if self.schema is None or reply.tool_calls:  # a tool call is not the answer yet
            return _Verdict(reply)
        try:  # the caller's schema runs off the event loop, within the time limit (CallChecks)
            parsed, problem = await self.checks.reply(
                reply.text, self.schema, model_id, self.request.response_schema_json
            )
        except JsonParse as failure:
            if self.corrections >= self.max_corrections:
                return _Verdict(reply, failure=failure)
            attempt.record.correction(failure.kind_name)
            return _Verdict(reply, correction=failure)
        if problem is None:
            return _Verdict(reply, parsed=parsed)
        if self.corrections < self.max_corrections:
            attempt.record.correction(problem.kind_name)
            return _Verdict(reply, correction=problem)
        assert isinstance(problem.detail, ReplyDetail)
        fields = "; ".join(f"{f.field} {f.problem}" for f in problem.detail.fields)
        warning = f"required fields still empty after {self.corrections} corrections: {fields}"
        return _Verdict(reply, parsed=parsed, warning=warning)


class ModelService:
    """Every catalog model, its provider's client and its shared throttle."""

    def __init__(
        self,
        config: Config,
        clock: Clock,
        ledger: SpendLedger,
        observer: Observer,
        *,
        embedded: dict[str, str] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._config = config
        self._clock = clock
        self._ledger = ledger
        self._observer = observer
        self._rng = rng or random.Random()
        self._secrets = config.secrets()
        self._checks = CallChecks(config.policy.max_argument_bytes, config.policy.check_time_limit_s)
        self._providers = {
            name: ProviderClient.build(name, p, embedded or {}, self._secrets) for name, p in config.providers.items()
        }
        self._throttles = {
            mid: ModelThrottle(mid, clock, m.requests_per_minute, m.tokens_per_minute, observer=observer)
            for mid, m in config.models.items()
        }
        self.routes = RouteCaller(
            config, clock, observer, self._rng, run=self._run, checks=self._checks, server_of=self.server_of
        )

    def throttle(self, model_id: str) -> ModelThrottle:
        return self._throttles[model_id]

    def model_config(self, model_id: str) -> ModelConfig | None:
        return self._config.models.get(model_id)

    def server_of(self, model_id: str) -> tuple[str, int | None] | None:
        """The provider host and port a model's calls go to (embedded fakes resolved), for spans."""
        model = self._config.models.get(model_id)
        return None if model is None else self._providers[model.provider].server

    async def aclose(self) -> None:
        for p in self._providers.values():
            await p.aclose()

    # ------------------------------------------------------------------ the call

    async def call(self, request: ModelRequest, options: CallOptions) -> ModelResponse:
        """The reply, or the call's failure raised (a SidecarFailure; anything else became SYSTEM)."""
        model = self._config.models.get(request.model)
        server = self.server_of(request.model)
        start = ModelCallStart(
            request,
            known=model is not None,
            provider=self._config.providers[model.provider].wire_format if model else "unknown",
            max_tokens=request.max_output_tokens or (model.output_budget if model else None),
            host=server[0] if server else "",
            port=server[1] if server else None,
        )
        routed = self.routes.is_route(request.model)
        if routed:
            start = self.routes.call_start(request)
        failure: SidecarFailure | None = None
        with self._observer.model_call(start) as record:
            try:
                if routed:
                    call = await self.routes.call(request, options, record)
                else:
                    call = await self._run(request, options, record)
            except asyncio.CancelledError:
                cancelled = JobCancelled(f"model {request.model}")
                log_failure(cancelled, model=request.model)
                record.failed(cancelled)
                raise
            except Exception as exc:  # the one boundary: anything not of the taxonomy is SYSTEM
                failure = as_failure(exc, "the model caller")
                if failure is exc:
                    log_failure(failure, model=request.model)
                record.failed(failure)
            else:
                record.succeeded(call)
                return call
        raise failure

    async def _run(self, request: ModelRequest, options: CallOptions, record: Any) -> ModelResponse:
        max_tokens = check_request(request, options, self._config)
        schema = await self._checks.request(request)  # schemas and history JSON: bounded, large ones off the loop
        model = self._config.models.get(request.model)
        if model is None:
            raise ModelNotFound(request.model, self._config.catalog)
        provider = self._providers[model.provider]
        workflow = request.job.workflow_id
        self._ledger.check(workflow)
        budget_tokens = max_tokens or model.output_budget
        estimate = estimate_tokens(request) + budget_tokens
        if estimate > model.context_window:
            raise TokenEstimateExceedsLimit(request.model, estimate, model.context_window)
        policy = self._config.policy
        tally = Tally(self._config.model_retries(request.model, options.upstream_retries))
        windows = policy.windows_for(model.preset, model.windows)
        max_corrections = model.max_corrections if model.max_corrections is not None else policy.max_corrections
        call = _Call(
            request, model, self._checks, schema, budget_tokens, max_corrections, tally, list(request.messages)
        )
        retry = RetryPolicy(windows, _GiveUp(request.model, provider.name, tally), self._rng)
        pacer = ModelPacer(self._throttles[request.model], estimate, self._clock, tally, windows.max_wait_s)
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
                )
                sender = ModelSender(
                    provider,
                    request.model,
                    model,
                    chat,
                    judge=call.judge,
                    spent=call.spent,
                    ledger=self._ledger,
                    workflow=workflow,
                    secrets=self._secrets,
                    now=self._clock.wall,
                )
                verdict: _Verdict = await run_attempts(
                    sender,
                    policy=retry,
                    clock=self._clock,
                    deadline=options.deadline,
                    pacer=pacer,
                    observer=self._observer,
                    tally=tally,
                )
                if verdict.failure is not None:
                    raise verdict.failure
                if verdict.raise_budget:
                    call.raised = True
                    call.budget_tokens = model.max_output_tokens
                    self._observer.event(OutputBudgetRaised(call.budget_tokens))
                    continue
                if verdict.correction is not None:
                    self._correct(call, verdict.reply, verdict.correction)
                    continue
                if verdict.warning:
                    call.warnings.append(verdict.warning)
                    _log.warning(
                        "%s: %s", request.model, verdict.warning, extra={"failure_kind": "RESPONSE_VALIDATION"}
                    )
                return self._response(call, provider.name, verdict)
        except SidecarFailure as failure:
            failure.with_attempts(tally.attempts)
            raise
        finally:
            record.tally(tally.attempts, call.corrections, call.spent.input_tokens, call.spent.output_tokens)

    def _correct(self, call: _Call, reply: ChatReply, problem: SidecarFailure) -> None:
        call.corrections += 1
        call.conversation.append(Message(Role.ASSISTANT, reply.text, tuple(reply.tool_calls)))
        call.conversation.append(Message(Role.USER, problem.explain_to_llm()))
        self._observer.event(CorrectionEvent(problem.kind_name, call.corrections))
        _log.warning("correction %d: %s", call.corrections, problem.message, extra={"failure_kind": problem.kind_name})

    @staticmethod
    def _response(call: _Call, provider: str, verdict: _Verdict) -> ModelResponse:
        reply = verdict.reply
        return ModelResponse(
            message=Message(Role.ASSISTANT, reply.text, tuple(reply.tool_calls)),
            finish_reason=reply.finish,
            usage=Usage(reply.input_tokens, reply.output_tokens),
            parsed=verdict.parsed,
            attempts=call.tally.attempts,
            corrections=call.corrections,
            output_budget_raised=call.raised,
            warnings=tuple(call.warnings),
            provider=provider,
            response_model=reply.response_model,
            total_usage=Usage(call.spent.input_tokens, call.spent.output_tokens),
            cost_usd=call.spent.cost_usd,
            response_id=reply.response_id,
            raw_finish=reply.raw_finish,
            served_by=call.request.model,
        )
