"""The one converter between the ``sidecar.v1`` contract and the core's plain types.

Requests come in (``model_request``, ``tool_request``, ``report``) with what the door resolves
once (``call_options``: the deadline on the injected clock, the caller's retry-budget override);
answers go out (``model_response``, ``stream_event``, ``tool_response``, ``report_failure``,
``failure``). Enums
convert by number: ``core.kinds`` gives each value its proto counterpart's number, and
tests/test_convert.py proves the two lists equal. Nothing else in the server builds a
``sidecar.v1`` message from a core type, or the other way round.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from enum import IntEnum
from typing import Any, TypeVar

from google.protobuf import duration_pb2, struct_pb2, timestamp_pb2
from sidecar_contract.v1 import sidecar_pb2 as pb

from sidecar.config import Config
from sidecar.core import details as d
from sidecar.core.clock import Clock
from sidecar.core.conversation import (
    CacheBreakpoint,
    CallOptions,
    Controls,
    DocumentPart,
    ImagePart,
    Job,
    Message,
    MidStream,
    ModelRequest,
    ModelResponse,
    ObservedResponse,
    Part,
    Reasoning,
    ReasoningPart,
    Report,
    ReportAnswer,
    TextPart,
    ToolCall,
    ToolCallResult,
    ToolChoice,
    ToolDefinition,
    ToolOutcome,
    ToolRequest,
    Usage,
)
from sidecar.core.kinds import Role, TransportFault
from sidecar.core.stream import Continued, Final, ReasoningDelta, Restart, StreamEvent, TextDelta, ToolCallDelta
from sidecar.core.taxonomy import SidecarFailure
from sidecar.providers.formats.anthropic_messages.vocab import render_tool as anthropic_tool
from sidecar.providers.formats.openai_chat.vocab import render_tool as openai_tool
from sidecar.tools.catalog import ToolEntry

__all__ = [
    "call_options",
    "failure",
    "hop",
    "job",
    "message",
    "model_list",
    "model_request",
    "model_response",
    "report",
    "report_failure",
    "route_info",
    "stream_event",
    "tool_list",
    "tool_request",
    "tool_response",
]

_TOOL_KINDS = {pb.TOOL_KIND_SEARCH: "search", pb.TOOL_KIND_FETCH: "fetch", pb.TOOL_KIND_UNSPECIFIED: "fetch"}
_MID_STREAM = {
    pb.MID_STREAM_POLICY_RESTART: MidStream.RESTART,
    pb.MID_STREAM_POLICY_FAIL: MidStream.FAIL,
    pb.MID_STREAM_POLICY_CONTINUE: MidStream.CONTINUE,
}
_DETAIL = {pb.IMAGE_DETAIL_AUTO: "auto", pb.IMAGE_DETAIL_LOW: "low", pb.IMAGE_DETAIL_HIGH: "high"}
_TTL = {pb.CACHE_TTL_5M: "5m", pb.CACHE_TTL_1H: "1h"}
_EFFORT = {
    pb.REASONING_EFFORT_MINIMAL: "minimal",
    pb.REASONING_EFFORT_LOW: "low",
    pb.REASONING_EFFORT_MEDIUM: "medium",
    pb.REASONING_EFFORT_HIGH: "high",
}
_CHOICE = {
    pb.TOOL_CHOICE_MODE_AUTO: "auto",
    pb.TOOL_CHOICE_MODE_NONE: "none",
    pb.TOOL_CHOICE_MODE_REQUIRED: "required",
    pb.TOOL_CHOICE_MODE_TOOL: "tool",
}


# ---------------------------------------------------------------------------- in

E = TypeVar("E", bound=IntEnum)


def _known(enum: type[E], number: int, default: E) -> E:
    """The enum member of ``number``; a number a newer peer sent that this side does not know: ``default``."""
    try:
        return enum(number)
    except ValueError:
        return default


def call_options(job_pb: pb.Job, time_remaining: float | None, clock: Clock) -> CallOptions:
    """The deadline (``time_remaining`` from now, on ``clock``) and the caller's budget override.

    The override is checked by the core, in the order of the request's other checks.
    """
    retries = job_pb.upstream_retries if job_pb.HasField("upstream_retries") else None
    deadline = None if time_remaining is None else clock.time() + time_remaining
    return CallOptions(deadline=deadline, upstream_retries=retries)


def job(job_pb: pb.Job) -> Job:
    return Job(job_id=job_pb.job_id, workflow_id=job_pb.workflow_id, attributes=dict(job_pb.attributes))


def _cache(owner: pb.Part | pb.ToolDefinition | pb.CallModelRequest, name: str) -> CacheBreakpoint | None:
    if not owner.HasField(name):
        return None
    return CacheBreakpoint(_TTL.get(getattr(owner, name).ttl, ""))


def part(p: pb.Part) -> Part:
    """A part; one that sets no kind is an empty text part (the core refuses it, naming its index)."""
    cache = _cache(p, "cache")
    match p.WhichOneof("kind"):
        case "image":
            i = p.image
            return ImagePart(i.media_type, i.data, i.url, _DETAIL.get(i.detail, ""), cache)
        case "document":
            doc = p.document
            text = doc.text if doc.WhichOneof("source") == "text" else None
            return DocumentPart(doc.media_type, doc.data, doc.url, text, doc.title, cache)
    return TextPart(p.text, cache)


def _reasoning_part(r: pb.ReasoningPart) -> ReasoningPart:
    return ReasoningPart(r.text, r.signature, r.redacted_data, r.format)


def message(m: pb.Message) -> Message:
    if not (m.parts or m.reasoning or m.tool_results):  # text and tool calls (most turns)
        calls = tuple(ToolCall(c.id, c.name, c.arguments_json) for c in m.tool_calls) if m.tool_calls else ()
        return Message(_known(Role, m.role, Role.UNSPECIFIED), m.text, calls)
    return Message(
        role=_known(Role, m.role, Role.UNSPECIFIED),
        text=m.text,
        tool_calls=tuple(ToolCall(c.id, c.name, c.arguments_json) for c in m.tool_calls),
        tool_results=tuple(
            ToolCallResult(r.call_id, r.content, r.is_error, r.name, tuple(part(p) for p in r.parts))
            for r in m.tool_results
        ),
        parts=tuple(part(p) for p in m.parts),
        reasoning=tuple(_reasoning_part(r) for r in m.reasoning),
    )


_CONTROL_FIELDS = frozenset(
    {
        "system_cache",
        "reasoning",
        "tool_choice",
        "parallel_tool_calls",
        "stop",
        "top_p",
        "top_k",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "end_user",
        "provider_options_json",
    }
)
_NO_CONTROLS = Controls()


def _controls(req: pb.CallModelRequest) -> Controls:
    if _CONTROL_FIELDS.isdisjoint(f.name for f, _ in req.ListFields()):
        return _NO_CONTROLS  # a request that asks for none (most): one C call, not twelve
    reasoning = None
    if req.HasField("reasoning"):
        amount = req.reasoning.WhichOneof("amount")
        if amount == "budget_tokens":
            reasoning = Reasoning(budget_tokens=req.reasoning.budget_tokens)
        else:  # an unknown level reads as "" and is refused by the core, naming it
            reasoning = Reasoning(effort=_EFFORT.get(req.reasoning.effort, ""))
    choice = None
    if req.HasField("tool_choice") and req.tool_choice.mode != pb.TOOL_CHOICE_MODE_UNSPECIFIED:
        choice = ToolChoice(_CHOICE.get(req.tool_choice.mode, ""), req.tool_choice.name)
    return Controls(
        reasoning=reasoning,
        tool_choice=choice,
        parallel_tool_calls=req.parallel_tool_calls if req.HasField("parallel_tool_calls") else None,
        stop=tuple(req.stop),
        top_p=req.top_p if req.HasField("top_p") else None,
        top_k=req.top_k if req.HasField("top_k") else None,
        seed=req.seed if req.HasField("seed") else None,
        presence_penalty=req.presence_penalty if req.HasField("presence_penalty") else None,
        frequency_penalty=req.frequency_penalty if req.HasField("frequency_penalty") else None,
        end_user=req.end_user,
        system_cache=_cache(req, "system_cache"),
        provider_options_json=req.provider_options_json,
    )


def model_request(req: pb.CallModelRequest) -> ModelRequest:
    return ModelRequest(
        model=req.model,
        messages=tuple(message(m) for m in req.messages),
        system=req.system,
        tools=tuple(
            ToolDefinition(
                t.name, t.description, t.parameters_json, _cache(t, "cache"), t.strict if t.HasField("strict") else None
            )
            for t in req.tools
        ),
        response_schema_json=req.response_schema_json,
        max_output_tokens=req.max_output_tokens if req.HasField("max_output_tokens") else None,
        temperature=req.temperature if req.HasField("temperature") else None,
        job=job(req.job),
        mid_stream=_MID_STREAM.get(req.mid_stream),
        controls=_controls(req),
    )


def tool_request(req: pb.ExecuteToolRequest) -> ToolRequest:
    return ToolRequest(tool=req.tool, arguments_json=req.arguments_json, call_id=req.call_id, job=job(req.job))


def report(req: pb.ClassifyFailureRequest) -> Report:
    observed = req.WhichOneof("observed")
    response = None
    fault = None
    if observed == "response":
        r = req.response
        response = ObservedResponse(r.status_code, dict(r.headers), r.body)
    elif observed == "fault":
        fault = (
            TransportFault(req.fault) if req.fault in TransportFault._value2member_map_ else TransportFault.UNSPECIFIED
        )
    return Report(
        service=req.service,
        endpoint=req.endpoint,
        tool_kind=_TOOL_KINDS.get(req.tool_kind, "fetch"),
        parameter=req.parameter,
        value=req.value,
        response=response,
        fault=fault,
        attempts=req.attempts,
        resource_type=req.resource_type or "resource",
        probe=req.probe,
        job=job(req.job),
    )


# ---------------------------------------------------------------------------- out


def _reasoning_pb(r: ReasoningPart) -> pb.ReasoningPart:
    return pb.ReasoningPart(text=r.text, signature=r.signature, redacted_data=r.redacted_data, format=r.format)


def _message_pb(m: Message) -> pb.Message:
    """A reply's message: its text, tool calls and reasoning (a reply carries no other parts)."""
    return pb.Message(
        reasoning=[_reasoning_pb(r) for r in m.reasoning],
        role=int(m.role),  # type: ignore[arg-type]
        text=m.text,
        tool_calls=[pb.ToolCall(id=c.id, name=c.name, arguments_json=c.arguments_json) for c in m.tool_calls],
        tool_results=[
            pb.ToolCallResult(call_id=r.call_id, content=r.content, is_error=r.is_error, name=r.name)
            for r in m.tool_results
        ],
    )


