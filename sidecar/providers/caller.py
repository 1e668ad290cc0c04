"""CallModel's policy: check, throttle, send, retry the signals, correct, raise the budget once.

request checks -> catalog -> spend cap -> token estimate
loop:
    model throttle (pause, buckets) -> send one attempt
    signal (429 / 529 / transient)  -> within one budget per call, wait (Retry-After, else the
                                       signal's window), never past the deadline
    refusal / content filter        -> PROVIDER_REFUSAL (never re-rolled)
    cut off at the output limit     -> once more at the model's maximum, else OUTPUT_TRUNCATED
    schema asked, reply unusable    -> the failure's explanation sent back (at most max_corrections)
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
from dataclasses import dataclass, field
from typing import Any

import httpx
from google.protobuf import struct_pb2
from opentelemetry import propagate, trace
from sidecar_client._proto.sidecar.v1 import sidecar_pb2 as pb

from sidecar.config import Config, ModelConfig, ProviderConfig, Windows
from sidecar.core.backoff import signal_window, window_wait
from sidecar.core.clock import Clock
from sidecar.core.model_throttle import ModelThrottle, Overdue
from sidecar.core.netbackend import fast_transport
from sidecar.core.spend import SpendLedger, cost_of
from sidecar.core.taxonomy import (
    InvalidInput,
    JobTimeout,
    JsonParse,
    ModelNotFound,
    OutputTruncated,
    ProviderRefusal,
    SidecarFailure,
    TokenEstimateExceedsLimit,
    UpstreamRetriesExhausted,
    kind_name,
    signal_words,
)
from sidecar.core.text import endpoint_of
from sidecar.core.transport import fault_of, read_capped
from sidecar.providers.anthropic import AnthropicAdapter
from sidecar.providers.errors import Signal, Target, classify_response
from sidecar.providers.openai import OpenAIAdapter
from sidecar.providers.schemas import CallChecks
from sidecar.providers.wire import Adapter, ChatReply, ChatRequest
from sidecar.telemetry import names as n
from sidecar.telemetry.metrics import Metrics
from sidecar.telemetry.tracing import Tracer, use_span

__all__ = ["CallResult", "ModelCaller", "estimate_tokens"]

MAX_UPSTREAM_RETRIES = 100
"""A caller's ``job.upstream_retries`` above this is refused (the config allows no more either)."""
MAX_REPLY_BYTES = 16 * 1024 * 1024
"""A provider answer is read up to this many bytes; a longer one is cut (and will not parse)."""
CHARS_PER_TOKEN = 4
"""The estimate: a token per four characters, plus a few per message."""
TOKENS_PER_MESSAGE = 4
_tracer = Tracer(n.TRACER)
_log = logging.getLogger("sidecar.models")
_SIGNAL_ATTR: dict[int, str] = {
    pb.RETRY_SIGNAL_RATE_LIMIT: "rate_limit",
    pb.RETRY_SIGNAL_OVERLOAD: "overload",
    pb.RETRY_SIGNAL_TRANSIENT: "transient",
}


def estimate_tokens(req: pb.CallModelRequest) -> int:
    chars = len(req.system) + len(req.response_schema_json)
    for m in req.messages:
        chars += len(m.text) + sum(len(c.arguments_json) + len(c.name) for c in m.tool_calls)
        chars += sum(len(r.content) for r in m.tool_results)
    for t in req.tools:
        chars += len(t.name) + len(t.description) + len(t.parameters_json)
    return math.ceil(chars / CHARS_PER_TOKEN) + TOKENS_PER_MESSAGE * (len(req.messages) + 1)


@dataclass(slots=True)
class _Provider:
    name: str
    config: ProviderConfig
    adapter: Adapter
    client: httpx.AsyncClient
    endpoint: str
    api_key: str | None


@dataclass(slots=True)
class _State:
    model_id: str
    model: ModelConfig
    provider: _Provider
    budget: int
    windows: Windows
    deadline: float | None
    workflow: str = ""
    attempts: int = 0
    retries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    warnings: list[str] = field(default_factory=list)


