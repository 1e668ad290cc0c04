"""The attempt's timers: no byte for the idle timeout, no response head, no first delta, the deadline.

``Watch`` keeps them on the injected clock and cancels the attempt when one falls due (``Stalled``
says which); ``Watched`` is the response body that tells it every time bytes arrive.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

from sidecar.core.clock import Clock
from sidecar.providers.formats.chat import StreamFault

__all__ = ["Stalled", "Watch", "Watched"]


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


class Watched(httpx.AsyncByteStream):
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
