"""The Bedrock Converse front: a Converse request read, the answer rendered (whole, streamed, failed).

The sidecar has no Bedrock door; this half is what the fake provider speaks (``fakes/_bedrock.py``)
and what ``tests/unit/test_formats.py`` reads the upstream's bodies back with. A request names its
model and whether it streams in its URL (``/model/{modelId}/converse`` or ``/converse-stream``):
``routed(path, body)`` puts them in the body as ``modelId`` and ``stream``.

``BedrockFront.parse`` reads a request into the core's (the inverse of ``upstream.BedrockUpstream.body``)::

    request key                 what is read
    modelId, stream             from the URL (``routed``)
    messages                    user: toolResult blocks are a tool message (toolUseId, content [text |
                                image], status error: is_error), text, image and document blocks a user
                                message (its text when it is one text block, else its parts); assistant:
                                reasoningContent its reasoning, text its text, toolUse its tool calls;
                                a cachePoint is the cache breakpoint of the block before it
    system                      text blocks the system prompt (a response schema appended to it read back
                                from its end); a cachePoint after them: system_cache
    inferenceConfig             maxTokens, temperature, topP, stopSequences
    toolConfig                  tools (toolSpec {name, description, inputSchema.json}, a cachePoint: the
                                tool before it cached); toolChoice auto | any | tool -> auto | required | tool
    additionalModelRequestFields  thinking {"type": "enabled", "budget_tokens"}: reasoning; the rest
                                provider options, as are guardrailConfig, performanceConfig,
                                requestMetadata, promptVariables, additionalModelResponseFieldPaths,
                                serviceTier, outputConfig

Any other key (of the body, a block ...) is INVALID_INPUT naming it. ``render``, ``writer`` and
``error_body`` answer in the format::

    ChatReply       {"output": {"message": {"role": "assistant", "content": [reasoningContent, text, toolUse]}},
                    "stopReason", "usage": {inputTokens, outputTokens, totalTokens, cacheReadInputTokens?,
                    cacheWriteInputTokens?}, "metrics": {"latencyMs"}} (inputTokens without the cache's)
      a refusal     one text block, its words; stopReason the reply's block reason, else content_filtered
    a stream        messageStart; per block: contentBlockStart (a tool call's id and name), contentBlockDelta
                    (text, toolUse.input fragments, reasoningContent text / signature / redactedContent),
                    contentBlockStop; messageStop {stopReason}; metadata {usage, metrics}
    a failure       {"message"}; the type is the ``x-amzn-ErrorType`` header's (``Wire.error_headers``);
                    in a stream an exception message (``:exception-type`` the type in lowerCamelCase)

A reply carries no model and no id: Converse says neither (the request names the model; the id is
the ``x-amzn-RequestId`` header).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from sidecar.core.conversation import (
    CacheBreakpoint,
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
from sidecar.providers.formats.bedrock_converse.upstream import MODEL_PATH
from sidecar.providers.formats.bedrock_converse.vocab import (
    BLOCKED,
    DEFAULT_NAME,
    ERROR_STATUS,
    FINISH,
    FINISH_NAMES,
    FORMAT_NAME,
    IMAGE_FORMATS,
    PDF,
    RAW_ARGUMENTS,
    TEXT,
    exception_event,
    input_of,
)
from sidecar.providers.formats.chat import ChatReply, compact_json, split_schema
from sidecar.providers.formats.fields import (
    number_field,
    object_list,
    one_of,
    positive_budget,
    schema_text,
    shown,
    text_field,
)
from sidecar.providers.formats.protocol import Ask, ParamNames, ReplyHead, Sse
from sidecar.providers.formats.routes import model_route

__all__ = ["BedrockFront", "BedrockWriter", "parse_request", "stop_reason"]

OPTION_KEYS = frozenset(
    {
        "guardrailConfig",
        "performanceConfig",
        "requestMetadata",
        "promptVariables",
        "additionalModelResponseFieldPaths",
        "serviceTier",
        "outputConfig",
    }
)
"""Keys of a request the front reads as provider options, as they are."""
_KEYS = frozenset(
    {"modelId", "stream", "messages", "system", "inferenceConfig", "toolConfig", "additionalModelRequestFields"}
    | OPTION_KEYS
)
_INFERENCE = frozenset({"maxTokens", "temperature", "topP", "stopSequences"})
_FORMATS = {v: k for k, v in IMAGE_FORMATS.items()}
_CHOICES = {"auto": "auto", "any": "required"}
_STATUS_TYPES: Mapping[int, str] = {
    400: "ValidationException",
    401: "UnrecognizedClientException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}
_NO_DOOR: ParamNames = {}
"""No door serves the format (only its fake speaks it): no parameter is renamed (``ParamNames``)."""
_ANSWERS: Mapping[str, str] = {
    "invalid_value": "ValidationException",
    "context_length_exceeded": "ValidationException",
    "content_policy_violation": "ValidationException",
    "output_truncated": "ValidationException",
    "permission_denied": "AccessDeniedException",
    "model_not_found": "ResourceNotFoundException",
    "resource_not_found": "ResourceNotFoundException",
    "insufficient_quota": "ServiceQuotaExceededException",
    "spend_cap_exceeded": "ServiceQuotaExceededException",
    "rate_limit_exceeded": "ThrottlingException",
    "overloaded": "ServiceUnavailableException",
    "deadline_exceeded": "ModelTimeoutException",
}
"""The error type of a sidecar failure by its code (its status: ``vocab.ERROR_STATUS``); other codes by status."""


class BedrockFront:
    """The Converse format as a provider speaks it (the module's tables)."""

    path = "/model"
    """The prefix of every model's routes (``{path}/{modelId}/converse``)."""
    words = "a Bedrock Converse"
    id_prefix = ""
    params = _NO_DOOR

    def routed(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """``body`` with the model and the streaming the URL ``path`` names; None for a path that is not a
        Converse one."""
        found = model_route(path, MODEL_PATH, "/", ("converse", "converse-stream"))
        return None if found is None else {**body, "modelId": found[0], "stream": found[1]}

    def parse(self, body: dict[str, Any]) -> Ask:
        request = parse_request(body)
        positive_budget(request, "inferenceConfig.maxTokens")
        return Ask(request, body.get("stream") is True)

    def render(self, reply: ChatReply, head: ReplyHead, extension: Mapping[str, Any] | None = None) -> dict[str, Any]:
        if reply.refusal is not None:
            content: list[dict[str, Any]] = [{"text": reply.refusal}]
        else:
            content = _reply_blocks(reply)
        out: dict[str, Any] = {
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": stop_reason(reply),
            "usage": usage_of(reply),
            "metrics": {"latencyMs": 0},
        }
        if extension is not None:
            out["sidecar"] = dict(extension)
        return out

    def writer(self, head: ReplyHead, *, include_usage: bool = False) -> BedrockWriter:
        return BedrockWriter()

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
        out: dict[str, Any] = {"message": message}
        if extension is not None:
            out["sidecar"] = dict(extension)
        return out

    def answer(self, code: str, status: int) -> tuple[int, str]:
        error_type = _ANSWERS.get(code) or self.error_type(status)
        return ERROR_STATUS.get(error_type, status), error_type

    def error_type(self, status: int) -> str:
        return _STATUS_TYPES.get(status, "InternalServerException" if status >= 500 else "ValidationException")

    def api_key(self, headers: Mapping[str, str]) -> str:
        """A Bedrock API key (``Authorization: Bearer``), or the access key id a SigV4 signature names."""
        auth = headers.get("authorization", "")
        if auth.startswith("Bearer "):
            return auth[len("Bearer ") :]
        credential = auth.partition("Credential=")[2]
        return credential.split("/", 1)[0] if credential else ""


def stop_reason(reply: ChatReply) -> str:
    """The reply's ``stopReason``: its own when it is Converse's, else by the core's finish."""
    if reply.refusal is not None or reply.finish is FinishReason.CONTENT_FILTER:
        return reply.raw_finish if reply.raw_finish in BLOCKED else "content_filtered"
    if FINISH.get(reply.raw_finish) is reply.finish:
        return reply.raw_finish
    return FINISH_NAMES.get(reply.finish, "end_turn")


def usage_of(reply: ChatReply) -> dict[str, int]:
    """Converse's usage: inputTokens without the cache's (the core's input tokens count them)."""
    read, write = reply.cache_read_input_tokens, reply.cache_write_input_tokens
    usage = {
        "inputTokens": max(reply.input_tokens - read - write, 0),
        "outputTokens": reply.output_tokens,
        "totalTokens": reply.input_tokens + reply.output_tokens,
    }
    if read:
        usage["cacheReadInputTokens"] = read
    if write:
        usage["cacheWriteInputTokens"] = write
    return usage


def _reply_blocks(reply: ChatReply) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for r in reply.reasoning:
        if r.redacted_data:
            out.append({"reasoningContent": {"redactedContent": r.redacted_data}})
        elif r.text or r.signature:
            text: dict[str, Any] = {"text": r.text}
            if r.signature:
                text["signature"] = r.signature
            out.append({"reasoningContent": {"reasoningText": text}})
    if reply.text or not reply.tool_calls:
        out.append({"text": reply.text})
    for c in reply.tool_calls:
        out.append({"toolUse": {"toolUseId": c.id, "name": c.name, "input": input_of(c.arguments_json)}})
    return out


class BedrockWriter:
    """One streamed reply as ConverseStream events (the module's table)."""

    def __init__(self) -> None:
        self._index = -1
        """The content block open now (-1: none)."""
        self._key: tuple[str, int] | None = None
        """What the open block holds: ("text", 0), ("tool", i), ("reasoning", i)."""

    def _open(self, key: tuple[str, int], start: dict[str, Any] | None = None) -> list[Sse]:
        out = self._close()
        self._index += 1
        self._key = key
        if start is not None:
            out.append(("contentBlockStart", {"start": start, "contentBlockIndex": self._index}))
        return out

    def _close(self) -> list[Sse]:
        if self._key is None:
            return []
        self._key = None
        return [("contentBlockStop", {"contentBlockIndex": self._index})]

    def _delta(self, delta: dict[str, Any]) -> Sse:
        return ("contentBlockDelta", {"delta": delta, "contentBlockIndex": self._index})

    def start(self, input_tokens: int = 0) -> list[Sse]:
        return [("messageStart", {"role": "assistant"})]

    def delta(self, delta: Delta) -> list[Sse]:
        out: list[Sse] = []
        if isinstance(delta, TextDelta):
            if self._key != ("text", 0):
                out += self._open(("text", 0))
            return [*out, self._delta({"text": delta.text})]
        if isinstance(delta, ReasoningDelta):
            if self._key != ("reasoning", delta.index):
                out += self._open(("reasoning", delta.index))
            if delta.redacted_data:
                return [*out, self._delta({"reasoningContent": {"redactedContent": delta.redacted_data}})]
            if delta.text:
                out.append(self._delta({"reasoningContent": {"text": delta.text}}))
            if delta.signature:
                out.append(self._delta({"reasoningContent": {"signature": delta.signature}}))
            return out
        if delta.id or delta.name:
            out += self._open(("tool", delta.index), {"toolUse": {"toolUseId": delta.id, "name": delta.name}})
        elif self._key != ("tool", delta.index):
            return []
        if delta.arguments_fragment:
            out.append(self._delta({"toolUse": {"input": delta.arguments_fragment}}))
        return out

    def refusal(self, text: str) -> list[Sse]:
        return self.delta(TextDelta(text))

    def restarted(self, words: Mapping[str, Any]) -> list[Sse]:
        out = self._close()
        self._index = -1
        return [*out, ("sidecarRestart", dict(words))]

    def final(self, reply: ChatReply, extension: Mapping[str, Any] | None = None) -> list[Sse]:
        metadata: dict[str, Any] = {"usage": usage_of(reply), "metrics": {"latencyMs": 0}}
        if extension is not None:
            metadata["sidecar"] = dict(extension)
        return [*self._close(), ("messageStop", {"stopReason": stop_reason(reply)}), ("metadata", metadata)]

    def error(self, body: dict[str, Any]) -> list[Sse]:
        """An error (``{"message", "__type"?}``) as the exception message of its type."""
        rest = dict(body)
        error_type = rest.pop("__type", None)
        name = exception_event(error_type if isinstance(error_type, str) and error_type else "InternalServerException")
        return [(name, rest)]


# ---------------------------------------------------------------------------- requests read


def _refuse_unknown(value: Mapping[str, Any], known: frozenset[str], where: str) -> None:
    for key, item in value.items():
        if key not in known and item is not None:
            at = f"{where}.{key}" if where else key
            raise InvalidInput(at, shown(item), "is not carried by the sidecar (docs/carried.md): leave it out")


def _object(body: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
    value = body.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(where, shown(value), "must be an object")
    return value


def _string(value: Mapping[str, Any], key: str, where: str) -> str:
    got = value.get(key)
    if not isinstance(got, str):
        raise InvalidInput(f"{where}.{key}", shown(got), "must be a string")
    return got


def _only(block: Mapping[str, Any], where: str) -> str:
    """The one key of a union block (``{"text": ...}``)."""
    keys = [k for k, v in block.items() if v is not None]
    if len(keys) != 1:
        raise InvalidInput(where, shown(sorted(block)), "must be a block of exactly one kind")
    return keys[0]


def parse_request(body: Mapping[str, Any]) -> ModelRequest:
    """A Converse request (``routed``) as the core's ModelRequest (the module's table)."""
    _refuse_unknown(body, _KEYS, "")
    model = body.get("modelId")
    if not isinstance(model, str) or not model:
        raise InvalidInput("modelId", shown(model), "must be the model's id (in the URL)")
    system, system_cache = _system(body.get("system"))
    system, schema = split_schema(system)
    messages: list[Message] = []
    names: dict[str, str] = {}
    for i, m in enumerate(object_list(body, "messages", required=True)):
        where = f"messages[{i}]"
        _refuse_unknown(m, frozenset({"role", "content"}), where)
        blocks = object_list(m, "content", required=True, at=where)
        if m.get("role") == "assistant":
            messages.append(_assistant(blocks, f"{where}.content", names))
        elif m.get("role") == "user":
            messages.extend(_user(blocks, f"{where}.content", names))
        else:
            raise InvalidInput(f"{where}.role", shown(m.get("role")), "must be user or assistant")
    inference = _object(body, "inferenceConfig", "inferenceConfig")
    _refuse_unknown(inference, _INFERENCE, "inferenceConfig")
    stop = inference.get("stopSequences")
    if stop is not None and (not isinstance(stop, list) or not all(isinstance(s, str) for s in stop)):
        raise InvalidInput("inferenceConfig.stopSequences", shown(stop), "must be a list of strings")
    tools, choice = _tool_config(body.get("toolConfig"))
    reasoning, options = _extra(body)
    return ModelRequest(
        model=model,
        messages=tuple(messages),
        system=system,
        tools=tools,
        response_schema_json=schema,
        max_output_tokens=number_field(inference, "maxTokens", int, at="inferenceConfig"),
        temperature=number_field(inference, "temperature", float, at="inferenceConfig"),
        controls=Controls(
            reasoning=reasoning,
            tool_choice=choice,
            stop=tuple(stop or ()),
            top_p=number_field(inference, "topP", float, at="inferenceConfig"),
            system_cache=system_cache,
            provider_options_json=options,
        ),
    )


def _cache(block: Mapping[str, Any], where: str) -> CacheBreakpoint:
    point = _object(block, "cachePoint", f"{where}.cachePoint")
    _refuse_unknown(point, frozenset({"type", "ttl"}), f"{where}.cachePoint")
    if point.get("type") != "default":
        raise InvalidInput(f"{where}.cachePoint.type", shown(point.get("type")), "must be default")
    ttl = text_field(point, "ttl", f"{where}.cachePoint.ttl")
    if ttl not in ("", "5m", "1h"):
        raise InvalidInput(f"{where}.cachePoint.ttl", shown(ttl), "must be 5m or 1h")
    return CacheBreakpoint(str(ttl))


def _system(value: Any) -> tuple[str, CacheBreakpoint | None]:
    if value is None:
        return "", None
    if not isinstance(value, list) or not all(isinstance(b, dict) for b in value):
        raise InvalidInput("system", shown(value), "must be a list of blocks")
    texts: list[str] = []
    cache = None
    for j, block in enumerate(value):
        where = f"system[{j}]"
        kind = _only(block, where)
        if kind == "cachePoint" and j == len(value) - 1:
            cache = _cache(block, where)
        elif kind == "text":
            texts.append(_string(block, "text", where))
        else:
            raise InvalidInput(where, kind, "a system block the sidecar reads is text, and a last cachePoint")
    return "".join(texts), cache


def _tool_config(value: Any) -> tuple[tuple[ToolDefinition, ...], ToolChoice | None]:
    if value is None:
        return (), None
    if not isinstance(value, dict):
        raise InvalidInput("toolConfig", shown(value), "must be an object")
    _refuse_unknown(value, frozenset({"tools", "toolChoice"}), "toolConfig")
    tools: list[ToolDefinition] = []
    for i, tool in enumerate(object_list(value, "tools", required=True, at="toolConfig")):
        where = f"toolConfig.tools[{i}]"
        kind = _only(tool, where)
        if kind == "cachePoint" and tools:
            tools[-1] = replace(tools[-1], cache=_cache(tool, where))
            continue
        if kind != "toolSpec":
            raise InvalidInput(where, kind, "a tool the sidecar reads is a toolSpec (and a cachePoint after one)")
        spec = _object(tool, "toolSpec", f"{where}.toolSpec")
        at = f"{where}.toolSpec"
        _refuse_unknown(spec, frozenset({"name", "description", "inputSchema"}), at)
        schema = _object(spec, "inputSchema", f"{at}.inputSchema")
        _refuse_unknown(schema, frozenset({"json"}), f"{at}.inputSchema")
        parameters = schema_text(schema.get("json"), f"{at}.inputSchema.json")
        description = text_field(spec, "description", f"{at}.description")
        tools.append(ToolDefinition(_string(spec, "name", at), description, parameters))
    choice = value.get("toolChoice")
    if choice is None:
        return tuple(tools), None
    if not isinstance(choice, dict):
        raise InvalidInput("toolConfig.toolChoice", shown(choice), "must be an object")
    kind = _only(choice, "toolConfig.toolChoice")
    if kind == "tool":
        named = _object(choice, "tool", "toolConfig.toolChoice.tool")
        return tuple(tools), ToolChoice("tool", _string(named, "name", "toolConfig.toolChoice.tool"))
    if kind not in _CHOICES:
        raise InvalidInput("toolConfig.toolChoice", kind, "must be auto, any or tool")
    return tuple(tools), ToolChoice(_CHOICES[kind])


def _extra(body: Mapping[str, Any]) -> tuple[Reasoning | None, str]:
    """The reasoning ``additionalModelRequestFields.thinking`` asks, and the provider options (the rest)."""
    extra = dict(_object(body, "additionalModelRequestFields", "additionalModelRequestFields"))
    reasoning = None
    thinking = extra.pop("thinking", None)
    if thinking is not None:
        where = "additionalModelRequestFields.thinking"
        if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
            raise InvalidInput(where, shown(thinking), 'the sidecar reads {"type": "enabled", "budget_tokens"}')
        _refuse_unknown(thinking, frozenset({"type", "budget_tokens"}), where)
        reasoning = Reasoning(budget_tokens=number_field(thinking, "budget_tokens", int, at=where))
    options = {k: body[k] for k in sorted(OPTION_KEYS) if body.get(k) is not None}
    if extra:
        options["additionalModelRequestFields"] = extra
    return reasoning, compact_json({FORMAT_NAME: options}) if options else ""


def _blob(value: Mapping[str, Any], key: str, where: str) -> bytes:
    text = _string(value, key, where)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(f"{where}.{key}", text[:40], "must be base64 text") from None


def _image(block: Mapping[str, Any], where: str) -> ImagePart:
    image = _object(block, "image", f"{where}.image")
    at = f"{where}.image"
    _refuse_unknown(image, frozenset({"format", "source"}), at)
    fmt = image.get("format")
    one_of(fmt, _FORMATS, f"{at}.format", f"must be one of {', '.join(_FORMATS)}")
    source = _object(image, "source", f"{at}.source")
    kind = _only(source, f"{at}.source")
    if kind == "s3Location":
        location = _object(source, "s3Location", f"{at}.source.s3Location")
        _refuse_unknown(location, frozenset({"uri"}), f"{at}.source.s3Location")
        return ImagePart(url=_string(location, "uri", f"{at}.source.s3Location"))
    if kind != "bytes":
        raise InvalidInput(f"{at}.source", kind, "must be bytes or an s3Location")
    return ImagePart(_FORMATS[str(fmt)], _blob(source, "bytes", f"{at}.source"))


def _document(block: Mapping[str, Any], where: str) -> DocumentPart:
    document = _object(block, "document", f"{where}.document")
    at = f"{where}.document"
    _refuse_unknown(document, frozenset({"format", "name", "source"}), at)
    name = _string(document, "name", at)
    title = "" if name.startswith(DEFAULT_NAME) and name[len(DEFAULT_NAME) :].isdigit() else name
    source = _object(document, "source", f"{at}.source")
    _refuse_unknown(source, frozenset({"bytes"}), f"{at}.source")
    data = _blob(source, "bytes", f"{at}.source")
    fmt = document.get("format")
    if fmt == "pdf":
        return DocumentPart(PDF, data, title=title)
    if fmt == "txt":
        try:
            return DocumentPart(TEXT, text=data.decode("utf-8"), title=title)
        except UnicodeDecodeError:
            raise InvalidInput(f"{at}.source.bytes", "", "a txt document is UTF-8 text") from None
    raise InvalidInput(f"{at}.format", shown(fmt), "the sidecar reads pdf and txt documents")


def _parts(blocks: list[tuple[str, dict[str, Any]]], kinds: frozenset[str]) -> list[Part]:
    """Text, image and document blocks (each with where it is) as parts, a cachePoint the breakpoint of the
    part before it."""
    out: list[Part] = []
    for at, block in blocks:
        kind = _only(block, at)
        if kind not in kinds:
            raise InvalidInput(at, kind, f"must be a block of: {', '.join(sorted(kinds))}")
        if kind == "cachePoint":
            if not out:
                raise InvalidInput(at, kind, "a cachePoint follows the block it caches")
            out[-1] = replace(out[-1], cache=_cache(block, at))
        elif kind == "text":
            out.append(TextPart(_string(block, "text", at)))
        elif kind == "image":
            out.append(_image(block, at))
        else:
            out.append(_document(block, at))
    return out


def _message_of(role: Role, parts: list[Part]) -> Message:
    if len(parts) == 1 and isinstance(parts[0], TextPart) and parts[0].cache is None:
        return Message(role, parts[0].text)
    if not parts:
        return Message(role, "")
    return Message(role, parts=tuple(parts))


_USER_BLOCKS = frozenset({"text", "image", "document", "cachePoint"})


def _user(blocks: list[dict[str, Any]], where: str, names: dict[str, str]) -> list[Message]:
    results: list[ToolCallResult] = []
    content: list[tuple[str, dict[str, Any]]] = []
    for j, block in enumerate(blocks):
        if block.get("toolResult") is not None:
            results.append(_result(block, f"{where}[{j}]", names))
        else:
            content.append((f"{where}[{j}]", block))
    out = []
    if results:
        out.append(Message(Role.TOOL, tool_results=tuple(results)))
    parts = _parts(content, _USER_BLOCKS)
    if parts or not results:
        out.append(_message_of(Role.USER, parts))
    return out


def _result(block: Mapping[str, Any], where: str, names: dict[str, str]) -> ToolCallResult:
    _only(block, where)  # a toolResult and a text in one block: the block is wrong, not the text
    result = _object(block, "toolResult", f"{where}.toolResult")
    at = f"{where}.toolResult"
    _refuse_unknown(result, frozenset({"toolUseId", "content", "status"}), at)
    call_id = _string(result, "toolUseId", at)
    status = text_field(result, "status", f"{at}.status", "success")
    if status not in ("success", "error"):
        raise InvalidInput(f"{at}.status", shown(status), "must be success or error")
    listed = object_list(result, "content", required=True, at=at)
    parts = _parts([(f"{at}.content[{j}]", b) for j, b in enumerate(listed)], frozenset({"text", "image"}))
    name = names.get(call_id, "")
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return ToolCallResult(call_id, parts[0].text, status == "error", name)
    return ToolCallResult(call_id, "", status == "error", name, tuple(parts))


def _arguments(value: Any, where: str) -> str:
    if value is None:
        return "{}"
    if not isinstance(value, dict):
        raise InvalidInput(where, shown(value), "must be a JSON object")
    if list(value) == [RAW_ARGUMENTS] and isinstance(value[RAW_ARGUMENTS], str):
        return str(value[RAW_ARGUMENTS])
    return compact_json(value)


def _assistant(blocks: list[dict[str, Any]], where: str, names: dict[str, str]) -> Message:
    reasoning: list[ReasoningPart] = []
    content: list[tuple[str, dict[str, Any]]] = []
    calls: list[ToolCall] = []
    for j, block in enumerate(blocks):
        at = f"{where}[{j}]"
        kind = _only(block, at)
        if kind == "reasoningContent":
            reasoning.append(_reasoning(block, at))
        elif kind == "toolUse":
            use = _object(block, "toolUse", f"{at}.toolUse")
            _refuse_unknown(use, frozenset({"toolUseId", "name", "input"}), f"{at}.toolUse")
            call_id, name = _string(use, "toolUseId", f"{at}.toolUse"), _string(use, "name", f"{at}.toolUse")
            names[call_id] = name
            calls.append(ToolCall(call_id, name, _arguments(use.get("input"), f"{at}.toolUse.input")))
        else:
            content.append((at, block))
    parts = _parts(content, frozenset({"text", "cachePoint"}))
    if calls and parts == [TextPart("")]:
        parts = []
    message = _message_of(Role.ASSISTANT, parts)
    return Message(Role.ASSISTANT, message.text, tuple(calls), parts=message.parts, reasoning=tuple(reasoning))


def _reasoning(block: Mapping[str, Any], where: str) -> ReasoningPart:
    content = _object(block, "reasoningContent", f"{where}.reasoningContent")
    at = f"{where}.reasoningContent"
    kind = _only(content, at)
    if kind == "redactedContent":
        return ReasoningPart(redacted_data=_string(content, "redactedContent", at))
    if kind != "reasoningText":
        raise InvalidInput(at, kind, "must be reasoningText or redactedContent")
    text = _object(content, "reasoningText", f"{at}.reasoningText")
    _refuse_unknown(text, frozenset({"text", "signature"}), f"{at}.reasoningText")
    signature = text_field(text, "signature", f"{at}.reasoningText.signature")
    return ReasoningPart(_string(text, "text", f"{at}.reasoningText"), signature)
