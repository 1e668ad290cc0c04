"""What a call's spans are told as the call goes, and the metrics each outcome counts.

    ModelCallSpan   the ``chat {model}`` span: its tally, its reply (gen_ai.* attributes, the output
                    with ``record_content``) or its failure; the operation, token and spend metrics
    ToolCallSpan    the ``execute_tool {tool}`` span: its tally, its outcome; the operation metric
    HopSpan         a ``route.hop {deployment}`` span: its tally, how the hop ended
    CompactionSpan  the ``compaction`` span: what it changed (tokens after, strategies, summarizer calls)
    AttemptSpan     an attempt's CLIENT span: its status, usage, retry signal and waits; a streamed
                    attempt's deltas, timed; one sidecar.attempts when it ends

``TelemetryObserver`` (``telemetry.observer``) starts each span and hands out its handle.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import Span, StatusCode

from sidecar.core.conversation import Compaction, ModelResponse, ToolOutcome, Usage
from sidecar.core.details import Hop
from sidecar.core.kinds import FailureKind
from sidecar.core.observer import AttemptStart, ModelCallStart, Target, ToolCallStart
from sidecar.core.taxonomy import SidecarFailure
from sidecar.core.text import cap
from sidecar.telemetry import names as n
from sidecar.telemetry.metrics import OTHER
from sidecar.telemetry.tracing import injected, use_span

if TYPE_CHECKING:
    from sidecar.telemetry.observer import TelemetryObserver

__all__ = ["HOP_REASON_CHARS", "AttemptSpan", "CompactionSpan", "HopSpan", "ModelCallSpan", "ToolCallSpan"]


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


class AttemptSpan:
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


class ModelCallSpan:
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


class HopSpan:
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
        if hop.hedge:
            span.set_attribute(n.HOP_HEDGE, True)
        if hop.cancelled:
            span.set_attribute(n.HOP_CANCELLED, True)
        if hop.kind is FailureKind.UNSPECIFIED:
            return
        span.set_attribute(n.ERROR_TYPE, hop.kind.name)
        span.set_attribute(n.FAILURE_KIND, hop.kind.name)
        span.set_attribute(n.HOP_REASON, self._observer.mask(cap(hop.reason, HOP_REASON_CHARS)))
        span.set_status(StatusCode.ERROR, hop.kind.name)


class CompactionSpan:
    """A ``compaction`` span, told what the compaction changed."""

    __slots__ = ("_span",)

    def __init__(self, span: Span) -> None:
        self._span = span

    def ended(self, compaction: Compaction) -> None:
        self._span.set_attributes(
            {
                n.COMPACTION_TOKENS_AFTER: compaction.tokens_after,
                n.COMPACTION_STRATEGIES: [s.strategy for s in compaction.steps],
                n.COMPACTION_SUMMARIZER_CALLS: compaction.summarizer_calls,
            }
        )

    def failed(self, kind: str) -> None:
        self._span.set_attribute(n.ERROR_TYPE, kind)
        self._span.set_status(StatusCode.ERROR, kind)


class ToolCallSpan:
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
