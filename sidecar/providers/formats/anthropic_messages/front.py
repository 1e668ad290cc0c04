"""The Anthropic Messages front: a caller's request read, the answer rendered (whole, streamed, failed).

``AnthropicFront.parse`` checks a request against its shape (``shapes.MessageCreateParams``: a value of
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

``render``, ``writer`` and ``error_body`` answer in the format (``shapes.MessageReply``)::

    core                                        Anthropic answer
    ChatReply                                   a message: its content blocks, stop_reason, usage
      reasoning                                 thinking / redacted_thinking blocks first, as they came
      text                                      a text block (a refusal: its explanation); none when empty
      tool calls                                tool_use blocks (arguments not JSON: input {"_raw"})
      stop_reason                               tool_use when it calls a tool (unless cut off or filtered);
                                                the provider's own when it is Anthropic's (stop_sequence,
                                                pause_turn ...), else end_turn / max_tokens / refusal
      usage                                     input_tokens without the cache's (Anthropic's count), the
                                                cache's read and write, reasoning tokens as thinking_tokens
                                                (each of those three only when not 0)
    a stream                                    message_start, then blocks in order:
      ReasoningDelta                            content_block_start thinking (redacted_thinking with its
                                                data) on a part's first delta; thinking_delta for text,
                                                signature_delta for the signature
      TextDelta (a refusal too)                 content_block_start text (when the open block is not text),
                                                content_block_delta text_delta
      ToolCallDelta                             content_block_start tool_use (id, name) on a call's first
                                                fragment, content_block_delta input_json_delta
      the end                                   content_block_stop, message_delta (stop_reason, usage), message_stop
      the sidecar's restart                     ``event: sidecar_restart`` {type, cause, reason, attempt}; the new
                                                reply's content blocks are numbered from 0 again
    a failure                                   {"type": "error", "error": {"type", "message"}}; in a stream,
                                                ``event: error``
"""

from __future__ import annotations

import base64
import binascii
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
from sidecar.core.kinds import FinishReason, Role
from sidecar.core.stream import Delta, ReasoningDelta, TextDelta
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.formats.anthropic_messages import shapes
from sidecar.providers.formats.anthropic_messages.shapes import MessageCreateParams, MessageReply, ReplyBlock, by_tag
from sidecar.providers.formats.anthropic_messages.vocab import (
    API_KEY_HEADER,
    CACHE_TYPE,
    ERROR_TYPES,
    FINISH,
    FINISH_NAMES,
    FORMAT_NAME,
    PDF,
    RAW_ARGUMENTS,
    TEXT_PLAIN,
    input_of,
    reasoning_block,
)
from sidecar.providers.formats.carried import Unknown, kept, refuse_unknown
from sidecar.providers.formats.chat import ChatReply, compact_json, split_schema
from sidecar.providers.formats.fields import shown
from sidecar.providers.formats.protocol import Ask, ParamNames, ReplyHead, Sse
from sidecar.providers.formats.shapes import Shape, declared

__all__ = ["MESSAGES_ROUTE", "RESTART_EVENT", "AnthropicFront", "EventWriter", "parse_request", "stop_reason"]

MESSAGES_ROUTE = "/v1/messages"
RESTART_EVENT = "sidecar_restart"
_DEFAULT_EFFORT = "high"
"""What Anthropic's adaptive thinking does when no effort is asked."""

