"""A Converse reply read, whole (``parse_reply``) or streamed (``BedrockStream``), tolerantly: what is not
what the wire sends is skipped, not refused (the sidecar's own replies are ``shapes``').

A whole reply::

    output.message.content   text -> text; toolUse -> tool calls; reasoningContent -> reasoning (format
                             "bedrock_converse"): reasoningText {text, signature}, redactedContent
    stopReason               ``vocab.FINISH``; guardrail_intervened / content_filtered: a refusal, its
                             category the stop reason, its words the reply's text
    usage                    inputTokens + cacheReadInputTokens + cacheWriteInputTokens -> input (the core
                             counts every input token); the cache's two -> cache read / write

A stream is event-stream messages, the engine's reader gives each as (``:event-type``, payload)
(an exception: (``:exception-type``, payload))::

    event               payload                                  becomes
    messageStart        role                                     -
    contentBlockStart   start.toolUse {toolUseId, name}           ToolCallDelta (numbered among the calls)
    contentBlockDelta   delta.text                               TextDelta
                        delta.toolUse.input                      ToolCallDelta: an arguments fragment
                        delta.reasoningContent text | signature  ReasoningDelta (numbered among the
                          | redactedContent                        reply's reasoning parts)
    contentBlockStop    -                                        -
    messageStop         stopReason                               the reply's finish
    metadata            usage, metrics                           the reply's tokens; the stream is complete
    an exception        {"message"}                              StreamFault with an error body naming it
    any other event                                              ignored
    not a JSON object                                            StreamFault (garbled)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sidecar.core.conversation import ReasoningPart, ToolCall
from sidecar.core.json_depth import loads
from sidecar.core.kinds import FinishReason
from sidecar.core.stream import Delta, ReasoningDelta, TextDelta, ToolCallDelta
from sidecar.providers.formats.arguments import arguments_text
from sidecar.providers.formats.bedrock_converse.vocab import (
    BLOCKED,
    EVENTS,
    FINISH,
    FORMAT_NAME,
    REFUSAL_TEXT,
    is_exception,
)
from sidecar.providers.formats.chat import ChatReply, StreamFault, event_object
from sidecar.providers.formats.fields import count, text_or_empty

__all__ = ["BedrockStream", "parse_reply"]

_REASONING = (("text", "text"), ("signature", "signature"), ("redactedContent", "redacted_data"))
"""A reasoningContent delta's members, each a ``ReasoningDelta`` field (in a part's order: text, signature,
redacted content)."""


def parse_reply(body: dict[str, Any]) -> ChatReply:
    """A whole Converse reply (the module's table); ValueError for one without a stopReason."""
    stream = BedrockStream()
    output = body.get("output")
    message = output.get("message") if isinstance(output, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict):
            stream.block(block)
    stream.stop(body)
    stream.usage(body.get("usage"))
    reply = stream.reply()
    if reply is None:  # stopReason is required: not a Converse reply (the sender retries it as garbled)
        raise ValueError("a Converse reply without a stopReason")
    return reply


class BedrockStream:
    """One reply: a whole one's blocks (``block``) or a stream's events (``feed``); the module's tables."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: list[list[str]] = []
        """Each tool call: id, name, its argument fragments."""
        self._reasoning: list[list[str]] = []
        """Each reasoning part: text, signature, redacted content."""
        self._blocks: dict[int, tuple[str, int]] = {}
        """A stream's content block index -> (``tool`` | ``reasoning`` | ``text``, its number among those)."""
        self._finish: str | None = None
        self._usage: dict[str, int] = {}
        self.model = ""
        self.complete = False

    # -- a whole reply

    def block(self, block: dict[str, Any]) -> None:
        if isinstance(block.get("text"), str):
            self._text.append(block["text"])
        use = block.get("toolUse")
        if isinstance(use, dict):
            input_ = use.get("input")
            self._calls.append(
                [text_or_empty(use.get("toolUseId")), text_or_empty(use.get("name")), arguments_text(input_)]
            )
        reasoning = block.get("reasoningContent")
        if isinstance(reasoning, dict):
            text = reasoning.get("reasoningText")
            if isinstance(text, dict):
                self._reasoning.append([text_or_empty(text.get("text")), text_or_empty(text.get("signature")), ""])
            elif isinstance(reasoning.get("redactedContent"), str):
                self._reasoning.append(["", "", reasoning["redactedContent"]])

    def stop(self, body: Mapping[str, Any]) -> None:
        reason = text_or_empty(body.get("stopReason"))
        if reason:
            self._finish = reason

    def usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self._usage = {k: count(v) for k, v in usage.items()}

    # -- a stream

    def feed(self, event: str, data: str) -> list[Delta]:
        if is_exception(event):
            try:
                said: Any = loads(data) if data.strip() else {}
            except ValueError:
                said = {}
            said = said if isinstance(said, dict) else {}
            message = text_or_empty(said.get("message"))
            error_type = text_or_empty(said.get("__type")) or event[:1].upper() + event[1:]
            error = json.dumps({"__type": error_type, "message": message or data[:200]})
            raise StreamFault(f"the stream sent {error_type}", error_body=error)
        if event not in EVENTS:
            return []
        body = event_object(data, f"a {event} event")
        if event == "contentBlockStart":
            return self._start(body)
        if event == "contentBlockDelta":
            return self._delta(body)
        if event == "messageStop":
            self.stop(body)
        elif event == "metadata":
            self.usage(body.get("usage"))
            self.complete = True
        return []

    def _start(self, body: dict[str, Any]) -> list[Delta]:
        start = body.get("start")
        use = start.get("toolUse") if isinstance(start, dict) else None
        if not isinstance(use, dict):
            return []
        index = len(self._calls)
        call_id, name = text_or_empty(use.get("toolUseId")), text_or_empty(use.get("name"))
        self._calls.append([call_id, name])
        self._blocks[count(body.get("contentBlockIndex"))] = ("tool", index)
        return [ToolCallDelta(index, call_id, name, "")]

    def _delta(self, body: dict[str, Any]) -> list[Delta]:
        delta = body.get("delta")
        if not isinstance(delta, dict):
            return []
        at = count(body.get("contentBlockIndex"))
        if isinstance(delta.get("text"), str):
            self._blocks.setdefault(at, ("text", 0))
            self._text.append(delta["text"])
            return [TextDelta(delta["text"])] if delta["text"] else []
        use = delta.get("toolUse")
        kind, index = self._blocks.get(at, ("", 0))
        if isinstance(use, dict) and kind == "tool":
            fragment = text_or_empty(use.get("input"))
            self._calls[index].append(fragment)
            return [ToolCallDelta(index, "", "", fragment)] if fragment else []
        reasoning = delta.get("reasoningContent")
        if not isinstance(reasoning, dict):
            return []
        if kind != "reasoning":
            index = len(self._reasoning)
            self._reasoning.append(["", "", ""])
            self._blocks[at] = ("reasoning", index)
        for n, (key, field) in enumerate(_REASONING):
            said = reasoning.get(key)
            if isinstance(said, str):
                self._reasoning[index][n] += said
                return [ReasoningDelta(index, **{field: said})]
        return []

    def reply(self) -> ChatReply | None:
        if self._finish is None:
            return None
        raw = self._finish
        text = "".join(self._text)
        calls = [_call(c) for c in self._calls]
        finish = FINISH.get(raw, FinishReason.UNSPECIFIED)
        if finish is FinishReason.STOP and calls:
            finish = FinishReason.TOOL_CALLS
        blocked = raw in BLOCKED
        u = self._usage
        read, write = u.get("cacheReadInputTokens", 0), u.get("cacheWriteInputTokens", 0)
        return ChatReply(
            text=text,
            tool_calls=calls,
            finish=finish,
            raw_finish=raw,
            refusal=(text or REFUSAL_TEXT) if blocked else None,
            input_tokens=u.get("inputTokens", 0) + read + write,
            output_tokens=u.get("outputTokens", 0),
            response_model=self.model,
            reasoning=[ReasoningPart(t, s, d, FORMAT_NAME) for t, s, d in self._reasoning],
            cache_read_input_tokens=read,
            cache_write_input_tokens=write,
            refusal_category=raw if blocked else "",
        )


def _call(parts: list[str]) -> ToolCall:
    call_id, name, *fragments = parts
    joined = "".join(fragments)
    if len(fragments) == 1 and not joined.startswith("{"):
        return ToolCall(call_id, name, joined)  # a whole reply's arguments, already the reply's text
    try:
        value = loads(joined or "{}")
    except ValueError:
        return ToolCall(call_id, name, joined)
    return ToolCall(call_id, name, arguments_text(value))
