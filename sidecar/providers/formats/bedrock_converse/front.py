"""The Bedrock Converse front: a Converse request read, the answer rendered (whole, streamed, failed).

The sidecar has no Bedrock door; this half is what the fake provider speaks (``fake.py``)
and what ``tests/unit/test_formats.py`` reads the upstream's bodies back with. A request names its
model and whether it streams in its URL (``/model/{modelId}/converse`` or ``/converse-stream``):
``routed(path, body)`` puts them in the body as ``modelId`` and ``stream``.

``BedrockFront.parse`` checks a request against ``shapes.ConverseRequest`` (a key it does not declare,
or a wrong value, is INVALID_INPUT naming it) and reads it into the core's: the inverse of
``upstream.BedrockUpstream.body`` (its table, and ``vocab``'s of the blocks). What only reading does: a
user message's toolResult blocks are a tool message before it, one text block is its text, an empty
text beside tool calls is none; the request's keys of ``OPTION_KEYS`` (guardrailConfig ...) and
additionalModelRequestFields but its thinking are provider options, as they are.

Checked by hand, what the types cannot say: a union block holds one member, a cachePoint follows a
block, a blob is base64 (a txt document's UTF-8 text), the model id is not empty. ``render``, ``writer``
and ``error_body`` answer in the format (``shapes.Response``, the stream's events, ``shapes.ErrorBody``)::

    ChatReply       output.message.content [reasoningContent, text, toolUse], stopReason, usage
                    (inputTokens without the cache's), metrics
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

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, cast

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
from sidecar.providers.formats.arguments import arguments_text
from sidecar.providers.formats.bedrock_converse import shapes
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
    SIDECAR_KEYS,
    TEXT,
    exception_event,
    reasoning_blocks,
    tool_use_blocks,
)
from sidecar.providers.formats.chat import ChatReply, compact_json, message_of, split_schema
from sidecar.providers.formats.fields import positive_budget, shown
from sidecar.providers.formats.inline import base64_field
from sidecar.providers.formats.protocol import Ask, ParamNames, ReplyHead, Sse
from sidecar.providers.formats.routes import model_route
from sidecar.providers.formats.shapes import declared

__all__ = ["OPTION_KEYS", "BedrockFront", "BedrockWriter", "parse_request", "stop_reason"]

OPTION_KEYS = declared(shapes.ConverseRequest) - SIDECAR_KEYS - {"additionalModelRequestFields"}
"""The request's keys read as provider options, as they are (guardrailConfig, performanceConfig ...)."""
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
            content: list[shapes.AssistantBlock] = [{"text": reply.refusal}]
        else:
            text: list[shapes.AssistantBlock] = [{"text": reply.text}] if reply.text or not reply.tool_calls else []
            content = [*reasoning_blocks(reply.reasoning), *text, *tool_use_blocks(reply.tool_calls)]
        out: shapes.Response = {
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": stop_reason(reply),
            "usage": usage_of(reply),
            "metrics": {"latencyMs": 0},
        }
        if extension is not None:
            out["sidecar"] = dict(extension)
        return dict(out)

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
        out: shapes.ErrorBody = {"message": message}
        if extension is not None:
            out["sidecar"] = dict(extension)
        return dict(out)

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


def usage_of(reply: ChatReply) -> shapes.Usage:
    """Converse's usage: inputTokens without the cache's (the core's input tokens count them)."""
    read, write = reply.cache_read_input_tokens, reply.cache_write_input_tokens
    usage: shapes.Usage = {
        "inputTokens": max(reply.input_tokens - read - write, 0),
        "outputTokens": reply.output_tokens,
        "totalTokens": reply.input_tokens + reply.output_tokens,
    }
    if read:
        usage["cacheReadInputTokens"] = read
    if write:
        usage["cacheWriteInputTokens"] = write
    return usage


def _event(name: str, payload: Mapping[str, object]) -> Sse:
    return name, dict(payload)