_INVALID = "invalid_request_error"
_API = "api_error"
_ANSWERS: Mapping[str, tuple[str, int | None]] = {
    "invalid_value": (_INVALID, None),
    "context_length_exceeded": (_INVALID, None),
    "content_policy_violation": (_INVALID, None),
    "output_truncated": (_INVALID, None),
    "permission_denied": ("permission_error", None),
    "model_not_found": ("not_found_error", None),
    "resource_not_found": ("not_found_error", None),
    "insufficient_quota": ("billing_error", 402),
    "spend_cap_exceeded": ("billing_error", 402),
    "rate_limit_exceeded": ("rate_limit_error", None),
    "overloaded": ("overloaded_error", 529),
    "deadline_exceeded": ("timeout_error", None),
}
"""``error.type`` of a sidecar failure by its code, and the status when it is not the door's (402, 529);
every other code: api_error."""
_PARAMS: ParamNames = {
    "max_output_tokens": "max_tokens",
    "tools[].name": "tools[].name",
    "tools[].parameters_json": "tools[].input_schema",
    "tools[].cache": "tools[].cache_control",
    "tools[].strict": "tools[].strict",
    "response_schema_json": "output_config.format.schema",
    "reasoning": "thinking",
    "reasoning.budget_tokens": "thinking.budget_tokens",
    "reasoning.effort": "output_config.effort",
    "tool_choice.mode": "tool_choice.type",
    "tool_choice.name": "tool_choice.name",
    "parallel_tool_calls": "tool_choice.disable_parallel_tool_use",
    "stop": "stop_sequences",
    "stop[]": "stop_sequences[]",
    "end_user": "metadata.user_id",
    "system_cache": "system",
}
"""The core's parameters by the names this front's callers send (``ParamNames``)."""


class AnthropicFront:
    """The Anthropic Messages format as a provider speaks it (the module's tables)."""

    path = MESSAGES_ROUTE
    words = "an Anthropic-compatible"
    id_prefix = "msg_"
    params = _PARAMS

    def parse(self, body: dict[str, Any]) -> Ask:
        return Ask(parse_request(body), body.get("stream") is True)

    def render(self, reply: ChatReply, head: ReplyHead, extension: Mapping[str, Any] | None = None) -> dict[str, Any]:
        text = reply.text or reply.refusal or ""  # a refusal is its explanation, as text
        content: list[ReplyBlock] = [reasoning_block(r) for r in reply.reasoning]
        if text:
            content.append({"type": "text", "text": text})
        content += [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": input_of(c.arguments_json)}
            for c in reply.tool_calls
        ]
        out: MessageReply = {
            "id": head.reply_id,
            "type": "message",
            "role": "assistant",
            "model": head.model,
            "content": content,
            "stop_reason": stop_reason(reply),
            "stop_sequence": None,
            "usage": _usage(reply),
        }
        if extension is not None:
            out["sidecar"] = dict(extension)
        return cast("dict[str, Any]", out)  # the protocol's plain JSON object

    def writer(self, head: ReplyHead, *, include_usage: bool = False) -> EventWriter:
        return EventWriter(head)

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
        error: dict[str, Any] = {"type": error_type, "message": message}
        if param is not None:
            error["param"] = param  # the field at fault, as OpenAI's error names it (Anthropic's has none)
        if extension is not None:
            error["sidecar"] = dict(extension)
        out: dict[str, Any] = {"type": "error", "error": error}
        if request_id is not None:
            out["request_id"] = request_id
        return out

    def answer(self, code: str, status: int) -> tuple[int, str]:
        error_type, own = _ANSWERS.get(code, (_API, None))
        return own or status, error_type

    def error_type(self, status: int) -> str:
        return ERROR_TYPES.get(status, _API if status >= 500 else _INVALID)

    def api_key(self, headers: Mapping[str, str]) -> str:
        return headers.get(API_KEY_HEADER, "")


def stop_reason(reply: ChatReply) -> str:
    """The reply's ``stop_reason``: ``tool_use`` whenever it calls a tool and was neither cut nor filtered."""
    if reply.tool_calls and reply.finish not in (FinishReason.LENGTH, FinishReason.CONTENT_FILTER):
        return "tool_use"
    if reply.refusal is not None:
        return "refusal"
    if FINISH.get(reply.raw_finish) is reply.finish and reply.finish is not FinishReason.TOOL_CALLS:
        return reply.raw_finish  # the provider's own words, when they are Anthropic's (stop_sequence ...)
    return FINISH_NAMES.get(reply.finish, "end_turn")


