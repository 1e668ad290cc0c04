"""The admin door: ``GET /admin/state``, the live policy state as JSON (``server.admin``).

    server.admin unset    403 admin_off: the view is off (no token opens it)
    read_on_loopback      GET /admin/state from a loopback address: 200 without a token
    no admin token        401 unauthenticated (a caller's ``server.auth`` token is refused here too);
                          403 admin_off when ``server.admin.tokens`` is empty (only loopback reads)
    an admin token        200, the document of ``server.admin.StateView`` (masked)

A 200 of the view carries ``x-sidecar-embedded-provider`` / ``-tools`` in a process running the embedded
fakes (``StateView.told``).

``POST /admin/actions/{close-circuit|lift-pause|reset-spend}`` with ``{"name": ...}``: the same
checks, then the operator action on this replica (logged on ``sidecar.admin``); a close is
published fleet-wide like a probe's. 404 for a name this process does not hold.

``POST /admin/reload`` (no body; ``?force=true`` applies a file that keeps none of the models and
tools served): the same checks, then the config file read again on every worker (``server.reload``):
200 with the outcome when applied, 422 with check-config's error when refused (the config before
keeps serving; ``error_type`` ``force_required`` when only ``force`` would apply it), 400 naming a
query parameter other than ``force``, a ``force`` that is not ``true`` or ``false``, or a body other
than an empty one or ``{}`` (nothing sent is dropped: ``{"force": true}`` is refused, naming the query);
503 when there is nothing to reload.

A POST's body is read after the token check, through the fronts' own bounded read
(``bodies.bounded_body``): past ``MAX_BODY_BYTES`` it is 413 ``too_large``, read no further (a
declared ``content-length`` past it: not a byte). An action's body that is not JSON, nested past
``json_depth.MAX_BODY_DEPTH``, not ``{"name": "<non-empty string>"}``, or holding a lone surrogate
escape is 400 ``invalid_request`` naming ``name`` or the body. Every refusal, and a fault of the
door's own (500 ``internal_error``, its details only in the log), is ``{"error": {"type", "message"}}``.

The caller-token check of ``access.Access`` does not apply to this path: only admin tokens
(``Authorization: Bearer``), compared in constant time (``auth.Tokens``).
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from sidecar.core.json_depth import loads
from sidecar.core.taxonomy import SidecarFailure
from sidecar.server.admin import StateView, UnknownTarget
from sidecar.server.auth import Tokens, bearer_token
from sidecar.server.http.bodies import TooLarge, bounded_body
from sidecar.server.http.hosting import Door
from sidecar.server.http.json_bodies import check_unicode
from sidecar.server.reload import Reload
from sidecar.server.security import is_loopback_peer

__all__ = ["ACTIONS", "ADMIN_STATE_PATH", "RELOAD_PATH", "admin_door"]

_log = logging.getLogger("sidecar.admin")
ADMIN_STATE_PATH = "/admin/state"
_OFF = "The admin view is off: set server.admin.tokens (names of environment variables holding operator tokens)."
_LOOPBACK_ONLY = (
    "This sidecar has no operator token (server.admin.tokens): its state view answers callers on loopback only "
    "(server.admin.read_on_loopback), and operator actions and reload are off."
)
_REFUSED = (
    "The sidecar refused this request: the admin view needs an operator token "
    "(header 'Authorization: Bearer <token>' with one of server.admin.tokens); an agent's token is refused."
)


def _error(status: int, kind: str, message: str) -> JSONResponse:
    headers = {"www-authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"error": {"type": kind, "message": message}}, status_code=status, headers=headers)


ACTION_PATH = "/admin/actions/{action}"
RELOAD_PATH = "/admin/reload"
ACTIONS = ("close-circuit", "lift-pause", "reset-spend")
MAX_BODY_BYTES = 4096
"""An admin POST's body past this is 413, read no further (an action's is ``{"name": "<target>"}``)."""
_SHAPE = 'the body must be {"name": "<target>"}'
_TOO_LARGE = f"the body is too large: an admin request's body is at most {MAX_BODY_BYTES} bytes ({_SHAPE})"


async def _body(request: Request) -> bytes | JSONResponse:
    """The request's body, or the 413 past ``MAX_BODY_BYTES``."""
    try:
        return await bounded_body(request, MAX_BODY_BYTES)
    except TooLarge:
        return _error(413, "too_large", _TOO_LARGE)


def _target(body: bytes) -> str | JSONResponse:
    """The action's ``name``, or the 400 naming what is wrong with the body."""
    try:
        sent = loads(body)
    except ValueError as exc:  # not JSON, not UTF-8, or nested too deep (json_depth.TooDeep)
        return _error(400, "invalid_request", f"{_SHAPE}; it is not JSON that can be read ({exc})"[:300])
    try:
        check_unicode(sent)  # a lone surrogate escape: text no encoder writes, echoed or logged
    except SidecarFailure as failure:
        return _error(400, "invalid_request", failure.message)
    name = sent.get("name") if isinstance(sent, dict) else None
    if not isinstance(name, str) or not name:
        return _error(400, "invalid_request", f"{_SHAPE}: 'name' must be a non-empty string")
    return name


