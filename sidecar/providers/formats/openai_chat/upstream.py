"""The OpenAI Chat Completions upstream (also vLLM, Ollama and the compatible servers), whole and streamed.

``OpenAIUpstream.body`` renders a ChatRequest (``front.py`` reads one back: its inverse)::

    core (ChatRequest)                          OpenAI body
    system                                      {"role": "system"} first
    Message(USER, text)                         {"role": "user", "content": text}
    Message(USER, parts)                        {"role": "user", "content": [part, ...]}:
      TextPart                                    {"type": "text", "text"}
      ImagePart data, media_type (detail)         {"type": "image_url", "image_url": {"url": "data:<media
                                                  type>;base64,...", "detail"}} (detail only when set)
      ImagePart url (detail)                      {"type": "image_url", "image_url": {"url", "detail"}}
      DocumentPart PDF data, title                {"type": "file", "file": {"filename": title (or
                                                  DEFAULT_FILENAME), "file_data": "data:application/pdf;
                                                  base64,..."}}
    Message(ASSISTANT, text | text parts,       {"role": "assistant", "content": text or null, or the text
      tool_calls)                                 parts, "tool_calls": [...]}
    Message(TOOL, tool_results)                 one {"role": "tool", "tool_call_id", "content"} per result; a
                                                result with is_error has TOOL_ERROR_PREFIX before its content
                                                (before its first text part); a result given as parts: the
                                                rule of tool-result images below
    tools (tools.strict)                        [{"type": "function", "function": {name, description, parameters,
                                                strict?}}] (strict when the definition sets it)
    response schema                             response_format {"type": "json_schema", "json_schema": {schema}}
    max_tokens                                  max_tokens; max_completion_tokens with reasoning (reasoning
                                                models refuse max_tokens)
    temperature                                 temperature
    reasoning                                   reasoning_effort: the effort as given; a budget_tokens as the
                                                level of ``vocab.effort_for_budget``
    tool_choice                                 "auto" | "none" | "required" | {"type": "function",
                                                "function": {"name"}}
    parallel_tool_calls, stop, top_p, seed,     the same names (stop always a list)
      presence_penalty, frequency_penalty
    end_user                                    user
    provider_options_json {"openai": {...}}     its keys merged into the body (``provider_options``)
    stream                                      "stream": true, "stream_options": {"include_usage": true}

Tool results with images (a tool message is text only)::

    core: Message(TOOL, tool_results=(r1, r2, ...)), the turn's images numbered n = 1, 2, ... in order
    r given as content                          {"role": "tool", "content": r.content} as ever
    r given as parts                            {"role": "tool", "content": [text parts]}: each TextPart as
                                                itself, each ImagePart replaced by the text part
                                                tool_image_placeholder(n) where it stood
    then, when the turn has an image            ONE {"role": "user", "content": [...]} right after the
                                                turn's tool messages: for each image, in order, the text
                                                part tool_image_label(n, call_id), then the image part
    then m.text / m.parts, if any               a user message of its own, as ever

``front.parse_request`` reads that user message back into the results' parts, each image where its
placeholder stood, so the request reads back as the core request it was (``tests/unit/
test_formats.py``). The model reads, in the tool message, that an image follows, and, in the user
message, which call each image came from.

``check`` refuses before sending (INVALID_INPUT naming the field, the model and the rule): what the
format does not carry (``carries``, with the reasons of ``_WHY``: a PDF by URL; a plain-text
document; cache breakpoints, since OpenAI caches by itself; top_k; reasoning passed back), then
OpenAI's rules: images and files in user messages only; at most MAX_STOP stop sequences;
tool_choice and parallel_tool_calls only with tools; no temperature but the default with
reasoning; provider options that are one object per wire format, without a key the sidecar sets.

A reply's ``usage``: prompt_tokens (cached ones included), completion_tokens (reasoning included),
``prompt_tokens_details.cached_tokens`` (cache_read_input_tokens), ``completion_tokens_details.
reasoning_tokens`` (reasoning_tokens); the same in a stream's usage chunk. Chat Completions sends
no reasoning text: a reply carries none.

A stream is ``data:`` events, read by ``OpenAIStream``::

    data                                         becomes
    {"choices": [{"delta": {"content": "..."}}]}   TextDelta (an empty string: nothing)
    {"delta": {"refusal": "..."}}                  kept for the reply's refusal (never sent as text)
    {"delta": {"tool_calls": [{"index", "id",      ToolCallDelta: the call numbered in the order its
       "function": {"name", "arguments"}}]}}         first fragment came; id and name on that fragment
    {"choices": [{"finish_reason": ...}]}          the reply's finish
    {"choices": [{"content_filter_results"}]},     the categories Azure marks filtered, for a refusal's
      {"prompt_filter_results": [...]}               category (``vocab.filtered_categories``)
    {"choices": [], "usage": {...}}                the reply's tokens (any chunk's usage counts)
    {"error": {...}}                               StreamFault with the error body (classified as an error)
    [DONE]                                         the end marker
    not JSON, not an object                        StreamFault (garbled)
    anything else (new fields, empty choices,      ignored, as the API asks of clients
      no data, a named event other than error)     (``event: error`` is an error event, as some servers send)

Error answers (and a stream's error events) are a content-policy refusal first (``vocab.error_refusal``:
PROVIDER_REFUSAL, never retried, whatever the status), else classified by
``providers.errors.classify_response``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sidecar.core.conversation import (
    Controls,
    DocumentPart,
    ImagePart,
    Message,
    ModelRequest,
    Part,
    TextPart,
    ToolCall,
    ToolCallResult,
    ToolChoice,
)
from sidecar.core.json_depth import loads
from sidecar.core.kinds import FinishReason, Role
from sidecar.core.rate_budget import Budget
from sidecar.core.retry import Retry
from sidecar.core.stream import Delta, TextDelta, ToolCallDelta
from sidecar.core.taxonomy import InvalidInput, SidecarFailure
from sidecar.providers.errors import Target, classify_response, refused
from sidecar.providers.formats.azure import CHAT, AzureWire
from sidecar.providers.formats.carried import asked, merge_carried, plain, refuse_uncarried
from sidecar.providers.formats.chat import ChatReply, ChatRequest, StreamFault
from sidecar.providers.formats.fields import count, text_or_empty
from sidecar.providers.formats.openai_chat.vocab import (
    DEFAULT_FILENAME,
    END_MARKER,
    FINISH,
    FORMAT_NAME,
    MAX_STOP,
    TOOL_ERROR_PREFIX,
    data_url,
    effort_for_budget,
    error_refusal,
    filtered_categories,
    rate_budget,
    render_tool,
    tool_image_label,
    tool_image_placeholder,
)
from sidecar.providers.formats.options import merge_options, options_for
from sidecar.providers.formats.protocol import SSE

__all__ = ["CHAT_PATH", "SIDECAR_KEYS", "OpenAIStream", "OpenAIUpstream", "provider_options"]

CHAT_PATH = "/chat/completions"
"""Below the provider's base URL (which ends in ``/v1`` for OpenAI itself)."""

