"""The observer the core reports to, as OpenTelemetry spans, span events and metrics.

    report                         becomes
    model_call(ModelCallStart)     span ``chat {model}`` (CLIENT), gen_ai.* attributes; operation and token metrics
    tool_call(ToolCallStart)       span ``execute_tool {tool}`` (INTERNAL); operation metric
    hop(HopStart)                  span ``route.hop {deployment}`` (INTERNAL), current while the hop runs
    attempt(AttemptStart)          span ``{METHOD}`` (CLIENT), current while it runs (traceparent goes upstream)
    wait(WaitStart)                span ``sidecar.backoff`` / ``sidecar.throttle_wait``; sidecar.wait.duration
    compaction(CompactionStart)    span ``compaction`` (INTERNAL), current while it runs (the summarizer's
                                   ``chat`` span its child): trigger, tokens before/after, strategies
    event(ThrottleChanged ...)     a span event on the span current at that moment; Retried: sidecar.retries;
                                   StreamRestarted: sidecar.stream.restart on the call's chat span;
                                   StreamContinued: sidecar.stream.continued on it; StreamEventSkipped:
                                   sidecar.stream.event_skipped on the attempt's span
    record.first_token() / chunk() a streamed attempt's deltas: the sidecar.first_token event, and the
                                   time_to_first_chunk / time_per_output_chunk histograms

Every name comes from ``telemetry.names``; with no SDK installed the tracer hands out one shared
no-op (``telemetry.tracing``), so a call pays a type check per span and nothing more. What each
span is told as its call goes is ``telemetry.call_spans``; the span event of each core event,
``telemetry.span_events``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from sidecar.core.clock import Clock
from sidecar.core.compaction.report import CompactionStart
from sidecar.core.conversation import DocumentPart, ImagePart, Job, ModelRequest, Part, TextPart
from sidecar.core.observer import (
    AttemptStart,
    Event,
    HopStart,
    ModelCallStart,
    OverheadMeasured,
    ReportAccepted,
    Retried,
    StateBackendChanged,
    StreamContinued,
    StreamRestarted,
    Target,
    ToolCallStart,
    WaitKind,
    WaitStart,
)
from sidecar.core.redact import mask_keys
from sidecar.core.text import cap
from sidecar.telemetry import names as n
from sidecar.telemetry.call_spans import AttemptSpan, CompactionSpan, HopSpan, ModelCallSpan, ToolCallSpan
from sidecar.telemetry.metrics import OTHER, Metrics
from sidecar.telemetry.span_events import span_event, target_attr
from sidecar.telemetry.tracing import Tracer

__all__ = ["TelemetryObserver"]

_tracer = Tracer(n.TRACER)
NAME_CHARS = 128
"""A caller's model or tool name is cut to this many characters in span names and attributes."""
_WAIT_SPANS = {WaitKind.BACKOFF: n.SPAN_BACKOFF, WaitKind.THROTTLE: n.SPAN_THROTTLE_WAIT}
_CHAT_SPAN: ContextVar[Span | None] = ContextVar("sidecar_chat_span", default=None)
"""The model call running in this context: a stream's restart is an event of the call, reported while
an attempt (its CLIENT span current) is sending."""


def _bounded(name: str) -> str:
    """A caller's model or tool name as a span name or attribute: at most NAME_CHARS (a caller
    can send a name of any length; an unknown one is answered with a failure, its span still named)."""
    return cap(name, NAME_CHARS) if len(name) > NAME_CHARS else name


def _job_attrs(attrs: dict[str, Any], job: Job) -> None:
    if job.job_id:
        attrs[n.JOB_ID] = job.job_id
    if job.workflow_id:
        attrs[n.WORKFLOW_ID] = job.workflow_id


def _part_json(part: Part) -> dict[str, Any]:
    """A part as a span shows it: text as it is, an image or a document by its size or URL, never its bytes."""
    match part:
        case TextPart():
            return {"type": "text", "content": part.text}
        case ImagePart():
            where = {"bytes": len(part.data)} if part.data else {"url": part.url}
            return {"type": "image", "media_type": part.media_type, **where}
        case DocumentPart():
            if part.text is not None:
                return {"type": "document", "title": part.title, "content": part.text}
            where = {"bytes": len(part.data)} if part.data else {"url": part.url}
            return {"type": "document", "title": part.title, **where}


