"""Every service of the gRPC port registered from its descriptor, with decoding that cannot raise.

A generated ``add_XServicer_to_server`` (ours, grpc_health's, grpc_reflection's) registers
``XRequest.FromString`` as each method's deserializer: bytes that do not parse raise inside gRPC,
and the caller gets UNKNOWN naming the exception class before any of our code runs, while gRPC
logs a traceback for the call (a log any caller could flood: health asks for no token). Here
every method of a service (read from the descriptor, so a new method needs no edit here) is
registered with:

    deserializer   XRequest.FromString, or an ``Undecodable`` holding what failed (never raises);
                   for a request stream (reflection), each message so
    handler        Undecodable -> INVALID_ARGUMENT "could not be decoded as <package>.XRequest"
                   (refusals.undecodable), before any other work; else ``wrap``'s behaviour
                   (unary methods), or ``wrap_stream``'s (server-streaming methods: StreamModel)
    serializer     XResponse.SerializeToString

``register_service`` serves sidecar.v1.Admin (before its token check: the bytes are not read as
anything), grpc.health.v1.Health and reflection so (``app.py``); ``register_sidecar`` serves
sidecar.v1.Sidecar with the in-flight limit (``wrap``), the grace cut and the enum checks below.

A streaming answer's behaviour is an async generator whatever the servicer wrote, because each
interceptor of the port iterates a stream's behaviour: one written to gRPC's writer API
(grpc_health's Watch: ``context.write``, returns None) runs inside a generator that yields
nothing. A request stream reaches its servicer as an async iterator that answers INVALID_ARGUMENT
at the first message that does not decode.

The enum fields of ``CHECKED_ENUMS`` are checked too: proto3 enums are open, so a number the
contract does not name (StreamModel's ``mid_stream`` 4, 99 or -1) decodes without complaint and
would be read as the default; it is INVALID_ARGUMENT (INVALID_INPUT naming the field and the
values it may take), before any other work.

Every Sidecar call is held in ``InFlight`` while it is handled: a shutdown whose grace period ends
with calls still in flight ``cut``s them, and each ends UNAVAILABLE with a Failure saying the
sidecar is shutting down (``shutting_down``: UPSTREAM_THROTTLE, service ``sidecar``, RetryInfo),
logged as such, instead of gRPC's bare ``UNAVAILABLE "Cancelling all calls"``.

``wrap(service, method, behaviour)`` puts a policy around one method (the in-flight limit). A
client-streaming method gets decoding only: the Sidecar contract has none.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.message import DecodeError, Message
from google.rpc import status_pb2
from grpc_status import rpc_status
from sidecar_contract.v1 import sidecar_pb2 as pb

from sidecar.core.details import ServiceDetail
from sidecar.core.taxonomy import InvalidInput, SidecarFailure, UpstreamThrottle
from sidecar.core.uncorrectable_failures import SHUTTING_DOWN
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
    "register_service",
    "register_sidecar",
    "shutting_down",
    "unnamed_enum",
]

_SERVICE = pb.DESCRIPTOR.services_by_name["Sidecar"]
SIDECAR_SERVICE_NAME: str = _SERVICE.full_name
Wrap = Callable[[str, str, Behavior], Behavior]
WrapStream = Callable[[str, str, StreamBehavior], StreamBehavior]
Context = grpc.aio.ServicerContext[Any, Any]


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


async def _refuse_undecodable(full: str, request: Undecodable, context: Context) -> NoReturn:
    status = undecodable(full, request.message_type, request.size)
    await context.abort_with_status(rpc_status.to_status(status))
    raise AssertionError("unreachable: abort_with_status raises")


def _decoded(full: str, behavior: Behavior, in_flight: InFlight | None) -> Behavior:
    async def handler(request: Any, context: Context) -> Any:
        if isinstance(request, Undecodable):
            await _refuse_undecodable(full, request, context)
        if in_flight is None:
            return await behavior(request, context)
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
    full: str, behavior: StreamBehavior, in_flight: InFlight | None, enums: tuple[str, ...] = ()
) -> StreamBehavior:
    async def handler(request: Any, context: Context) -> AsyncIterator[Any]:
        if isinstance(request, Undecodable):
            await _refuse_undecodable(full, request, context)
        refused = unnamed_enum(request, enums) if enums else None
        if refused is not None:
            await context.abort_with_status(rpc_status.to_status(refused))
            raise AssertionError("unreachable: abort_with_status raises")
        task = in_flight.enter() if in_flight is not None else None
        try:
            async for event in behavior(request, context):
                yield event
        except asyncio.CancelledError:
            if in_flight is None or not in_flight.cutting:
                raise
            await in_flight.cut_answer(full, context)
            raise AssertionError("unreachable: abort_with_status raises") from None
        finally:
            if in_flight is not None:
                in_flight.leave(task)

    return handler


async def _checked(full: str, requests: AsyncIterator[Any], context: Context) -> AsyncIterator[Any]:
    """A request stream's messages; INVALID_ARGUMENT at the first that does not decode."""
    async for request in requests:
        if isinstance(request, Undecodable):
            await _refuse_undecodable(full, request, context)
        yield request


