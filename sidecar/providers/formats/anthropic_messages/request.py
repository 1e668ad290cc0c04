"""An Anthropic Messages request read into the core's: the front's ``parse``.

``parse_request`` checks a request against its shape (``shapes.MessageCreateParams``: a value of
the wrong type is INVALID_INPUT naming the caller's path) and reads it into the core's (the inverse of
``upstream.AnthropicUpstream.body``)::

    request                        what it becomes
    model, max_tokens, stream      the model id asked for (a catalog model or a route), its output budget,
                                   a streamed answer
    system                         the system prompt (its blocks joined); the last block's cache_control is
                                   system_cache (on another block: refused, the sidecar caches the system
                                   prompt whole); a response schema appended to it (JSON_INSTRUCTION) is
                                   read back from its end
    user message                   a run of text, image and document blocks is one message (its text when
                                   it is one text block with nothing more, else its parts); tool_result
                                   blocks (consecutive ones together) one tool message, the result's
                                   cache_control a breakpoint on its last part
    assistant message              thinking / redacted_thinking blocks begin a message (its reasoning), text
                                   blocks follow (its text or parts), tool_use blocks after them belong to
                                   it (input {"_raw": text}: the text as written)
    tools                          ToolDefinitions (strict carried as ToolDefinition.strict)
    tool_choice auto|any|none|tool auto | required | none | tool; disable_parallel_tool_use ->
                                   parallel_tool_calls (its opposite)
    stop_sequences, top_p, top_k,  stop, top_p, top_k, end_user, temperature
      metadata.user_id, temperature
    thinking                       enabled -> reasoning.budget_tokens; adaptive with output_config.effort ->
                                   reasoning.effort (no effort: "high", Anthropic's default); disabled: none
    output_config.format           structured output: its ``schema`` is the call's response schema

Nothing is accepted and then dropped: a key the shape does not declare (at the body, a message, a block,
a tool, under a source, cache_control, thinking, tool_choice, metadata or output_config) is carried
verbatim as its element's ``Carried``, sent only to an Anthropic deployment (``carried.merge_carried``)
and refused by name on any other; where no element can carry it (a system block, a thinking block,
output_config.format, a thinking disabled) it is INVALID_INPUT naming it. A key whose value is null says
nothing (an SDK that echoes a reply's blocks back sends ``"citations": null``). Checked by hand, as
types cannot say them: a base64 source decodes, a tool choice of type tool names its tool, an effort goes
with adaptive thinking, a breakpoint has a place to go.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, cast

from sidecar.core.conversation import (
    CacheBreakpoint,
    Carried,
    Controls,
    DocumentPart,
    ImagePart,
    Message,
    ModelRequest,
    Part,
    Reasoning,
    ReasoningPart,
    TextPart,
    ToolCall,
    ToolCallResult,
    ToolChoice,
    ToolDefinition,
)
from sidecar.core.kinds import Role
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.formats.anthropic_messages import shapes
from sidecar.providers.formats.anthropic_messages.shapes import MessageCreateParams
from sidecar.providers.formats.anthropic_messages.vocab import CACHE_TYPE, FORMAT_NAME, PDF, TEXT_PLAIN
from sidecar.providers.formats.arguments import arguments_text
from sidecar.providers.formats.carried import Unknown, kept, refuse_unknown
from sidecar.providers.formats.chat import bare_text, compact_json, split_schema
from sidecar.providers.formats.fields import shown
from sidecar.providers.formats.inline import base64_field
from sidecar.providers.formats.shapes import Shape, by_tag, declared

__all__ = ["KEYS", "parse_request"]

_DEFAULT_EFFORT = "high"
"""What Anthropic's adaptive thinking does when no effort is asked."""
_SHAPE = Shape(MessageCreateParams)
KEYS = declared(MessageCreateParams)
"""The request keys the front interprets (the module's table): any other is carried."""
_BLOCK_KEYS = by_tag(shapes.UserBlock | shapes.AssistantBlock)
_SOURCE_KEYS = by_tag(shapes.Source)
_CHOICE_KEYS = by_tag(shapes.ToolChoiceParam)
_EVERY_CHOICE_KEY = frozenset().union(*_CHOICE_KEYS.values())
_CHOICES = {"auto": "auto", "any": "required", "none": "none", "tool": "tool"}
_THINKING_KEYS = by_tag(shapes.ThinkingConfigParam)
_CACHE_KEYS = declared(shapes.CacheControlEphemeralParam)
_TOOL_KEYS = declared(shapes.ToolParam)
_MESSAGE_KEYS = declared(shapes.UserMessageParam)


