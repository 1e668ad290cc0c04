"""The observer the core reports to, as OpenTelemetry spans, span events and metrics.

    report                         becomes
    model_call(ModelCallStart)     span ``chat {model}`` (CLIENT), gen_ai.* attributes; operation and token metrics
    tool_call(ToolCallStart)       span ``execute_tool {tool}`` (INTERNAL); operation metric
    hop(HopStart)                  span ``route.hop {deployment}`` (INTERNAL), current while the hop runs
    attempt(AttemptStart)          span ``{METHOD}`` (CLIENT), current while it runs (traceparent goes upstream)
    wait(WaitStart)                span ``sidecar.backoff`` / ``sidecar.throttle_wait``; sidecar.wait.duration
    event(ThrottleChanged ...)     a span event on the span current at that moment; Retried: sidecar.retries;
                                   StreamRestarted: sidecar.stream.restart on the call's chat span;
                                   StreamContinued: sidecar.stream.continued on it; StreamEventSkipped:
                                   sidecar.stream.event_skipped on the attempt's span
    record.first_token() / chunk() a streamed attempt's deltas: the sidecar.first_token event, and the
                                   time_to_first_chunk / time_per_output_chunk histograms

Every name comes from ``telemetry.names``; with no SDK installed the tracer hands out one shared
no-op (``telemetry.tracing``), so a call pays a type check per span and nothing more.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, StatusCode

from sidecar.core.clock import Clock
from sidecar.core.conversation import (
    DocumentPart,
    ImagePart,
    Job,
    ModelRequest,
    ModelResponse,
    Part,
    TextPart,
    ToolOutcome,
    Usage,
)
from sidecar.core.details import Hop
from sidecar.core.kinds import FailureKind
from sidecar.core.observer import (
    AttemptStart,
    CircuitChanged,
    CircuitEvent,
    Correction,
    Event,
    HopStart,
    ModelCallStart,
    ModelPaused,
    OutputBudgetRaised,
    OverheadMeasured,
    ReportAccepted,
    Retried,
    StateBackendChanged,
    StreamContinued,
    StreamEventSkipped,
    StreamRestarted,
    Target,
    ThrottleChanged,
    ToolCallStart,
    WaitKind,
    WaitStart,
)
from sidecar.core.redact import mask_keys
from sidecar.core.taxonomy import SidecarFailure
from sidecar.core.text import cap
from sidecar.telemetry import names as n
from sidecar.telemetry.metrics import OTHER, Metrics
from sidecar.telemetry.tracing import Tracer, injected, use_span

__all__ = ["TelemetryObserver"]

_tracer = Tracer(n.TRACER)
NAME_CHARS = 128
"""A caller's model or tool name is cut to this many characters in span names and attributes."""
_CIRCUIT_EVENTS = {
    CircuitEvent.OPENED: n.EVENT_CIRCUIT_OPENED,
    CircuitEvent.REOPENED: n.EVENT_CIRCUIT_REOPENED,
    CircuitEvent.HALF_OPEN: n.EVENT_CIRCUIT_HALF_OPEN,
    CircuitEvent.CLOSED: n.EVENT_CIRCUIT_CLOSED,
    CircuitEvent.PROBE_LOST: n.EVENT_CIRCUIT_PROBE_LOST,
    CircuitEvent.REFUSED: n.EVENT_CIRCUIT_REFUSED,
}
_WAIT_SPANS = {WaitKind.BACKOFF: n.SPAN_BACKOFF, WaitKind.THROTTLE: n.SPAN_THROTTLE_WAIT}
_CHAT_SPAN: ContextVar[Span | None] = ContextVar("sidecar_chat_span", default=None)
"""The model call running in this context: a stream's restart is an event of the call, reported while
an attempt (its CLIENT span current) is sending."""


