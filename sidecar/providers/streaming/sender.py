"""A streamed model attempt: the Sender StreamModel's calls run through the one retry engine.

One attempt is one POST with ``stream: true`` (the upstream's body), read by the upstream's
``StreamDecoder`` as (event, data) pairs from the reader its content type picks (``READERS``, the
format's ``stream_type``): server-sent events (``httpx_sse.EventSource``) or AWS event-stream frames
(botocore's ``EventStreamBuffer``: no binary framing of our own; a frame that does not parse is a
``stream_garbled`` fault, as nothing after it can be read); each delta goes to the caller through
the call's ``Outlet`` as it arrives. Before the first delta the attempt is exactly
CallModel's; after it, a fault is judged by the call's mid-stream policy::

    what the attempt meets                     before the first delta     after it
    an HTTP error status (or a body of         classify_response, as      -
      neither stream type)                     CallModel: Retry / Fail
    an error event (overloaded_error ...)      classified as an error     a Fail as it is; a Retry:
                                               body: Retry / Fail           the policy's (below)
    a dropped or reset connection              Retry(TRANSIENT)           the policy's
    no byte for the idle limit (``idle_s``)    Retry(TRANSIENT)           the policy's
    more than MAX_SKIPPED_EVENTS unreadable    Retry(TRANSIENT)           the policy's
      events (one is skipped, with a warning)
    an event-stream frame that does not parse  Retry(TRANSIENT)           the policy's
    the body ends before the reply is whole    Retry(TRANSIENT)           the policy's
    more than MAX_STREAM_BYTES                 Retry(TRANSIENT)           the policy's
    the caller's deadline (injected clock)     JOB_TIMEOUT                JOB_TIMEOUT
    the caller cancels                         the response closed at once, the attempt span ended "cancelled"
    a whole reply (finish and end marker)      judged as CallModel judges it (refusal, truncation, schema): Done

    the policy   a fault after the first delta
    restart      Retry; the caller's deltas voided (a Restart goes out before the next attempt's deltas)
    fail         STREAM_INTERRUPTED at once (partial text, reason, deltas sent; ABORTED)
    continue     Retry; the caller's deltas kept: the next attempt is prefilled with them (a Continued
                 goes out before its deltas); STREAM_INTERRUPTED where no deployment can continue

An event that is not JSON (garbled) is skipped: the stream goes on, the reply carries a warning
and the attempt's span a ``sidecar.stream.event_skipped`` event; past ``MAX_SKIPPED_EVENTS`` in
one attempt the stream is beyond skipping, a fault as above.

No response head within the scope's ``header_s``, or no delta within its ``first_token_s`` (both
from the request's start, on the injected clock, in the ``Watch``; bytes without a delta do not
count) is a timeout of the attempt, always before its first delta: Retry(TRANSIENT), or on a
route's hop that moves on from one, the hop's end at once (``ModelSender._timed_out``).

A 2xx answer of neither stream type (a server that ignores ``stream``) is read whole,
as CallModel reads it, and its reply sent as one text delta and one delta per tool call. An
error event is classified with status 500, as CallModel classifies an error object in a 200.
A Retry is a Retry to the engine either way: the same windows, Retry-After, model throttle and
budget; an error event that names no retry (an invalid request) fails the call as CallModel's
would. The ``fail`` policy turns a fault after the first delta into STREAM_INTERRUPTED at once.
The ``continue`` policy is described in ``continuation``; the Outlet and what the caller holds, in ``outlet``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

import httpx

from sidecar.core import overhead
from sidecar.core.conversation import MidStream, Usage
from sidecar.core.kinds import FailureKind, RetrySignal
from sidecar.core.observer import AttemptStart, StreamEventSkipped
from sidecar.core.retry import Attempt, Done, Fail, Retry
from sidecar.core.spend import cost_of
from sidecar.core.stream import RestartCause, TextDelta, ToolCallDelta
from sidecar.core.taxonomy import JobTimeout, SidecarFailure, StreamInterrupted
from sidecar.core.text import clause
from sidecar.net.transport import fault_of, text_of
from sidecar.providers.client import HEADER_TIMEOUT, MAX_REPLY_BYTES, CallScope, ModelSender
from sidecar.providers.formats.chat import ChatReply, ChatRequest, StreamFault
from sidecar.providers.streaming.continuation import CHARS_PER_TOKEN, PREFILL_REFUSED, continued_text, prefilled
from sidecar.providers.streaming.outlet import Outlet
from sidecar.providers.streaming.progress import Progress
from sidecar.providers.streaming.readers import READERS, BrokenFrames, drain
from sidecar.providers.streaming.watch import Stalled, Watch, Watched

__all__ = ["MAX_SKIPPED_EVENTS", "MAX_STREAM_BYTES", "StreamSender"]

MAX_STREAM_BYTES = 64 * 1024 * 1024
"""An attempt's stream is read up to this many bytes; a longer one is a fault. Server-sent events
weigh ten to twenty times the text they carry, so this is a reply of several MiB of text."""
MAX_SKIPPED_EVENTS = 8
"""Unreadable events one attempt may skip (each with a warning); one more is a mid-stream fault."""

# error.type of a streamed attempt's span, for what no HTTP status names
STALLED = "stream_stalled"
ERROR_EVENT = "stream_error_event"
GARBLED = "stream_garbled"
INCOMPLETE = "stream_incomplete"
TOO_LONG = "stream_too_long"
DEADLINE = "deadline"
_log = logging.getLogger("sidecar.models")
FIRST_TOKEN_TIMEOUT = "first_token_timeout"


class StreamSender(ModelSender):
    """One streamed attempt of a chat request to one model of one provider (the module's table)."""

    __slots__ = ("_input_tokens", "_mid_stream", "_outlet", "_prefill", "_refused_prefill")

    def __init__(
        self,
        scope: CallScope,
        chat: ChatRequest,
        *,
        outlet: Outlet,
        mid_stream: str,
        prefill: bool = False,
        input_tokens: int = 0,
        refused: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(scope, chat, stream=True)
        self._outlet = outlet
        self._mid_stream = mid_stream
        self._prefill = prefill
        """Whether this deployment continues a last assistant message (and this request allows it)."""
        self._input_tokens = input_tokens
        """The call's input estimate: a broken attempt's input tokens."""
        self._refused_prefill = refused
        """Told when the deployment answers a prefilled request with a 400 (``prefills``: it is learned)."""

    def describe(self, number: int) -> AttemptStart:
        return replace(super().describe(number), provider=self._scope.provider.config.wire_format, streamed=True)

    async def send(self, attempt: Attempt) -> Done[Any] | Fail | Retry:
        provider = self._scope.provider
        config = provider.config
        held = self._outlet.prefill() if self._mid_stream == MidStream.CONTINUE else None
        chat = self._chat
        if held is not None:
            if not self._prefill:
                attempt.record.failed(FailureKind.STREAM_INTERRUPTED.name)
                return Fail(self._cannot_continue(f"model {self._scope.model_id} takes no prefill to continue it"))
            chat = prefilled(chat, held.rstrip())
        timeout = attempt.timeout(config.timeout_s)
        request = provider.request(
            self._route,
            provider.upstream.body(chat, stream=True),
            httpx.Timeout(timeout, connect=min(config.connect_timeout_s, timeout)),
            {"accept": provider.upstream.stream_type, **attempt.record.trace_headers()},
        )
        limits = self._scope.timeouts
        watch = Watch(
            self._scope.clock,
            limits.idle_s,
            attempt.deadline,
            header_s=limits.header_s,
            first_token_s=limits.first_token_s,
        )
        progress = Progress(attempt, self._outlet, watch, prefix=held)
        if held is not None:
            progress.seam = held[len(held.rstrip()) :]
        try:
            with overhead.upstream():
                async with watch:
                    outcome = await self._exchange(request, progress)
        except Stalled as stalled:
            if stalled.deadline:
                attempt.record.ended(DEADLINE)
                return Fail(self._past_deadline(progress))
            if stalled.cause == Stalled.HEAD:
                return self._timed_out(attempt, HEADER_TIMEOUT, f"no response headers within {limits.header_s:g} s")
            if stalled.cause == Stalled.FIRST_TOKEN:
                detail = f"no content within {limits.first_token_s:g} s of the request"
                return self._timed_out(attempt, FIRST_TOKEN_TIMEOUT, detail)
            detail = f"no bytes for {limits.idle_s:g} s"
            attempt.record.transport_fault(STALLED, detail)
            if progress.forwarded and self._scope.timeouts_move_on and self._mid_stream != MidStream.FAIL:
                return self._stalled_on(progress, Retry(RetrySignal.TRANSIENT, detail))
            return self._fault(progress, Retry(RetrySignal.TRANSIENT, detail))
        if held is not None and not progress.forwarded and isinstance(outcome, Fail):
            return self._refused(outcome)
        return outcome

    def _refused(self, outcome: Fail) -> Fail:
        """A continuation attempt failed before its first delta: a 400 (no prefill here, whatever was
        configured) is not the call's fault, the mid-stream fault before it is."""
        failure = outcome.failure
        status = failure.http.status_code if failure.http is not None else None
        if status not in PREFILL_REFUSED and failure.kind is not FailureKind.INVALID_INPUT:
            return outcome
        if self._refused_prefill is not None:
            self._refused_prefill()
        said = f"{status}: " if status else ""
        why = f"model {self._scope.model_id} refused to continue it ({said}{clause(failure.message, 200)})"
        return Fail(self._cannot_continue(why))

    def _cannot_continue(self, why: str) -> StreamInterrupted:
        outlet = self._outlet
        fault = outlet.interrupted()
        reason = f"{fault.reason}; {why}" if fault is not None else why
        return StreamInterrupted(self._scope.model_id, reason, outlet.partial_text, outlet.deltas)

    async def _exchange(self, request: httpx.Request, progress: Progress) -> Done[Any] | Fail | Retry:
        record = progress.attempt.record
        try:
            response = await self._scope.provider.transport.send(request)
        except httpx.HTTPError as exc:
            return self._transport_fault(progress, exc)
        try:
            progress.watch.touch()
            record.answered(response.status_code)
            self._heard(response.status_code, response.headers)
            body = response.stream
            assert isinstance(body, httpx.AsyncByteStream), "the transport is asynchronous"
            response.stream = Watched(body, progress.watch, MAX_STREAM_BYTES)
            ctype = response.headers.get("content-type", "").lower()
            reader = next((r for media_type, r in READERS.items() if media_type in ctype), None)
            if 200 <= response.status_code < 300 and reader is not None:
                return await self._events(reader(response), progress)
            return await self._whole(response, progress)
        except httpx.HTTPError as exc:
            return self._transport_fault(progress, exc)
        except StreamFault as fault:  # past MAX_STREAM_BYTES
            record.transport_fault(TOO_LONG, fault.detail)
            return self._fault(progress, Retry(RetrySignal.TRANSIENT, fault.detail))
        finally:
            await response.aclose()

    async def _events(self, events: AsyncIterator[tuple[str, str]], progress: Progress) -> Done[Any] | Fail | Retry:
        """The stream, event by event (as its framing's reader gives them), through the wire's decoder."""
        record = progress.attempt.record
        try:
            return await self._decoded(events, progress)
        except BrokenFrames as broken:
            record.transport_fault(GARBLED, broken.detail)
            return self._fault(progress, Retry(RetrySignal.TRANSIENT, broken.detail))

    async def _decoded(self, events: AsyncIterator[tuple[str, str]], progress: Progress) -> Done[Any] | Fail | Retry:
        record = progress.attempt.record
        decoder = self._scope.provider.upstream.stream_decoder()
        async for name, data in events:
            try:
                deltas = decoder.feed(name, data)
            except StreamFault as fault:
                if fault.error_body is not None:
                    return self._error_event(progress, fault.error_body)
                if progress.skipped < MAX_SKIPPED_EVENTS:
                    self._skip(progress, fault.detail)
                    continue
                detail = f"{fault.detail} ({progress.skipped} unreadable events skipped before it)"
                record.transport_fault(GARBLED, detail)
                return self._fault(progress, Retry(RetrySignal.TRANSIENT, detail))
            progress.model = decoder.model
            for delta in deltas:
                await progress.forward(delta)
            if decoder.complete:
                await drain(events)
                break
        reply = decoder.reply()
        if reply is None:
            detail = "the stream ended before the reply was complete"
            record.transport_fault(INCOMPLETE, detail)
            return self._fault(progress, Retry(RetrySignal.TRANSIENT, detail))
        return await self._done(reply, progress)

    def _skip(self, progress: Progress, detail: str) -> None:
        """An unreadable event, skipped: a warning on the reply, an event on the attempt's span."""
        progress.skipped += 1
        number = progress.attempt.number
        after = f"after {progress.forwarded} deltas" if progress.forwarded else "before the first delta"
        warning = (
            f"attempt {number}: {detail} {after}; it was skipped and the stream went on "
            "(what it held, if anything, is missing from the reply)"
        )
        self._outlet.warn(warning)
        self._outlet.observe(StreamEventSkipped(detail, number))
        _log.warning("model %s: %s", self._scope.model_id, warning, extra={"model": self._scope.model_id})

    async def _whole(self, response: httpx.Response, progress: Progress) -> Done[Any] | Fail | Retry:
        """An answer that is not a stream: read and judged exactly as CallModel's."""
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size >= MAX_REPLY_BYTES:
                break
        text = text_of(response, b"".join(chunks)[:MAX_REPLY_BYTES])
        status = response.status_code
        outcome = self._read(status, dict(response.headers), text)
        record = progress.attempt.record
        if isinstance(outcome, Retry):
            record.failed(str(status))
            return outcome
        if isinstance(outcome, SidecarFailure):
            record.failed(outcome.kind_name)
            return Fail(outcome)
        progress.model = outcome.response_model
        if outcome.text:
            await progress.forward(TextDelta(outcome.text))
        for i, call in enumerate(outcome.tool_calls):
            await progress.forward(ToolCallDelta(i, call.id, call.name, call.arguments_json))
        return await self._done(outcome, progress)

    async def _done(self, reply: ChatReply, progress: Progress) -> Done[Any]:
        self._account(reply, progress.attempt)
        if progress.prefix is not None:  # the reply is what the caller held and its continuation
            reply = replace(reply, text=continued_text(progress.prefix, reply.text))
        return Done(await self._scope.judge(reply, progress.attempt))

    def _error_event(self, progress: Progress, body: str) -> Fail | Retry:
        """An error event: classified as an error answer (status 500, as CallModel reads one in a 200)."""
        outcome = self._read(500, {}, body)
        record = progress.attempt.record
        if isinstance(outcome, SidecarFailure):
            record.failed(outcome.kind_name)
            return Fail(outcome)
        assert isinstance(outcome, Retry), "an error body is never a reply"
        record.failed(ERROR_EVENT)
        return self._fault(progress, outcome)

    def _transport_fault(self, progress: Progress, exc: httpx.HTTPError) -> Fail | Retry:
        fault = fault_of(exc)
        progress.attempt.record.transport_fault(
            "timeout" if "time" in fault.detail else type(exc).__name__, fault.detail
        )
        return self._fault(progress, Retry(RetrySignal.TRANSIENT, fault.detail))

    def _fault(self, progress: Progress, retry: Retry) -> Fail | Retry:
        """A fault of this attempt: before its first delta, CallModel's Retry; after it, the policy's."""
        if not progress.forwarded:
            return retry
        outlet = self._outlet
        reason = f"{retry.signal.words} after {progress.forwarded} deltas: {retry.detail}"
        if self._mid_stream == MidStream.CONTINUE:
            return self._continue(progress, retry, reason)
        if self._mid_stream == MidStream.FAIL:
            progress.attempt.record.failed(FailureKind.STREAM_INTERRUPTED.name)
            interrupted = StreamInterrupted(
                self._scope.model_id, reason, outlet.partial_text, outlet.deltas, http=retry.http
            )
            return Fail(interrupted, instead_of=retry)  # the model's throttle still hears the signal
        outlet.void(RestartCause.UPSTREAM_FAULT, reason)
        return retry

    def _continue(self, progress: Progress, retry: Retry, reason: str) -> Fail | Retry:
        """The ``continue`` policy: the next attempt continues what the caller holds, where it can."""
        outlet = self._outlet
        self._account_broken(progress)
        if outlet.continuable:
            outlet.resume(RestartCause.UPSTREAM_FAULT, reason)
            if self._prefill:
                return retry  # the same engine's next attempt, prefilled with what the caller holds
            why = f"model {self._scope.model_id} takes no prefill to continue it"
        else:
            why = "what the caller holds is more than text (tool-call or reasoning deltas), which no prefill continues"
        progress.attempt.record.failed(FailureKind.STREAM_INTERRUPTED.name)
        interrupted = StreamInterrupted(
            self._scope.model_id, f"{reason}; {why}", outlet.partial_text, outlet.deltas, http=retry.http
        )
        return Fail(interrupted, instead_of=retry)

    def _stalled_on(self, progress: Progress, retry: Retry) -> Fail:
        """A stall after the first delta on a route's hop with a deployment after it: that deployment, not
        this one again (which stalls again), goes on with the stream, continued or restarted by the route."""
        outlet = self._outlet
        reason = f"{retry.signal.words} after {progress.forwarded} deltas: {retry.detail}"
        if self._mid_stream == MidStream.CONTINUE:
            self._account_broken(progress)
            if outlet.continuable:
                outlet.resume(RestartCause.UPSTREAM_FAULT, reason)
        progress.attempt.record.failed(FailureKind.STREAM_INTERRUPTED.name)
        why = f"{reason}; a stalled deployment is left for the route's next one"
        interrupted = StreamInterrupted(self._scope.model_id, why, outlet.partial_text, outlet.deltas, http=retry.http)
        return Fail(interrupted, instead_of=retry)

    def _account_broken(self, progress: Progress) -> None:
        """A broken attempt's tokens, which no usage reported: estimated (the module's docstring)."""
        scope = self._scope
        usage = Usage(self._input_tokens, max(1, math.ceil(progress.chars / CHARS_PER_TOKEN)))
        scope.spent.usage += usage
        usd = cost_of(scope.model, usage)
        scope.spent.cost_usd += usd
        scope.ledger.record(scope.workflow, usd)

    def _past_deadline(self, progress: Progress) -> JobTimeout:
        sent = progress.forwarded
        what = f"the stream had sent {sent} deltas and was not done" if sent else "no delta had arrived yet"
        return JobTimeout(f"model {self._scope.model_id}", f"the deadline passed: {what}")
