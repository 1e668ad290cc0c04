"""The building blocks of a streamed reply: its pieces, and server-sent events.

A reply is cut into wire-neutral pieces, in the order providers stream them::

    text     a fragment of the reply text: a word (at most DELTA_CHARS chars of it) with the space before it
    refusal  a fragment of a refusal (OpenAI ``delta.refusal``; Anthropic streams it as text)
    tool     the start of tool call ``index``: its id and name
    args     a fragment of that call's arguments JSON, at most ARGS_CHARS chars

``text``, ``refusal`` and ``args`` pieces are the *deltas*.  A wire renders the pieces as
:class:`SseEvent` s, each tagged with its part of the stream:

    open   before any content (OpenAI: the role chunk; Anthropic: ``message_start``)
    delta  one delta
    body   other content events (a tool's start chunk; ``content_block_start/stop``, ``ping``)
    close  after the content (finish chunk, usage chunk, ``[DONE]``; ``message_delta``, ``message_stop``)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from ._brain import Reply, tokens_for
from ._conversation import Conversation

__all__ = ["ARGS_CHARS", "DELTA_CHARS", "Part", "Piece", "Plan", "SseEvent", "plan_for", "split_text"]

DELTA_CHARS = 8  # the longest text delta by default (a word longer than that is cut)
ARGS_CHARS = 12  # the longest tool-arguments fragment by default
_WORD = re.compile(rf"\s*\S{{1,{DELTA_CHARS}}}|\s+")  # a word with its leading space, or trailing space

Part = Literal["open", "delta", "body", "close"]


@dataclass(frozen=True)
class SseEvent:
    """One server-sent event: ``event:`` (optional) and one ``data:`` line, or a comment line."""

    data: str
    event: str | None = None
    part: Part = "body"
    comment: bool = False

    @classmethod
    def of(cls, obj: Any, event: str | None = None, part: Part = "body") -> SseEvent:
        return cls(json.dumps(obj, separators=(",", ":")), event, part)

    def encode(self) -> bytes:
        if self.comment:
            return f": {self.data}\n\n".encode()
        head = "" if self.event is None else f"event: {self.event}\n"
        return f"{head}data: {self.data}\n\n".encode()


@dataclass(frozen=True)
class Piece:
    kind: Literal["text", "refusal", "tool", "args"]
    text: str = ""  # the fragment; the tool's name for ``tool``
    index: int = 0  # the tool call it belongs to

    @property
    def is_delta(self) -> bool:
        return self.kind != "tool"


@dataclass(frozen=True)
class Plan:
    """A reply cut into pieces, with the usage the wire reports."""

    reply: Reply
    pieces: tuple[Piece, ...]
    input_tokens: int
    output_tokens: int

    @property
    def deltas(self) -> int:
        return sum(1 for p in self.pieces if p.is_delta)


def split_text(text: str, size: int | None = None) -> list[str]:
    """Cut ``text`` into deltas that join back to it: words (``size`` None) or ``size``-char slices."""
    if size is not None:
        return [text[i : i + size] for i in range(0, len(text), size)]
    return _WORD.findall(text)


def _pieces(reply: Reply, size: int | None) -> list[Piece]:
    out = [Piece("text", t) for t in split_text(reply.text or "", size)]
    out += [Piece("refusal", t) for t in split_text(reply.refusal or "", size)]
    for i, call in enumerate(reply.tool_calls):
        out.append(Piece("tool", call.name, i))
        args = call.arguments_json()
        out += [Piece("args", t, i) for t in split_text(args, size or ARGS_CHARS) if t]
    return out


def plan_for(reply: Reply, conversation: Conversation, delta_chars: int | None = None) -> Plan:
    """``reply`` cut into pieces, with the same usage its non-streamed body reports."""
    pieces = tuple(_pieces(reply, delta_chars))
    return Plan(reply, pieces, tokens_for(conversation.input_chars), tokens_for(reply.output_chars()))