def _bounded(name: str) -> str:
    """A caller's model or tool name as a span name or attribute: at most NAME_CHARS (a caller
    can send a name of any length; an unknown one is answered with a failure, its span still named)."""
    return cap(name, NAME_CHARS) if len(name) > NAME_CHARS else name


def _target_attr(target: Target) -> str:
    return n.MODEL_ID if target is Target.MODEL else n.SERVICE


def _job_attrs(attrs: dict[str, Any], job: Job) -> None:
    if job.job_id:
        attrs[n.JOB_ID] = job.job_id
    if job.workflow_id:
        attrs[n.WORKFLOW_ID] = job.workflow_id


def _usage(attrs: dict[str, Any], spent: Usage) -> None:
    """The GenAI usage attributes, into ``attrs`` (the cache and reasoning counts only when there are some)."""
    if not (spent.input_tokens or spent.output_tokens):
        return
    attrs[n.GEN_AI_INPUT_TOKENS] = spent.input_tokens
    attrs[n.GEN_AI_OUTPUT_TOKENS] = spent.output_tokens
    if spent.cache_read_input_tokens:
        attrs[n.GEN_AI_CACHE_READ_TOKENS] = spent.cache_read_input_tokens
    if spent.cache_write_input_tokens:
        attrs[n.GEN_AI_CACHE_WRITE_TOKENS] = spent.cache_write_input_tokens
    if spent.reasoning_tokens:
        attrs[n.GEN_AI_REASONING_TOKENS] = spent.reasoning_tokens


def _mark_failed(span: Span, failure: SidecarFailure) -> None:
    span.set_attribute(n.ERROR_TYPE, failure.kind_name)
    span.set_attribute(n.FAILURE_KIND, failure.kind_name)
    span.set_attribute(n.CORRECTABLE, failure.correctable)
    span.set_attribute(n.ATTEMPTS, failure.attempts)
    span.set_status(StatusCode.ERROR, failure.kind_name)


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


class _Attempt:
    """An attempt span, told what the attempt saw (a streamed one: its deltas, timed)."""

    __slots__ = ("_began", "_clock", "_labels", "_last", "_metrics", "_outcome", "_signal", "_span", "_start")

    def __init__(self, span: Span, observer: TelemetryObserver, start: AttemptStart) -> None:
        self._span = span
        self._start = start
        self._metrics = observer.metrics
        self._clock = observer.clock
        self._began = self._last = observer.clock.time() if start.streamed else 0.0
        self._labels: dict[str, Any] | None = None
        self._outcome = "ok"
        self._signal = ""

    def interrupted(self) -> None:
        """The attempt ended by an exception nothing classified (a cancel, a bug): failed, unless said otherwise."""
        if self._outcome == "ok":
            self._outcome = "failed"

    def counted(self) -> None:
        """The attempt ended: one sidecar.attempts, by its outcome and the signal it saw (a signal is a failure)."""
        if self._signal and self._outcome == "ok":
            self._outcome = "failed"
        target = self._start.name
        if self._start.target is Target.MODEL:
            self._metrics.attempt(self._outcome, self._signal, model=target)
        else:
            self._metrics.attempt(self._outcome, self._signal, service=target)

    def _chunk_labels(self) -> dict[str, Any]:
        if self._labels is None:
            self._labels = self._metrics.chunk_labels(self._start.name, self._start.provider)
        return self._labels

    def active(self) -> AbstractContextManager[Any]:
        return use_span(self._span)

    def trace_headers(self) -> dict[str, str]:
        if not self._span.is_recording():
            return {}
        return injected(self._span)  # the upstream may continue the trace from this attempt (current: active())

    def answered(self, status: int) -> None:
        if status >= 400 and self._outcome == "ok":
            self._outcome = "failed"
        self._span.set_attribute(n.HTTP_STATUS, status)

    def transport_fault(self, error_type: str, detail: str) -> None:
        self._outcome = "transport_fault"
        self._span.set_attribute(n.ERROR_TYPE, error_type)
        self._span.set_status(StatusCode.ERROR, detail)

    def failed(self, error_type: str) -> None:
        if self._outcome == "ok":
            self._outcome = "failed"
        self._span.set_attribute(n.ERROR_TYPE, error_type)
        self._span.set_status(StatusCode.ERROR)

    def failure_kind(self, kind: str) -> None:
        if self._outcome == "ok":
            self._outcome = "failed"
        self._span.set_attribute(n.FAILURE_KIND, kind)

    def retry_signal(self, signal: Any) -> None:
        self._signal = signal.label
        self._span.set_attribute(n.RETRY_SIGNAL, signal.label)

    def asked_to_wait(self, seconds: float) -> None:
        self._span.set_attribute(n.RETRY_AFTER, seconds)

    def will_wait(self, seconds: float) -> None:
        self._span.set_attribute(n.RETRY_WAIT, seconds)

    def usage(self, input_tokens: int, output_tokens: int, finish: str, response_model: str) -> None:
        attrs: dict[str, Any] = {n.GEN_AI_INPUT_TOKENS: input_tokens, n.GEN_AI_OUTPUT_TOKENS: output_tokens}
        if finish:
            attrs[n.GEN_AI_FINISH_REASONS] = [finish]
        if response_model:
            attrs[n.GEN_AI_RESPONSE_MODEL] = response_model
        self._span.set_attributes(attrs)  # one lock taken, not one per attribute

    def correction(self, reason: str) -> None:
        self._span.set_attribute(n.CORRECTION_REASON, reason)

    def first_token(self) -> None:
        self._span.add_event(n.EVENT_FIRST_TOKEN)
        self._last = now = self._clock.time()
        self._metrics.first_chunk(now - self._began, self._chunk_labels())

    def chunk(self) -> None:
        now = self._clock.time()
        self._metrics.next_chunk(now - self._last, self._chunk_labels())
        self._last = now

    def ended(self, reason: str) -> None:
        self._span.set_attribute(n.ERROR_TYPE, reason)


