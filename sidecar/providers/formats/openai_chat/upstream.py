"""The OpenAI Chat Completions upstream (also vLLM, Ollama and the compatible servers), whole and streamed.

``OpenAIUpstream.body`` renders a ChatRequest (``front.py`` reads one back: its inverse)::

    core (ChatRequest)                          OpenAI body
    system                                      {"role": "system"} first
    Message(USER, text)                         {"role": "user", "content": text}
    Message(ASSISTANT, text, tool_calls)        {"role": "assistant", "content": text or null, "tool_calls": [...]}
    Message(TOOL, tool_results)                 one {"role": "tool", "tool_call_id", "content"} per result; a
                                                result with is_error has TOOL_ERROR_PREFIX before its content
    tools                                       [{"type": "function", "function": {name, description, parameters}}]
    response schema                             response_format {"type": "json_schema", "json_schema": {schema}}
    max_tokens, temperature                     max_tokens, temperature
    stream                                      "stream": true, "stream_options": {"include_usage": true}

A stream is ``data:`` events, read by ``OpenAIStream``::

    data                                         becomes
    {"choices": [{"delta": {"content": "..."}}]}   TextDelta (an empty string: nothing)
    {"delta": {"refusal": "..."}}                  kept for the reply's refusal (never sent as text)
    {"delta": {"tool_calls": [{"index", "id",      ToolCallDelta: the call numbered in the order its
       "function": {"name", "arguments"}}]}}         first fragment came; id and name on that fragment
    {"choices": [{"finish_reason": ...}]}          the reply's finish
    {"choices": [], "usage": {...}}                the reply's tokens (any chunk's usage counts)
    {"error": {...}}                               StreamFault with the error body (classified as an error)
    [DONE]                                         the end marker
    not JSON, not an object                        StreamFault (garbled)
    anything else (new fields, empty choices,      ignored, as the API asks of clients
      no data, a named event other than error)     (``event: error`` is an error event, as some servers send)

Error answers are classified by ``providers.errors.classify_response``.
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
from sidecar.providers.formats.carried import refuse_uncarried
from sidecar.providers.formats.chat import ChatReply, ChatRequest, StreamFault
from sidecar.providers.formats.fields import count, text_or_empty
from sidecar.providers.formats.openai_chat.vocab import (
    END_MARKER,
    FINISH,
    FORMAT_NAME,
    TOOL_ERROR_PREFIX,
    render_tool,
)

__all__ = ["CHAT_PATH", "OpenAIStream", "OpenAIUpstream"]

CHAT_PATH = "/chat/completions"
"""Below the provider's base URL (which ends in ``/v1`` for OpenAI itself)."""


