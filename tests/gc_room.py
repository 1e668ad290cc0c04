"""Garbage collections that need stack: a test's proof that no deep input leaves a finaliser without room.

A collection runs whenever an allocation crosses the threshold, in whatever frame that is, and the
finalisers it runs (``__del__``, an async generator's close, a Task's) need the interpreter's
recursion budget from there. Code that climbs near the recursion limit (``json.loads`` on 1,000
levels) makes them fail with an unraisable RecursionError, at random: only when a collection
happens to start at the top.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collections_with_room"]


def _climb(levels: int) -> int:
    return 0 if levels == 0 else 1 + _climb(levels - 1)


@contextmanager
def collections_with_room(levels: int = 100) -> Iterator[list[str]]:
    """A garbage collection at every allocation, each running Python ``levels`` calls deep, as a
    finaliser it runs would; yields what each collection that found less room than that said."""
    short: list[str] = []

    def finaliser(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            try:
                _climb(levels)
            except RecursionError as exc:
                short.append(str(exc))

    thresholds = gc.get_threshold()
    gc.callbacks.append(finaliser)
    gc.set_threshold(1)
    try:
        yield short
    finally:
        gc.set_threshold(*thresholds)
        gc.callbacks.remove(finaliser)