SIDECAR_KEYS = frozenset(
    {
        "model",
        "messages",
        "stream",
        "stream_options",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "response_format",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "reasoning_effort",
        "stop",
        "top_p",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "user",
    }
)
"""The body keys the sidecar sets itself: refused in ``provider_options_json`` (set the request's own field)."""

_CACHE = (
    "OpenAI caches a prompt of 1,024 tokens or more by itself, with no breakpoints (usage reports the cached "
    "tokens); a cache breakpoint is rendered as Anthropic's cache_control"
)
_WHY: Mapping[str, str] = {
    "parts.cache": _CACHE,
    "tools.cache": _CACHE,
    "system_cache": _CACHE,
    "top_k": "Chat Completions has no top_k",
    "reasoning.history": "Chat Completions takes no reasoning back: OpenAI keeps a turn's reasoning itself",
    "parts.text_document": "Chat Completions takes a file as a PDF only: send the text as a text part",
    "parts.document_url": "Chat Completions takes a PDF as file data, not by URL: send the document's bytes",
}
"""Why the format does not carry a feature, for the refusal's words."""


class OpenAIUpstream:
    """The sidecar as a Chat Completions client (the module's tables); with ``azure``, Azure OpenAI's URLs
    and credential (``formats.azure``)."""

    def __init__(self, azure: AzureWire | None = None) -> None:
        self.azure = azure

    carries: frozenset[str] = frozenset(
        {
            "parts.text",
            "parts.image",
            "parts.document",
            "tool_results.parts",
            "tool_results.image",
            "tools.strict",
            "reasoning",
            "tool_choice",
            "parallel_tool_calls",
            "stop",
            "top_p",
            "seed",
            "presence_penalty",
            "frequency_penalty",
            "end_user",
            "provider_options_json",
        }
    )
    """What the format carries (``formats.carried``): a PDF as data, not by URL (Chat Completions has no URL form)."""

    def check(self, request: ModelRequest, model_id: str) -> None:
        if plain(request):
            return
        _refuse_with_reasons(request, model_id)
        refuse_uncarried(request, self.carries, FORMAT_NAME, model_id)
        _check_rules(request, model_id)
        provider_options(request.controls)

    def path(self, model: str, *, stream: bool) -> str:
        return CHAT_PATH if self.azure is None else self.azure.path(model, CHAT)

    def headers(self, api_key: str | None) -> dict[str, str]:
        if self.azure is not None:
            return self.azure.headers(api_key)
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    stream_type = SSE

    def sign(self, method: str, url: str, headers: Mapping[str, str], body: bytes) -> dict[str, str]:
        return dict(headers)  # the key is a header (``headers``): nothing covers the request itself

    def body(self, request: ChatRequest, *, stream: bool = False) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        for m in request.messages:
            messages.extend(_message(m))
        controls = request.controls
        budget = "max_completion_tokens" if controls.reasoning is not None else "max_tokens"
        body: dict[str, Any] = {"model": request.upstream_model, "messages": messages, budget: request.max_tokens}
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.tools:
            body["tools"] = [
                merge_carried(
                    render_tool(
                        t.name, t.description, json.loads(t.parameters_json) if t.parameters_json else None, t.strict
                    ),
                    t.carried,
                    FORMAT_NAME,
                )
                for t in request.tools
            ]
        if request.response_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": request.response_schema, "strict": False},
            }
        body.update(_controls(controls))
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        merge_options(body, provider_options(controls), FORMAT_NAME, SIDECAR_KEYS)
        return merge_carried(body, request.carried, FORMAT_NAME)

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
        reply = ChatReply(
            text=content,
            tool_calls=calls,
            finish=FINISH.get(raw_finish, FinishReason.UNSPECIFIED),
            raw_finish=raw_finish,
            refusal=message.get("refusal") or None,
            input_tokens=int(usage.get("prompt_tokens") or 0),
            output_tokens=int(usage.get("completion_tokens") or 0),
            response_model=str(body.get("model") or ""),
            response_id=str(body.get("id") or ""),
            refusal_category=",".join(
                filtered_categories(choice.get("content_filter_results"), body.get("prompt_filter_results"))
            ),
        )
        _read_usage(usage, reply)
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
        refusal = error_refusal(body)
        if refusal is not None:
            return refused(status, headers, body, target, secrets, *refusal)
        return classify_response(status, headers, body, target, secrets, now)

    def budget(self, headers: Mapping[str, str], now: datetime) -> Budget:
        return rate_budget(headers)


