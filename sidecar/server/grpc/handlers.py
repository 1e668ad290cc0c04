"""The Sidecar service registered from its generated descriptor, with decoding that cannot raise.

The generated ``add_SidecarServicer_to_server`` registers ``XRequest.FromString`` as each method's
deserializer: bytes that do not parse raise inside gRPC, and the caller gets UNKNOWN before any
of our code runs. Here every method of ``sidecar.v1.Sidecar`` (read from the descriptor, so a new
method needs no edit here) is registered with:

    deserializer   XRequest.FromString, or an ``Undecodable`` holding what failed (never raises)
    handler        Undecodable -> INVALID_ARGUMENT "could not be decoded as sidecar.v1.XRequest"
                   (refusals.undecodable), before any other work; else ``wrap``'s behaviour
                   (unary methods), or ``wrap_stream``'s (server-streaming methods: StreamModel)
    serializer     XResponse.SerializeToString

The enum fields of ``CHECKED_ENUMS`` are checked too: proto3 enums are open, so a number the
contract does not name (StreamModel's ``mid_stream`` 4, 99 or -1) decodes without complaint and
would be read as the default; it is INVALID_ARGUMENT (INVALID_INPUT naming the field and the
values it may take), before any other work.

Every call is held in ``InFlight`` while it is handled: a shutdown whose grace period ends with
calls still in flight ``cut``s them, and each ends UNAVAILABLE with a Failure saying the sidecar
is shutting down (``shutting_down``: UPSTREAM_THROTTLE, service ``sidecar``, RetryInfo), logged
as such, instead of gRPC's bare ``UNAVAILABLE "Cancelling all calls"``.

``wrap(service, method, behaviour)`` puts a policy around one method (the in-flight limit).
A client-streaming method would need a third shape: the contract has none.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import message_factory
from google.protobuf.message import DecodeError, Message
from google.rpc import status_pb2
from grpc_status import rpc_status
from sidecar_contract.v1 import sidecar_pb2 as pb

from sidecar.core.details import ServiceDetail
from sidecar.core.taxonomy import SHUTTING_DOWN, InvalidInput, SidecarFailure, UpstreamThrottle
from sidecar.server.admission import Behavior, StreamBehavior
from sidecar.server.grpc.refusals import undecodable
from sidecar.server.grpc.status import to_status
from sidecar.server.refusals import SIDECAR_SERVICE

__all__ = [
    "CHECKED_ENUMS",
    "CUT_DETAIL",
    "SIDECAR_SERVICE_NAME",
    "InFlight",
    "Undecodable",
    "register_sidecar",
    "shutting_down",
    "unnamed_enum",
]

_SERVICE = pb.DESCRIPTOR.services_by_name["Sidecar"]
SIDECAR_SERVICE_NAME: str = _SERVICE.full_name
Wrap = Callable[[str, str, Behavior], Behavior]
WrapStream = Callable[[str, str, StreamBehavior], StreamBehavior]


@dataclass(frozen=True, slots=True)
class Undecodable:
    """Request bytes that are not a serialized ``message_type``."""

    message_type: str
    size: int
    error: str


CUT_DETAIL = "shut down at the end of the grace period"
CUT_RETRY_AFTER_S = 1.0
_log = logging.getLogger("sidecar.server")


def shutting_down(method: str) -> SidecarFailure:
    """The failure of a call still in flight when the shutdown's grace period (server.grace_period_s) ended."""
    return UpstreamThrottle.worded(
        f"The sidecar is shutting down: the call to {method} was still in flight when its grace period "
        "(server.grace_period_s) ended, and was stopped; its outcome is unknown. Send it to another "
        f"replica, or retry after {CUT_RETRY_AFTER_S:g} s.",
        detail=ServiceDetail(service=SIDECAR_SERVICE, endpoint=method, detail=CUT_DETAIL),
        retry_after=CUT_RETRY_AFTER_S,
    )


class InFlight:
    """The tasks handling Sidecar calls now: what a shutdown cuts at the end of its grace period."""

    __slots__ = ("_tasks", "cutting")

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self.cutting = False
        """Set by ``cut``: a call cancelled from now on ends UNAVAILABLE ``shutting_down``."""

    def __len__(self) -> int:
        return len(self._tasks)

    def enter(self) -> asyncio.Task[Any] | None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        return task

    def leave(self, task: asyncio.Task[Any] | None) -> None:
        if task is not None:
            self._tasks.discard(task)

    def cut(self) -> int:
        """Stop every call in flight (each answers ``shutting_down``); how many there were."""
        self.cutting = True
        for task in self._tasks:
            task.cancel(SHUTTING_DOWN)  # the call's own log line says the shutdown stopped it
        return len(self._tasks)

    async def settled(self, timeout: float) -> None:
        """Until the calls ``cut`` have answered (at most ``timeout`` seconds, real time)."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)

    async def cut_answer(self, full: str, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        """The answer of a call ``cut``: UNAVAILABLE, the Failure ``shutting_down``, one log line."""
        failure = shutting_down(full)
        _log.warning(
            "%s: the sidecar is shutting down; the call was in flight at the end of the grace period "
            "(server.grace_period_s) and was stopped, answered UNAVAILABLE",
            full,
            extra={"rpc_method": full, "failure_kind": failure.kind_name},
        )
        status = to_status(failure)
        status.code = grpc.StatusCode.UNAVAILABLE.value[0]
        await context.abort_with_status(rpc_status.to_status(status))


CHECKED_ENUMS: dict[str, tuple[str, ...]] = {"StreamModel": ("mid_stream",)}
"""Per method, the request's enum fields whose value must be one the contract names."""


