"""The default span export (``telemetry.batching`` + ``otlp_send``) and the lean tracer's rules.

``SpanBatcher`` sends to real OTLP receivers on loopback (HTTP, and gRPC through grpcio's server
with the OTLP service), configured by the standard variables: headers, gzip, retries on 503 (with
a recorded, not real, wait), no retry on 400, a full queue dropping and saying so. The lean tracer
(``lean.LeanTracerProvider``) keeps the SDK's sampling, limits and attribute rules.
"""

from __future__ import annotations

import gzip
import http.server
import logging
import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any, ClassVar

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import sampling
from opentelemetry.trace import NonRecordingSpan, StatusCode

from sidecar.telemetry.batching import SpanBatcher
from sidecar.telemetry.lean import Fields, LeanTracerProvider, sdk_sampler
from sidecar.telemetry.otlp_send import OtlpSender


class _Http(http.server.BaseHTTPRequestHandler):
    bodies: ClassVar[list[bytes]] = []
    headers_seen: ClassVar[list[dict[str, str]]] = []
    answers: ClassVar[list[int]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).headers_seen.append({k.lower(): v for k, v in self.headers.items()})
        status = type(self).answers.pop(0) if type(self).answers else 200
        if status == 200:
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            type(self).bodies.append(body)
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def http_receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_Http]]:
    _Http.bodies, _Http.headers_seen, _Http.answers = [], [], []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Http)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")  # only a flush sends, so the test decides when
    try:
        yield _Http
    finally:
        server.shutdown()
        server.server_close()


