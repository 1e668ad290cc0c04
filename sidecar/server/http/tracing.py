"""A door's trace context: the caller's W3C ``traceparent`` the parent of the work, one SERVER span.

    the caller's context   read from the HTTP request's headers with the global propagators
                           (``OTEL_PROPAGATORS``; by default ``traceparent``/``tracestate`` and
                           ``baggage``), and current while the door's call runs, baggage included
    the SERVER span        one per call, named and attributed by the door (``tools/call {tool}`` for
                           the MCP front); the core's spans (``execute_tool``, the attempts) are its
                           children, exactly as under the gRPC port's server span

As on the gRPC port (``telemetry.server_spans``), with no SDK installed nothing is recorded and
the span is free (``telemetry.tracing.Tracer``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate
from opentelemetry.trace import Span, SpanKind

from sidecar.telemetry import names as n
from sidecar.telemetry.tracing import Tracer

__all__ = ["server_span"]

_tracer = Tracer(n.TRACER)


@contextmanager
def server_span(name: str, headers: Mapping[str, str], attributes: dict[str, Any]) -> Iterator[Span]:
    """A SERVER span whose parent is the context ``headers`` carry, current (with that context) inside."""
    token = otel_context.attach(propagate.extract(dict(headers)))
    try:
        with _tracer.start_as_current_span(
            name, kind=SpanKind.SERVER, attributes=attributes, record_exception=False, set_status_on_exception=False
        ) as span:
            yield span
    finally:
        otel_context.detach(token)
