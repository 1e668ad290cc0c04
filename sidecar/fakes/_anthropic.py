"""The Anthropic Messages wire as the fake provider speaks it (the format: ``formats.anthropic_messages``).

A stream (``"stream": true``) is named events, each with its ``type`` in the data too, each in its part::

    open   message_start        {"message": {..., "content": [], "stop_reason": null,
                                 "usage": {"input_tokens": N, "cache_*": N, "output_tokens": 1}}}
    body   content_block_start  {"index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}
    delta  content_block_delta  {"index": 0, "delta": {"type": "thinking_delta", "thinking": "..."}}
    delta  content_block_delta  {"index": 0, "delta": {"type": "signature_delta", "signature": "..."}}
    body   content_block_stop   {"index": 0}                  (those three with thinking on; redacted:
                                                               one content_block_start redacted_thinking {data})
    body   content_block_start  {"index": 1, "content_block": {"type": "text", "text": ""}}
    body   ping                 (once, after the first content_block_start; before the end when none)
    delta  content_block_delta  {"index": 1, "delta": {"type": "text_delta", "text": "..."}}
    body   content_block_stop   {"index": 1}
    body   content_block_start  {"index": 2, "content_block": {"type": "tool_use", "id", "name", "input": {}}}
    delta  content_block_delta  {"index": 2, "delta": {"type": "input_json_delta", "partial_json": "..."}}
    body   content_block_stop   {"index": 2}
    close  message_delta        {"delta": {"stop_reason", "stop_sequence"}, "usage": {...}}
    close  message_stop

The blocks are those of the non-streamed body (a refusal streams as text).  An error after the
stream began is ``event: error`` with ``{"type": "error", "error": {"type", "message"}}``. The presets
``content_policy`` and ``content_filter`` are both Anthropic's 400 "Output blocked by content filtering
policy" (Anthropic names no category: a step's ``categories`` are Azure's, and this wire sends none).

What it checks, as the API does (a 400 ``invalid_request_error`` with the API's words)::

    the request's shape           the format's front reads it (an unknown key, block or source is refused);
                                  beside what it carries it takes output_format, service_tier,
                                  inference_geo, speed and container (recorded, not acted on)
    thinking (enabled/adaptive)   budget_tokens >= 1024 and < max_tokens; temperature only 1; no top_k;
                                  top_p in [0.95, 1]; tool_choice auto or none; no assistant prefill;
                                  a tool turn (the last message has tool_result blocks) whose assistant
                                  turn has tool_use must begin with its thinking / redacted_thinking block
    every thinking block          its signature verifies (an HMAC of its text under the fake's own key:
                                  any byte of the text or the signature changed is refused); every
                                  redacted_thinking block's data verifies the same way
    cache_control                 at most 4 blocks (tools, system, messages, tool_result content);
                                  a ttl "1h" one never after a "5m" one
    images                        a base64 source: image/jpeg, png, gif or webp, valid base64, and the
                                  bytes are of that type
    PDFs                          a base64 source: application/pdf, valid base64, bytes that begin %PDF-

What it answers beyond the brain's reply:

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
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sidecar.core.content import image_tokens, parts_tokens
from sidecar.core.conversation import ImagePart, ModelRequest, Part, ReasoningPart, TextPart
from sidecar.core.details import InvalidInputDetail
from sidecar.core.kinds import Role
from sidecar.core.stream import ReasoningDelta, TextDelta, ToolCallDelta
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.formats.anthropic_messages import FORMAT
from sidecar.providers.formats.anthropic_messages.vocab import (
    MAX_CACHE_BREAKPOINTS,
    MIN_THINKING_BUDGET,
    PDF,
    RATE_LIMIT_HEADERS,
    THINKING_TOP_P,
)
from sidecar.providers.formats.chat import ChatReply
from sidecar.providers.formats.protocol import Sse

from ._brain import Reply, tokens_for
from ._conversation import Conversation, Hints, conversation_of
from ._limits import Taken
from ._sse import Part as StreamPart
from ._sse import Piece, Plan, SseEvent, split_text
from ._wire import ErrorSpec, Exchange, Wire

__all__ = ["ANTHROPIC", "CREDIT_MESSAGE", "REDACTED_TRIGGER", "redacted_data", "sign_thinking"]

CONTENT_FILTER_MESSAGE = "Output blocked by content filtering policy"
"""Anthropic's 400 when its filter blocks the output (both content-policy presets; mid-stream, an error event)."""
CREDIT_MESSAGE = (
    "Your credit balance is too low to access the Anthropic API. "
    "Please go to Plans & Billing to upgrade or purchase credits."
)
REDACTED_TRIGGER = "ANTHROPIC_MAGIC_STRING_TRIGGER_REDACTED_THINKING_46C9A13E193C177646C7398A98432ECCCE4C1253"
"""A user's text holding this gets a redacted_thinking block (the string Anthropic documents for testing)."""
_KEY = b"sidecar-fake-anthropic-thinking-key"
"""The fake's own signing key: signatures verify against this fake only, as the API's against the API."""
_PASSED = ("output_format", "service_tier", "inference_geo", "speed", "container")
"""Keys of the API the front does not carry that the fake takes (and ignores), so a provider option can set them."""
_PARTS: dict[str, StreamPart] = {
    "message_start": "open",
    "content_block_delta": "delta",
    "message_delta": "close",
    "message_stop": "close",
}
"""Every other event (a block's start and stop, ping) is ``body``."""
_IMAGE_TYPES = {
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}
_DOCS = "Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


