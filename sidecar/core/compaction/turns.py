"""The last user turn: where the part of a conversation that compaction never touches begins."""

from __future__ import annotations

from collections.abc import Sequence

from sidecar.core.conversation import Message
from sidecar.core.kinds import Role

__all__ = ["last_user_turn", "turn_starts"]


def _says(m: Message) -> bool:
    """A user message of the caller's own (text or parts), not one that only carries tool results."""
    return m.role is Role.USER and bool(m.text or m.parts)


def turn_starts(messages: Sequence[Message]) -> list[int]:
    """The indices where a user turn begins (every tool call before one has had its result)."""
    return [i for i, m in enumerate(messages) if _says(m)]


def last_user_turn(messages: Sequence[Message]) -> int:
    """The index of the last user turn (its message and everything after it are never compacted);
    the last user message when none says anything of its own; ``len(messages)`` when there is none."""
    starts = turn_starts(messages)
    if starts:
        return starts[-1]
    users = [i for i, m in enumerate(messages) if m.role is Role.USER]
    return users[-1] if users else len(messages)
