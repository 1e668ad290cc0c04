"""OpenTelemetry, configured the standard way, from the standard environment variables.

    OTEL_SDK_DISABLED=true                      nothing at all (the API stays a no-op)
    OTEL_EXPORTER_OTLP_ENDPOINT                 traces and metrics exported over OTLP to this endpoint
      (_TRACES_ / _METRICS_ENDPOINT)              ... or each signal to its own
    OTEL_EXPORTER_OTLP_PROTOCOL                 grpc (default) | http/protobuf   (_TRACES_ / _METRICS_ too)
    OTEL_TRACES_EXPORTER                        otlp (default) | console | none
    OTEL_METRICS_EXPORTER                       otlp (default) | prometheus | console | none
                                                (Jaeger takes traces only: set none or prometheus beside it)
    OTEL_TRACES_SAMPLER / _ARG                  read by the SDK (default parentbased_always_on)
    OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES the resource (service.name defaults to "sidecar")
    OTEL_PROPAGATORS                            read by the API (default tracecontext,baggage)
    OTEL_BSP_* / OTEL_METRIC_EXPORT_INTERVAL    the batch span processor's queue, batch and delays;
                                                the metric export interval
    OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, ...   read by the exporters

With no exporter wanted (no endpoint, no Prometheus), no SDK is installed: the API's no-op tracer
and meter answer every span and metric, and the gRPC server runs without the span interceptor
(``server.grpc.spans.span_interceptors`` reads ``Telemetry.tracer_provider``).
``telemetry.prometheus_port`` in the config (or OTEL_METRICS_EXPORTER=prometheus with
OTEL_EXPORTER_PROMETHEUS_PORT, default 9464) serves a Prometheus scrape endpoint on
OTEL_EXPORTER_PROMETHEUS_HOST (default 127.0.0.1).

OTLP spans are recorded by ``lean.LeanTracerProvider`` and, by default, masked, encoded
(``otlp_wire``) and sent (``otlp_send``) by a child process (``offload.OffloadSpanProcessor``: the
serving process only pickles plain fields down a pipe). SIDECAR_TRACES_OFFLOAD=false encodes and
sends from a thread of the serving process instead (``batching.SpanBatcher``);
SIDECAR_TRACES_SDK=true (and console export) uses the SDK's ``TracerProvider`` and
``BatchSpanProcessor``, every exporter wrapped in ``masking.MaskingSpanExporter``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import metrics, trace

__all__ = ["DEFAULT_PROMETHEUS_PORT", "DEFAULT_SERVICE_NAME", "Telemetry", "setup_telemetry"]

DEFAULT_SERVICE_NAME = "sidecar"
DEFAULT_PROMETHEUS_PORT = 9464
DEFAULT_PROMETHEUS_HOST = "127.0.0.1"


@dataclass
class Telemetry:
    """What ``setup_telemetry`` installed: the tracer provider the doors' spans go to, and how to flush on exit."""

    enabled: bool = False
    tracing: bool = False
    tracer_provider: trace.TracerProvider | None = None
    """The SDK's provider when traces are exported (``tracing``); else None."""
    prometheus: tuple[str, int] | None = None
    exporting: list[str] = field(default_factory=list)
    """What goes where, in words, for the banner."""
    _closers: list[Callable[[], object]] = field(default_factory=list)

    def describe(self) -> str:
        return "; ".join(self.exporting) if self.exporting else "off (set OTEL_EXPORTER_OTLP_ENDPOINT)"

    def shutdown(self) -> None:
        """Flush and stop every exporter (spans still queued are sent)."""
        for close in reversed(self._closers):
            close()
        self._closers.clear()


