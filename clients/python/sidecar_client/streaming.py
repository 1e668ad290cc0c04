"""StreamModel replies as iterators: ``ModelStream`` (blocking) and ``AsyncModelStream`` (asyncio).

    async with client.stream_model("fast", [user("hi")]) as stream:   # exit cancels the RPC
        async for event in stream:              # pb.StreamModelEvent, as the sidecar sent it
            ...
    reply = await client.stream_model("fast", [user("hi")]).collect()   # the final CallModelResponse

What the stream keeps while it is read, and what each event does to it:

    event       text / tool_calls / reasoning            restarts    continuations    final
    text        text += delta                            -           -                -
    tool_call   tool_calls[index] grows by the piece     -           -                -
    reasoning   reasoning[index]: text += delta; its     -           -                -
                signature / redacted data when they come
    restart     all emptied: what came before is void    += 1        -                -
    continued   kept: the deltas that follow continue it -           the event added  -
    final       -                                        -           -                the whole reply

To pass the reasoning back on the next turn, append ``assistant(stream.final)``: the final reply's
reasoning is the same, with the wire format that made it.

A failure ends the iteration with the ``SidecarError`` subclass CallModel raises for its kind,
after every event sent before it; ``STREAM_INTERRUPTED`` (``StreamInterruptedError``) carries the
partial text.

Cancelling: ``cancel()``, leaving the stream's ``with`` block (the idiom: certain in any Python),
cancelling the task that awaits it, or leaving a ``for`` / ``async for`` loop over it before its end
(``break``, ``return``, an exception) cancels the RPC; a read after that raises ``JobCancelledError``.
A loop owns the cancellation because Python gives a loop no hook on ``break``: each loop iterates a
``_Loop`` of its own, which only the loop holds, so CPython frees it, and it cancels the RPC, as the
loop is left, even while the caller still holds the stream (to read ``text`` after the loop). A
stream dropped unfinished (read with ``__anext__`` / ``next``, never looped) cancels when it is freed.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

import grpc
from google.rpc import status_pb2
from sidecar_contract.v1 import sidecar_pb2 as pb

from sidecar_client.errors import _explain, from_failure, from_rpc_error, from_status

__all__ = ["AsyncModelStream", "ModelStream", "StreamAccumulator"]

NO_FINAL_MESSAGE = "The StreamModel stream ended without its final event."
CANCELLED_MESSAGE = "Cancelled on client"

AsyncStreamCall = grpc.aio.UnaryStreamCall[pb.CallModelRequest, pb.StreamModelEvent]


class SyncStreamCall(Protocol):
    """What a blocking stub's server-streaming call is: an iterator that can be cancelled."""

    def __next__(self) -> pb.StreamModelEvent: ...

    def cancel(self) -> bool: ...


class StreamAccumulator:
    """The reply so far: text, tool calls and reasoning since the last restart, the restarts, the final reply."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._tool_calls: dict[int, pb.ToolCall] = {}
        self._reasoning: dict[int, pb.ReasoningPart] = {}
        self.restarts = 0
        self.continuations: list[pb.StreamContinued] = []
        """The stream broke and went on from the text held (``MID_STREAM_POLICY_CONTINUE``): each time why."""
        self.final: pb.CallModelResponse | None = None

    @property
    def text(self) -> str:
        """The text deltas since the last restart, joined."""
        return "".join(self._text)

    @property
    def tool_calls(self) -> list[pb.ToolCall]:
        """The tool calls assembled from their fragments since the last restart, by index."""
        return [self._tool_calls[i] for i in sorted(self._tool_calls)]

    @property
    def reasoning(self) -> list[pb.ReasoningPart]:
        """The reasoning parts assembled from their deltas since the last restart, by index."""
        return [self._reasoning[i] for i in sorted(self._reasoning)]

    def absorb(self, event: pb.StreamModelEvent) -> None:
        which = event.WhichOneof("event")
        if which == "text":
            self._text.append(event.text.text)
        elif which == "tool_call":
            delta = event.tool_call
            call = self._tool_calls.setdefault(delta.index, pb.ToolCall())
            call.id = call.id or delta.id
            call.name = call.name or delta.name
            call.arguments_json += delta.arguments_fragment
        elif which == "reasoning":
            piece = event.reasoning
            part = self._reasoning.setdefault(piece.index, pb.ReasoningPart())
            part.text += piece.text
            if piece.signature:
                part.signature = piece.signature
            if piece.redacted_data:
                part.redacted_data = piece.redacted_data
        elif which == "restart":
            self._text.clear()
            self._tool_calls.clear()
            self._reasoning.clear()
            self.restarts += 1
        elif which == "continued":
            self.continuations.append(event.continued)
        elif which == "final":
            self.final = event.final

    def result(self) -> pb.CallModelResponse:
        """The final reply; a SystemFailureError when the stream ended without one."""
        if self.final is None:
            failure = pb.Failure(
                kind=pb.FAILURE_KIND_SYSTEM,
                message=NO_FINAL_MESSAGE,
                explanation=_explain(NO_FINAL_MESSAGE, correctable=False),
            )
            raise from_failure(failure, grpc.StatusCode.OK)
        return self.final


class _Loop:
    """One ``for`` loop over a ``ModelStream``: left before the stream's end, it cancels the RPC."""

    __slots__ = ("_stream",)

    def __init__(self, stream: ModelStream) -> None:
        self._stream = stream

    def __iter__(self) -> _Loop:
        return self

    def __next__(self) -> pb.StreamModelEvent:
        return next(self._stream)

    def __del__(self) -> None:
        # The loop was left (its only reference dropped): the RPC is cancelled unless it has ended.
        self._stream.cancel()


