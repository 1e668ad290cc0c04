"""A request the fake provider received, in one wire-neutral shape for its brain.

The request is read by its format's front half (``providers.formats``: the reader the sidecar's own
HTTP doors use), so the fake refuses what that format cannot carry, as a provider refuses a
malformed request. What the brain needs beyond the core's request (``tool_choice``, which the
contract does not carry yet, and Anthropic's ``output_format``) are the wire's ``Hints``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sidecar.core.conversation import Part, TextPart
from sidecar.core.kinds import Role
from sidecar.providers.formats.chat import JSON_INSTRUCTION
from sidecar.providers.formats.protocol import Ask

__all__ = ["JSON_MARKER", "Conversation", "Hints", "Tool", "conversation_of"]

JSON_MARKER = JSON_INSTRUCTION
_OBJECT = {"type": "object"}
"""The schema ``response_format: json_object`` reads as: a JSON object, no schema."""


@dataclass(frozen=True)
class Tool:
    name: str
    schema: dict[str, Any]


@dataclass(frozen=True)
class Hints:
    """What a wire's request says that the brain follows but the core's request does not hold."""

    forced_tool: str | None = None  # tool_choice naming one tool
    tools_disabled: bool = False  # tool_choice "none"
    json_schema: dict[str, Any] | None = None  # a schema asked for outside the core's fields
    json_mode: bool = False


@dataclass
class Conversation:
    model: str = ""
    last_user_text: str = ""
    tool_results: list[str] = field(default_factory=list)
    tools: list[Tool] = field(default_factory=list)
    forced_tool: str | None = None  # tool_choice naming one tool
    tools_disabled: bool = False  # tool_choice "none"
    json_mode: bool = False  # a JSON object was asked for
    json_schema: dict[str, Any] | None = None
    max_tokens: int | None = None
    input_chars: int = 0
    stream: bool = False  # "stream": true -- answer with server-sent events
    include_usage: bool = False  # OpenAI "stream_options": {"include_usage": true}
    prefill: str | None = None  # the text of a last assistant message: the reply continues it


def _schema_after_marker(text: str) -> tuple[bool, dict[str, Any] | None]:
    at = text.find(JSON_MARKER)
    if at < 0:
        return False, None
    rest = text[at + len(JSON_MARKER) :]
    start = rest.find("{")
    if start < 0:
        return True, None
    try:
        schema, _ = json.JSONDecoder().raw_decode(rest[start:])
    except ValueError:
        return True, None
    return True, schema if isinstance(schema, dict) else None


def _schema_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _text_of(parts: tuple[Part, ...]) -> str:
    """The text parts of a message's (or a tool result's) parts, joined: what the brain reads of them."""
    return "".join(p.text for p in parts if isinstance(p, TextPart))


def conversation_of(ask: Ask, hints: Hints, tools_json: Any) -> Conversation:
    """The brain's view of ``ask``; ``tools_json`` the request's tool definitions as sent (their size counts)."""
    request = ask.request
    conv = Conversation(model=request.model, max_tokens=request.max_output_tokens)
    conv.forced_tool, conv.tools_disabled = hints.forced_tool, hints.tools_disabled
    conv.stream, conv.include_usage = ask.stream, ask.include_usage
    texts = [request.system]
    chars = len(request.system)
    for m in request.messages:
        text = m.text or _text_of(m.parts)
        chars += len(text) + sum(len(c.arguments_json) for c in m.tool_calls)
        for r in m.tool_results:
            content = r.content or _text_of(r.parts)
            conv.tool_results.append(content)
            chars += len(content)
        if m.role is Role.USER:
            texts.append(text)
            conv.last_user_text = text or conv.last_user_text
    last = request.messages[-1] if request.messages else None
    if last is not None and last.role is Role.ASSISTANT and not last.tool_calls:
        conv.prefill = last.text or _text_of(last.parts)
    for t in request.tools:
        conv.tools.append(Tool(t.name, _schema_object(t.parameters_json) or {}))
    if conv.tools:
        chars += len(json.dumps(tools_json))
    conv.input_chars = chars
    if request.response_schema_json:
        schema = _schema_object(request.response_schema_json)
        conv.json_mode, conv.json_schema = True, None if schema == _OBJECT else schema
    elif hints.json_mode:
        conv.json_mode, conv.json_schema = True, hints.json_schema
    else:
        for text in texts:
            found, schema = _schema_after_marker(text)
            if found:
                conv.json_mode, conv.json_schema = True, schema
                break
    if conv.max_tokens is not None and conv.max_tokens <= 0:
        conv.max_tokens = None
    return conv