class _Collector(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.metadata: list[dict[str, str]] = []

    def Export(self, request: ExportTraceServiceRequest, context: grpc.ServicerContext) -> ExportTraceServiceResponse:
        self.requests.append(request)
        self.metadata.append({k: str(v) for k, v in context.invocation_metadata()})
        return ExportTraceServiceResponse()


@pytest.fixture
def grpc_collector(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Collector]:
    collector = _Collector()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(collector, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")
    try:
        yield collector
    finally:
        server.stop(0)


def _names(request: ExportTraceServiceRequest) -> list[str]:
    return [s.name for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]


def _calls(batcher: SpanBatcher, n: int) -> None:
    tracer = LeanTracerProvider(batcher.sink).get_tracer("sidecar")
    for i in range(n):
        with tracer.start_as_current_span(f"chat m{i}") as span:
            span.set_attribute("gen_ai.request.model", f"m{i}")


def test_spans_go_over_http_with_the_configured_headers_and_gzip(
    http_receiver: type[_Http], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=acme,authorization=Bearer%20tok")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    batcher = SpanBatcher("http/protobuf", {"service.name": "export-test"})
    _calls(batcher, 3)
    assert http_receiver.bodies == []  # queued, not yet sent
    assert batcher.force_flush() is True
    (body,) = http_receiver.bodies
    request = ExportTraceServiceRequest.FromString(body)
    assert _names(request) == ["chat m0", "chat m1", "chat m2"]
    assert request.resource_spans[0].resource.attributes[0].value.string_value == "export-test"
    seen = http_receiver.headers_seen[0]
    assert seen["content-type"] == "application/x-protobuf"
    assert seen["content-encoding"] == "gzip"
    assert seen["x-tenant"] == "acme"
    assert seen["authorization"] == "Bearer tok"
    batcher.shutdown()


def test_spans_go_over_grpc_by_default(grpc_collector: _Collector, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-tenant=acme")
    batcher = SpanBatcher("grpc")
    _calls(batcher, 2)
    batcher.shutdown()  # flushes
    (request,) = grpc_collector.requests
    assert _names(request) == ["chat m0", "chat m1"]
    assert grpc_collector.metadata[0]["x-tenant"] == "acme"


def test_a_batch_over_the_batch_size_is_sent_without_waiting_for_the_delay(grpc_collector: _Collector) -> None:
    batcher = SpanBatcher("grpc")
    batcher.batch = 4
    _calls(batcher, 9)  # two full batches wake the thread; one span stays queued
    batcher.shutdown()
    assert sorted(len(_names(r)) for r in grpc_collector.requests)[-1] == 4
    assert sum(len(_names(r)) for r in grpc_collector.requests) == 9


def test_a_503_is_retried_with_backoff_and_a_400_is_not(
    http_receiver: type[_Http], caplog: pytest.LogCaptureFixture
) -> None:
    waits: list[float] = []
    sender = OtlpSender.from_env("http/protobuf")
    sender.sleep = waits.append
    batcher = SpanBatcher("http/protobuf", sender=sender)
    http_receiver.answers = [503, 503]
    _calls(batcher, 1)
    assert batcher.force_flush() is True
    assert len(http_receiver.bodies) == 1
    assert len(waits) == 2
    assert 0.8 <= waits[0] <= 1.2
    assert 1.6 <= waits[1] <= 2.4
    http_receiver.answers = [400]
    _calls(batcher, 1)
    with caplog.at_level(logging.WARNING, "sidecar.telemetry"):
        assert batcher.force_flush() is False
    assert len(waits) == 2  # not retried
    assert "HTTP 400" in caplog.text
    batcher.shutdown()


def test_a_full_queue_drops_counts_and_says_so(
    http_receiver: type[_Http], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "3")
    batcher = SpanBatcher("http/protobuf")
    _calls(batcher, 5)
    with caplog.at_level(logging.WARNING, "sidecar.telemetry"):
        batcher.force_flush()
    assert "2 spans dropped" in caplog.text
    assert [len(_names(ExportTraceServiceRequest.FromString(b))) for b in http_receiver.bodies] == [3]
    batcher.shutdown()


# ---------------------------------------------------------------- the lean tracer's rules


def test_the_sampler_comes_from_the_standard_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    ended: list[Fields] = []
    span = LeanTracerProvider(ended.append).get_tracer("t").start_span("s")
    assert isinstance(span, NonRecordingSpan)
    span.end()
    assert ended == []
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0.25")
    assert "TraceIdRatioBased{0.25}" in sdk_sampler().get_description()
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "no_such_sampler")
    assert sdk_sampler() is sampling.DEFAULT_ON


def test_limits_and_attribute_rules_are_the_sdks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "3")
    monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "5")
    ended: list[Fields] = []
    tracer = LeanTracerProvider(ended.append).get_tracer("t")
    with tracer.start_as_current_span("s", attributes={"a": "abcdefgh"}) as span:
        span.set_attribute("b", {"not": "a value"})  # dropped, as the SDK drops it
        span.set_attribute("c", ["long-string", "x"])
        span.set_attribute("d", 1)
        span.set_attribute("e", 2)  # over the count: dropped
        span.set_status(StatusCode.OK)
        span.set_status(StatusCode.ERROR, "later")  # OK is final
    span.set_attribute("after", 1)  # ended: ignored
    ((_name, _ctx, _parent, _kind, start, end, attributes, _events, _links, code, description, scope),) = ended
    assert attributes == {"a": "abcde", "c": ("long-", "x"), "d": 1}
    assert (code, description) == (StatusCode.OK.value, None)
    assert end >= start
    assert scope == ("t", None, None)


def test_an_exception_is_recorded_as_the_sdk_records_it() -> None:
    ended: list[Fields] = []
    tracer = LeanTracerProvider(ended.append).get_tracer("t")
    with pytest.raises(KeyError), tracer.start_as_current_span("s"):
        raise KeyError("gone")
    (fields,) = ended
    ((event_name, event_attributes, _ts),) = fields[7]
    assert event_name == "exception"
    assert event_attributes["exception.type"] == "KeyError"
    assert "gone" in event_attributes["exception.stacktrace"]
    assert fields[9] == StatusCode.ERROR.value
    assert fields[10] == "KeyError: 'gone'"
