"""The calls in flight on one service, so that a reload can wait for its old services' calls.

A reload builds new services for the new config and sends every new call to them; the calls in
flight finish on the services they started on (under the config they started with). Once a
service's count is back to 0 (``drained``), nothing holds it any more and it is closed::

    with service.calls:    around each call (CallModel / StreamModel / ExecuteTool, at every door)
    await calls.drained()  until none is in flight (at once when none is)
"""

from __future__ import annotations

import asyncio
from types import TracebackType

__all__ = ["CallCount"]


class CallCount:
    """How many calls are in flight on one service; ``drained`` waits until none is."""

    __slots__ = ("_count", "_idle")

    def __init__(self) -> None:
        self._count = 0
        self._idle: asyncio.Event | None = None

    def __len__(self) -> int:
        return self._count

    def __enter__(self) -> None:
        self._count += 1

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._count -= 1
        if self._count == 0 and self._idle is not None:
            self._idle.set()

    async def drained(self) -> None:
        """Until no call is in flight."""
        while self._count:
            if self._idle is None or self._idle.is_set():
                self._idle = asyncio.Event()
            await self._idle.wait()
