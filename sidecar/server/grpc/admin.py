"""``sidecar.v1.Admin``: the admin state view and the operator actions over gRPC (``server.admin``).

    undecodable bytes     INVALID_ARGUMENT (kind INVALID_INPUT) naming the request type, whoever asks
                          (``grpc.handlers.register_service``: decoded before any of this runs)
    server.admin unset    PERMISSION_DENIED (kind PERMISSION_DENIED): the admin service is off
    read_on_loopback      GetState from a loopback peer: the answer, without a token
    no admin token        UNAUTHENTICATED (kind UNAUTHORIZED); a caller's ``server.auth`` token too;
                          PERMISSION_DENIED when ``server.admin.tokens`` is empty (only loopback reads)
    an admin token        the method's answer, from ``server.admin.StateView`` (masked)

GetState's answer carries ``x-sidecar-embedded-provider`` / ``-tools`` trailing metadata in a process
running the embedded fakes (``StateView.told``); with ``server.auth``, its ``callers`` are the view's
callers (a ``CallerState`` each).

The same checks as the HTTP port's admin door (``http.admin_front``): only admin tokens, from the
``authorization: Bearer`` metadata, compared in constant time (``auth.Tokens``). The caller-token
interceptor (``grpc.auth``) lets this service through to this check. Refusals are rich statuses
(a packed Failure, ErrorInfo) as every other refusal of the port (``grpc.refusals``). A name this
process does not hold: NOT_FOUND naming it. Reload without a reload in this process:
FAILED_PRECONDITION.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

import grpc
from google.protobuf import timestamp_pb2
from google.rpc import status_pb2
from grpc_status import rpc_status
from sidecar_contract.v1 import admin_pb2 as apb
from sidecar_contract.v1 import admin_pb2_grpc as apb_grpc
from sidecar_contract.v1 import sidecar_pb2 as pb

from sidecar.core.details import InvalidInputDetail, PermissionDetail, ResourceDetail, ServiceDetail, SystemDetail
from sidecar.core.taxonomy import (
    InvalidInput,
    PermissionDenied,
    ResourceNotFound,
    SidecarFailure,
    SystemFailure,
    Unauthorized,
)
from sidecar.server.admin import StateView, UnknownTarget
from sidecar.server.auth import Tokens, bearer_token
from sidecar.server.grpc.status import to_status
from sidecar.server.refusals import SIDECAR_SERVICE
from sidecar.server.reload import Reload, ReloadOutcome
from sidecar.server.security import is_loopback_peer

__all__ = ["ADMIN_SERVICE_NAME", "AdminServicer", "state_response"]

_log = logging.getLogger("sidecar.admin")

ADMIN_SERVICE_NAME = apb.DESCRIPTOR.services_by_name["Admin"].full_name
OFF = "The admin service is off: set server.admin.tokens (names of environment variables holding operator tokens)."
REFUSED = (
    "The sidecar refused this call: the admin service needs an operator token "
    "(metadata 'authorization: Bearer <token>' with one of server.admin.tokens); an agent's token is refused."
)
LOOPBACK_ONLY = (
    "This sidecar has no operator token (server.admin.tokens): its state view answers callers on loopback only "
    "(server.admin.read_on_loopback), and operator actions and reload are off."
)
NO_RELOAD = "reload is not available in this process"

Context = grpc.aio.ServicerContext[Any, Any]
_R = TypeVar("_R")
_CIRCUIT = {
    "closed": pb.CIRCUIT_STATE_CLOSED,
    "open": pb.CIRCUIT_STATE_OPEN,
    "half_open": pb.CIRCUIT_STATE_HALF_OPEN,
}


def _status(failure: SidecarFailure, code: grpc.StatusCode) -> status_pb2.Status:
    status = to_status(failure)
    status.code = code.value[0]
    return status


async def _abort(context: Context, failure: SidecarFailure, code: grpc.StatusCode) -> None:
    await context.abort_with_status(rpc_status.to_status(_status(failure, code)))


def _guard(doc: dict[str, Any]) -> apb.GuardState:
    opened_at = None
    if doc["opened_at"] is not None:
        opened_at = timestamp_pb2.Timestamp()
        opened_at.FromDatetime(datetime.fromisoformat(doc["opened_at"]))
    return apb.GuardState(
        name=doc["name"],
        circuit=_CIRCUIT.get(doc["circuit"], pb.CIRCUIT_STATE_UNSPECIFIED),
        throttle=doc["throttle"],
        opened_by=doc["opened_by"] or "",
        opened_at=opened_at,
        cooldown_s=doc["cooldown_s"],
        cooldown_left_s=doc["cooldown_left_s"],
        probe_holder=doc["probe_holder"] or "",
    )


def state_response(doc: dict[str, Any]) -> apb.GetStateResponse:
    """``StateView.read()``'s document (already masked) as the typed answer of GetState."""
    state = doc["state"]
    return apb.GetStateResponse(
        models=[
            apb.ModelState(
                model=m["model"],
                throttle=m["throttle"],
                paced_per_s=m["paced_per_s"],
                pause_left_s=m["pause_left_s"],
                in_flight=m["in_flight"],
                queued=m["queued"],
                last_signal=m["last_signal"] or "",
                last_signal_age_s=m["last_signal_age_s"],
            )
            for m in doc["models"]
        ],
        services=[_guard(g) for g in doc["services"]],
        deployments=[_guard(g) for g in doc["deployments"]],
        workflows=[
            apb.WorkflowSpend(workflow=w["workflow"], spent_usd=w["spent_usd"], cap_usd=w["cap_usd"])
            for w in doc["workflows"]
        ],
        state=apb.BackendState(
            backend=state["backend"],
            reachable=state["reachable"],
            replicas=state["replicas"],
            staleness_s=state.get("staleness_s"),
            last_error=state.get("last_error"),
            pending_actions=state.get("pending_actions"),
        ),
        callers=[
            apb.CallerState(
                name=c["name"],
                requests_per_second=c["requests_per_second"],
                tokens_per_minute=c["tokens_per_minute"],
                admitted=c["admitted"],
                refused=c["refused"],
                tokens_charged=c["tokens_charged"],
            )
            for c in doc.get("callers", ())
        ],
    )