class OpenAIUpstream:
    """The sidecar as a Chat Completions client (the module's tables)."""

    carries: frozenset[str] = frozenset()
    """Nothing beyond plain text yet (issue 21 adds each feature as the format carries it)."""

    def check(self, request: ModelRequest, model_id: str) -> None:
        refuse_uncarried(request, self.carries, FORMAT_NAME, model_id)

    def path(self, model: str, *, stream: bool) -> str:
        return CHAT_PATH

    def headers(self, api_key: str | None) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    def body(self, request: ChatRequest, *, stream: bool = False) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        for m in request.messages:
            messages.extend(_message(m))
        body: dict[str, Any] = {
            "model": request.upstream_model,
            "messages": messages,
            "max_tokens": request.max_tokens,
        }
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.tools:
            body["tools"] = [
                render_tool(t.name, t.description, json.loads(t.parameters_json) if t.parameters_json else None)
                for t in request.tools
            ]
        if request.response_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": request.response_schema, "strict": False},
            }
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def stream_decoder(self) -> OpenAIStream:
        return OpenAIStream()

    def parse(self, body: dict[str, Any]) -> ChatReply:
        choice = (body.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        raw_finish = str(choice.get("finish_reason") or "")
        calls = [
            ToolCall(
                id=str(c.get("id", "")),
                name=str((c.get("function") or {}).get("name", "")),
                arguments_json=str((c.get("function") or {}).get("arguments") or "{}"),
            )
            for c in message.get("tool_calls") or []
        ]
        usage = body.get("usage") or {}
        content = message.get("content") or ""
        if not isinstance(content, str):
            raise ValueError("the reply's content is not text")
        return ChatReply(
            text=content,
            tool_calls=calls,
            finish=FINISH.get(raw_finish, FinishReason.UNSPECIFIED),
            raw_finish=raw_finish,
            refusal=message.get("refusal") or None,
            input_tokens=int(usage.get("prompt_tokens") or 0),
            output_tokens=int(usage.get("completion_tokens") or 0),
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


class _Call:
    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []


class OpenAIStream:
    """One streamed Chat Completions reply, chunk by chunk (the table of the module)."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[int, _Call] = {}
        """Tool calls by the wire's index, in the order their first fragment came."""
        self._finish: str | None = None
        self._input_tokens = 0
        self._output_tokens = 0
        self._model = ""
        self._id = ""
        self.complete = False

    def feed(self, event: str, data: str) -> list[Delta]:
        if event not in ("", "message", "error") or not data.strip():
            return []  # a named event this wire does not define, or one with no data
        if data.strip() == END_MARKER:
            self.complete = True
            return []
        if event == "error":
            raise StreamFault("the stream sent an error event", error_body=data)
        try:
            chunk = json.loads(data)
        except (ValueError, RecursionError):
            raise StreamFault("the stream sent an event that is not JSON") from None
        if not isinstance(chunk, dict):
            raise StreamFault("the stream sent an event that is not a JSON object")
        if "error" in chunk:
            raise StreamFault("the stream sent an error event", error_body=data)
        self._model = text_or_empty(chunk.get("model")) or self._model
        self._id = text_or_empty(chunk.get("id")) or self._id
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._input_tokens = count(usage.get("prompt_tokens")) or self._input_tokens
            self._output_tokens = count(usage.get("completion_tokens")) or self._output_tokens
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return []
        out: list[Delta] = []
        for choice in choices:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                out.extend(self._choice(choice))
        return out

    def _choice(self, choice: dict[str, Any]) -> list[Delta]:
        if choice.get("finish_reason"):
            self._finish = str(choice["finish_reason"])
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return []
        out: list[Delta] = []
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._text.append(content)
            out.append(TextDelta(content))
        refusal = delta.get("refusal")
        if isinstance(refusal, str):
            self._refusal.append(refusal)
        for piece in delta.get("tool_calls") or []:
            if isinstance(piece, dict):
                out.append(self._tool_piece(piece))
        return out

    def _tool_piece(self, piece: dict[str, Any]) -> ToolCallDelta:
        wire_index = piece.get("index", 0)
        key = wire_index if isinstance(wire_index, int) else 0
        call = self._calls.setdefault(key, _Call())
        function = piece.get("function")
        function = function if isinstance(function, dict) else {}
        new_id = "" if call.id else text_or_empty(piece.get("id"))  # each is sent once, when first known
        new_name = "" if call.name else text_or_empty(function.get("name"))
        call.id = call.id or new_id
        call.name = call.name or new_name
        fragment = text_or_empty(function.get("arguments"))
        call.arguments.append(fragment)
        return ToolCallDelta(list(self._calls).index(key), new_id, new_name, fragment)

    def reply(self) -> ChatReply | None:
        if self._finish is None:
            return None
        calls = [ToolCall(c.id, c.name, "".join(c.arguments) or "{}") for c in self._calls.values()]
        return ChatReply(
            text="".join(self._text),
            tool_calls=calls,
            finish=FINISH.get(self._finish, FinishReason.UNSPECIFIED),
            raw_finish=self._finish,
            refusal="".join(self._refusal) or None,
            input_tokens=self._input_tokens,
            output_tokens=self._output_tokens,
            response_model=self._model,
            response_id=self._id,
        )


def _message(m: Message) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if m.role == Role.ASSISTANT:
        msg: dict[str, Any] = {"role": "assistant", "content": m.text or None}
        if m.tool_calls:
            msg["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json or "{}"}}
                for c in m.tool_calls
            ]
        return [msg]
    for r in m.tool_results:
        content = TOOL_ERROR_PREFIX + r.content if r.is_error else r.content
        out.append({"role": "tool", "tool_call_id": r.call_id, "content": content})
    if m.text or not m.tool_results:
        out.append({"role": "user", "content": m.text})
    return out