class _ModelCall:
    """The ``chat {model}`` span and the operation's metrics."""

    __slots__ = ("_clock", "_label", "_metrics", "_observer", "_provider", "_span", "_start", "_started")

    def __init__(self, observer: TelemetryObserver, span: Span, start: ModelCallStart) -> None:
        self._observer = observer
        self._span = span
        self._start = start
        self._metrics = observer.metrics
        self._clock = observer.clock
        self._started = observer.clock.time()
        self._label = start.request.model if start.known else OTHER
        self._provider = start.provider

    def tally(self, attempts: int, corrections: int, spent: Usage) -> None:
        attrs: dict[str, Any] = {n.ATTEMPTS: attempts, n.CORRECTIONS: corrections}
        _usage(attrs, spent)
        self._span.set_attributes(attrs)

    def succeeded(self, response: ModelResponse) -> None:
        span = self._span
        attrs: dict[str, Any] = {}
        if response.response_model:
            attrs[n.GEN_AI_RESPONSE_MODEL] = response.response_model
        if response.raw_finish:
            attrs[n.GEN_AI_FINISH_REASONS] = [response.raw_finish]
        if response.response_id:
            attrs[n.GEN_AI_RESPONSE_ID] = response.response_id
        attrs[n.OUTPUT_BUDGET_RAISED] = response.output_budget_raised
        if response.hops:
            attrs[n.SERVED_BY] = response.served_by
            attrs[n.HOPS] = len(response.hops)
        if self._observer.records_content(span):
            output = json.dumps([{"role": "assistant", "content": response.message.text}])
            attrs[n.GEN_AI_OUTPUT_MESSAGES] = self._observer.mask(output)
        span.set_attributes(attrs)
        elapsed = self._clock.time() - self._started
        self._metrics.operation(n.OP_CHAT, self._label, elapsed, None, self._provider)
        self._metrics.tokens(
            self._label, response.total_usage.input_tokens, response.total_usage.output_tokens, self._provider
        )
        u = response.total_usage
        kinds = ("input", "output", "cache_read", "cache_write", "reasoning")
        counts = (u.input_tokens, u.output_tokens, u.cache_read_input_tokens, u.cache_write_input_tokens)
        self._metrics.token_counts(self._label, self._provider, zip(kinds, (*counts, u.reasoning_tokens), strict=True))
        self._metrics.spent(self._label, self._provider, response.cost_usd)

    def tool_finished(self, outcome: ToolOutcome) -> None:  # pragma: no cover - not a tool call
        raise TypeError("a model call has no tool outcome")

    def failed(self, failure: SidecarFailure) -> None:
        _mark_failed(self._span, failure)
        if failure.hops:
            self._span.set_attribute(n.HOPS, len(failure.hops))
        self._metrics.failure(failure.kind_name, n.OP_CHAT)
        elapsed = self._clock.time() - self._started
        self._metrics.operation(n.OP_CHAT, self._label, elapsed, failure.kind_name, self._provider)


