"""The Sidecar servicer: a thin adapter from gRPC to the core.

ExecuteTool answers OK with ``failure`` set when the tool fails; CallModel fails the RPC with a
rich status (``status.to_status``); any exception that is not a failure of the taxonomy becomes
SYSTEM at this boundary (``taxonomy.as_failure``) and its details go to the log only.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import replace
from typing import Any

import grpc
from grpc_status import rpc_status
from opentelemetry import trace
from sidecar_client._proto.sidecar.v1 import sidecar_pb2 as pb
from sidecar_client._proto.sidecar.v1 import sidecar_pb2_grpc as pb_grpc

from sidecar.config import Config
from sidecar.core.circuit import MAX_SERVICE_NAME_CHARS, Admission, ServiceGuards
from sidecar.core.clock import Clock
from sidecar.core.redact import mask_keys
from sidecar.core.taxonomy import (
    InvalidInput,
    JobCancelled,
    SidecarFailure,
    as_failure,
    kind_name,
    log_failure,
)
from sidecar.core.text import ELLIPSIS, cap, endpoint_of
from sidecar.core.tool_failures import Observation, classify, is_service_failure, trigger_of
from sidecar.providers.caller import ModelCaller
from sidecar.server.status import to_status
from sidecar.telemetry import names as n
from sidecar.telemetry.metrics import OTHER, Metrics
from sidecar.telemetry.tracing import Tracer
from sidecar.tools.executor import ToolOutcome, ToolRunner

__all__ = ["SidecarServicer"]

_log = logging.getLogger("sidecar.server")
_tracer = Tracer(n.TRACER)
MAX_REPORT_ENDPOINT_CHARS = 2048
"""A ClassifyFailure endpoint (its query string cut) longer than this is INVALID_INPUT."""
MAX_REPORT_NAME_CHARS = 128
"""The longest ``parameter`` and ``resource_type`` of a ClassifyFailure request."""
MAX_REPORT_VALUE_CHARS = 1024
"""A reported ``value`` is quoted up to this many characters."""
_KINDS = {pb.TOOL_KIND_SEARCH: "search", pb.TOOL_KIND_FETCH: "fetch", pb.TOOL_KIND_UNSPECIFIED: "fetch"}


class SidecarServicer(pb_grpc.SidecarServicer):
    def __init__(
        self,
        config: Config,
        clock: Clock,
        tools: ToolRunner,
        models: ModelCaller,
        guards: ServiceGuards,
        metrics: Metrics,
    ) -> None:
        self._config = config
        self._clock = clock
        self._tools = tools
        self._models = models
        self._guards = guards
        self._metrics = metrics
        self._secrets = config.secrets()
        self._probes: dict[str, Admission] = {}
        self._tool_list = pb.ListToolsResponse(tools=[_tool_info(name, t) for name, t in config.tools.items()])
        self._model_list = pb.ListModelsResponse(
            models=[
                pb.ModelInfo(
                    id=mid,
                    provider=m.provider,
                    wire_format=config.providers[m.provider].wire_format,
                    upstream_model=m.upstream_model,
                    context_window=m.context_window,
                    max_output_tokens=m.max_output_tokens,
                    input_price_per_mtok=m.input_price_per_mtok,
                    output_price_per_mtok=m.output_price_per_mtok,
                    requests_per_minute=m.requests_per_minute,
                    tokens_per_minute=m.tokens_per_minute,
                    upstream_retries=m.upstream_retries
                    if m.upstream_retries is not None
                    else config.policy.upstream_retries,
                )
                for mid, m in config.models.items()
            ]
        )

    def _deadline(self, context: grpc.aio.ServicerContext[Any, Any]) -> float | None:
        remaining = context.time_remaining()
        return None if remaining is None else self._clock.time() + remaining

    # ------------------------------------------------------------------ ExecuteTool

    async def ExecuteTool(
        self, request: pb.ExecuteToolRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ExecuteToolResponse:
        tool_cfg = self._config.tools.get(request.tool)
        attrs: dict[str, Any] = {
            n.GEN_AI_OPERATION: n.OP_EXECUTE_TOOL,
            n.GEN_AI_TOOL_NAME: request.tool,
            n.GEN_AI_TOOL_TYPE: "function",
        }
        if request.call_id:
            attrs[n.GEN_AI_TOOL_CALL_ID] = request.call_id
        if tool_cfg is not None:
            attrs[n.GEN_AI_TOOL_DESCRIPTION] = tool_cfg.description
            attrs[n.SERVICE] = tool_cfg.service
        _job_attrs(attrs, request.job)
        metric_name = request.tool if tool_cfg is not None else OTHER
        start = self._clock.time()
        with _tracer.start_as_current_span(
            n.SPAN_EXECUTE_TOOL.format(tool=request.tool or "unknown"), attributes=attrs
        ) as span:
            record_content = self._config.telemetry.record_content and span.is_recording()
            if record_content:
                span.set_attribute(n.GEN_AI_TOOL_ARGUMENTS, mask_keys(request.arguments_json, self._secrets))
            retries = request.job.upstream_retries if request.job.HasField("upstream_retries") else None
            try:
                outcome = await self._tools.execute(
                    request.tool, request.arguments_json, retries=retries, deadline=self._deadline(context)
                )
            except asyncio.CancelledError:
                cancelled = JobCancelled(f"tool {request.tool}")
                log_failure(cancelled, tool=request.tool)
                _mark_failed(span, cancelled)
                self._metrics.failure(cancelled.kind_name, n.OP_EXECUTE_TOOL)
                self._metrics.operation(n.OP_EXECUTE_TOOL, metric_name, self._clock.time() - start, cancelled.kind_name)
                raise
            except Exception as exc:  # the one boundary: anything else is SYSTEM (as_failure logs it)
                outcome = ToolOutcome(None, as_failure(exc, "the tool runner"), 0)
            response = pb.ExecuteToolResponse(
                model_text=outcome.model_text, attempts=outcome.attempts, call_id=request.call_id
            )
            span.set_attribute(n.ATTEMPTS, outcome.attempts)
            if outcome.failure is not None:
                failure = outcome.failure
                response.failure.CopyFrom(failure.to_proto())
                _mark_failed(span, failure)
                if failure.kind != pb.FAILURE_KIND_SYSTEM:
                    log_failure(failure, tool=request.tool, call_id=request.call_id)
                self._metrics.failure(failure.kind_name, n.OP_EXECUTE_TOOL)
            else:
                assert outcome.result is not None
                response.result.CopyFrom(outcome.result)
            if record_content:
                span.set_attribute(n.GEN_AI_TOOL_RESULT, mask_keys(response.model_text, self._secrets))
            self._metrics.operation(
                n.OP_EXECUTE_TOOL,
                metric_name,
                self._clock.time() - start,
                kind_name(outcome.failure.kind) if outcome.failure else None,
            )
            return response

    # ------------------------------------------------------------------ CallModel

    async def CallModel(
        self, request: pb.CallModelRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.CallModelResponse:
        model = self._models.model_config(request.model)
        provider = self._config.providers[model.provider].wire_format if model else "unknown"
        attrs: dict[str, Any] = {
            n.GEN_AI_OPERATION: n.OP_CHAT,
            n.GEN_AI_PROVIDER: provider,
            n.GEN_AI_REQUEST_MODEL: request.model,
            n.MODEL_ID: request.model,
        }
        if request.HasField("max_output_tokens"):
            attrs[n.GEN_AI_REQUEST_MAX_TOKENS] = request.max_output_tokens
        elif model is not None:
            attrs[n.GEN_AI_REQUEST_MAX_TOKENS] = model.output_budget
        if request.HasField("temperature"):
            attrs[n.GEN_AI_REQUEST_TEMPERATURE] = request.temperature
        _job_attrs(attrs, request.job)
        metric_model = request.model if model is not None else OTHER
        start = self._clock.time()
        name = n.SPAN_CHAT.format(model=request.model or "unknown")
        failure: SidecarFailure | None = None
        with _tracer.start_as_current_span(name, kind=trace.SpanKind.CLIENT, attributes=attrs) as span:
            record_content = self._config.telemetry.record_content and span.is_recording()
            if span.is_recording():
                server = self._models.server_of(request.model)
                if server is not None:
                    span.set_attribute(n.SERVER_ADDRESS, server[0])
                    if server[1]:
                        span.set_attribute(n.SERVER_PORT, server[1])
                if record_content:
                    span.set_attribute(n.GEN_AI_INPUT_MESSAGES, mask_keys(_messages_json(request), self._secrets))
            try:
                result = await self._models.call(request, self._deadline(context))
            except asyncio.CancelledError:
                cancelled = JobCancelled(f"model {request.model}")
                log_failure(cancelled, model=request.model)
                _mark_failed(span, cancelled)
                self._metrics.failure(cancelled.kind_name, n.OP_CHAT)
                self._metrics.operation(
                    n.OP_CHAT, metric_model, self._clock.time() - start, cancelled.kind_name, provider
                )
                raise
            except Exception as exc:  # the one boundary
                failure = as_failure(exc, "the model caller")
                if failure is exc:
                    log_failure(failure, model=request.model)
                _mark_failed(span, failure)
                self._metrics.failure(failure.kind_name, n.OP_CHAT)
                self._metrics.operation(
                    n.OP_CHAT, metric_model, self._clock.time() - start, failure.kind_name, provider
                )
            else:
                response = result.response
                if response.response_model:
                    span.set_attribute(n.GEN_AI_RESPONSE_MODEL, response.response_model)
                if result.reply.raw_finish:
                    span.set_attribute(n.GEN_AI_FINISH_REASONS, [result.reply.raw_finish])
                if result.reply.response_id:
                    span.set_attribute(n.GEN_AI_RESPONSE_ID, result.reply.response_id)
                span.set_attribute(n.OUTPUT_BUDGET_RAISED, response.output_budget_raised)
                if record_content:
                    output = json.dumps([{"role": "assistant", "content": response.message.text}])
                    span.set_attribute(n.GEN_AI_OUTPUT_MESSAGES, mask_keys(output, self._secrets))
                self._metrics.operation(n.OP_CHAT, metric_model, self._clock.time() - start, None, provider)
                self._metrics.tokens(
                    metric_model, response.total_usage.input_tokens, response.total_usage.output_tokens, provider
                )
                return response
        # the span has ended: the abort below is the RPC's outcome (the server span records it), not the model's
        assert failure is not None
        await context.abort_with_status(rpc_status.to_status(to_status(failure)))
        raise AssertionError("unreachable: abort_with_status raises")

    # ------------------------------------------------------------------ ClassifyFailure

    async def ClassifyFailure(
        self, request: pb.ClassifyFailureRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.Failure:
        try:
            return self._classify(request)
        except Exception as exc:
            failure = as_failure(exc, "failure classification")
            return failure.to_proto()

    def _classify(self, request: pb.ClassifyFailureRequest) -> pb.Failure:
        service = request.service
        endpoint = endpoint_of(request.endpoint, self._secrets)
        for field, text, limit in (
            ("service", service, MAX_SERVICE_NAME_CHARS),
            ("endpoint", endpoint, MAX_REPORT_ENDPOINT_CHARS),
            ("parameter", request.parameter, MAX_REPORT_NAME_CHARS),
            ("resource_type", request.resource_type, MAX_REPORT_NAME_CHARS),
        ):
            if len(text) > limit:  # each is quoted in the answer (the endpoint four times): never echoed whole
                rule = f"must be at most {limit} characters"
                return InvalidInput(field, cap(text, MAX_REPORT_NAME_CHARS), rule).to_proto()
        value = request.value
        if len(value) > MAX_REPORT_VALUE_CHARS:  # only quoted in messages: cut, not refused
            value = value[: MAX_REPORT_VALUE_CHARS - 1] + ELLIPSIS
        observed = request.WhichOneof("observed")
        # a report feeds an own service's circuit only when its config says so (docs/trust.md)
        accepted = bool(service) and (not self._guards.is_own(service) or self._config.service(service).accept_reports)
        if service:
            span = trace.get_current_span()
            if span.is_recording():
                span.set_attribute(n.REPORT_ACCEPTED, accepted)
        if observed is None:  # a pre-check: would the circuit refuse this call?
            return self._precheck(service, accepted)
        if observed == "response" and not 100 <= request.response.status_code <= 599:
            code = str(request.response.status_code)
            return InvalidInput("response.status_code", code, "must be an HTTP status from 100 to 599").to_proto()
        obs = Observation(
            service=service or "upstream",
            endpoint=endpoint,
            kind=_KINDS.get(request.tool_kind, "fetch"),
            parameter=request.parameter,
            value=value,
            resource_type=request.resource_type or "resource",
        )
        if observed == "response":
            r = request.response
            obs = replace(obs, status=r.status_code, headers=dict(r.headers), body=r.body)
        else:
            obs = replace(obs, fault=request.fault)
        quirks = self._config.service(service).quirks if service else []
        failure = classify(obs, quirks, self._secrets, self._clock.wall())
        charged = failure is not None and is_service_failure(failure)
        guard = self._guards.find(service, create=charged) if accepted else None  # only a charge makes a guard
        if guard is not None:
            probe = self._probes.pop(service, None) if request.probe else None
            if failure is None:
                guard.success(probe or Admission(probe=False, started=self._clock.time()))
            elif charged:
                guard.failure(probe, trigger_of(obs, failure), failure.retry_after)
            elif probe is not None and obs.status is not None:
                guard.success(probe)  # the service answered the probe: it is up
            elif probe is not None:
                guard.lost(probe)
        if failure is None:
            return pb.Failure()
        failure.with_attempts(request.attempts)
        log_failure(failure, service=service, classified=True, report_accepted=accepted)
        return failure.to_proto()

    def _precheck(self, service: str, accepted: bool) -> pb.Failure:
        """CIRCUIT_OPEN when the circuit would refuse the call; the half-open probe only when ``accepted``."""
        guard = self._guards.find(service, create=False) if service else None  # a pre-check makes no guard
        if guard is None:
            return pb.Failure()
        if not accepted:  # look, never take the probe: the sidecar's own calls take it
            refusal = guard.refusal()
            return pb.Failure() if refusal is None else refusal.to_proto()
        try:
            admission = guard.check()
        except SidecarFailure as refusal:
            return refusal.to_proto()
        if not admission.probe:
            return pb.Failure()
        now = self._clock.time()
        self._probes = {  # a probe never reported is lost after its timeout: forget it then
            name: held
            for name, held in self._probes.items()
            if not held.settled and now - held.started < self._config.circuit_for(name).probe_timeout_s
        }
        self._probes[service] = admission
        granted = pb.Failure()
        granted.circuit.service = service
        granted.circuit.state = pb.CIRCUIT_STATE_HALF_OPEN
        return granted

    # ------------------------------------------------------------------ lists

    async def ListTools(
        self, request: pb.ListToolsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ListToolsResponse:
        return self._tool_list

    async def ListModels(
        self, request: pb.ListModelsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ListModelsResponse:
        return self._model_list


def _mark_failed(span: trace.Span, failure: SidecarFailure) -> None:
    span.set_attribute(n.ERROR_TYPE, failure.kind_name)
    span.set_attribute(n.FAILURE_KIND, failure.kind_name)
    span.set_attribute(n.CORRECTABLE, failure.correctable)
    span.set_attribute(n.ATTEMPTS, failure.attempts)
    span.set_status(trace.StatusCode.ERROR, failure.kind_name)


def _job_attrs(attrs: dict[str, Any], job: pb.Job) -> None:
    if job.job_id:
        attrs[n.JOB_ID] = job.job_id
    if job.workflow_id:
        attrs[n.WORKFLOW_ID] = job.workflow_id


def _messages_json(request: pb.CallModelRequest) -> str:
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    for m in request.messages:
        out.append({"role": pb.Role.Name(m.role).removeprefix("ROLE_").lower(), "content": m.text})
    return json.dumps(out)


def _tool_info(name: str, t: Any) -> pb.ToolInfo:
    params = json.dumps(t.parameters, separators=(",", ":"))
    openai = {"type": "function", "function": {"name": name, "description": t.description, "parameters": t.parameters}}
    anthropic = {"name": name, "description": t.description, "input_schema": t.parameters}
    return pb.ToolInfo(
        definition=pb.ToolDefinition(name=name, description=t.description, parameters_json=params),
        kind=pb.TOOL_KIND_SEARCH if t.kind == "search" else pb.TOOL_KIND_FETCH,
        service=t.service,
        idempotent=t.is_idempotent,
        openai_json=json.dumps(openai),
        anthropic_json=json.dumps(anthropic),
    )
