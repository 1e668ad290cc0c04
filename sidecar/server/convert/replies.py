"""Out: the core's answers as ``sidecar.v1`` messages.

``model_response`` (CallModel's, and StreamModel's ``Final``), ``stream_event`` (each StreamModel
event), ``tool_response`` (ExecuteTool's: its result, or its failure as ``failures.failure`` builds it).
"""

from __future__ import annotations

from google.protobuf import struct_pb2
from sidecar_contract.v1 import sidecar_pb2 as pb

from sidecar.core.conversation import (
    CacheBreakpoint,
    Compaction,
    DocumentPart,
    ImagePart,
    Message,
    ModelResponse,
    Overflow,
    Part,
    ReasoningPart,
    ToolOutcome,
    Usage,
)
from sidecar.core.stream import Continued, Final, ReasoningDelta, Restart, StreamEvent, TextDelta, ToolCallDelta
from sidecar.server.convert.failures import failure, hop

__all__ = ["compaction", "history_message", "model_response", "stream_event", "tool_response"]


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


_TRIGGER = {Overflow.ESTIMATE: pb.COMPACTION_TRIGGER_ESTIMATE, Overflow.PROVIDER: pb.COMPACTION_TRIGGER_PROVIDER}
_STRATEGY = {
    Overflow.TOOL_RESULTS: pb.COMPACTION_STRATEGY_TOOL_RESULTS,
    Overflow.REASONING: pb.COMPACTION_STRATEGY_REASONING,
    Overflow.SUMMARIZE: pb.COMPACTION_STRATEGY_SUMMARIZE,
}


def compaction(c: Compaction) -> pb.Compaction:
    """What a call compacted, its messages whole (a caller adopts them in place of its own)."""
    return pb.Compaction(
        trigger=_TRIGGER[c.trigger],
        tokens_before=c.tokens_before,
        tokens_after=c.tokens_after,
        steps=[
            pb.CompactionStep(
                strategy=_STRATEGY[s.strategy],
                turns=s.turns,
                tokens_before=s.tokens_before,
                tokens_after=s.tokens_after,
            )
            for s in c.steps
        ],
        messages=[history_message(m) for m in c.messages],
        summarizer_calls=c.summarizer_calls,
    )


_DETAIL = {"auto": pb.IMAGE_DETAIL_AUTO, "low": pb.IMAGE_DETAIL_LOW, "high": pb.IMAGE_DETAIL_HIGH}
_TTL = {"5m": pb.CACHE_TTL_5M, "1h": pb.CACHE_TTL_1H}


def _cache_pb(c: CacheBreakpoint | None) -> pb.CacheBreakpoint | None:
    return None if c is None else pb.CacheBreakpoint(ttl=_TTL.get(c.ttl, pb.CACHE_TTL_UNSPECIFIED))


def _part_pb(p: Part) -> pb.Part:
    if isinstance(p, ImagePart):
        image = pb.ImagePart(media_type=p.media_type, detail=_DETAIL.get(p.detail, pb.IMAGE_DETAIL_UNSPECIFIED))
        if p.url:
            image.url = p.url
        else:
            image.data = p.data
        return pb.Part(image=image, cache=_cache_pb(p.cache))
    if isinstance(p, DocumentPart):
        doc = pb.DocumentPart(media_type=p.media_type, title=p.title)
        if p.text is not None:
            doc.text = p.text
        elif p.url:
            doc.url = p.url
        else:
            doc.data = p.data
        return pb.Part(document=doc, cache=_cache_pb(p.cache))
    return pb.Part(text=p.text, cache=_cache_pb(p.cache))


def history_message(m: Message) -> pb.Message:
    """A conversation's message whole, as a caller sends it: its parts and its results' parts too."""
    out = _message_pb(m)
    out.parts.extend(_part_pb(p) for p in m.parts)
    for result, r in zip(out.tool_results, m.tool_results, strict=True):
        result.parts.extend(_part_pb(p) for p in r.parts)
    return out


def _usage(u: Usage) -> pb.Usage:
    return pb.Usage(
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        cache_read_input_tokens=u.cache_read_input_tokens,
        cache_write_input_tokens=u.cache_write_input_tokens,
        reasoning_tokens=u.reasoning_tokens,
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
    if r.compaction is not None:
        resp.compaction.CopyFrom(compaction(r.compaction))
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
