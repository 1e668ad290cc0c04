"""The last step of every RPC answer: configured secrets masked in every string that leaves.

    a response message          every string field, at any depth (maps, repeated, Struct, Any); a
                                stream's (StreamModel) each event, as it goes (a secret written
                                across deltas: ``core.split_secrets``, in the stream's Outlet)
    abort / abort_with_status   the status message, and the google.rpc.Status in
                                ``grpc-status-details-bin`` (its packed Failure, ErrorInfo, ...)
    set_details / trailers      the details string; every text trailer, and the -bin status
    an exception that escapes   answered UNKNOWN with the same words gRPC would write
                                ("Unexpected <class>: <message>"), masked; logged

It is a server interceptor rather than a step inside each servicer method because it is the one
place every answer of every method passes, whatever path built it: a failure, a result, a list,
an exception nothing caught, and methods added later. Only configured secrets are masked here
(``redact.mask_secrets``, every form): a result the agent asked for keeps its content otherwise.
Key shapes and account ids are masked where upstream text enters (``redact.redact_body``).

The health and reflection services carry no configured text and are left alone.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, cast

import grpc
from google.protobuf import any_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.rpc import status_pb2

from sidecar.core.redact import mask_secrets
from sidecar.server.grpc.spans import EXCLUDED_SERVICES, MAX_METHODS

__all__ = ["SecretMaskingInterceptor", "mask_message"]

STATUS_DETAILS_KEY = "grpc-status-details-bin"
_log = logging.getLogger("sidecar.server")

Mask = Callable[[str], str]
Behavior = Callable[[Any, grpc.aio.ServicerContext[Any, Any]], Awaitable[Any]]
StreamBehavior = Callable[[Any, grpc.aio.ServicerContext[Any, Any]], AsyncIterator[Any]]


def mask_message(msg: Message, mask: Mask) -> bool:
    """Mask every string field of ``msg`` in place, at any depth (packed ``Any`` too); whether any changed."""
    if msg.DESCRIPTOR.full_name == "google.protobuf.Any":
        return _mask_any(cast(any_pb2.Any, msg), mask)
    changed = False
    for field, value in msg.ListFields():
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            changed |= _mask_map(field, value, mask)
        elif field.type == FieldDescriptor.TYPE_STRING and field.is_repeated:
            for i, text in enumerate(value):
                if (masked := mask(text)) != text:
                    value[i], changed = masked, True
        elif field.type == FieldDescriptor.TYPE_STRING:
            if (masked := mask(value)) != value:
                setattr(msg, field.name, masked)
                changed = True
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            for item in value if field.is_repeated else (value,):
                changed |= mask_message(item, mask)
    return changed


def _mask_map(field: FieldDescriptor, value: Any, mask: Mask) -> bool:
    entry = field.message_type
    assert entry is not None
    text_keys = entry.fields_by_name["key"].type == FieldDescriptor.TYPE_STRING
    kind = entry.fields_by_name["value"].type
    changed = False
    for key in list(value):
        if kind == FieldDescriptor.TYPE_MESSAGE:
            changed |= mask_message(value[key], mask)
        elif kind == FieldDescriptor.TYPE_STRING and (masked := mask(value[key])) != value[key]:
            value[key], changed = masked, True
        if text_keys and (new_key := mask(key)) != key:
            if kind == FieldDescriptor.TYPE_MESSAGE:
                value[new_key].CopyFrom(value[key])
            else:
                value[new_key] = value[key]
            del value[key]
            changed = True
    return changed


def _mask_any(packed: any_pb2.Any, mask: Mask) -> bool:
    prefix, _, name = packed.type_url.rpartition("/")
    try:
        descriptor = descriptor_pool.Default().FindMessageTypeByName(name)
    except KeyError:  # a type this process does not know: it cannot hold text we wrote
        return False
    inner = message_factory.GetMessageClass(descriptor)()
    packed.Unpack(inner)
    if not mask_message(inner, mask):
        return False
    packed.Pack(inner, type_url_prefix=prefix)
    return True


@dataclass(frozen=True, slots=True)
class _MaskedStatus(grpc.Status):
    """A grpc.Status with its details and trailers masked."""

    code: grpc.StatusCode
    details: str
    trailing_metadata: tuple[tuple[str, str | bytes], ...]


class _MaskingContext:
    """The servicer's context, with every text it sends masked; everything else passed through."""

    def __init__(self, context: grpc.aio.ServicerContext[Any, Any], mask: Mask) -> None:
        self._context = context
        self._mask = mask

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)

    def _metadata(self, metadata: Sequence[tuple[str, str | bytes]] | None) -> tuple[tuple[str, str | bytes], ...]:
        out: list[tuple[str, str | bytes]] = []
        for key, value in metadata or ():
            if isinstance(value, str):
                out.append((key, self._mask(value)))
            elif key == STATUS_DETAILS_KEY:
                status = status_pb2.Status.FromString(value)
                out.append((key, status.SerializeToString() if mask_message(status, self._mask) else value))
            else:
                out.append((key, value))
        return tuple(out)

    async def abort(
        self, code: grpc.StatusCode, details: str = "", trailing_metadata: Sequence[tuple[str, str | bytes]] = ()
    ) -> NoReturn:
        await self._context.abort(code, self._mask(details), self._metadata(trailing_metadata))
        raise AssertionError("unreachable: abort raises")

    async def abort_with_status(self, status: grpc.Status) -> NoReturn:
        masked = _MaskedStatus(status.code, self._mask(status.details or ""), self._metadata(status.trailing_metadata))
        await self._context.abort_with_status(masked)
        raise AssertionError("unreachable: abort_with_status raises")

    def set_details(self, details: str) -> None:
        self._context.set_details(self._mask(details))

    def set_trailing_metadata(self, trailing_metadata: Sequence[tuple[str, str | bytes]]) -> None:
        self._context.set_trailing_metadata(self._metadata(trailing_metadata))


