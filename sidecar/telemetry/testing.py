"""In-memory telemetry for tests: every span and metric the sidecar emits, kept for assertions.

OpenTelemetry lets a process set its global tracer and meter providers once, and a tracer taken
before then binds to the first provider set. So ``install_in_memory()`` installs one of each per
process (the production tracer provider, ``lean.LeanTracerProvider``, whose every ended span is turned back
into the SDK's ``ReadableSpan`` (``as_readable``) and exported at once, masked by ``MaskingSpanExporter``,
into an ``InMemorySpanExporter``: tests see what would be exported; an ``InMemoryMetricReader`` with
delta temporality) and returns the same handle on every later call; ``clear()`` forgets
what earlier tests recorded::

    otel = install_in_memory()
    otel.clear()
    ...                                   # run a call
    spans = otel.spans()                  # finished spans, in the order they ended
    points = otel.metrics()               # {metric name: [data point, ...]} since the last clear

Installing it changes nothing for code that does not look: spans are recorded instead of dropped.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import (
    Counter,
    Histogram,
    MeterProvider,
    ObservableCounter,
    ObservableGauge,
    ObservableUpDownCounter,
    UpDownCounter,
)
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from sidecar.telemetry.lean import Fields, LeanTracerProvider
from sidecar.telemetry.masking_export import MaskingSpanExporter

__all__ = ["InMemoryTelemetry", "as_readable", "install_in_memory"]

_DELTA: dict[type, AggregationTemporality] = {
    Counter: AggregationTemporality.DELTA,
    UpDownCounter: AggregationTemporality.DELTA,
    Histogram: AggregationTemporality.DELTA,
    ObservableCounter: AggregationTemporality.DELTA,
    ObservableUpDownCounter: AggregationTemporality.DELTA,
    ObservableGauge: AggregationTemporality.DELTA,
}


@dataclass
class InMemoryTelemetry:
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: LeanTracerProvider
    meter_provider: MeterProvider

    def clear(self) -> None:
        """Forget every span finished and every measurement taken so far."""
        self.exporter.clear()
        self.reader.get_metrics_data()  # delta temporality: a collection resets the counts

    def spans(self) -> Sequence[ReadableSpan]:
        return self.exporter.get_finished_spans()

    def metrics(self) -> dict[str, list[Any]]:
        """Data points by metric name, collected now (counts since the last collection)."""
        out: dict[str, list[Any]] = {}
        data = self.reader.get_metrics_data()
        if data is None:
            return out
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    out.setdefault(metric.name, []).extend(metric.data.data_points)
        return out


_installed: InMemoryTelemetry | None = None
_lock = threading.Lock()


def install_in_memory() -> InMemoryTelemetry:
    """The process's in-memory tracer and meter providers, installed on the first call."""
    global _installed
    with _lock:
        if _installed is not None:
            return _installed
        resource = Resource.create({"service.name": "sidecar-test"})
        exporter = InMemorySpanExporter()
        masked = MaskingSpanExporter(exporter)

        def export(fields: Fields) -> None:
            masked.export([as_readable(fields, resource)])

        tracer_provider = LeanTracerProvider(export)
        trace.set_tracer_provider(tracer_provider)
        if trace.get_tracer_provider() is not tracer_provider:
            raise RuntimeError("another tracer provider was installed in this process before the in-memory one")
        reader = InMemoryMetricReader(preferred_temporality=_DELTA)
        meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
        metrics.set_meter_provider(meter_provider)
        if metrics.get_meter_provider() is not meter_provider:
            raise RuntimeError("another meter provider was installed in this process before the in-memory one")
        _installed = InMemoryTelemetry(exporter, reader, tracer_provider, meter_provider)
        return _installed


def as_readable(fields: Fields, resource: Resource) -> ReadableSpan:
    """An ended lean span as the SDK's ``ReadableSpan`` (what an SDK exporter reads), unmasked."""
    name, ctx, parent, kind, start, end, attributes, events, links, code, description, scope = fields
    return ReadableSpan(
        name=name,
        context=ctx,
        parent=parent,
        resource=resource,
        attributes=dict(attributes),
        events=[Event(e_name, e_attrs, ts) for e_name, e_attrs, ts in events],
        links=[Link(link_ctx, link_attrs) for link_ctx, link_attrs in links],
        kind=SpanKind(kind),
        status=Status(StatusCode(code), description),
        start_time=start,
        end_time=end,
        instrumentation_scope=InstrumentationScope(*scope) if scope is not None else None,
    )
