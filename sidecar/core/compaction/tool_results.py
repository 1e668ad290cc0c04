"""Old tool results shortened: the newest ``keep`` kept whole, each older one's content replaced by a note.

A result keeps its ``call_id`` (the pair with its call stays whole: a provider refuses an orphan) and its
``is_error``; only its content goes. The last user turn's own message is never touched; the results of the
tool loop after it are (an agent's long loop after one question is where they pile up), but for the newest
``keep``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sidecar.core.compaction.turns import last_user_turn
from sidecar.core.conversation import Message, ToolCallResult

__all__ = ["NOTE_PREFIX", "note", "shorten_tool_results"]

NOTE_PREFIX = "[compacted by the sidecar:"


def _size(r: ToolCallResult) -> int:
    return len(r.content) + sum(len(getattr(p, "text", None) or "") + len(getattr(p, "data", b"")) for p in r.parts)


def note(name: str, removed_chars: int, parts: int) -> str:
    """What the model reads in place of a shortened result."""
    what = f"{removed_chars} characters" + (f" and {parts} parts" if parts else "")
    return f"{NOTE_PREFIX} an older result of tool {name or 'unnamed'} removed ({what}) to fit the context window]"


def _names(messages: Sequence[Message]) -> dict[str, str]:
    calls: dict[str, str] = {}
    for m in messages:
        for c in m.tool_calls:
            calls[c.id] = c.name
    return calls


def shorten_tool_results(messages: Sequence[Message], keep: int) -> tuple[tuple[Message, ...], tuple[int, ...]]:
    """The conversation with every tool result but the newest ``keep`` replaced by a note, and the indices
    of the messages changed (none: nothing was worth shortening)."""
    protect = last_user_turn(messages)
    names = _names(messages)
    seen = 0
    out = list(messages)
    changed: list[int] = []
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if not m.tool_results:
            continue
        results = list(m.tool_results)
        touched = False
        for j in range(len(results) - 1, -1, -1):
            seen += 1
            r = results[j]
            if seen <= keep or i == protect or r.content.startswith(NOTE_PREFIX):
                continue
            text = note(r.name or names.get(r.call_id, ""), _size(r), len(r.parts))
            if len(text) >= _size(r):
                continue  # a short result: the note would not save anything
            results[j] = replace(r, content=text, parts=(), carried=None)
            touched = True
        if touched:
            out[i] = replace(m, tool_results=tuple(results))
            changed.append(i)
    return tuple(out), tuple(sorted(changed))
