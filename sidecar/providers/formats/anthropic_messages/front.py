"""The Anthropic Messages front: a caller's request read, the answer rendered (whole, streamed, failed).

``AnthropicFront.parse`` reads a request into the core's (the inverse of ``upstream.AnthropicUpstream.body``)::

    request key                    what is read
    model                          the model id asked for (a catalog model or a route)
    system                         the system prompt (a string, or a list of text blocks, joined); the last
                                   block's cache_control is system_cache (on another block: refused, the
                                   sidecar caches the system prompt whole); a response schema ``body``
                                   appended to it (JSON_INSTRUCTION) is read back from its end
    messages                       user: a run of text, image and document blocks is one message (its text
                                   when it is one text block without cache_control, else its parts);
                                   tool_result blocks (consecutive ones together): tool_use_id, content (a
                                   string, or text and image blocks: its parts unless one text block),
                                   is_error, cache_control (on the result's last part);
                                   assistant: thinking / redacted_thinking blocks begin a message (its
                                   reasoning), text blocks follow (its text or parts), tool_use blocks after
                                   them belong to it (input {"_raw": text}: the text as written)
    tools                          [{name, description, input_schema, cache_control, strict}] (type "custom" or
                                   none; strict carried as ToolDefinition.strict)
    max_tokens, temperature        the output budget (at least 1), temperature
    tool_choice                    {"type": auto | any | none | tool, "name"} -> auto | required | none | tool;
                                   disable_parallel_tool_use -> parallel_tool_calls (its opposite)
    stop_sequences, top_p, top_k   stop, top_p, top_k
    metadata.user_id               end_user
    thinking                       {"type": "enabled", "budget_tokens"} -> reasoning.budget_tokens;
                                   {"type": "adaptive"} with output_config.effort low | medium | high ->
                                   reasoning.effort (no effort: "high", Anthropic's default); "disabled": none
    output_config.format           structured output: its ``json_schema`` is the call's response schema
    stream                         a streamed answer

Blocks (``vocab``'s table): text {text}, image {source: base64 {media_type, data} | url {url}}, document
{source: base64 application/pdf | text text/plain | url, title}, each with an optional cache_control;
thinking {thinking, signature} and redacted_thinking {data}. Nothing is accepted and then dropped: a
key the front does not interpret (at the body, a message, a block, a tool, under a source, cache_control,
thinking, tool_choice, metadata or output_config) is carried verbatim as its element's ``Carried``, sent
only to an Anthropic deployment (``carried.merge_carried``) and refused by name on any other; where no
element can carry it (a system block, a thinking block, output_config.format) it is INVALID_INPUT naming
it, as is a block type or source the front does not read (a file id, server tools ...). A key whose
value is null says nothing and is passed over (an SDK that echoes a reply's blocks back sends
``"citations": null``).

``render``, ``writer`` and ``error_body`` answer in the format::

    core                                        Anthropic answer
    ChatReply                                   {"type": "message", "role": "assistant", "content": [...],
                                                "stop_reason", "usage": {input_tokens, output_tokens,
                                                cache_creation_input_tokens?, cache_read_input_tokens?,
                                                output_tokens_details?}} (? : when not 0)
      reasoning                                 thinking {thinking, signature} / redacted_thinking {data}
                                                blocks first, as they came
      text                                      a text block (a refusal: its explanation); none when empty
      tool calls                                tool_use blocks: id, name, input (arguments not JSON: {"_raw"})
      stop_reason                               tool_use when it calls a tool (unless cut off or filtered);
                                                the provider's own when it is Anthropic's (stop_sequence,
                                                pause_turn ...), else end_turn / max_tokens / refusal
      usage                                     input_tokens without the cache's (Anthropic's count), the
                                                cache's read and write; reasoning tokens as thinking_tokens
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
from typing import Any

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
from sidecar.providers.formats.anthropic_messages.vocab import (
    API_KEY_HEADER,
    CACHE_TYPE,
    EFFORTS,
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
from sidecar.providers.formats.carried import Unknown
from sidecar.providers.formats.chat import ChatReply, compact_json, split_schema
from sidecar.providers.formats.fields import (
    bool_field,
    number_field,
    object_list,
    one_of,
    optional_bool,
    positive_budget,
    schema_text,
    shown,
    text_field,
)
from sidecar.providers.formats.protocol import Ask, ParamNames, ReplyHead, Sse

__all__ = ["MESSAGES_ROUTE", "RESTART_EVENT", "AnthropicFront", "EventWriter", "parse_request", "stop_reason"]

MESSAGES_ROUTE = "/v1/messages"
RESTART_EVENT = "sidecar_restart"
_DEFAULT_EFFORT = "high"
"""What Anthropic's adaptive thinking does when no effort is asked."""

