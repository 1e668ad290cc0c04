"""The process: config, reload, workers, TLS, secrets, logs, telemetry and Jaeger, the layout,
packaging, docs snippets and examples."""
