"""The provider's deterministic default behaviour, wire-neutral."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from typing import Any

from ._conversation import Conversation
from ._schema import example_for, tool_arguments_for

__all__ = ["Reply", "ToolCall", "apply_budget", "continued", "default_reply", "tokens_for"]

SUMMARY_CHARS = 200


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: Any  # an object, or a string sent verbatim (may be broken JSON on purpose)

    def arguments_json(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass(frozen=True)
class Reply:
    """``finish`` is neutral: stop | length | tool_calls | content_filter | refusal."""

    text: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish: str = "stop"
    refusal: str | None = None

    def output_chars(self) -> int:
        text = len(self.text or "") + len(self.refusal or "")
        return text + sum(len(c.name) + len(c.arguments_json()) for c in self.tool_calls)


def tokens_for(chars: int) -> int:
    return max(1, math.ceil(chars / 4))


def _pick_tool(conv: Conversation) -> str | None:
    if conv.tools_disabled or not conv.tools:
        return None
    if conv.forced_tool and any(t.name == conv.forced_tool for t in conv.tools):
        return conv.forced_tool
    return conv.tools[0].name


def default_reply(conv: Conversation) -> Reply:
    """One tool call while no tool result is in; then JSON if asked, a summary, or an echo."""
    tool = _pick_tool(conv)
    if tool is not None and not conv.tool_results:
        schema = next(t.schema for t in conv.tools if t.name == tool)
        args = tool_arguments_for(schema, conv.last_user_text)
        return Reply(text=None, tool_calls=[ToolCall(tool, args)], finish="tool_calls")
    if conv.json_mode:
        wanted = conv.json_schema
        value = example_for(wanted) if wanted is not None else {"answer": _prose(conv)}
        return Reply(text=json.dumps(value))
    return Reply(text=_prose(conv))


def _prose(conv: Conversation) -> str:
    if conv.tool_results:
        return "Based on the tool result: " + conv.tool_results[-1][:SUMMARY_CHARS]
    return "You said: " + conv.last_user_text


def apply_budget(reply: Reply, max_tokens: int | None) -> Reply:
    """Cut a reply longer than ``max_tokens`` (≈ 4 chars a token) and finish with ``length``."""
    if max_tokens is None or tokens_for(reply.output_chars()) <= max_tokens:
        return reply
    room = max_tokens * 4
    calls = [ToolCall(c.name, c.arguments_json()[:room]) for c in reply.tool_calls]
    text = None if reply.text is None else reply.text[:room]
    return replace(reply, text=text, tool_calls=calls, finish="length")


def continued(reply: Reply, prefill: str | None) -> Reply:
    """A prefilled request's reply: what follows ``prefill`` in ``reply`` (the reply it would have been
    without the prefill), as a provider continues a last assistant message; a reply that does not begin
    with the prefill is written whole after it."""
    if prefill is None or reply.text is None:
        return reply
    text = reply.text[len(prefill) :] if reply.text.startswith(prefill) else reply.text
    return replace(reply, text=text)
