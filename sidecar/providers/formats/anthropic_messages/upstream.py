"""The Anthropic Messages upstream, whole and streamed.

``AnthropicUpstream.body`` renders a ChatRequest (``front.py`` reads one back: its inverse)::

    core (ChatRequest)                          Anthropic body
    system                                      "system" (a string)
    response schema                             appended to system: "\\n\\n" JSON_INSTRUCTION "\\n" compact schema
    Message(USER, text)                         {"role": "user", "content": [{"type": "text"}]}
    Message(ASSISTANT, text, tool_calls)        {"role": "assistant", "content": [text, {"type": "tool_use", input}]}
                                                (arguments that are not JSON: input {"_raw": text})
    Message(TOOL, tool_results)                 {"role": "user", "content": [{"type": "tool_result", tool_use_id,
                                                content, is_error}]}
    consecutive messages of one role            merged into one (the API wants roles to alternate)
    tools                                       [{name, description, input_schema}]
    max_tokens, temperature                     max_tokens, temperature

A stream (``"stream": true``) is named events, read by ``AnthropicStream``::

    event                 data                                       becomes
    message_start         message: id, model, usage.input_tokens      the reply's id, model, tokens
    content_block_start   text block (its text, if any)               TextDelta
                          tool_use block: id, name                    ToolCallDelta (the call numbered among
                                                                      the reply's tool calls, from 0)
                          any other block (thinking ...)              ignored, and its deltas too
    content_block_delta   text_delta                                  TextDelta
                          input_json_delta (partial_json)             ToolCallDelta: an arguments fragment
    content_block_stop    -                                           -
    message_delta         delta.stop_reason, usage.output_tokens      the reply's finish and tokens
    message_stop          -                                           the end marker
    ping                  -                                           -
    error                 {"type": "error", "error": {...}}           StreamFault with the error body
    not JSON, not an object                                           StreamFault (garbled)
    any other event, an event with no data                            ignored, as the API asks of clients

A tool call's arguments are its ``input`` as JSON (``{"_raw": text}``: the text, as the front renders
arguments that are not JSON); streamed, the fragments joined, re-serialized like a whole reply's
``input`` (so a streamed reply and a whole one are the same reply). Error answers are classified
by ``providers.errors.classify_response``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sidecar.core.conversation import Message, ModelRequest, ToolCall
from sidecar.core.kinds import FinishReason, Role
from sidecar.core.retry import Retry
from sidecar.core.stream import Delta, TextDelta, ToolCallDelta
from sidecar.core.taxonomy import SidecarFailure
from sidecar.providers.errors import Target, classify_response
from sidecar.providers.formats.anthropic_messages.vocab import (
    API_KEY_HEADER,
    DEFAULT_VERSION,
    FINISH,
    FORMAT_NAME,
    REFUSAL_TEXT,
    VERSION_HEADER,
    arguments_of,
    input_of,
    render_tool,
)
from sidecar.providers.formats.carried import refuse_uncarried
from sidecar.providers.formats.chat import JSON_INSTRUCTION, ChatReply, ChatRequest, StreamFault, compact_json
from sidecar.providers.formats.fields import count, text_or_empty

__all__ = ["MESSAGES_PATH", "AnthropicStream", "AnthropicUpstream"]

MESSAGES_PATH = "/v1/messages"
"""Below the provider's base URL (``https://api.anthropic.com``)."""