def _usage(u: Usage) -> pb.Usage:
    return pb.Usage(
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        cache_read_input_tokens=u.cache_read_input_tokens,
        cache_write_input_tokens=u.cache_write_input_tokens,
        reasoning_tokens=u.reasoning_tokens,
    )


def hop(h: d.Hop) -> pb.Hop:
    return pb.Hop(
        deployment=h.deployment,
        kind=int(h.kind),  # type: ignore[arg-type]
        attempts=h.attempts,
        reason=h.reason,
        skipped=h.skipped,
    )


def model_response(r: ModelResponse) -> pb.CallModelResponse:
    resp = pb.CallModelResponse(
        message=_message_pb(r.message),
        finish_reason=int(r.finish_reason),  # type: ignore[arg-type]
        usage=_usage(r.usage),
        attempts=r.attempts,
        corrections=r.corrections,
        output_budget_raised=r.output_budget_raised,
        warnings=list(r.warnings),
        provider=r.provider,
        response_model=r.response_model,
        total_usage=_usage(r.total_usage),
        cost_usd=r.cost_usd,
        served_by=r.served_by,
        hops=[hop(h) for h in r.hops],
    )
    if r.parsed is not None:
        struct = struct_pb2.Struct()
        struct.update(r.parsed)
        resp.json.CopyFrom(struct)
    return resp


