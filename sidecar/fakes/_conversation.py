"""Read an OpenAI or Anthropic request body into one wire-neutral shape."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["JSON_MARKER", "Conversation", "Tool", "parse_anthropic", "parse_openai"]

JSON_MARKER = "Respond with a single JSON object matching this JSON schema:"


@dataclass(frozen=True)
class Tool:
    name: str
    schema: dict[str, Any]


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


def _text_of(content: Any) -> str:
    """Text of a message content: a string or a list of blocks/parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


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


def _apply_marker(conv: Conversation, texts: list[str]) -> None:
    for text in texts:
        found, schema = _schema_after_marker(text)
        if found:
            conv.json_mode, conv.json_schema = True, schema
            return


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def parse_openai(body: dict[str, Any]) -> Conversation:
    conv = Conversation(model=str(body.get("model", "")))
    system_texts: list[str] = []
    other_texts: list[str] = []
    chars = 0
    for msg in body.get("messages") or []:
        if not isinstance(msg, dict):
            continue
        role, text = msg.get("role"), _text_of(msg.get("content"))
        chars += len(text)
        for call in msg.get("tool_calls") or []:
            if isinstance(call, dict):
                chars += len(str((call.get("function") or {}).get("arguments", "")))
        if role in ("system", "developer"):
            system_texts.append(text)
        elif role in {"tool", "function"}:
            conv.tool_results.append(text)
        elif role == "user":
            other_texts.append(text)
            if text:
                conv.last_user_text = text
    for spec in body.get("tools") or []:
        fn = spec.get("function") if isinstance(spec, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            conv.tools.append(Tool(fn["name"], fn.get("parameters") or {}))
    for fn in body.get("functions") or []:
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            conv.tools.append(Tool(fn["name"], fn.get("parameters") or {}))
    choice = body.get("tool_choice")
    conv.tools_disabled = choice == "none"
    if isinstance(choice, dict):
        conv.forced_tool = (choice.get("function") or {}).get("name")
    if conv.tools:
        chars += len(json.dumps(body.get("tools") or body.get("functions")))
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema"):
        conv.json_mode = True
        schema = (fmt.get("json_schema") or {}).get("schema")
        conv.json_schema = schema if isinstance(schema, dict) else None
    else:
        _apply_marker(conv, system_texts + other_texts)
    conv.max_tokens = _positive_int(body.get("max_completion_tokens")) or _positive_int(body.get("max_tokens"))
    conv.input_chars = chars
    conv.stream = body.get("stream") is True
    options = body.get("stream_options")
    conv.include_usage = isinstance(options, dict) and options.get("include_usage") is True
    return conv


def _anthropic_blocks(conv: Conversation, msg: dict[str, Any]) -> tuple[int, str]:
    """Collect tool results from one message; returns (chars, its own text)."""
    content = msg.get("content")
    chars = 0
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result":
                result = _text_of(block.get("content"))
                conv.tool_results.append(result)
                chars += len(result)
            elif block.get("type") == "tool_use":
                chars += len(json.dumps(block.get("input", {})))
    text = _text_of(content)
    return chars + len(text), text


def parse_anthropic(body: dict[str, Any]) -> Conversation:
    conv = Conversation(model=str(body.get("model", "")))
    system = _text_of(body.get("system"))
    chars = len(system)
    texts = [system]
    for msg in body.get("messages") or []:
        if not isinstance(msg, dict):
            continue
        n, text = _anthropic_blocks(conv, msg)
        chars += n
        if msg.get("role") == "user":
            texts.append(text)
            if text:
                conv.last_user_text = text
    for spec in body.get("tools") or []:
        if isinstance(spec, dict) and isinstance(spec.get("name"), str):
            conv.tools.append(Tool(spec["name"], spec.get("input_schema") or {}))
    if conv.tools:
        chars += len(json.dumps(body.get("tools")))
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        conv.tools_disabled = choice.get("type") == "none"
        if choice.get("type") == "tool" and isinstance(choice.get("name"), str):
            conv.forced_tool = choice["name"]
    fmt = body.get("output_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        conv.json_mode = True
        conv.json_schema = fmt.get("schema") if isinstance(fmt.get("schema"), dict) else None
    else:
        _apply_marker(conv, texts)
    conv.max_tokens = _positive_int(body.get("max_tokens"))
    conv.input_chars = chars
    conv.stream = body.get("stream") is True
    return conv
