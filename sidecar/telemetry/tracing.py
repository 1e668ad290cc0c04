"""The tracer the sidecar's code starts its spans with: the API's, minus its cost when nothing records.

With no SDK installed the OpenTelemetry API still builds a context manager, a non-recording span
and a context to attach for every ``start_as_current_span`` (about 10 µs through the proxy
tracer). ``Tracer`` answers those calls with one shared, empty context manager instead, so a call
through the sidecar pays a type check per span. Once a provider is installed (``setup_telemetry``,
or ``install_in_memory`` in tests, at any time) every call goes to that provider's tracer.

With no SDK no span records, so nothing is lost: no code reads the current span to do anything
but record on it, and the guarded work (``span.is_recording()``) is skipped either way.

Once a provider is installed, ``Tracer`` asks it for its tracer once and calls that tracer directly:
the API's proxy tracer would wrap every ``start_as_current_span`` in a generator context manager of
its own around the real one. A provider installed later is noticed at the next call.

``propagated`` (headers) and ``propagated_metadata`` (gRPC metadata) are the server spans' extraction:
with the W3C propagators (the default) and none of their fields in the caller's headers, extracting
would hand back the current context, so it is skipped (for metadata, without building a carrier).
``injected`` is the attempts' injection: with the default propagators and no baggage, ``traceparent``
formatted directly (the composite propagator's walk, a context lookup per propagator, skipped).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any

from opentelemetry import baggage, propagate, trace
from opentelemetry import context as otel_context
from opentelemetry.trace import INVALID_SPAN, ProxyTracerProvider, Span, SpanKind

__all__ = ["Tracer", "injected", "propagated", "propagated_metadata", "sdk_installed", "use_span"]


class _Nothing(AbstractContextManager[Span]):
    """``with`` this: the invalid span, no context attached, nothing recorded."""

    __slots__ = ()

    def __enter__(self) -> Span:
        return INVALID_SPAN

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None


_NOTHING = _Nothing()


def sdk_installed() -> bool:
    """Whether a tracer provider that can record is installed (the API's proxy is not one)."""
    return not isinstance(trace.get_tracer_provider(), ProxyTracerProvider)


class Tracer:
    __slots__ = ("_name", "_provider", "_tracer")

    def __init__(self, name: str) -> None:
        self._name = name
        self._provider: trace.TracerProvider | None = None
        self._tracer: trace.Tracer = trace.NoOpTracer()

    def _current(self) -> trace.Tracer | None:
        """The installed provider's tracer (asked for once per provider), or None while none is installed."""
        provider = trace.get_tracer_provider()
        if provider is self._provider:
            return self._tracer
        if isinstance(provider, ProxyTracerProvider):
            return None
        self._tracer = provider.get_tracer(self._name)
        self._provider = provider
        return self._tracer

    def start_as_current_span(
        self,
        name: str,
        *,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: dict[str, Any] | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> AbstractContextManager[Span]:
        tracer = self._current()
        if tracer is None:
            return _NOTHING
        return tracer.start_as_current_span(
            name,
            kind=kind,
            attributes=attributes,
            record_exception=record_exception,
            set_status_on_exception=set_status_on_exception,
        )

    def start_span(
        self,
        name: str,
        *,
        context: otel_context.Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: dict[str, Any] | None = None,
    ) -> Span:
        tracer = self._current()
        if tracer is None:
            return INVALID_SPAN
        return tracer.start_span(name, context=context, kind=kind, attributes=attributes)


class _Current(AbstractContextManager[Span]):
    """``span`` current inside (attached, then detached), nothing recorded on it: the API's
    ``use_span(end_on_exit=False, record_exception=False, set_status_on_exception=False)``, as a
    class rather than the API's generator (a third of the cost, once per attempt)."""

    __slots__ = ("_span", "_token")

    def __init__(self, span: Span) -> None:
        self._span = span
        self._token: object = None

    def __enter__(self) -> Span:
        self._token = otel_context.attach(trace.set_span_in_context(self._span))
        return self._span

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        otel_context.detach(self._token)  # type: ignore[arg-type]


def use_span(span: Span) -> AbstractContextManager[Span]:
    """Make ``span`` current (neither ending it nor recording exceptions on it); free for the invalid span."""
    if span is INVALID_SPAN:
        return _NOTHING
    return _Current(span)


_W3C_FIELDS = frozenset({"traceparent", "tracestate", "baggage"})
"""What the W3C propagators (``tracecontext``, ``baggage``: the default ``OTEL_PROPAGATORS``) read."""

_fields: tuple[object, frozenset[str]] = (None, frozenset())
"""The global propagator last seen and the fields it reads (read again only when another is installed)."""


def _fields_now() -> frozenset[str]:
    """The fields the global propagators read (decided once per propagator installed)."""
    global _fields
    textmap = propagate.get_global_textmap()
    if _fields[0] is not textmap:
        _fields = (textmap, frozenset(textmap.fields))
    return _fields[1]


def _w3c_only_now() -> bool:
    """Whether the global propagators read only ``_W3C_FIELDS``."""
    return _fields_now() <= _W3C_FIELDS


def propagated(carrier: Mapping[str, str]) -> otel_context.Context | None:
    """The context a caller's (lower-case) headers or metadata propagate, by the global propagators; None
    when the propagators are the W3C ones and ``carrier`` holds none of their fields (extracting then
    hands back the current context: nothing to attach). Other propagators always extract."""
    if _w3c_only_now() and _W3C_FIELDS.isdisjoint(carrier):
        return None
    return propagate.extract(carrier)


def propagated_metadata(metadata: Iterable[tuple[str, str | bytes]] | None) -> otel_context.Context | None:
    """``propagated`` for gRPC metadata (key, value) pairs: binary (``-bin``) values carry no trace
    context; with the W3C propagators and none of their keys present, no carrier is built at all."""
    pairs = metadata or ()
    if _w3c_only_now() and not any(key in _W3C_FIELDS for key, _ in pairs):
        return None
    return propagate.extract({key: value for key, value in pairs if isinstance(value, str)})


def injected(span: Span) -> dict[str, str]:
    """The headers the global propagators inject for ``span`` while it is the current span.

    With the default propagators (``tracecontext,baggage``: exactly their three fields) and no
    baggage in the current context, that is ``traceparent`` (and ``tracestate`` when the span has
    one), formatted here as the W3C propagator formats it; anything else goes through
    ``propagate.inject``."""
    context = span.get_span_context()
    if _fields_now() == _W3C_FIELDS and context.is_valid and not baggage.get_all():
        headers = {"traceparent": f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"}
        if context.trace_state:
            headers["tracestate"] = context.trace_state.to_header()
        return headers
    headers = {}
    propagate.inject(headers)
    return headers