@dataclass(slots=True)
class CallResult:
    response: pb.CallModelResponse
    reply: ChatReply


class ModelCaller:
    def __init__(
        self,
        config: Config,
        clock: Clock,
        ledger: SpendLedger,
        embedded: dict[str, str] | None = None,
        rng: random.Random | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self._config = config
        self._clock = clock
        self._ledger = ledger
        self._rng = rng or random.Random()
        self._metrics = metrics or Metrics()
        self._secrets = config.secrets()
        self._checks = CallChecks(config.policy.max_argument_bytes, config.policy.check_time_limit_s)
        self._providers = {
            name: self._provider(name, p, embedded or {}, self._secrets) for name, p in config.providers.items()
        }
        self._throttles = {
            mid: ModelThrottle(mid, clock, m.requests_per_minute, m.tokens_per_minute)
            for mid, m in config.models.items()
        }

    def throttle(self, model_id: str) -> ModelThrottle:
        return self._throttles[model_id]

    async def aclose(self) -> None:
        for p in self._providers.values():
            await p.client.aclose()

    @staticmethod
    def _provider(name: str, cfg: ProviderConfig, embedded: dict[str, str], secrets: list[str]) -> _Provider:
        base = cfg.base_url
        if base.startswith("embedded://"):
            rest = base[len("embedded://") :]
            key, _, tail = rest.partition("/")
            base = embedded.get(key, "http://127.0.0.1:9").rstrip("/") + ("/" + tail if tail else "")
        adapter: Adapter = OpenAIAdapter() if cfg.wire_format == "openai" else AnthropicAdapter(cfg.anthropic_version)
        client = httpx.AsyncClient(
            base_url=base,
            headers={**cfg.headers, **adapter.headers(cfg.api_key.get_secret_value() if cfg.api_key else None)},
            transport=fast_transport(
                httpx.Limits(
                    max_connections=cfg.max_connections, max_keepalive_connections=cfg.max_keepalive_connections
                )
            ),
            timeout=httpx.Timeout(cfg.timeout_s, connect=cfg.connect_timeout_s),
            trust_env=False,
        )
        endpoint = endpoint_of(base.rstrip("/") + adapter.path(), secrets)  # a key in base_url's path is masked
        api_key = cfg.api_key.get_secret_value() if cfg.api_key else None
        return _Provider(name, cfg, adapter, client, endpoint, api_key)

    def model_config(self, model_id: str) -> ModelConfig | None:
        return self._config.models.get(model_id)

    def server_of(self, model_id: str) -> tuple[str, int | None] | None:
        """The provider host and port a model's calls go to (embedded fakes resolved), for spans."""
        model = self._config.models.get(model_id)
        if model is None:
            return None
        url = self._providers[model.provider].client.base_url
        return url.host, url.port

    # ------------------------------------------------------------------ the call

    async def call(self, req: pb.CallModelRequest, deadline: float | None) -> CallResult:
        max_tokens = self._check_request(req)
        schema = await self._checks.request(req)  # schemas and history JSON: bounded, large ones off the loop
        model = self._config.models.get(req.model)
        if model is None:
            raise ModelNotFound(req.model, sorted(self._config.models))
        provider = self._providers[model.provider]
        workflow = req.job.workflow_id
        self._ledger.check(workflow)
        budget_tokens = max_tokens or model.output_budget
        estimate = estimate_tokens(req) + budget_tokens
        if estimate > model.context_window:
            raise TokenEstimateExceedsLimit(req.model, estimate, model.context_window)
        policy = self._config.policy
        retries = req.job.upstream_retries if req.job.HasField("upstream_retries") else None
        state = _State(
            model_id=req.model,
            model=model,
            provider=provider,
            budget=retries if retries is not None else (model.upstream_retries or policy.upstream_retries),
            windows=policy.windows_for(model.preset, model.windows),
            deadline=deadline,
            workflow=workflow,
        )
        if retries is None and model.upstream_retries == 0:
            state.budget = 0
        max_corrections = model.max_corrections if model.max_corrections is not None else policy.max_corrections
        conversation = list(req.messages)
        corrections = 0
        raised = False
        span = trace.get_current_span()
        try:
            while True:
                chat = ChatRequest(
                    upstream_model=model.upstream_model,
                    system=req.system,
                    messages=conversation,
                    tools=list(req.tools),
                    response_schema=schema,
                    max_tokens=budget_tokens,
                    temperature=req.temperature if req.HasField("temperature") else None,
                )
                reply, attempt = await self._send(state, chat, estimate)
                try:  # the attempt's span stays open until its reply is judged
                    if reply.refusal is not None or reply.finish == pb.FINISH_REASON_CONTENT_FILTER:
                        category = (
                            "refusal" if reply.raw_finish in ("refusal", "stop") or reply.refusal else reply.raw_finish
                        )
                        raise ProviderRefusal(req.model, category or "content_filter", reply.refusal or "")
                    if reply.finish == pb.FINISH_REASON_LENGTH:
                        if not raised and budget_tokens < model.max_output_tokens:
                            raised = True
                            budget_tokens = model.max_output_tokens
                            span.add_event(n.EVENT_OUTPUT_BUDGET_RAISED, {n.OUTPUT_BUDGET: budget_tokens})
                            continue
                        raise OutputTruncated(req.model, budget_tokens, model.max_output_tokens)
                    parsed: dict[str, Any] | None = None
                    if schema is not None and not reply.tool_calls:  # a tool call is not the answer yet
                        problem: SidecarFailure | None
                        try:
                            asked = req.response_schema_json
                            parsed, problem = await self._checks.reply(reply.text, schema, req.model, asked)
                        except JsonParse as failure:
                            if corrections >= max_corrections:
                                raise
                            problem = failure
                        if problem is not None:
                            if corrections < max_corrections:
                                corrections += 1
                                attempt.set_attribute(n.CORRECTION_REASON, kind_name(problem.kind))
                                self._correct(conversation, reply, problem, corrections)
                                continue
                            warning = f"required fields still empty after {corrections} corrections: " + "; ".join(
                                f"{f.field} {f.problem}"
                                for f in problem.detail.fields  # type: ignore[union-attr]
                            )
                            state.warnings.append(warning)
                            _log.warning("%s: %s", req.model, warning, extra={"failure_kind": "RESPONSE_VALIDATION"})
                    return CallResult(self._response(state, reply, parsed, corrections, raised), reply)
                finally:
                    attempt.end()
        except SidecarFailure as failure:
            failure.with_attempts(state.attempts)
            raise
        finally:
            span.set_attribute(n.ATTEMPTS, state.attempts)
            span.set_attribute(n.CORRECTIONS, corrections)
            if state.input_tokens or state.output_tokens:
                span.set_attribute(n.GEN_AI_INPUT_TOKENS, state.input_tokens)
                span.set_attribute(n.GEN_AI_OUTPUT_TOKENS, state.output_tokens)

    def _correct(self, conversation: list[pb.Message], reply: ChatReply, problem: SidecarFailure, n_: int) -> None:
        conversation.append(pb.Message(role=pb.ROLE_ASSISTANT, text=reply.text, tool_calls=reply.tool_calls))
        conversation.append(pb.Message(role=pb.ROLE_USER, text=problem.explain_to_llm()))
        trace.get_current_span().add_event(
            n.EVENT_CORRECTION, {n.CORRECTION_REASON: kind_name(problem.kind), n.CORRECTIONS: n_}
        )
        _log.warning("correction %d: %s", n_, problem.message, extra={"failure_kind": kind_name(problem.kind)})

    def _response(
        self, state: _State, reply: ChatReply, parsed: dict[str, Any] | None, corrections: int, raised: bool
    ) -> pb.CallModelResponse:
        resp = pb.CallModelResponse(
            message=pb.Message(role=pb.ROLE_ASSISTANT, text=reply.text, tool_calls=reply.tool_calls),
            finish_reason=reply.finish,  # type: ignore[arg-type]
            usage=pb.Usage(input_tokens=reply.input_tokens, output_tokens=reply.output_tokens),
            attempts=state.attempts,
            corrections=corrections,
            output_budget_raised=raised,
            warnings=state.warnings,
            provider=state.provider.name,
            response_model=reply.response_model,
            total_usage=pb.Usage(input_tokens=state.input_tokens, output_tokens=state.output_tokens),
            cost_usd=state.cost,
        )
        if parsed is not None:
            struct = struct_pb2.Struct()
            struct.update(parsed)
            resp.json.CopyFrom(struct)
        return resp

    def _check_request(self, req: pb.CallModelRequest) -> int | None:
        """The output budget asked for; InvalidInput for what is wrong (the JSON fields: ``CallChecks``)."""
        if not req.model.strip():
            raise InvalidInput(
                "model", req.model, "must name a catalog model: " + ", ".join(sorted(self._config.models))
            )
        if not req.messages:
            raise InvalidInput("messages", "", "must hold at least one message")
        for i, m in enumerate(req.messages):
            if m.role == pb.ROLE_UNSPECIFIED:
                raise InvalidInput(
                    f"messages[{i}].role", "ROLE_UNSPECIFIED", "must be ROLE_USER, ROLE_ASSISTANT or ROLE_TOOL"
                )
            if not (m.text or m.tool_calls or m.tool_results):
                raise InvalidInput(f"messages[{i}]", "", "must carry text, tool calls or tool results")
        for i, t in enumerate(req.tools):
            if not t.name:
                raise InvalidInput(f"tools[{i}].name", "", "must name the tool")
        max_tokens = req.max_output_tokens if req.HasField("max_output_tokens") else None
        model = self._config.models.get(req.model)
        if max_tokens is not None and (max_tokens == 0 or (model and max_tokens > model.max_output_tokens)):
            top = model.max_output_tokens if model else "the model's maximum"
            raise InvalidInput("max_output_tokens", str(max_tokens), f"must be between 1 and {top}")
        if req.job.HasField("upstream_retries") and req.job.upstream_retries > MAX_UPSTREAM_RETRIES:
            raise InvalidInput(
                "job.upstream_retries", str(req.job.upstream_retries), f"must be at most {MAX_UPSTREAM_RETRIES}"
            )
        if req.HasField("temperature") and not 0.0 <= req.temperature <= 2.0:
            raise InvalidInput("temperature", str(req.temperature), "must be between 0 and 2")
        return max_tokens

    # ------------------------------------------------------------------ attempts and signals

    async def _send(self, state: _State, chat: ChatRequest, estimate: int) -> tuple[ChatReply, trace.Span]:
        """Attempts until a reply: returned with its attempt's span, still open, for the caller to end."""
        throttle = self._throttles[state.model_id]
        while True:
            try:  # the slot after everyone queued (and any pause); one that cannot fit the deadline fails now
                ticket = throttle.reserve(estimate, state.deadline)
                wait = ticket.at - self._clock.time()
                if wait > 0:
                    attrs: dict[str, str | float] = {
                        n.WAIT_SECONDS: wait,
                        n.THROTTLE: throttle.throttle,
                        n.MODEL_ID: state.model_id,
                    }
                    started = self._clock.time()
                    with _tracer.start_as_current_span(n.SPAN_THROTTLE_WAIT, attributes=attrs):
                        await throttle.wait(ticket)
                    self._metrics.wait("throttle", self._clock.time() - started, model=state.model_id)
                else:
                    await throttle.wait(ticket)
            except Overdue as late:
                self._check_deadline(state, late.wait, None, late.reason)
                raise
            state.attempts += 1
            try:
                outcome, attempt = await self._attempt(state, chat)
            except BaseException:
                throttle.settle(ticket)  # cancelled: charged to no one
                raise
            if isinstance(outcome, ChatReply):
                throttle.success(ticket)
                return outcome, attempt
            try:
                if isinstance(outcome, SidecarFailure):
                    throttle.settle(ticket)
                    raise outcome
                pause = None if outcome.retry_after is None else min(outcome.retry_after, state.windows.max_wait_s)
                throttle.signal(ticket, outcome.signal, pause)
                asked = outcome.retry_after
                exhausted = state.retries >= state.budget
                too_long = not exhausted and asked is not None and asked > state.windows.max_wait_s
                if exhausted or too_long:
                    raise UpstreamRetriesExhausted(
                        f"Model {state.model_id} ({state.provider.name})",
                        state.budget,
                        outcome.signal,
                        outcome.detail,
                        http=outcome.http,
                        retry_after=asked,
                        asked_too_long=state.windows.max_wait_s if too_long else None,
                    )
                state.retries += 1
                if asked is None:
                    window = signal_window(state.windows, outcome.signal)
                    wait = window_wait(window, state.retries, state.windows, self._rng)
                else:
                    wait = asked
                self._check_deadline(state, wait, outcome, "the next retry")
                attempt.set_attribute(n.RETRY_WAIT, wait)
            finally:
                attempt.end()
            signal = _SIGNAL_ATTR[outcome.signal]
            self._metrics.retry(signal, model=state.model_id)
            backoff: dict[str, str | float] = {
                n.WAIT_SECONDS: wait,
                n.RETRY_SIGNAL: signal,
                n.ATTEMPT: state.attempts,
                n.MODEL_ID: state.model_id,
            }
            started = self._clock.time()
            with _tracer.start_as_current_span(n.SPAN_BACKOFF, attributes=backoff):
                await self._clock.sleep(wait)
            self._metrics.wait("backoff", self._clock.time() - started, model=state.model_id)

    def _check_deadline(self, state: _State, wait: float, signal: Signal | None, what: str) -> None:
        if state.deadline is None or self._clock.time() + wait <= state.deadline:
            return
        left = max(state.deadline - self._clock.time(), 0.0)
        if signal is not None:
            reason = (
                f"{what} would wait {wait:.1f} s after a {signal_words(signal.signal)} ({signal.detail}), "
                f"but only {left:.1f} s remain"
            )
        else:
            reason = f"{what} for {wait:.1f} s, but only {left:.1f} s remain"
        raise JobTimeout(
            f"model {state.model_id}",
            reason,
            signal=signal.signal if signal else pb.RETRY_SIGNAL_UNSPECIFIED,
            http=signal.http if signal else None,
            retry_after=wait,
            budget=state.budget,
        )

    async def _attempt(
        self, state: _State, chat: ChatRequest
    ) -> tuple[ChatReply | Signal | SidecarFailure, trace.Span]:
        """One HTTP attempt under its own CLIENT span, returned open (the caller ends it)."""
        provider = state.provider
        timeout = provider.config.timeout_s
        if state.deadline is not None:
            timeout = max(min(timeout, state.deadline - self._clock.time()), 0.001)
        attrs: dict[str, Any] = {
            n.HTTP_METHOD: "POST",
            n.URL_FULL: provider.endpoint,
            n.ATTEMPT: state.attempts,
            n.OUTPUT_BUDGET: chat.max_tokens,
        }
        host = provider.client.base_url
        attrs[n.SERVER_ADDRESS] = host.host
        if host.port:
            attrs[n.SERVER_PORT] = host.port
        if state.attempts > 1:
            attrs[n.HTTP_RESEND_COUNT] = state.attempts - 1
        body = provider.adapter.body(chat)
        span = _tracer.start_span("POST", kind=trace.SpanKind.CLIENT, attributes=attrs)
        try:
            with use_span(span):
                return self._judge(state, span, await self._post(provider, span, body, timeout)), span
        except BaseException as exc:  # cancelled, or a bug: the span must not stay open
            span.set_attribute(n.ERROR_TYPE, "cancelled" if isinstance(exc, asyncio.CancelledError) else "internal")
            span.end()
            raise

    async def _post(
        self, provider: _Provider, span: trace.Span, body: dict[str, Any], timeout: float
    ) -> httpx.Response | Signal:
        headers: dict[str, str] | None = None
        if span.is_recording():  # the upstream may continue the trace from this attempt
            headers = {}
            propagate.inject(headers)
        request = provider.client.build_request(
            "POST",
            provider.adapter.path().lstrip("/"),
            json=body,
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=min(provider.config.connect_timeout_s, timeout)),
        )
        try:
            response = await provider.client.send(request, stream=True)
            try:
                response._content = await read_capped(response, MAX_REPLY_BYTES)
            finally:
                await response.aclose()
        except httpx.HTTPError as exc:
            fault = fault_of(exc)
            span.set_attribute(n.ERROR_TYPE, "timeout" if "time" in fault.detail else type(exc).__name__)
            span.set_attribute(n.RETRY_SIGNAL, "transient")
            span.set_status(trace.StatusCode.ERROR, fault.detail)
            return Signal(pb.RETRY_SIGNAL_TRANSIENT, fault.detail, None, None)
        return response

    def _judge(
        self, state: _State, span: trace.Span, response: httpx.Response | Signal
    ) -> ChatReply | Signal | SidecarFailure:
        if isinstance(response, Signal):
            return response
        span.set_attribute(n.HTTP_STATUS, response.status_code)
        outcome = self._read(state, response.status_code, dict(response.headers), response.text)
        if isinstance(outcome, Signal):
            span.set_attribute(n.RETRY_SIGNAL, _SIGNAL_ATTR[outcome.signal])
            span.set_attribute(n.ERROR_TYPE, str(response.status_code))
            if outcome.retry_after is not None:
                span.set_attribute(n.RETRY_AFTER, outcome.retry_after)
            span.set_status(trace.StatusCode.ERROR)
        elif isinstance(outcome, SidecarFailure):
            span.set_attribute(n.ERROR_TYPE, kind_name(outcome.kind))
            span.set_status(trace.StatusCode.ERROR)
        else:
            state.input_tokens += outcome.input_tokens
            state.output_tokens += outcome.output_tokens
            usd = cost_of(state.model, outcome.input_tokens, outcome.output_tokens)
            state.cost += usd
            self._ledger.record(state.workflow, usd)
            span.set_attribute(n.GEN_AI_INPUT_TOKENS, outcome.input_tokens)
            span.set_attribute(n.GEN_AI_OUTPUT_TOKENS, outcome.output_tokens)
            if outcome.raw_finish:
                span.set_attribute(n.GEN_AI_FINISH_REASONS, [outcome.raw_finish])
            if outcome.response_model:
                span.set_attribute(n.GEN_AI_RESPONSE_MODEL, outcome.response_model)
        return outcome

    def _read(
        self, state: _State, status: int, headers: dict[str, str], text: str
    ) -> ChatReply | Signal | SidecarFailure:
        provider = state.provider
        target = Target(
            provider.name, provider.config.account, state.model_id, state.model.upstream_model, provider.endpoint
        )
        if 200 <= status < 300:
            try:
                parsed = json.loads(text)
            except (ValueError, RecursionError):
                return Signal(pb.RETRY_SIGNAL_TRANSIENT, "the provider's reply was not JSON", None, None)
            if not isinstance(parsed, dict):
                return Signal(pb.RETRY_SIGNAL_TRANSIENT, "the provider's reply was not a JSON object", None, None)
            if parsed.get("type") != "error" and "error" not in parsed:
                try:
                    return provider.adapter.parse(parsed)
                except (TypeError, KeyError, ValueError, AttributeError, IndexError):
                    return Signal(pb.RETRY_SIGNAL_TRANSIENT, "the provider's reply had an unexpected shape", None, None)
            status = 500  # an error delivered with a success status (e.g. overloaded_error mid-stream)
        return classify_response(status, headers, text, target, self._secrets, self._clock.wall())
