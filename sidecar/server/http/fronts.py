"""The model doors of the HTTP port (OpenAI- and Anthropic-compatible): one exchange, whatever the format.

    step               what the door does                                       refused with
    the body           read up to server.max_message_bytes, a JSON object        413 past it; 400 (INVALID_INPUT)
    the request        the format's ``Front.parse`` -> the core's ModelRequest,  400 naming the field
                       and what the format asks of the answer (stream, usage)
    the headers        the sidecar's envelope (``envelope.py``): the Job, the    400 for a bad value
                       deadline, the budget override, the mid-stream policy,
                       the overflow policy (compaction);
                       traceparent / tracestate                  -> the SERVER span's parent
    the caller's       its requests_per_second and tokens_per_minute             429, Retry-After (failures.py)
      limits           (server.callers: the caller Access found; charged the
                       input estimate + the output budget)
    admission          server.max_in_flight, one limit for every door            shed / draining (failures.py)
    the call           ModelService.call, or .stream for "stream": true          the failure table (failures.py);
                                                                                 a parameter in the caller's
                                                                                 names (params.py)
    the caller leaves  the call is cancelled (JOB_CANCELLED), its upstream closed, its slot given back
    a re-sent failure  the same caller's same request inside the failure's window: its answer again,
                       with no call (``resends.py``)
    every answer       x-sidecar-attempts; the configured secrets masked in every string

Each door is one ``ModelEndpoint`` over one format's front half (``providers.formats``): the
format reads the request and renders every answer; this module is the exchange around it.

A streamed answer starts (status 200, the SSE head) only when the call's first event is there, so
that a failure before any delta (most of them: quota, rate limits outlasting the budget, an unknown
model) is answered with its HTTP status like a whole call's, and read as the SDK's exception
class. After that a failure is the format's in-stream error event. The head carries no
``x-sidecar-attempts`` (the attempts are not known yet): the last event's ``sidecar`` field does.

A restart (``core.stream.Restart``) has no equivalent in either format: a client cannot take
back what it was sent. So the fronts ask the core for ``mid_stream: continue`` unless the caller
sends ``x-sidecar-mid-stream`` (``fail`` or ``restart``): a stream broken after text is continued
from that text by a deployment that accepts a prefill (the client reads one continuous reply; a
``Continued`` has no event of its own, the last event's ``sidecar.continued`` lists them), else it
ends with STREAM_INTERRUPTED. A restart the core still makes (a truncated reply re-run,
a correction) after deltas went out ends the stream with STREAM_INTERRUPTED in the format's error
event, the partial text in the failure. With ``x-sidecar-mid-stream: restart`` the caller gets
the restart as a sidecar extension event instead (``StreamWriter.restart``) and must drop what it
holds, as a gRPC StreamModel caller does.

One SERVER span per exchange, ``POST /v1/chat/completions`` (``http.request.method``,
``http.route``, ``http.response.status_code``, ``error.type`` the status for a 5xx, or the
failure's kind for a stream that failed after its head), its parent the caller's trace context;
the core's ``chat {model}`` span and its attempts are its children.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.trace import INVALID_SPAN, Span, Status, StatusCode
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from sidecar.core.clock import Clock
from sidecar.core.conversation import CallOptions, ModelResponse
from sidecar.core.stream import (
    Continued,
    Final,
    ReasoningDelta,
    Restart,
    Serving,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
)
from sidecar.core.taxonomy import SidecarFailure, StreamInterrupted, SystemFailure
from sidecar.providers.formats.chat import ChatReply, compact_json
from sidecar.providers.formats.protocol import Ask, Front, ReplyHead, Sse, StreamWriter
from sidecar.server.admission import Admission
from sidecar.server.callers import SCOPE_KEY, Callers, model_charge
from sidecar.server.http.bodies import TooLarge, bounded_body
from sidecar.server.http.compaction import compaction_json
from sidecar.server.http.envelope import (
    ATTEMPTS_HEADER,
    MID_STREAM_HEADER,
    call_options,
    job_of,
    mid_stream_of,
    on_overflow_of,
)
from sidecar.server.http.failures import answer_of, error_of, failure_headers, hop_json
from sidecar.server.http.json_bodies import check_unicode, json_bytes, json_object, json_text, mask_tree, too_large
from sidecar.server.http.params import callers_failure
from sidecar.server.http.resends import Resend, Resends
from sidecar.server.http.tracing import start_server_span
from sidecar.server.live import Live
from sidecar.telemetry import names as n

__all__ = ["ModelEndpoint", "chat_reply", "check_unicode", "json_bytes", "json_text", "reply_extension", "served_model"]

CANCELLED_STATUS = 499
"""Recorded on the span of an exchange whose caller left (nobody reads the answer)."""
JSON_MEDIA = "application/json"
SSE_MEDIA = "text/event-stream"


def reply_extension(response: ModelResponse) -> dict[str, Any]:
    """The ``sidecar`` field of a reply: what the sidecar did for it."""
    out: dict[str, Any] = {
        "attempts": response.attempts,
        "corrections": response.corrections,
        "output_budget_raised": response.output_budget_raised,
        "served_by": response.served_by,
        "provider": response.provider,
        "response_model": response.response_model,
        "total_usage": {
            "input_tokens": response.total_usage.input_tokens,
            "output_tokens": response.total_usage.output_tokens,
        },
        "cost_usd": response.cost_usd,
    }
    if response.warnings:
        out["warnings"] = list(response.warnings)
    if response.hops:
        out["hops"] = [hop_json(h) for h in response.hops]
    if response.compaction is not None:
        out["compaction"] = compaction_json(response.compaction)
    if response.continuations:
        out["continued"] = [
            {"attempt": c.attempt, "cause": c.cause, "reason": c.reason, "chars_delivered": c.chars}
            for c in response.continuations
        ]
    return out


def served_model(response: ModelResponse, asked: str) -> str:
    """A reply's ``model``: the model that served it as its provider reported it (after a route's
    failover, the deployment that answered), as the providers' APIs say; the id asked for when the
    provider named none. The route id, the deployment and the hops are in the ``sidecar`` field."""
    return response.response_model or asked


def chat_reply(response: ModelResponse) -> ChatReply:
    """A call's reply as a format renders it: the parsed object as compact JSON when a schema was asked."""
    text = compact_json(response.parsed) if response.parsed is not None else response.message.text
    return ChatReply(
        text=text,
        tool_calls=list(response.message.tool_calls),
        finish=response.finish_reason,
        raw_finish=response.raw_finish,
        input_tokens=response.usage.input_tokens,
        output_tokens=response.usage.output_tokens,
        response_model=response.response_model,
        response_id=response.response_id,
        reasoning=list(response.message.reasoning),
        cache_read_input_tokens=response.usage.cache_read_input_tokens,
        cache_write_input_tokens=response.usage.cache_write_input_tokens,
        reasoning_tokens=response.usage.reasoning_tokens,
    )


