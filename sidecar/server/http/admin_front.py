"""The admin door: ``GET /admin/state``, the live policy state as JSON (``server.admin``).

    server.admin unset    403 admin_off: the view is off (no token opens it)
    no admin token        401 unauthenticated (a caller's ``server.auth`` token is refused here too)
    an admin token        200, the document of ``server.admin.StateView`` (masked)

The caller-token check of ``access.Access`` does not apply to this path: only admin tokens
(``Authorization: Bearer``), compared in constant time (``auth.Tokens``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from sidecar.server.auth import Tokens, bearer_token
from sidecar.server.http.hosting import Door

__all__ = ["ADMIN_STATE_PATH", "admin_door"]

ADMIN_STATE_PATH = "/admin/state"
_OFF = "The admin view is off: set server.admin.tokens (names of environment variables holding operator tokens)."
_REFUSED = (
    "The sidecar refused this request: the admin view needs an operator token "
    "(header 'Authorization: Bearer <token>' with one of server.admin.tokens); an agent's token is refused."
)


def _error(status: int, kind: str, message: str) -> JSONResponse:
    headers = {"www-authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"error": {"type": kind, "message": message}}, status_code=status, headers=headers)


def admin_door(tokens: Tokens | None, read: Callable[[], dict[str, Any]]) -> Door:
    async def state(request: Request) -> JSONResponse:
        if tokens is None:
            return _error(403, "admin_off", _OFF)
        if not tokens.authorized(bearer_token(request.headers.items())):
            return _error(401, "unauthenticated", _REFUSED)
        return JSONResponse(read())

    return Door("admin", [Route(ADMIN_STATE_PATH, state, methods=["GET"])], open_paths=frozenset({ADMIN_STATE_PATH}))