class AnthropicUpstream:
    """The sidecar as a Messages client (the module's tables)."""

    carries: frozenset[str] = frozenset()
    """Nothing beyond plain text yet (issue 21 adds each feature as the format carries it)."""

    def check(self, request: ModelRequest, model_id: str) -> None:
        refuse_uncarried(request, self.carries, FORMAT_NAME, model_id)

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
        system = request.system
        if request.response_schema is not None:
            system = f"{system}\n\n{JSON_INSTRUCTION}\n{compact_json(request.response_schema)}".strip()
        messages: list[dict[str, Any]] = []
        for m in request.messages:
            role, blocks = _message(m)
            if messages and messages[-1]["role"] == role:
                messages[-1]["content"].extend(blocks)  # the API wants roles to alternate
            else:
                messages.append({"role": role, "content": blocks})
        body: dict[str, Any] = {
            "model": request.upstream_model,
            "max_tokens": request.max_tokens,
            "messages": messages,
        }
        if system:
            body["system"] = system
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.tools:
            body["tools"] = [
                render_tool(t.name, t.description, json.loads(t.parameters_json) if t.parameters_json else None)
                for t in request.tools
            ]
        if stream:
            body["stream"] = True
        return body

    def stream_decoder(self) -> AnthropicStream:
        return AnthropicStream()

    def parse(self, body: dict[str, Any]) -> ChatReply:
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in body.get("content") or []:
            if block.get("type") == "text":
                texts.append(str(block.get("text", "")))
            elif block.get("type") == "tool_use":
                calls.append(
                    ToolCall(
                        id=str(block.get("id", "")),
                        name=str(block.get("name", "")),
                        arguments_json=arguments_of(block.get("input")),
                    )
                )
        raw_finish = str(body.get("stop_reason") or "")
        usage = body.get("usage") or {}
        return ChatReply(
            text="".join(texts),
            tool_calls=calls,
            finish=FINISH.get(raw_finish, FinishReason.UNSPECIFIED),
            raw_finish=raw_finish,
            refusal=("".join(texts) or REFUSAL_TEXT) if raw_finish == "refusal" else None,
            input_tokens=int(usage.get("input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
            response_model=str(body.get("model") or ""),
            response_id=str(body.get("id") or ""),
        )

    def classify(
        self,
        status: int,
        headers: Mapping[str, str],
        body: str,
        target: Target,
        secrets: Iterable[str],
        now: datetime,
    ) -> Retry | SidecarFailure:
        return classify_response(status, headers, body, target, secrets, now)


class AnthropicStream:
    """One streamed Messages reply, event by event (the table of the module)."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._blocks: dict[int, int | None] = {}
        """Content block index -> the tool call it is (None: a text block); other blocks are absent."""
        self._calls: list[tuple[str, str, list[str]]] = []
        self._finish: str | None = None
        self._input_tokens = 0
        self._output_tokens = 0
        self._model = ""
        self._id = ""
        self.complete = False

    def feed(self, event: str, data: str) -> list[Delta]:
        if not data.strip():
            return []  # an event with no data: nothing this reader needs
        try:
            body = json.loads(data)
        except (ValueError, RecursionError):
            raise StreamFault("the stream sent an event that is not JSON") from None
        if not isinstance(body, dict):
            raise StreamFault("the stream sent an event that is not a JSON object")
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
        self._model = text_or_empty(message.get("model"))
        self._usage(message.get("usage"))

    def _usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self._input_tokens = count(usage.get("input_tokens")) or self._input_tokens
            self._output_tokens = count(usage.get("output_tokens")) or self._output_tokens

    def _block_start(self, body: dict[str, Any]) -> list[Delta]:
        index, block = body.get("index"), body.get("content_block")
        if not isinstance(index, int) or not isinstance(block, dict):
            return []
        if block.get("type") == "text":
            self._blocks[index] = None
            return self._text_delta(block.get("text"))
        if block.get("type") == "tool_use":
            call = len(self._calls)
            self._blocks[index] = call
            call_id, name = text_or_empty(block.get("id")), text_or_empty(block.get("name"))
            self._calls.append((call_id, name, []))
            return [ToolCallDelta(call, call_id, name, "")]
        return []

    def _block_delta(self, body: dict[str, Any]) -> list[Delta]:
        index, delta = body.get("index"), body.get("delta")
        if not isinstance(index, int) or index not in self._blocks or not isinstance(delta, dict):
            return []
        call = self._blocks[index]
        if call is None and delta.get("type") == "text_delta":
            return self._text_delta(delta.get("text"))
        if call is not None and delta.get("type") == "input_json_delta":
            fragment = text_or_empty(delta.get("partial_json"))
            self._calls[call][2].append(fragment)
            return [ToolCallDelta(call, "", "", fragment)]
        return []

    def _text_delta(self, text: Any) -> list[Delta]:
        if not isinstance(text, str) or not text:
            return []
        self._text.append(text)
        return [TextDelta(text)]

    def _message_delta(self, body: dict[str, Any]) -> None:
        delta = body.get("delta")
        if isinstance(delta, dict) and delta.get("stop_reason"):
            self._finish = str(delta["stop_reason"])
        self._usage(body.get("usage"))

    def reply(self) -> ChatReply | None:
        if self._finish is None:
            return None
        text = "".join(self._text)
        raw_finish = self._finish
        return ChatReply(
            text=text,
            tool_calls=[ToolCall(i, n, _streamed_arguments("".join(parts))) for i, n, parts in self._calls],
            finish=FINISH.get(raw_finish, FinishReason.UNSPECIFIED),
            raw_finish=raw_finish,
            refusal=(text or REFUSAL_TEXT) if raw_finish == "refusal" else None,
            input_tokens=self._input_tokens,
            output_tokens=self._output_tokens,
            response_model=self._model,
            response_id=self._id,
        )


def _streamed_arguments(joined: str) -> str:
    """A streamed tool call's fragments as a whole reply's ``input`` renders them; as sent when not JSON."""
    try:
        return json.dumps(json.loads(joined or "{}"))
    except (ValueError, RecursionError):
        return joined


def _message(m: Message) -> tuple[str, list[dict[str, Any]]]:
    if m.role == Role.ASSISTANT:
        blocks: list[dict[str, Any]] = []
        if m.text:
            blocks.append({"type": "text", "text": m.text})
        for c in m.tool_calls:
            blocks.append({"type": "tool_use", "id": c.id, "name": c.name, "input": input_of(c.arguments_json)})
        return "assistant", blocks
    blocks = [
        {"type": "tool_result", "tool_use_id": r.call_id, "content": r.content, "is_error": r.is_error}
        for r in m.tool_results
    ]
    if m.text or not blocks:
        blocks.append({"type": "text", "text": m.text})
    return "user", blocks
