"""The gRPC servicer: each RPC converts its request, delegates to the core, converts the answer.

    ExecuteTool      tools.ToolService.execute    -> OK, a result or a failure for the model
    CallModel        providers.ModelService.call  -> OK with the reply, or the failure as a rich status
    StreamModel      providers.ModelService.stream -> its events, then OK after ``final``; a failure ends
                                                     the stream with CallModel's status (after the events)
    ClassifyFailure  tools.Reports.classify       -> the Failure (kind UNSPECIFIED: none)
    ListTools, ListModels                         -> built once per configuration (per core)

Each RPC reads ``live.core`` once, as it starts (``server.live``): a reload's new core serves the
next call, the call in flight ends on the core it started on.

CallModel, StreamModel and ExecuteTool are first admitted by their caller's own limits
(``server.callers``: the caller the bearer interceptor found; a model call charged its token estimate):
over one, the RPC is refused at once (``refusals.caller_limited``: RESOURCE_EXHAUSTED, RetryInfo).

Spans, metrics and logs are the core's (through its observer); what happens here is only the
contract: ``server.convert`` both ways, ``server.grpc.status`` for a failed CallModel.

The call's overhead stopwatch (``core.overhead``) is ``Arrival``'s, the first interceptor's: it
begins when gRPC handed the RPC to Python (the interceptors and the request's decoding counted) and
is read for the trailer when the whole chain handed its answer back (the servicer's, then the
admission slot's release and the masking of the answer: 0.08 ms at c=1, measured); gRPC's encoding
and write come after. The servicer joins it, and reads it itself for a failure's status.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_status import rpc_status
from sidecar_contract.v1 import sidecar_pb2 as pb
from sidecar_contract.v1 import sidecar_pb2_grpc as pb_grpc

from sidecar.core import overhead
from sidecar.core.clock import Clock
from sidecar.core.conversation import CallOptions, ModelRequest
from sidecar.core.stream import Serving
from sidecar.core.taxonomy import SidecarFailure, as_failure
from sidecar.server import convert
from sidecar.server.callers import CALLER, Callers, model_charge
from sidecar.server.grpc.refusals import caller_limited
from sidecar.server.grpc.status import to_status
from sidecar.server.live import Core, Live

__all__ = ["MEASURED", "Arrival", "SidecarServicer"]

Context = grpc.aio.ServicerContext[Any, Any]


_SERVICE = pb.DESCRIPTOR.services_by_name["Sidecar"].full_name
MEASURED = frozenset(f"/{_SERVICE}/{m}" for m in ("CallModel", "ExecuteTool", "StreamModel"))
"""The RPCs whose answers carry the overhead trailer."""


class Arrival(grpc.aio.ServerInterceptor):
    """The first interceptor: stamps when gRPC handed the RPC to Python (``overhead.arrived``), in the
    RPC's own task; for the measured RPCs, wraps the whole chain (every other interceptor's part of
    the answer, the masking's among them) in the call's stopwatch, begun there, and sets the trailer
    from it when the chain's answer is back (a stream's: after its last event)."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        began = time.perf_counter()
        overhead.arrived(began)
        handler: Any = await continuation(handler_call_details)
        if handler is None or handler_call_details.method not in MEASURED:
            return handler  # type: ignore[no-any-return]
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                _measured(handler.unary_unary, began),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                _measured_stream(handler.unary_stream, began),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler  # type: ignore[no-any-return]


def _trailer(context: Context, watch: overhead.Stopwatch) -> None:
    """The answer's trailing metadata, its overhead entry read now (the rest as the chain set it)."""
    kept = tuple((k, v) for k, v in (context.trailing_metadata() or ()) if k != overhead.HEADER)
    context.set_trailing_metadata((*kept, (overhead.HEADER, watch.milliseconds())))


def _measured(behavior: Callable[[Any, Context], Awaitable[Any]], began: float) -> Callable[[Any, Context], Any]:
    async def measured(request: Any, context: Context) -> Any:
        with overhead.measured("grpc", began=began) as watch:
            answer = await behavior(request, context)
            _trailer(context, watch)
            return answer

    return measured


def _measured_stream(
    behavior: Callable[[Any, Context], AsyncIterator[Any]], began: float
) -> Callable[[Any, Context], AsyncIterator[Any]]:
    async def measured(request: Any, context: Context) -> AsyncIterator[Any]:
        with overhead.measured("grpc", began=began) as watch:
            async for event in behavior(request, context):
                yield event
            _trailer(context, watch)

    return measured


