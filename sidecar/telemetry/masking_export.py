"""The span exporter that masks: every span exported as a masked copy, through the exporter it wraps.

    MaskingSpanExporter     the SDK's exporters (``SIDECAR_TRACES_SDK=true``, console) are wrapped in it

The masking is ``masking``'s (``mask_value``, ``mask_attributes``, ``mask``), against the secrets
registered there. Apart from ``masking`` because it is built on the SDK's span types
(``ReadableSpan``, ``SpanExporter``): a sidecar with tracing off, which still masks its metric
labels and log lines, never imports the SDK's trace package.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import Link, Status

from sidecar.telemetry.masking import mask, mask_attributes, mask_value

__all__ = ["MaskingSpanExporter"]


def _masked(span: ReadableSpan) -> ReadableSpan:
    status = span.status
    if status.description:
        status = Status(status.status_code, mask(status.description))
    return ReadableSpan(
        name=mask_value(span.name),
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=mask_attributes(span.attributes),
        events=[Event(e.name and mask_value(e.name), mask_attributes(e.attributes), e.timestamp) for e in span.events],
        links=[Link(link.context, mask_attributes(link.attributes)) for link in span.links],
        kind=span.kind,
        status=status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


class MaskingSpanExporter(SpanExporter):
    """Exports a masked copy of every span through ``inner``."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self.inner.export([_masked(s) for s in spans])

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)
