"""The Outlet: the call's events on their way to the caller, and what the caller holds.

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
A hedged race's two hops share the Outlet: ``claim`` lets the first delta's sender alone through.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, replace

from sidecar.core.conversation import Continuation, ModelResponse
from sidecar.core.observer import Observer, StreamContinued, StreamEventSkipped, StreamRestarted
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
from sidecar.core.taxonomy import SidecarFailure

__all__ = ["STREAM_BUFFER_EVENTS", "Outlet"]

STREAM_BUFFER_EVENTS = 32
"""Events held for a caller that reads slower than the provider writes; past them the attempt stops
reading the provider (backpressure). A few dozen deltas: a token or a word each."""


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
        "claim",
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
        self.claim: Callable[[], Awaitable[None]] | None = None
        """While a route's hop is raced by a hedge (``providers.hedging``): awaited before each delta, the
        first one's claim wins the race, a loser's never returns."""

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
        if self.claim is not None:
            await self.claim()
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
