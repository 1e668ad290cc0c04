"""A tracer provider that records spans as plain values: the OpenTelemetry API, at a fraction of the SDK's cost.

Why: the SDK's span (``opentelemetry.sdk.trace.Span``) takes a lock per span, a bounded attribute
mapping with its own lock, a bounded list per span for events and links, a sampling result and a
cleaning pass per attribute. A plain CallModel makes three spans, and their creation alone cost a
quarter of the sidecar's throughput at c=64 (BENCHMARKS.md, the tracing rows), before any export.

``LeanTracerProvider`` implements the API's ``TracerProvider`` / ``Tracer`` / ``Span``: every span
the sidecar's code and the gRPC server interceptor start is a ``LeanSpan`` (slots, a dict of
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

import logging
import os
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
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

from sidecar.telemetry.quiet import quiet_tracer

__all__ = ["Fields", "LeanSpan", "LeanTracerProvider", "sdk_sampler"]

_log = logging.getLogger("sidecar.telemetry")

Fields = tuple[Any, ...]
"""An ended span: name, context (a ``SpanContext``), parent (one, or None), kind (the SDK's value),
start, end (ns), attributes (a dict), events ((name, attributes, ns)), links ((``SpanContext``,
attributes)), status code (the SDK's value), status description, scope (name, version, schema_url)."""

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_NO_STATE = TraceState()
_PLAIN = (str, bool, int, float)
_UNSET = StatusCode.UNSET.value
_warned: set[str] = set()


def _warn_once(key: str, message: str, *args: object) -> None:
    if key not in _warned and len(_warned) < 1000:
        _warned.add(key)
        _log.warning(message, *args)


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
        _warn_once("sampler", "OTEL_TRACES_SAMPLER=%s is not a sampler this sidecar knows: parentbased_always_on", name)
        return sdk_sampling.DEFAULT_ON
    return make()


class _Limits:
    __slots__ = ("attributes", "event_attributes", "events", "length", "link_attributes", "links", "other_length")

    def __init__(self, limits: SpanLimits) -> None:
        self.attributes = limits.max_span_attributes
        self.events = limits.max_events
        self.links = limits.max_links
        self.event_attributes = limits.max_event_attributes
        self.link_attributes = limits.max_link_attributes
        self.length = limits.max_span_attribute_length
        self.other_length = limits.max_attribute_length  # events' and links' (the SDK's split)


def _clean(key: str, value: Any, length: int | None) -> Any:
    """The value as OTLP carries it, or None when the SDK would drop it."""
    kind = type(value)
    if kind is str:
        return value if length is None or len(value) <= length else value[:length]
    if kind in _PLAIN:
        return value
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray)):
        items = tuple(value)
        kinds = {type(v) for v in items if v is not None}
        if len(kinds) <= 1 and kinds <= set(_PLAIN):
            if length is not None and kinds == {str}:
                return tuple(v if v is None or len(v) <= length else v[:length] for v in items)
            return items
    if isinstance(value, _PLAIN):  # a subclass (an IntEnum, a str enum): its plain value
        for plain in _PLAIN:
            if isinstance(value, plain):
                return plain(value)
    _warn_once(f"attr:{key}", "span attribute %s dropped: %s is not an OpenTelemetry attribute value", key, kind)
    return None


def _cleaned(attributes: Attributes, limit: int | None, length: int | None) -> dict[str, Any]:
    if not attributes:
        return {}
    if length is None and (limit is None or len(attributes) <= limit):
        out = dict(attributes)  # the common case: copy, then clean only what is not plain
        for key, value in attributes.items():
            kind = type(value)
            if kind is not str and kind is not int and kind is not float and kind is not bool:
                cleaned = _clean(key, value, length)
                if cleaned is None:
                    del out[key]
                else:
                    out[key] = cleaned
        return out
    out = {}
    for key, value in attributes.items():
        if limit is not None and len(out) >= limit and key not in out:
            break
        cleaned = _clean(key, value, length)
        if cleaned is not None:
            out[key] = cleaned
    return out