def _rfc3339(offset_s: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + offset_s))


def _mac(kind: bytes, data: bytes) -> bytes:
    return hmac.new(_KEY, kind + b"\0" + data, hashlib.sha256).digest()


def sign_thinking(text: str) -> str:
    """The signature the fake gives (and wants back with) a thinking block's text."""
    return base64.b64encode(_mac(b"thinking", text.encode())).decode("ascii")


def redacted_data(seed: str) -> str:
    """Opaque redacted thinking the fake can verify: a nonce and its MAC."""
    nonce = hashlib.sha256(seed.encode()).digest()[:12]
    return base64.b64encode(nonce + _mac(b"redacted", nonce)).decode("ascii")


def _redacted_ok(data: str) -> bool:
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return False
    return len(raw) > 12 and hmac.compare_digest(raw[12:], _mac(b"redacted", raw[:12]))


def _refused(message: str, parameter: str = "") -> InvalidInput:
    return InvalidInput.worded(message, detail=InvalidInputDetail(parameter=parameter, value="", rule=message))


@dataclass
class _Asked(Conversation):
    """The brain's view of a Messages request, and what this wire answers beyond it."""

    thinking: bool = False
    redact: bool = False
    stop: tuple[str, ...] = ()
    breakpoints: tuple[tuple[str, int, str], ...] = ()
    """Each cache breakpoint in prompt order: the prefix's digest, its tokens, its ttl."""
    cached: tuple[int, int, int, int] | None = None
    """Once the reply is made: tokens read, written, written for 5m, written for 1h."""
    met_stop: str | None = None


# ---------------------------------------------------------------------------- what the API checks


