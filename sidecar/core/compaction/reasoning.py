"""Old reasoning dropped: every reasoning part of an assistant message before the last user turn.

What a provider requires is kept: the current turn's reasoning (after the last user turn: Anthropic's signed
thinking of a tool loop in progress, Gemini's thought signatures, Responses' reasoning items) is never
touched; a reasoning part of an earlier turn is not needed by any of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sidecar.core.compaction.turns import last_user_turn
from sidecar.core.conversation import Message

__all__ = ["REASONING_NOTE", "drop_old_reasoning"]

REASONING_NOTE = "[compacted by the sidecar: reasoning removed]"
"""An assistant message that held only reasoning keeps this text (a provider refuses an empty one)."""


def drop_old_reasoning(messages: Sequence[Message]) -> tuple[tuple[Message, ...], tuple[int, ...]]:
    """The conversation without reasoning before the last user turn, and the indices of the messages changed."""
    protect = last_user_turn(messages)
    out = list(messages)
    changed: list[int] = []
    for i, m in enumerate(messages[:protect]):
        if m.reasoning:
            empty = not (m.text or m.parts or m.tool_calls)  # a provider refuses an empty assistant message
            out[i] = replace(m, reasoning=(), text=REASONING_NOTE if empty else m.text)
            changed.append(i)
    return tuple(out), tuple(changed)
