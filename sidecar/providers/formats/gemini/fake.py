"""The Gemini wire as the fake provider speaks it (the format: ``formats.gemini``).

Its routes are ``/v1beta/models/{model}:generateContent`` and ``:streamGenerateContent?alt=sse``
(``routes``: the model and the streaming are the URL's). A stream is ``data:`` chunks, each a
GenerateContentResponse, each in its part::

    delta  {"candidates": [{"content": {"role": "model", "parts": [{"text": "..."}]}, "index": 0}], ...}
    delta  the same with {"text": "...", "thought": true}          (thinking on: the thought summary)
    body   the same with {"functionCall": {"id", "name", "args"}}  (a call whole, its signature on it)
    close  {"candidates": [{"finishReason", "index": 0}], "usageMetadata": {...}, ...}

No end marker: the body ends (``no_end_marker`` drops the last chunk, as ``end_early`` would). An error
after the stream began is a chunk ``{"error": {...}}``.

The presets, as Gemini answers (``preset_error``)::

    rate_limit           429 RESOURCE_EXHAUSTED, a QuotaFailure of a per-minute quota, RetryInfo 1s
    insufficient_quota   429 RESOURCE_EXHAUSTED, a QuotaFailure of a per-day quota (and RetryInfo, as
    payment_required       Gemini sends it: a client that trusts it retries a quota that is gone)
    overloaded           503 UNAVAILABLE "The model is overloaded. Please try again later."
    server_error         500 INTERNAL
    context_too_long     400 INVALID_ARGUMENT "The input token count (...) exceeds the maximum ..."
    invalid_key          400 INVALID_ARGUMENT "API key not valid", ErrorInfo reason API_KEY_INVALID
    model_not_found      404 NOT_FOUND "models/{model} is not found for API version v1beta ..."
    account_blocked      400 FAILED_PRECONDITION "User location is not supported for the API use." (a region
                         or billing block; ``message`` gives the billing one's words)
    content_policy       200 with no candidates: promptFeedback.blockReason PROHIBITED_CONTENT
    content_filter       200 with a candidate finishReason SAFETY, its safetyRatings blocked (the step's
                         ``categories`` as Gemini's harm categories; default dangerous content)

A bare status answers ``{"error": {"code", "message", "status"}}`` with the status's name (403:
PERMISSION_DENIED). What it checks, as the API does (a 400 INVALID_ARGUMENT)::

    the request's shape      the format's front reads it (an unknown key or part is refused)
    thoughtSignature         every one sent back verifies (an HMAC of a nonce under the fake's own key:
                             any byte changed is refused)
    thinking on              a function-calling model turn of the current turn (after the last user
                             text) carries a signature on its first functionCall part, as Gemini 3 wants

With thinking on (generationConfig.thinkingConfig) the reply begins with a thought part (the
summary, ``includeThoughts``) and signs its first function call (or its last text part); its tokens
are in thoughtsTokenCount.
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
from sidecar.providers.formats.gemini import FORMAT
from sidecar.providers.formats.protocol import Sse

__all__ = ["GEMINI", "sign"]

_KEY = b"sidecar-fake-gemini-thought-key"
_RPC = "type.googleapis.com/google.rpc."
_QUOTA_METRIC = "generativelanguage.googleapis.com/generate_content_free_tier_requests"
_HELP = {"@type": _RPC + "Help", "links": [{"description": "Learn more about Gemini API quotas",
                                             "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]}  # fmt: skip
_QUOTA_WORDS = (
    "You exceeded your current quota, please check your plan and billing details. For more information on this "
    "error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."
)
_HARM = {
    "hate": "HARM_CATEGORY_HATE_SPEECH",
    "sexual": "HARM_CATEGORY_SEXUALLY_EXPLICIT",
    "violence": "HARM_CATEGORY_DANGEROUS_CONTENT",
    "self_harm": "HARM_CATEGORY_DANGEROUS_CONTENT",
    "jailbreak": "HARM_CATEGORY_HARASSMENT",
}
_BLOCK = "BLOCK"
"""The type of a preset that answers 200 with a block (``error_body`` makes it a reply, not an error)."""


def sign(seed: str) -> str:
    """A thought signature the fake can verify: a nonce and its MAC, base64."""
    nonce = hashlib.sha256(seed.encode()).digest()[:12]
    return base64.b64encode(nonce + hmac.new(_KEY, nonce, hashlib.sha256).digest()).decode("ascii")


def _verifies(signature: str) -> bool:
    try:
        raw = base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        return False
    return len(raw) > 12 and hmac.compare_digest(raw[12:], hmac.new(_KEY, raw[:12], hashlib.sha256).digest())


def _quota(quota_id: str, delay: str) -> list[dict[str, Any]]:
    violation = {"quotaMetric": _QUOTA_METRIC, "quotaId": quota_id, "quotaValue": "10",
                 "quotaDimensions": {"location": "global", "model": "gemini-2.5-flash"}}  # fmt: skip
    return [
        {"@type": _RPC + "QuotaFailure", "violations": [violation]},
        _HELP,
        {"@type": _RPC + "RetryInfo", "retryDelay": delay},
    ]


@dataclass
class _Asked(Conversation):
    thinking: bool = False


def _bad(message: str) -> ErrorSpec:
    return ErrorSpec(400, "INVALID_ARGUMENT", message)


def _model_turns(body: dict[str, Any]) -> list[tuple[int, list[dict[str, Any]]]]:
    contents = body.get("contents")
    out = []
    for i, c in enumerate(contents if isinstance(contents, list) else []):
        parts = c.get("parts") if isinstance(c, dict) else None
        if isinstance(c, dict) and c.get("role") == "model" and isinstance(parts, list):
            out.append((i, [p for p in parts if isinstance(p, dict)]))
    return out


def _last_user_text(body: dict[str, Any]) -> int:
    contents = body.get("contents")
    last = -1
    for i, c in enumerate(contents if isinstance(contents, list) else []):
        parts = c.get("parts") if isinstance(c, dict) else None
        told = isinstance(c, dict) and c.get("role", "user") == "user" and isinstance(parts, list)
        if told and any(isinstance(p, dict) and "functionResponse" not in p for p in parts or ()):
            last = i
    return last


class _Gemini(Wire):
    name = FORMAT.name
    front = FORMAT.front
    reply_prefix = "gemini_fake"
    call_prefix = "gcall_fake"

    def routed(self, path: str, body: Any) -> dict[str, Any] | None:
        """The request's body with the URL's model and streaming (``front.routed``); None: not its route."""
        return self.front.routed(path, body if isinstance(body, dict) else {})

    def refuse(self, body: dict[str, Any]) -> ErrorSpec | None:
        thinking = isinstance(body.get("generationConfig"), dict) and "thinkingConfig" in body["generationConfig"]
        current = _last_user_text(body)
        for i, parts in _model_turns(body):
            for j, part in enumerate(parts):
                signature = part.get("thoughtSignature")
                if signature is not None and not (isinstance(signature, str) and _verifies(signature)):
                    return _bad(f"Unable to submit request because Thought signature is not valid (contents[{i}]"
                                f".parts[{j}]).")  # fmt: skip
            calls = [p for p in parts if "functionCall" in p]
            if thinking and i > current and calls and not calls[0].get("thoughtSignature"):
                name = calls[0]["functionCall"].get("name") if isinstance(calls[0]["functionCall"], dict) else ""
                return _bad(
                    "Function call is missing a thought_signature in functionCall parts. This is required for "
                    "tools to work correctly, and missing thought_signature may lead to degraded model "
                    f"performance. Additional data, function call `default_api:{name}` , position {i + 1}. "
                    "Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
                )
        return None

    def parse(self, body: dict[str, Any]) -> Conversation:
        hints, rest = self.hints(body)
        conv = conversation_of(self.front.parse(rest), hints, body.get("tools"))
        fields = {name: getattr(conv, name) for name in Conversation.__dataclass_fields__}
        generation = body.get("generationConfig")
        return _Asked(**fields, thinking=isinstance(generation, dict) and "thinkingConfig" in generation)

    def hints(self, body: dict[str, Any]) -> tuple[Hints, dict[str, Any]]:
        config = body.get("toolConfig")
        calling = config.get("functionCallingConfig") if isinstance(config, dict) else None
        calling = calling if isinstance(calling, dict) else {}
        names = calling.get("allowedFunctionNames")
        forced = names[0] if isinstance(names, list) and len(names) == 1 and isinstance(names[0], str) else None
        return Hints(forced_tool=forced, tools_disabled=calling.get("mode") == "NONE"), body

    def chat_reply(self, reply: Reply, ex: Exchange, input_tokens: int, output_tokens: int) -> ChatReply:
        out = super().chat_reply(reply, ex, input_tokens, output_tokens)
        out.cache_write_input_tokens = 0  # Gemini writes its cache through a cachedContent resource, not a call
        asked = ex.conversation
        if isinstance(asked, _Asked) and asked.thinking and out.refusal is None:
            plan = f"I will call {', '.join(c.name for c in out.tool_calls)}." if out.tool_calls else "I can answer."
            text = f"**Reading the question**\n\nThe user asks: {asked.last_user_text[:120]!r}. {plan}"
            thinking = tokens_for(len(text))
            seed = f"{ex.n}:{text}"
            out.reasoning = [ReasoningPart(text), ReasoningPart(signature=sign(seed))]
            out.output_tokens, out.reasoning_tokens = out.output_tokens + thinking, out.reasoning_tokens + thinking
        return out

    def reply_body(self, reply: Reply, ex: Exchange, created: int) -> dict[str, Any]:
        body = super().reply_body(reply, ex, created)
        candidate = body["candidates"][0]
        if candidate.get("finishReason") == "SAFETY":
            candidate["safetyRatings"] = self._ratings(ex)
        return body

    def _ratings(self, ex: Exchange) -> list[dict[str, Any]]:
        blocked = {_HARM[c] for c in ex.categories} or {"HARM_CATEGORY_DANGEROUS_CONTENT"}
        return [
            {"category": c, "probability": "HIGH" if c in blocked else "NEGLIGIBLE", **({"blocked": True}
             if c in blocked else {})} for c in sorted({*_HARM.values(), "HARM_CATEGORY_CIVIC_INTEGRITY"})
        ]  # fmt: skip

    def error_body(self, spec: ErrorSpec, ex: Exchange, *, in_stream: bool = False) -> dict[str, Any]:
        if spec.type != _BLOCK:
            body = self.front.error_body(spec.message, spec.type)
            self.error_fields(body).update(spec.extra)
            return body
        head = self.head(ex, 0)
        usage = {"promptTokenCount": tokens_for(ex.conversation.input_chars), "totalTokenCount":
                 tokens_for(ex.conversation.input_chars)}  # fmt: skip
        out: dict[str, Any] = {"usageMetadata": usage, "modelVersion": head.model, "responseId": head.reply_id}
        if spec.message == "PROHIBITED_CONTENT":
            out = {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, **out}
        else:
            out = {"candidates": [{"finishReason": "SAFETY", "index": 0, "safetyRatings": self._ratings(ex)}], **out}
        return out

    def stream_events(self, plan: Plan, ex: Exchange, created: int) -> list[SseEvent]:
        final = self.chat_reply(plan.reply, ex, plan.input_tokens, plan.output_tokens)
        writer = self.front.writer(self.head(ex, created))
        raw: list[Sse] = writer.start(plan.input_tokens)
        for i, r in enumerate(final.reasoning):
            for words in split_text(r.text):
                raw += writer.delta(ReasoningDelta(i, text=words))
            if r.signature:
                raw += writer.delta(ReasoningDelta(i, signature=r.signature))
        raw += self.piece_events(writer, plan, ex)
        raw += writer.final(final)
        events = self.tagged(raw)
        if final.refusal is not None or final.finish.name == "CONTENT_FILTER":
            last = json.loads(events[-1].data)
            last["candidates"][0]["safetyRatings"] = self._ratings(ex)
            events[-1] = SseEvent.of(last, None, "close")
        return events

    def part_of(self, name: str, data: dict[str, Any] | str) -> Part:
        if not isinstance(data, dict):
            return "body"
        candidates = data.get("candidates")
        candidate = candidates[0] if isinstance(candidates, list) and candidates else {}
        if "finishReason" in candidate or "promptFeedback" in data:
            return "close"
        parts = candidate.get("content", {}).get("parts", [{}])
        return "body" if "functionCall" in parts[0] else "delta"

    def preset_error(self, preset: str, ex: Exchange) -> ErrorSpec | None:
        model = ex.model or "unknown"
        specs = {
            "rate_limit": ErrorSpec(429, "RESOURCE_EXHAUSTED", _QUOTA_WORDS, extra={
                "details": _quota("GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "1s")}),
            "insufficient_quota": ErrorSpec(429, "RESOURCE_EXHAUSTED", _QUOTA_WORDS, extra={
                "details": _quota("GenerateRequestsPerDayPerProjectPerModel-FreeTier", "41s")}),
            "payment_required": ErrorSpec(429, "RESOURCE_EXHAUSTED", _QUOTA_WORDS, extra={
                "details": _quota("GenerateContentInputTokensPerModelPerDay-FreeTier", "12s")}),
            "overloaded": ErrorSpec(503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
            "server_error": ErrorSpec(500, "INTERNAL", "An internal error has occurred. Please retry or report in "
                                      "https://developers.generativeai.google/guide/troubleshooting"),
            "context_too_long": ErrorSpec(400, "INVALID_ARGUMENT", "The input token count (1212025) exceeds the "
                                          "maximum number of tokens allowed (1048576)."),
            "invalid_key": ErrorSpec(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.",
                                     extra={"details": [{"@type": _RPC + "ErrorInfo", "reason": "API_KEY_INVALID",
                                             "domain": "googleapis.com", "metadata": {
                                                 "service": "generativelanguage.googleapis.com"}}]}),
            "model_not_found": ErrorSpec(404, "NOT_FOUND", f"models/{model} is not found for API version v1beta, "
                                         "or is not supported for generateContent. Call ListModels to see the list "
                                         "of available models and their supported methods."),
            "account_blocked": ErrorSpec(400, "FAILED_PRECONDITION", "User location is not supported for the API "
                                         "use."),
            "content_policy": ErrorSpec(200, _BLOCK, "PROHIBITED_CONTENT"),
            "content_filter": ErrorSpec(200, _BLOCK, "SAFETY"),
        }  # fmt: skip
        return specs.get(preset)

    def status_error(self, status: int) -> ErrorSpec:
        return ErrorSpec(status, self.front.error_type(status), f"Fake provider error (HTTP {status}).")

    def headers(self, ex: Exchange, status: int) -> dict[str, str]:
        return {"x-fake-request-id": f"req_fake{ex.n:08d}", "server": "scaffolding on HTTPServer2"}

    def unknown_events(self, ex: Exchange) -> list[SseEvent]:
        data = {"candidates": [{"index": 0}], "fakeFutureField": "a field this client does not know yet"}
        return [SseEvent(json.dumps(data), None, "body")]


GEMINI = _Gemini()