def _messages_json(request: ModelRequest) -> str:
    """The conversation as the GenAI conventions' input messages (with ``record_content``; masked after)."""
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    for m in request.messages:
        entry: dict[str, Any] = {"role": m.role.name.lower(), "content": m.text}
        if m.parts:
            entry["content"] = [_part_json(p) for p in m.parts]
        if m.reasoning:
            entry["reasoning"] = [r.text if not r.redacted_data else "[redacted]" for r in m.reasoning]
        out.append(entry)
    return json.dumps(out)


class TelemetryObserver:
    """Spans, events and metrics for everything the core reports."""

    __slots__ = ("_record_content", "_secrets", "clock", "metrics")

    def __init__(self, clock: Clock, metrics: Metrics, *, record_content: bool, secrets: tuple[str, ...]) -> None:
        self.clock = clock
        self.metrics = metrics
        self._record_content = record_content
        self._secrets = secrets

    def mask(self, text: str) -> str:
        return mask_keys(text, self._secrets)

    def records_content(self, span: Span) -> bool:
        return self._record_content and span.is_recording()

    @contextmanager
    def model_call(self, start: ModelCallStart) -> Iterator[ModelCallSpan]:
        request = start.request
        model = _bounded(request.model)
        attrs: dict[str, Any] = {
            n.GEN_AI_OPERATION: n.OP_CHAT,
            n.GEN_AI_PROVIDER: start.provider,
            n.GEN_AI_REQUEST_MODEL: model,
            n.MODEL_ID: model,
        }
        if start.max_tokens is not None:
            attrs[n.GEN_AI_REQUEST_MAX_TOKENS] = start.max_tokens
        if request.temperature is not None:
            attrs[n.GEN_AI_REQUEST_TEMPERATURE] = request.temperature
        if start.streamed:
            attrs[n.STREAMED] = True
        _job_attrs(attrs, request.job)
        if start.host:
            attrs[n.SERVER_ADDRESS] = start.host
            if start.port:
                attrs[n.SERVER_PORT] = start.port
        name = n.SPAN_CHAT.format(model=model or "unknown")
        with _tracer.start_as_current_span(name, kind=SpanKind.CLIENT, attributes=attrs) as span:
            if span.is_recording() and self._record_content:
                span.set_attribute(n.GEN_AI_INPUT_MESSAGES, self.mask(_messages_json(request)))
                if request.controls.provider_options_json:
                    options = self.mask(request.controls.provider_options_json)
                    span.set_attribute(n.PROVIDER_OPTIONS, options)
            if not start.streamed:
                yield ModelCallSpan(self, span, start)
                return
            token = _CHAT_SPAN.set(span)
            try:
                yield ModelCallSpan(self, span, start)
            finally:
                _CHAT_SPAN.reset(token)

    @contextmanager
    def tool_call(self, start: ToolCallStart) -> Iterator[ToolCallSpan]:
        attrs: dict[str, Any] = {
            n.GEN_AI_OPERATION: n.OP_EXECUTE_TOOL,
            n.GEN_AI_TOOL_NAME: _bounded(start.tool),
            n.GEN_AI_TOOL_TYPE: "function",
        }
        if start.call_id:
            attrs[n.GEN_AI_TOOL_CALL_ID] = start.call_id
        if start.known:
            attrs[n.GEN_AI_TOOL_DESCRIPTION] = start.description
            attrs[n.SERVICE] = start.service
        _job_attrs(attrs, start.job)
        name = n.SPAN_EXECUTE_TOOL.format(tool=_bounded(start.tool) or "unknown")
        with _tracer.start_as_current_span(name, attributes=attrs) as span:
            if self.records_content(span):
                span.set_attribute(n.GEN_AI_TOOL_ARGUMENTS, self.mask(start.arguments_json))
            yield ToolCallSpan(self, span, start)

    @contextmanager
    def hop(self, start: HopStart) -> Iterator[HopSpan]:
        attrs: dict[str, Any] = {
            n.ROUTE: start.route,
            n.MODEL_ID: start.deployment,
            n.HOP: start.number,
            n.HOP_ROLE: start.role,
            n.GEN_AI_PROVIDER: start.provider,
        }
        if start.host:
            attrs[n.SERVER_ADDRESS] = start.host
        if start.port:
            attrs[n.SERVER_PORT] = start.port
        name = n.SPAN_ROUTE_HOP.format(deployment=start.deployment)
        with _tracer.start_as_current_span(name, attributes=attrs) as span:
            yield HopSpan(self, span)

    @contextmanager
    def compaction(self, start: CompactionStart) -> Iterator[CompactionSpan]:
        attrs: dict[str, Any] = {
            n.MODEL_ID: _bounded(start.model),
            n.COMPACTION_TRIGGER: start.trigger,
            n.COMPACTION_TOKENS_BEFORE: start.tokens_before,
            n.COMPACTION_WINDOW: start.window,
        }
        with _tracer.start_as_current_span(n.SPAN_COMPACTION, attributes=attrs) as span:
            yield CompactionSpan(span)

    @contextmanager
    def attempt(self, start: AttemptStart) -> Iterator[AttemptSpan]:
        attrs: dict[str, Any] = {n.URL_FULL: start.url, n.ATTEMPT: start.number}
        if start.mcp_tool:  # the MCP conventions: named "{mcp.method.name} {gen_ai.tool.name}"
            attrs[n.MCP_METHOD_NAME] = start.method
            attrs[n.GEN_AI_TOOL_NAME] = start.mcp_tool
            name = n.SPAN_MCP_CLIENT.format(method=start.method, tool=start.mcp_tool)
        else:
            attrs[n.HTTP_METHOD] = start.method
            name = start.method
        if start.output_budget is not None:
            attrs[n.OUTPUT_BUDGET] = start.output_budget
        if start.host:
            attrs[n.SERVER_ADDRESS] = start.host
        if start.port:
            attrs[n.SERVER_PORT] = start.port
        if start.target is Target.SERVICE:
            attrs[n.SERVICE] = start.name
        if start.number > 1:
            attrs[n.HTTP_RESEND_COUNT] = start.number - 1
        if start.probe:
            attrs[n.CIRCUIT_PROBE] = True
        span = _tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attrs)
        attempt = AttemptSpan(span, self, start)
        try:
            yield attempt
        except BaseException:
            attempt.interrupted()
            raise
        finally:
            attempt.counted()
            span.end()

    @contextmanager
    def wait(self, start: WaitStart) -> Iterator[None]:
        attrs: dict[str, Any] = {n.WAIT_SECONDS: start.seconds, target_attr(start.target): start.name}
        if start.kind is WaitKind.BACKOFF:
            attrs[n.RETRY_SIGNAL] = start.signal.label
            attrs[n.ATTEMPT] = start.attempt
        else:
            attrs[n.THROTTLE] = start.throttle
        began = self.clock.time()
        try:
            with _tracer.start_as_current_span(_WAIT_SPANS[start.kind], attributes=attrs):
                yield
        finally:
            target = {"model": start.name} if start.target is Target.MODEL else {"service": start.name}
            self.metrics.wait(start.kind.value, self.clock.time() - began, **target)

    def event(self, event: Event) -> None:
        if isinstance(event, OverheadMeasured):
            name = event.name if event.known else OTHER
            self.metrics.overhead(event.operation, name, event.door, event.seconds)
            return
        if isinstance(event, Retried):
            target = {"model": event.name} if event.target is Target.MODEL else {"service": event.name}
            self.metrics.retry(event.signal.label, **target)
            return
        if isinstance(event, StateBackendChanged):
            self.metrics.state_available(event.backend, event.available)
        span = trace.get_current_span()
        if isinstance(event, (StreamRestarted, StreamContinued)):
            span = _CHAT_SPAN.get() or span
        if not span.is_recording():
            return
        if isinstance(event, ReportAccepted):  # a fact about the RPC: an attribute of its span, not an event
            span.set_attribute(n.REPORT_ACCEPTED, event.accepted)
            return
        name, attrs = span_event(event)
        span.add_event(name, attrs)