def stream_event(event: StreamEvent) -> pb.StreamModelEvent:
    """One StreamModel event; ``Final`` carries the reply exactly as CallModel returns it."""
    match event:
        case TextDelta():
            return pb.StreamModelEvent(text=pb.TextDelta(text=event.text))
        case ToolCallDelta():
            delta = pb.ToolCallDelta(
                index=event.index, id=event.id, name=event.name, arguments_fragment=event.arguments_fragment
            )
            return pb.StreamModelEvent(tool_call=delta)
        case ReasoningDelta():
            reasoning = pb.ReasoningDelta(
                index=event.index, text=event.text, signature=event.signature, redacted_data=event.redacted_data
            )
            return pb.StreamModelEvent(reasoning=reasoning)
        case Restart():
            restart = pb.StreamRestart(
                cause=int(event.cause),  # type: ignore[arg-type]
                reason=event.reason,
                attempt=event.attempt,
            )
            return pb.StreamModelEvent(restart=restart)
        case Continued():
            continued = pb.StreamContinued(
                cause=int(event.cause),  # type: ignore[arg-type]
                reason=event.reason,
                attempt=event.attempt,
                chars_delivered=event.chars,
            )
            return pb.StreamModelEvent(continued=continued)
        case Final():
            return pb.StreamModelEvent(final=model_response(event.response))
    raise TypeError(f"no sidecar.v1 event for {type(event).__name__}")  # pragma: no cover - exhaustive above