def parse_request(body: Mapping[str, Any]) -> ModelRequest:
    """An Anthropic Messages request as the core's ModelRequest (the module's table)."""
    _SHAPE.check(body)
    typed = cast(MessageCreateParams, body)
    unknown = Unknown(FORMAT_NAME)
    unknown.take(body, KEYS)
    text, system_cache = _system(typed.get("system"))
    system, schema = split_schema(text)
    messages: list[Message] = []
    names: dict[str, str] = {}
    for i, m in enumerate(typed["messages"]):
        where = f"messages[{i}]"
        content = m["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        reader = _assistant if m["role"] == "assistant" else _user
        read = reader(cast(list[Any], blocks), where, names)
        if not read:  # no message of the core to carry its keys
            refuse_unknown(m, _MESSAGE_KEYS, where, here=True)
        messages.extend(_carrying(read, kept(FORMAT_NAME, m, _MESSAGE_KEYS, where)))
    output = typed.get("output_config") or {}
    unknown.take(output, declared(shapes.OutputConfigParam), "output_config")
    wanted = output.get("format")
    if wanted is not None:  # rendered as the system prompt's schema: nothing rendered to carry its keys in
        refuse_unknown(wanted, declared(shapes.JSONOutputFormatParam), "output_config.format")
    return ModelRequest(
        model=typed["model"],
        messages=tuple(messages),
        system=system,
        tools=tuple(_tool(t, f"tools[{i}]") for i, t in enumerate(typed.get("tools") or ())),
        response_schema_json=compact_json(wanted["schema"]) if wanted is not None else schema,
        max_output_tokens=typed.get("max_tokens"),
        temperature=_number(typed.get("temperature")),
        controls=_controls(typed, output, system_cache, unknown),
        carried=unknown.carried(""),
    )


def _number(value: float | None) -> float | None:
    return None if value is None else float(value)


def _carrying(messages: list[Message], carried: Carried | None) -> list[Message]:
    """The messages of one request message, its carried keys on the first of them."""
    if carried is None:
        return messages
    return [replace(messages[0], carried=carried), *messages[1:]]


def _system(value: str | list[shapes.TextBlockParam] | None) -> tuple[str, CacheBreakpoint | None]:
    """The system prompt's text, and the breakpoint on its last block (the core joins the blocks into one
    string: their keys it does not read are refused, as is a breakpoint before the last)."""
    if not isinstance(value, list):
        return value or "", None
    cache: CacheBreakpoint | None = None
    for j, block in enumerate(value):
        refuse_unknown(block, _BLOCK_KEYS["text"], f"system[{j}]", here=True)
        marked = block.get("cache_control")
        if marked is not None:
            refuse_unknown(marked, _CACHE_KEYS, f"system[{j}].cache_control", here=True)
            if j != len(value) - 1:
                rule = "the sidecar caches the system prompt whole: put cache_control on its last block"
                raise InvalidInput(f"system[{j}].cache_control", shown(marked), rule, as_sent=True)
            cache = CacheBreakpoint(marked.get("ttl") or "")
    return "".join(block["text"] for block in value), cache


def _cache(block: Mapping[str, Any], unknown: Unknown) -> CacheBreakpoint | None:
    value = block.get("cache_control")
    if value is None:
        return None
    unknown.take(value, _CACHE_KEYS, "cache_control")
    return CacheBreakpoint(value.get("ttl") or "")


def _part(block: Mapping[str, Any], where: str) -> Part:
    """A text, image or document block as a part (``vocab``'s table)."""
    unknown = Unknown(FORMAT_NAME)
    unknown.take(block, _BLOCK_KEYS[block["type"]])
    cache = _cache(block, unknown)
    if block["type"] == "text":
        return TextPart(block["text"], cache, unknown.carried(where))
    source = block["source"]
    unknown.take(source, _SOURCE_KEYS[source["type"]], "source")
    carried, title = unknown.carried(where), block.get("title") or ""
    if source["type"] == "url":
        url = source["url"]
        if block["type"] == "image":
            return ImagePart(url=url, cache=cache, carried=carried)
        return DocumentPart(url=url, title=title, cache=cache, carried=carried)
    if source["type"] == "text":
        return DocumentPart(TEXT_PLAIN, text=source["data"], title=title, cache=cache, carried=carried)
    data = base64_field(source["data"], f"{where}.source.data", as_sent=True)
    if block["type"] == "image":
        return ImagePart(source["media_type"], data, cache=cache, carried=carried)
    return DocumentPart(PDF, data, title=title, cache=cache, carried=carried)


def _content(parts: list[Part]) -> dict[str, Any]:
    """A run of parts as a message's content: its text when it is one text part with nothing more (no
    breakpoint, nothing carried)."""
    text = bare_text(parts)
    if text is not None:
        return {"text": text}
    return {"parts": tuple(parts)}


def _assistant(blocks: list[Mapping[str, Any]], where: str, names: dict[str, str]) -> list[Message]:
    """Reasoning begins a message, its text follows, the tool_use blocks after it belong to it."""
    out: list[Message] = []
    reasoning: list[ReasoningPart] = []
    parts: list[Part] = []
    calls: list[ToolCall] = []

    def flush() -> None:
        if reasoning or parts or calls:
            content = _content(parts) if parts else {}
            out.append(Message(Role.ASSISTANT, tool_calls=tuple(calls), reasoning=tuple(reasoning), **content))
        reasoning.clear()
        parts.clear()
        calls.clear()

    for j, block in enumerate(blocks):
        at, kind = f"{where}.content[{j}]", block["type"]
        if kind in ("thinking", "redacted_thinking"):  # a ReasoningPart passes back as it came: it carries nothing
            refuse_unknown(block, _BLOCK_KEYS[kind], at)
            if parts or calls:
                flush()
            redacted = kind == "redacted_thinking"
            thought = ReasoningPart(redacted_data=block["data"]) if redacted else None
            reasoning.append(thought or ReasoningPart(block["thinking"], block["signature"]))
        elif kind == "tool_use":
            call_id = block.get("id") or ""
            names[call_id] = block["name"]
            carried = kept(FORMAT_NAME, block, _BLOCK_KEYS[kind], at)
            calls.append(ToolCall(call_id, block["name"], arguments_text(block.get("input")), carried))
        else:
            if calls:
                flush()
            parts.append(_part(block, at))
    flush()
    return out


def _user(blocks: list[Mapping[str, Any]], where: str, names: dict[str, str]) -> list[Message]:
    """Tool results (consecutive ones together) and runs of content blocks (one message each), in order."""
    out: list[Message] = []
    run: list[Part] = []
    for j, block in enumerate(blocks):
        at = f"{where}.content[{j}]"
        if block["type"] != "tool_result":
            run.append(_part(block, at))
            continue
        if run:
            out.append(Message(Role.USER, **_content(run)))
            run = []
        result = _tool_result(block, at, names)
        if out and out[-1].role is Role.TOOL:
            out[-1] = Message(Role.TOOL, tool_results=(*out[-1].tool_results, result))
        else:
            out.append(Message(Role.TOOL, tool_results=(result,)))
    if run:
        out.append(Message(Role.USER, **_content(run)))
    return out


def _tool_result(block: Mapping[str, Any], where: str, names: dict[str, str]) -> ToolCallResult:
    """A tool_result: its content as text (a string, or one text block) or as text and image parts; its
    cache_control is a breakpoint on its last part."""
    unknown = Unknown(FORMAT_NAME)
    unknown.take(block, _BLOCK_KEYS["tool_result"])
    call_id = block.get("tool_use_id") or ""
    content = block.get("content")
    if isinstance(content, list):
        parts = [_part(b, f"{where}.content[{k}]") for k, b in enumerate(content)]
        bare = bare_text(parts)
        text, parts = (bare, []) if bare is not None else ("", parts)
    else:
        text, parts = content or "", []
    cache = _cache(block, unknown)
    if cache is not None:
        if not parts and not text:
            rule = "marks a tool result that has no content"
            raise InvalidInput(f"{where}.cache_control", CACHE_TYPE, rule, as_sent=True)
        if parts and parts[-1].cache is not None:
            rule = "its last block holds a breakpoint already"
            raise InvalidInput(f"{where}.cache_control", CACHE_TYPE, rule, as_sent=True)
        parts = [*parts[:-1], replace(parts[-1], cache=cache)] if parts else [TextPart(text, cache)]
        text = ""
    error = block.get("is_error") is True
    return ToolCallResult(call_id, text, error, names.get(call_id, ""), tuple(parts), unknown.carried(where))


def _tool(t: shapes.ToolParam, where: str) -> ToolDefinition:
    unknown = Unknown(FORMAT_NAME)
    unknown.take(t, _TOOL_KEYS)
    schema = t.get("input_schema")
    params = "" if schema is None else compact_json(schema)
    cache = _cache(t, unknown)
    return ToolDefinition(t["name"], t.get("description") or "", params, cache, t.get("strict"), unknown.carried(where))


def _controls(
    body: MessageCreateParams, output: shapes.OutputConfigParam, system_cache: CacheBreakpoint | None, unknown: Unknown
) -> Controls:
    choice, parallel = _tool_choice(body.get("tool_choice"), unknown)
    metadata = body.get("metadata") or {}
    unknown.take(metadata, declared(shapes.MetadataParam), "metadata")
    return Controls(
        reasoning=_reasoning(body.get("thinking"), output.get("effort"), unknown),
        tool_choice=choice,
        parallel_tool_calls=parallel,
        stop=tuple(body.get("stop_sequences") or ()),
        top_p=_number(body.get("top_p")),
        top_k=body.get("top_k"),
        end_user=metadata.get("user_id") or "",
        system_cache=system_cache,
    )


def _tool_choice(value: Mapping[str, Any] | None, unknown: Unknown) -> tuple[ToolChoice | None, bool | None]:
    if value is None:
        return None, None
    mode = _CHOICES[value["type"]]
    unknown.take(value, _EVERY_CHOICE_KEY, "tool_choice")
    own = {k: v for k, v in value.items() if k in _EVERY_CHOICE_KEY}  # a key another type has: this one has none
    refuse_unknown(own, _CHOICE_KEYS[value["type"]], "tool_choice")
    name = value.get("name") or ""
    if mode == "tool" and not name:
        raise InvalidInput("tool_choice.name", shown(name), "must name the tool to call", as_sent=True)
    disable = value.get("disable_parallel_tool_use")
    return ToolChoice(mode, name), None if disable is None else not disable


def _reasoning(thinking: Mapping[str, Any] | None, effort: str | None, unknown: Unknown) -> Reasoning | None:
    kind = None if thinking is None else thinking["type"]
    if effort is not None and kind != "adaptive":
        rule = 'goes with thinking {"type": "adaptive"}'
        raise InvalidInput("output_config.effort", effort, rule, as_sent=True)
    if thinking is None or kind == "disabled":
        refuse_unknown(thinking or {}, _THINKING_KEYS["disabled"], "thinking")  # nothing is rendered to carry them
        return None
    unknown.take(thinking, _THINKING_KEYS[thinking["type"]], "thinking")
    if kind == "enabled":
        return Reasoning(budget_tokens=thinking["budget_tokens"])
    return Reasoning(effort=effort or _DEFAULT_EFFORT)