def _blocks(content: Any) -> list[dict[str, Any]]:
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _check_thinking(body: dict[str, Any]) -> None:
    thinking = body.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind not in ("enabled", "adaptive"):
        return
    assert isinstance(thinking, dict)
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < MIN_THINKING_BUDGET:
            raise _refused("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
        if budget >= (body.get("max_tokens") or 0):
            raise _refused(f"`max_tokens` must be greater than `thinking.budget_tokens`. {_DOCS}")
    if body.get("temperature") not in (None, 1, 1.0):
        raise _refused(f"`temperature` may only be set to 1 when thinking is enabled. {_DOCS}")
    if body.get("top_k") is not None:
        raise _refused(f"`top_k` must be unset when thinking is enabled. {_DOCS}")
    low, high = THINKING_TOP_P
    top_p = body.get("top_p")
    if top_p is not None and not low <= top_p <= high:
        raise _refused(f"`top_p` must be greater than or equal to {low} and at most {high} with thinking. {_DOCS}")
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        raise _refused("Thinking may not be enabled when tool_choice forces tool use.")
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if messages and messages[-1].get("role") == "assistant":
        raise _refused("When thinking is enabled, the final message must be a user message (no prefill).")
    last = _blocks(messages[-1].get("content")) if messages else []
    if len(messages) < 2 or not any(b.get("type") == "tool_result" for b in last):
        return
    turn = len(messages) - 2
    content = _blocks(messages[turn].get("content"))
    if messages[turn].get("role") == "assistant" and any(b.get("type") == "tool_use" for b in content):
        first = content[0].get("type")
        if first not in ("thinking", "redacted_thinking"):
            raise _refused(
                f"messages.{turn}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{first}`. "
                "When `thinking` is enabled, a final `assistant` message must start with a thinking block "
                "(preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include "
                "thinking blocks from previous turns. To avoid this requirement, disable `thinking`. " + _DOCS,
                f"messages[{turn}].content[0]",
            )


def _check_prefill(body: dict[str, Any]) -> None:
    """A last assistant message (a prefill) may not end with whitespace, as the API says."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if not messages or messages[-1].get("role") != "assistant":
        return
    content = messages[-1].get("content")
    blocks = _blocks(content)
    last = content if isinstance(content, str) else (blocks[-1].get("text") if blocks else None)
    if isinstance(last, str) and last != last.rstrip():
        raise _refused("messages: final assistant content cannot end with trailing whitespace")


def _check_signatures(body: dict[str, Any]) -> None:
    for i, m in enumerate(body.get("messages") or []):
        if not isinstance(m, dict) or m.get("role") != "assistant":
            continue
        for j, b in enumerate(_blocks(m.get("content"))):
            at = f"messages.{i}.content.{j}"
            if b.get("type") == "thinking":
                signature, text = b.get("signature"), b.get("thinking")
                good = isinstance(text, str) and isinstance(signature, str)
                if not good or not hmac.compare_digest(str(signature), sign_thinking(str(text))):
                    raise _refused(f"{at}: Invalid `signature` in `thinking` block", f"messages[{i}].content[{j}]")
            elif b.get("type") == "redacted_thinking" and not _redacted_ok(str(b.get("data"))):
                raise _refused(f"{at}: Invalid `data` in `redacted_thinking` block", f"messages[{i}].content[{j}]")


def _cached_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every block with cache_control, in the order the prompt is read: tools, system, messages."""
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    out = [t for t in tools if t.get("cache_control")]
    out += [b for b in _blocks(body.get("system")) if b.get("cache_control")]
    for m in body.get("messages") or []:
        for b in _blocks(m.get("content") if isinstance(m, dict) else None):
            out += [c for c in _blocks(b.get("content")) if c.get("cache_control")]
            if b.get("cache_control"):
                out.append(b)
    return out


def _check_cache(body: dict[str, Any]) -> None:
    blocks = _cached_blocks(body)
    if len(blocks) > MAX_CACHE_BREAKPOINTS:
        raise _refused(f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. "
                       f"Found {len(blocks)}.")  # fmt: skip
    ttls = [b["cache_control"].get("ttl") or "5m" for b in blocks if isinstance(b["cache_control"], dict)]
    if "1h" in ttls and "5m" in ttls and ttls.index("5m") < len(ttls) - 1 - ttls[::-1].index("1h"):
        raise _refused("a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block")


def _check_sources(body: dict[str, Any]) -> None:
    for i, m in enumerate(body.get("messages") or []):
        for j, b in enumerate(_blocks(m.get("content") if isinstance(m, dict) else None)):
            _check_source(b, f"messages.{i}.content.{j}")
            for k, inner in enumerate(_blocks(b.get("content"))):
                _check_source(inner, f"messages.{i}.content.{j}.content.{k}")


def _check_source(block: dict[str, Any], at: str) -> None:
    source = block.get("source")
    if not isinstance(source, dict) or source.get("type") != "base64":
        return
    kind, media_type = block.get("type"), source.get("media_type")
    where = f"{at}.{'pdf' if kind == 'document' else kind}.source.base64"
    if kind == "image" and media_type not in _IMAGE_TYPES:
        raise _refused(f"{where}.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'")
    try:
        data = base64.b64decode(str(source.get("data")), validate=True)
    except (binascii.Error, ValueError):
        raise _refused(f"{where}.data: The {kind} data is not valid base64.") from None
    if kind == "image" and not data.startswith(_IMAGE_TYPES[str(media_type)]):
        raise _refused(f"{where}.data: Image does not match the provided media type {media_type}")
    if kind == "document" and (media_type != PDF or not data.startswith(b"%PDF-")):
        raise _refused(f"{where}: The PDF specified was not valid.")


# ---------------------------------------------------------------------------- what it answers


def _chars(part: Part) -> int:
    if isinstance(part, ImagePart):
        return 4 * image_tokens(part)
    tokens, chars = parts_tokens([part])
    return 4 * tokens + chars


def _text_of(parts: tuple[Part, ...]) -> str:
    return "".join(p.text for p in parts if isinstance(p, TextPart))


def _asked(conv: Conversation, request: ModelRequest) -> _Asked:
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
    return _Asked(
        **fields,
        thinking=request.controls.reasoning is not None,
        redact=any(REDACTED_TRIGGER in t for t in texts),
        stop=request.controls.stop,
        breakpoints=tuple(breakpoints),
    )


def _account(asked: _Asked, seen: set[str]) -> tuple[int, int, int, int]:
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


def _thought(asked: _Asked, reply: Reply) -> ReasoningPart | None:
    """The reasoning a reply begins with when thinking is on: signed text, or redacted data."""
    if not asked.thinking:
        return None
    if asked.redact:
        return ReasoningPart(redacted_data=redacted_data(asked.last_user_text))
    plan = f"I will call {', '.join(c.name for c in reply.tool_calls)}." if reply.tool_calls else "I can answer."
    text = f"The user asks: {asked.last_user_text[:120]!r}. {plan}"
    return ReasoningPart(text, sign_thinking(text))


def _stopped(reply: Reply, stops: tuple[str, ...]) -> tuple[Reply, str | None]:
    """The reply cut before the first stop sequence its text holds (and that sequence)."""
    text = reply.text or ""
    met = sorted((text.find(s), s) for s in stops if s and s in text)
    if not met:
        return reply, None
    at, stop = met[0]
    return replace(reply, text=text[:at], tool_calls=[], finish="stop"), stop


def _stopped_plan(plan: Plan, reply: Reply) -> Plan:
    """``plan``'s pieces as far as ``reply`` (a text cut short) goes."""
    room, pieces = len(reply.text or ""), []
    for piece in plan.pieces:
        if piece.kind != "text" or room <= 0:
            continue
        pieces.append(Piece("text", piece.text[:room]))
        room -= len(piece.text)
    return Plan(reply, tuple(pieces), plan.input_tokens, tokens_for(reply.output_chars()))


def _patched(event: SseEvent, change: dict[str, Any], key: str) -> SseEvent:
    data = json.loads(event.data)
    data[key].update(change)
    return SseEvent.of(data, event.event, event.part)


class _Anthropic(Wire):
    name = FORMAT.name
    front = FORMAT.front
    reply_prefix = "msg_fake"
    call_prefix = "toolu_fake"

    def parse(self, body: dict[str, Any]) -> Conversation:
        hints, rest = self.hints(body)
        ask = self.front.parse(rest)
        for check in (_check_thinking, _check_prefill, _check_signatures, _check_cache, _check_sources):
            check(body)
        return _asked(conversation_of(ask, hints, body.get("tools")), ask.request)

    def hints(self, body: dict[str, Any]) -> tuple[Hints, dict[str, Any]]:
        choice = body.get("tool_choice")
        forced, disabled = None, False
        if isinstance(choice, dict):
            disabled = choice.get("type") == "none"
            if choice.get("type") == "tool" and isinstance(choice.get("name"), str):
                forced = choice["name"]
        fmt = body.get("output_format")  # the structured-outputs beta's name for output_config.format
        fmt = fmt if isinstance(fmt, dict) else {}
        mode = fmt.get("type") == "json_schema"
        schema = fmt.get("schema") if mode and isinstance(fmt.get("schema"), dict) else None
        rest = {k: v for k, v in body.items() if k not in _PASSED}
        return Hints(forced_tool=forced, tools_disabled=disabled, json_schema=schema, json_mode=mode), rest

    def chat_reply(self, reply: Reply, ex: Exchange, input_tokens: int, output_tokens: int) -> ChatReply:
        out = super().chat_reply(reply, ex, input_tokens, output_tokens)
        asked = ex.conversation
        if not isinstance(asked, _Asked):
            return out
        thought = _thought(asked, reply)
        if thought is not None:
            thinking = tokens_for(len(thought.text) or len(thought.redacted_data))
            out.reasoning, out.output_tokens, out.reasoning_tokens = [thought], out.output_tokens + thinking, thinking
        if asked.breakpoints:  # the prompt cache's own accounting; without breakpoints, the step's usage
            out.cache_read_input_tokens, out.cache_write_input_tokens, _, _ = _account(asked, ex.prompt_cache)
        if asked.met_stop is not None:
            out.raw_finish = "stop_sequence"
        return out

    def _usage(self, ex: Exchange) -> dict[str, Any]:
        """What the rendered usage adds: the cache's writes by ttl."""
        asked = ex.conversation
        if not isinstance(asked, _Asked) or not asked.breakpoints:
            return {}
        _, _, short, long = _account(asked, ex.prompt_cache)
        return {"cache_creation": {"ephemeral_5m_input_tokens": short, "ephemeral_1h_input_tokens": long}}

    def reply_body(self, reply: Reply, ex: Exchange, created: int) -> dict[str, Any]:
        asked = ex.conversation
        if isinstance(asked, _Asked):
            reply, asked.met_stop = _stopped(reply, asked.stop)
        body = super().reply_body(reply, ex, created)
        body["usage"].update(self._usage(ex))
        if isinstance(asked, _Asked) and asked.met_stop is not None:
            body["stop_sequence"] = asked.met_stop
        return body

    def part_of(self, name: str, data: dict[str, Any] | str) -> StreamPart:
        return _PARTS.get(name, "body")

    def stream_events(self, plan: Plan, ex: Exchange, created: int) -> list[SseEvent]:
        asked = ex.conversation
        if isinstance(asked, _Asked):
            reply, asked.met_stop = _stopped(plan.reply, asked.stop)
            plan = _stopped_plan(plan, reply) if asked.met_stop is not None else plan
        final = self.chat_reply(plan.reply, ex, plan.input_tokens, plan.output_tokens)
        writer = self.front.writer(self.head(ex, created))
        raw: list[Sse] = writer.start(plan.input_tokens)
        for r in final.reasoning:
            if r.redacted_data:
                raw += writer.delta(ReasoningDelta(0, redacted_data=r.redacted_data))
                continue
            for words in split_text(r.text):
                raw += writer.delta(ReasoningDelta(0, text=words))
            raw += writer.delta(ReasoningDelta(0, signature=r.signature))
        for piece in plan.pieces:
            if piece.kind == "text":
                raw += writer.delta(TextDelta(piece.text))
            elif piece.kind == "refusal":
                raw += writer.refusal(piece.text)
            elif piece.kind == "tool":
                call_id = f"{self.call_prefix}{ex.n:08d}_{piece.index}"
                raw += writer.delta(ToolCallDelta(piece.index, call_id, piece.text, ""))
            else:
                raw += writer.delta(ToolCallDelta(piece.index, "", "", piece.text))
        raw += writer.final(final)
        events = self.tagged(raw)
        starts = [i for i, e in enumerate(events) if e.event == "content_block_start"]
        at = starts[0] + 1 if starts else next(i for i, e in enumerate(events) if e.part == "close")
        ping = SseEvent.of({"type": "ping"}, "ping", "body")  # as the API sends one; clients skip it
        usage = json.loads(events[-2].data)["usage"]  # message_delta's: the message_start tells the input too
        opening = dict(usage, output_tokens=1, **self._usage(ex))  # the API counts the first token at the start
        opening.pop("output_tokens_details", None)
        events[0] = _patched(events[0], {"usage": opening}, "message")
        if isinstance(asked, _Asked) and asked.met_stop is not None:
            events[-2] = _patched(events[-2], {"stop_sequence": asked.met_stop}, "delta")
        return [*events[:at], ping, *events[at:]]

    def preset_error(self, preset: str, ex: Exchange) -> ErrorSpec | None:
        specs = {
            "rate_limit": ErrorSpec(
                429,
                "rate_limit_error",
                "This request would exceed the rate limit for your organization of 50 requests per minute. "
                "Please try again later.",
            ),
            "overloaded": ErrorSpec(529, "overloaded_error", "Overloaded"),
            "server_error": ErrorSpec(500, "api_error", "Internal server error"),
            "insufficient_quota": ErrorSpec(400, "invalid_request_error", CREDIT_MESSAGE),
            "payment_required": ErrorSpec(
                402, "billing_error", "Payment required: this account has run out of credits."
            ),
            "context_too_long": ErrorSpec(
                400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"
            ),
            "invalid_key": ErrorSpec(401, "authentication_error", "invalid x-api-key"),
            "model_not_found": ErrorSpec(404, "not_found_error", f"model: {ex.model or 'unknown'}"),
            "content_policy": ErrorSpec(400, "invalid_request_error", CONTENT_FILTER_MESSAGE),
            "content_filter": ErrorSpec(400, "invalid_request_error", CONTENT_FILTER_MESSAGE),
        }
        return specs.get(preset)

    def status_error(self, status: int) -> ErrorSpec:
        return ErrorSpec(status, self.front.error_type(status), f"Fake provider error (HTTP {status}).")

    def headers(self, ex: Exchange, status: int) -> dict[str, str]:
        limited = status == 429
        values = ("4000", "0" if limited else "3999", _rfc3339(1 if limited else 0), "400000", "399000", _rfc3339(0))
        return {"request-id": f"req_fake{ex.n:08d}", **dict(zip(RATE_LIMIT_HEADERS, values, strict=True))}

    def budget_headers(self, taken: Taken, now: datetime) -> dict[str, str]:
        reset = (now + timedelta(seconds=taken.reset_s)).astimezone(UTC).isoformat(timespec="milliseconds")
        return {
            "anthropic-ratelimit-requests-limit": str(taken.limit),
            "anthropic-ratelimit-requests-remaining": str(taken.remaining),
            "anthropic-ratelimit-requests-reset": reset.replace("+00:00", "Z"),
        }

    def unknown_events(self, ex: Exchange) -> list[SseEvent]:
        data = {"type": "fake_future_event", "note": "an event type this client does not know yet"}
        return [SseEvent.of(data, "fake_future_event", "body")]


ANTHROPIC = _Anthropic()