HOP_REASON_CHARS = 300
"""A failed hop's reason is recorded on its span up to this many characters."""


class _Hop:
    """A ``route.hop {deployment}`` span, told what the hop spent and how it ended."""

    __slots__ = ("_observer", "_span")

    def __init__(self, observer: TelemetryObserver, span: Span) -> None:
        self._observer = observer
        self._span = span

    def tally(self, attempts: int, corrections: int, spent: Usage) -> None:
        attrs: dict[str, Any] = {n.ATTEMPTS: attempts, n.CORRECTIONS: corrections}
        _usage(attrs, spent)
        self._span.set_attributes(attrs)

    def ended(self, hop: Hop) -> None:
        span = self._span
        if hop.skipped:
            span.set_attribute(n.HOP_SKIPPED, True)
            span.set_attribute(n.ATTEMPTS, 0)
        if hop.kind is FailureKind.UNSPECIFIED:
            return
        span.set_attribute(n.ERROR_TYPE, hop.kind.name)
        span.set_attribute(n.FAILURE_KIND, hop.kind.name)
        span.set_attribute(n.HOP_REASON, self._observer.mask(cap(hop.reason, HOP_REASON_CHARS)))
        span.set_status(StatusCode.ERROR, hop.kind.name)


class _ToolCall:
    """The ``execute_tool {tool}`` span and the operation's metric."""

    __slots__ = ("_clock", "_label", "_metrics", "_observer", "_span", "_started")

    def __init__(self, observer: TelemetryObserver, span: Span, start: ToolCallStart) -> None:
        self._observer = observer
        self._span = span
        self._metrics = observer.metrics
        self._clock = observer.clock
        self._started = observer.clock.time()
        self._label = start.tool if start.known else OTHER

    def tally(self, attempts: int, corrections: int, spent: Usage) -> None:
        self._span.set_attribute(n.ATTEMPTS, attempts)

    def succeeded(self, response: ModelResponse) -> None:  # pragma: no cover - not a model call
        raise TypeError("a tool call has no model reply")

    def tool_finished(self, outcome: ToolOutcome) -> None:
        if outcome.failure is not None:
            _mark_failed(self._span, outcome.failure)
            self._metrics.failure(outcome.failure.kind_name, n.OP_EXECUTE_TOOL)
        if self._observer.records_content(self._span):
            self._span.set_attribute(n.GEN_AI_TOOL_RESULT, self._observer.mask(outcome.model_text))
        error = outcome.failure.kind_name if outcome.failure is not None else None
        self._metrics.operation(n.OP_EXECUTE_TOOL, self._label, self._clock.time() - self._started, error)

    def failed(self, failure: SidecarFailure) -> None:
        _mark_failed(self._span, failure)
        self._metrics.failure(failure.kind_name, n.OP_EXECUTE_TOOL)
        elapsed = self._clock.time() - self._started
        self._metrics.operation(n.OP_EXECUTE_TOOL, self._label, elapsed, failure.kind_name)


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
    def model_call(self, start: ModelCallStart) -> Iterator[_ModelCall]:
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
                yield _ModelCall(self, span, start)
                return
            token = _CHAT_SPAN.set(span)
            try:
                yield _ModelCall(self, span, start)
            finally:
                _CHAT_SPAN.reset(token)

    @contextmanager
    def tool_call(self, start: ToolCallStart) -> Iterator[_ToolCall]:
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
            yield _ToolCall(self, span, start)

    @contextmanager
    def hop(self, start: HopStart) -> Iterator[_Hop]:
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
            yield _Hop(self, span)

    @contextmanager
    def attempt(self, start: AttemptStart) -> Iterator[_Attempt]:
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
        span = _tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attrs)
        attempt = _Attempt(span, self, start)
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
        attrs: dict[str, Any] = {n.WAIT_SECONDS: start.seconds, _target_attr(start.target): start.name}
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
        name, attrs = _event(event)
        span.add_event(name, attrs)


