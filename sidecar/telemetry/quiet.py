"""Instrumentation scopes the sidecar's tracer providers keep quiet: their tracers record nothing.

The MCP SDK 2.x traces itself through the global tracer provider (the sidecar's): a CLIENT span
``MCP send tools/call {tool}`` per request it sends, whose context it then writes into the
request's ``_meta`` in place of the caller's, and a SERVER span per message it serves. The sidecar
traces both itself (an attempt span per ``tools/call``, whose context the server receives; the MCP
front's ``tools/call {tool}``), so the SDK's would be a second span of each and would hide the
attempt from the server. Its tracer is the API's no-op one: no span, the current context (the
attempt, ``AttemptRecord.active``) left as it is, and so propagated as it is.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace

__all__ = ["QUIET_SCOPES", "quiet_tracer", "sdk_tracer_provider"]

QUIET_SCOPES = frozenset({"mcp-python-sdk"})
"""The scopes whose tracers are no-ops (the MCP SDK's, ``mcp.shared._otel``'s ``get_tracer`` name)."""
_NO_OP = trace.NoOpTracer()


def quiet_tracer(scope: str) -> trace.Tracer | None:
    """The no-op tracer for a quiet scope; None for any other (its provider's own tracer)."""
    return _NO_OP if scope in QUIET_SCOPES else None


def sdk_tracer_provider(**kwargs: Any) -> Any:
    """The SDK's ``TracerProvider`` (``kwargs`` its own), its quiet scopes' tracers no-ops."""
    from opentelemetry.sdk.trace import TracerProvider

    class QuietTracerProvider(TracerProvider):
        def get_tracer(self, instrumenting_module_name: str, *args: Any, **kw: Any) -> trace.Tracer:
            quiet = quiet_tracer(instrumenting_module_name)
            return quiet if quiet is not None else super().get_tracer(instrumenting_module_name, *args, **kw)

    return QuietTracerProvider(**kwargs)
