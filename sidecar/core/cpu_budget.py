"""A time limit on CPU-heavy checks of what a caller sent, run off the event loop.

    checks(fn, limit_s)         runs fn with a deadline ``limit_s`` of CPU-bound work from now
    await off_loop(fn, limit_s) the same in a worker thread: the event loop (health, ListModels,
                                every other call) keeps answering while fn runs
    running()                   how many checks are running off the loop now
    checkpoint()                called between steps of the work (every JSON-schema keyword, every
                                pattern): raises TooCostly once the deadline has passed
    with timed_by(now):         checks started inside read their deadline from ``now``, not
                                ``time.thread_time`` (a test's clock: a limit certainly crossed, or
                                a check held at its checkpoint while the test looks around)

A worker thread cannot be stopped from outside, so the limit is kept from inside: the work
itself stops at its next checkpoint, and a cancelled call's check ends within ``limit_s`` too.
The deadline is read from ``time.thread_time``, the CPU time of the thread doing the work, not the
injected Clock and not the wall clock: it bounds the CPU a caller's input costs, not a wait of the
policy (a fake clock never moves while the CPU works), and a busy machine that keeps the thread
waiting for a core does not make a small schema "too costly" (a wall-clock limit failed a 60-byte
schema on a machine at load 12). A check keeps the clock it started with to its end, in the thread
it started in (``off_loop`` starts it in the worker).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

__all__ = ["TooCostly", "checkpoint", "checks", "off_loop", "running", "timed_by"]

_T = TypeVar("_T")
_Now = Callable[[], float]
_DEADLINE: ContextVar[tuple[float, _Now] | None] = ContextVar("sidecar_check_deadline", default=None)
_LIMIT: ContextVar[float] = ContextVar("sidecar_check_limit", default=0.0)
_running = 0
_running_lock = threading.Lock()
_now: _Now = time.thread_time


class TooCostly(Exception):
    """The check ran past its time limit."""

    def __init__(self, limit_s: float) -> None:
        super().__init__(f"the check took longer than {limit_s:g} s")
        self.limit_s = limit_s


def checkpoint() -> None:
    """Raise TooCostly when the running check is past its deadline (a no-op outside ``checks``)."""
    deadline = _DEADLINE.get()
    if deadline is not None and deadline[1]() > deadline[0]:
        raise TooCostly(_LIMIT.get())


def checks(fn: Callable[[], _T], limit_s: float) -> _T:
    """``fn()`` under a deadline ``limit_s`` of this thread's CPU time from now (0 or less: no limit)."""
    if limit_s <= 0:
        return fn()
    now = _now
    deadline = _DEADLINE.set((now() + limit_s, now))
    limit = _LIMIT.set(limit_s)
    try:
        return fn()
    finally:
        _LIMIT.reset(limit)
        _DEADLINE.reset(deadline)


async def off_loop(fn: Callable[[], _T], limit_s: float) -> _T:
    """``checks(fn, limit_s)`` in a worker thread."""

    def run() -> _T:
        global _running
        with _running_lock:
            _running += 1
        try:
            return checks(fn, limit_s)
        finally:
            with _running_lock:
                _running -= 1

    return await asyncio.to_thread(run)


@contextmanager
def timed_by(now: _Now) -> Iterator[None]:
    """Checks started inside this block (in any thread) read the time from ``now``."""
    global _now
    before, _now = _now, now
    try:
        yield
    finally:
        _now = before


def running() -> int:
    """How many checks are running in worker threads now."""
    return _running
