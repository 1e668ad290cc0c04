"""Telemetry: spans, metrics and logs, configured the standard OpenTelemetry way.

names         every span, attribute, event and metric name (GenAI, HTTP and RPC conventions; sidecar.*)
setup         the SDK from the OTEL_* variables, or nothing at all when none asks for it
server_spans  one SERVER span per RPC, continuing the caller's traceparent
tracing       the tracer the sidecar starts its spans with: free when no SDK is installed
metrics       the instruments, made once per process
logs          JSON lines with trace_id and span_id, secrets masked
masking       the process's secrets; the span exporter and metric labels that mask them
testing       in-memory providers for tests
"""