class SidecarServicer(pb_grpc.SidecarServicer):
    def __init__(self, live: Live, clock: Clock, callers: Callers | None = None):
        self._clock = clock
        self._live = live
        self._callers = callers if callers is not None else Callers()
        self._lists: tuple[Core, pb.ListToolsResponse, pb.ListModelsResponse] | None = None

    def _listed(self) -> tuple[pb.ListToolsResponse, pb.ListModelsResponse]:
        """ListTools' and ListModels' answers for the live core (after tools.start(): MCP tools listed)."""
        core, lists = self._live.core, self._lists
        if lists is None or lists[0] is not core:
            lists = self._lists = (core, convert.tool_list(core.tools.catalog()), convert.model_list(core.config))
        return lists[1], lists[2]

    def _options(self, job: pb.Job, context: Context) -> CallOptions:
        return convert.call_options(job, context.time_remaining(), self._clock)

    async def _admit(self, method: str, context: Context, core: Core, request: ModelRequest | None = None) -> None:
        """Return when the caller's own limits admit the call (charged); else abort the RPC with the refusal."""
        caller = CALLER.get()
        if caller is None:  # no server.auth: no caller, no limit
            return
        tokens = model_charge(core.config, request) if request is not None else 0
        refused = await self._callers.admit(caller, method, tokens)
        if refused is not None:
            await context.abort_with_status(rpc_status.to_status(caller_limited(refused)))
            raise AssertionError("unreachable: abort_with_status raises")

    async def ExecuteTool(self, request: pb.ExecuteToolRequest, context: Context) -> pb.ExecuteToolResponse:
        core = self._live.core
        tools = core.tools
        await self._admit("ExecuteTool", context, core)
        with overhead.joined() as watch:
            outcome = await tools.execute(convert.tool_request(request), self._options(request.job, context))
            answer = convert.tool_response(outcome, request.call_id)
            context.set_trailing_metadata(((overhead.HEADER, watch.milliseconds()),))
            return answer

    async def CallModel(self, request: pb.CallModelRequest, context: Context) -> pb.CallModelResponse:
        core = self._live.core
        asked = convert.model_request(request)
        await self._admit("CallModel", context, core, asked)
        with overhead.joined() as watch:
            try:
                response = await core.models.call(asked, self._options(request.job, context))
            except SidecarFailure as failure:  # the call's span has ended: the abort is the RPC's outcome
                await context.abort_with_status(_timed(rpc_status.to_status(to_status(failure)), watch))
                raise AssertionError("unreachable: abort_with_status raises") from None
            answer = convert.model_response(response)
            context.set_trailing_metadata(((overhead.HEADER, watch.milliseconds()),))
            return answer

    async def ClassifyFailure(self, request: pb.ClassifyFailureRequest, context: Context) -> pb.Failure:
        try:
            return convert.report_failure(await self._live.core.reports.classify(convert.report(request)))
        except Exception as exc:  # the one boundary: anything else is SYSTEM (as_failure logs it)
            return convert.failure(as_failure(exc, "failure classification"))

    async def ListTools(self, request: pb.ListToolsRequest, context: Context) -> pb.ListToolsResponse:
        return self._listed()[0]

    async def ListModels(self, request: pb.ListModelsRequest, context: Context) -> pb.ListModelsResponse:
        return self._listed()[1]

    async def StreamModel(self, request: pb.CallModelRequest, context: Context) -> AsyncIterator[pb.StreamModelEvent]:
        # the stopwatch is current across the yields: the producer task shares it
        core = self._live.core
        asked = convert.model_request(request)
        await self._admit("StreamModel", context, core, asked)
        with overhead.joined() as watch:
            events = core.models.stream(asked, self._options(request.job, context))
            try:
                async for event in events:
                    if isinstance(event, Serving):  # gRPC callers read it in Final's response_model
                        continue
                    yield convert.stream_event(event)
                context.set_trailing_metadata(((overhead.HEADER, watch.milliseconds()),))
            except SidecarFailure as failure:  # the call's span has ended: the abort is the RPC's outcome
                await context.abort_with_status(_timed(rpc_status.to_status(to_status(failure)), watch))
                raise AssertionError("unreachable: abort_with_status raises") from None
            finally:
                await events.aclose()  # cancelled or abandoned: the call is cancelled, its upstream closed


@dataclass(frozen=True)
class _Status(grpc.Status):
    code: grpc.StatusCode
    details: str
    trailing_metadata: tuple[tuple[str, str | bytes], ...]


def _timed(status: grpc.Status, watch: overhead.Stopwatch) -> grpc.Status:
    """A failure's status with the overhead in its trailing metadata too."""
    trailing = (*status.trailing_metadata, (overhead.HEADER, watch.milliseconds()))
    return _Status(status.code, status.details, trailing)
