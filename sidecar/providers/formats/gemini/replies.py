"""A Gemini reply read, whole or streamed: the upstream's ``parse`` and ``stream_decoder``.

A reply (``parse``)::

    candidates[0].content.parts     text -> text; functionCall -> tool calls (no id: ``gemini_call_<n>``);
                                    thought parts and thoughtSignature -> reasoning (format "gemini")
    candidates[0].finishReason      ``vocab.FINISH``; a block's finishMessage (or text) is the refusal
    promptFeedback.blockReason      no candidates: the prompt was blocked, a refusal of that category
    usageMetadata                   promptTokenCount (cached included) -> input; cachedContentTokenCount ->
                                    cache read; candidatesTokenCount + thoughtsTokenCount -> output;
                                    thoughtsTokenCount -> reasoning tokens
    modelVersion, responseId        the reply's model and id

A stream is ``data:`` chunks, each a GenerateContentResponse with the parts it adds (read by
``GeminiStream``); it ends when the body ends (no end marker): the chunk with a finishReason (or a
blocked prompt) completes it. A chunk ``{"error": {...}}`` is a StreamFault with its body; data that
is not a JSON object is garbled.
"""

from __future__ import annotations

from typing import Any

from sidecar.core.conversation import ReasoningPart, ToolCall
from sidecar.core.kinds import FinishReason
from sidecar.core.stream import Delta, ReasoningDelta, TextDelta, ToolCallDelta
from sidecar.providers.formats.arguments import arguments_text
from sidecar.providers.formats.chat import ChatReply, StreamFault, event_object
from sidecar.providers.formats.fields import count, text_or_empty
from sidecar.providers.formats.gemini.vocab import BLOCKED, CALL_ID_PREFIX, FINISH, FORMAT_NAME, REFUSAL_TEXT

__all__ = ["PROMPT_BLOCKED", "GeminiStream"]

PROMPT_BLOCKED = "the prompt was blocked"
"""A blocked prompt's explanation when Gemini gave none (``promptFeedback.blockReason``)."""