def _env(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def _exporters(name: str) -> set[str]:
    return {e.strip().lower() for e in _env(name, "otlp").split(",") if e.strip()}


def _endpoint(signal: str) -> str:
    return _env(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT") or _env("OTEL_EXPORTER_OTLP_ENDPOINT")


def _protocol(signal: str) -> str:
    return _env(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL") or _env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")


def setup_telemetry(prometheus_port: int | None = None) -> Telemetry:
    if _env("OTEL_SDK_DISABLED").lower() == "true":
        return Telemetry()
    any_endpoint = _env("OTEL_EXPORTER_OTLP_ENDPOINT")
    trace_exporters = _exporters("OTEL_TRACES_EXPORTER")
    metric_exporters = _exporters("OTEL_METRICS_EXPORTER")
    otlp_traces = "otlp" in trace_exporters and bool(_env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or any_endpoint)
    otlp_metrics = "otlp" in metric_exporters and bool(_env("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") or any_endpoint)
    console_traces = "console" in trace_exporters
    console_metrics = "console" in metric_exporters
    if not prometheus_port and "prometheus" in metric_exporters:
        prometheus_port = int(_env("OTEL_EXPORTER_PROMETHEUS_PORT") or DEFAULT_PROMETHEUS_PORT)
    tracing = otlp_traces or console_traces
    if not (tracing or otlp_metrics or console_metrics or prometheus_port):
        return Telemetry()

    from opentelemetry.sdk.resources import Resource

    out = Telemetry(enabled=True, tracing=tracing)
    resource = _resource(Resource)
    if tracing:
        _install_tracing(out, resource, otlp=otlp_traces, console=console_traces)
    _install_metrics(out, resource, otlp=otlp_metrics, console=console_metrics, prometheus_port=prometheus_port)
    return out


def _resource(resource_cls: Any) -> Any:
    """OTEL_SERVICE_NAME beats service.name in OTEL_RESOURCE_ATTRIBUTES beats "sidecar"."""
    from sidecar import __version__

    resource = resource_cls.create({"service.version": __version__})
    named = _env("OTEL_SERVICE_NAME") or "service.name=" in _env("OTEL_RESOURCE_ATTRIBUTES")
    if not named:
        resource = resource.merge(resource_cls({"service.name": DEFAULT_SERVICE_NAME}))
    return resource


def _install_tracing(out: Telemetry, resource: Any, *, otlp: bool, console: bool) -> None:
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    from sidecar.telemetry.masking_export import MaskingSpanExporter
    from sidecar.telemetry.quiet import sdk_tracer_provider

    protocol = "http/protobuf" if _protocol("TRACES").startswith("http") else "grpc"
    where = f"traces over OTLP {protocol} to {_endpoint('TRACES')}"
    if otlp and not console and _env("SIDECAR_TRACES_SDK").lower() != "true":
        from sidecar.telemetry.lean import LeanTracerProvider

        exporter: Any
        if _env("SIDECAR_TRACES_OFFLOAD", "true").lower() != "false":
            from sidecar.telemetry.offload import OffloadSpanProcessor

            exporter = OffloadSpanProcessor(protocol, resource)
            out.exporting.append(f"{where} (encoded and sent by a child process)")
        else:
            from sidecar.telemetry.batching import SpanBatcher

            exporter = SpanBatcher(protocol, dict(resource.attributes), resource.schema_url or "")
            out.exporting.append(where)
        lean = LeanTracerProvider(
            exporter.sink, force_flush=exporter.force_flush, shutdown=exporter.shutdown, resource=resource
        )
        lean.exporter = exporter
        trace.set_tracer_provider(lean)
        out._closers.append(lean.shutdown)
        out.tracer_provider = lean
        return
    provider = sdk_tracer_provider(resource=resource)  # the sampler comes from OTEL_TRACES_SAMPLER / _ARG
    if otlp:
        if protocol.startswith("http"):
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpans

            provider.add_span_processor(BatchSpanProcessor(MaskingSpanExporter(HttpSpans())))
        else:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans

            provider.add_span_processor(BatchSpanProcessor(MaskingSpanExporter(GrpcSpans())))
        out.exporting.append(f"{where} (the SDK's exporter)")
    if console:
        provider.add_span_processor(BatchSpanProcessor(MaskingSpanExporter(ConsoleSpanExporter())))
        out.exporting.append("traces to stdout")
    trace.set_tracer_provider(provider)
    out._closers.append(provider.shutdown)
    out.tracer_provider = provider


def _install_metrics(out: Telemetry, resource: Any, *, otlp: bool, console: bool, prometheus_port: int | None) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, MetricReader, PeriodicExportingMetricReader

    readers: list[MetricReader] = []
    if otlp:
        if _protocol("METRICS").startswith("http"):
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetrics

            readers.append(PeriodicExportingMetricReader(HttpMetrics()))
            out.exporting.append(f"metrics over OTLP http/protobuf to {_endpoint('METRICS')}")
        else:
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetrics

            readers.append(PeriodicExportingMetricReader(GrpcMetrics()))
            out.exporting.append(f"metrics over OTLP grpc to {_endpoint('METRICS')}")
    if console:
        readers.append(PeriodicExportingMetricReader(ConsoleMetricExporter()))
        out.exporting.append("metrics to stdout")
    if prometheus_port:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import start_http_server

        host = _env("OTEL_EXPORTER_PROMETHEUS_HOST") or DEFAULT_PROMETHEUS_HOST
        server, _thread = start_http_server(prometheus_port, addr=host)
        out.prometheus = (host, int(server.server_address[1]))
        out.exporting.append(f"metrics for Prometheus at http://{host}:{out.prometheus[1]}/metrics")
        out._closers.append(server.server_close)
        out._closers.append(server.shutdown)  # closers run last-in first-out: shutdown, then close
        readers.append(PrometheusMetricReader())
    if not readers:
        return  # traces only: metrics stay the API's no-op
    provider = MeterProvider(resource=resource, metric_readers=readers)
    metrics.set_meter_provider(provider)
    out._closers.append(provider.shutdown)
