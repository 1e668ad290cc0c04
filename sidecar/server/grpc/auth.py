"""The gRPC port's bearer check: an interceptor that refuses a call without a configured token.

    grpc.health.v1.Health      exempt: probes (Docker HEALTHCHECK, Kubernetes) send no token
    sidecar.v1.Admin           exempt here: it checks its own tokens (server.admin; grpc.admin)
    everything else            a token of server.auth.tokens, else UNAUTHENTICATED (refusals.unauthenticated)
                               reflection included: it describes the API to whoever asks

The token is read from the ``authorization`` metadata and compared as the HTTP port compares it
(``server.auth``: ``bearer_token``, ``Tokens``, in constant time). The refusal never quotes what
the caller sent, and a refused call is not logged with its metadata. This interceptor runs first,
before the server span and the in-flight limit, so an unauthenticated caller can neither take a
slot nor write spans. An admitted call's caller (the index of its token, ``server.callers.CALLER``) is
set for the RPC's task: the servicer checks that caller's own limits.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import grpc
from grpc_status import rpc_status

from sidecar.server.auth import Tokens, bearer_token
from sidecar.server.callers import CALLER
from sidecar.server.grpc.refusals import unauthenticated

__all__ = ["EXEMPT_SERVICES", "BearerTokenInterceptor"]

EXEMPT_SERVICES = frozenset({"grpc.health.v1.Health", "sidecar.v1.Admin"})


class BearerTokenInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, tokens: Iterable[str]) -> None:
        self._tokens = Tokens(tokens)

    def authorized(self, token: str | None) -> bool:
        """Whether ``token`` is one of the configured tokens (constant time; see the module docstring)."""
        return self._tokens.authorized(token)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        method: str = (handler_call_details.method or "").lstrip("/")
        service = method.partition("/")[0]
        if service in EXEMPT_SERVICES:
            return await continuation(handler_call_details)
        caller = self._tokens.which(bearer_token(handler_call_details.invocation_metadata))
        if caller is not None:
            CALLER.set(caller)  # the RPC's own task: its handler reads it (server.callers)
            return await continuation(handler_call_details)
        handler = await continuation(handler_call_details)
        return _refusing(handler, rpc_status.to_status(unauthenticated(method)))


def _refusing(handler: grpc.RpcMethodHandler[Any, Any] | None, status: grpc.Status) -> grpc.RpcMethodHandler[Any, Any]:
    """A handler of the same shape as ``handler`` (unary or streaming) that answers ``status``.

    No request deserializer: a refused request is not even decoded. A streaming answer's refusal is
    an async generator, as every stream of the port is: the interceptors outside this one iterate a
    stream's behaviour (``servicer.Arrival``'s stopwatch), and a coroutine there was a TypeError,
    answered UNKNOWN with a traceback in the log.
    """

    async def refuse(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await context.abort_with_status(status)
        raise AssertionError("unreachable: abort_with_status raises")

    async def refuse_stream(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
        await refuse(request, context)
        yield  # never reached: the yield makes this the async generator a stream's wrappers iterate

    streams_in = handler is not None and handler.request_streaming
    streams_out = handler is not None and handler.response_streaming
    if streams_in and streams_out:
        return grpc.stream_stream_rpc_method_handler(refuse_stream)
    if streams_in:
        return grpc.stream_unary_rpc_method_handler(refuse)
    if streams_out:
        return grpc.unary_stream_rpc_method_handler(refuse_stream)
    return grpc.unary_unary_rpc_method_handler(refuse)