class BedrockWriter:
    """One streamed reply as ConverseStream events (the module's table)."""

    def __init__(self) -> None:
        self._index = -1
        """The content block open now (-1: none)."""
        self._key: tuple[str, int] | None = None
        """What the open block holds: ("text", 0), ("tool", i), ("reasoning", i)."""

    def _open(self, key: tuple[str, int], start: shapes.BlockStart | None = None) -> list[Sse]:
        out = self._close()
        self._index += 1
        self._key = key
        if start is not None:
            out.append(
                _event("contentBlockStart", shapes.ContentBlockStart(start=start, contentBlockIndex=self._index))
            )
        return out

    def _close(self) -> list[Sse]:
        if self._key is None:
            return []
        self._key = None
        return [_event("contentBlockStop", shapes.ContentBlockStop(contentBlockIndex=self._index))]

    def _delta(self, delta: shapes.BlockDelta) -> Sse:
        return _event("contentBlockDelta", shapes.ContentBlockDelta(delta=delta, contentBlockIndex=self._index))

    def start(self, input_tokens: int = 0) -> list[Sse]:
        return [_event("messageStart", shapes.MessageStart(role="assistant"))]

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
        metadata: shapes.Metadata = {"usage": usage_of(reply), "metrics": {"latencyMs": 0}}
        if extension is not None:
            metadata["sidecar"] = dict(extension)
        stop = _event("messageStop", shapes.MessageStop(stopReason=stop_reason(reply)))
        return [*self._close(), stop, _event("metadata", metadata)]

    def error(self, body: dict[str, Any]) -> list[Sse]:
        """An error (``{"message", "__type"?}``) as the exception message of its type."""
        rest = dict(body)
        error_type = rest.pop("__type", None)
        name = exception_event(error_type if isinstance(error_type, str) and error_type else "InternalServerException")
        return [(name, rest)]


# ---------------------------------------------------------------------------- requests read


def parse_request(body: Mapping[str, Any]) -> ModelRequest:
    """A Converse request (``routed``) as the core's ModelRequest (the module's table)."""
    shapes.REQUEST.check(body)
    request = cast(shapes.ConverseRequest, body)
    if not request["modelId"]:
        raise InvalidInput("modelId", "", "must be the model's id (in the URL)")
    system, system_cache = _system(request.get("system") or [])
    system, schema = split_schema(system)
    messages: list[Message] = []
    names: dict[str, str] = {}
    for i, m in enumerate(request["messages"]):
        if m["role"] == "assistant":
            messages.append(_assistant(m["content"], f"messages[{i}].content", names))
        else:
            messages.extend(_user(m["content"], f"messages[{i}].content", names))
    inference: shapes.InferenceConfig = request.get("inferenceConfig") or {}
    tools, choice = _tool_config(request.get("toolConfig"))
    fields = request.get("additionalModelRequestFields") or {}
    thinking = fields.get("thinking")
    options = {k: body[k] for k in sorted(OPTION_KEYS) if body.get(k) is not None}
    extra = {k: v for k, v in fields.items() if k != "thinking"}
    if extra:
        options["additionalModelRequestFields"] = extra
    return ModelRequest(
        model=request["modelId"],
        messages=tuple(messages),
        system=system,
        tools=tools,
        response_schema_json=schema,
        max_output_tokens=inference.get("maxTokens"),
        temperature=_number(inference.get("temperature")),
        controls=Controls(
            reasoning=None if thinking is None else Reasoning(budget_tokens=thinking.get("budget_tokens")),
            tool_choice=choice,
            stop=tuple(inference.get("stopSequences") or ()),
            top_p=_number(inference.get("topP")),
            system_cache=system_cache,
            provider_options_json=compact_json({FORMAT_NAME: options}) if options else "",
        ),
    )


def _number(value: float | None) -> float | None:
    return None if value is None else float(value)


def _only(union: Mapping[str, Any], where: str) -> tuple[str, Any]:
    """The one member a union holds (``{"text": ...}``): one, and only one, is what a type cannot say."""
    members = [(k, v) for k, v in union.items() if v is not None]
    if len(members) != 1:
        raise InvalidInput(where, shown(sorted(union)), "must be a block of exactly one kind")
    return members[0]


def _kinds(blocks: list[Any], where: str) -> list[tuple[str, str, Any]]:
    """Each block's caller's path, the member it holds, and its value."""
    return [(f"{where}[{j}]", *_only(block, f"{where}[{j}]")) for j, block in enumerate(blocks)]


def _cache(point: shapes.CachePoint) -> CacheBreakpoint:
    return CacheBreakpoint(point.get("ttl") or "")


def _system(blocks: list[shapes.SystemBlock]) -> tuple[str, CacheBreakpoint | None]:
    texts: list[str] = []
    cache = None
    for j, (at, kind, value) in enumerate(_kinds(blocks, "system")):
        if kind == "text":
            texts.append(value)
        elif j == len(blocks) - 1:
            cache = _cache(value)
        else:
            raise InvalidInput(at, kind, "a cachePoint is the system prompt's last block")
    return "".join(texts), cache


