"""OpenTelemetry, configured the standard way, from the standard environment variables.

    OTEL_SDK_DISABLED=true                     nothing at all (the API stays a no-op)
    OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_)  traces and metrics exported over OTLP
    OTEL_EXPORTER_OTLP_PROTOCOL                grpc (default) | http/protobuf
    OTEL_TRACES_SAMPLER / _ARG                 read by the SDK (default parentbased_always_on)
    OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES the resource (service.name defaults to "sidecar")
    OTEL_BSP_*                                  the batch span processor's queue, batch and delays

With no endpoint set, no SDK is installed: spans and metrics cost a no-op call on the hot path.
``telemetry.prometheus_port`` in the config serves a Prometheus scrape endpoint as well.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import metrics, trace

__all__ = ["Telemetry", "setup_telemetry"]


@dataclass
class Telemetry:
    enabled: bool = False
    interceptors: list[Any] = field(default_factory=list)
    _providers: list[Any] = field(default_factory=list)

    def shutdown(self) -> None:
        for p in self._providers:
            p.shutdown()


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() == "true"


def setup_telemetry(prometheus_port: int | None = None) -> Telemetry:
    if _truthy("OTEL_SDK_DISABLED"):
        return Telemetry()
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if not endpoint and not prometheus_port:
        return Telemetry()
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import OTELResourceDetector, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "sidecar")}).merge(
        OTELResourceDetector().detect()
    )
    out = Telemetry(enabled=True)
    readers: list[MetricReader] = []
    if endpoint:
        protocol = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc").strip()
        if protocol.startswith("http"):
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetrics
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpans

            span_exporter: Any = HttpSpans()
            metric_exporter: Any = HttpMetrics()
        else:
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetrics
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans

            span_exporter = GrpcSpans()
            metric_exporter = GrpcMetrics()
        tracer_provider = TracerProvider(resource=resource)
        tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
        trace.set_tracer_provider(tracer_provider)
        out._providers.append(tracer_provider)
        readers.append(PeriodicExportingMetricReader(metric_exporter))
        from opentelemetry.instrumentation.grpc import aio_server_interceptor

        out.interceptors.append(aio_server_interceptor())  # type: ignore[no-untyped-call]
    if prometheus_port:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import start_http_server

        start_http_server(prometheus_port, addr="127.0.0.1")
        readers.append(PrometheusMetricReader())
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    metrics.set_meter_provider(meter_provider)
    out._providers.append(meter_provider)
    return out
