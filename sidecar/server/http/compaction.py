"""What a call compacted, as the ``sidecar`` field of a front's reply says it (``compaction``).

key                what it holds
trigger            ``estimate`` (the sidecar's estimate did not fit) or ``provider`` (it said too long)
tokens_before      the conversation's estimated input tokens before compaction, ``tokens_after`` after
steps              each strategy that changed something: ``strategy``, ``turns`` (the caller's
                   messages by index, in the core's order), its tokens before and after
summarizer_calls   summarizing calls made (0: a summary of the same prefix was reused)
messages           the compacted conversation in the contract's shape (``role``, ``text``, ``parts``,
                   ``tool_calls``, ``tool_results``), for a caller that adopts it
"""

from __future__ import annotations

from typing import Any

from sidecar.core.conversation import Compaction, Message, TextPart

__all__ = ["compaction_json"]


def compaction_json(c: Compaction) -> dict[str, Any]:
    """What a call compacted, in the ``sidecar`` field: the sizes, the steps, the summarizer's calls, and the
    compacted conversation in the contract's shape (``role``, ``text``, ``tool_calls``, ``tool_results``) for
    a caller that adopts it."""
    return {
        "trigger": c.trigger,
        "tokens_before": c.tokens_before,
        "tokens_after": c.tokens_after,
        "steps": [
            {
                "strategy": s.strategy,
                "turns": list(s.turns),
                "tokens_before": s.tokens_before,
                "tokens_after": s.tokens_after,
            }
            for s in c.steps
        ],
        "summarizer_calls": c.summarizer_calls,
        "messages": [_message_json(m) for m in c.messages],
    }


def _message_json(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role.name.lower()}
    if m.text:
        out["text"] = m.text
    if m.parts:
        out["parts"] = [{"text": p.text} if isinstance(p, TextPart) else {"type": type(p).__name__} for p in m.parts]
    if m.tool_calls:
        out["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments_json} for c in m.tool_calls]
    if m.tool_results:
        out["tool_results"] = [
            {"call_id": r.call_id, "name": r.name, "content": r.content, "is_error": r.is_error} for r in m.tool_results
        ]
    return out
