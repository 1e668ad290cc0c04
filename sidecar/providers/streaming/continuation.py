"""``mid_stream: continue``: a broken stream continued by a prefill of the text the caller holds.

``continue`` (``MidStream.CONTINUE``): a fault after text reached the caller, on a deployment that
accepts a prefill (``prefills.PrefillMemory``: declared, else tried), when the caller holds text only (no tool-call or
reasoning deltas) and no reasoning was asked for, is a Retry like ``restart``'s, but nothing is
voided: the next attempt of the same engine sends the conversation with the text the caller holds
as a last assistant message (its trailing whitespace held back: Anthropic refuses a prefill ending
in it, and the continuation's leading whitespace that the caller already holds is dropped), and
its deltas are the rest of the reply. The reply judged and returned is the held text and the
continuation joined. The broken attempt's tokens are counted (estimated: the request's input
estimate, a token per four characters delivered). A continuation attempt answered with a 400 (a
provider that takes no prefill after all) is not that 400: the call ends with STREAM_INTERRUPTED,
the original fault's reason and the refusal's, so a route moves on to its next deployment (and a
deployment whose ``prefill`` is unset is remembered as one with none: ``prefills``). Where
the caller holds more than text, or the deployment takes no prefill, STREAM_INTERRUPTED as under
``fail`` (a route's next deployment that accepts a prefill continues it: ``providers.routes``).

The sender decides (``StreamSender._continue``); this module holds the text: the request prefilled
(``prefilled``), the held whitespace the continuation repeats (``past_seam``), the reply joined
(``continued_text``).
"""

from __future__ import annotations

from dataclasses import replace

from sidecar.core.conversation import Message
from sidecar.core.kinds import Role
from sidecar.providers.formats.chat import ChatRequest

__all__ = ["CHARS_PER_TOKEN", "PREFILL_REFUSED", "continued_text", "past_seam", "prefilled"]

CHARS_PER_TOKEN = 4
"""A broken attempt's output tokens, estimated from the characters it delivered (no usage came)."""
PREFILL_REFUSED = frozenset({400, 422})
"""The statuses of a continuation attempt's answer that mean "no prefill here" (not the call's fault)."""


def past_seam(seam: str, text: str) -> tuple[str, str]:
    """``text`` without what it repeats of ``seam`` (whitespace the caller already holds), and what is
    left of the seam to match (nothing once ``text`` differs from it)."""
    k = 0
    while k < len(seam) and k < len(text) and seam[k] == text[k]:
        k += 1
    if k == len(text):
        return "", seam[k:]
    return text[k:], ""


def continued_text(held: str, continuation: str) -> str:
    """The whole reply: the text held, and the continuation past the held whitespace it repeats."""
    seam = held[len(held.rstrip()) :]
    rest, _ = past_seam(seam, continuation)
    return held + rest


def prefilled(chat: ChatRequest, prefill: str) -> ChatRequest:
    """``chat`` with ``prefill`` as its last assistant message (joined to one the caller ended with)."""
    messages = list(chat.messages)
    last = messages[-1] if messages else None
    if last is not None and last.role is Role.ASSISTANT and not last.tool_calls and not last.parts:
        messages[-1] = replace(last, text=last.text + prefill)
    else:
        messages.append(Message(Role.ASSISTANT, prefill))
    return replace(chat, messages=messages)