class LeanSpan(trace.Span):
    """A recording span: plain fields, handed to the provider's sink as ``Fields`` when it ends."""

    __slots__ = (
        "_attributes",
        "_context",
        "_end",
        "_events",
        "_kind",
        "_limits",
        "_links",
        "_name",
        "_parent",
        "_provider",
        "_record_exception",
        "_scope",
        "_set_status_on_exception",
        "_start",
        "_status",
        "_status_description",
    )

    def __init__(  # noqa: PLR0913 - a span's fields, given once by the tracer
        self,
        provider: LeanTracerProvider,
        name: str,
        context: SpanContext,
        parent: SpanContext | None,
        kind: SpanKind,
        attributes: dict[str, Any],
        links: list[tuple[SpanContext, dict[str, Any]]],
        start: int,
        scope: tuple[str, str | None, str | None],
        record_exception: bool,
        set_status_on_exception: bool,
    ) -> None:
        self._provider = provider
        self._limits = provider.limits
        self._name = name
        self._context = context
        self._parent = parent
        self._kind = kind
        self._attributes = attributes
        self._events: list[tuple[str, dict[str, Any] | None, int]] = []
        self._links = links
        self._start = start
        self._end: int | None = None
        self._status = _UNSET
        self._status_description: str | None = None
        self._scope = scope
        self._record_exception = record_exception
        self._set_status_on_exception = set_status_on_exception

    # The API.

    def get_span_context(self) -> SpanContext:
        return self._context

    def is_recording(self) -> bool:
        return self._end is None

    def _ended(self, what: str) -> bool:
        if self._end is None:
            return False
        _warn_once(f"ended:{what}", "%s on an ended span ignored", what)
        return True

    def set_attribute(self, key: str, value: Any) -> None:
        if self._end is not None:
            self._ended("set_attribute")
            return
        self._set(key, value)

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        if self._end is not None:
            self._ended("set_attributes")
            return
        mine = self._attributes
        limits = self._limits
        if limits.length is None and (limits.attributes is None or len(mine) + len(attributes) <= limits.attributes):
            for key, value in attributes.items():  # the common case, inline
                kind = type(value)
                if kind is str or kind is int or kind is float or kind is bool:
                    mine[key] = value
                else:
                    self._set(key, value)
            return
        for key, value in attributes.items():
            self._set(key, value)

    def _set(self, key: str, value: Any) -> None:
        attributes = self._attributes
        limits = self._limits
        kind = type(value)
        if kind is str:
            if limits.length is not None and len(value) > limits.length:
                value = value[: limits.length]
        elif kind is not int and kind is not float and kind is not bool:
            value = _clean(key, value, limits.length)
            if value is None:
                return
        if limits.attributes is not None and len(attributes) >= limits.attributes and key not in attributes:
            return
        attributes[key] = value

    def add_event(self, name: str, attributes: Attributes = None, timestamp: int | None = None) -> None:
        if self._ended("add_event"):
            return
        limits = self._limits
        if limits.events is not None and len(self._events) >= limits.events:
            return
        attrs = _cleaned(attributes, limits.event_attributes, limits.other_length) if attributes else None
        self._events.append((name, attrs, time.time_ns() if timestamp is None else timestamp))

    def add_link(self, context: SpanContext, attributes: Attributes = None) -> None:
        if self._ended("add_link") or not context.is_valid:
            return
        limits = self._limits
        if limits.links is not None and len(self._links) >= limits.links:
            return
        self._links.append((context, _cleaned(attributes, limits.link_attributes, limits.other_length)))

    def update_name(self, name: str) -> None:
        if not self._ended("update_name"):
            self._name = name

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        if self._ended("set_status"):
            return
        if isinstance(status, Status):
            code, text = status.status_code, status.description
        else:
            code, text = status, description
        if self._status == StatusCode.OK.value:
            return  # OK is final, as the SDK keeps it
        if code is StatusCode.UNSET:
            return
        self._status = code.value
        self._status_description = text if code is StatusCode.ERROR else None

    def record_exception(
        self,
        exception: BaseException,
        attributes: Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        stack = "".join(traceback.format_exception(type(exception), value=exception, tb=exception.__traceback__))
        attrs: dict[str, Any] = {
            "exception.type": type(exception).__qualname__,
            "exception.message": str(exception),
            "exception.stacktrace": stack,
            "exception.escaped": str(escaped),
        }
        if attributes:
            attrs.update(attributes)
        self.add_event("exception", attrs, timestamp)

    def end(self, end_time: int | None = None) -> None:
        if self._end is not None:
            _warn_once("end", "a span ended twice: the second end ignored")
            return
        self._end = end = time.time_ns() if end_time is None else end_time
        self._provider.sink(
            (
                self._name,
                self._context,
                self._parent,
                self._kind.value,
                self._start,
                end,
                self._attributes,
                self._events,
                self._links,
                self._status,
                self._status_description,
                self._scope,
            )
        )

    def __exit__(self, exc_type: Any, exc_val: BaseException | None, exc_tb: Any) -> None:
        if exc_val is not None and self.is_recording():
            if self._record_exception:
                self.record_exception(exc_val, escaped=True)
            if self._set_status_on_exception:
                self.set_status(Status(StatusCode.ERROR, f"{exc_type.__name__}: {exc_val}"))
        self.end()

    def __repr__(self) -> str:
        return f"LeanSpan(name={self._name!r}, context={self._context!r})"


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
        attrs = _cleaned(given, limits.attributes, limits.length)
        link_fields = (
            [
                (link.context, _cleaned(link.attributes, limits.link_attributes, limits.other_length))
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
        self.limits = _Limits(SpanLimits())
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
