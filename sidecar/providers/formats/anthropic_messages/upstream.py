"""The Anthropic Messages upstream, whole and streamed.

``AnthropicUpstream.body`` renders a ChatRequest as ``shapes.MessageCreateParams`` (``front.py`` reads it
back: its table, inverted), with what is the upstream's own::

    core (ChatRequest)                          Anthropic body
    system with ``system_cache``                one text block with its cache_control
    response schema                             appended to system: "\\n\\n" JSON_INSTRUCTION "\\n" compact schema
    parts, reasoning, tool calls and results    blocks (``vocab.content_block``); reasoning first, byte-identical
    consecutive messages of one role            merged into one (the API wants roles to alternate)
    parallel_tool_calls                         tool_choice.disable_parallel_tool_use (its opposite; with no
                                                tool choice: {"type": "auto", ...})
    reasoning.budget_tokens | effort            thinking enabled with it | adaptive with output_config.effort
    provider_options_json {"anthropic": {...}}  that object's keys merged into the body (``provider_options``)
    each element's carried keys                 merged back where they were (``carried.merge_carried``)

``check`` refuses, before anything is sent, what the format does not carry and what Anthropic's API
refuses (``rules``).

A reply is read as ``front.render`` and ``front.EventWriter`` write it (``shapes.MessageReply``), tolerantly:
a key of another type is skipped, a block or event of a type not read (server tools ...) is ignored, and
its deltas too, as the API asks of clients. A whole reply's blocks are read as a stream's
(``AnthropicStream.whole``)::

    read                                        becomes
    message_start / the reply: id, model, usage the reply's id, model, tokens (input + the cache's two:
                                                the core counts every input token; thinking_tokens ->
                                                reasoning tokens); a count left out keeps the one before
    text block, text_delta                      TextDelta
    tool_use block, input_json_delta            ToolCallDelta (numbered among the reply's calls, from 0);
                                                the arguments are the fragments joined, re-serialized as
                                                a whole reply's ``input`` ({"_raw": text}: the text)
    thinking / redacted_thinking block,         ReasoningDelta (numbered among the reply's reasoning
      thinking_delta, signature_delta             parts), format "anthropic"
    message_delta, message_stop                 the finish (``vocab.FINISH``) and tokens; the end marker
    error event; data not a JSON object         StreamFault with the error body; StreamFault (garbled)

Error answers (and a stream's ``error`` events) are a content-policy refusal first, whatever the status: an
error whose message says "content filtering policy" (Anthropic's "Output blocked by content filtering
policy") is PROVIDER_REFUSAL, category ``content_filter``, never retried (``error_refusal``); every other
is classified by ``providers.errors.classify_response``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sidecar.core.conversation import (
    Controls,
    Message,
    ModelRequest,
    Part,
    ReasoningPart,
    ToolCall,
)
from sidecar.core.json_depth import loads
from sidecar.core.kinds import FinishReason, Role
from sidecar.core.rate_budget import Budget
from sidecar.core.retry import Retry
from sidecar.core.stream import Delta, ReasoningDelta, TextDelta, ToolCallDelta
from sidecar.core.taxonomy import SidecarFailure
from sidecar.providers.errors import Target, classify_response, refused
from sidecar.providers.formats.anthropic_messages.rules import SIDECAR_KEYS, check, check_budget, check_effort
from sidecar.providers.formats.anthropic_messages.vocab import (
    API_KEY_HEADER,
    DEFAULT_VERSION,
    FINISH,
    FORMAT_NAME,
    REFUSAL_TEXT,
    VERSION_HEADER,
    cache_control,
    content_block,
    rate_budget,
    reasoning_block,
    render_tool,
)
from sidecar.providers.formats.arguments import arguments_text, arguments_value
from sidecar.providers.formats.carried import FEATURES, merge_carried
from sidecar.providers.formats.chat import ChatReply, ChatRequest, StreamFault, compact_json, event_object, with_schema
from sidecar.providers.formats.fields import count, text_or_empty
from sidecar.providers.formats.options import merge_options, options_for
from sidecar.providers.formats.protocol import HeaderKeyed

__all__ = ["MESSAGES_PATH", "AnthropicStream", "AnthropicUpstream", "error_refusal", "provider_options"]

MESSAGES_PATH = "/v1/messages"
"""Below the provider's base URL (``https://api.anthropic.com``)."""
_UNCARRIED = frozenset({"seed", "presence_penalty", "frequency_penalty"})
"""The controls Anthropic has no field for."""
_CHOICE_TYPES = {"auto": "auto", "none": "none", "required": "any", "tool": "tool"}
_COUNTS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "thinking_tokens",
)
"""A usage's counts (``thinking_tokens`` under ``output_tokens_details``)."""


