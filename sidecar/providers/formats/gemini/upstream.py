"""The Gemini upstream (``generateContent``), whole and streamed.

``POST {base}/v1beta/models/{model}:generateContent`` (streamed: ``:streamGenerateContent?alt=sse``),
the key in ``x-goog-api-key``. ``GeminiUpstream.body`` renders a ChatRequest (``front.py`` reads one
back: its inverse)::

    core (ChatRequest)                          Gemini body (``shapes.Request``)
    system                                      systemInstruction, one text part
    Message(USER, text | parts)                 a "user" content: text, inlineData, fileData parts
    Message(ASSISTANT, reasoning, text | parts, a "model" content: thought parts first, then text and
            tool_calls)                         functionCall parts, each thought signature on its part
                                                (``vocab``'s table), byte-identical
    Message(TOOL, tool_results)                 a "user" content of functionResponse parts
    tools                                       one tool's functionDeclarations
    tool_choice auto | none | required | tool   functionCallingConfig mode AUTO | NONE | ANY | ANY with
                                                allowedFunctionNames [name]
    max_tokens, temperature, top_p, top_k,      generationConfig maxOutputTokens, temperature, topP, topK,
      stop, seed, presence / frequency penalty  stopSequences, seed, presencePenalty, frequencyPenalty
    response schema                             responseMimeType application/json and responseJsonSchema
                                                (the structured-output loop)
    reasoning.budget_tokens | effort            thinkingConfig thinkingBudget | thinkingLevel, includeThoughts
    provider_options_json {"gemini": {...}}     that object's keys merged into the body (safetySettings,
                                                cachedContent, ...); its generationConfig merged into the
                                                sidecar's (none of the keys the sidecar sets)

Not carried, so refused by name before sending (``carried.refuse_uncarried``): cache breakpoints
(parts.cache, tools.cache, system_cache: Gemini caches through a cachedContent resource), a plain-text
document, a tool result given as parts, strict function calling (tools.strict: Gemini has no strict
mode), parallel_tool_calls and end_user (no field). ``check`` then refuses, naming the field: an
image's detail "low", an image URL whose media type its extension does not say, a document with a
title (Gemini has no field for it), an assistant message's image or document, a reasoning effort
Gemini has no thinkingLevel for.

A reply and a stream are read by ``replies.GeminiStream`` (its table).

Error answers (``classify``), decided from the body's ``error.status`` and ``details`` first::

    429 RESOURCE_EXHAUSTED, a QuotaFailure violation of    QUOTA_EXHAUSTED (never retried, whatever
      a per-day quota (quotaId ...PerDay...)               RetryInfo says)
    429 RESOURCE_EXHAUSTED otherwise                       signal RATE_LIMIT, waiting RetryInfo.retryDelay
                                                           (else Retry-After)
    503 UNAVAILABLE "overloaded"                           signal OVERLOAD
    400 INVALID_ARGUMENT "input token count ... exceeds"   CONTEXT_OVERFLOW
    400 with ErrorInfo reason API_KEY_INVALID              UNAUTHORIZED
    anything else                                          ``providers.errors.classify_response`` (403:
                                                           UNAUTHORIZED, 404: MODEL_NOT_FOUND, 400
                                                           FAILED_PRECONDITION of a location or billing:
                                                           UNAUTHORIZED for an operator, 5xx ...)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Literal

from sidecar.core.backoff import parse_retry_after
from sidecar.core.conversation import Controls, DocumentPart, ImagePart, Message, ModelRequest, TextPart, ToolDefinition
from sidecar.core.details import ProviderDetail
from sidecar.core.json_depth import loads
from sidecar.core.kinds import RetrySignal, Role
from sidecar.core.rate_budget import Budget
from sidecar.core.redact import redact_body
from sidecar.core.retry import Retry
from sidecar.core.taxonomy import ContextOverflow, InvalidInput, QuotaExhausted, SidecarFailure, Unauthorized
from sidecar.core.text import cap
from sidecar.providers.errors import Target, classify_response
from sidecar.providers.formats.carried import CONTROLS, plain, refuse_uncarried
from sidecar.providers.formats.chat import ChatReply, ChatRequest
from sidecar.providers.formats.fields import count, text_or_empty
from sidecar.providers.formats.gemini.replies import GeminiStream
from sidecar.providers.formats.gemini.shapes import (
    Content,
    FunctionCallingConfig,
    FunctionDeclaration,
    FunctionResponse,
    Part,
    ThinkingConfig,
)
from sidecar.providers.formats.gemini.vocab import (
    API_KEY_HEADER,
    CALL_ID_PREFIX,
    FORMAT_NAME,
    GENERATION_KEYS,
    PDF,
    SIDECAR_KEYS,
    content_part,
    signed_parts,
    url_media_type,
)
from sidecar.providers.formats.inline import read_data_url
from sidecar.providers.formats.options import FIELD, merge_options, options_for
from sidecar.providers.formats.protocol import HeaderKeyed

__all__ = [
    "API_PATH",
    "LEVELS",
    "GeminiUpstream",
    "error_fields",
    "generate_path",
    "provider_options",
    "render_contents",
]

API_PATH = "/v1beta/models/"
LEVELS = ("minimal", "low", "medium", "high")
"""The core's efforts Gemini has a thinkingLevel for (all four)."""
_UNCARRIED = frozenset({"parallel_tool_calls", "end_user", "system_cache"})
_CHOICE_MODES: Mapping[str, Literal["AUTO", "NONE", "ANY"]] = {
    "auto": "AUTO",
    "none": "NONE",
    "required": "ANY",
    "tool": "ANY",
}
_PER_DAY = re.compile(r"per\s*day|perday", re.I)
_CONTEXT = re.compile(r"input token count.*exceeds|exceeds the maximum number of tokens", re.I)
_OVERLOADED = re.compile(r"overloaded", re.I)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def generate_path(model: str, *, stream: bool) -> str:
    """Where a request for ``model`` goes, below the base URL (``https://generativelanguage.googleapis.com``)."""
    if stream:
        return f"{API_PATH}{model}:streamGenerateContent?alt=sse"
    return f"{API_PATH}{model}:generateContent"