def tool_response(outcome: ToolOutcome, call_id: str) -> pb.ExecuteToolResponse:
    response = pb.ExecuteToolResponse(model_text=outcome.model_text, attempts=outcome.attempts, call_id=call_id)
    if outcome.failure is not None:
        response.failure.CopyFrom(failure(outcome.failure))
    else:
        assert outcome.result is not None
        r = outcome.result
        response.result.CopyFrom(
            pb.ToolResult(content=r.content, content_type=r.content_type, status_code=r.status_code, empty=r.empty)
        )
    return response


def tool_list(catalog: Iterable[ToolEntry]) -> pb.ListToolsResponse:
    """ListTools' answer: every configured tool (``ToolService.catalog``), also in each wire's shape."""
    return pb.ListToolsResponse(tools=[_tool_info(t) for t in catalog])


_CATALOG_KINDS = {"search": pb.TOOL_KIND_SEARCH, "fetch": pb.TOOL_KIND_FETCH}
"""A tool of an MCP server is neither: TOOL_KIND_UNSPECIFIED."""


def _tool_info(t: ToolEntry) -> pb.ToolInfo:
    params = json.dumps(t.parameters, separators=(",", ":"))
    parameters = dict(t.parameters)
    return pb.ToolInfo(
        definition=pb.ToolDefinition(name=t.name, description=t.description, parameters_json=params),
        kind=_CATALOG_KINDS.get(t.kind, pb.TOOL_KIND_UNSPECIFIED),
        service=t.service,
        idempotent=t.idempotent,
        openai_json=json.dumps(openai_tool(t.name, t.description, parameters)),
        anthropic_json=json.dumps(anthropic_tool(t.name, t.description, parameters)),
    )


def model_list(config: Config) -> pb.ListModelsResponse:
    """ListModels' answer: the catalog, each model's retry budget resolved as a call resolves it; then
    the routes (``route_info``)."""
    listed = pb.ListModelsResponse(
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
                upstream_retries=config.model_retries(mid),
            )
            for mid, m in config.models.items()
        ]
    )
    listed.models.extend(route_info(config, rid) for rid in config.routes)
    return listed


def route_info(config: Config, route_id: str) -> pb.ModelInfo:
    """A route as ListModels shows it: its deployments (balance, fallback, context; balance weighted),
    the wire format they share (else none), the longest conversation it is sure to take (the context
    fallback's window, or the smallest of the others'), and the most output a call may ask for (the
    smallest maximum). No provider, upstream model or prices: those are each deployment's own."""
    route = config.routes[route_id].route
    models = config.models
    deployments = [pb.RouteDeployment(id=d, role="balance", weight=w) for d, w in route.balance.items()]
    deployments += [pb.RouteDeployment(id=d, role="fallback") for d in route.fallbacks]
    if route.context_fallback is not None:
        deployments.append(pb.RouteDeployment(id=route.context_fallback, role="context"))
    ordinary = [models[d] for d in [*route.balance, *route.fallbacks]]
    window = min(m.context_window for m in ordinary)
    if route.context_fallback is not None:
        window = max(window, models[route.context_fallback].context_window)
    everyone = [models[d.id] for d in deployments]
    formats = {config.providers[m.provider].wire_format for m in everyone}
    return pb.ModelInfo(
        id=route_id,
        wire_format=formats.pop() if len(formats) == 1 else "",
        context_window=window,
        max_output_tokens=min(m.max_output_tokens for m in everyone),
        upstream_retries=config.model_retries(route_id),
        deployments=deployments,
    )


def report_failure(answer: ReportAnswer) -> pb.Failure:
    """ClassifyFailure's answer: the failure, or an empty Failure (a granted probe says so)."""
    if answer.failure is not None:
        return failure(answer.failure)
    granted = pb.Failure()
    if answer.probe_granted:
        granted.circuit.service = answer.service
        granted.circuit.state = pb.CIRCUIT_STATE_HALF_OPEN
    return granted


