"""A streamed OpenAI Chat Completions reply read, chunk by chunk, and the tokens of a reply's ``usage``.

A reply (``shapes.Completion``) is read tolerantly: what is not what the wire sends is skipped. Its
``usage``: prompt_tokens (cached included), completion_tokens (reasoning included), ``cached_tokens``
(cache_read_input_tokens), ``reasoning_tokens``; Chat Completions sends no reasoning text. A stream is
``data:`` events (``shapes.Chunk``), read by ``OpenAIStream``::

    data                                        becomes
    a content delta                             TextDelta (an empty string: nothing)
    a refusal delta                             kept for the reply's refusal (never sent as text)
    a tool_calls delta                          ToolCallDelta: the call numbered in the order its first
                                                fragment came; id and name on that fragment
    a choice's finish_reason                    the reply's finish
    content_filter_results,                     the categories Azure marks filtered, for a refusal's
      prompt_filter_results                       category (``vocab.filtered_categories``)
    usage (any chunk's)                         the reply's tokens
    {"error": {...}}, ``event: error``          StreamFault with the error body (classified as an error)
    [DONE]                                      the end marker
    not JSON, not an object                     StreamFault (garbled)
    anything else                               ignored, as the API asks of clients
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from sidecar.core.kinds import FinishReason
from sidecar.core.stream import Delta, TextDelta, ToolCallDelta
from sidecar.providers.formats.chat import CallPieces, ChatReply, StreamFault, event_object
from sidecar.providers.formats.fields import count, text_or_empty
from sidecar.providers.formats.openai_chat.vocab import END_MARKER, FINISH, filtered_categories

__all__ = ["OpenAIStream", "read_usage"]


def read_usage(usage: Mapping[str, Any], reply: ChatReply) -> None:
    """The tokens of a ``usage`` object into ``reply`` (a count absent, or not a count, leaves it as it was)."""
    reply.input_tokens = count(usage.get("prompt_tokens")) or reply.input_tokens
    reply.output_tokens = count(usage.get("completion_tokens")) or reply.output_tokens
    prompt = usage.get("prompt_tokens_details")
    if isinstance(prompt, dict):
        reply.cache_read_input_tokens = count(prompt.get("cached_tokens")) or reply.cache_read_input_tokens
    completion = usage.get("completion_tokens_details")
    if isinstance(completion, dict):
        reply.reasoning_tokens = count(completion.get("reasoning_tokens")) or reply.reasoning_tokens


class OpenAIStream:
    """One streamed Chat Completions reply, chunk by chunk (the table of the module)."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[int, CallPieces] = {}
        """Tool calls by the wire's index, in the order their first fragment came."""
        self._finish: str | None = None
        self._usage = ChatReply("")
        """The tokens any chunk's usage said (the reply's other fields are set when it ends)."""
        self.model = ""
        """The model the stream says wrote it, as far as read."""
        self._id = ""
        self._filtered: list[str] = []
        """The categories Azure's filter results marked filtered, in any chunk."""
        self.complete = False

    def feed(self, event: str, data: str) -> list[Delta]:
        if event not in ("", "message", "error") or not data.strip():
            return []  # a named event this wire does not define, or one with no data
        if data.strip() == END_MARKER:
            self.complete = True
            return []
        if event == "error":
            raise StreamFault("the stream sent an error event", error_body=data)
        chunk = event_object(data)
        if "error" in chunk:
            raise StreamFault("the stream sent an error event", error_body=data)
        self.model = text_or_empty(chunk.get("model")) or self.model
        self._id = text_or_empty(chunk.get("id")) or self._id
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            read_usage(usage, self._usage)
        self._filter(chunk.get("prompt_filter_results"))
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return []
        out: list[Delta] = []
        for choice in choices:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                out.extend(self._choice(choice))
        return out

    def _filter(self, *results: Any) -> None:
        self._filtered += [c for c in filtered_categories(*results) if c not in self._filtered]

    def _choice(self, choice: dict[str, Any]) -> list[Delta]:
        if choice.get("finish_reason"):
            self._finish = str(choice["finish_reason"])
        self._filter(choice.get("content_filter_results"))
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
        call = self._calls.setdefault(key, CallPieces())
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
        calls = [c.call() for c in self._calls.values()]
        return replace(
            self._usage,
            text="".join(self._text),
            tool_calls=calls,
            finish=FINISH.get(self._finish, FinishReason.UNSPECIFIED),
            raw_finish=self._finish,
            refusal="".join(self._refusal) or None,
            response_model=self.model,
            response_id=self._id,
            refusal_category=",".join(self._filtered),
        )