def _usage(reply: ChatReply) -> shapes.UsageReply:
    """Anthropic's usage: input_tokens without the cache's (the core's input_tokens counts them all); the
    cache's and the thinking's counts when there are any."""
    cached = reply.cache_read_input_tokens + reply.cache_write_input_tokens
    usage: shapes.UsageReply = {
        "input_tokens": max(reply.input_tokens - cached, 0),
        "output_tokens": reply.output_tokens,
    }
    if cached:
        usage["cache_creation_input_tokens"] = reply.cache_write_input_tokens
        usage["cache_read_input_tokens"] = reply.cache_read_input_tokens
    if reply.reasoning_tokens:
        usage["output_tokens_details"] = {"thinking_tokens": reply.reasoning_tokens}
    return usage


def _event(kind: str, **fields: Any) -> Sse:
    return (kind, {"type": kind, **fields})


class EventWriter:
    """One streamed reply as Messages events (the module's table)."""

    def __init__(self, head: ReplyHead) -> None:
        self._head = head
        self._index = -1
        """The content block open now (-1: none yet)."""
        self._open: tuple[str, int] | None = None
        """What that block is: ("text", 0), ("call", index), ("reasoning", index); None when it is closed."""
        self._started: set[tuple[str, int]] = set()

    def start(self, input_tokens: int = 0) -> list[Sse]:
        message: MessageReply = {
            "id": self._head.reply_id,
            "type": "message",
            "role": "assistant",
            "model": self._head.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": 0},
        }
        return [_event("message_start", message=message)]

    def _close(self) -> list[Sse]:
        if self._open is None:
            return []
        self._open = None
        return [_event("content_block_stop", index=self._index)]

    def _begin(self, block: ReplyBlock, what: tuple[str, int]) -> list[Sse]:
        out = self._close()
        self._index += 1
        self._open = what
        self._started.add(what)
        out.append(_event("content_block_start", index=self._index, content_block=block))
        return out

    def _delta(self, body: shapes.BlockDelta) -> Sse:
        return _event("content_block_delta", index=self._index, delta=body)

    def delta(self, delta: Delta) -> list[Sse]:
        if isinstance(delta, ReasoningDelta):
            return self._reasoning(delta)
        out: list[Sse] = []
        if isinstance(delta, TextDelta):
            if self._open is None or self._open[0] != "text":
                out += self._begin({"type": "text", "text": ""}, ("text", 0))
            return [*out, self._delta({"type": "text_delta", "text": delta.text})]
        what = ("call", delta.index)
        if what not in self._started or self._open != what:
            out += self._begin({"type": "tool_use", "id": delta.id, "name": delta.name, "input": {}}, what)
        if delta.arguments_fragment:
            out.append(self._delta({"type": "input_json_delta", "partial_json": delta.arguments_fragment}))
        return out

    def _reasoning(self, delta: ReasoningDelta) -> list[Sse]:
        what = ("reasoning", delta.index)
        if delta.redacted_data:
            return self._begin({"type": "redacted_thinking", "data": delta.redacted_data}, what)
        out = [] if self._open == what else self._begin({"type": "thinking", "thinking": "", "signature": ""}, what)
        if delta.text:
            out.append(self._delta({"type": "thinking_delta", "thinking": delta.text}))
        if delta.signature:
            out.append(self._delta({"type": "signature_delta", "signature": delta.signature}))
        return out

    def refusal(self, text: str) -> list[Sse]:
        return self.delta(TextDelta(text))  # Anthropic streams a refusal as text

    def restarted(self, words: Mapping[str, Any]) -> list[Sse]:
        self._index, self._open = -1, None  # a new reply follows: its blocks are numbered from 0 again
        self._started.clear()
        return [(RESTART_EVENT, {"type": RESTART_EVENT, **words})]

    def final(self, reply: ChatReply, extension: Mapping[str, Any] | None = None) -> list[Sse]:
        extra = {} if extension is None else {"sidecar": dict(extension)}
        delta = {"stop_reason": stop_reason(reply), "stop_sequence": None}
        return [
            *self._close(),
            _event("message_delta", delta=delta, usage=_usage(reply), **extra),
            _event("message_stop"),
        ]

    def error(self, body: dict[str, Any]) -> list[Sse]:
        return [("error", body)]


