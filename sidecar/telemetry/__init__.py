"""Telemetry: spans, metrics and logs, configured the standard OpenTelemetry way.

The doors' SERVER spans are the doors' own (``server.grpc.spans``, ``server.http.tracing``): this
package knows OpenTelemetry and the core, never gRPC or HTTP serving.

names           every span, attribute, event and metric name (GenAI, HTTP and RPC conventions; sidecar.*)
setup           the SDK from the OTEL_* variables, or nothing at all when none asks for it
tracing         the tracer the sidecar starts its spans with: free when no SDK is installed
metrics         the instruments, made once per process
logs            JSON lines with trace_id and span_id, secrets masked
masking         the process's secrets; the metric labels and log lines that mask them
masking_export  the span exporter that masks them (the SDK's span types: imported when tracing uses it)
testing         in-memory providers for tests
"""
