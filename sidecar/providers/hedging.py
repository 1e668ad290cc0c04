"""A hedged hop: a route's deployment raced by the next one when its first token is slow (docs/routing.md#hedging).

    Hedges                              whether a hop may be hedged (``may_hedge``), when (``at``), and each
                                        raced deployment's times to first token (``timed``, ``core.hedging``)
    Race.run(first, second, hedge_at)   the hop runs as a task; at ``hedge_at`` on the injected clock, with
                                        no first token yet, ``second`` (the next deployment) runs beside it
    Race.claim                          a racer's first token: the first to claim wins, the other is
                                        cancelled at once (LOST: its hop ends ``cancelled``, its upstream
                                        response closed by the cancellation, as a caller's cancel closes it)
    lost_reason(exc)                    the reason a cancelled racer lost, or None (another cancellation)

What a first token is: a stream's first delta (``Outlet.send`` awaits ``claim`` while a race is on);
for a non-streamed call, its whole reply (a hop that returns a reply first wins): a non-streamed
upstream call shows no token before it is whole. A racer that fails leaves the other racing; both
failed, the route's chain goes on from the later failure as from any hop's.

Which racer is which is a context variable set in each racer's task (``RACER``), so the one Outlet
the call's hops share tells a claim from the loser's, and nothing is added to a call with no race.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

from sidecar.core.clock import Clock
from sidecar.core.conversation import CallOptions
from sidecar.core.hedging import FirstTokens, Hedge
from sidecar.providers.streaming.outlet import Outlet

__all__ = ["LOST", "RACER", "Hedges", "Race", "lost_reason"]

LOST = "lost a hedged race: "
"""The start of a loser's cancel message; the rest names the winner."""

R = TypeVar("R")

RACER: contextvars.ContextVar[tuple[Race[Any], int] | None] = contextvars.ContextVar("sidecar_racer", default=None)
"""In a racer's task: its race and its index (0 the hedged hop, 1 the hedge)."""


def _nothing() -> None:
    """No timer to cancel."""


def lost_reason(exc: BaseException) -> str | None:
    """Why a cancelled racer lost (``LOST`` ...), or None: a cancellation of another cause."""
    for arg in exc.args:
        if isinstance(arg, str) and arg.startswith(LOST):
            return arg
    return None


class Race(Generic[R]):
    """One hop of a call, raced by the next deployment once (at most one hedge in flight, and one per race)."""

    __slots__ = ("_changed", "_clock", "_due", "_tasks", "claimed_at", "names", "started", "winner")

    def __init__(self, clock: Clock, names: tuple[str, str]) -> None:
        self._clock = clock
        self.names = names
        self._tasks: list[asyncio.Task[R]] = []
        self._changed = asyncio.Event()
        self._due = False
        self.winner: int | None = None
        """The index of the racer whose first token came first (or whose reply did)."""
        self.started: list[float] = []
        """When each racer started, on the injected clock."""
        self.claimed_at: float | None = None
        """When the winner claimed, on the injected clock."""

    @property
    def hedged(self) -> bool:
        return len(self._tasks) > 1

    async def claim(self) -> None:
        """A racer's token: the first one wins (the other cancelled at once); a loser's never passes."""
        racer = RACER.get()
        if racer is None or racer[0] is not self:
            return
        index = racer[1]
        if self.winner is None:
            self._won(index)
        elif self.winner != index:
            await asyncio.get_running_loop().create_future()  # cancelled already: it never sends

    def _won(self, index: int) -> None:
        self.winner = index
        self.claimed_at = self._clock.time()
        for i, task in enumerate(self._tasks):
            if i != index and not task.done():
                task.cancel(f"{LOST}{self.names[index]} sent a first token first; cancelled, its response closed")
        self._changed.set()

    def _start(self, coroutine: Coroutine[Any, Any, R]) -> None:
        context = contextvars.copy_context()
        context.run(RACER.set, (self, len(self._tasks)))
        self.started.append(self._clock.time())
        task = asyncio.get_running_loop().create_task(coroutine, context=context)
        task.add_done_callback(lambda _: self._changed.set())
        self._tasks.append(task)

    def _fire(self) -> None:
        self._due = True
        self._changed.set()

    async def run(
        self,
        first: Callable[[], Coroutine[Any, Any, R]],
        second: Callable[[], Coroutine[Any, Any, R]],
        hedge_at: float | None,
        served: Callable[[R], bool],
    ) -> list[R]:
        """Each racer's result, in the order they started (one, or two when the hedge went out).

        ``served``: whether a result is a reply (a first token for a non-streamed call: it wins);
        ``hedge_at`` None: no hedge this time, the race only times the hop's first token."""
        self._start(first())
        cancel_timer = self._clock.call_at(hedge_at, self._fire) if hedge_at is not None else _nothing
        try:
            while True:
                await self._changed.wait()
                self._changed.clear()
                if self.winner is None:
                    for i, task in enumerate(self._tasks):
                        if task.done() and not task.cancelled() and served(task.result()):
                            self._won(i)
                            break
                if self.winner is not None:
                    break
                if all(t.done() for t in self._tasks):
                    break  # every racer failed (the hop alone: it failed before its hedge was due)
                if self._due and not self.hedged:
                    self._start(second())
            await asyncio.wait(self._tasks)  # the loser's cancellation through, the winner's hop to its end
            return [t.result() for t in self._tasks]
        except asyncio.CancelledError as exc:  # the caller's: every racer hears the same
            for task in self._tasks:
                task.cancel(*exc.args)
            if self._tasks:
                await asyncio.wait(self._tasks)
            raise
        finally:
            cancel_timer()

    def time_to_first_token(self, index: int) -> float | None:
        """The racer's time to its first token, or for the loser the time it had waited (a lower bound)."""
        if self.claimed_at is None or index >= len(self.started):
            return None
        return self.claimed_at - self.started[index]


class Hedges:
    """Whether and when a route's hop is hedged, and each raced deployment's times to first token."""

    __slots__ = ("_clock", "_closed", "_retries", "_times")

    def __init__(self, clock: Clock, retries: Callable[[str, int | None], int], closed: Callable[[str], bool]) -> None:
        self._clock = clock
        self._retries = retries
        self._closed = closed
        self._times: dict[str, FirstTokens] = {}

    def may_hedge(self, deployment: str, after: str | None, options: CallOptions, outlet: Outlet | None) -> bool:
        """Whether a hop may be raced: a deployment ``after`` it in the order, whose circuit is closed; the
        call's retry budget allows a second attempt; no delta has reached the caller (the hops share them)."""
        if after is None or (outlet is not None and (outlet.deltas or outlet.resumable)):
            return False
        if self._retries(deployment, options.upstream_retries) < 1:
            return False  # a hedge is a second attempt of the call: never past its retry budget
        return self._closed(after)

    def at(self, hedge: Hedge | None, deployment: str, options: CallOptions) -> float | None:
        """When the hop is hedged on the injected clock, or None: not this call (no hedge, too few times for
        a percentile, or the deadline comes first)."""
        delay = None if hedge is None else hedge.delay(self._times.get(deployment))
        if delay is None:
            return None
        at = self._clock.time() + delay
        return None if options.deadline is not None and at >= options.deadline else at

    def timed(self, hedge: Hedge | None, race: Race[Any]) -> None:
        """A percentile's route: each racer's time to first token (the loser's a lower bound) kept."""
        if hedge is None or hedge.percentile is None:
            return
        for index, name in enumerate(race.names[: len(race.started)]):
            seconds = race.time_to_first_token(index)
            if seconds is not None:
                self._times.setdefault(name, FirstTokens()).add(seconds)
