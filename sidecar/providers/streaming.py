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
    no byte for stream_idle_timeout_s          Retry(TRANSIENT)           the policy's
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

``continue`` (``MidStream.CONTINUE``): a fault after text reached the caller, on a deployment that
accepts a prefill (``config.accepts_prefill``), when the caller holds text only (no tool-call or
reasoning deltas) and no reasoning was asked for, is a Retry like ``restart``'s, but nothing is
voided: the next attempt of the same engine sends the conversation with the text the caller holds
as a last assistant message (its trailing whitespace held back: Anthropic refuses a prefill ending
in it, and the continuation's leading whitespace that the caller already holds is dropped), and
its deltas are the rest of the reply. The reply judged and returned is the held text and the
continuation joined. The broken attempt's tokens are counted (estimated: the request's input
estimate, a token per four characters delivered). A continuation attempt answered with a 400 (a
provider that takes no prefill after all) is not that 400: the call ends with STREAM_INTERRUPTED,
the original fault's reason and the refusal's, so a route moves on to its next deployment. Where
the caller holds more than text, or the deployment takes no prefill, STREAM_INTERRUPTED as under
``fail`` (a route's next deployment that accepts a prefill continues it: ``providers.routes``).
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

The Outlet is the stream's only way out: a queue of ``STREAM_BUFFER_EVENTS`` the door drains.
While the caller does not read, ``Outlet.send`` waits, the attempt stops reading the provider,
the transport stops reading its socket past its read buffer, and the provider's writes block:
backpressure reaches the upstream, nothing grows without bound. The idle timer is paused while
the outlet is full (a slow reader is not a stalled provider).

What the caller holds, and when a Restart is sent (the module docstring of ``core.stream``):
a fault, a truncation re-run or a correction *voids* what the caller holds; the Restart goes out
right before the next delta (or the final reply), numbered for the attempt whose deltas follow.
When no restart is left after a mid-stream fault (the budget spent, or a Retry-After too long),
the call ends with STREAM_INTERRUPTED carrying what the caller holds; past the deadline, JOB_TIMEOUT.
A continuation keeps what the caller holds: its Continued goes out right before the continuation's
first delta (or the final reply), and a continuation that cannot be made ends the same way.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import httpx
from botocore.eventstream import EventStreamBuffer, EventStreamMessage, ParserError
from httpx_sse import EventSource

from sidecar.core import overhead
from sidecar.core.clock import Clock
from sidecar.core.conversation import Continuation, Message, MidStream, ModelResponse, Usage
from sidecar.core.kinds import FailureKind, RetrySignal, Role
from sidecar.core.observer import AttemptStart, Observer, StreamContinued, StreamEventSkipped, StreamRestarted
from sidecar.core.retry import Attempt, Done, Fail, Retry
from sidecar.core.spend import cost_of
from sidecar.core.split_secrets import SplitSecrets
from sidecar.core.stream import (
    Continued,
    Delta,
    Final,
    ReasoningDelta,
    Restart,
    RestartCause,
    Serving,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
)
from sidecar.core.taxonomy import JobTimeout, SidecarFailure, StreamInterrupted
from sidecar.core.text import clause
from sidecar.net.transport import fault_of, text_of
from sidecar.providers.client import HEADER_TIMEOUT, MAX_REPLY_BYTES, CallScope, ModelSender
from sidecar.providers.formats.chat import ChatReply, ChatRequest, StreamFault
from sidecar.providers.formats.protocol import EVENT_STREAM, SSE

__all__ = [
    "MAX_SKIPPED_EVENTS",
    "MAX_STREAM_BYTES",
    "STREAM_BUFFER_EVENTS",
    "Outlet",
    "StreamSender",
    "Watch",
]

STREAM_BUFFER_EVENTS = 32
"""Events held for a caller that reads slower than the provider writes; past them the attempt stops
reading the provider (backpressure). A few dozen deltas: a token or a word each."""
MAX_STREAM_BYTES = 64 * 1024 * 1024
"""An attempt's stream is read up to this many bytes; a longer one is a fault. Server-sent events
weigh ten to twenty times the text they carry, so this is a reply of several MiB of text."""
MAX_SKIPPED_EVENTS = 8
"""Unreadable events one attempt may skip (each with a warning); one more is a mid-stream fault."""
CHARS_PER_TOKEN = 4
"""A broken attempt's output tokens, estimated from the characters it delivered (no usage came)."""
PREFILL_REFUSED = frozenset({400, 422})
"""The statuses of a continuation attempt's answer that mean "no prefill here" (not the call's fault)."""
SSE_CONTENT_TYPE = SSE
STREAM_DRAIN_S = 0.05
"""After the reply's end marker, how long the rest of the body (the chunked encoding's last chunk) is
read for, so the connection goes back to the pool; a body still open then is closed with its
connection. Left unread, every stream cost a new connection (a TLS handshake before the next
stream's first token): 90 new sockets per 97 streams, measured."""

# error.type of a streamed attempt's span, for what no HTTP status names
STALLED = "stream_stalled"
ERROR_EVENT = "stream_error_event"
GARBLED = "stream_garbled"
INCOMPLETE = "stream_incomplete"
TOO_LONG = "stream_too_long"
DEADLINE = "deadline"
_log = logging.getLogger("sidecar.models")
FIRST_TOKEN_TIMEOUT = "first_token_timeout"


# ---------------------------------------------------------------------------- the outlet


@dataclass(frozen=True, slots=True)
class _End:
    failure: SidecarFailure | None


@dataclass(frozen=True, slots=True)
class _Void:
    cause: RestartCause
    reason: str


class Outlet:
    """The call's events on their way to the caller, and what the caller holds now.

    Text and each tool call's argument fragments pass a ``SplitSecrets`` each: a configured secret
    written across deltas is masked whole (its held part goes out before the next other event).
    """

    __slots__ = (
        "_continuing",
        "_guards",
        "_last",
        "_observer",
        "_other",
        "_partial",
        "_pending",
        "_queue",
        "_resume",
        "_secrets",
        "_serving",
        "continuations",
        "deltas",
        "warnings",
    )

    def __init__(self, observer: Observer, secrets: Iterable[str] = (), maxsize: int = STREAM_BUFFER_EVENTS) -> None:
        self._queue: asyncio.Queue[StreamEvent | _End] = asyncio.Queue(maxsize)
        self._observer = observer
        self._partial: list[str] = []
        self._pending: _Void | None = None
        self._resume: _Void | None = None
        """A continuation decided and not yet announced (its Continued goes out before the next delta)."""
        self._continuing = False
        """Every attempt from now on continues what the caller holds (until a Restart voids it)."""
        self._other = 0
        """Tool-call and reasoning deltas the caller holds: no prefill continues those."""
        self.continuations: list[Continuation] = []
        self.warnings: list[str] = []
        """What the reply's warnings gain from the stream (events skipped)."""
        self._secrets = tuple(secrets)
        self._guards: dict[int, SplitSecrets] = {}
        """Per stream of text: -1 the reply's text, i >= 0 tool call i's arguments, -2 - i reasoning part i."""
        self._last = -1
        self._serving = ""
        """The model the last Serving named."""
        self.deltas = 0
        """Deltas the caller holds: sent since the last Restart."""

    @property
    def partial_text(self) -> str:
        """The text deltas the caller holds, joined."""
        return "".join(self._partial)

    def interrupted(self) -> _Void | None:
        """The mid-stream fault that voided what the caller holds, not yet followed by a Restart, or the
        one a continuation is to follow, not yet announced."""
        pending = self._pending
        if pending is not None and pending.cause is RestartCause.UPSTREAM_FAULT:
            return pending
        return self._resume

    @property
    def continuable(self) -> bool:
        """Whether a prefill can continue what the caller holds: text, and nothing but text."""
        return self._pending is None and self.deltas > 0 and not self._other and bool(self.partial_text.strip())

    @property
    def resumable(self) -> bool:
        """A continuation was decided and has not gone out yet: a route's next deployment may make it."""
        return self._resume is not None

    def prefill(self) -> str | None:
        """The text the next attempt continues (what the caller holds), or None: a fresh attempt."""
        return self.partial_text if self._continuing else None

    def resume(self, cause: RestartCause, reason: str) -> None:
        """The next attempt continues what the caller holds; a Continued goes out before its first delta."""
        self._guards.clear()  # what they held never went out: the continuation writes it again
        self._continuing = True
        self._resume = _Void(cause, reason)

    def void(self, cause: RestartCause, reason: str) -> None:
        """What the caller holds is void; a Restart goes out before whatever comes next."""
        self._guards.clear()  # what they held never went out
        self._continuing = False
        self._resume = None
        if self.deltas:
            self._pending = _Void(cause, reason)

    def warn(self, warning: str) -> None:
        self.warnings.append(warning)

    def observe(self, event: StreamEventSkipped) -> None:
        """An event of the attempt being sent (the span current now)."""
        self._observer.event(event)

    async def send(self, delta: Delta, attempt: int, serving: str = "") -> None:
        """``delta`` on its way; ``serving``: the model the provider says writes it (an attempt's first delta)."""
        await self.flush(attempt)
        if serving and serving != self._serving:
            self._serving = serving
            await self._queue.put(Serving(serving))
        key = _key(delta)
        if key != self._last:
            await self._release(self._last)
            self._last = key
        guard = self._guards.get(key)
        if guard is None:
            guard = self._guards[key] = SplitSecrets(self._secrets)
        if isinstance(delta, TextDelta):
            text = guard.feed(delta.text)
            if not text:
                return  # all of it held: it begins a secret
            delta = TextDelta(text)
        elif isinstance(delta, ReasoningDelta):
            if delta.signature or delta.redacted_data:  # opaque, passed on as it is: what the text held goes first
                await self._release(key)
            else:
                text = guard.feed(delta.text)
                if not text:
                    return
                delta = replace(delta, text=text)
        elif guard.active:
            fragment = guard.feed(delta.arguments_fragment)
            if not fragment and not delta.id and not delta.name:
                return
            delta = replace(delta, arguments_fragment=fragment)
        await self._put(delta)

    async def _put(self, delta: Delta) -> None:
        self.deltas += 1
        if isinstance(delta, TextDelta):
            self._partial.append(delta.text)
        else:
            self._other += 1
        await self._queue.put(delta)

    async def _release(self, key: int) -> None:
        """What the guard of stream ``key`` holds, as one more delta of it."""
        guard = self._guards.get(key)
        held = guard.flush() if guard is not None else ""
        if held:
            await self._put(_held(key, held))

    async def flush(self, attempt: int) -> None:
        """The pending Restart or Continued, if any, announcing ``attempt``."""
        resume = self._resume
        if resume is not None:
            self._resume = None
            chars = len(self.partial_text)
            cause = resume.cause.name.lower()
            self.continuations.append(Continuation(attempt, cause, resume.reason, chars))
            self._observer.event(StreamContinued(resume.reason, attempt, cause, chars))
            await self._queue.put(Continued(resume.cause, resume.reason, attempt, chars))
        pending = self._pending
        if pending is None:
            return
        self._pending = None
        self.deltas = self._other = 0
        self._partial.clear()
        self._observer.event(StreamRestarted(pending.reason, attempt, pending.cause.name.lower()))
        await self._queue.put(Restart(pending.cause, pending.reason, attempt))

    async def final(self, response: ModelResponse) -> None:
        await self._release(self._last)
        await self._queue.put(Final(response))

    async def end(self, failure: SidecarFailure | None) -> None:
        await self._queue.put(_End(failure))

    async def drain(self) -> AsyncIterator[StreamEvent]:
        """Every event in order; the call's failure raised after the events sent before it."""
        while True:
            item = await self._queue.get()
            if isinstance(item, _End):
                if item.failure is not None:
                    raise item.failure
                return
            yield item


# ---------------------------------------------------------------------------- the idle watch


class Stalled(Exception):
    """The watch fired: at the caller's deadline, or past one of the attempt's timeouts (``cause``)."""

    DEADLINE = "deadline"
    IDLE = "idle"
    HEAD = "head"
    FIRST_TOKEN = "first_token"

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause

    @property
    def deadline(self) -> bool:
        return self.cause == Stalled.DEADLINE


class Watch:
    """On the injected clock, whichever comes first: no byte for ``idle_s`` (while not paused), no
    response head ``header_s`` after entering, no delta ``first_token_s`` after entering, or the
    deadline. The task that entered it is cancelled and ``Stalled`` raised from the block (as
    ``asyncio.timeout`` does), its ``cause`` saying which."""

    __slots__ = (
        "_cancel",
        "_cancelling",
        "_clock",
        "_deadline",
        "_delivered",
        "_fired",
        "_first_token_s",
        "_headed",
        "_header_s",
        "_idle_s",
        "_last",
        "_paused",
        "_start",
        "_task",
    )

    def __init__(
        self,
        clock: Clock,
        idle_s: float,
        deadline: float | None,
        *,
        header_s: float | None = None,
        first_token_s: float | None = None,
    ) -> None:
        self._clock = clock
        self._idle_s = idle_s
        self._deadline = deadline
        self._header_s = header_s
        self._first_token_s = first_token_s
        self._start = 0.0
        self._last = 0.0
        self._headed = False
        self._delivered = False
        self._paused = False
        self._fired: Stalled | None = None
        self._cancel: Callable[[], None] | None = None
        self._task: asyncio.Task[Any] | None = None
        self._cancelling = 0

    async def __aenter__(self) -> Watch:
        task = asyncio.current_task()
        assert task is not None, "a Watch runs in a task"
        self._task = task
        self._cancelling = task.cancelling()
        self._start = self._last = self._clock.time()
        self._arm()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if self._cancel is not None:
            self._cancel()
            self._cancel = None
        fired, self._fired = self._fired, None
        assert self._task is not None
        if fired is not None and exc_type is asyncio.CancelledError and self._task.uncancel() <= self._cancelling:
            raise fired from None

    def touch(self) -> None:
        """Bytes arrived, the first of them the response head (the timer, when it fires early, sets itself again)."""
        self._last = self._clock.time()
        self._headed = True

    def pause(self) -> None:
        """A delta is on its way to a caller who may not be reading: silence from the provider is ours, not a
        stall (and the first token has come)."""
        self._paused = True
        self._delivered = True

    def resume(self) -> None:
        self._paused = False
        self._last = self._clock.time()

    def _limits(self) -> list[tuple[float, str]]:
        """When each limit still running falls due, with the cause it fires as (the deadline first)."""
        limits: list[tuple[float, str]] = []
        if self._deadline is not None:
            limits.append((self._deadline, Stalled.DEADLINE))
        if self._header_s is not None and not self._headed:
            limits.append((self._start + self._header_s, Stalled.HEAD))
        if self._first_token_s is not None and not self._delivered:
            limits.append((self._start + self._first_token_s, Stalled.FIRST_TOKEN))
        if not self._paused:
            limits.append((self._last + self._idle_s, Stalled.IDLE))
        return limits

    def _due(self) -> float:
        return min((due for due, _ in self._limits()), default=math.inf)

    def _arm(self) -> None:
        due = self._due()
        if due == math.inf:  # paused, no deadline: resume() arms nothing either, so check it then
            due = self._clock.time() + self._idle_s
        self._cancel = self._clock.call_at(due, self._fire)

    def _fire(self) -> None:
        self._cancel = None
        now = self._clock.time()
        cause = next((cause for due, cause in self._limits() if now >= due), None)
        if cause is None:
            self._arm()
            return
        self._fired = Stalled(cause)
        assert self._task is not None
        self._task.cancel()


class _Watched(httpx.AsyncByteStream):
    """A response body (the transport's stream) that tells the watch every time bytes arrive, and stops
    at ``limit`` bytes."""

    def __init__(self, body: httpx.AsyncByteStream, watch: Watch, limit: int) -> None:
        self._body = body
        self._watch = watch
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._body:
            self._watch.touch()
            size += len(chunk)
            if size > self._limit:
                raise StreamFault(f"the stream was longer than {self._limit // (1024 * 1024)} MiB")
            yield chunk

    async def aclose(self) -> None:
        await self._body.aclose()


# ---------------------------------------------------------------------------- the sender


@dataclass(slots=True)
class _Progress:
    """One attempt's deltas so far (a continuation's: after the text the caller held, ``prefix``)."""

    attempt: Attempt
    outlet: Outlet
    watch: Watch
    forwarded: int = 0
    chars: int = 0
    """Characters of text forwarded."""
    skipped: int = 0
    """Unreadable events skipped."""
    prefix: str | None = None
    """A continuation: the text the caller held when it began (None: a fresh attempt)."""
    seam: str = ""
    """The held text's trailing whitespace, not in the prefill: dropped from the continuation's start."""
    model: str = ""
    """The model the provider says writes this attempt, as far as read."""

    async def forward(self, delta: Delta) -> None:
        if isinstance(delta, TextDelta) and self.seam:
            text, self.seam = _past_seam(self.seam, delta.text)
            if not text:
                return
            delta = TextDelta(text)
        record = self.attempt.record
        serving = ""
        if self.forwarded == 0:
            record.first_token()
            serving = self.model
        else:
            record.chunk()
        self.forwarded += 1
        if isinstance(delta, TextDelta):
            self.chars += len(delta.text)
        self.watch.pause()  # a caller that does not read makes the provider wait: that silence is not a stall
        try:
            await self.outlet.send(delta, self.attempt.number, serving)
        finally:
            self.watch.resume()


def _past_seam(seam: str, text: str) -> tuple[str, str]:
    """``text`` without what it repeats of ``seam`` (whitespace the caller already holds), and what is
    left of the seam to match (nothing once ``text`` differs from it)."""
    k = 0
    while k < len(seam) and k < len(text) and seam[k] == text[k]:
        k += 1
    if k == len(text):
        return "", seam[k:]
    return text[k:], ""


def _continued_text(held: str, continuation: str) -> str:
    """The whole reply: the text held, and the continuation past the held whitespace it repeats."""
    seam = held[len(held.rstrip()) :]
    rest, _ = _past_seam(seam, continuation)
    return held + rest


def _prefilled(chat: ChatRequest, prefill: str) -> ChatRequest:
    """``chat`` with ``prefill`` as its last assistant message (joined to one the caller ended with)."""
    messages = list(chat.messages)
    last = messages[-1] if messages else None
    if last is not None and last.role is Role.ASSISTANT and not last.tool_calls and not last.parts:
        messages[-1] = replace(last, text=last.text + prefill)
    else:
        messages.append(Message(Role.ASSISTANT, prefill))
    return replace(chat, messages=messages)


class StreamSender(ModelSender):
    """One streamed attempt of a chat request to one model of one provider (the module's table)."""

    __slots__ = ("_input_tokens", "_mid_stream", "_outlet", "_prefill")

    def __init__(
        self,
        scope: CallScope,
        chat: ChatRequest,
        *,
        outlet: Outlet,
        mid_stream: str,
        prefill: bool = False,
        input_tokens: int = 0,
    ) -> None:
        super().__init__(scope, chat, stream=True)
        self._outlet = outlet
        self._mid_stream = mid_stream
        self._prefill = prefill
        """Whether this deployment continues a last assistant message (and this request allows it)."""
        self._input_tokens = input_tokens
        """The call's input estimate: a broken attempt's input tokens."""

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
            chat = _prefilled(chat, held.rstrip())
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
            config.stream_idle_timeout_s,
            attempt.deadline,
            header_s=limits.header_s,
            first_token_s=limits.first_token_s,
        )
        progress = _Progress(attempt, self._outlet, watch, prefix=held)
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
            detail = f"no bytes for {config.stream_idle_timeout_s:g} s"
            attempt.record.transport_fault(STALLED, detail)
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
        said = f"{status}: " if status else ""
        why = f"model {self._scope.model_id} refused to continue it ({said}{clause(failure.message, 200)})"
        return Fail(self._cannot_continue(why))

    def _cannot_continue(self, why: str) -> StreamInterrupted:
        outlet = self._outlet
        fault = outlet.interrupted()
        reason = f"{fault.reason}; {why}" if fault is not None else why
        return StreamInterrupted(self._scope.model_id, reason, outlet.partial_text, outlet.deltas)

    async def _exchange(self, request: httpx.Request, progress: _Progress) -> Done[Any] | Fail | Retry:
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
            response.stream = _Watched(body, progress.watch, MAX_STREAM_BYTES)
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

    async def _events(self, events: AsyncIterator[tuple[str, str]], progress: _Progress) -> Done[Any] | Fail | Retry:
        """The stream, event by event (as its framing's reader gives them), through the wire's decoder."""
        record = progress.attempt.record
        try:
            return await self._decoded(events, progress)
        except BrokenFrames as broken:
            record.transport_fault(GARBLED, broken.detail)
            return self._fault(progress, Retry(RetrySignal.TRANSIENT, broken.detail))

    async def _decoded(self, events: AsyncIterator[tuple[str, str]], progress: _Progress) -> Done[Any] | Fail | Retry:
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
                await _drain(events)
                break
        reply = decoder.reply()
        if reply is None:
            detail = "the stream ended before the reply was complete"
            record.transport_fault(INCOMPLETE, detail)
            return self._fault(progress, Retry(RetrySignal.TRANSIENT, detail))
        return await self._done(reply, progress)

    def _skip(self, progress: _Progress, detail: str) -> None:
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

    async def _whole(self, response: httpx.Response, progress: _Progress) -> Done[Any] | Fail | Retry:
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

    async def _done(self, reply: ChatReply, progress: _Progress) -> Done[Any]:
        self._account(reply, progress.attempt)
        if progress.prefix is not None:  # the reply is what the caller held and its continuation
            reply = replace(reply, text=_continued_text(progress.prefix, reply.text))
        return Done(await self._scope.judge(reply, progress.attempt))

    def _error_event(self, progress: _Progress, body: str) -> Fail | Retry:
        """An error event: classified as an error answer (status 500, as CallModel reads one in a 200)."""
        outcome = self._read(500, {}, body)
        record = progress.attempt.record
        if isinstance(outcome, SidecarFailure):
            record.failed(outcome.kind_name)
            return Fail(outcome)
        assert isinstance(outcome, Retry), "an error body is never a reply"
        record.failed(ERROR_EVENT)
        return self._fault(progress, outcome)

    def _transport_fault(self, progress: _Progress, exc: httpx.HTTPError) -> Fail | Retry:
        fault = fault_of(exc)
        progress.attempt.record.transport_fault(
            "timeout" if "time" in fault.detail else type(exc).__name__, fault.detail
        )
        return self._fault(progress, Retry(RetrySignal.TRANSIENT, fault.detail))

    def _fault(self, progress: _Progress, retry: Retry) -> Fail | Retry:
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

    def _continue(self, progress: _Progress, retry: Retry, reason: str) -> Fail | Retry:
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

    def _account_broken(self, progress: _Progress) -> None:
        """A broken attempt's tokens, which no usage reported: estimated (the module's docstring)."""
        scope = self._scope
        usage = Usage(self._input_tokens, max(1, math.ceil(progress.chars / CHARS_PER_TOKEN)))
        scope.spent.usage += usage
        usd = cost_of(scope.model, usage)
        scope.spent.cost_usd += usd
        scope.ledger.record(scope.workflow, usd)

    def _past_deadline(self, progress: _Progress) -> JobTimeout:
        sent = progress.forwarded
        what = f"the stream had sent {sent} deltas and was not done" if sent else "no delta had arrived yet"
        return JobTimeout(f"model {self._scope.model_id}", f"the deadline passed: {what}")


