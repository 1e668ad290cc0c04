"""Who may call the HTTP port: an ASGI middleware in front of every route, checked in this order.

    check         applies to                       refused (error.type)         unless
    Host          a loopback listen address         421 misdirected              the Host is loopback (a page that
                  (127.0.0.0/8, ::1, localhost)                                  rebinds its own name names it)
    Origin        every request carrying one        403 forbidden_origin         it is the Host's own (a browser page
                  (browsers do on every POST)                                    of another site; ``null`` refused)
    bearer token  every route but the open ones     401 unauthenticated,         server.auth is unset, or the token is
                  (GET /healthz), server.auth set   WWW-Authenticate: Bearer     one of its tokens (auth.Tokens), sent
                                                                                 as ``Authorization: Bearer``, or as
                                                                                 ``x-api-key`` (the Anthropic SDK's way)

A refusal is JSON, ``{"error": {"type": ..., "message": ...}}``, and never quotes what was sent.
The token is compared in constant time (``auth.Tokens``), as on the gRPC port. An admitted request's
caller (its token's index among server.auth.tokens) is put in the scope (``callers.SCOPE_KEY``): the
doors check that caller's own limits (``server.callers``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from sidecar.server.auth import Tokens, bearer_token
from sidecar.server.callers import SCOPE_KEY
from sidecar.server.security import is_local

__all__ = ["Access", "is_loopback_host", "refusal"]

API_KEY_HEADER = "x-api-key"
"""Where the Anthropic SDK sends its key (``api_key=``): taken as the bearer token."""
UNAUTHENTICATED = (
    "The sidecar refused this request: it carries no valid bearer token "
    "(header 'Authorization: Bearer <token>' with one of server.auth.tokens). "
    "An operator must fix the agent's configured token."
)
MISDIRECTED = (
    "The sidecar refused this request: its Host header does not name this machine, and the sidecar "
    "listens on a loopback address only (a web page that rebinds its own name to 127.0.0.1 is refused)."
)
FORBIDDEN_ORIGIN = (
    "The sidecar refused this request: it comes from a web page of another origin "
    "(the Origin header is not the sidecar's own address)."
)


def is_loopback_host(host: str) -> bool:
    """Whether a Host header (``name[:port]``, ``[v6][:port]``) names this machine."""
    if not host:
        return False
    with_port = host if host.rpartition(":")[2].isdigit() and not host.endswith("]") else host + ":0"
    return is_local(with_port)


def refusal(status: int, kind: str, message: str, headers: Iterable[tuple[bytes, bytes]] = ()) -> ASGIApp:
    """An ASGI app answering ``status`` with the JSON refusal."""
    body = json.dumps({"error": {"type": kind, "message": message}}).encode()

    async def answer(scope: Scope, receive: Receive, send: Send) -> None:
        start = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]
        await send({"type": "http.response.start", "status": status, "headers": start})
        await send({"type": "http.response.body", "body": body})

    return answer


_UNAUTHENTICATED = refusal(401, "unauthenticated", UNAUTHENTICATED, [(b"www-authenticate", b"Bearer")])
_MISDIRECTED = refusal(421, "misdirected", MISDIRECTED)
_FORBIDDEN_ORIGIN = refusal(403, "forbidden_origin", FORBIDDEN_ORIGIN)


class Access:
    """The checks of the module docstring, then ``app``."""

    def __init__(self, app: ASGIApp, *, tokens: Tokens | None, loopback: bool, open_paths: frozenset[str]) -> None:
        self._app = app
        self._tokens = tokens
        self._loopback = loopback
        self._open = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the lifespan
            await self._app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if self._loopback and not is_loopback_host(host):
            await _MISDIRECTED(scope, receive, send)
            return
        origin = headers.get("origin")
        if origin is not None and not _same_origin(origin, host):
            await _FORBIDDEN_ORIGIN(scope, receive, send)
            return
        if self._tokens is not None and scope.get("path") not in self._open:
            caller = self._tokens.which(bearer_token(headers.items()) or headers.get(API_KEY_HEADER))
            if caller is None:
                await _UNAUTHENTICATED(scope, receive, send)
                return
            scope[SCOPE_KEY] = caller
        await self._app(scope, receive, send)


def _same_origin(origin: str, host: str) -> bool:
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(host) and parts.netloc.lower() == host.lower()
