"""A tracer provider that records spans as plain values: the OpenTelemetry API, at a fraction of the SDK's cost.

Why: the SDK's span (``opentelemetry.sdk.trace.Span``) takes a lock per span, a bounded attribute
mapping with its own lock, a bounded list per span for events and links, a sampling result and a
cleaning pass per attribute. A plain CallModel makes three spans, and their creation alone cost a
quarter of the sidecar's throughput at c=64 (BENCHMARKS.md, the tracing rows), before any export.

``LeanTracerProvider`` implements the API's ``TracerProvider`` / ``Tracer`` / ``Span``: every span
the sidecar's code and the gRPC server interceptor start is a ``LeanSpan`` (``telemetry.lean_span``: slots, a dict of
attributes, a list of events), and an ended span is handed to ``sink`` as one tuple of plain
values (``Fields``, the shape ``offload`` pickles to its child), so nothing is rebuilt between
ending a span and encoding it. The SDK's rules are kept:

    sampling        OTEL_TRACES_SAMPLER / _ARG, the SDK's samplers (``sdk_sampler``)
    ids             the SDK's ``RandomIdGenerator``
    limits          the SDK's ``SpanLimits`` (OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT, _VALUE_LENGTH_LIMIT,
                    OTEL_SPAN_EVENT_COUNT_LIMIT, ...): attributes beyond the count are dropped,
                    strings cut to the length
    attributes      str, bool, int, float and homogeneous sequences of them; anything else is
                    dropped (logged once per key), as the SDK drops it
    exceptions      ``record_exception`` adds the ``exception`` event with type, message, stacktrace
    after end       set_* / add_* on an ended span are ignored (logged once)

Unsampled spans are the API's ``NonRecordingSpan`` (nothing recorded, the context propagated).
Spans are single-threaded objects: each is touched by the task that started it (no lock).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import SpanLimits
from opentelemetry.sdk.trace import sampling as sdk_sampling
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import Decision
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TraceState,
)
from opentelemetry.util.types import Attributes

from sidecar.telemetry.lean_span import Fields, LeanSpan, Limits, clean_attributes, warn_once
from sidecar.telemetry.quiet import quiet_tracer

__all__ = ["Fields", "LeanTracerProvider", "sdk_sampler"]

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_NO_STATE = TraceState()


def sdk_sampler() -> sdk_sampling.Sampler:
    """The sampler OTEL_TRACES_SAMPLER / _ARG name, as the SDK's ``TracerProvider`` picks it."""
    name = os.environ.get("OTEL_TRACES_SAMPLER", "parentbased_always_on").strip().lower()
    arg = os.environ.get("OTEL_TRACES_SAMPLER_ARG", "").strip()
    try:
        rate = float(arg) if arg else 1.0
    except ValueError:
        rate = 1.0
    if not 0.0 <= rate <= 1.0:
        rate = 1.0
    samplers: dict[str, Callable[[], sdk_sampling.Sampler]] = {
        "always_on": lambda: sdk_sampling.ALWAYS_ON,
        "always_off": lambda: sdk_sampling.ALWAYS_OFF,
        "parentbased_always_on": lambda: sdk_sampling.DEFAULT_ON,
        "parentbased_always_off": lambda: sdk_sampling.DEFAULT_OFF,
        "traceidratio": lambda: sdk_sampling.TraceIdRatioBased(rate),
        "parentbased_traceidratio": lambda: sdk_sampling.ParentBasedTraceIdRatio(rate),
    }
    make = samplers.get(name)
    if make is None:
        warn_once("sampler", "OTEL_TRACES_SAMPLER=%s is not a sampler this sidecar knows: parentbased_always_on", name)
        return sdk_sampling.DEFAULT_ON
    return make()


