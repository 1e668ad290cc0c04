"""One SERVER span per RPC, continuing the caller's trace (W3C ``traceparent`` in metadata).

Done by hand rather than with ``opentelemetry-instrumentation-grpc``'s ``aio_server_interceptor``:
with grpcio 1.85 that interceptor reports every RPC failed through ``abort_with_status`` (all of
CallModel's failures) as ``rpc.grpc.status_code`` 0 with two ``exception`` events, because its
context wrapper does not see the abort. This one reads the code the RPC really ended with.

The conventions are the same (RPC semantic conventions, gRPC)::

    name        sidecar.v1.Sidecar/CallModel         kind SERVER
    attributes  rpc.system = grpc, rpc.service, rpc.method, rpc.grpc.status_code,
                network.peer.address / network.peer.port, error.type = the code's name when not OK
    status      ERROR for UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS
                (the server-side rule); left unset otherwise

The health and reflection services are not traced (a probe every few seconds is noise). A
server-streaming method (StreamModel) has its span from the call to its last event or its status.
The propagators are the global ones (``OTEL_PROPAGATORS``,
by default ``tracecontext,baggage``); the extracted context, baggage included, is current while the
servicer runs, so every span it starts is a child of the server span.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import grpc
from opentelemetry import context as otel_context
from opentelemetry import trace

from sidecar.telemetry import names as n
from sidecar.telemetry.setup import Telemetry
from sidecar.telemetry.tracing import propagated_metadata

__all__ = ["EXCLUDED_SERVICES", "MAX_METHODS", "MAX_PEERS", "ServerSpanInterceptor", "span_interceptors"]

EXCLUDED_SERVICES = frozenset(
    {"grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection", "grpc.reflection.v1.ServerReflection"}
)
_SERVER_ERRORS = frozenset(
    {
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)

MAX_METHODS = 256  # wrapped handlers kept; a method name is the caller's text, so the memo is bounded
MAX_PEERS = 1024  # parsed peers kept (one per client connection); past it the memo starts again

Behavior = Callable[[Any, grpc.aio.ServicerContext[Any, Any]], Awaitable[Any]]
StreamBehavior = Callable[[Any, grpc.aio.ServicerContext[Any, Any]], AsyncIterator[Any]]


class ServerSpanInterceptor(grpc.aio.ServerInterceptor):
    def __init__(
        self, tracer_provider: trace.TracerProvider | None = None, excluded: Iterable[str] = EXCLUDED_SERVICES
    ) -> None:
        self._tracer = trace.get_tracer(n.TRACER, tracer_provider=tracer_provider)
        self._excluded = frozenset(excluded)
        self._wrapped: dict[str, tuple[Any, Any]] = {}  # method -> (its handler, that handler traced)
        self._peers: dict[str, dict[str, str | int]] = {}  # peer -> its attributes (one per connection)

    def _peer(self, peer: str) -> dict[str, str | int]:
        """The network.peer.* attributes of ``peer``, parsed once per connection (bounded: MAX_PEERS)."""
        attributes = self._peers.get(peer)
        if attributes is None:
            if len(self._peers) >= MAX_PEERS:
                self._peers.clear()
            attributes = self._peers[peer] = _peer_attributes(peer)
        return attributes

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler: Any = await continuation(handler_call_details)
        method: str = handler_call_details.method or ""
        known = self._wrapped.get(method)
        if known is not None and known[0] is handler:
            return known[1]  # type: ignore[no-any-return]
        wrapped = self._wrapped_handler(method, handler)
        if handler is not None and len(self._wrapped) < MAX_METHODS:
            self._wrapped[method] = (handler, wrapped)
        return wrapped  # type: ignore[no-any-return]

    def _wrapped_handler(self, method: str, handler: Any) -> Any:
        """``handler`` with its behaviour traced (built once per method, then reused)."""
        full = method.lstrip("/")
        service, _, name = full.partition("/")
        if handler is None or service in self._excluded:
            return handler
        base = {n.RPC_SYSTEM: "grpc", n.RPC_SERVICE: service, n.RPC_METHOD: name}
        if handler.unary_unary is not None:
            return handler._replace(unary_unary=self._wrap(handler.unary_unary, full, base))
        if handler.unary_stream is not None:
            return handler._replace(unary_stream=self._wrap_stream(handler.unary_stream, full, base))
        return handler

    def _wrap(self, behavior: Behavior, span_name: str, base: dict[str, str]) -> Behavior:
        tracer = self._tracer

        async def traced(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            parent = propagated_metadata(context.invocation_metadata())
            token = otel_context.attach(parent) if parent is not None else None
            try:
                with tracer.start_as_current_span(
                    span_name,
                    kind=trace.SpanKind.SERVER,
                    attributes=base,
                    record_exception=False,
                    set_status_on_exception=False,
                ) as span:
                    if span.is_recording():
                        span.set_attributes(self._peer(context.peer()))
                    try:
                        response = await behavior(request, context)
                    except asyncio.CancelledError:
                        _end(span, grpc.StatusCode.CANCELLED)
                        raise
                    except grpc.aio.AbortError:
                        _end(span, _code(context) or grpc.StatusCode.UNKNOWN)
                        raise
                    except Exception as exc:
                        span.record_exception(exc)
                        _end(span, grpc.StatusCode.UNKNOWN)
                        raise
                    _end(span, _code(context) or grpc.StatusCode.OK)
                    return response
            finally:
                if token is not None:
                    otel_context.detach(token)

        return traced

    def _wrap_stream(self, behavior: StreamBehavior, span_name: str, base: dict[str, str]) -> StreamBehavior:
        tracer = self._tracer

        async def traced(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
            parent = propagated_metadata(context.invocation_metadata())
            token = otel_context.attach(parent) if parent is not None else None
            try:
                with tracer.start_as_current_span(
                    span_name,
                    kind=trace.SpanKind.SERVER,
                    attributes=base,
                    record_exception=False,
                    set_status_on_exception=False,
                ) as span:
                    if span.is_recording():
                        span.set_attributes(self._peer(context.peer()))
                    try:
                        async for response in behavior(request, context):
                            yield response
                    except (asyncio.CancelledError, GeneratorExit):
                        _end(span, grpc.StatusCode.CANCELLED)
                        raise
                    except grpc.aio.AbortError:
                        _end(span, _code(context) or grpc.StatusCode.UNKNOWN)
                        raise
                    except Exception as exc:
                        span.record_exception(exc)
                        _end(span, grpc.StatusCode.UNKNOWN)
                        raise
                    _end(span, _code(context) or grpc.StatusCode.OK)
            finally:
                if token is not None:
                    otel_context.detach(token)

        return traced


def span_interceptors(telemetry: Telemetry) -> list[grpc.aio.ServerInterceptor]:
    """The server span interceptor when ``telemetry`` exports traces (its provider); else none."""
    if telemetry.tracer_provider is None:
        return []
    return [ServerSpanInterceptor(telemetry.tracer_provider)]


def _code(context: grpc.aio.ServicerContext[Any, Any]) -> grpc.StatusCode | None:
    try:
        code = context.code()
    except Exception:  # pragma: no cover - older grpcio without code()
        return None
    if isinstance(code, grpc.StatusCode):
        return code
    if isinstance(code, int):
        for candidate in grpc.StatusCode:
            if candidate.value[0] == code:
                return candidate
    return None


def _end(span: trace.Span, code: grpc.StatusCode) -> None:
    if not span.is_recording():
        return
    if code is grpc.StatusCode.OK:
        span.set_attribute(n.RPC_GRPC_STATUS, 0)
    else:
        span.set_attributes({n.RPC_GRPC_STATUS: code.value[0], n.ERROR_TYPE: code.name})
    if code in _SERVER_ERRORS:
        span.set_status(trace.StatusCode.ERROR, code.name)


def _peer_attributes(peer: str) -> dict[str, str | int]:
    """``ipv4:127.0.0.1:5000`` / ``ipv6:[::1]:5000`` -> network.peer.address and .port (none for a unix socket)."""
    kind, _, rest = peer.partition(":")
    if kind not in ("ipv4", "ipv6") or not rest:
        return {}
    host, _, port = rest.rpartition(":")
    if port.isdigit():
        return {n.NETWORK_PEER_ADDRESS: host.strip("[]"), n.NETWORK_PEER_PORT: int(port)}
    return {n.NETWORK_PEER_ADDRESS: host.strip("[]")}