def _tool_config(config: shapes.ToolConfig | None) -> tuple[tuple[ToolDefinition, ...], ToolChoice | None]:
    if config is None:
        return (), None
    tools: list[ToolDefinition] = []
    for at, kind, value in _kinds(config["tools"], "toolConfig.tools"):
        if kind == "toolSpec":
            schema = compact_json(value["inputSchema"]["json"])
            tools.append(ToolDefinition(value["name"], value.get("description") or "", schema))
        elif tools:
            tools[-1] = replace(tools[-1], cache=_cache(value))
        else:
            raise InvalidInput(at, kind, "a cachePoint follows the tool it caches")
    choice = config.get("toolChoice")
    if choice is None:
        return tuple(tools), None
    kind, value = _only(choice, "toolConfig.toolChoice")
    return tuple(tools), ToolChoice("tool", value["name"]) if kind == "tool" else ToolChoice(_CHOICES[kind])


def _image(image: shapes.Image, at: str) -> ImagePart:
    kind, value = _only(image["source"], f"{at}.source")
    if kind == "s3Location":
        return ImagePart(url=value["uri"])
    return ImagePart(_FORMATS[image["format"]], base64_field(value, f"{at}.source.bytes"))


def _document(document: shapes.Document, at: str) -> DocumentPart:
    name = document["name"]
    title = "" if name.startswith(DEFAULT_NAME) and name[len(DEFAULT_NAME) :].isdigit() else name
    data = base64_field(document["source"]["bytes"], f"{at}.source.bytes")
    if document["format"] == "pdf":
        return DocumentPart(PDF, data, title=title)
    try:
        return DocumentPart(TEXT, text=data.decode("utf-8"), title=title)
    except UnicodeDecodeError:
        raise InvalidInput(f"{at}.source.bytes", "", "a txt document is UTF-8 text") from None


def _parts(blocks: list[tuple[str, str, Any]]) -> list[Part]:
    """Text, image and document blocks as parts, a cachePoint the breakpoint of the part before it."""
    out: list[Part] = []
    for at, kind, value in blocks:
        if kind == "cachePoint":
            if not out:
                raise InvalidInput(at, kind, "a cachePoint follows the block it caches")
            out[-1] = replace(out[-1], cache=_cache(value))
        elif kind == "text":
            out.append(TextPart(value))
        elif kind == "image":
            out.append(_image(value, f"{at}.image"))
        else:
            out.append(_document(value, f"{at}.document"))
    return out


def _user(blocks: list[shapes.UserBlock], where: str, names: dict[str, str]) -> list[Message]:
    kinds = _kinds(blocks, where)
    results = [_result(value, f"{at}.toolResult", names) for at, kind, value in kinds if kind == "toolResult"]
    parts = _parts([block for block in kinds if block[1] != "toolResult"])
    out = [Message(Role.TOOL, tool_results=tuple(results))] if results else []
    if parts or not results:
        out.append(message_of(Role.USER, parts))
    return out


def _result(result: shapes.ToolResult, at: str, names: dict[str, str]) -> ToolCallResult:
    call_id, error = result["toolUseId"], result.get("status") == "error"
    parts = _parts(_kinds(result["content"], f"{at}.content"))
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return ToolCallResult(call_id, parts[0].text, error, names.get(call_id, ""))
    return ToolCallResult(call_id, "", error, names.get(call_id, ""), tuple(parts))


def _assistant(blocks: list[shapes.AssistantBlock], where: str, names: dict[str, str]) -> Message:
    reasoning: list[ReasoningPart] = []
    content: list[tuple[str, str, Any]] = []
    calls: list[ToolCall] = []
    for at, kind, value in _kinds(blocks, where):
        if kind == "reasoningContent":
            reasoning.append(_reasoning(value, f"{at}.reasoningContent"))
        elif kind == "toolUse":
            names[value["toolUseId"]] = value["name"]
            calls.append(ToolCall(value["toolUseId"], value["name"], arguments_text(value.get("input"))))
        else:
            content.append((at, kind, value))
    parts = _parts(content)
    if calls and parts == [TextPart("")]:
        parts = []
    message = message_of(Role.ASSISTANT, parts)
    return Message(Role.ASSISTANT, message.text, tuple(calls), parts=message.parts, reasoning=tuple(reasoning))


def _reasoning(content: shapes.ReasoningContent, at: str) -> ReasoningPart:
    kind, value = _only(content, at)
    if kind == "redactedContent":
        return ReasoningPart(redacted_data=value)
    return ReasoningPart(value["text"], value.get("signature") or "")
