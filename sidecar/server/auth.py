"""Per-agent bearer tokens: every call carries ``authorization: Bearer <token>`` (``server.auth``).

    grpc.health.v1.Health      exempt: probes (Docker HEALTHCHECK, Kubernetes) send no token
    everything else            a token of server.auth.tokens, else UNAUTHENTICATED (refusals.unauthenticated)
                               reflection included: it describes the API to whoever asks

The token is compared in constant time with every configured token: both sides are hashed to
SHA-256 first (so the length does not show), each comparison is ``hmac.compare_digest``, and all
of them run whatever matched, so the time says neither whether nor which token matched. The
refusal never quotes what the caller sent, and a refused call is not logged with its metadata.
This interceptor runs first, before the server span and the in-flight limit, so an unauthenticated
caller can neither take a slot nor write spans.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import grpc
from grpc_status import rpc_status

from sidecar.server.refusals import unauthenticated

__all__ = ["EXEMPT_SERVICES", "BearerTokenInterceptor", "Tokens", "bearer_token"]

EXEMPT_SERVICES = frozenset({"grpc.health.v1.Health"})
_SCHEME = "bearer"


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


def bearer_token(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    """The token of the first ``authorization: Bearer <token>`` entry, or None."""
    for key, value in metadata or ():
        if key.lower() != "authorization" or not isinstance(value, str):
            continue
        scheme, _, token = value.strip().partition(" ")
        if scheme.lower() == _SCHEME and token.strip():
            return token.strip()
    return None


class Tokens:
    """The configured tokens, compared in constant time (the gRPC port's and the HTTP port's check)."""

    __slots__ = ("_digests",)

    def __init__(self, tokens: Iterable[str]) -> None:
        self._digests = [_digest(t) for t in tokens]
        if not self._digests:
            raise ValueError("Tokens needs at least one token")

    def authorized(self, token: str | None) -> bool:
        """Whether ``token`` is one of the configured tokens (constant time; see the module docstring)."""
        given = _digest(token or "")
        matched = False
        for digest in self._digests:
            matched |= hmac.compare_digest(given, digest)
        return matched and token is not None


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
        if service in EXEMPT_SERVICES or self.authorized(bearer_token(handler_call_details.invocation_metadata)):
            return await continuation(handler_call_details)
        handler = await continuation(handler_call_details)
        return _refusing(handler, rpc_status.to_status(unauthenticated(method)))


def _refusing(handler: grpc.RpcMethodHandler[Any, Any] | None, status: grpc.Status) -> grpc.RpcMethodHandler[Any, Any]:
    """A handler of the same shape as ``handler`` (unary or streaming) that answers ``status``.

    No request deserializer: a refused request is not even decoded.
    """

    async def refuse(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await context.abort_with_status(status)
        raise AssertionError("unreachable: abort_with_status raises")

    streams_in = handler is not None and handler.request_streaming
    streams_out = handler is not None and handler.response_streaming
    if streams_in and streams_out:
        return grpc.stream_stream_rpc_method_handler(refuse)
    if streams_in:
        return grpc.stream_unary_rpc_method_handler(refuse)
    if streams_out:
        return grpc.unary_stream_rpc_method_handler(refuse)
    return grpc.unary_unary_rpc_method_handler(refuse)
