"""The OpenAI Chat Completions upstream (also vLLM, Ollama and the compatible servers), whole and streamed.

``OpenAIUpstream.body`` renders a ChatRequest in the shapes of ``shapes.py``: ``request.py``'s table,
inverted, with what is the upstream's own::

    core (ChatRequest)                  OpenAI body
    system                              a system message, first
    Message(ASSISTANT) with no text     content null
    Message(TOOL, tool_results)         a tool message per result; is_error: TOOL_ERROR_PREFIX before its
                                        content (its first text part); parts: the image rule below
    ImagePart, DocumentPart             image_url (a data: URL for bytes; detail only when set), file (a
                                        PDF's data: URL; its title the filename, else DEFAULT_FILENAME)
    tools                               function tools (strict only when the definition sets it)
    response schema                     response_format json_schema, strict false (the sidecar validates)
    max_tokens                          max_tokens; max_completion_tokens with reasoning (reasoning models
                                        refuse max_tokens)
    reasoning                           reasoning_effort: the effort, or a budget's level
                                        (``vocab.effort_for_budget``)
    provider_options_json {"openai"}    its keys merged into the body (``provider_options``)
    every element's carried keys        merged into the object it was read from (``carried.merge_carried``)
    stream                              stream, stream_options.include_usage

Tool results with images (a tool message is text only), the turn's images numbered n = 1, 2, ... in order:
in its tool message each ImagePart is the text part ``tool_image_placeholder(n)``; right after the turn's
tool messages ONE user message holds, for each image, the text part ``tool_image_label(n, call_id)`` and the
image. ``request.parse_request`` reads that message back into the results' parts, so the request reads back
as the core request it was (``tests/unit/test_formats.py``); the model reads where each image came from.

``check`` refuses before sending (INVALID_INPUT naming the field, the model and the rule) what the format
does not carry (``carries``, with the reasons of ``_WHY``), then OpenAI's rules: images and files in user
messages only; at most MAX_STOP stop sequences; tool_choice and parallel_tool_calls only with tools; no
temperature but the default with reasoning; provider options without a key the sidecar sets.

A reply (``shapes.Completion``) is read tolerantly, a stream by ``stream.OpenAIStream``: what is not what
the wire sends is skipped. Error answers (and a stream's error events) are a content-policy refusal first
(``vocab.error_refusal``: PROVIDER_REFUSAL, never retried, whatever the status), else classified by
``providers.errors.classify_response``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from sidecar.core.conversation import (
    Carried,
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
    ToolDefinition,
)
from sidecar.core.kinds import FinishReason, Role
from sidecar.providers.formats.azure import CHAT
from sidecar.providers.formats.carried import FEATURES, format_rule, merge_carried, plain, refuse_uncarried
from sidecar.providers.formats.chat import ChatReply, ChatRequest
from sidecar.providers.formats.inline import data_url
from sidecar.providers.formats.openai_chat.shapes import Request
from sidecar.providers.formats.openai_chat.stream import OpenAIStream, read_usage
from sidecar.providers.formats.openai_chat.vocab import (
    DEFAULT_FILENAME,
    FINISH,
    FORMAT_NAME,
    MAX_STOP,
    TOOL_ERROR_PREFIX,
    effort_for_budget,
    filtered_categories,
    render_tool,
    tool_image_label,
    tool_image_placeholder,
)
from sidecar.providers.formats.openai_client import OpenAIClient
from sidecar.providers.formats.options import merge_options, options_for
from sidecar.providers.formats.shapes import declared

__all__ = ["CHAT_PATH", "SIDECAR_KEYS", "OpenAIStream", "OpenAIUpstream", "provider_options"]

CHAT_PATH = "/chat/completions"
"""Below the provider's base URL (which ends in ``/v1`` for OpenAI itself)."""

SIDECAR_KEYS = declared(Request) - {"n"}
"""The body keys the sidecar sets itself (those the front reads, ``n`` aside: ``_REFUSED_OPTIONS``): refused in
``provider_options_json`` (set the request's own field)."""

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


class OpenAIUpstream(OpenAIClient):
    """The sidecar as a Chat Completions client (the module's tables); with ``azure``, Azure OpenAI's URLs
    and credential (``formats.openai_client``)."""

    own_path = CHAT_PATH
    operation = CHAT

    carries: frozenset[str] = frozenset(FEATURES).difference(_WHY)
    """What the format carries (``formats.carried``): every feature but those ``_WHY`` says it does not."""

    def check(self, request: ModelRequest, model_id: str) -> None:
        if plain(request):
            return
        refuse_uncarried(request, self.carries, FORMAT_NAME, model_id, _WHY)
        _check_rules(request, model_id)
        provider_options(request.controls)

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
            body["tools"] = [_tool(t) for t in request.tools]
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
        return _carry(body, request.carried)

    def stream_decoder(self) -> OpenAIStream:
        return OpenAIStream()

    def parse(self, body: dict[str, Any]) -> ChatReply:
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ValueError("the reply holds no choice")  # a success the wire never sends: malformed
        choice = choices[0]
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
        content = message.get("content") or ""
        if not isinstance(content, str):
            raise ValueError("the reply's content is not text")
        reply = ChatReply(
            text=content,
            tool_calls=calls,
            finish=FINISH.get(raw_finish, FinishReason.UNSPECIFIED),
            raw_finish=raw_finish,
            refusal=message.get("refusal") or None,
            response_model=str(body.get("model") or ""),
            response_id=str(body.get("id") or ""),
            refusal_category=",".join(
                filtered_categories(choice.get("content_filter_results"), body.get("prompt_filter_results"))
            ),
        )
        read_usage(body.get("usage") or {}, reply)
        return reply


