"""The Gemini front: a generateContent request read, the answer rendered (whole, streamed, failed).

The sidecar has no Gemini door yet; this half is what the fake provider speaks (``gemini/fake.py``)
and what ``tests/unit/test_formats.py`` reads the upstream's bodies back with. A request names its
model and whether it streams in its URL, not its body: ``routed(path, body)`` puts them in the body
as ``model`` and ``stream`` (the keys ``parse`` reads them from), for a path of ``upstream.generate_path``.

``GeminiFront.parse`` reads a request into the core's (``request.parse_request``, its table); ``render``,
``writer`` and ``error_body`` answer in the format (``shapes.Response``)::

    ChatReply               one candidate: content {"role": "model", "parts"}, finishReason, index 0,
      reasoning, text,      usageMetadata, modelVersion, responseId; thought parts, a text part,
      tool calls            functionCall parts (``vocab.signed_parts``)
      a refusal             no content; finishReason the reply's block reason (else SAFETY),
                            finishMessage its words
    a stream                one chunk for each delta (a function call whole, when its arguments end),
                            the last with the finishReason and usageMetadata; a signature that is not
                            a thought's rides on the next part
    a failure               {"error": {"code", "message", "status"}}; in a stream the same as a chunk
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sidecar.core.conversation import Message
from sidecar.core.kinds import FinishReason, Role
from sidecar.core.stream import Delta, ReasoningDelta, TextDelta
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.formats.arguments import arguments_object
from sidecar.providers.formats.chat import ChatReply
from sidecar.providers.formats.fields import positive_budget
from sidecar.providers.formats.gemini import shapes
from sidecar.providers.formats.gemini.request import as_written, camel, parse_request
from sidecar.providers.formats.gemini.shapes import Candidate, Response, UsageMetadata
from sidecar.providers.formats.gemini.upstream import API_PATH
from sidecar.providers.formats.gemini.vocab import (
    API_KEY_HEADER,
    BLOCKED,
    CALL_ID_PREFIX,
    FINISH,
    FINISH_NAMES,
    STATUS_CODES,
    STATUS_NAMES,
    signed_parts,
)
from sidecar.providers.formats.protocol import Ask, ParamNames, ReplyHead, Sse
from sidecar.providers.formats.routes import model_route

__all__ = ["GeminiFront", "GeminiWriter", "finish_reason"]

_NO_DOOR: ParamNames = {}
"""No door serves the format (only its fake speaks it): no parameter is renamed (``ParamNames``)."""
_ANSWERS: Mapping[str, str] = {
    **dict.fromkeys(("invalid_value", "context_length_exceeded", "content_policy_violation"), "INVALID_ARGUMENT"),
    "output_truncated": "INVALID_ARGUMENT",
    **dict.fromkeys(("insufficient_quota", "spend_cap_exceeded", "rate_limit_exceeded"), "RESOURCE_EXHAUSTED"),
    **dict.fromkeys(("model_not_found", "resource_not_found"), "NOT_FOUND"),
    "permission_denied": "PERMISSION_DENIED",
    "overloaded": "UNAVAILABLE",
    "deadline_exceeded": "DEADLINE_EXCEEDED",
}
"""``error.status`` of a sidecar failure by its code (its HTTP status: ``STATUS_CODES``); other codes by status."""


class GeminiFront:
    """The Gemini format as a provider speaks it (the module's tables)."""

    path = "/v1beta/models"
    """The prefix of every model's routes (``{path}/{model}:generateContent``)."""
    words = "a Gemini-compatible"
    id_prefix = ""
    params = _NO_DOOR

    def routed(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """``body`` with the model and the streaming the URL ``path`` names; None for a path that is not a
        generateContent one."""
        found = model_route(path, API_PATH, ":", ("generateContent", "streamGenerateContent"))
        return None if found is None else {**body, "model": found[0], "stream": found[1]}

    def parse(self, body: dict[str, Any]) -> Ask:
        try:
            request = parse_request(camel(body))
            positive_budget(request, "generationConfig.maxOutputTokens")
        except InvalidInput as refused:
            raise as_written(refused, body) from None
        return Ask(request, body.get("stream") is True)

    def render(self, reply: ChatReply, head: ReplyHead, extension: Mapping[str, Any] | None = None) -> dict[str, Any]:
        candidate = _finished(reply)
        parts = [] if reply.refusal is not None else _reply_parts(reply)
        if parts:
            candidate["content"] = {"role": "model", "parts": parts}
        out = _response(head, candidate)
        out["usageMetadata"] = usage_metadata(reply)
        if extension is not None:
            out["sidecar"] = dict(extension)
        return dict(out)

    def writer(self, head: ReplyHead, *, include_usage: bool = False) -> GeminiWriter:
        return GeminiWriter(head)

    def error_body(
        self,
        message: str,
        error_type: str,
        *,
        code: str | None = None,
        param: str | None = None,
        extension: Mapping[str, Any] | None = None,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        error: shapes.Error = {"code": STATUS_CODES.get(error_type, 500), "message": message, "status": error_type}
        if extension is not None:
            error["sidecar"] = dict(extension)
        return {"error": error}

    def answer(self, code: str, status: int) -> tuple[int, str]:
        state = _ANSWERS.get(code) or self.error_type(status)
        return STATUS_CODES.get(state, status), state

    def error_type(self, status: int) -> str:
        return STATUS_NAMES.get(status, "UNAVAILABLE" if status >= 500 else "INVALID_ARGUMENT")

    def api_key(self, headers: Mapping[str, str]) -> str:
        return headers.get(API_KEY_HEADER, "")


def finish_reason(reply: ChatReply) -> str:
    """The reply's ``finishReason``: its own when it is Gemini's, else by the core's finish."""
    if reply.refusal is not None or reply.finish is FinishReason.CONTENT_FILTER:
        return reply.raw_finish if reply.raw_finish in BLOCKED else "SAFETY"
    if FINISH.get(reply.raw_finish) is reply.finish:
        return reply.raw_finish
    return FINISH_NAMES.get(reply.finish, "STOP")


def usage_metadata(reply: ChatReply) -> UsageMetadata:
    """Gemini's usage: candidates without the thoughts (the core's output tokens count them)."""
    usage: UsageMetadata = {
        "promptTokenCount": reply.input_tokens,
        "candidatesTokenCount": max(reply.output_tokens - reply.reasoning_tokens, 0),
        "totalTokenCount": reply.input_tokens + reply.output_tokens,
    }
    if reply.cache_read_input_tokens:
        usage["cachedContentTokenCount"] = reply.cache_read_input_tokens
    if reply.reasoning_tokens:
        usage["thoughtsTokenCount"] = reply.reasoning_tokens
    return usage


def _finished(reply: ChatReply) -> Candidate:
    candidate: Candidate = {"finishReason": finish_reason(reply), "index": 0}
    if reply.refusal is not None:
        candidate["finishMessage"] = reply.refusal
    return candidate


def _response(head: ReplyHead, candidate: Candidate) -> Response:
    return {"candidates": [candidate], "modelVersion": head.model, "responseId": head.reply_id}


def _reply_parts(reply: ChatReply) -> list[shapes.Part]:
    message = Message(Role.ASSISTANT, reply.text, tuple(reply.tool_calls), reasoning=tuple(reply.reasoning))
    parts = signed_parts(message)
    return [] if parts == [{"text": ""}] else parts


class GeminiWriter:
    """One streamed reply as chunks (the module's table)."""

    def __init__(self, head: ReplyHead) -> None:
        self._head = head
        self._call: list[str] | None = None
        """The function call being streamed: id, name, its argument fragments."""
        self._signature = ""
        """A signature waiting for the next part."""

    def _chunk(self, part: shapes.Part | None, candidate: Candidate | None = None) -> Response:
        candidate = candidate or {"index": 0}
        if part is not None:
            if self._signature and not part.get("thought"):
                part["thoughtSignature"], self._signature = self._signature, ""
            candidate["content"] = {"role": "model", "parts": [part]}
        return _response(self._head, candidate)

    def _sent(self, part: shapes.Part) -> list[Sse]:
        return [("", dict(self._chunk(part)))]

    def _flush(self) -> list[Sse]:
        if self._call is None:
            return []
        call_id, name, *fragments = self._call
        self._call = None
        call: shapes.FunctionCall = {"name": name, "args": arguments_object("".join(fragments))}
        if call_id and not call_id.startswith(CALL_ID_PREFIX):
            call = {"id": call_id, **call}
        return self._sent({"functionCall": call})

    def start(self, input_tokens: int = 0) -> list[Sse]:
        return []

    def delta(self, delta: Delta) -> list[Sse]:
        if isinstance(delta, TextDelta):
            return [*self._flush(), *self._sent({"text": delta.text})]
        if isinstance(delta, ReasoningDelta):
            return [*self._flush(), *self._reasoning(delta)]
        if delta.id or delta.name:
            out = self._flush()
            self._call = [delta.id, delta.name, delta.arguments_fragment]
            return out
        if self._call is not None:
            self._call.append(delta.arguments_fragment)
        return []

    def _reasoning(self, delta: ReasoningDelta) -> list[Sse]:
        if delta.redacted_data:
            return self._sent({"text": "", "thought": True, "thoughtSignature": delta.redacted_data})
        if not delta.text:  # a signature alone: on the next part that is not a thought
            self._signature = delta.signature or self._signature
            return []
        part: shapes.Part = {"text": delta.text, "thought": True}
        if delta.signature:
            part["thoughtSignature"] = delta.signature
        return self._sent(part)

    def refusal(self, text: str) -> list[Sse]:
        return [*self._flush(), *self._sent({"text": text})]

    def restarted(self, words: Mapping[str, Any]) -> list[Sse]:
        self._call, self._signature = None, ""
        return [("", {"sidecar_restart": dict(words)})]

    def final(self, reply: ChatReply, extension: Mapping[str, Any] | None = None) -> list[Sse]:
        out = self._flush()
        last = self._chunk({"text": ""} if self._signature else None, _finished(reply))
        last["usageMetadata"] = usage_metadata(reply)
        if extension is not None:
            last["sidecar"] = dict(extension)
        return [*out, ("", dict(last))]

    def error(self, body: dict[str, Any]) -> list[Sse]:
        return [("", body)]