def _read_usage(usage: Mapping[str, Any], reply: ChatReply) -> None:
    """The tokens of a ``usage`` object into ``reply`` (a count absent, or not a count, leaves it as it was)."""
    reply.input_tokens = count(usage.get("prompt_tokens")) or reply.input_tokens
    reply.output_tokens = count(usage.get("completion_tokens")) or reply.output_tokens
    prompt = usage.get("prompt_tokens_details")
    if isinstance(prompt, dict):
        reply.cache_read_input_tokens = count(prompt.get("cached_tokens")) or reply.cache_read_input_tokens
    completion = usage.get("completion_tokens_details")
    if isinstance(completion, dict):
        reply.reasoning_tokens = count(completion.get("reasoning_tokens")) or reply.reasoning_tokens


# ---------------------------------------------------------------------------- checks before sending


def _refused(field: str, feature: str, model_id: str, why: str) -> InvalidInput:
    return InvalidInput(
        field,
        feature,
        f"model {model_id} speaks the {FORMAT_NAME} wire format, which does not carry {why} (docs/carried.md)",
    )


def _refuse_with_reasons(request: ModelRequest, model_id: str) -> None:
    """The first feature the format does not carry for a reason it can say."""
    for feature, field in asked(request):
        if feature in _WHY:
            raise _refused(field, feature, model_id, f"{feature}: {_WHY[feature]}")