class BrokenFrames(Exception):
    """Binary frames that do not parse (a checksum, a length): the stream's framing is lost, nothing after it
    can be read (a mid-stream fault, not one event skipped)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """A ``text/event-stream`` body's events: (its ``event:`` name, its ``data:`` text)."""
    response.encoding = "utf-8"  # an event stream is UTF-8 whatever it says (the SSE standard)
    async for event in EventSource(response).aiter_sse():
        yield event.event, event.data


def _frame_event(message: EventStreamMessage) -> tuple[str, str]:
    headers: Mapping[str, Any] = message.to_response_dict()["headers"]  # (the stubs mistype ``.headers``)
    kind = headers.get(":message-type")
    if kind == "exception":
        return str(headers.get(":exception-type", "")), message.payload.decode("utf-8", "replace")
    if kind == "error":  # the framing's own error: its code and message in headers
        said = {"__type": str(headers.get(":error-code", "")), "message": str(headers.get(":error-message", ""))}
        return "error", json.dumps(said)
    return str(headers.get(":event-type", "")), message.payload.decode("utf-8", "replace")


async def event_stream_events(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """An ``application/vnd.amazon.eventstream`` body's messages, parsed by botocore's ``EventStreamBuffer``
    (prelude, headers, checksums): (its ``:event-type``, or an exception's ``:exception-type``, its payload
    as text). A frame that does not parse is ``BrokenFrames``."""
    buffer = EventStreamBuffer()
    async for chunk in response.aiter_bytes():
        buffer.add_data(chunk)
        while True:
            try:
                message = next(buffer, None)
            except ParserError as exc:
                raise BrokenFrames(f"the stream sent a frame that does not parse ({exc})") from None
            if message is None:
                break
            yield _frame_event(message)


READERS: Mapping[str, Callable[[httpx.Response], AsyncIterator[tuple[str, str]]]] = {
    SSE: sse_events,
    EVENT_STREAM: event_stream_events,
}
"""A stream's reader by its content type (``Upstream.stream_type``): each gives (event, data) pairs."""


async def _drain(events: AsyncIterator[Any]) -> None:
    """Read what follows a complete reply, for ``STREAM_DRAIN_S`` at most (see there); its events are
    ignored, and a fault in them is not the reply's."""
    try:
        async with asyncio.timeout(STREAM_DRAIN_S):
            async for _ in events:
                pass
    except (TimeoutError, httpx.HTTPError, StreamFault, BrokenFrames):
        pass


def _key(delta: Delta) -> int:
    """Which stream of text ``delta`` continues (``Outlet._guards``)."""
    if isinstance(delta, ToolCallDelta):
        return delta.index
    if isinstance(delta, ReasoningDelta):
        return -2 - delta.index
    return -1


def _held(key: int, text: str) -> Delta:
    """Text a guard held back, as one more delta of its stream ``key``."""
    if key >= 0:
        return ToolCallDelta(key, arguments_fragment=text)
    if key <= -2:
        return ReasoningDelta(-2 - key, text=text)
    return TextDelta(text)