def _event(event: Event) -> tuple[str, dict[str, Any]]:
    """The span event of a core event: its name and attributes."""
    match event:
        case ThrottleChanged():
            name = n.EVENT_MODEL_THROTTLE if event.target is Target.MODEL else n.EVENT_SERVICE_THROTTLE
            return name, {_target_attr(event.target): event.name, n.THROTTLE: event.throttle}
        case ModelPaused():
            paused: dict[str, Any] = {n.MODEL_ID: event.model, "sidecar.pause_s": event.seconds}
            if event.reason:
                paused["sidecar.reason"] = event.reason
            return n.EVENT_MODEL_PAUSED, paused
        case CircuitChanged():
            attrs: dict[str, Any] = {n.SERVICE: event.service}
            if event.reason:
                attrs["sidecar.reason"] = event.reason
            if event.cooldown_s is not None:
                attrs["sidecar.cooldown_s"] = event.cooldown_s
            if event.trigger is not None:
                attrs["sidecar.trigger"] = event.trigger
            if event.state:
                attrs["sidecar.state"] = event.state
            if event.remaining_s is not None:
                attrs["sidecar.remaining_s"] = event.remaining_s
            return _CIRCUIT_EVENTS[event.what], attrs
        case Correction():
            return n.EVENT_CORRECTION, {n.CORRECTION_REASON: event.reason, n.CORRECTIONS: event.number}
        case OutputBudgetRaised():
            return n.EVENT_OUTPUT_BUDGET_RAISED, {n.OUTPUT_BUDGET: event.budget}
        case StreamRestarted():
            attrs = {n.RESTART_REASON: event.reason, n.ATTEMPT: event.attempt}
            if event.cause:
                attrs[n.RESTART_CAUSE] = event.cause
            return n.EVENT_STREAM_RESTART, attrs
        case StreamContinued():
            attrs = {n.RESTART_REASON: event.reason, n.ATTEMPT: event.attempt, n.CONTINUED_CHARS: event.chars}
            if event.cause:
                attrs[n.RESTART_CAUSE] = event.cause
            return n.EVENT_STREAM_CONTINUED, attrs
        case StreamEventSkipped():
            return n.EVENT_STREAM_EVENT_SKIPPED, {"sidecar.reason": event.detail, n.ATTEMPT: event.attempt}
        case StateBackendChanged():
            name = n.EVENT_STATE_AVAILABLE if event.available else n.EVENT_STATE_UNAVAILABLE
            return name, {n.STATE_BACKEND: event.backend, "sidecar.reason": event.reason}
        case ReportAccepted():  # pragma: no cover - an attribute, set by event()
            pass
    raise TypeError(f"no span event for {type(event).__name__}")  # pragma: no cover - exhaustive above
