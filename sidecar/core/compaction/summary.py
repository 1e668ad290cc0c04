"""Summarize: the turns before the last user turn replaced by one summary the summarizer model wrote.

    prefix_end        where the summarized prefix ends: the last user turn (0: nothing to summarize)
    summary_request   the summarizer's request: a transcript of the prefix (its middle left out past what the
                      summarizer's own window holds), the summary's token cap
    prefix_key        the cache key: a hash of the canonical prefix, the summarizer and its cap
    summary_turns     what replaces the prefix: a user message holding the summary, and an assistant
                      message that takes it (the roles still alternate, as Bedrock and Gemini require)

The prefix ends where a user turn begins, so every tool call in it has its result in it: the pair is
summarized together, never split.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from sidecar.core.compaction.turns import last_user_turn
from sidecar.core.conversation import DocumentPart, ImagePart, Job, Message, ModelRequest, Part, TextPart
from sidecar.core.kinds import Role

__all__ = [
    "SUMMARIZER_SYSTEM",
    "SUMMARY_ACK",
    "SUMMARY_PREFIX",
    "prefix_end",
    "prefix_key",
    "summary_request",
    "summary_turns",
]

SUMMARIZER_SYSTEM = (
    "You summarize the earlier part of a conversation between a user and an AI assistant that used tools, so "
    "that the assistant can go on without it. Keep every fact, decision, name, number, file, tool result and "
    "open question the rest of the conversation may need; leave out pleasantries. Write the summary only."
)
SUMMARY_PREFIX = "[compacted by the sidecar: a summary of the earlier conversation]\n"
SUMMARY_ACK = "Understood: I will go on from that summary."
_ROLES = {Role.USER: "user", Role.ASSISTANT: "assistant", Role.TOOL: "tool", Role.UNSPECIFIED: "user"}


def prefix_end(messages: Sequence[Message]) -> int:
    """How many leading messages a summary replaces: all before the last user turn."""
    end = last_user_turn(messages)
    return end if end < len(messages) else 0  # no user turn: nothing is the prefix of one


def _part_text(p: Part) -> str:
    if isinstance(p, TextPart):
        return p.text
    if isinstance(p, DocumentPart) and p.text is not None:
        return p.text
    kind = "image" if isinstance(p, ImagePart) else "document"
    return f"[{kind} {p.media_type or p.url}]"


def _transcript(prefix: Sequence[Message]) -> str:
    lines: list[str] = []
    for m in prefix:
        who = _ROLES.get(m.role, "user")
        said = m.text or "\n".join(_part_text(p) for p in m.parts)
        if said:
            lines.append(f"{who}: {said}")
        for c in m.tool_calls:
            lines.append(f"{who} called tool {c.name}({c.arguments_json})")
        for r in m.tool_results:
            content = r.content or "\n".join(_part_text(p) for p in r.parts)
            lines.append(f"tool {r.name or r.call_id} {'failed' if r.is_error else 'returned'}: {content}")
    return "\n".join(lines)


def _fitted(transcript: str, max_chars: int | None) -> str:
    """The transcript within ``max_chars``: its start and its end kept, the middle left out (and said so)."""
    if max_chars is None or len(transcript) <= max_chars:
        return transcript
    left = len(transcript) - max_chars
    head = max_chars // 2
    return f"{transcript[:head]}\n[... {left} characters left out ...]\n{transcript[len(transcript) - head :]}"


def summary_request(
    prefix: Sequence[Message], summarizer: str, max_tokens: int, job: Job, *, max_chars: int | None = None
) -> ModelRequest:
    """The summarizer's call: the prefix as a transcript (at most ``max_chars``: what the summarizer's own window
    holds, its middle left out past it), the summary capped at ``max_tokens``."""
    text = "Summarize this conversation:\n\n" + _fitted(_transcript(prefix), max_chars)
    return ModelRequest(
        model=summarizer,
        messages=(Message(Role.USER, text),),
        system=SUMMARIZER_SYSTEM,
        max_output_tokens=max_tokens,
        job=job,
    )


def _canonical(m: Message) -> dict[str, Any]:
    return {
        "role": int(m.role),
        "text": m.text,
        "parts": [_part_text(p) + (p.data.hex() if isinstance(p, ImagePart | DocumentPart) else "") for p in m.parts],
        "calls": [[c.id, c.name, c.arguments_json] for c in m.tool_calls],
        "results": [
            [r.call_id, r.name, r.content, r.is_error, [_part_text(p) for p in r.parts]] for r in m.tool_results
        ],
    }


def prefix_key(prefix: Sequence[Message], summarizer: str, max_tokens: int) -> str:
    """The cache key of a prefix's summary: sha256 of its canonical JSON, the summarizer and the cap
    (reasoning is left out: the transcript the summarizer reads holds none)."""
    doc = {"summarizer": summarizer, "max_tokens": max_tokens, "messages": [_canonical(m) for m in prefix]}
    raw = json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def summary_turns(summary: str) -> tuple[Message, Message]:
    """What replaces the prefix: the summary as a user message, taken by an assistant message."""
    return Message(Role.USER, SUMMARY_PREFIX + summary), Message(Role.ASSISTANT, SUMMARY_ACK)