class AdminServicer(apb_grpc.AdminServicer):
    """The admin service over one process's ``StateView``; ``tokens`` None: no operator may act (off, unless
    ``read_on_loopback`` lets a loopback peer read the view). ``reload`` None: no reload here."""

    def __init__(
        self, view: StateView, tokens: Tokens | None, reload: Reload | None = None, *, read_on_loopback: bool = False
    ) -> None:
        self._view = view
        self._tokens = tokens
        self._reload = reload
        self._read_on_loopback = read_on_loopback

    async def _admitted(self, context: Context, method: str) -> str:
        """Who calls (for the log), once the admin token is checked; aborts the call otherwise."""
        if self._tokens is None:
            said = LOOPBACK_ONLY if self._read_on_loopback else OFF
            await _abort(
                context,
                PermissionDenied.worded(said, detail=PermissionDetail(resource=ADMIN_SERVICE_NAME)),
                grpc.StatusCode.PERMISSION_DENIED,
            )
            raise AssertionError("unreachable: abort_with_status raises")
        index = self._tokens.which(bearer_token(context.invocation_metadata()))
        if index is None:
            detail = ServiceDetail(
                service=SIDECAR_SERVICE, endpoint=f"{ADMIN_SERVICE_NAME}/{method}", detail="admin token refused"
            )
            await _abort(context, Unauthorized.worded(REFUSED, detail=detail), grpc.StatusCode.UNAUTHENTICATED)
        return f"server.admin.tokens[{index}] from {context.peer()} (gRPC)"  # the token's name, never the token

    async def _act(self, context: Context, method: str, field: str, name: str, act: Callable[[str, str], _R]) -> _R:
        who = await self._admitted(context, method)
        if not name:
            rule = f"must name the target of {method}"
            failure = InvalidInput.worded(
                f"Invalid value for parameter '{field}' (got \"\"): {rule}",
                detail=InvalidInputDetail(parameter=field, value="", rule=rule),
            )
            await _abort(context, failure, grpc.StatusCode.INVALID_ARGUMENT)
        try:
            return act(name, who)
        except UnknownTarget as exc:
            detail = ResourceDetail(resource_type=field, identifier=name[:200])
            await _abort(context, ResourceNotFound.worded(str(exc), detail=detail), grpc.StatusCode.NOT_FOUND)
            raise AssertionError("unreachable: abort_with_status raises") from exc

    async def GetState(self, request: apb.GetStateRequest, context: Context) -> apb.GetStateResponse:
        if not (self._read_on_loopback and is_loopback_peer(context.peer())):
            await self._admitted(context, "GetState")
        told = self._view.told()
        if told:
            context.set_trailing_metadata(told)
        return state_response(self._view.read())

    async def CloseCircuit(self, request: apb.CloseCircuitRequest, context: Context) -> apb.CloseCircuitResponse:
        changed = await self._act(context, "CloseCircuit", "name", request.name, self._close)
        reach, note = self._view.reach()
        return apb.CloseCircuitResponse(changed=changed, reach=reach, note=note)

    async def LiftPause(self, request: apb.LiftPauseRequest, context: Context) -> apb.LiftPauseResponse:
        changed = await self._act(context, "LiftPause", "model", request.model, self._lift)
        reach, note = self._view.reach()
        return apb.LiftPauseResponse(changed=changed, reach=reach, note=note)

    async def ResetSpend(self, request: apb.ResetSpendRequest, context: Context) -> apb.ResetSpendResponse:
        was = await self._act(context, "ResetSpend", "workflow", request.workflow, self._reset)
        reach, note = self._view.reach()
        return apb.ResetSpendResponse(was_usd=was, reach=reach, note=note)

    def _close(self, name: str, who: str) -> bool:
        return self._view.close_circuit(name, who=who)

    def _lift(self, name: str, who: str) -> bool:
        return self._view.lift_pause(name, who=who)

    def _reset(self, name: str, who: str) -> float:
        return self._view.reset_spend(name, who=who)

    async def Reload(self, request: apb.ReloadRequest, context: Context) -> apb.ReloadResponse:
        who = await self._admitted(context, "Reload")
        _log.warning("admin: %s asked for a %sreload", who, "forced " if request.force else "")
        if self._reload is None:
            failure = SystemFailure.worded(NO_RELOAD, detail=SystemDetail(component="reload"))
            await _abort(context, failure, grpc.StatusCode.FAILED_PRECONDITION)
            raise AssertionError("unreachable: abort_with_status raises")
        outcome: ReloadOutcome = await self._reload(force=request.force)
        return apb.ReloadResponse(
            applied=outcome.applied,
            error=outcome.error or "",
            workers=[
                apb.WorkerReload(index=w.worker, pid=w.pid, applied=w.applied, error=w.error or "", reported=w.reported)
                for w in outcome.workers
            ],
            restart_needed=list(outcome.restart_needed),
            note=outcome.note or "",
            force_required=outcome.force_required,
        )
