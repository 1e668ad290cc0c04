"""Summaries kept: in the process (``SummaryCache``, bounded, oldest out first), and fleet-wide through a
shared state backend that offers ``SharedSummaries`` (Redis: one GET, one SET with a TTL on a
``summary`` key, hash-tagged as every key is). The same prefix compacted twice costs one summarizing call."""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol, runtime_checkable

__all__ = ["MAX_SUMMARIES", "SUMMARY_TTL_S", "SharedSummaries", "SummaryCache"]

MAX_SUMMARIES = 1024
"""Summaries the process keeps (the least recently used goes first)."""
SUMMARY_TTL_S = 24 * 3600.0
"""How long the fleet keeps a summary (renewed by nothing: a prefix summarized again after it costs a call)."""


class SummaryCache:
    """The process's summaries by prefix key."""

    __slots__ = ("_items", "_max")

    def __init__(self, max_items: int = MAX_SUMMARIES) -> None:
        self._items: OrderedDict[str, str] = OrderedDict()
        self._max = max_items

    def get(self, key: str) -> str | None:
        text = self._items.get(key)
        if text is not None:
            self._items.move_to_end(key)
        return text

    def put(self, key: str, text: str) -> None:
        self._items[key] = text
        self._items.move_to_end(key)
        while len(self._items) > self._max:
            self._items.popitem(last=False)


@runtime_checkable
class SharedSummaries(Protocol):
    """What a shared state backend offers compaction: never raises (None, or nothing stored, when it fails)."""

    async def get_summary(self, key: str) -> str | None: ...

    async def put_summary(self, key: str, text: str, ttl_s: float) -> None: ...
