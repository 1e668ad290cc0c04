"""The conversation as a Responses body's ``input`` items (``upstream.py``'s table), with each element's
carried keys merged into the item or part it becomes (``carried.merge_carried``, docs/carried.md).

A message's keys go on its message item (an assistant's, on the message item when it has text), a part's
on its part, a tool call's on its function_call item and a tool result's on its function_call_output
item. Reasoning items are rendered from their parts (``vocab``'s table), as they came.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sidecar.core.conversation import DocumentPart, ImagePart, Message, Part, ReasoningPart, TextPart, ToolCallResult
from sidecar.core.kinds import Role
from sidecar.providers.formats.carried import merge_carried
from sidecar.providers.formats.inline import data_url
from sidecar.providers.formats.openai_chat.vocab import DEFAULT_FILENAME, TOOL_ERROR_PREFIX
from sidecar.providers.formats.openai_responses.vocab import FORMAT_NAME, REDACTED_ID, item_of

__all__ = ["input_items", "reasoning_items", "render_part"]


def render_part(part: Part) -> dict[str, Any]:
    """A content part as an input part (``upstream.py``'s table), its carried keys merged in."""
    match part:
        case TextPart():
            out = {"type": "input_text", "text": part.text}
        case ImagePart():
            url = part.url or data_url(part.media_type, part.data)
            out = {"type": "input_image", "image_url": url, "detail": part.detail or "auto"}
        case DocumentPart(url=url) if url:
            out = {"type": "input_file", "file_url": url}
        case DocumentPart():
            pdf = data_url(part.media_type or "application/pdf", part.data)
            out = {"type": "input_file", "filename": part.title or DEFAULT_FILENAME, "file_data": pdf}
    return merge_carried(out, part.carried, FORMAT_NAME)


def reasoning_items(reasoning: Iterable[ReasoningPart], start: int = 0) -> list[dict[str, Any]]:
    """Reasoning parts as reasoning items (``vocab``'s table): a part with a signature begins an item, one
    without is the next summary of the item before it."""
    items: list[dict[str, Any]] = []
    for n, r in enumerate(reasoning, start):
        if r.redacted_data:
            items.append({"type": "reasoning", "id": f"{REDACTED_ID}{n}", "summary": [],
                          "encrypted_content": r.redacted_data})  # fmt: skip
            continue
        if r.signature or not items:
            item_id, encrypted = item_of(r.signature, n)
            item: dict[str, Any] = {"type": "reasoning", "id": item_id, "summary": []}
            if encrypted:
                item["encrypted_content"] = encrypted
            items.append(item)
        if r.text:
            items[-1]["summary"].append({"type": "summary_text", "text": r.text})
    return items


def _output(r: ToolCallResult) -> str | list[dict[str, Any]]:
    if not r.parts:
        return TOOL_ERROR_PREFIX + r.content if r.is_error else r.content
    parts = [render_part(p) for p in r.parts]
    if r.is_error:
        first = r.parts[0]
        if isinstance(first, TextPart):
            parts[0]["text"] = TOOL_ERROR_PREFIX + first.text
        else:
            parts.insert(0, {"type": "input_text", "text": TOOL_ERROR_PREFIX})
    return parts


def _assistant(m: Message) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if m.parts:
        content: Any = [
            merge_carried({"type": "output_text", "text": p.text}, p.carried, FORMAT_NAME)
            for p in m.parts
            if isinstance(p, TextPart)
        ]
        out.append(merge_carried({"type": "message", "role": "assistant", "content": content}, m.carried, FORMAT_NAME))
    elif m.text or m.carried is not None:
        out.append(merge_carried({"type": "message", "role": "assistant", "content": m.text}, m.carried, FORMAT_NAME))
    for c in m.tool_calls:
        call = {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments_json or "{}"}
        out.append(merge_carried(call, c.carried, FORMAT_NAME))
    return out


def input_items(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """The conversation as ``input`` items (``upstream.py``'s table)."""
    out: list[dict[str, Any]] = []
    made = 0
    for m in messages:
        if m.role is Role.ASSISTANT:
            out += reasoning_items(m.reasoning, made)
            made += len(m.reasoning)
            out += _assistant(m)
            continue
        out += [
            merge_carried({"type": "function_call_output", "call_id": r.call_id, "output": _output(r)}, r.carried,
                          FORMAT_NAME)
            for r in m.tool_results
        ]  # fmt: skip
        if m.parts:
            content = [render_part(p) for p in m.parts]
            out.append(merge_carried({"type": "message", "role": "user", "content": content}, m.carried, FORMAT_NAME))
        elif m.text or not m.tool_results:
            out.append(merge_carried({"type": "message", "role": "user", "content": m.text}, m.carried, FORMAT_NAME))
    return out