class GeminiStream:
    """One reply, chunk by chunk (a whole reply is one chunk): the module's table."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: list[ToolCall] = []
        self._reasoning: list[list[str]] = []
        """Each reasoning part: [text, signature, redacted data]."""
        self._thinking = False
        """The last part read was a thought (the next thought text goes on with it)."""
        self._finish: str | None = None
        self._message = ""
        self._blocked = ""
        self._categories: list[str] = []
        self._usage: dict[str, int] = {}
        self.model = ""
        self._id = ""
        self.complete = False

    def feed(self, event: str, data: str) -> list[Delta]:
        if not data.strip():
            return []
        body = event_object(data, "a chunk")
        if "error" in body:
            raise StreamFault("the stream sent an error", error_body=data)
        return self.read(body)

    def read(self, body: dict[str, Any]) -> list[Delta]:
        """A GenerateContentResponse's parts as deltas, its finish, usage, model and id kept."""
        self.model = text_or_empty(body.get("modelVersion")) or self.model
        self._id = text_or_empty(body.get("responseId")) or self._id
        usage = body.get("usageMetadata")
        if isinstance(usage, dict):
            self._usage = {k: count(v) for k, v in usage.items()}
        feedback = body.get("promptFeedback")
        if isinstance(feedback, dict) and text_or_empty(feedback.get("blockReason")):
            self._blocked = str(feedback["blockReason"])
            self._message = text_or_empty(feedback.get("blockReasonMessage"))
            self._categories = _blocked_categories(feedback.get("safetyRatings"))
            self._finish = self._blocked
            self.complete = True
        candidates = body.get("candidates")
        if not isinstance(candidates, list) or not candidates or not isinstance(candidates[0], dict):
            return []
        candidate = candidates[0]
        out: list[Delta] = []
        content = candidate.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, dict):
                out += self._part(part)
        reason = text_or_empty(candidate.get("finishReason"))
        if reason and reason != "FINISH_REASON_UNSPECIFIED":
            self._finish = reason
            self._message = text_or_empty(candidate.get("finishMessage")) or self._message
            self._categories = _blocked_categories(candidate.get("safetyRatings")) or self._categories
            self.complete = True
        return out

    def _part(self, part: dict[str, Any]) -> list[Delta]:
        out: list[Delta] = []
        signature = text_or_empty(part.get("thoughtSignature"))
        text = part.get("text")
        if part.get("thought") is True:
            text = text_or_empty(text)
            if not text and signature:  # opaque: a signature with no thought text
                self._thinking = False
                self._reasoning.append(["", "", signature])
                return [ReasoningDelta(len(self._reasoning) - 1, redacted_data=signature)]
            if not self._thinking or (self._reasoning and self._reasoning[-1][1]):
                self._reasoning.append(["", "", ""])
            self._thinking = True
            index = len(self._reasoning) - 1
            self._reasoning[index][0] += text
            if text:
                out.append(ReasoningDelta(index, text=text))
            if signature:
                self._reasoning[index][1] = signature
                out.append(ReasoningDelta(index, signature=signature))
            return out
        self._thinking = False
        if signature:
            self._reasoning.append(["", signature, ""])
            out.append(ReasoningDelta(len(self._reasoning) - 1, signature=signature))
        call = part.get("functionCall")
        if isinstance(call, dict):
            index = len(self._calls)
            call_id = text_or_empty(call.get("id")) or f"{CALL_ID_PREFIX}{index}"
            name, arguments = text_or_empty(call.get("name")), arguments_text(call.get("args"))
            self._calls.append(ToolCall(call_id, name, arguments))
            out += [ToolCallDelta(index, call_id, name, ""), ToolCallDelta(index, "", "", arguments)]
        elif isinstance(text, str) and text:
            self._text.append(text)
            out.append(TextDelta(text))
        return out

    def reply(self, *, finished: bool = True) -> ChatReply | None:
        if self._finish is None and finished:
            return None
        raw = self._finish or ""
        text = "".join(self._text)
        finish = FINISH.get(raw, FinishReason.UNSPECIFIED)
        if finish is FinishReason.STOP and self._calls:
            finish = FinishReason.TOOL_CALLS
        blocked = raw in BLOCKED or bool(self._blocked)
        category = ""
        if blocked:
            finish = FinishReason.CONTENT_FILTER
            category = raw.lower() + (":" + ",".join(self._categories) if self._categories else "")
        u = self._usage
        thoughts = u.get("thoughtsTokenCount", 0)
        return ChatReply(
            text=text,
            tool_calls=list(self._calls),
            finish=finish,
            raw_finish=raw,
            refusal=(self._message or text or (PROMPT_BLOCKED if self._blocked else REFUSAL_TEXT)) if blocked else None,
            input_tokens=u.get("promptTokenCount", 0) + u.get("toolUsePromptTokenCount", 0),
            output_tokens=u.get("candidatesTokenCount", 0) + thoughts,
            response_model=self.model,
            response_id=self._id,
            reasoning=[ReasoningPart(t, s, d, FORMAT_NAME) for t, s, d in self._reasoning],
            cache_read_input_tokens=u.get("cachedContentTokenCount", 0),
            reasoning_tokens=thoughts,
            refusal_category=category,
        )


def _blocked_categories(ratings: Any) -> list[str]:
    """The harm categories a block names (``HARM_CATEGORY_DANGEROUS_CONTENT`` -> ``dangerous_content``)."""
    if not isinstance(ratings, list):
        return []
    return [
        text_or_empty(r.get("category")).removeprefix("HARM_CATEGORY_").lower()
        for r in ratings
        if isinstance(r, dict) and r.get("blocked") is True and text_or_empty(r.get("category"))
    ]