# ---------------------------------------------------------------------------- checks before sending


def _check_rules(request: ModelRequest, model_id: str) -> None:
    """OpenAI's own rules (the module's list): the first one the request breaks."""
    for field, value, rule in _broken(request):
        raise format_rule(field, value, model_id, FORMAT_NAME, rule)


_USER_ONLY = (
    "Chat Completions takes images and files in user messages only (an assistant message is text and tool calls)"
)
_DEFAULT_TEMPERATURE = (
    "OpenAI's reasoning models take only the default temperature (1): leave temperature unset with reasoning"
)


def _broken(request: ModelRequest) -> Iterator[tuple[str, str, str]]:
    """(field, value, rule) of each of OpenAI's rules the request breaks."""
    for i, m in enumerate(request.messages):
        for j, part in enumerate(m.parts if m.role is Role.ASSISTANT else ()):
            if not isinstance(part, TextPart):
                yield f"messages[{i}].parts[{j}]", "image" if isinstance(part, ImagePart) else "document", _USER_ONLY
    c = request.controls
    if len(c.stop) > MAX_STOP:
        yield "stop", f"{len(c.stop)} stop sequences", f"OpenAI takes at most {MAX_STOP} stop sequences"
    parallel = None if c.parallel_tool_calls is None else str(c.parallel_tool_calls).lower()
    mode = None if c.tool_choice is None else c.tool_choice.mode
    for key, value in (("tool_choice", mode), ("parallel_tool_calls", parallel)):
        if value is not None and not request.tools:
            yield key, value, f"OpenAI takes {key} only with tools"
    if c.reasoning is not None and request.temperature not in (None, 1.0):
        yield "temperature", str(request.temperature), _DEFAULT_TEMPERATURE


def provider_options(controls: Controls) -> dict[str, Any]:
    """The keys ``provider_options_json`` merges into an OpenAI body (its ``"openai"`` object, ``formats.options``);
    ``n`` is refused too: the sidecar reads one choice."""
    return options_for(controls.provider_options_json, FORMAT_NAME, SIDECAR_KEYS, _REFUSED_OPTIONS)


_REFUSED_OPTIONS = {"n": "the sidecar reads one choice: leave n out"}


# ---------------------------------------------------------------------------- the body


def _controls(c: Controls) -> dict[str, Any]:
    r = c.reasoning
    effort = None if r is None else r.effort if r.budget_tokens is None else effort_for_budget(r.budget_tokens)
    keys = {
        "reasoning_effort": effort,
        "tool_choice": None if c.tool_choice is None else _choice(c.tool_choice),
        "parallel_tool_calls": c.parallel_tool_calls,
        "stop": list(c.stop) or None,
        "top_p": c.top_p,
        "seed": c.seed,
        "presence_penalty": c.presence_penalty,
        "frequency_penalty": c.frequency_penalty,
        "user": c.end_user or None,
    }
    return {key: value for key, value in keys.items() if value is not None}


def _choice(choice: ToolChoice) -> str | dict[str, Any]:
    if choice.mode == "tool":
        return {"type": "function", "function": {"name": choice.name}}
    return choice.mode


def _carry(rendered: dict[str, Any], carried: Carried | None) -> dict[str, Any]:
    """``rendered`` with the keys its element carried, merged in (``carried.merge_carried``)."""
    return merge_carried(rendered, carried, FORMAT_NAME)


def _tool(t: ToolDefinition) -> dict[str, Any]:
    parameters = json.loads(t.parameters_json) if t.parameters_json else None
    return _carry(render_tool(t.name, t.description, parameters, t.strict), t.carried)


def _part(part: Part) -> dict[str, Any]:
    """A part as its content part, with the keys it carries."""
    return _carry(_rendered_part(part), part.carried)


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
            msg["tool_calls"] = [_carry(_call(c), c.carried) for c in m.tool_calls]
        return [_carry(msg, m.carried)]
    out = _tool_messages(m.tool_results)
    if m.text or m.parts or not m.tool_results:
        out.append(_carry({"role": "user", "content": _content(m)}, m.carried))
    return out


def _call(c: ToolCall) -> dict[str, Any]:
    return {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json or "{}"}}


def _tool_messages(results: tuple[ToolCallResult, ...]) -> list[dict[str, Any]]:
    """A turn's tool messages, then the user message with its images (the module's table)."""
    out: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for r in results:
        if not r.parts:
            content: str | list[dict[str, Any]] = TOOL_ERROR_PREFIX + r.content if r.is_error else r.content
            out.append(_carry({"role": "tool", "tool_call_id": r.call_id, "content": content}, r.carried))
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
        out.append(_carry({"role": "tool", "tool_call_id": r.call_id, "content": parts}, r.carried))
    if images:
        out.append({"role": "user", "content": images})
    return out