class _AsyncLoop:
    """One ``async for`` loop over an ``AsyncModelStream``: left before the stream's end, it cancels the RPC."""

    __slots__ = ("_stream",)

    def __init__(self, stream: AsyncModelStream) -> None:
        self._stream = stream

    def __aiter__(self) -> _AsyncLoop:
        return self

    async def __anext__(self) -> pb.StreamModelEvent:
        return await self._stream.__anext__()

    def __del__(self) -> None:
        # The loop was left (its only reference dropped): the RPC is cancelled unless it has ended.
        self._stream._cancel_unfinished()


class ModelStream(StreamAccumulator):
    """A StreamModel call, read as a blocking iterator of ``pb.StreamModelEvent``."""

    def __init__(self, call: SyncStreamCall) -> None:
        super().__init__()
        self._call = call

    def __iter__(self) -> _Loop:
        """A loop of its own over the rest of the stream (leaving it early cancels the RPC)."""
        return _Loop(self)

    def __next__(self) -> pb.StreamModelEvent:
        try:
            event: pb.StreamModelEvent = next(self._call)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from exc
        self.absorb(event)
        return event

    def __enter__(self) -> ModelStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()

    def __del__(self) -> None:
        # Dropped unfinished (a ``break`` out of the loop): the RPC is cancelled, not left running.
        if getattr(self, "_call", None) is not None:
            self._call.cancel()

    def cancel(self) -> bool:
        """Cancels the RPC; False when it had already ended."""
        return bool(self._call.cancel())

    def collect(self) -> pb.CallModelResponse:
        """Reads the rest of the stream and returns the final reply (``text`` holds its text)."""
        for _ in self:
            pass
        return self.result()


class AsyncModelStream(StreamAccumulator):
    """A StreamModel call, read as an async iterator of ``pb.StreamModelEvent``."""

    def __init__(self, call: AsyncStreamCall) -> None:
        super().__init__()
        self._call = call
        self._cancelled = False

    def __aiter__(self) -> _AsyncLoop:
        """A loop of its own over the rest of the stream (leaving it early cancels the RPC)."""
        return _AsyncLoop(self)

    async def __anext__(self) -> pb.StreamModelEvent:
        try:
            event = await self._call.read()
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc) from exc
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if self._cancelled and (task is None or not task.cancelling()):
                # Our cancel(), not the task's: a read ends as the other clients' do, JOB_CANCELLED.
                status = status_pb2.Status(code=grpc.StatusCode.CANCELLED.value[0], message=CANCELLED_MESSAGE)
                raise from_status(status, grpc.StatusCode.CANCELLED) from None
            raise
        if not isinstance(event, pb.StreamModelEvent):  # grpc.aio.EOF: the stream ended OK
            raise StopAsyncIteration
        self.absorb(event)
        return event

    async def __aenter__(self) -> AsyncModelStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()

    def __del__(self) -> None:
        # Dropped unfinished (read with __anext__, never looped): the RPC is cancelled at once. The
        # grpc.aio call would cancel itself only when the cycle collector frees it, much later.
        if getattr(self, "_call", None) is not None:
            self._cancel_unfinished()

    def _cancel_unfinished(self) -> None:
        if not self._call.done():
            self.cancel()

    def cancel(self) -> bool:
        """Cancels the RPC (a read still pending raises JobCancelledError); False when it had ended."""
        self._cancelled = True
        return bool(self._call.cancel())

    async def collect(self) -> pb.CallModelResponse:
        """Reads the rest of the stream and returns the final reply (``text`` holds its text)."""
        async for _ in self:
            pass
        return self.result()