def _rule(field: str, value: str, model_id: str, rule: str) -> InvalidInput:
    return InvalidInput(field, value, f"model {model_id} speaks the {FORMAT_NAME} wire format: {rule}")


def _check_rules(request: ModelRequest, model_id: str) -> None:
    """OpenAI's own rules (the module's list)."""
    for i, m in enumerate(request.messages):
        if m.role is not Role.ASSISTANT:
            continue
        for j, part in enumerate(m.parts):
            if not isinstance(part, TextPart):
                kind = "image" if isinstance(part, ImagePart) else "document"
                raise _rule(
                    f"messages[{i}].parts[{j}]",
                    kind,
                    model_id,
                    "Chat Completions takes images and files in user "
                    "messages only (an assistant message is text and tool calls)",
                )
    c = request.controls
    if len(c.stop) > MAX_STOP:
        at_most = f"OpenAI takes at most {MAX_STOP} stop sequences"
        raise _rule("stop", f"{len(c.stop)} stop sequences", model_id, at_most)
    if not request.tools:
        if c.tool_choice is not None:
            raise _rule("tool_choice", c.tool_choice.mode, model_id, "OpenAI takes tool_choice only with tools")
        if c.parallel_tool_calls is not None:
            raise _rule(
                "parallel_tool_calls",
                str(c.parallel_tool_calls).lower(),
                model_id,
                "OpenAI takes parallel_tool_calls only with tools",
            )
    if c.reasoning is not None and request.temperature not in (None, 1.0):
        raise _rule(
            "temperature",
            str(request.temperature),
            model_id,
            "OpenAI's reasoning models take only the default temperature (1): leave temperature unset with reasoning",
        )


def provider_options(controls: Controls) -> dict[str, Any]:
    """The keys ``provider_options_json`` merges into an OpenAI body (its ``"openai"`` object, ``formats.options``);
    ``n`` is refused too: the sidecar reads one choice."""
    return options_for(controls.provider_options_json, FORMAT_NAME, SIDECAR_KEYS, _REFUSED_OPTIONS)


_REFUSED_OPTIONS = {"n": "the sidecar reads one choice: leave n out"}


# ---------------------------------------------------------------------------- the body


def _controls(c: Controls) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if c.reasoning is not None:
        budget = c.reasoning.budget_tokens
        out["reasoning_effort"] = c.reasoning.effort if budget is None else effort_for_budget(budget)
    if c.tool_choice is not None:
        out["tool_choice"] = _choice(c.tool_choice)
    if c.parallel_tool_calls is not None:
        out["parallel_tool_calls"] = c.parallel_tool_calls
    if c.stop:
        out["stop"] = list(c.stop)
    for name, value in (
        ("top_p", c.top_p),
        ("seed", c.seed),
        ("presence_penalty", c.presence_penalty),
        ("frequency_penalty", c.frequency_penalty),
    ):
        if value is not None:
            out[name] = value
    if c.end_user:
        out["user"] = c.end_user
    return out


def _choice(choice: ToolChoice) -> str | dict[str, Any]:
    if choice.mode == "tool":
        return {"type": "function", "function": {"name": choice.name}}
    return choice.mode