def failure(f: SidecarFailure) -> pb.Failure:
    """The ``sidecar.v1.Failure`` of a failure: every field, the detail in its oneof field."""
    msg = pb.Failure(
        kind=int(f.kind),  # type: ignore[arg-type]
        correctable=f.correctable,
        message=f.message,
        explanation=f.explain_to_llm(),
        attempts=f.attempts,
        hops=[hop(h) for h in f.hops],
    )
    if f.http is not None:
        msg.http.CopyFrom(_http(f.http))
    if f.retry_after is not None:
        msg.retry_after.CopyFrom(_duration(f.retry_after))
    if f.detail is not None:
        field, value = _detail(f.detail)
        getattr(msg, field).CopyFrom(value)
    return msg


def _http(h: d.HttpInfo) -> pb.HttpDetail:
    msg = pb.HttpDetail(status_code=h.status_code, service=h.service, endpoint=h.endpoint, body=h.body)
    if h.retry_after_raw is not None:
        msg.retry_after_raw = h.retry_after_raw
    return msg


def _duration(seconds: float) -> duration_pb2.Duration:
    out = duration_pb2.Duration()
    out.FromNanoseconds(round(seconds * 1e9))
    return out


def _timestamp(when: datetime) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(when.astimezone(UTC))
    return out


def _trigger(t: d.Trigger) -> pb.TriggerResponse:
    msg = pb.TriggerResponse(status_code=t.status_code or 0, status=t.status, detail=t.detail)
    if t.retry_after_raw is not None:
        msg.retry_after_raw = t.retry_after_raw
    return msg


def _detail(detail: d.Detail) -> tuple[str, Any]:
    """The ``Failure.detail`` oneof field and message of a core detail."""
    match detail:
        case d.InvalidInputDetail():
            return "invalid_input", pb.InvalidInputDetail(
                parameter=detail.parameter, value=detail.value, rule=detail.rule
            )
        case d.ResourceDetail():
            return "resource", pb.ResourceDetail(
                resource_type=detail.resource_type, identifier=detail.identifier, available=list(detail.available)
            )
        case d.ProviderDetail():
            return "provider", pb.ProviderDetail(
                provider=detail.provider,
                account=detail.account,
                model=detail.model,
                provider_message=detail.provider_message,
            )
        case d.TokenLimitDetail():
            return "token_limit", pb.TokenLimitDetail(
                estimate=detail.estimate,
                limit=detail.limit,
                overflow=detail.overflow,
                ratio=detail.ratio,
                model=detail.model,
            )
        case d.RefusalDetail():
            return "refusal", pb.RefusalDetail(
                model=detail.model, category=detail.category, explanation=detail.explanation
            )
        case d.CircuitDetail():
            return "circuit", pb.CircuitDetail(
                service=detail.service,
                state=int(detail.state),  # type: ignore[arg-type]
                since=_timestamp(detail.since),
                cooldown=_duration(detail.cooldown_s),
                opened_by=_trigger(detail.opened_by),
            )
        case d.ServiceDetail():
            return "service", pb.ServiceDetail(
                service=detail.service,
                endpoint=detail.endpoint,
                detail=detail.detail,
                fault=int(detail.fault),  # type: ignore[arg-type]
            )
        case d.RetryDetail():
            retry = pb.RetryDetail(
                budget=detail.budget,
                last_signal=int(detail.last_signal),  # type: ignore[arg-type]
                target=detail.target,
            )
            if detail.next_wait_s is not None:
                retry.next_wait.CopyFrom(_duration(detail.next_wait_s))
            return "retry", retry
        case d.SpendDetail():
            return "spend", pb.SpendDetail(
                workflow_id=detail.workflow_id, spent_usd=detail.spent_usd, cap_usd=detail.cap_usd
            )
        case d.ReplyDetail():
            return "reply", pb.ReplyDetail(
                parser_reason=detail.parser_reason,
                expected_shape=detail.expected_shape,
                fields=[pb.FieldProblem(field=p.field, problem=p.problem) for p in detail.fields],
                model=detail.model,
            )
        case d.SystemDetail():
            return "system", pb.SystemDetail(component=detail.component)
        case d.TruncationDetail():
            return "truncation", pb.TruncationDetail(
                model=detail.model,
                max_output_tokens=detail.max_output_tokens,
                model_max_output_tokens=detail.model_max_output_tokens,
            )
        case d.PermissionDetail():
            return "permission", pb.PermissionDetail(resource=detail.resource)
        case d.StreamDetail():
            return "stream", pb.StreamDetail(
                partial_text=detail.partial_text, reason=detail.reason, deltas_sent=detail.deltas_sent
            )
    raise TypeError(f"no sidecar.v1 detail for {type(detail).__name__}")  # pragma: no cover - exhaustive above