class GeminiUpstream(HeaderKeyed):
    """The sidecar as a generateContent client (the module's tables)."""

    carries: frozenset[str] = frozenset(
        {
            "parts.text",
            "parts.image",
            "parts.document",
            "parts.document_url",
            "reasoning.history",
            *(c for c in CONTROLS if c not in _UNCARRIED),
        }
    )

    def check(self, request: ModelRequest, model_id: str) -> None:
        if plain(request):
            return
        refuse_uncarried(request, self.carries, FORMAT_NAME, model_id)
        reasoning = request.controls.reasoning
        if reasoning is not None and reasoning.budget_tokens is None and reasoning.effort not in LEVELS:
            rule = f"Gemini's thinkingLevel is one of {', '.join(LEVELS)}"
            raise InvalidInput("reasoning.effort", reasoning.effort, rule)
        for i, m in enumerate(request.messages):
            for j, part in enumerate(m.parts):
                at = f"messages[{i}].parts[{j}]"
                if m.role is Role.ASSISTANT and not isinstance(part, TextPart):
                    raise InvalidInput(at, type(part).__name__, "an assistant message carries text parts only")
                if isinstance(part, ImagePart):
                    _check_image(at, part)
                if isinstance(part, DocumentPart):
                    _check_document(at, part)
        provider_options(request.controls.provider_options_json)

    def path(self, model: str, *, stream: bool) -> str:
        return generate_path(model, stream=stream)

    def headers(self, api_key: str | None) -> dict[str, str]:
        return {API_KEY_HEADER: api_key} if api_key else {}

    def body(self, request: ChatRequest, *, stream: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {"contents": render_contents(request.messages)}
        if request.system:
            body["systemInstruction"] = {"parts": [{"text": request.system}]}
        if request.tools:
            body["tools"] = [{"functionDeclarations": [_declaration(t) for t in request.tools]}]
        choice = request.controls.tool_choice
        if choice is not None:
            calling: FunctionCallingConfig = {"mode": _CHOICE_MODES[choice.mode]}
            if choice.mode == "tool":
                calling["allowedFunctionNames"] = [choice.name]
            body["toolConfig"] = {"functionCallingConfig": calling}
        generation = _generation(request)
        options = provider_options(request.controls.provider_options_json)
        generation.update(options.pop("generationConfig", {}))
        body["generationConfig"] = generation
        return merge_options(body, options, FORMAT_NAME, SIDECAR_KEYS - {"generationConfig"})

    def stream_decoder(self) -> GeminiStream:
        return GeminiStream()

    def parse(self, body: dict[str, Any]) -> ChatReply:
        stream = GeminiStream()
        stream.read(body)
        reply = stream.reply() or stream.reply(finished=False)  # no finish at all: what it holds, unfinished
        assert reply is not None
        return reply

    def classify(
        self,
        status: int,
        headers: Mapping[str, str],
        body: str,
        target: Target,
        secrets: Iterable[str],
        now: datetime,
    ) -> Retry | SidecarFailure:
        fields = error_fields(body)
        if fields is None:
            return classify_response(status, headers, body, target, secrets, now)
        message, state, details, code = fields
        if code != status and 400 <= code < 600 and status in (200, 500):
            status = code  # a stream's error chunk (read as a 500): the status it names
        outcome = classify_response(status, headers, body, target, secrets, now)
        http = outcome.http
        words = cap(redact_body(message, None, secrets)) or f"HTTP {status}"
        if status == 429 or state == "RESOURCE_EXHAUSTED":
            if _per_day(details):
                return QuotaExhausted(target.provider, target.account, target.model_id, words, http=http)
            return Retry(RetrySignal.RATE_LIMIT, words, _retry_delay(details, headers, now), http)
        if state == "UNAVAILABLE" and _OVERLOADED.search(message):
            return Retry(RetrySignal.OVERLOAD, words, parse_retry_after(headers, now), http)
        if state == "INVALID_ARGUMENT" and _CONTEXT.search(message):
            return ContextOverflow(target.provider, target.model_id, words, http=http)
        key_invalid = any(d.get("reason") == "API_KEY_INVALID" for d in details)
        if key_invalid or status in (401, 403):
            reason = f"HTTP {status} {'API_KEY_INVALID' if key_invalid else state}".strip()
            detail = ProviderDetail(provider=target.provider, account=target.account, model=target.model_id)
            return Unauthorized(target.provider, reason, http=http, endpoint=target.endpoint, provider=detail)
        return outcome

    def budget(self, headers: Mapping[str, str], now: datetime) -> Budget:
        """Gemini tells no rate-limit budget in its headers (its 429 says the wait: RetryInfo)."""
        return Budget()


def error_fields(body: str) -> tuple[str, str, list[dict[str, Any]], int] | None:
    """(message, status, details, code) of a Google error body; None when the body is not one."""
    try:
        parsed: Any = loads(body)
    except ValueError:
        return None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(parsed, list) and parsed and isinstance(parsed[0], dict):  # a stream's error, as a JSON array
        error = parsed[0].get("error")
    if not isinstance(error, dict):
        return None
    details = error.get("details")
    listed = [d for d in details if isinstance(d, dict)] if isinstance(details, list) else []
    return text_or_empty(error.get("message")), text_or_empty(error.get("status")), listed, count(error.get("code"))


def _kind(detail: Mapping[str, Any]) -> str:
    return text_or_empty(detail.get("@type")).rsplit(".", 1)[-1]


def _per_day(details: list[dict[str, Any]]) -> bool:
    """A QuotaFailure violation names a per-day quota (``GenerateRequestsPerDayPerProjectPerModel-FreeTier``)."""
    for detail in details:
        if _kind(detail) != "QuotaFailure" or not isinstance(detail.get("violations"), list):
            continue
        for v in detail["violations"]:
            if isinstance(v, dict) and any(
                _PER_DAY.search(text_or_empty(v.get(k))) for k in ("quotaId", "quotaMetric", "description")
            ):
                return True
    return False


def _retry_delay(details: list[dict[str, Any]], headers: Mapping[str, str], now: datetime) -> float | None:
    """RetryInfo's ``retryDelay`` ("37s", "0.5s") in seconds; else what Retry-After says."""
    for detail in details:
        if _kind(detail) == "RetryInfo":
            match = _DURATION.match(text_or_empty(detail.get("retryDelay")))
            if match:
                return float(match.group(1))
    return parse_retry_after(headers, now)


def _check_image(at: str, part: ImagePart) -> None:
    if part.detail == "low":
        rule = "Gemini sets no per-image low detail (generationConfig.mediaResolution is the request's): leave it unset"
        raise InvalidInput(f"{at}.detail", part.detail, rule)
    if part.url.startswith("data:"):
        if read_data_url(part.url) is None:
            raise InvalidInput(f"{at}.url", part.url[:80], "a data: URL is data:<media type>;base64,<data>")
    elif part.url and not url_media_type(part.url):
        rule = "Gemini needs an image URL's media type: give one ending in .png, .jpg, .webp, .gif ... or the data"
        raise InvalidInput(f"{at}.url", part.url[:80], rule)


def _check_document(at: str, part: DocumentPart) -> None:
    if part.title:
        raise InvalidInput(f"{at}.title", part.title, "Gemini has no field for a document's title: leave it out")
    if part.data and (part.media_type or PDF) != PDF:
        raise InvalidInput(f"{at}.media_type", part.media_type, "a document given as data is a PDF for Gemini")


def provider_options(raw: str) -> dict[str, Any]:
    """The keys ``provider_options_json`` sets for this format (its ``"gemini"`` object); its generationConfig
    may not set a key the sidecar sets."""
    options = options_for(raw, FORMAT_NAME, SIDECAR_KEYS - {"generationConfig"})
    generation = options.get("generationConfig")
    if generation is None:
        return dict(options)
    if not isinstance(generation, dict):
        raise InvalidInput(f"{FIELD}.{FORMAT_NAME}.generationConfig", json.dumps(generation)[:80], "must be an object")
    for key in generation:
        if key in GENERATION_KEYS:
            rule = "is a key the sidecar sets itself from the request's own fields: set it there"
            raise InvalidInput(f"{FIELD}.{FORMAT_NAME}.generationConfig.{key}", key, rule)
    return dict(options, generationConfig=dict(generation))


# ---------------------------------------------------------------------------- a request rendered


_AS_THEY_ARE = (
    ("top_p", "topP"),
    ("top_k", "topK"),
    ("seed", "seed"),
    ("presence_penalty", "presencePenalty"),
    ("frequency_penalty", "frequencyPenalty"),
)
"""The controls that are a generationConfig key as they are: (control, key)."""


def _generation(request: ChatRequest) -> dict[str, Any]:
    c: Controls = request.controls
    out: dict[str, Any] = {"maxOutputTokens": request.max_tokens}
    if request.temperature is not None:
        out["temperature"] = request.temperature
    out.update((key, getattr(c, name)) for name, key in _AS_THEY_ARE if getattr(c, name) is not None)
    if c.stop:
        out["stopSequences"] = list(c.stop)
    if request.response_schema is not None:
        out["responseMimeType"] = "application/json"
        out["responseJsonSchema"] = request.response_schema
    if c.reasoning is not None:
        thinking: ThinkingConfig = {"includeThoughts": True}
        if c.reasoning.budget_tokens is not None:
            thinking["thinkingBudget"] = c.reasoning.budget_tokens
        else:
            thinking["thinkingLevel"] = c.reasoning.effort.upper()
        out["thinkingConfig"] = thinking
    return out


def _declaration(tool: ToolDefinition) -> FunctionDeclaration:
    out: FunctionDeclaration = {"name": tool.name, "description": tool.description}
    if tool.parameters_json:
        out["parametersJsonSchema"] = json.loads(tool.parameters_json)
    return out


def render_contents(messages: Iterable[Message]) -> list[Content]:
    """The conversation as ``contents`` (the module's table): one content for each message."""
    out: list[Content] = []
    names: dict[str, str] = {}
    for m in messages:
        if m.role is Role.ASSISTANT:
            names.update((c.id, c.name) for c in m.tool_calls)
            out.append({"role": "model", "parts": signed_parts(m)})
            continue
        parts: list[Part] = []
        for r in m.tool_results:
            response = {"error" if r.is_error else "output": r.content}
            reply: FunctionResponse = {"name": r.name or names.get(r.call_id, ""), "response": response}
            if r.call_id and not r.call_id.startswith(CALL_ID_PREFIX):
                reply = {"id": r.call_id, **reply}
            parts.append({"functionResponse": reply})
        parts += [content_part(p) for p in m.content]
        out.append({"role": "user", "parts": parts or [{"text": ""}]})
    return out
