"""The OpenAI Responses wire as the fake provider speaks it (the format: ``formats.openai_responses``).

Its route is ``/v1/responses`` (and ``/responses``). A stream is named events, each data object
with its ``type`` and ``sequence_number``, each in its part::

    open   response.created, response.in_progress
    body   response.output_item.added, response.content_part.added, *.done, response.output_item.done
    delta  response.output_text.delta | response.refusal.delta | response.function_call_arguments.delta |
           response.reasoning_summary_text.delta
    close  response.completed | response.incomplete (the whole response, its usage)

No end marker: the body ends after the last event (``no_end_marker`` drops it, as ``end_early`` would).
An error after the stream began is an ``error`` event (``{"type": "error", "code", "message",
"param", "sequence_number"}``) and nothing after it.

The error presets and the headers are Chat Completions' (``_openai.OPENAI``): the Responses API
answers its errors in the same body, with the same codes and rate-limit headers.

With ``reasoning`` asked for, the reply begins with a reasoning item: its summary (when
``reasoning.summary`` is set), an id, and, with ``include: ["reasoning.encrypted_content"]``, an
encrypted content the fake can verify (an HMAC over the id under the fake's own key). What it checks
of a request, as the API does (a 400 ``invalid_request_error``)::

    a reasoning item sent back      its encrypted_content verifies for its id (any byte changed: refused)
    a reasoning item with no        with store false, refused: "Items are not persisted when store is
      encrypted_content               set to false"
    the request's shape             the format's front reads it (an unknown key or item is refused);
                                    keys the API takes and the fake does not act on (``UNREAD_KEYS``:
                                    metadata, service_tier, prompt_cache_key, truncation ...) are set aside
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any

from sidecar.core.conversation import ReasoningPart
from sidecar.core.stream import ReasoningDelta
from sidecar.fakes._brain import Reply, tokens_for
from sidecar.fakes._conversation import Conversation, Hints, conversation_of
from sidecar.fakes._sse import Part, Plan, SseEvent, split_text
from sidecar.fakes._wire import ErrorSpec, Exchange, Wire
from sidecar.providers.formats.chat import ChatReply
from sidecar.providers.formats.openai_chat.fake import OPENAI
from sidecar.providers.formats.openai_responses import FORMAT
from sidecar.providers.formats.openai_responses.vocab import INCLUDE, signature_of
from sidecar.providers.formats.protocol import Sse

__all__ = ["RESPONSES", "UNREAD_KEYS", "encrypt"]

_KEY = b"sidecar-fake-responses-reasoning-key"
UNREAD_KEYS = frozenset(
    {"metadata", "service_tier", "prompt_cache_key", "prompt_cache_retention", "truncation", "top_logprobs",
     "max_tool_calls", "stream_options"}
)  # fmt: skip
"""Keys the API takes that the fake does not act on: accepted and set aside."""
_DELTAS = frozenset(
    {
        "response.output_text.delta",
        "response.refusal.delta",
        "response.function_call_arguments.delta",
        "response.reasoning_summary_text.delta",
    }
)


def encrypt(item_id: str, seed: str) -> str:
    """An encrypted content the fake can verify for ``item_id``: a nonce and its MAC, base64."""
    nonce = hashlib.sha256(seed.encode()).digest()[:12]
    return base64.b64encode(nonce + hmac.new(_KEY, nonce + item_id.encode(), hashlib.sha256).digest()).decode()


def _verifies(item_id: str, encrypted: str) -> bool:
    try:
        raw = base64.b64decode(encrypted, validate=True)
    except (binascii.Error, ValueError):
        return False
    mac = hmac.new(_KEY, raw[:12] + item_id.encode(), hashlib.sha256).digest()
    return len(raw) > 12 and hmac.compare_digest(raw[12:], mac)


def _bad(message: str, param: str | None = None, code: str | None = None) -> ErrorSpec:
    return ErrorSpec(400, "invalid_request_error", message, code, param)


@dataclass
class _Asked(Conversation):
    reasoning: bool = False
    summary: bool = False
    encrypted: bool = False


class _Responses(Wire):
    name = FORMAT.name
    front = FORMAT.front
    reply_prefix = "resp_fake"
    call_prefix = "call_fake"

    def refuse(self, body: dict[str, Any]) -> ErrorSpec | None:
        items = body.get("input")
        for i, item in enumerate(items if isinstance(items, list) else []):
            if not isinstance(item, dict) or item.get("type") != "reasoning":
                continue
            item_id, encrypted = item.get("id"), item.get("encrypted_content")
            if encrypted is None and body.get("store") is False:
                return _bad(
                    f"Item with id '{item_id}' not found. Items are not persisted when `store` is set to false. "
                    "Try again with `store` set to true, or remove this item from your input.",
                    "input",
                )
            if not (isinstance(item_id, str) and isinstance(encrypted, str) and _verifies(item_id, encrypted)):
                return _bad(
                    f"The encrypted content for item {item_id} could not be verified.",
                    f"input[{i}].encrypted_content",
                    "invalid_encrypted_content",
                )
        return None

    def hints(self, body: dict[str, Any]) -> tuple[Hints, dict[str, Any]]:
        choice = body.get("tool_choice")
        forced = choice.get("name") if isinstance(choice, dict) and isinstance(choice.get("name"), str) else None
        rest = {k: v for k, v in body.items() if k not in UNREAD_KEYS}
        return Hints(forced_tool=forced, tools_disabled=choice == "none"), rest

    def parse(self, body: dict[str, Any]) -> Conversation:
        hints, rest = self.hints(body)
        conv = conversation_of(self.front.parse(rest), hints, body.get("tools"))
        fields = {name: getattr(conv, name) for name in Conversation.__dataclass_fields__}
        reasoning = body.get("reasoning")
        include = body.get("include")
        return _Asked(
            **fields,
            reasoning=isinstance(reasoning, dict),
            summary=isinstance(reasoning, dict) and reasoning.get("summary") is not None,
            encrypted=isinstance(include, list) and INCLUDE in include,
        )

    def chat_reply(self, reply: Reply, ex: Exchange, input_tokens: int, output_tokens: int) -> ChatReply:
        out = super().chat_reply(reply, ex, input_tokens, output_tokens)
        asked = ex.conversation
        if isinstance(asked, _Asked) and asked.reasoning and out.refusal is None:
            plan = f"I will call {', '.join(c.name for c in out.tool_calls)}." if out.tool_calls else "I can answer."
            text = f"**Reading the question**\n\nThe user asks: {asked.last_user_text[:120]!r}. {plan}"
            item_id = f"rs_fake{ex.n:08d}"
            encrypted = encrypt(item_id, f"{ex.n}:{text}") if asked.encrypted else ""
            thinking = tokens_for(len(text))
            out.reasoning = [ReasoningPart(text if asked.summary else "", signature_of(item_id, encrypted))]
            out.output_tokens, out.reasoning_tokens = out.output_tokens + thinking, out.reasoning_tokens + thinking
        return out

    def stream_events(self, plan: Plan, ex: Exchange, created: int) -> list[SseEvent]:
        final = self.chat_reply(plan.reply, ex, plan.input_tokens, plan.output_tokens)
        writer = self.front.writer(self.head(ex, created))
        raw: list[Sse] = writer.start(plan.input_tokens)
        for i, r in enumerate(final.reasoning):
            raw += writer.delta(ReasoningDelta(i))  # the item added, before its summary
            for words in split_text(r.text):
                raw += writer.delta(ReasoningDelta(i, text=words))
            if r.signature:
                raw += writer.delta(ReasoningDelta(i, signature=r.signature))
        raw += self.piece_events(writer, plan, ex)
        raw += writer.final(final)
        return self.tagged(raw)

    def part_of(self, name: str, data: dict[str, Any] | str) -> Part:
        kind = data.get("type") if isinstance(data, dict) else name
        if kind in ("response.created", "response.in_progress"):
            return "open"
        if kind in _DELTAS:
            return "delta"
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            return "close"
        return "body"

    def preset_error(self, preset: str, ex: Exchange) -> ErrorSpec | None:
        return OPENAI.preset_error(preset, ex)

    def status_error(self, status: int) -> ErrorSpec:
        return OPENAI.status_error(status)

    def headers(self, ex: Exchange, status: int) -> dict[str, str]:
        return OPENAI.headers(ex, status)

    def unknown_events(self, ex: Exchange) -> list[SseEvent]:
        # An SSE comment (a proxy's keep-alive), then an event of a type this client does not know yet.
        data = {"type": "response.fake_future_event", "sequence_number": 0, "note": "a new event type"}
        return [SseEvent("keep-alive", comment=True), SseEvent(json.dumps(data), "response.fake_future_event")]


RESPONSES = _Responses()