def _part(part: Part) -> dict[str, Any]:
    """A part as its content part, with the keys it carries."""
    return merge_carried(_rendered_part(part), part.carried, FORMAT_NAME)


def _rendered_part(part: Part) -> dict[str, Any]:
    match part:
        case TextPart():
            return {"type": "text", "text": part.text}
        case ImagePart():
            image: dict[str, Any] = {"url": part.url or data_url(part.media_type, part.data)}
            if part.detail:
                image["detail"] = part.detail
            return {"type": "image_url", "image_url": image}
        case DocumentPart():
            pdf = data_url(part.media_type or "application/pdf", part.data)
            return {"type": "file", "file": {"filename": part.title or DEFAULT_FILENAME, "file_data": pdf}}


def _content(m: Message) -> str | list[dict[str, Any]]:
    return [_part(p) for p in m.parts] if m.parts else m.text


def _message(m: Message) -> list[dict[str, Any]]:
    if m.role == Role.ASSISTANT:
        msg: dict[str, Any] = {"role": "assistant", "content": _content(m) or None}
        if m.tool_calls:
            msg["tool_calls"] = [
                merge_carried(
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments_json or "{}"},
                    },
                    c.carried,
                    FORMAT_NAME,
                )
                for c in m.tool_calls
            ]
        return [merge_carried(msg, m.carried, FORMAT_NAME)]
    out = _tool_messages(m.tool_results)
    if m.text or m.parts or not m.tool_results:
        out.append(merge_carried({"role": "user", "content": _content(m)}, m.carried, FORMAT_NAME))
    return out


def _tool_messages(results: tuple[ToolCallResult, ...]) -> list[dict[str, Any]]:
    """A turn's tool messages, then the user message with its images (the module's table)."""
    out: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for r in results:
        if not r.parts:
            content: str | list[dict[str, Any]] = TOOL_ERROR_PREFIX + r.content if r.is_error else r.content
            out.append(
                merge_carried({"role": "tool", "tool_call_id": r.call_id, "content": content}, r.carried, FORMAT_NAME)
            )
            continue
        parts: list[dict[str, Any]] = []
        for part in r.parts:
            if isinstance(part, ImagePart):
                n = len(images) // 2 + 1
                images += [{"type": "text", "text": tool_image_label(n, r.call_id)}, _part(part)]
                parts.append({"type": "text", "text": tool_image_placeholder(n)})
            else:
                parts.append(_part(part))
        if r.is_error:
            first = r.parts[0]
            if isinstance(first, TextPart):
                parts[0] = {"type": "text", "text": TOOL_ERROR_PREFIX + first.text}
            else:
                parts.insert(0, {"type": "text", "text": TOOL_ERROR_PREFIX})
        out.append(merge_carried({"role": "tool", "tool_call_id": r.call_id, "content": parts}, r.carried, FORMAT_NAME))
    if images:
        out.append({"role": "user", "content": images})
    return out


# ---------------------------------------------------------------------------- streams


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
        self._usage = ChatReply("")
        """The tokens any chunk's usage said."""
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
        try:
            chunk = loads(data)
        except ValueError:
            raise StreamFault("the stream sent an event that is not JSON") from None
        if not isinstance(chunk, dict):
            raise StreamFault("the stream sent an event that is not a JSON object")
        if "error" in chunk:
            raise StreamFault("the stream sent an error event", error_body=data)
        self.model = text_or_empty(chunk.get("model")) or self.model
        self._id = text_or_empty(chunk.get("id")) or self._id
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            _read_usage(usage, self._usage)
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
        usage = self._usage
        return ChatReply(
            text="".join(self._text),
            tool_calls=calls,
            finish=FINISH.get(self._finish, FinishReason.UNSPECIFIED),
            raw_finish=self._finish,
            refusal="".join(self._refusal) or None,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            response_model=self.model,
            response_id=self._id,
            cache_read_input_tokens=usage.cache_read_input_tokens,
            reasoning_tokens=usage.reasoning_tokens,
            refusal_category=",".join(self._filtered),
        )
