"""A door's trace context: the caller's W3C ``traceparent`` the parent of the work, one SERVER span.

    the caller's context   read from the HTTP request's headers with the global propagators
                           (``OTEL_PROPAGATORS``; by default ``traceparent``/``tracestate`` and
                           ``baggage``), and current while the door's call runs, baggage included
    the SERVER span        one per call, named and attributed by the door (``tools/call {tool}`` for
                           the MCP front, ``POST /v1/chat/completions`` for the OpenAI front); the
                           core's spans (``execute_tool``, ``chat {model}``, the attempts) are its
                           children, exactly as under the gRPC port's server span
    a streamed answer      ``start_server_span``: the span and the context to attach while the call is
                           started; the door ends the span when the stream has ended
    a replayed failure     ``replayed``: the event ``sidecar.replayed`` on the SERVER span of a re-send the
                           model fronts answered again with no call (``resends.py``): the failure's kind,
                           the attempts its first answer made, the seconds left of its window

As on the gRPC port (``server.grpc.spans``), with no SDK installed nothing is recorded and
the span is free (``telemetry.tracing.Tracer``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind

from sidecar.telemetry import names as n
from sidecar.telemetry.tracing import Tracer, propagated

__all__ = ["replayed", "server_span", "start_server_span"]

_tracer = Tracer(n.TRACER)


@contextmanager
def server_span(name: str, headers: Mapping[str, str], attributes: dict[str, Any]) -> Iterator[Span]:
    """A SERVER span whose parent is the context ``headers`` carry, current (with that context) inside."""
    parent = propagated(dict(headers))
    token = otel_context.attach(parent) if parent is not None else None
    try:
        with _tracer.start_as_current_span(
            name, kind=SpanKind.SERVER, attributes=attributes, record_exception=False, set_status_on_exception=False
        ) as span:
            yield span
    finally:
        if token is not None:
            otel_context.detach(token)


def start_server_span(
    name: str, headers: Mapping[str, str], attributes: dict[str, Any]
) -> tuple[Span, otel_context.Context]:
    """A SERVER span (not ended, not current) whose parent is the context ``headers`` carry, and that
    context with the span in it: attach it while the door's call starts, end the span when it is done."""
    parent = propagated(dict(headers))
    if parent is None:
        parent = otel_context.get_current()
    span = _tracer.start_span(name, context=parent, kind=SpanKind.SERVER, attributes=attributes)
    if span is INVALID_SPAN:
        return INVALID_SPAN, parent
    return span, trace.set_span_in_context(span, parent)


def replayed(span: Span, kind: str, attempts: int, window_left_s: float) -> None:
    """The event on ``span`` (a SERVER span) saying its answer is a failure replayed, with no call."""
    if span.is_recording():
        span.add_event(
            n.EVENT_REPLAYED,
            {n.FAILURE_KIND: kind, n.REPLAYED_ATTEMPTS: attempts, n.REPLAYED_WINDOW_LEFT: round(window_left_s, 3)},
        )