def _streamed(behavior: Callable[[Any, Context], Any]) -> StreamBehavior:
    """``behavior`` as an async generator: itself when it is one; else (gRPC's writer API: it sends
    each answer with ``context.write`` and returns None) run inside one that yields nothing."""
    if inspect.isasyncgenfunction(behavior):
        return behavior

    async def written(request: Any, context: Context) -> AsyncIterator[Any]:
        await behavior(request, context)
        return
        yield  # never reached: the yield makes this an async generator

    return written


def _unwrapped(service: str, method: str, behavior: Behavior) -> Behavior:
    return behavior


def _unwrapped_stream(service: str, method: str, behavior: StreamBehavior) -> StreamBehavior:
    return behavior


def _handler(
    method: MethodDescriptor,
    servicer: Any,
    wrap: Wrap,
    wrap_stream: WrapStream,
    in_flight: InFlight | None,
    enums: tuple[str, ...],
) -> grpc.RpcMethodHandler[Any, Any]:
    service = method.containing_service.full_name
    full = f"{service}/{method.name}"
    behavior = getattr(servicer, method.name)
    parse = _lenient(message_factory.GetMessageClass(method.input_type))
    serialize = message_factory.GetMessageClass(method.output_type).SerializeToString
    if method.client_streaming and method.server_streaming:
        streamed = _streamed(behavior)

        async def each_checked_stream(requests: AsyncIterator[Any], context: Context) -> AsyncIterator[Any]:
            async for event in streamed(_checked(full, requests, context), context):
                yield event

        return grpc.stream_stream_rpc_method_handler(each_checked_stream, parse, serialize)
    if method.client_streaming:

        async def each_checked(requests: AsyncIterator[Any], context: Context) -> Any:
            return await behavior(_checked(full, requests, context), context)

        return grpc.stream_unary_rpc_method_handler(each_checked, parse, serialize)
    if method.server_streaming:
        streaming = wrap_stream(service, method.name, _streamed(behavior))
        return grpc.unary_stream_rpc_method_handler(
            _decoded_stream(full, streaming, in_flight, enums), parse, serialize
        )
    unary: Behavior = wrap(service, method.name, behavior)
    return grpc.unary_unary_rpc_method_handler(_decoded(full, unary, in_flight), parse, serialize)


def register_service(
    server: grpc.aio.Server,
    service: ServiceDescriptor,
    servicer: Any,
    *,
    wrap: Wrap = _unwrapped,
    wrap_stream: WrapStream = _unwrapped_stream,
    in_flight: InFlight | None = None,
    checked_enums: Mapping[str, tuple[str, ...]] | None = None,
) -> None:
    """Register every method of ``service`` on ``server``, served by ``servicer``'s method of its name,
    with decoding that cannot raise; its unary and server-streaming calls under ``wrap`` /
    ``wrap_stream``, held in ``in_flight`` while handled (none: not held), their ``checked_enums``
    (by method name) checked."""
    enums = checked_enums or {}
    handlers = {
        method.name: _handler(method, servicer, wrap, wrap_stream, in_flight, enums.get(method.name, ()))
        for method in service.methods
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    server.add_registered_method_handlers(service.full_name, handlers)


def register_sidecar(
    server: grpc.aio.Server,
    servicer: Any,
    wrap: Wrap = _unwrapped,
    wrap_stream: WrapStream = _unwrapped_stream,
    in_flight: InFlight | None = None,
) -> None:
    """Register every method of ``sidecar.v1.Sidecar`` on ``server``, served by ``servicer``; its calls
    held in ``in_flight`` while handled (a shutdown's grace cut), its ``CHECKED_ENUMS`` checked."""
    for method in _SERVICE.methods:
        if method.client_streaming:  # it would get neither the in-flight limit nor the grace cut
            raise TypeError(f"{method.full_name} takes a stream: register_sidecar serves no such method")
    register_service(
        server,
        _SERVICE,
        servicer,
        wrap=wrap,
        wrap_stream=wrap_stream,
        in_flight=InFlight() if in_flight is None else in_flight,
        checked_enums=CHECKED_ENUMS,
    )
