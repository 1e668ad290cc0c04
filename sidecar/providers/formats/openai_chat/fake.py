"""The OpenAI Chat Completions wire as the fake provider speaks it (the format: ``formats.openai_chat``).

A stream (``"stream": true``) is ``data: {chat.completion.chunk}`` events, each in its part::

    open   {"delta": {"role": "assistant", "content": "" | null, "refusal": null}}
    delta  {"delta": {"content": "..."}} | {"delta": {"refusal": "..."}}
    body   {"delta": {"tool_calls": [{"index", "id", "type": "function", "function": {"name", "arguments": ""}}]}}
    delta  {"delta": {"tool_calls": [{"index", "function": {"arguments": "..."}}]}}
    close  {"delta": {}, "finish_reason": ...}
    close  {"choices": [], "usage": {...}}      only with stream_options.include_usage (then every
                                                 chunk before it has "usage": null)
    close  [DONE]

An error after the stream began is ``data: {"error": {...}}`` and nothing after it.

Content-policy refusals, as OpenAI and Azure OpenAI (the same wire) send them::

    preset content_policy     400 {"error": {"type": "invalid_request_error", "code": "content_policy_violation",
                              "message": "Your request was rejected as a result of our safety system. ..."}}
    preset content_filter     400 Azure's: {"error": {"code": "content_filter", "param": "prompt", "status": 400,
                              "innererror": {"code": "ResponsibleAIPolicyViolation", "content_filter_result":
                              {category: {"filtered", "severity"}, ...}}}}, the step's ``categories``
                              filtered (default: hate)
    finish content_filter     the reply finishes content_filter; with ``categories``, as Azure: the choice (the
                              finish chunk, streamed) carries ``content_filter_results``, those filtered

Both error presets also go mid-stream (``stream_fault``), as an error event. ``account_blocked`` is 404
"Your organization must be verified to use the model ..." (``invalid_request_error``, code
``model_not_found``: as OpenAI answers an unverified organization asking for a gated model; the same words
come as a 400 ``unsupported_value`` naming ``stream`` or ``reasoning.summary`` when only those are gated).

A request is refused as the API refuses it, a 400 in its words with its ``param`` and ``code``
(``refuse``), before it is read::

    what                                                    param, code
    a key the API does not know                             null ("Unrecognized request argument")
    more than 4 stop sequences                              stop, array_above_max_length
    tool_choice or parallel_tool_calls without tools        the key, null
    tool_choice naming a function not in tools              tool_choice, invalid_value
    a content part type the role does not take (user:      messages[i].content[j].type, invalid_value
      text, image_url, input_audio, file; assistant: text,
      refusal; system, developer, tool: text)
    an image_url data: URL that is not base64 of an image   messages[i].content[j].image_url.url, invalid_value
    an image of a media type the API does not read          null, invalid_image_format
    a file's file_data that is not a base64 data: URL       messages[i].content[j].file.file_data, invalid_value
    reasoning_effort not minimal, low, medium or high       reasoning_effort, invalid_value
    with reasoning_effort (a reasoning model): max_tokens,  max_tokens, unsupported_parameter;
      a temperature other than 1                            temperature, unsupported_value

Keys the API takes and the fake does not act on (``UNREAD_KEYS``: ``metadata``, ``service_tier``,
``prompt_cache_key`` ...) are accepted and set aside, as a provider that ignores them would: what the
sidecar's ``provider_options_json`` merges in reaches the fake as it would reach OpenAI. A step's
``usage`` is reported as ``prompt_tokens_details.cached_tokens`` and ``completion_tokens_details.
reasoning_tokens`` (cache writes: counted in ``prompt_tokens`` only, as OpenAI has no field for them).
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any

from sidecar.fakes._brain import Reply
from sidecar.fakes._conversation import Hints
from sidecar.fakes._limits import Taken
from sidecar.fakes._sse import Part, Plan, SseEvent
from sidecar.fakes._wire import FILTER_CATEGORIES, ErrorSpec, Exchange, Wire, mask_key
from sidecar.providers.formats.inline import read_data_url
from sidecar.providers.formats.openai_chat import FORMAT
from sidecar.providers.formats.openai_chat.front import REQUEST_KEYS
from sidecar.providers.formats.openai_chat.vocab import END_MARKER, ERROR_TYPES, MAX_STOP, RATE_LIMIT_HEADERS

__all__ = ["OPENAI", "UNREAD_KEYS", "duration", "filter_results"]

UNREAD_KEYS = frozenset(
    {
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "metadata",
        "store",
        "service_tier",
        "prompt_cache_key",
        "safety_identifier",
        "verbosity",
        "prediction",
        "web_search_options",
    }
)
"""Keys the API takes that the fake does not act on: accepted and set aside."""
_PART_TYPES = {
    "user": ("text", "image_url", "input_audio", "file"),
    "assistant": ("text", "refusal"),
    "system": ("text",),
    "developer": ("text",),
    "tool": ("text",),
}
_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_EFFORTS = ("minimal", "low", "medium", "high")
_INVALID = "invalid_request_error"


def _listed(values: tuple[str, ...]) -> str:
    quoted = [f"'{v}'" for v in values]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + ", and " + quoted[-1]


def _bad(message: str, param: str | None, code: str | None) -> ErrorSpec:
    return ErrorSpec(400, _INVALID, message, code, param)


def _refusal(body: dict[str, Any]) -> ErrorSpec | None:
    """The API's 400 for the first rule of the module's table ``body`` breaks."""
    for key in body:
        if key not in REQUEST_KEYS and key not in UNREAD_KEYS:
            return _bad(f"Unrecognized request argument supplied: {key}", None, None)
    return _controls_refusal(body) or _messages_refusal(body.get("messages"))


def _controls_refusal(body: dict[str, Any]) -> ErrorSpec | None:
    stop = body.get("stop")
    if isinstance(stop, list) and len(stop) > MAX_STOP:
        return _bad(
            f"Invalid 'stop': array too long. Expected an array with maximum length {MAX_STOP}, but got an array "
            f"with length {len(stop)} instead.",
            "stop",
            "array_above_max_length",
        )
    listed = body.get("tools")
    tools: list[Any] = listed if isinstance(listed, list) else []
    for key in ("tool_choice", "parallel_tool_calls"):
        if body.get(key) is not None and not tools:
            return _bad(f"Invalid value for '{key}': '{key}' is only allowed when 'tools' are specified.", key, None)
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        name = choice["function"].get("name")
        functions = [t.get("function") for t in tools if isinstance(t, dict)]
        names = [f.get("name") for f in functions if isinstance(f, dict)]
        if name not in names:
            return _bad(
                f"Invalid value for 'tool_choice': function '{name}' is not one of the 'tools' specified.",
                "tool_choice",
                "invalid_value",
            )
    effort = body.get("reasoning_effort")
    if effort is None:
        return None
    if effort not in _EFFORTS:
        return _bad(
            f"Invalid value: '{effort}'. Supported values are: {_listed(_EFFORTS)}.",
            "reasoning_effort",
            "invalid_value",
        )
    if body.get("max_tokens") is not None:
        return _bad(
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' "
            "instead.",
            "max_tokens",
            "unsupported_parameter",
        )
    temperature = body.get("temperature")
    if temperature is not None and temperature != 1:
        return _bad(
            f"Unsupported value: 'temperature' does not support {temperature} with this model. Only the default "
            "(1) value is supported.",
            "temperature",
            "unsupported_value",
        )
    return None


def _messages_refusal(messages: Any) -> ErrorSpec | None:
    for i, m in enumerate(messages if isinstance(messages, list) else []):
        content = m.get("content") if isinstance(m, dict) else None
        allowed = _PART_TYPES.get(str(m.get("role")) if isinstance(m, dict) else "", ())
        for j, part in enumerate(content if isinstance(content, list) else []):
            at = f"messages[{i}].content[{j}]"
            kind = part.get("type") if isinstance(part, dict) else None
            if kind not in allowed:
                return _bad(
                    f"Invalid value: '{kind}'. Supported values are: {_listed(allowed)}.", f"{at}.type", "invalid_value"
                )
            refused = _part_refusal(part, kind, at)
            if refused is not None:
                return refused
    return None


def _part_refusal(part: dict[str, Any], kind: str, at: str) -> ErrorSpec | None:
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else None
        if isinstance(url, str) and url.startswith("data:"):
            read = read_data_url(url)
            if read is None or not read[0].startswith("image/"):
                return _bad(
                    f"Invalid '{at}.image_url.url'. Expected a base64-encoded data URL with an image MIME type "
                    "(e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got an invalid value.",
                    f"{at}.image_url.url",
                    "invalid_value",
                )
            if read[0] not in _IMAGE_TYPES:
                return _bad(
                    "You uploaded an unsupported image. Please make sure your image has of one the following "
                    "formats: ['png', 'jpeg', 'gif', 'webp'].",
                    None,
                    "invalid_image_format",
                )
    if kind == "file":
        file = part.get("file")
        data = file.get("file_data") if isinstance(file, dict) else None
        if data is not None and (not isinstance(data, str) or read_data_url(data) is None):
            return _bad(
                f"Invalid '{at}.file.file_data'. Expected a base64-encoded data URL, but got an invalid value.",
                f"{at}.file.file_data",
                "invalid_value",
            )
    return None


class _OpenAI(Wire):
    name = FORMAT.name
    front = FORMAT.front
    reply_prefix = "chatcmpl-fake"
    call_prefix = "call_fake"

    def hints(self, body: dict[str, Any]) -> tuple[Hints, dict[str, Any]]:
        choice = body.get("tool_choice")
        forced = None
        if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
            name = choice["function"].get("name")
            forced = name if isinstance(name, str) else None
        rest = {k: v for k, v in body.items() if k not in UNREAD_KEYS}
        return Hints(forced_tool=forced, tools_disabled=choice == "none"), rest

    def refuse(self, body: dict[str, Any]) -> ErrorSpec | None:
        return _refusal(body)

    def part_of(self, name: str, data: dict[str, Any] | str) -> Part:
        if data == END_MARKER or not isinstance(data, dict):
            return "close"
        choices = data.get("choices") or []
        if not choices:
            return "close"  # the usage chunk
        choice = choices[0]
        delta = choice.get("delta") or {}
        if choice.get("finish_reason"):
            return "close"
        if "role" in delta:
            return "open"
        calls = delta.get("tool_calls")
        if calls and "id" in calls[0]:
            return "body"  # a call's start: its id and name
        return "delta"

    def reply_body(self, reply: Reply, ex: Exchange, created: int) -> dict[str, Any]:
        body = super().reply_body(reply, ex, created)
        if reply.finish == "content_filter" and ex.categories:
            body["choices"][0]["content_filter_results"] = filter_results(ex.categories)
        return body

    def stream_events(self, plan: Plan, ex: Exchange, created: int) -> list[SseEvent]:
        events = super().stream_events(plan, ex, created)
        if plan.reply.finish == "content_filter" and ex.categories:
            events = [_withfilter_results(e, ex.categories) for e in events]
        if plan.reply.text is not None:
            return events
        opening = json.loads(events[0].data)  # a reply with no text (tool calls, a refusal) opens with null content
        opening["choices"][0]["delta"]["content"] = None
        return [SseEvent.of(opening, part="open"), *events[1:]]

    def preset_error(self, preset: str, ex: Exchange) -> ErrorSpec | None:
        model = ex.model or "unknown"
        specs = {
            "rate_limit": ErrorSpec(
                429,
                "requests",
                f"Rate limit reached for {model} on requests per min (RPM): Limit 500, Used 500, "
                "Requested 1. Please try again in 1s. Visit https://platform.openai.com/account/rate-limits "
                "to learn more.",
                "rate_limit_exceeded",
            ),
            "overloaded": ErrorSpec(
                529, "overloaded_error", "The server is overloaded. Please try again later.", "overloaded_error"
            ),
            "server_error": ErrorSpec(
                500, "server_error", "The server had an error while processing your request. Sorry about that!"
            ),
            "insufficient_quota": ErrorSpec(
                429,
                "insufficient_quota",
                "You exceeded your current quota, please check your plan and billing details. For more "
                "information on this error, read the docs: "
                "https://platform.openai.com/docs/guides/error-codes/api-errors.",
                "insufficient_quota",
            ),
            "payment_required": ErrorSpec(
                402, "payment_required", "Payment required: this account has run out of credits.", "payment_required"
            ),
            "context_too_long": ErrorSpec(
                400,
                "invalid_request_error",
                "This model's maximum context length is 128000 tokens. However, your messages resulted in "
                "210000 tokens. Please reduce the length of the messages.",
                "context_length_exceeded",
                "messages",
            ),
            "invalid_key": ErrorSpec(
                401,
                "invalid_request_error",
                f"Incorrect API key provided: {mask_key(ex.api_key)}. You can find your API key at "
                "https://platform.openai.com/account/api-keys.",
                "invalid_api_key",
            ),
            "model_not_found": ErrorSpec(
                404,
                "invalid_request_error",
                f"The model `{model}` does not exist or you do not have access to it.",
                "model_not_found",
            ),
            "account_blocked": ErrorSpec(
                404,
                "invalid_request_error",
                f"Your organization must be verified to use the model `{model}`. Please go to: "
                "https://platform.openai.com/settings/organization/general and click on Verify Organization. If you "
                "just verified, it can take up to 15 minutes for access to propagate.",
                "model_not_found",
            ),
            "content_policy": ErrorSpec(
                400,
                _INVALID,
                "Your request was rejected as a result of our safety system. Your prompt may contain text that is "
                "not allowed by our safety system.",
                "content_policy_violation",
            ),
            "content_filter": ErrorSpec(
                400,
                "",
                "The response was filtered due to the prompt triggering Azure OpenAI's content management policy. "
                "Please modify your prompt and retry. To learn more about our content filtering policies please "
                "read our documentation: https://go.microsoft.com/fwlink/?linkid=2198766",
                "content_filter",
                "prompt",
                {
                    "type": None,  # as Azure sends it
                    "status": 400,
                    "innererror": {
                        "code": "ResponsibleAIPolicyViolation",
                        "content_filter_result": filter_results(ex.categories or ("hate",)),
                    },
                },
            ),
        }
        return specs.get(preset)

    def status_error(self, status: int) -> ErrorSpec:
        code = ERROR_TYPES.get(status, ("", None))[1]
        return ErrorSpec(status, self.front.error_type(status), f"Fake provider error (HTTP {status}).", code)

    def headers(self, ex: Exchange, status: int) -> dict[str, str]:
        limited = status == 429
        values = (
            "10000",
            "0" if limited else "9999",
            "1s" if limited else "6ms",
            "2000000",
            "1999000",
            "30ms",
        )
        return {
            "x-request-id": f"req_fake{ex.n:08d}",
            "openai-processing-ms": "1",
            "openai-version": "2020-10-01",
            **dict(zip(RATE_LIMIT_HEADERS, values, strict=True)),
        }

    def budget_headers(self, taken: Taken, now: datetime) -> dict[str, str]:
        return {
            "x-ratelimit-limit-requests": str(taken.limit),
            "x-ratelimit-remaining-requests": str(taken.remaining),
            "x-ratelimit-reset-requests": duration(taken.reset_s),
        }

    def unknown_events(self, ex: Exchange) -> list[SseEvent]:
        # An SSE comment (proxies send keep-alives so), then a chunk with no choices and a field
        # this fake made up (Azure sends such chunks with ``prompt_filter_results``).
        extra: dict[str, Any] = {"usage": None} if ex.conversation.include_usage else {}
        body = {
            "id": f"chatcmpl-fake{ex.n:08d}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": ex.model,
            "choices": [],
            "fake_future_field": {"note": "a field this client does not know yet"},
            **extra,
        }
        return [SseEvent("keep-alive", comment=True), SseEvent.of(body)]


def duration(seconds: float) -> str:
    """Seconds as OpenAI writes a reset: ``6m0s``, ``1.5s``, ``20ms``."""
    ms = max(round(seconds * 1000), 0)
    if ms < 1000:
        return f"{ms}ms"
    minutes, rest = divmod(ms, 60_000)
    secs = f"{rest / 1000:g}s"
    return f"{minutes}m{secs}" if minutes else secs


def filter_results(categories: tuple[str, ...]) -> dict[str, Any]:
    """Azure's ``content_filter_result(s)``: every category, those named filtered (severity high)."""
    out: dict[str, Any] = {}
    for name in FILTER_CATEGORIES:
        if name == "jailbreak":
            out[name] = {"filtered": name in categories, "detected": name in categories}
        else:
            out[name] = {"filtered": name in categories, "severity": "high" if name in categories else "safe"}
    return out


def _withfilter_results(event: SseEvent, categories: tuple[str, ...]) -> SseEvent:
    """The finish chunk with Azure's ``content_filter_results`` in its choice; any other event as it was."""
    if event.part != "close" or not event.data.startswith("{"):
        return event
    chunk = json.loads(event.data)
    choices = chunk.get("choices") or []
    if not choices or not choices[0].get("finish_reason"):
        return event
    choices[0]["content_filter_results"] = filter_results(categories)
    return SseEvent.of(chunk, event.event, event.part)


OPENAI = _OpenAI()