# ---------------------------------------------------------------------------- requests read

_SHAPE = Shape(MessageCreateParams)
_KEYS = declared(MessageCreateParams)
"""The request keys the front interprets (the module's table): any other is carried."""
_BLOCK_KEYS = by_tag(shapes.UserBlock | shapes.AssistantBlock)
_SOURCE_KEYS = by_tag(shapes.Source)
_CHOICE_KEYS = by_tag(shapes.ToolChoiceParam)
_EVERY_CHOICE_KEY = frozenset().union(*_CHOICE_KEYS.values())
_CHOICES = {"auto": "auto", "any": "required", "none": "none", "tool": "tool"}
_THINKING_KEYS = by_tag(shapes.ThinkingConfigParam)
_CACHE_KEYS = declared(shapes.CacheControlEphemeralParam)
_TOOL_KEYS = declared(shapes.ToolParam)


def parse_request(body: Mapping[str, Any]) -> ModelRequest:
    """An Anthropic Messages request as the core's ModelRequest (the module's table)."""
    _SHAPE.check(body)
    typed = cast(MessageCreateParams, body)
    unknown = Unknown(FORMAT_NAME)
    unknown.take(body, _KEYS)
    text, system_cache = _system(typed.get("system"))
    system, schema = split_schema(text)
    messages: list[Message] = []
    names: dict[str, str] = {}
    for i, m in enumerate(typed["messages"]):
        where = f"messages[{i}]"
        content = m["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        read = _assistant if m["role"] == "assistant" else _user
        own = kept(FORMAT_NAME, m, ("role", "content"), where)
        messages.extend(_carrying(read(cast(list[Any], blocks), where, names), own))
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


def _refuse_carried(carried: Carried) -> None:
    """INVALID_INPUT naming the first key of a place where no element of the core can carry it."""
    rule = "is not carried by the sidecar here (docs/carried.md): leave it out"
    raise InvalidInput(carried.first, shown(next(iter(carried.keys.values()))), rule, as_sent=True)


def _carrying(messages: list[Message], carried: Carried | None) -> list[Message]:
    """The messages of one request message, its carried keys on the first of them."""
    if carried is None:
        return messages
    if not messages:
        _refuse_carried(carried)
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
    try:  # base64
        data = base64.b64decode(source["data"], validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(f"{where}.source.data", source["data"][:40], "must be base64 text", as_sent=True) from None
    if block["type"] == "image":
        return ImagePart(source["media_type"], data, cache=cache, carried=carried)
    return DocumentPart(PDF, data, title=title, cache=cache, carried=carried)


def _content(parts: list[Part]) -> dict[str, Any]:
    """A run of parts as a message's content: its text when it is one text part with nothing more (no
    breakpoint, nothing carried)."""
    text = _bare_text(parts)
    if text is not None:
        return {"text": text}
    return {"parts": tuple(parts)}


def _bare_text(parts: list[Part]) -> str | None:
    """The text of parts that are one text part with nothing more (no breakpoint, nothing carried), else None."""
    if len(parts) == 1 and isinstance(parts[0], TextPart) and parts[0].cache is None and parts[0].carried is None:
        return parts[0].text
    return None


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
            calls.append(ToolCall(call_id, block["name"], _arguments(block.get("input")), carried))
        else:
            if calls:
                flush()
            parts.append(_part(block, at))
    flush()
    return out


def _arguments(value: Any) -> str:
    """A request's tool_use ``input`` as arguments JSON (the RAW_ARGUMENTS form: the text as written)."""
    if isinstance(value, dict) and list(value) == [RAW_ARGUMENTS] and isinstance(value[RAW_ARGUMENTS], str):
        return str(value[RAW_ARGUMENTS])
    return compact_json(value if value is not None else {})


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
        bare = _bare_text(parts)
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