def unnamed_enum(request: Message, fields: tuple[str, ...]) -> status_pb2.Status | None:
    """INVALID_ARGUMENT for the first of ``fields`` holding a number its enum does not name, else None."""
    for name in fields:
        enum = request.DESCRIPTOR.fields_by_name[name].enum_type
        assert enum is not None, f"{name} is an enum field"
        value = getattr(request, name)
        if value not in enum.values_by_number:
            named = ", ".join(f"{v.number} ({v.name})" for v in enum.values)
            failure = InvalidInput(name, str(value), f"must be one of {enum.full_name}: {named}")
            status = to_status(failure)
            status.code = grpc.StatusCode.INVALID_ARGUMENT.value[0]
            return status
    return None


def _lenient(cls: type[Message]) -> Callable[[bytes], Message | Undecodable]:
    full_name = cls.DESCRIPTOR.full_name

    def parse(data: bytes) -> Message | Undecodable:
        try:
            return cls.FromString(data)
        except DecodeError as exc:
            return Undecodable(full_name, len(data), str(exc))
        except Exception as exc:  # whatever else the parser raises: still the caller's bytes, never UNKNOWN
            return Undecodable(full_name, len(data), repr(exc))

    return parse


def _decoded(full: str, behavior: Behavior, in_flight: InFlight) -> Behavior:
    async def handler(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        if isinstance(request, Undecodable):
            status = undecodable(full, request.message_type, request.size)
            await context.abort_with_status(rpc_status.to_status(status))
            raise AssertionError("unreachable: abort_with_status raises")
        task = in_flight.enter()
        try:
            return await behavior(request, context)
        except asyncio.CancelledError:
            if not in_flight.cutting:
                raise
            await in_flight.cut_answer(full, context)
            raise AssertionError("unreachable: abort_with_status raises") from None
        finally:
            in_flight.leave(task)

    return handler


def _decoded_stream(
    full: str, behavior: StreamBehavior, in_flight: InFlight, enums: tuple[str, ...] = ()
) -> StreamBehavior:
    async def handler(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
        if isinstance(request, Undecodable):
            status = undecodable(full, request.message_type, request.size)
            await context.abort_with_status(rpc_status.to_status(status))
            raise AssertionError("unreachable: abort_with_status raises")
        refused = unnamed_enum(request, enums) if enums else None
        if refused is not None:
            await context.abort_with_status(rpc_status.to_status(refused))
            raise AssertionError("unreachable: abort_with_status raises")
        task = in_flight.enter()
        try:
            async for event in behavior(request, context):
                yield event
        except asyncio.CancelledError:
            if not in_flight.cutting:
                raise
            await in_flight.cut_answer(full, context)
            raise AssertionError("unreachable: abort_with_status raises") from None
        finally:
            in_flight.leave(task)

    return handler


def _unwrapped(service: str, method: str, behavior: Behavior) -> Behavior:
    return behavior


def _unwrapped_stream(service: str, method: str, behavior: StreamBehavior) -> StreamBehavior:
    return behavior


def register_sidecar(
    server: grpc.aio.Server,
    servicer: Any,
    wrap: Wrap = _unwrapped,
    wrap_stream: WrapStream = _unwrapped_stream,
    in_flight: InFlight | None = None,
) -> None:
    """Register every method of ``sidecar.v1.Sidecar`` on ``server``, served by ``servicer``; its calls
    held in ``in_flight`` while handled (a shutdown's grace cut)."""
    in_flight = InFlight() if in_flight is None else in_flight
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
    for method in _SERVICE.methods:
        if method.client_streaming:
            raise TypeError(f"{method.full_name} takes a stream: register_sidecar serves no such method")
        request_cls = message_factory.GetMessageClass(method.input_type)
        response_cls = message_factory.GetMessageClass(method.output_type)
        full = f"{SIDECAR_SERVICE_NAME}/{method.name}"
        if method.server_streaming:
            streaming = wrap_stream(SIDECAR_SERVICE_NAME, method.name, getattr(servicer, method.name))
            handlers[method.name] = grpc.unary_stream_rpc_method_handler(
                _decoded_stream(full, streaming, in_flight, CHECKED_ENUMS.get(method.name, ())),
                request_deserializer=_lenient(request_cls),
                response_serializer=response_cls.SerializeToString,
            )
            continue
        behavior = wrap(SIDECAR_SERVICE_NAME, method.name, getattr(servicer, method.name))
        handlers[method.name] = grpc.unary_unary_rpc_method_handler(
            _decoded(full, behavior, in_flight),
            request_deserializer=_lenient(request_cls),
            response_serializer=response_cls.SerializeToString,
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SIDECAR_SERVICE_NAME, handlers),))
    server.add_registered_method_handlers(SIDECAR_SERVICE_NAME, handlers)