class SecretMaskingInterceptor(grpc.aio.ServerInterceptor):
    """Masks ``secrets`` (every form) in each answer: response (each event of a stream), status, details,
    trailers."""

    def __init__(self, secrets: Iterable[str], excluded: Iterable[str] = EXCLUDED_SERVICES) -> None:
        self._secrets = tuple(secrets)
        self._excluded = frozenset(excluded)
        self._wrapped: dict[str, tuple[Any, Any]] = {}  # method -> (its handler, that handler masked)

    def mask(self, text: str) -> str:
        return mask_secrets(text, self._secrets)

    def update(self, secrets: Iterable[str]) -> None:
        """Mask these from now on (a reload's config: every secret any config named)."""
        self._secrets = tuple(secrets)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler: Any = await continuation(handler_call_details)
        if handler is None or not self._secrets:
            return handler  # type: ignore[no-any-return]
        method = handler_call_details.method or ""
        known = self._wrapped.get(method)
        if known is not None and known[0] is handler:
            return known[1]  # type: ignore[no-any-return]
        wrapped = self._wrapped_handler(method, handler)
        if len(self._wrapped) < MAX_METHODS:
            self._wrapped[method] = (handler, wrapped)
        return wrapped  # type: ignore[no-any-return]

    def _wrapped_handler(self, method: str, handler: Any) -> Any:
        """``handler`` with its answers masked (built once per method, then reused: ``mask`` reads the
        secrets of the moment)."""
        service = method.lstrip("/").partition("/")[0]
        if service in self._excluded:
            return handler
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._wrap(handler.unary_unary),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._wrap_stream(handler.unary_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler

    def _wrap(self, behavior: Behavior) -> Behavior:
        mask = self.mask

        async def masked(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            proxy = cast(grpc.aio.ServicerContext[Any, Any], _MaskingContext(context, mask))
            try:
                response = await behavior(request, proxy)
            except grpc.aio.AbortError:
                raise
            except Exception as exc:  # nothing caught it: answer as gRPC would, without the secret
                _log.exception("unexpected %s answering an RPC", type(exc).__name__)
                await context.abort(grpc.StatusCode.UNKNOWN, mask(f"Unexpected {type(exc)}: {exc}"))
                raise AssertionError("unreachable: abort raises") from None
            if isinstance(response, Message):
                mask_message(response, mask)
            return response

        return masked

    def _wrap_stream(self, behavior: StreamBehavior) -> StreamBehavior:
        mask = self.mask

        async def masked(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
            proxy = cast(grpc.aio.ServicerContext[Any, Any], _MaskingContext(context, mask))
            try:
                async for response in behavior(request, proxy):
                    if isinstance(response, Message):
                        mask_message(response, mask)
                    yield response
            except grpc.aio.AbortError:
                raise
            except Exception as exc:  # nothing caught it: answer as gRPC would, without the secret
                _log.exception("unexpected %s answering an RPC", type(exc).__name__)
                await context.abort(grpc.StatusCode.UNKNOWN, mask(f"Unexpected {type(exc)}: {exc}"))
                raise AssertionError("unreachable: abort raises") from None

        return masked