class _LeanTracer(trace.Tracer):
    __slots__ = ("_provider", "_scope")

    def __init__(self, provider: LeanTracerProvider, scope: tuple[str, str | None, str | None]) -> None:
        self._provider = provider
        self._scope = scope

    def start_span(
        self,
        name: str,
        context: otel_context.Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> trace.Span:
        provider = self._provider
        current = trace.get_current_span(context).get_span_context()
        parent = current if current.is_valid else None
        ids = provider.ids
        trace_id = parent.trace_id if parent is not None else ids.generate_trace_id()
        sampler = provider.sampler
        if sampler is sdk_sampling.DEFAULT_ON or sampler is sdk_sampling.ALWAYS_ON:
            # what those two answer, without building a SamplingResult: the parent's decision (always
            # on: yes) and its trace state, the attributes as given
            keep = parent is None or sampler is sdk_sampling.ALWAYS_ON or parent.trace_flags.sampled
            trace_state = parent.trace_state if parent is not None else _NO_STATE
            given = attributes
        else:
            sampled = sampler.should_sample(context, trace_id, name, kind, attributes, links)
            keep = sampled.decision is Decision.RECORD_AND_SAMPLE  # DROP (no built-in sampler says RECORD_ONLY)
            trace_state = sampled.trace_state if sampled.trace_state is not None else _NO_STATE
            # the sampler's attributes are the span's (the SDK's rule; the built-in ones hand back the given)
            given = sampled.attributes if sampled.attributes else attributes
        if not keep:
            span_context = SpanContext(trace_id, ids.generate_span_id(), False, TraceFlags(0), trace_state)
            return NonRecordingSpan(span_context)
        span_context = SpanContext(trace_id, ids.generate_span_id(), False, _SAMPLED, trace_state)
        limits = provider.limits
        attrs = clean_attributes(given, limits.attributes, limits.length)
        link_fields = (
            [
                (link.context, clean_attributes(link.attributes, limits.link_attributes, limits.other_length))
                for link in links
                if link.context.is_valid
            ][: limits.links]
            if links
            else []
        )
        return LeanSpan(
            provider,
            name,
            span_context,
            parent,
            kind,
            attrs,
            link_fields,
            time.time_ns() if start_time is None else start_time,
            self._scope,
            record_exception,
            set_status_on_exception,
        )

    def start_as_current_span(  # type: ignore[override]  # noqa: PLR0913 - the API's signature
        self,
        name: str,
        context: otel_context.Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> _Current:
        span = self.start_span(
            name, context, kind, attributes, links, start_time, record_exception, set_status_on_exception
        )
        return _Current(span, record_exception, set_status_on_exception, end_on_exit)


class _Current:
    """``with`` it: the span current inside, an escaping exception recorded, the span ended after (as the
    API's ``use_span`` with ``end_on_exit``); a class rather than a generator, which costs twice as much."""

    __slots__ = ("_end", "_record", "_span", "_status", "_token")

    def __init__(self, span: trace.Span, record: bool, status: bool, end: bool) -> None:
        self._span = span
        self._record = record
        self._status = status
        self._end = end
        self._token: object = None

    def __enter__(self) -> trace.Span:
        self._token = otel_context.attach(trace.set_span_in_context(self._span))
        return self._span

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        span = self._span
        try:
            if exc is not None and span.is_recording() and not isinstance(exc, GeneratorExit):
                if self._record:
                    span.record_exception(exc, escaped=True)
                if self._status:
                    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        finally:
            otel_context.detach(self._token)  # type: ignore[arg-type]
            if self._end:
                span.end()


class LeanTracerProvider(trace.TracerProvider):
    """Tracers whose spans are ``LeanSpan``: each ended sampled span goes to ``sink`` as ``Fields``.

    ``sink`` is called on the thread that ends the span; it must be cheap (an append).
    ``force_flush`` and ``shutdown`` call the ones given.
    """

    def __init__(
        self,
        sink: Callable[[Fields], None],
        *,
        force_flush: Callable[[int], bool] | None = None,
        shutdown: Callable[[], None] | None = None,
        sampler: sdk_sampling.Sampler | None = None,
        resource: Any = None,
    ) -> None:
        self.sink = sink
        self.resource = resource
        """The SDK ``Resource`` the exporter sends the spans under (for a reader; the exporter has its own)."""
        self.exporter: Any = None
        """What ``sink`` belongs to (``batching.SpanBatcher`` or ``offload.OffloadSpanProcessor``)."""
        self.sampler = sampler if sampler is not None else sdk_sampler()
        self.ids = RandomIdGenerator()
        self.limits = Limits(SpanLimits())
        self._flush = force_flush
        self._shutdown = shutdown
        self._tracers: dict[tuple[str, str | None, str | None], trace.Tracer] = {}

    def get_tracer(
        self,
        instrumenting_module_name: str,
        instrumenting_library_version: str | None = None,
        schema_url: str | None = None,
        attributes: Attributes = None,
    ) -> trace.Tracer:
        scope = (instrumenting_module_name, instrumenting_library_version, schema_url)
        tracer = self._tracers.get(scope)
        if tracer is None:  # a quiet scope's is the no-op tracer (telemetry.quiet)
            tracer = self._tracers[scope] = quiet_tracer(instrumenting_module_name) or _LeanTracer(self, scope)
        return tracer

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._flush(timeout_millis) if self._flush is not None else True

    def shutdown(self) -> None:
        if self._shutdown is not None:
            self._shutdown()