# ---------------------------------------------------------------------------- reading the request


# ---------------------------------------------------------------------------- one exchange


@dataclass
class _Exchange:
    """What one request holds until its answer is sent: its span, its slot, its stream."""

    span: Span = INVALID_SPAN
    admitted: bool = False
    status: int = 0
    error_type: str = ""
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    def answered(self, status: int) -> None:
        self.status = status
        if status >= 500 and not self.error_type:
            self.error_type = str(status)


async def _until_gone(receive: Receive) -> None:
    """Returns when the caller has gone (``http.disconnect``); the body must have been read."""
    while (await receive())["type"] != "http.disconnect":
        pass


class _Gone(Exception):
    """The caller left before the answer was ready."""


async def _unless_gone(work: Awaitable[Any], receive: Receive) -> Any:
    """``work``'s result, or ``_Gone`` (``work`` cancelled) when the caller leaves first."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_until_gone(receive))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # the exchange itself is cancelled (the port stops): so is the work
        gone.cancel()
        task.cancel()
        raise
    gone.cancel()
    if not task.done():
        task.cancel()
        await asyncio.wait([task])  # the call ended (JOB_CANCELLED), its upstream closed
        raise _Gone
    return task.result()


class ModelEndpoint:
    """One format's front (``POST /v1/chat/completions``, ``POST /v1/messages``) as an ASGI app."""

    def __init__(
        self,
        front: Front,
        live: Live,
        admission: Admission,
        clock: Clock,
        max_body_bytes: int,
        resends: Resends | None = None,
        callers: Callers | None = None,
    ) -> None:
        self._front = front
        self._route = route = front.path
        self._live = live
        self._admission = admission
        self._clock = clock
        self._limit = max_body_bytes
        self._method = f"POST {route}"
        self._resends = resends if resends is not None else Resends(clock)
        self._callers = callers if callers is not None else Callers()

    @property
    def _secrets(self) -> tuple[str, ...]:
        """Every secret a config of this process named (a reload may add some)."""
        return self._live.secrets

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        attributes = {n.HTTP_METHOD: "POST", n.HTTP_ROUTE: self._route}
        span, context = start_server_span(
            n.SPAN_HTTP_SERVER.format(method="POST", route=self._route), request.headers, attributes
        )
        exchange = _Exchange(span)
        token = otel_context.attach(context)  # the core's spans (and a stream's producer task) are its children
        try:
            response = await self._answer(request, exchange)
            await response(scope, receive, send)
        except (_Gone, ClientDisconnect, OSError):
            exchange.answered(CANCELLED_STATUS)
        finally:
            otel_context.detach(token)
            await self._close(exchange)

    async def _close(self, exchange: _Exchange) -> None:
        try:
            for close in reversed(exchange.closers):
                await close()
        finally:
            if exchange.admitted:
                self._admission.leave()
            span = exchange.span
            if span.is_recording():
                span.set_attribute(n.HTTP_STATUS, exchange.status)
                if exchange.error_type:
                    span.set_attribute(n.ERROR_TYPE, exchange.error_type)
                if exchange.status >= 500:
                    span.set_status(Status(StatusCode.ERROR))
            span.end()

    async def _answer(self, request: Request, exchange: _Exchange) -> Response:
        try:
            raw = await bounded_body(request, self._limit)
        except TooLarge:
            return self._failed(too_large(self._limit), exchange, status=413)
        resend = self._resends.resend_of(request, self._route, raw, self._live.swaps)
        replay = self._resends.replay(resend, exchange.span)
        if replay is not None:  # a re-sent failure: its answer again, no call
            exchange.answered(replay.status_code)
            return replay
        try:
            body = json_object(raw)
            ask = self._front.parse(body)
            mid_stream, restarts = mid_stream_of(request.headers)
            job = job_of(request.headers)
            overflow = on_overflow_of(request.headers)
            ask = replace(
                ask,
                request=replace(
                    ask.request, job=job, mid_stream=mid_stream if ask.stream else None, on_overflow=overflow
                ),
            )
            options = call_options(request.headers, self._clock)
        except SidecarFailure as failure:
            return self._failed(failure, exchange)
        caller = request.scope.get(SCOPE_KEY)
        if caller is not None:  # server.auth: the caller's own limits first (server.callers)
            tokens = model_charge(self._live.core.config, ask.request)
            limited = await self._callers.admit(caller, self._method, tokens)
            if limited is not None:
                return self._failed(callers_failure(self._front, limited, body), exchange)
        refused = self._admission.enter(self._method)
        if refused is not None:
            return self._failed(refused, exchange)
        exchange.admitted = True
        if ask.stream:
            return await self._stream(ask, body, options, restarts, request, exchange, resend)
        try:
            call = self._live.core.models.call(ask.request, options)
            response: ModelResponse = await _unless_gone(call, request.receive)
        except SidecarFailure as failure:
            return self._resends.keep(
                resend, failure, self._failed(callers_failure(self._front, failure, body), exchange)
            )
        head = self._head(served_model(response, ask.request.model))
        body = self._front.render(chat_reply(response), head, reply_extension(response))
        exchange.answered(200)
        return self._json(200, body, {ATTEMPTS_HEADER: str(response.attempts)})

    def _head(self, model: str) -> ReplyHead:
        reply_id = self._front.id_prefix + uuid.uuid4().hex
        return ReplyHead(reply_id, model, int(self._clock.wall().timestamp()))

    def _json(self, status: int, body: dict[str, Any], headers: Mapping[str, str]) -> Response:
        content = json_bytes(mask_tree(body, self._secrets))
        return Response(content, status_code=status, headers=dict(headers), media_type=JSON_MEDIA)

    def _failed(self, failure: SidecarFailure, exchange: _Exchange, *, status: int | None = None) -> Response:
        answer = answer_of(failure)
        code, body = error_of(self._front, failure, answer)
        code = status or code
        exchange.answered(code)
        return self._json(code, body, failure_headers(failure, answer))

    # ------------------------------------------------------------------ a stream

    async def _stream(
        self,
        ask: Ask,
        body: Mapping[str, Any],
        options: CallOptions,
        restarts: bool,
        request: Request,
        exchange: _Exchange,
        resend: Resend,
    ) -> Response:
        events = self._live.core.models.stream(ask.request, options)
        exchange.closers.append(events.aclose)  # the call cancelled, its upstream closed, whatever happens
        model = ask.request.model
        try:
            first: StreamEvent = await _unless_gone(anext(events), request.receive)
            if isinstance(first, Serving):  # the reply is named after the model that writes it
                model = first.model
                first = await _unless_gone(anext(events), request.receive)
        except SidecarFailure as failure:
            return self._resends.keep(
                resend, failure, self._failed(callers_failure(self._front, failure, body), exchange)
            )
        except StopAsyncIteration:  # pragma: no cover - the core always ends with Final or a failure
            return self._failed(SystemFailure("the HTTP front"), exchange)
        writer = self._front.writer(self._head(model), include_usage=ask.include_usage)
        pump = self._pump(first, events, writer, ask.request.model, restarts, exchange, body)
        exchange.closers.append(pump.aclose)
        exchange.answered(200)
        return StreamingResponse(pump, media_type=SSE_MEDIA, headers={"cache-control": "no-store"})

    async def _pump(
        self,
        first: StreamEvent,
        events: AsyncIterator[StreamEvent],
        writer: StreamWriter,
        model: str,
        restarts: bool,
        exchange: _Exchange,
        body: Mapping[str, Any],
    ) -> AsyncGenerator[bytes, None]:
        yield self._encode(writer.start())
        sent, partial = 0, []
        event: StreamEvent | None = first
        try:
            while event is not None:
                match event:
                    case TextDelta() | ToolCallDelta() | ReasoningDelta():
                        sent += 1
                        if isinstance(event, TextDelta):
                            partial.append(event.text)
                        yield self._encode(writer.delta(event))
                    case Restart() if restarts:
                        sent, partial = 0, []
                        words = {"cause": event.cause.name.lower(), "reason": event.reason, "attempt": event.attempt}
                        yield self._encode(writer.restarted(words))
                    case Restart():
                        failure = self._cannot_restart(model, event, "".join(partial), sent)
                        yield self._encode_failure(failure, writer, exchange)
                        return  # closing the events cancels the call
                    case Continued():
                        pass  # the deltas that follow continue the text sent: the caller reads on
                    case Serving():
                        pass  # the reply's chunks keep the name its head gave them
                    case Final():
                        reply = chat_reply(event.response)
                        yield self._encode(writer.final(reply, reply_extension(event.response)))
                        return
                event = await anext(events, None)
        except SidecarFailure as failure:
            yield self._encode_failure(callers_failure(self._front, failure, body), writer, exchange)

    def _cannot_restart(self, model: str, restart: Restart, partial: str, sent: int) -> SidecarFailure:
        reason = (
            f"{self._front.words} stream cannot take back the deltas it sent, and the reply had to start "
            f"again (header '{MID_STREAM_HEADER}: restart' receives restarts as sidecar events): {restart.reason}"
        )
        return StreamInterrupted(model, reason, partial, sent).with_attempts(restart.attempt)

    def _encode_failure(self, failure: SidecarFailure, writer: StreamWriter, exchange: _Exchange) -> bytes:
        exchange.error_type = failure.kind_name
        _, body = error_of(self._front, failure, answer_of(failure))
        return self._encode(writer.error(body))

    def _encode(self, events: list[Sse]) -> bytes:
        out: list[str] = []
        for name, data in events:
            text = data if isinstance(data, str) else json_text(mask_tree(data, self._secrets), compact=False)
            head = f"event: {name}\n" if name else ""
            out.append(f"{head}data: {text}\n\n")
        return "".join(out).encode()
