"""In: the ``sidecar.v1`` requests as the core's plain types, and what the door resolves once.

``model_request``, ``tool_request``, ``report`` (ClassifyFailure's), and ``call_options``: the
deadline on the injected clock, the caller's retry-budget override. Enums convert by number; a
number a newer peer sent that this side does not know reads as the enum's default.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TypeVar

from sidecar_contract.v1 import sidecar_pb2 as pb

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
    ObservedResponse,
    Overflow,
    OverflowPolicy,
    Part,
    Reasoning,
    ReasoningPart,
    Report,
    TextPart,
    ToolCall,
    ToolCallResult,
    ToolChoice,
    ToolDefinition,
    ToolRequest,
)
from sidecar.core.kinds import Role, TransportFault

__all__ = ["call_options", "job", "message", "model_request", "part", "report", "tool_request"]

_TOOL_KINDS = {pb.TOOL_KIND_SEARCH: "search", pb.TOOL_KIND_FETCH: "fetch", pb.TOOL_KIND_UNSPECIFIED: "fetch"}
_MID_STREAM = {
    pb.MID_STREAM_POLICY_RESTART: MidStream.RESTART,
    pb.MID_STREAM_POLICY_FAIL: MidStream.FAIL,
    pb.MID_STREAM_POLICY_CONTINUE: MidStream.CONTINUE,
}
_ACTION = {pb.OVERFLOW_ACTION_FAIL: Overflow.FAIL, pb.OVERFLOW_ACTION_COMPACT: Overflow.COMPACT}
_STRATEGY = {
    pb.COMPACTION_STRATEGY_TOOL_RESULTS: Overflow.TOOL_RESULTS,
    pb.COMPACTION_STRATEGY_REASONING: Overflow.REASONING,
    pb.COMPACTION_STRATEGY_SUMMARIZE: Overflow.SUMMARIZE,
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


def _on_overflow(req: pb.CallModelRequest) -> OverflowPolicy | None:
    """The call's overflow policy; a strategy this side does not know keeps its number, refused by name."""
    if not req.HasField("on_overflow"):
        return None
    p = req.on_overflow
    strategies = tuple(_STRATEGY.get(s, f"unknown strategy {int(s)}") for s in p.strategies)
    return OverflowPolicy(action=_ACTION.get(p.action), strategies=strategies)


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
        on_overflow=_on_overflow(req),
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