_RELOAD_BODY = f"POST {RELOAD_PATH} takes no body (an empty one, or {{}}): ask for force with the query, ?force=true"
FORCE_VALUES = {"true": True, "false": False}
"""``POST /admin/reload?force=...``: the only values taken."""


def _force(request: Request) -> bool | str:
    """``?force=true|false`` of a reload (absent: false), or why the query is refused (naming the parameter)."""
    params = request.query_params
    unknown = sorted(k for k in params if k != "force")
    if unknown:
        return f"unknown query parameter {unknown[0][:64]!r}: POST {RELOAD_PATH} takes only force=true|false"
    given = params.getlist("force")
    if len(given) > 1:
        return "query parameter 'force' given more than once"
    if not given:
        return False
    value = FORCE_VALUES.get(given[0])
    if value is None:
        return f"query parameter 'force' must be true or false (got {given[0][:64]!r})"
    return value


def admin_door(
    tokens: Tokens | None, view: StateView, reload: Reload | None = None, *, read_on_loopback: bool = False
) -> Door:
    """``tokens`` None: no operator may act; ``read_on_loopback``: a loopback caller reads the view without one."""

    def refused(request: Request) -> JSONResponse | None:
        if tokens is None:
            return _error(403, "admin_off", _LOOPBACK_ONLY if read_on_loopback else _OFF)
        if not tokens.authorized(bearer_token(request.headers.items())):
            return _error(401, "unauthenticated", _REFUSED)
        return None

    def _who(request: Request) -> str:
        """The admitted caller, for the log: its token's name, never the token."""
        peer = request.client.host if request.client is not None else "unknown"
        index = tokens.which(bearer_token(request.headers.items())) if tokens is not None else None
        return f"server.admin.tokens[{index}] from {peer}"

    async def state(request: Request) -> JSONResponse:
        local = read_on_loopback and request.client is not None and is_loopback_peer(request.client.host)
        if not local and (refusal := refused(request)) is not None:
            return refusal
        return JSONResponse(view.read(), headers=dict(view.told()))

    async def action(request: Request) -> JSONResponse:
        if (refusal := refused(request)) is not None:
            return refusal
        what = request.path_params["action"]
        if what not in ACTIONS:
            return _error(404, "not_found", f"no admin action {what[:64]!r}; one of {', '.join(ACTIONS)}")
        if isinstance(body := await _body(request), JSONResponse):
            return body
        if isinstance(name := _target(body), JSONResponse):
            return name
        who = _who(request)
        try:
            if what == "close-circuit":
                result: dict[str, Any] = {"changed": view.close_circuit(name, who=who)}
            elif what == "lift-pause":
                result = {"changed": view.lift_pause(name, who=who)}
            else:
                result = {"was_usd": view.reset_spend(name, who=who)}
        except UnknownTarget as exc:
            return _error(404, "not_found", str(exc))
        reach, note = view.reach()
        return JSONResponse({"action": what, "name": name, **result, "reach": reach, "note": note})

    async def reloaded(request: Request) -> JSONResponse:
        if (refusal := refused(request)) is not None:
            return refusal
        if isinstance(body := await _body(request), JSONResponse):
            return body
        if body.strip() not in (b"", b"{}"):  # nothing sent is dropped: force is the query's
            return _error(400, "invalid_request", _RELOAD_BODY)
        force = _force(request)
        if isinstance(force, str):
            return _error(400, "invalid_request", force)
        if reload is None:
            return _error(503, "unavailable", "this sidecar cannot reload its config")
        _log.warning("admin: %s asked for a %sreload", _who(request), "forced " if force else "")
        outcome = await reload(force=force)
        answer = outcome.as_dict()
        if not outcome.applied:  # a worker silent past server.reload_wait_s is not a refused file
            silent = any(not w.reported for w in outcome.workers)
            kind = "force_required" if outcome.force_required else "config_refused"
            answer["error_type"] = "workers_not_reported" if silent else kind
        return JSONResponse(answer, status_code=200 if outcome.applied else 422)

    routes = [
        Route(ADMIN_STATE_PATH, state, methods=["GET"]),
        Route(RELOAD_PATH, reloaded, methods=["POST"]),
        Route(ACTION_PATH, action, methods=["POST"]),
    ]
    paths = frozenset({ADMIN_STATE_PATH, RELOAD_PATH, *(ACTION_PATH.replace("{action}", a) for a in ACTIONS)})

    def fault(path: str, failure: SidecarFailure) -> tuple[int, dict[str, Any]] | None:
        mine = path in paths or path.startswith(ACTION_PATH.removesuffix("{action}"))
        return (500, {"error": {"type": "internal_error", "message": failure.message}}) if mine else None

    return Door("admin", routes, fault=fault, open_paths=paths)