class AnthropicUpstream(HeaderKeyed):
    """The sidecar as a Messages client (the module's tables)."""

    carries = frozenset(FEATURES) - _UNCARRIED
    """Every feature but the controls Anthropic has no field for (seed, presence and frequency penalties)."""

    def check(self, request: ModelRequest, model_id: str) -> None:
        check(request, model_id, self.carries)

    def __init__(self, version: str = DEFAULT_VERSION) -> None:
        self._version = version

    def path(self, model: str, *, stream: bool) -> str:
        return MESSAGES_PATH

    def headers(self, api_key: str | None) -> dict[str, str]:
        headers = {VERSION_HEADER: self._version}
        if api_key:
            headers[API_KEY_HEADER] = api_key
        return headers

    def body(self, request: ChatRequest, *, stream: bool = False) -> dict[str, Any]:
        controls = request.controls
        system = request.system
        if request.response_schema is not None:
            system = with_schema(system, compact_json(request.response_schema))
        messages: list[dict[str, Any]] = []
        for m in request.messages:
            role, blocks = _message(m)
            if messages and messages[-1]["role"] == role:
                messages[-1]["content"].extend(blocks)  # the API wants roles to alternate
            else:
                messages.append({"role": role, "content": blocks})
            merge_carried(messages[-1], m.carried, FORMAT_NAME)
        body: dict[str, Any] = {
            "model": request.upstream_model,
            "max_tokens": request.max_tokens,
            "messages": messages,
        }
        if system and controls.system_cache is not None:
            body["system"] = [{"type": "text", "text": system, "cache_control": cache_control(controls.system_cache)}]
        elif system:
            body["system"] = system
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.tools:
            body["tools"] = [
                merge_carried(
                    render_tool(
                        t.name,
                        t.description,
                        json.loads(t.parameters_json) if t.parameters_json else None,
                        t.cache,
                        t.strict,
                    ),
                    t.carried,
                    FORMAT_NAME,
                )
                for t in request.tools
            ]
        body.update(_controls(controls, request.max_tokens))
        if stream:
            body["stream"] = True
        merge_options(body, provider_options(controls.provider_options_json), FORMAT_NAME, SIDECAR_KEYS)
        return merge_carried(body, request.carried, FORMAT_NAME)

    def stream_decoder(self) -> AnthropicStream:
        return AnthropicStream()

    def parse(self, body: dict[str, Any]) -> ChatReply:
        return AnthropicStream().whole(body)

    def classify(
        self,
        status: int,
        headers: Mapping[str, str],
        body: str,
        target: Target,
        secrets: Iterable[str],
        now: datetime,
    ) -> Retry | SidecarFailure:
        refusal = error_refusal(body)
        if refusal is not None:
            return refused(status, headers, body, target, secrets, *refusal)
        return classify_response(status, headers, body, target, secrets, now)

    def budget(self, headers: Mapping[str, str], now: datetime) -> Budget:
        return rate_budget(headers, now)


_CONTENT_FILTER = re.compile(r"content filtering policy", re.I)
"""What Anthropic's error says when its filter blocked the output ("Output blocked by content filtering policy")."""


def error_refusal(body: str) -> tuple[str, str] | None:
    """(category, the provider's words) when an error body is Anthropic's content-filter refusal; None otherwise."""
    try:
        parsed: Any = loads(body)
    except ValueError:
        return None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    if isinstance(message, str) and _CONTENT_FILTER.search(message):
        return "content_filter", message
    return None


