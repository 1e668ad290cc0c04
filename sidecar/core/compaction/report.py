"""What a compaction reports to the observer (``core.observer.Observer.compaction``): its start, how it ended."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from sidecar.core.conversation import Compaction

__all__ = ["CompactionRecord", "CompactionStart"]


@dataclass(frozen=True, slots=True)
class CompactionStart:
    """A model call's conversation about to be compacted (``providers.compacting``)."""

    model: str
    trigger: str
    """``estimate`` or ``provider`` (``conversation.Overflow``)."""
    tokens_before: int
    window: int
    strategies: tuple[str, ...]


class CompactionRecord(Protocol):
    """How one compaction ended, told once."""

    def ended(self, compaction: Compaction) -> None:
        """What it changed (it may still not fit: the call then fails with CONTEXT_OVERFLOW)."""

    def failed(self, kind: str) -> None:
        """It could not be made (the failure's kind)."""
