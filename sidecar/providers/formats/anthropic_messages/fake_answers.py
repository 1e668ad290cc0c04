"""What the fake Anthropic answers beyond the brain's reply::

    thinking on                   a thinking block first (text about the question, signed); a
                                  redacted_thinking block instead when the user's text holds
                                  ``REDACTED_TRIGGER`` (Anthropic's own test string); its tokens are in
                                  output_tokens and usage.output_tokens_details.thinking_tokens
    cache_control                 the provider's prompt cache: the prompt up to each breakpoint (tools,
                                  system, messages in order) is a prefix; the longest one seen before
                                  (by this fake, since its last reset) is read (cache_read_input_tokens),
                                  the rest up to the last breakpoint is written (cache_creation_input_tokens,
                                  by ttl in cache_creation); input_tokens is what is left. No minimum
                                  prompt length: any prefix caches
    stop_sequences                the reply's text stops before the first one it holds: stop_reason
                                  stop_sequence, stop_sequence the one met

``asked_of`` reads a request into ``Asked`` (the brain's view, and what this wire answers by);
``thought_of``, ``account`` and ``stopped`` make the answer's parts of it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any

from sidecar.core.content import image_tokens, parts_tokens
from sidecar.core.conversation import ImagePart, ModelRequest, Part, ReasoningPart, TextPart
from sidecar.core.kinds import Role
from sidecar.fakes._brain import Reply, tokens_for
from sidecar.fakes._conversation import Conversation
from sidecar.fakes._sse import Piece, Plan
from sidecar.providers.formats.anthropic_messages.fake_signing import redacted_data, sign_thinking

__all__ = ["REDACTED_TRIGGER", "Asked", "account", "asked_of", "stopped", "stopped_plan", "thought_of"]

REDACTED_TRIGGER = "ANTHROPIC_MAGIC_STRING_TRIGGER_REDACTED_THINKING_46C9A13E193C177646C7398A98432ECCCE4C1253"
"""A user's text holding this gets a redacted_thinking block (the string Anthropic documents for testing)."""


@dataclass
class Asked(Conversation):
    """The brain's view of a Messages request, and what this wire answers beyond it."""

    thinking: bool = False
    redact: bool = False
    stop: tuple[str, ...] = ()
    breakpoints: tuple[tuple[str, int, str], ...] = ()
    """Each cache breakpoint in prompt order: the prefix's digest, its tokens, its ttl."""
    cached: tuple[int, int, int, int] | None = None
    """Once the reply is made: tokens read, written, written for 5m, written for 1h."""
    met_stop: str | None = None


def _chars(part: Part) -> int:
    if isinstance(part, ImagePart):
        return 4 * image_tokens(part)
    tokens, chars = parts_tokens([part])
    return 4 * tokens + chars


def _text_of(parts: tuple[Part, ...]) -> str:
    return "".join(p.text for p in parts if isinstance(p, TextPart))


def asked_of(conv: Conversation, request: ModelRequest) -> Asked:
    """``conv`` with what this wire answers by: parts counted, thinking, the cache's prefixes, stops."""
    items: list[tuple[Any, int, Any]] = [(replace(t, cache=None), len(t.parameters_json) + len(t.description)
                                          + len(t.name), t.cache) for t in request.tools]  # fmt: skip
    if request.system:
        items.append((request.system, len(request.system), request.controls.system_cache))
    texts, results = [], []
    for m in request.messages:
        items += [(r, len(r.text) + len(r.redacted_data), None) for r in m.reasoning]
        for r in m.tool_results:
            if r.parts:
                items += [(replace(p, cache=None), _chars(p), p.cache) for p in r.parts]
            else:
                items.append((r, len(r.content), None))
            results.append(r.content or _text_of(r.parts))
        items += [(replace(p, cache=None), _chars(p), p.cache) for p in m.content]
        items += [(c, len(c.name) + len(c.arguments_json), None) for c in m.tool_calls]
        if m.role is Role.USER and (m.text or _text_of(m.parts)):
            texts.append(m.text or _text_of(m.parts))
    digest = hashlib.sha256(request.model.encode())
    total, breakpoints = 0, []
    for identity, chars, cache in items:
        digest.update(repr(identity).encode())
        total += chars
        if cache is not None:
            breakpoints.append((digest.copy().hexdigest(), tokens_for(total), cache.ttl or "5m"))
    fields = {name: getattr(conv, name) for name in Conversation.__dataclass_fields__}
    fields.update(input_chars=total, tool_results=results, last_user_text=texts[-1] if texts else "")
    return Asked(
        **fields,
        thinking=request.controls.reasoning is not None,
        redact=any(REDACTED_TRIGGER in t for t in texts),
        stop=request.controls.stop,
        breakpoints=tuple(breakpoints),
    )


def account(asked: Asked, seen: set[str]) -> tuple[int, int, int, int]:
    """The prompt cache's read and write for this request (once), the written by ttl; what it saw kept."""
    if asked.cached is None:
        hits = [tokens for digest, tokens, _ in asked.breakpoints if digest in seen]
        read = max(hits, default=0)
        by_ttl = {"5m": 0, "1h": 0}
        done = read
        for _, tokens, ttl in asked.breakpoints:
            if tokens > done:
                by_ttl[ttl] += tokens - done
                done = tokens
        seen.update(digest for digest, _, _ in asked.breakpoints)
        asked.cached = (read, by_ttl["5m"] + by_ttl["1h"], by_ttl["5m"], by_ttl["1h"])
    return asked.cached


def thought_of(asked: Asked, reply: Reply) -> ReasoningPart | None:
    """The reasoning a reply begins with when thinking is on: signed text, or redacted data."""
    if not asked.thinking:
        return None
    if asked.redact:
        return ReasoningPart(redacted_data=redacted_data(asked.last_user_text))
    plan = f"I will call {', '.join(c.name for c in reply.tool_calls)}." if reply.tool_calls else "I can answer."
    text = f"The user asks: {asked.last_user_text[:120]!r}. {plan}"
    return ReasoningPart(text, sign_thinking(text))


def stopped(reply: Reply, stops: tuple[str, ...]) -> tuple[Reply, str | None]:
    """The reply cut before the first stop sequence its text holds (and that sequence)."""
    text = reply.text or ""
    met = sorted((text.find(s), s) for s in stops if s and s in text)
    if not met:
        return reply, None
    at, stop = met[0]
    return replace(reply, text=text[:at], tool_calls=[], finish="stop"), stop


def stopped_plan(plan: Plan, reply: Reply) -> Plan:
    """``plan``'s pieces as far as ``reply`` (a text cut short) goes."""
    room, pieces = len(reply.text or ""), []
    for piece in plan.pieces:
        if piece.kind != "text" or room <= 0:
            continue
        pieces.append(Piece("text", piece.text[:room]))
        room -= len(piece.text)
    return Plan(reply, tuple(pieces), plan.input_tokens, tokens_for(reply.output_chars()))