class AnthropicStream:
    """One streamed Messages reply, event by event (the table of the module)."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._blocks: dict[int, tuple[str, int]] = {}
        """Content block index -> what it is ("text", "call" or "reasoning") and which of them (a text: 0);
        other blocks are absent."""
        self._calls: list[tuple[str, str, list[str]]] = []
        self._reasoning: list[tuple[list[str], list[str], str]] = []
        """Each reasoning part: its text pieces, its signature (the last one sent), its redacted data."""
        self._finish: str | None = None
        self._usage = dict.fromkeys(_COUNTS, 0)
        """The usage's counts, as Anthropic counts them (input without the cache's)."""
        self.model = ""
        """The model the stream says wrote it, as far as read."""
        self._id = ""
        self.complete = False

    def feed(self, event: str, data: str) -> list[Delta]:
        if not data.strip():
            return []  # an event with no data: nothing this reader needs
        body = event_object(data)
        kind = event or str(body.get("type") or "")
        if kind == "error" or body.get("type") == "error":
            raise StreamFault("the stream sent an error event", error_body=data)
        if kind == "message_start":
            self._start(body.get("message"))
        elif kind == "content_block_start":
            return self._block_start(body)
        elif kind == "content_block_delta":
            return self._block_delta(body)
        elif kind == "message_delta":
            self._message_delta(body)
        elif kind == "message_stop":
            self.complete = True
        return []  # ping, content_block_stop, and every event type this reader does not know

    def _start(self, message: Any) -> None:
        if not isinstance(message, dict):
            return
        self._id = text_or_empty(message.get("id"))
        self.model = text_or_empty(message.get("model"))
        self._read_usage(message.get("usage"))

    def _block_start(self, body: dict[str, Any]) -> list[Delta]:
        index, block = body.get("index"), body.get("content_block")
        if not isinstance(index, int) or not isinstance(block, dict):
            return []
        kind = block.get("type")
        if kind == "text":
            self._blocks[index] = ("text", 0)
            return self._text_delta(block.get("text"))
        if kind == "tool_use":
            call = len(self._calls)
            self._blocks[index] = ("call", call)
            call_id, name = text_or_empty(block.get("id")), text_or_empty(block.get("name"))
            self._calls.append((call_id, name, []))
            return [ToolCallDelta(call, call_id, name, "")]
        if kind in ("thinking", "redacted_thinking"):
            part = len(self._reasoning)
            self._blocks[index] = ("reasoning", part)
            redacted = text_or_empty(block.get("data")) if kind == "redacted_thinking" else ""
            self._reasoning.append(([], [], redacted))
            if redacted:
                return [ReasoningDelta(part, redacted_data=redacted)]
            return self._thinking(part, block.get("thinking"), block.get("signature"))
        return []

    def _block_delta(self, body: dict[str, Any]) -> list[Delta]:
        index, delta = body.get("index"), body.get("delta")
        if not isinstance(index, int) or index not in self._blocks or not isinstance(delta, dict):
            return []
        kind, which = self._blocks[index]
        if kind == "text" and delta.get("type") == "text_delta":
            return self._text_delta(delta.get("text"))
        if kind == "call" and delta.get("type") == "input_json_delta":
            fragment = text_or_empty(delta.get("partial_json"))
            self._calls[which][2].append(fragment)
            return [ToolCallDelta(which, "", "", fragment)]
        if kind == "reasoning" and delta.get("type") == "thinking_delta":
            return self._thinking(which, delta.get("thinking"), None)
        if kind == "reasoning" and delta.get("type") == "signature_delta":
            return self._thinking(which, None, delta.get("signature"))
        return []

    def _thinking(self, part: int, text: Any, signature: Any) -> list[Delta]:
        texts, signatures, _ = self._reasoning[part]
        out: list[Delta] = []
        if isinstance(text, str) and text:
            texts.append(text)
            out.append(ReasoningDelta(part, text=text))
        if isinstance(signature, str) and signature:
            signatures.append(signature)
            out.append(ReasoningDelta(part, signature=signature))
        return out

    def _text_delta(self, text: Any) -> list[Delta]:
        if not isinstance(text, str) or not text:
            return []
        self._text.append(text)
        return [TextDelta(text)]

    def _message_delta(self, body: dict[str, Any]) -> None:
        delta = body.get("delta")
        if isinstance(delta, dict) and delta.get("stop_reason"):
            self._finish = str(delta["stop_reason"])
        self._read_usage(body.get("usage"))

    def _read_usage(self, usage: Any) -> None:
        """A usage object's counts; one it leaves out keeps the value before (message_start's)."""
        if not isinstance(usage, dict):
            return
        details = usage.get("output_tokens_details")
        told = {**usage, **details} if isinstance(details, dict) else usage
        for key, before in self._usage.items():
            self._usage[key] = count(told.get(key)) or before

    def whole(self, body: dict[str, Any]) -> ChatReply:
        """A whole reply: its content blocks read as a stream's (a tool call's ``input`` its one fragment)."""
        self._start(body)
        for index, block in enumerate(body.get("content") or ()):
            self._block_start({"index": index, "content_block": block})
            if isinstance(block, dict) and block.get("type") == "tool_use":
                self._calls[-1][2].append(arguments_text(block.get("input"), json.dumps))
        return self._reply(str(body.get("stop_reason") or ""))

    def reply(self) -> ChatReply | None:
        return None if self._finish is None else self._reply(self._finish)

    def _reply(self, raw_finish: str) -> ChatReply:
        text, usage = "".join(self._text), self._usage
        cache_read, cache_write = usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"]
        return ChatReply(
            text=text,
            tool_calls=[ToolCall(i, n, _streamed_arguments("".join(parts))) for i, n, parts in self._calls],
            finish=FINISH.get(raw_finish, FinishReason.UNSPECIFIED),
            raw_finish=raw_finish,
            refusal=(text or REFUSAL_TEXT) if raw_finish == "refusal" else None,
            response_model=self.model,
            response_id=self._id,
            reasoning=[
                ReasoningPart("".join(texts), signatures[-1] if signatures else "", redacted, FORMAT_NAME)
                for texts, signatures, redacted in self._reasoning
            ],
            input_tokens=usage["input_tokens"] + cache_read + cache_write,
            output_tokens=usage["output_tokens"],
            cache_read_input_tokens=cache_read,
            cache_write_input_tokens=cache_write,
            reasoning_tokens=usage["thinking_tokens"],
        )


def _streamed_arguments(joined: str) -> str:
    """A streamed tool call's fragments as a whole reply's ``input`` renders them; as sent when not JSON."""
    try:
        return json.dumps(loads(joined or "{}"))
    except ValueError:
        return joined


# ---------------------------------------------------------------------------- a request rendered


def _message(m: Message) -> tuple[str, list[dict[str, Any]]]:
    if m.role == Role.ASSISTANT:
        blocks: list[dict[str, Any]] = [dict(reasoning_block(r)) for r in m.reasoning]  # first, as the API wants
        blocks += [_block(p) for p in m.content]
        for c in m.tool_calls:
            call = {"type": "tool_use", "id": c.id, "name": c.name, "input": arguments_value(c.arguments_json)}
            blocks.append(merge_carried(call, c.carried, FORMAT_NAME))
        return "assistant", blocks
    blocks = [
        merge_carried(
            {
                "type": "tool_result",
                "tool_use_id": r.call_id,
                "content": [_block(p) for p in r.parts] if r.parts else r.content,
                "is_error": r.is_error,
            },
            r.carried,
            FORMAT_NAME,
        )
        for r in m.tool_results
    ]
    blocks += [_block(p) for p in m.content]
    if not blocks:
        blocks.append({"type": "text", "text": ""})
    return "user", blocks


def _block(part: Part) -> dict[str, Any]:
    """A part as its content block, with the keys it carries."""
    return merge_carried(content_block(part), part.carried, FORMAT_NAME)


def _controls(c: Controls, max_tokens: int) -> dict[str, Any]:
    """The body's keys for the request's controls (the module's table)."""
    out: dict[str, Any] = {}
    if c.tool_choice is not None:
        choice: dict[str, Any] = {"type": _CHOICE_TYPES.get(c.tool_choice.mode, c.tool_choice.mode)}
        if c.tool_choice.mode == "tool":
            choice["name"] = c.tool_choice.name
        out["tool_choice"] = choice
    if c.parallel_tool_calls is not None:
        out.setdefault("tool_choice", {"type": "auto"})["disable_parallel_tool_use"] = not c.parallel_tool_calls
    if c.stop:
        out["stop_sequences"] = list(c.stop)
    if c.top_p is not None:
        out["top_p"] = c.top_p
    if c.top_k is not None:
        out["top_k"] = c.top_k
    if c.end_user:
        out["metadata"] = {"user_id": c.end_user}
    if c.reasoning is not None and c.reasoning.budget_tokens is not None:
        check_budget(c.reasoning.budget_tokens, max_tokens, "max_tokens")
        out["thinking"] = {"type": "enabled", "budget_tokens": c.reasoning.budget_tokens}
    elif c.reasoning is not None:
        check_effort(c.reasoning.effort)
        out["thinking"] = {"type": "adaptive"}
        out["output_config"] = {"effort": c.reasoning.effort}
    return out


def provider_options(raw: str) -> dict[str, Any]:
    """The keys ``provider_options_json`` sets for this format (its ``"anthropic"`` object, ``formats.options``)."""
    return options_for(raw, FORMAT_NAME, SIDECAR_KEYS)
