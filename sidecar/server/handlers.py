"""The Sidecar service registered from its generated descriptor, with decoding that cannot raise.

The generated ``add_SidecarServicer_to_server`` registers ``XRequest.FromString`` as each method's
deserializer: bytes that do not parse raise inside gRPC, and the caller gets UNKNOWN before any
of our code runs. Here every method of ``sidecar.v1.Sidecar`` (read from the descriptor, so a new
method needs no edit here) is registered with:

    deserializer   XRequest.FromString, or an ``Undecodable`` holding what failed (never raises)
    handler        Undecodable -> INVALID_ARGUMENT "could not be decoded as sidecar.v1.XRequest"
                   (refusals.undecodable), before any other work; else ``wrap``'s behaviour
    serializer     XResponse.SerializeToString

``wrap(service, method, behaviour)`` puts a policy around one method (the in-flight limit).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import message_factory
from google.protobuf.message import DecodeError, Message
from grpc_status import rpc_status
from sidecar_contract.v1 import sidecar_pb2 as pb

from sidecar.server.admission import Behavior
from sidecar.server.refusals import undecodable

__all__ = ["SIDECAR_SERVICE_NAME", "Undecodable", "register_sidecar"]

_SERVICE = pb.DESCRIPTOR.services_by_name["Sidecar"]
SIDECAR_SERVICE_NAME: str = _SERVICE.full_name
Wrap = Callable[[str, str, Behavior], Behavior]


@dataclass(frozen=True, slots=True)
class Undecodable:
    """Request bytes that are not a serialized ``message_type``."""

    message_type: str
    size: int
    error: str


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


def _decoded(full: str, behavior: Behavior) -> Behavior:
    async def handler(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        if isinstance(request, Undecodable):
            status = undecodable(full, request.message_type, request.size)
            await context.abort_with_status(rpc_status.to_status(status))
            raise AssertionError("unreachable: abort_with_status raises")
        return await behavior(request, context)

    return handler


def _unwrapped(service: str, method: str, behavior: Behavior) -> Behavior:
    return behavior


def register_sidecar(server: grpc.aio.Server, servicer: Any, wrap: Wrap = _unwrapped) -> None:
    """Register every method of ``sidecar.v1.Sidecar`` on ``server``, served by ``servicer``."""
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
    for method in _SERVICE.methods:
        if method.client_streaming or method.server_streaming:
            raise TypeError(f"{method.full_name} streams: register_sidecar serves unary methods only")
        request_cls = message_factory.GetMessageClass(method.input_type)
        response_cls = message_factory.GetMessageClass(method.output_type)
        behavior = wrap(SIDECAR_SERVICE_NAME, method.name, getattr(servicer, method.name))
        handlers[method.name] = grpc.unary_unary_rpc_method_handler(
            _decoded(f"{SIDECAR_SERVICE_NAME}/{method.name}", behavior),
            request_deserializer=_lenient(request_cls),
            response_serializer=response_cls.SerializeToString,
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SIDECAR_SERVICE_NAME, handlers),))
    server.add_registered_method_handlers(SIDECAR_SERVICE_NAME, handlers)