_KEYS = frozenset(
    {
        "model",
        "messages",
        "system",
        "max_tokens",
        "temperature",
        "stream",
        "tools",
        "tool_choice",
        "stop_sequences",
        "top_p",
        "top_k",
        "metadata",
        "thinking",
        "output_config",
    }
)
"""The request keys the front carries (the module's table): any other is refused by name."""
_BLOCK_KEYS: Mapping[str, frozenset[str]] = {
    "text": frozenset({"type", "text", "cache_control"}),
    "image": frozenset({"type", "source", "cache_control"}),
    "document": frozenset({"type", "source", "title", "cache_control"}),
    "tool_result": frozenset({"type", "tool_use_id", "content", "is_error", "cache_control"}),
    "tool_use": frozenset({"type", "id", "name", "input"}),
    "thinking": frozenset({"type", "thinking", "signature"}),
    "redacted_thinking": frozenset({"type", "data"}),
}
_CHOICE_KEYS = frozenset({"type", "name", "disable_parallel_tool_use"})
_TOOL_KEYS = frozenset({"name", "description", "input_schema", "cache_control", "type", "strict"})
_USER_BLOCKS = ("text", "image", "document", "tool_result")
_ASSISTANT_BLOCKS = ("text", "thinking", "redacted_thinking", "tool_use")
_CHOICES = {"auto": "auto", "any": "required", "none": "none", "tool": "tool"}
_TTLS = ("5m", "1h")

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
        request = parse_request(body)
        positive_budget(request, "max_tokens")
        return Ask(request, bool_field(body, "stream"))

    def render(self, reply: ChatReply, head: ReplyHead, extension: Mapping[str, Any] | None = None) -> dict[str, Any]:
        text = reply.text or reply.refusal or ""  # a refusal is its explanation, as text
        content: list[dict[str, Any]] = [reasoning_block(r) for r in reply.reasoning]
        if text:
            content.append({"type": "text", "text": text})
        content += [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": input_of(c.arguments_json)}
            for c in reply.tool_calls
        ]
        out: dict[str, Any] = {
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
        return out

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


def _usage(reply: ChatReply) -> dict[str, Any]:
    """Anthropic's usage: input_tokens without the cache's (the core's input_tokens counts them all); the
    cache's and the thinking's counts when there are any."""
    cached = reply.cache_read_input_tokens + reply.cache_write_input_tokens
    usage: dict[str, Any] = {"input_tokens": max(reply.input_tokens - cached, 0), "output_tokens": reply.output_tokens}
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
        message: dict[str, Any] = {
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

    def _begin(self, block: dict[str, Any], what: tuple[str, int]) -> list[Sse]:
        out = self._close()
        self._index += 1
        self._open = what
        self._started.add(what)
        out.append(_event("content_block_start", index=self._index, content_block=block))
        return out

    def delta(self, delta: Delta) -> list[Sse]:
        if isinstance(delta, ReasoningDelta):
            return self._reasoning(delta)
        out: list[Sse] = []
        if isinstance(delta, TextDelta):
            if self._open is None or self._open[0] != "text":
                out += self._begin({"type": "text", "text": ""}, ("text", 0))
            body = {"type": "text_delta", "text": delta.text}
        else:
            what = ("call", delta.index)
            if what not in self._started or self._open != what:
                out += self._begin({"type": "tool_use", "id": delta.id, "name": delta.name, "input": {}}, what)
            if not delta.arguments_fragment:
                return out
            body = {"type": "input_json_delta", "partial_json": delta.arguments_fragment}
        out.append(_event("content_block_delta", index=self._index, delta=body))
        return out

    def _reasoning(self, delta: ReasoningDelta) -> list[Sse]:
        what = ("reasoning", delta.index)
        out: list[Sse] = []
        if delta.redacted_data:
            return self._begin({"type": "redacted_thinking", "data": delta.redacted_data}, what)
        if self._open != what:
            out += self._begin({"type": "thinking", "thinking": "", "signature": ""}, what)
        if delta.text:
            out.append(
                _event(
                    "content_block_delta", index=self._index, delta={"type": "thinking_delta", "thinking": delta.text}
                )
            )
        if delta.signature:
            out.append(
                _event(
                    "content_block_delta",
                    index=self._index,
                    delta={"type": "signature_delta", "signature": delta.signature},
                )
            )
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


def _refuse_unknown(value: Mapping[str, Any], known: frozenset[str], where: str) -> None:
    """INVALID_INPUT naming the first key of ``value`` the front does not carry (null ones say nothing)."""
    for key, item in value.items():
        if key not in known and item is not None:
            at = f"{where}.{key}" if where else key
            raise InvalidInput(at, shown(item), "is not carried by the sidecar (docs/carried.md): leave it out")


def _refuse_carried(carried: Carried) -> None:
    """INVALID_INPUT naming the first key of a place where no element of the core can carry it."""
    value = next(iter(carried.keys.values()))
    raise InvalidInput(
        carried.first, shown(value), "is not carried by the sidecar here (docs/carried.md): leave it out"
    )


def _carrying(messages: list[Message], carried: Carried | None) -> list[Message]:
    """The messages of one request message, its carried keys on the first of them."""
    if carried is None:
        return messages
    if not messages:
        _refuse_carried(carried)
    return [replace(messages[0], carried=carried), *messages[1:]]


def parse_request(body: Mapping[str, Any]) -> ModelRequest:
    """An Anthropic Messages request as the core's ModelRequest (the module's table)."""
    unknown = Unknown(FORMAT_NAME)
    unknown.take(body, _KEYS)
    model = body.get("model")
    if not isinstance(model, str):
        raise InvalidInput("model", shown(model), "must be the model's name (a string)")
    text, system_cache = _system(body.get("system"))
    system, schema = split_schema(text)
    messages: list[Message] = []
    names: dict[str, str] = {}
    for i, m in enumerate(object_list(body, "messages", required=True)):
        role, where = m.get("role"), f"messages[{i}]"
        own = Unknown(FORMAT_NAME)
        own.take(m, frozenset({"role", "content"}))
        blocks = _blocks(m.get("content"), f"{where}.content")
        if role == "assistant":
            messages.extend(_carrying(_assistant(blocks, where, names), own.carried(where)))
        elif role == "user":
            messages.extend(_carrying(_user(blocks, where, names), own.carried(where)))
        else:
            raise InvalidInput(f"{where}.role", shown(role), "must be user or assistant")
    output = _object(body, "output_config")
    unknown.take(output, frozenset({"format", "effort"}), "output_config")
    response_schema = output_schema(body)
    tools = tuple(_tool(t, f"tools[{i}]") for i, t in enumerate(object_list(body, "tools")))
    return ModelRequest(
        model=model,
        messages=tuple(messages),
        system=system,
        tools=tools,
        response_schema_json=response_schema if response_schema is not None else schema,
        max_output_tokens=number_field(body, "max_tokens", int),
        temperature=number_field(body, "temperature", float),
        controls=_controls(body, output, system_cache, unknown),
        carried=unknown.carried(""),
    )


def _object(body: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = body.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(key, shown(value), "must be an object")
    return value


def _controls(
    body: Mapping[str, Any], output: Mapping[str, Any], system_cache: CacheBreakpoint | None, unknown: Unknown
) -> Controls:
    choice, parallel = _tool_choice(body.get("tool_choice"), unknown)
    stop = body.get("stop_sequences")
    if stop is not None and (not isinstance(stop, list) or not all(isinstance(s, str) for s in stop)):
        raise InvalidInput("stop_sequences", shown(stop), "must be a list of strings")
    metadata = _object(body, "metadata")
    unknown.take(metadata, frozenset({"user_id"}), "metadata")
    user = metadata.get("user_id")
    if user is not None and not isinstance(user, str):
        raise InvalidInput("metadata.user_id", shown(user), "must be a string")
    return Controls(
        reasoning=_reasoning(body.get("thinking"), output.get("effort"), unknown),
        tool_choice=choice,
        parallel_tool_calls=parallel,
        stop=tuple(stop or ()),
        top_p=number_field(body, "top_p", float),
        top_k=number_field(body, "top_k", int),
        end_user=user or "",
        system_cache=system_cache,
    )


def _tool_choice(value: Any, unknown: Unknown) -> tuple[ToolChoice | None, bool | None]:
    if value is None:
        return None, None
    if not isinstance(value, dict):
        raise InvalidInput("tool_choice", shown(value), 'must be an object: {"type": auto, any, none or tool}')
    kind = one_of(value.get("type"), _CHOICES, "tool_choice.type", "must be auto, any, none or tool")
    known = {"type", "name"} if kind == "tool" else {"type"}
    if kind != "none":
        known.add("disable_parallel_tool_use")
    unknown.take(value, _CHOICE_KEYS, "tool_choice")
    _refuse_unknown({k: v for k, v in value.items() if k in _CHOICE_KEYS}, frozenset(known), "tool_choice")
    name = value.get("name") or ""
    if kind == "tool" and (not isinstance(name, str) or not name):
        raise InvalidInput("tool_choice.name", shown(name), "must name the tool to call")
    disable = value.get("disable_parallel_tool_use")
    if disable is not None and not isinstance(disable, bool):
        raise InvalidInput("tool_choice.disable_parallel_tool_use", shown(disable), "must be true or false")
    return ToolChoice(_CHOICES[kind], name), None if disable is None else not disable


def _reasoning(thinking: Any, effort: Any, unknown: Unknown) -> Reasoning | None:
    if thinking is not None and not isinstance(thinking, dict):
        raise InvalidInput("thinking", shown(thinking), "must be an object")
    kind = (thinking or {}).get("type")
    if effort is not None and kind != "adaptive":
        raise InvalidInput("output_config.effort", shown(effort), 'goes with thinking {"type": "adaptive"}')
    if thinking is None or kind == "disabled":
        _refuse_unknown(thinking or {}, frozenset({"type"}), "thinking")  # nothing is rendered to carry them in
        return None
    if kind == "enabled":
        unknown.take(thinking, frozenset({"type", "budget_tokens"}), "thinking")
        budget = thinking.get("budget_tokens")
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise InvalidInput("thinking.budget_tokens", shown(budget), "must be a whole number of tokens")
        return Reasoning(budget_tokens=budget)
    if kind == "adaptive":
        unknown.take(thinking, frozenset({"type"}), "thinking")
        if effort is not None and effort not in EFFORTS:
            raise InvalidInput("output_config.effort", shown(effort), f"must be one of {', '.join(EFFORTS)}")
        return Reasoning(effort=effort or _DEFAULT_EFFORT)
    raise InvalidInput("thinking.type", shown(kind), "must be enabled, adaptive or disabled")


def _cache(block: Mapping[str, Any], where: str, unknown: Unknown) -> CacheBreakpoint | None:
    value = block.get("cache_control")
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("type") != CACHE_TYPE:
        raise InvalidInput(f"{where}.cache_control", shown(value), f'must be {{"type": "{CACHE_TYPE}"}}')
    unknown.take(value, frozenset({"type", "ttl"}), "cache_control")
    ttl = text_field(value, "ttl", f"{where}.cache_control.ttl")
    if ttl and ttl not in _TTLS:
        raise InvalidInput(f"{where}.cache_control.ttl", shown(ttl), "must be 5m or 1h")
    return CacheBreakpoint(ttl)


def _system(value: Any) -> tuple[str, CacheBreakpoint | None]:
    """The system prompt's text, and the cache breakpoint on its last block."""
    if value is None or isinstance(value, str):
        return value or "", None
    blocks = _blocks(value, "system")
    texts: list[str] = []
    cache: CacheBreakpoint | None = None
    for j, b in enumerate(blocks):
        where = f"system[{j}]"
        part = _part(b, where, ("text",))
        if part.carried is not None:  # the core joins the system prompt into one string: no block to carry it
            _refuse_carried(part.carried)
        texts.append(part.text if isinstance(part, TextPart) else "")
        if part.cache is not None and j != len(blocks) - 1:
            rule = "the sidecar caches the system prompt whole: put cache_control on its last block"
            raise InvalidInput(f"{where}.cache_control", shown(b["cache_control"]), rule)
        cache = part.cache
    return "".join(texts), cache


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        raise InvalidInput(where, shown(content), "must be a string or a list of content blocks")
    return content


def _kind(block: dict[str, Any], where: str, allowed: tuple[str, ...], unknown: Unknown | None = None) -> str:
    """The block's type; its other keys the front does not read gathered in ``unknown`` (None: refused)."""
    kind = block.get("type")
    if kind not in allowed:
        raise InvalidInput(where, shown(kind), f"must be a block of type {', '.join(allowed)}")
    if unknown is None:
        _refuse_unknown(block, _BLOCK_KEYS[str(kind)], where)
    else:
        unknown.take(block, _BLOCK_KEYS[str(kind)])
    return str(kind)


def _string(block: Mapping[str, Any], key: str, where: str, rule: str) -> str:
    value = block.get(key)
    if not isinstance(value, str):
        raise InvalidInput(f"{where}.{key}", shown(value), rule)
    return value


def _part(block: dict[str, Any], where: str, allowed: tuple[str, ...]) -> Part:
    """A text, image or document block as a part (``vocab``'s table)."""
    unknown = Unknown(FORMAT_NAME)
    kind = _kind(block, where, allowed, unknown)
    cache = _cache(block, where, unknown)
    if kind == "text":
        return TextPart(_string(block, "text", where, "must be the block's text"), cache, unknown.carried(where))
    source = block.get("source")
    if not isinstance(source, dict) or not source:
        sources = "base64 or url" if kind == "image" else "base64, text or url"
        raise InvalidInput(where, kind, f"an {kind} block needs its source: {sources}")
    at = f"{where}.source"
    part: Part
    if kind == "image":
        part = _image(source, at, cache, unknown)
    else:
        part = _document(source, at, text_field(block, "title", f"{where}.title"), cache, unknown)
    return replace(part, carried=unknown.carried(where))


def _data(source: Mapping[str, Any], where: str) -> bytes:
    text = _string(source, "data", where, "must be base64 text")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(f"{where}.data", text[:40], "must be base64 text") from None


def _image(source: dict[str, Any], where: str, cache: CacheBreakpoint | None, unknown: Unknown) -> ImagePart:
    kind = source.get("type")
    if kind == "base64":
        unknown.take(source, frozenset({"type", "media_type", "data"}), "source")
        media_type = _string(source, "media_type", where, "must be the image's media type")
        return ImagePart(media_type, _data(source, where), cache=cache)
    if kind == "url":
        unknown.take(source, frozenset({"type", "url"}), "source")
        return ImagePart(url=_string(source, "url", where, "must be the image's URL"), cache=cache)
    raise InvalidInput(f"{where}.type", shown(kind), "must be base64 or url (the sidecar carries no file ids)")


def _document(
    source: dict[str, Any], where: str, title: str, cache: CacheBreakpoint | None, unknown: Unknown
) -> DocumentPart:
    kind = source.get("type")
    if kind == "base64":
        unknown.take(source, frozenset({"type", "media_type", "data"}), "source")
        media_type = source.get("media_type")
        if media_type != PDF:
            raise InvalidInput(f"{where}.media_type", shown(media_type), f"must be {PDF}")
        return DocumentPart(PDF, _data(source, where), title=title, cache=cache)
    if kind == "text":
        unknown.take(source, frozenset({"type", "media_type", "data"}), "source")
        if source.get("media_type") != TEXT_PLAIN:
            raise InvalidInput(f"{where}.media_type", shown(source.get("media_type")), f"must be {TEXT_PLAIN}")
        text = _string(source, "data", where, "must be the document's text")
        return DocumentPart(TEXT_PLAIN, text=text, title=title, cache=cache)
    if kind == "url":
        unknown.take(source, frozenset({"type", "url"}), "source")
        return DocumentPart(url=_string(source, "url", where, "must be the document's URL"), title=title, cache=cache)
    raise InvalidInput(f"{where}.type", shown(kind), "must be base64, text or url (the sidecar carries no file ids)")


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


def _assistant(blocks: list[dict[str, Any]], where: str, names: dict[str, str]) -> list[Message]:
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
        at = f"{where}.content[{j}]"
        kind = _kind(block, at, _ASSISTANT_BLOCKS, Unknown(FORMAT_NAME))  # its keys are read below, by kind
        if kind in ("thinking", "redacted_thinking"):  # a ReasoningPart passes back as it came: it carries nothing
            _kind(block, at, _ASSISTANT_BLOCKS)
            if parts or calls:
                flush()
            reasoning.append(_reasoning_part(block, kind, at))
        elif kind == "tool_use":
            unknown = Unknown(FORMAT_NAME)
            _kind(block, at, _ASSISTANT_BLOCKS, unknown)
            name, call_id = block.get("name"), text_field(block, "id", f"{at}.id")
            if not isinstance(name, str):
                raise InvalidInput(f"{at}.name", shown(name), "must name the tool called")
            names[call_id] = name
            calls.append(ToolCall(call_id, name, _arguments(block.get("input")), unknown.carried(at)))
        else:
            if calls:
                flush()
            parts.append(_part(block, at, _ASSISTANT_BLOCKS[:1]))
    flush()
    return out


def _reasoning_part(block: dict[str, Any], kind: str, where: str) -> ReasoningPart:
    if kind == "redacted_thinking":
        return ReasoningPart(redacted_data=_string(block, "data", where, "must be the redacted thinking's data"))
    text = _string(block, "thinking", where, "must be the thinking's text")
    return ReasoningPart(text, _string(block, "signature", where, "must be the thinking's signature"))


def _arguments(value: Any) -> str:
    """A request's tool_use ``input`` as arguments JSON (the RAW_ARGUMENTS form: the text as written)."""
    if isinstance(value, dict) and list(value) == [RAW_ARGUMENTS] and isinstance(value[RAW_ARGUMENTS], str):
        return str(value[RAW_ARGUMENTS])
    return compact_json(value if value is not None else {})


def _user(blocks: list[dict[str, Any]], where: str, names: dict[str, str]) -> list[Message]:
    """Tool results (consecutive ones together) and runs of content blocks (one message each), in order."""
    out: list[Message] = []
    run: list[Part] = []
    for j, block in enumerate(blocks):
        at = f"{where}.content[{j}]"
        if _kind(block, at, _USER_BLOCKS, Unknown(FORMAT_NAME)) != "tool_result":  # its keys are read below
            run.append(_part(block, at, _USER_BLOCKS[:3]))
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


def _tool_result(block: dict[str, Any], where: str, names: dict[str, str]) -> ToolCallResult:
    """A tool_result: its content as text (a string, or one text block) or as text and image parts; its
    cache_control is a breakpoint on its last part."""
    unknown = Unknown(FORMAT_NAME)
    _kind(block, where, _USER_BLOCKS, unknown)
    call_id = text_field(block, "tool_use_id", f"{where}.tool_use_id")
    error = optional_bool(block, "is_error", f"{where}.is_error") is True
    result = ToolCallResult(call_id, "", error, names.get(call_id, ""))
    content = block.get("content")
    if isinstance(content, str) or content is None:
        text, parts = content or "", []
    else:
        at = f"{where}.content"
        parts = [_part(b, f"{at}[{k}]", ("text", "image")) for k, b in enumerate(_blocks(content, at))]
        text = ""
        bare = _bare_text(parts)
        if bare is not None:
            text, parts = bare, []
    cache = _cache(block, where, unknown)
    if cache is not None:
        if not parts and not text:
            raise InvalidInput(f"{where}.cache_control", CACHE_TYPE, "marks a tool result that has no content")
        if parts and parts[-1].cache is not None:
            raise InvalidInput(f"{where}.cache_control", CACHE_TYPE, "its last block holds a breakpoint already")
        parts = [*parts[:-1], replace(parts[-1], cache=cache)] if parts else [TextPart(text, cache)]
        text = ""
    return replace(result, content=text, parts=tuple(parts), carried=unknown.carried(where))


def _tool(t: dict[str, Any], where: str) -> ToolDefinition:
    unknown = Unknown(FORMAT_NAME)
    unknown.take(t, _TOOL_KEYS)
    if t.get("type") not in (None, "custom"):
        raise InvalidInput(f"{where}.type", shown(t.get("type")), "must be custom: the sidecar carries no server tools")
    name = t.get("name")
    if not isinstance(name, str):
        raise InvalidInput(f"{where}.name", shown(name), "must be the tool's name")
    schema = t.get("input_schema")
    params = "" if schema is None else schema_text(schema, f"{where}.input_schema")
    strict = optional_bool(t, "strict", f"{where}.strict")
    description = text_field(t, "description", f"{where}.description")
    cache = _cache(t, where, unknown)
    return ToolDefinition(name, description, params, cache, strict, unknown.carried(where))


def output_schema(body: Mapping[str, Any]) -> str | None:
    """The schema of ``output_config.format`` (structured outputs) as JSON text; None when not asked."""
    config = body.get("output_config")
    if config is None:
        return None
    if not isinstance(config, dict):
        raise InvalidInput("output_config", shown(config), "must be an object")
    fmt = config.get("format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        kind = fmt.get("type") if isinstance(fmt, dict) else fmt
        raise InvalidInput("output_config.format.type", shown(kind), "must be json_schema")
    _refuse_unknown(fmt, frozenset({"type", "schema"}), "output_config.format")
    return schema_text(fmt.get("schema"), "output_config.format.schema")
