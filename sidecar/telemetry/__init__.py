"""Telemetry: spans, metrics and logs, configured the standard OpenTelemetry way."""
