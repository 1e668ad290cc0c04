"""Our OTLP encoding (``telemetry.otlp_wire``) is the SDK encoder's, field for field.

Spans are recorded by the production tracer provider (``lean.LeanTracerProvider``), then encoded
twice: by ``SpanEncoder`` from the plain fields, and by the SDK's ``encode_spans`` from the same
spans as ``ReadableSpan`` behind ``MaskingSpanExporter``. The two requests, decoded with the OTLP
protobuf messages, must be equal: names, ids, parents (remote too), kinds, times, every attribute
type, events, links, status, trace state, scopes and the resource, with a secret masked in each.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, StatusCode, TraceFlags, TraceState

from sidecar.telemetry import masking
from sidecar.telemetry.lean import Fields, LeanTracerProvider
from sidecar.telemetry.masking import MaskingSpanExporter
from sidecar.telemetry.otlp_wire import SpanEncoder
from sidecar.telemetry.testing import as_readable

SECRET = "sk-wire-SECRET-0123456789abcdef"
RESOURCE = Resource.create({"service.name": "wire-test", "service.version": "9.9"})


class _Keep(SpanExporter):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


def _both(fields: list[Fields]) -> tuple[ExportTraceServiceRequest, ExportTraceServiceRequest]:
    ours = SpanEncoder(dict(RESOURCE.attributes), RESOURCE.schema_url).request(fields)
    keep = _Keep()
    MaskingSpanExporter(keep).export([as_readable(f, RESOURCE) for f in fields])
    theirs = encode_spans(keep.spans).SerializePartialToString()
    return ExportTraceServiceRequest.FromString(ours), ExportTraceServiceRequest.FromString(theirs)


def _record(body: Any) -> list[Fields]:
    fields: list[Fields] = []
    provider = LeanTracerProvider(fields.append, sampler=None)
    body(provider)
    return fields


@pytest.fixture(autouse=True)
def _secret() -> None:
    masking.register([SECRET])


def test_a_call_s_spans_encode_as_the_sdk_encodes_them() -> None:
    def calls(provider: LeanTracerProvider) -> None:
        tracer = provider.get_tracer("sidecar", "1.2.3")
        other = provider.get_tracer("agent", None, "https://opentelemetry.io/schemas/1.30.0")
        remote = SpanContext(
            0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(1), trace_state=TraceState([("k", "v")])
        )
        token = otel_context.attach(trace.set_span_in_context(NonRecordingSpan(remote)))
        try:
            with tracer.start_as_current_span("sidecar.v1.Sidecar/CallModel", kind=SpanKind.SERVER) as server:
                server.set_attributes({"rpc.system": "grpc", "network.peer.port": 5555})
                attrs = {"gen_ai.request.model": "gpt", "sidecar.job_id": f"job {SECRET}", "temp": 0.25}
                with tracer.start_as_current_span("chat gpt", kind=SpanKind.CLIENT, attributes=attrs) as chat:
                    chat.set_attribute("flag", False)
                    chat.set_attribute("big", 2**62)
                    chat.set_attribute("negative", -7)
                    chat.set_attribute("finish", ["stop", SECRET])
                    chat.set_attribute("ints", [1, 2, 3])
                    chat.add_event("sidecar.model.throttle", {"sidecar.throttle": 2.0, "why": SECRET})
                    chat.add_event(f"named {SECRET}")
                    attempt = tracer.start_span("POST", kind=SpanKind.CLIENT, links=[Link(remote, {"l": 1})])
                    attempt.set_status(StatusCode.ERROR, f"upstream said {SECRET}")
                    attempt.end()
                with other.start_as_current_span("agent.step") as step:
                    step.set_status(StatusCode.OK)
                try:
                    with tracer.start_as_current_span("boom"):
                        raise ValueError(f"bad {SECRET}")
                except ValueError:
                    pass
        finally:
            otel_context.detach(token)

    fields = _record(calls)
    assert len(fields) == 5
    ours, theirs = _both(fields)
    assert ours == theirs
    assert SECRET not in str(ours)
    scopes = ours.resource_spans[0].scope_spans
    assert [s.scope.name for s in scopes] == ["sidecar", "agent"]
    server = next(s for s in scopes[0].spans if s.name.endswith("CallModel"))
    assert server.parent_span_id == (0xDEF).to_bytes(8, "big")
    assert server.flags == 0x300  # the parent is remote
    assert server.trace_state == "k=v"


_values = st.one_of(
    st.text(max_size=20),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.lists(st.text(max_size=5), max_size=3),
    st.lists(st.integers(min_value=0, max_value=2**40), max_size=3),
    st.lists(st.booleans(), max_size=3),
)


@settings(max_examples=60, deadline=None)
@given(attributes=st.dictionaries(st.text(min_size=1, max_size=12), _values, max_size=8), name=st.text(max_size=30))
def test_any_attributes_encode_as_the_sdk_encodes_them(attributes: dict[str, Any], name: str) -> None:
    def one(provider: LeanTracerProvider) -> None:
        with provider.get_tracer("t").start_as_current_span(name, attributes=attributes) as span:
            span.add_event("e", attributes)

    ours, theirs = _both(_record(one))
    assert ours == theirs


def test_a_seen_value_is_masked_again_once_the_secrets_change() -> None:
    late = "correct-horse-battery-staple"

    def one(provider: LeanTracerProvider) -> None:
        provider.get_tracer("t").start_span("s", attributes={"v": late}).end()

    encoder = SpanEncoder()
    fields = _record(one)
    assert late in str(ExportTraceServiceRequest.FromString(encoder.request(fields)))
    masking.register([late])
    encoder.forget()
    assert late not in str(ExportTraceServiceRequest.FromString(encoder.request(fields)))
