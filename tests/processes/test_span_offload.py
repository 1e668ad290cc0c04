"""Spans exported by the child process arrive whole and masked (``telemetry.offload``).

A real ``OffloadSpanProcessor`` (its real child process, the SDK's OTLP/HTTP exporter) sends to an
OTLP/HTTP receiver on loopback, which this test decodes with the OTLP protobuf messages: names,
kinds, parents, attributes of every type, events, links, status and the resource are what the SDK
recorded, and a registered secret in any string is masked.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Link, SpanKind, StatusCode

from sidecar.telemetry import masking
from sidecar.telemetry.offload import OffloadSpanProcessor

SECRET = "sk-offload-SECRET-0123456789abcdef"


class _Receiver(http.server.BaseHTTPRequestHandler):
    bodies: ClassVar[list[bytes]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        type(self).bodies.append(self.rfile.read(length))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes]]:
    _Receiver.bodies = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}/v1/traces")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    try:
        yield _Receiver.bodies
    finally:
        server.shutdown()
        server.server_close()


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind)


def _attrs(kvs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in kvs}


def test_offloaded_spans_arrive_whole_and_masked(receiver: list[bytes]) -> None:
    masking.register([SECRET])
    provider = TracerProvider(resource=Resource.create({"service.name": "offload-test"}))
    provider.add_span_processor(OffloadSpanProcessor("http/protobuf", provider.resource))
    tracer = provider.get_tracer("sidecar.test", "1.2.3")
    with tracer.start_as_current_span("chat gpt", kind=SpanKind.CLIENT, attributes={"a.int": 3}) as parent:
        parent.set_attribute("a.text", f"key={SECRET}")
        parent.set_attribute("a.float", 0.5)
        parent.set_attribute("a.bool", True)
        parent.set_attribute("a.list", ["stop", SECRET])
        parent.add_event("sidecar.model.throttle", {"sidecar.throttle": 2.0, "why": SECRET})
        child = tracer.start_span("POST", kind=SpanKind.CLIENT, links=[Link(parent.get_span_context(), {"l": 1})])
        child.set_status(StatusCode.ERROR, f"failed with {SECRET}")
        child.end()
    provider.shutdown()  # flushes: the child exports what it holds and exits

    spans = []
    for body in receiver:
        request = ExportTraceServiceRequest.FromString(body)
        for rs in request.resource_spans:
            assert _attrs(rs.resource.attributes)["service.name"] == "offload-test"
            for ss in rs.scope_spans:
                assert (ss.scope.name, ss.scope.version) == ("sidecar.test", "1.2.3")
                spans.extend(ss.spans)
    assert SECRET not in b"".join(receiver).decode("latin-1")
    by_name = {s.name: s for s in spans}
    assert set(by_name) == {"chat gpt", "POST"}
    chat, post = by_name["chat gpt"], by_name["POST"]
    ctx = parent.get_span_context()
    assert chat.trace_id == ctx.trace_id.to_bytes(16, "big")
    assert chat.span_id == ctx.span_id.to_bytes(8, "big")
    assert post.parent_span_id == chat.span_id
    assert post.trace_id == chat.trace_id
    attrs = _attrs(chat.attributes)
    assert attrs["a.int"] == 3
    assert attrs["a.float"] == 0.5
    assert attrs["a.bool"] is True
    assert attrs["a.text"].startswith("key=")
    assert SECRET not in attrs["a.text"]
    assert attrs["a.list"][0] == "stop"
    assert SECRET not in attrs["a.list"][1]
    (event,) = chat.events
    assert event.name == "sidecar.model.throttle"
    assert _attrs(event.attributes)["sidecar.throttle"] == 2.0
    assert event.time_unix_nano >= chat.start_time_unix_nano
    assert chat.kind == post.kind == 3  # SPAN_KIND_CLIENT
    assert post.status.code == 2
    assert "failed with" in post.status.message
    (link,) = post.links
    assert link.span_id == chat.span_id
    assert _attrs(link.attributes) == {"l": 1}
    assert chat.end_time_unix_nano >= chat.start_time_unix_nano > 0


def test_the_lean_tracers_spans_cross_to_the_child_whole(receiver: list[bytes]) -> None:
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState, set_span_in_context

    from sidecar.telemetry.lean import LeanTracerProvider

    masking.register([SECRET])
    offload = OffloadSpanProcessor("http/protobuf", Resource.create({"service.name": "offload-lean"}))
    provider = LeanTracerProvider(offload.sink, force_flush=offload.force_flush, shutdown=offload.shutdown)
    remote = SpanContext(0xAB, 0xCD, is_remote=True, trace_flags=TraceFlags(1), trace_state=TraceState([("k", "v")]))
    tracer = provider.get_tracer("sidecar.test")
    parent_context = set_span_in_context(NonRecordingSpan(remote))
    with tracer.start_as_current_span("chat gpt", context=parent_context, attributes={"why": SECRET}) as span:
        span.add_link(remote, {"l": 2})
    provider.shutdown()
    (chat,) = [s for body in receiver for rs in ExportTraceServiceRequest.FromString(body).resource_spans
               for ss in rs.scope_spans for s in ss.spans]  # fmt: skip
    assert chat.trace_id == (0xAB).to_bytes(16, "big")
    assert chat.parent_span_id == (0xCD).to_bytes(8, "big")
    assert chat.flags == 0x300  # a remote parent
    assert chat.trace_state == "k=v"
    assert SECRET not in _attrs(chat.attributes)["why"]
    (link,) = chat.links
    assert link.span_id == (0xCD).to_bytes(8, "big")
    assert _attrs(link.attributes) == {"l": 2}
