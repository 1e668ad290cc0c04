"""telemetry.quiet: the MCP SDK's own tracer records nothing in either of the sidecar's tracer providers."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from sidecar.telemetry.lean import LeanTracerProvider
from sidecar.telemetry.quiet import sdk_tracer_provider

ATTEMPT = SpanContext(0x1234, 0x5678, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))
"""The attempt a request of the SDK is sent under."""


def test_the_mcp_sdks_scope_records_nothing_and_leaves_the_attempt_current() -> None:
    for provider in (LeanTracerProvider(lambda _fields: None), sdk_tracer_provider()):
        sdk = provider.get_tracer("mcp-python-sdk")
        under = trace.set_span_in_context(NonRecordingSpan(ATTEMPT))
        with sdk.start_as_current_span("MCP send tools/call search", context=under) as span:
            assert not span.is_recording()
            assert trace.get_current_span().get_span_context() == ATTEMPT  # what the SDK writes into _meta
        assert provider.get_tracer("sidecar").start_span("tools/call search", context=under).is_recording()
