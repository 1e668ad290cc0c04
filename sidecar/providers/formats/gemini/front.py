"""The Gemini front: a generateContent request read, the answer rendered (whole, streamed, failed).

The sidecar has no Gemini door yet; this half is what the fake provider speaks (``fakes/_gemini.py``)
and what ``tests/unit/test_formats.py`` reads the upstream's bodies back with. A request names its
model and whether it streams in its URL, not its body: ``routed(path, body)`` puts them in the body
as ``model`` and ``stream`` (the keys ``parse`` reads them from), for a path of ``upstream.generate_path``.

``GeminiFront.parse`` reads a request into the core's (the inverse of ``upstream.GeminiUpstream.body``)::

    request key                 what is read
    model, stream               from the URL (``routed``): the model id asked for, a streamed answer
    contents                    user: functionResponse parts are a tool message (id, name, response
                                {"output" | "error"}: is_error; another response object: its JSON);
                                text, inlineData and fileData parts a user message (its text when it
                                is one text part, else its parts); model: thought parts its reasoning,
                                text its text, functionCall its tool calls, thoughtSignature kept
                                (``vocab``'s table)
    systemInstruction           the system prompt (its text parts, joined)
    tools                       functionDeclarations {name, description, parametersJsonSchema}
    toolConfig                  functionCallingConfig mode AUTO | NONE | ANY (+ one allowedFunctionNames:
                                that tool) -> auto | none | required | tool
    generationConfig            maxOutputTokens, temperature, topP, topK, stopSequences, seed,
                                presencePenalty, frequencyPenalty; responseMimeType application/json
                                with responseJsonSchema: the response schema; thinkingConfig
                                thinkingBudget | thinkingLevel (includeThoughts read and implied)

Keys are read in lowerCamelCase or snake_case, as Google's JSON reads both (``camel``: the SDK sends
``thinking_budget``). Any other key (of the body, a part, generationConfig ...) is INVALID_INPUT naming it: nothing is
accepted and then dropped. ``render``, ``writer`` and ``error_body`` answer in the format::

    ChatReply               {"candidates": [{"content": {"role": "model", "parts"}, "finishReason",
                            "index": 0, "finishMessage"?}], "usageMetadata", "modelVersion", "responseId"}
      reasoning, text,      thought parts, a text part, functionCall parts (``upstream.signed_parts``)
      tool calls
      a refusal             no content; finishReason the reply's block reason (else SAFETY),
                            finishMessage its words
    a stream                one chunk for each delta (a function call whole, when its arguments end),
                            the last with the finishReason and usageMetadata; a signature that is not
                            a thought's rides on the next part
    a failure               {"error": {"code", "message", "status"}}; in a stream the same as a chunk
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from sidecar.core.conversation import (
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
from sidecar.providers.formats.chat import ChatReply, compact_json
from sidecar.providers.formats.fields import (
    number_field,
    object_list,
    one_of,
    positive_budget,
    schema_text,
    shown,
    text_field,
)
from sidecar.providers.formats.gemini.upstream import API_PATH, CALL_ID_PREFIX, signed_parts
from sidecar.providers.formats.gemini.vocab import (
    API_KEY_HEADER,
    BLOCKED,
    FINISH,
    FINISH_NAMES,
    PDF,
    RAW_ARGUMENTS,
    STATUS_CODES,
    STATUS_NAMES,
    args_of,
)
from sidecar.providers.formats.protocol import Ask, ParamNames, ReplyHead, Sse
from sidecar.providers.formats.routes import model_route

__all__ = ["GeminiFront", "GeminiWriter", "finish_reason", "parse_request"]

_KEYS = frozenset({"model", "stream", "contents", "systemInstruction", "tools", "toolConfig", "generationConfig"})
_GENERATION = frozenset(
    {
        "maxOutputTokens",
        "temperature",
        "topP",
        "topK",
        "stopSequences",
        "seed",
        "presencePenalty",
        "frequencyPenalty",
        "responseMimeType",
        "responseJsonSchema",
        "thinkingConfig",
    }
)
_PART_KEYS = frozenset({"text", "thought", "thoughtSignature", "inlineData", "fileData", "functionCall",
                        "functionResponse"})  # fmt: skip
_MODES = {"AUTO": "auto", "NONE": "none", "ANY": "required"}
_NO_DOOR: ParamNames = {}
"""No door serves the format (only its fake speaks it): no parameter is renamed (``ParamNames``)."""
_ANSWERS: Mapping[str, str] = {
    "invalid_value": "INVALID_ARGUMENT",
    "context_length_exceeded": "INVALID_ARGUMENT",
    "content_policy_violation": "INVALID_ARGUMENT",
    "output_truncated": "INVALID_ARGUMENT",
    "permission_denied": "PERMISSION_DENIED",
    "model_not_found": "NOT_FOUND",
    "resource_not_found": "NOT_FOUND",
    "insufficient_quota": "RESOURCE_EXHAUSTED",
    "spend_cap_exceeded": "RESOURCE_EXHAUSTED",
    "rate_limit_exceeded": "RESOURCE_EXHAUSTED",
    "overloaded": "UNAVAILABLE",
    "deadline_exceeded": "DEADLINE_EXCEEDED",
}
"""``error.status`` of a sidecar failure by its code (its HTTP status: ``STATUS_CODES``); other codes by status."""


class GeminiFront:
    """The Gemini format as a provider speaks it (the module's tables)."""

    path = "/v1beta/models"
    """The prefix of every model's routes (``{path}/{model}:generateContent``)."""
    words = "a Gemini-compatible"
    id_prefix = ""
    params = _NO_DOOR

    def routed(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """``body`` with the model and the streaming the URL ``path`` names; None for a path that is not a
        generateContent one."""
        found = model_route(path, API_PATH, ":", ("generateContent", "streamGenerateContent"))
        return None if found is None else {**body, "model": found[0], "stream": found[1]}

    def parse(self, body: dict[str, Any]) -> Ask:
        request = parse_request(camel(body))
        positive_budget(request, "generationConfig.maxOutputTokens")
        return Ask(request, body.get("stream") is True)

    def render(self, reply: ChatReply, head: ReplyHead, extension: Mapping[str, Any] | None = None) -> dict[str, Any]:
        candidate: dict[str, Any] = {}
        parts = [] if reply.refusal is not None else _reply_parts(reply)
        if parts:
            candidate["content"] = {"role": "model", "parts": parts}
        candidate["finishReason"] = finish_reason(reply)
        if reply.refusal is not None:
            candidate["finishMessage"] = reply.refusal
        candidate["index"] = 0
        out: dict[str, Any] = {
            "candidates": [candidate],
            "usageMetadata": usage_metadata(reply),
            "modelVersion": head.model,
            "responseId": head.reply_id,
        }
        if extension is not None:
            out["sidecar"] = dict(extension)
        return out

    def writer(self, head: ReplyHead, *, include_usage: bool = False) -> GeminiWriter:
        return GeminiWriter(head)

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
        error: dict[str, Any] = {"code": STATUS_CODES.get(error_type, 500), "message": message, "status": error_type}
        if extension is not None:
            error["sidecar"] = dict(extension)
        return {"error": error}

    def answer(self, code: str, status: int) -> tuple[int, str]:
        state = _ANSWERS.get(code) or self.error_type(status)
        return STATUS_CODES.get(state, status), state

    def error_type(self, status: int) -> str:
        return STATUS_NAMES.get(status, "UNAVAILABLE" if status >= 500 else "INVALID_ARGUMENT")

    def api_key(self, headers: Mapping[str, str]) -> str:
        return headers.get(API_KEY_HEADER, "")


def finish_reason(reply: ChatReply) -> str:
    """The reply's ``finishReason``: its own when it is Gemini's, else by the core's finish."""
    if reply.refusal is not None or reply.finish is FinishReason.CONTENT_FILTER:
        return reply.raw_finish if reply.raw_finish in BLOCKED else "SAFETY"
    if FINISH.get(reply.raw_finish) is reply.finish:
        return reply.raw_finish
    return FINISH_NAMES.get(reply.finish, "STOP")


def usage_metadata(reply: ChatReply) -> dict[str, int]:
    """Gemini's usage: candidates without the thoughts (the core's output tokens count them)."""
    usage = {
        "promptTokenCount": reply.input_tokens,
        "candidatesTokenCount": max(reply.output_tokens - reply.reasoning_tokens, 0),
        "totalTokenCount": reply.input_tokens + reply.output_tokens,
    }
    if reply.cache_read_input_tokens:
        usage["cachedContentTokenCount"] = reply.cache_read_input_tokens
    if reply.reasoning_tokens:
        usage["thoughtsTokenCount"] = reply.reasoning_tokens
    return usage


def _reply_parts(reply: ChatReply) -> list[dict[str, Any]]:
    message = Message(Role.ASSISTANT, reply.text, tuple(reply.tool_calls), reasoning=tuple(reply.reasoning))
    parts = signed_parts(message)
    return [] if parts == [{"text": ""}] else parts


class GeminiWriter:
    """One streamed reply as chunks (the module's table)."""

    def __init__(self, head: ReplyHead) -> None:
        self._head = head
        self._call: list[str] | None = None
        """The function call being streamed: id, name, its argument fragments."""
        self._signature = ""
        """A signature waiting for the next part."""

    def _chunk(self, part: dict[str, Any] | None, **candidate: Any) -> Sse:
        body: dict[str, Any] = {}
        if part is not None:
            if self._signature and not part.get("thought"):
                part["thoughtSignature"], self._signature = self._signature, ""
            body["content"] = {"role": "model", "parts": [part]}
        body.update(candidate)
        body["index"] = 0
        return ("", {"candidates": [body], "modelVersion": self._head.model, "responseId": self._head.reply_id})

    def _flush(self) -> list[Sse]:
        if self._call is None:
            return []
        call_id, name, *fragments = self._call
        self._call = None
        call: dict[str, Any] = {"name": name, "args": args_of("".join(fragments))}
        if call_id and not call_id.startswith(CALL_ID_PREFIX):
            call = {"id": call_id, **call}
        return [self._chunk({"functionCall": call})]

    def start(self, input_tokens: int = 0) -> list[Sse]:
        return []

    def delta(self, delta: Delta) -> list[Sse]:
        if isinstance(delta, TextDelta):
            return [*self._flush(), self._chunk({"text": delta.text})]
        if isinstance(delta, ReasoningDelta):
            return [*self._flush(), *self._reasoning(delta)]
        if delta.id or delta.name:
            out = self._flush()
            self._call = [delta.id, delta.name, delta.arguments_fragment]
            return out
        if self._call is not None:
            self._call.append(delta.arguments_fragment)
        return []

    def _reasoning(self, delta: ReasoningDelta) -> list[Sse]:
        if delta.redacted_data:
            return [self._chunk({"text": "", "thought": True, "thoughtSignature": delta.redacted_data})]
        out: list[Sse] = []
        if delta.text:
            out.append(self._chunk({"text": delta.text, "thought": True}))
        if delta.signature and out:
            out[-1][1]["candidates"][0]["content"]["parts"][0]["thoughtSignature"] = delta.signature  # type: ignore[index]
        elif delta.signature:
            self._signature = delta.signature
        return out

    def refusal(self, text: str) -> list[Sse]:
        return [*self._flush(), self._chunk({"text": text})]

    def restarted(self, words: Mapping[str, Any]) -> list[Sse]:
        self._call, self._signature = None, ""
        return [("", {"sidecar_restart": dict(words)})]

    def final(self, reply: ChatReply, extension: Mapping[str, Any] | None = None) -> list[Sse]:
        out = self._flush()
        part = {"text": ""} if self._signature else None
        candidate: dict[str, Any] = {"finishReason": finish_reason(reply)}
        if reply.refusal is not None:
            candidate["finishMessage"] = reply.refusal
        name, last = self._chunk(part, **candidate)
        assert isinstance(last, dict)
        last["usageMetadata"] = usage_metadata(reply)
        if extension is not None:
            last["sidecar"] = dict(extension)
        return [*out, (name, last)]

    def error(self, body: dict[str, Any]) -> list[Sse]:
        return [("", body)]


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


_OPAQUE = frozenset({"parametersJsonSchema", "responseJsonSchema", "args", "response"})
"""Keys whose values are the caller's own JSON (a schema, arguments, a result), never renamed."""


def _camel_key(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def camel(value: Any, where: str = "") -> Any:
    """A request with each key in lowerCamelCase, as Google's JSON reads ``snake_case`` names too (the SDK sends
    ``thinking_budget``, ``parameters_json_schema`` ...); what ``_OPAQUE`` keys hold is left as sent."""
    if isinstance(value, list):
        return [camel(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = _camel_key(key) if isinstance(key, str) else key
        at = f"{where}.{name}" if where else name
        if name in out:
            raise InvalidInput(at, shown(item), f"is given twice ({key} and {name})")
        out[name] = item if name in _OPAQUE else camel(item, at)
    return out


def parse_request(body: Mapping[str, Any]) -> ModelRequest:
    """A generateContent request (``routed``) as the core's ModelRequest (the module's table)."""
    _refuse_unknown(body, _KEYS, "")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidInput("model", shown(model), "must be the model's name (in the URL)")
    system = _system(body.get("systemInstruction"))
    messages: list[Message] = []
    names: dict[str, str] = {}
    for i, content in enumerate(object_list(body, "contents", required=True)):
        where = f"contents[{i}]"
        _refuse_unknown(content, frozenset({"role", "parts"}), where)
        parts = object_list(content, "parts", required=True, at=where)
        role = text_field(content, "role", f"{where}.role") or "user"
        if role == "model":
            messages.append(_model(parts, f"{where}.parts", names, i))
        elif role == "user":
            messages.extend(_user(parts, f"{where}.parts", names))
        else:
            raise InvalidInput(f"{where}.role", shown(role), "must be user or model")
    generation = _object(body, "generationConfig", "generationConfig")
    _refuse_unknown(generation, _GENERATION, "generationConfig")
    return ModelRequest(
        model=model,
        messages=tuple(messages),
        system=system,
        tools=_tools(body),
        response_schema_json=_schema(generation),
        max_output_tokens=number_field(generation, "maxOutputTokens", int, at="generationConfig"),
        temperature=number_field(generation, "temperature", float, at="generationConfig"),
        controls=_controls(body, generation),
    )


def _system(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, dict):
        raise InvalidInput("systemInstruction", shown(value), "must be a content object")
    _refuse_unknown(value, frozenset({"role", "parts"}), "systemInstruction")
    texts = []
    for j, part in enumerate(object_list(value, "parts", required=True, at="systemInstruction")):
        _refuse_unknown(part, frozenset({"text"}), f"systemInstruction.parts[{j}]")
        texts.append(_string(part, "text", f"systemInstruction.parts[{j}]"))
    return "".join(texts)


def _tools(body: Mapping[str, Any]) -> tuple[ToolDefinition, ...]:
    out = []
    for i, tool in enumerate(object_list(body, "tools")):
        _refuse_unknown(tool, frozenset({"functionDeclarations"}), f"tools[{i}]")
        for j, d in enumerate(object_list(tool, "functionDeclarations", at=f"tools[{i}]")):
            where = f"tools[{i}].functionDeclarations[{j}]"
            _refuse_unknown(d, frozenset({"name", "description", "parametersJsonSchema"}), where)
            schema = d.get("parametersJsonSchema")
            parameters = "" if schema is None else schema_text(schema, f"{where}.parametersJsonSchema")
            description = text_field(d, "description", f"{where}.description")
            out.append(ToolDefinition(_string(d, "name", where), description, parameters))
    return tuple(out)


def _schema(generation: Mapping[str, Any]) -> str:
    mime = generation.get("responseMimeType")
    schema = generation.get("responseJsonSchema")
    if mime not in (None, "text/plain", "application/json"):
        raise InvalidInput("generationConfig.responseMimeType", shown(mime), "must be text/plain or application/json")
    if schema is None:
        if mime == "application/json":
            return compact_json({"type": "object"})
        return ""
    if mime != "application/json":
        raise InvalidInput("generationConfig.responseJsonSchema", "", "goes with responseMimeType application/json")
    return schema_text(schema, "generationConfig.responseJsonSchema")


def _controls(body: Mapping[str, Any], generation: Mapping[str, Any]) -> Controls:
    stop = generation.get("stopSequences")
    if stop is not None and (not isinstance(stop, list) or not all(isinstance(s, str) for s in stop)):
        raise InvalidInput("generationConfig.stopSequences", shown(stop), "must be a list of strings")
    return Controls(
        reasoning=_reasoning(generation.get("thinkingConfig")),
        tool_choice=_tool_choice(body.get("toolConfig")),
        stop=tuple(stop or ()),
        top_p=number_field(generation, "topP", float, at="generationConfig"),
        top_k=number_field(generation, "topK", int, at="generationConfig"),
        seed=number_field(generation, "seed", int, at="generationConfig"),
        presence_penalty=number_field(generation, "presencePenalty", float, at="generationConfig"),
        frequency_penalty=number_field(generation, "frequencyPenalty", float, at="generationConfig"),
    )


def _tool_choice(value: Any) -> ToolChoice | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidInput("toolConfig", shown(value), "must be an object")
    _refuse_unknown(value, frozenset({"functionCallingConfig"}), "toolConfig")
    config = _object(value, "functionCallingConfig", "toolConfig.functionCallingConfig")
    where = "toolConfig.functionCallingConfig"
    _refuse_unknown(config, frozenset({"mode", "allowedFunctionNames"}), where)
    mode = one_of(config.get("mode"), _MODES, f"{where}.mode", "must be AUTO, ANY or NONE")
    names = config.get("allowedFunctionNames")
    if names is None:
        return ToolChoice(_MODES[mode])
    if mode != "ANY" or not isinstance(names, list) or len(names) != 1 or not isinstance(names[0], str):
        rule = "the sidecar forces one tool: mode ANY with one name (or no allowedFunctionNames)"
        raise InvalidInput(f"{where}.allowedFunctionNames", shown(names), rule)
    return ToolChoice("tool", names[0])


def _reasoning(value: Any) -> Reasoning | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidInput("generationConfig.thinkingConfig", shown(value), "must be an object")
    where = "generationConfig.thinkingConfig"
    _refuse_unknown(value, frozenset({"thinkingBudget", "thinkingLevel", "includeThoughts"}), where)
    budget = number_field(value, "thinkingBudget", int, at=where)
    level = value.get("thinkingLevel")
    if budget is not None:
        return Reasoning(budget_tokens=budget)
    if isinstance(level, str) and level.lower() in ("minimal", "low", "medium", "high"):
        return Reasoning(effort=level.lower())
    if level is not None:
        raise InvalidInput(f"{where}.thinkingLevel", shown(level), "must be MINIMAL, LOW, MEDIUM or HIGH")
    return None


def _data(blob: Mapping[str, Any], where: str) -> bytes:
    text = _string(blob, "data", where)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(f"{where}.data", text[:40], "must be base64 text") from None


def _content(part: Mapping[str, Any], where: str) -> Part:
    """A text, inlineData or fileData part as the core's."""
    if "text" in part:
        _refuse_unknown(part, frozenset({"text"}), where)
        return TextPart(_string(part, "text", where))
    if "inlineData" in part:
        _refuse_unknown(part, frozenset({"inlineData"}), where)
        blob = _object(part, "inlineData", f"{where}.inlineData")
        _refuse_unknown(blob, frozenset({"mimeType", "data"}), f"{where}.inlineData")
        mime = _string(blob, "mimeType", f"{where}.inlineData")
        data = _data(blob, f"{where}.inlineData")
        if mime == PDF:
            return DocumentPart(PDF, data)
        if mime.startswith("image/"):
            return ImagePart(mime, data)
        raise InvalidInput(f"{where}.inlineData.mimeType", mime, "must be an image's media type or application/pdf")
    if "fileData" in part:
        _refuse_unknown(part, frozenset({"fileData"}), where)
        file = _object(part, "fileData", f"{where}.fileData")
        _refuse_unknown(file, frozenset({"mimeType", "fileUri"}), f"{where}.fileData")
        uri = _string(file, "fileUri", f"{where}.fileData")
        mime = text_field(file, "mimeType", f"{where}.fileData.mimeType")
        if mime == PDF:
            return DocumentPart(url=uri)
        if isinstance(mime, str) and mime.startswith("image/"):
            return ImagePart(url=uri)
        raise InvalidInput(
            f"{where}.fileData.mimeType", shown(mime), "must be an image's media type or application/pdf"
        )
    raise InvalidInput(where, shown(sorted(part)), "must be a text, inlineData or fileData part")


def _message_of(role: Role, parts: list[Part]) -> Message:
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return Message(role, parts[0].text)
    if not parts:
        return Message(role, "")
    return Message(role, parts=tuple(parts))


def _user(parts: list[dict[str, Any]], where: str, names: dict[str, str]) -> list[Message]:
    results: list[ToolCallResult] = []
    content: list[Part] = []
    for j, part in enumerate(parts):
        at = f"{where}[{j}]"
        _refuse_unknown(part, _PART_KEYS - {"thought", "thoughtSignature", "functionCall"}, at)
        if part.get("functionResponse") is not None:
            results.append(_result(part, at, names, len(results)))
        else:
            content.append(_content(part, at))
    out = []
    if results:
        out.append(Message(Role.TOOL, tool_results=tuple(results)))
    if content and not (results and content == [TextPart("")]):
        out.append(_message_of(Role.USER, content))
    return out or [Message(Role.USER, "")]


def _result(part: Mapping[str, Any], where: str, names: dict[str, str], n: int) -> ToolCallResult:
    if len([k for k, v in part.items() if v is not None]) > 1:  # a response and a text: the part is wrong
        raise InvalidInput(where, shown(sorted(part)), "must be a part of exactly one kind")
    reply = _object(part, "functionResponse", f"{where}.functionResponse")
    at = f"{where}.functionResponse"
    _refuse_unknown(reply, frozenset({"id", "name", "response"}), at)
    name = _string(reply, "name", at)
    call_id = reply.get("id")
    if call_id is None:
        call_id = next((i for i, known in names.items() if known == name and i.startswith(CALL_ID_PREFIX)), "")
    if not isinstance(call_id, str):
        raise InvalidInput(f"{at}.id", shown(call_id), "must be a string")
    response = _object(reply, "response", f"{at}.response")
    if list(response) in (["output"], ["error"]) and isinstance(next(iter(response.values())), str):
        key = next(iter(response))
        return ToolCallResult(call_id, str(response[key]), key == "error", name)
    return ToolCallResult(call_id, compact_json(response), "error" in response, name)


def _arguments(value: Any, where: str) -> str:
    """A request's functionCall ``args`` as arguments JSON (the RAW_ARGUMENTS form: the text as written)."""
    if value is None:
        return "{}"
    if not isinstance(value, dict):
        raise InvalidInput(where, shown(value), "must be a JSON object")
    if list(value) == [RAW_ARGUMENTS] and isinstance(value[RAW_ARGUMENTS], str):
        return str(value[RAW_ARGUMENTS])
    return compact_json(value)


def _model(parts: list[dict[str, Any]], where: str, names: dict[str, str], turn: int) -> Message:
    reasoning: list[ReasoningPart] = []
    content: list[Part] = []
    calls: list[ToolCall] = []
    for j, part in enumerate(parts):
        at = f"{where}[{j}]"
        _refuse_unknown(part, _PART_KEYS - {"functionResponse"}, at)
        signature = part.get("thoughtSignature")
        if signature is not None and not isinstance(signature, str):
            raise InvalidInput(f"{at}.thoughtSignature", shown(signature), "must be base64 text")
        if part.get("thought") is True:
            text = _string(part, "text", at)
            if text:
                reasoning.append(ReasoningPart(text, signature or ""))
            else:
                reasoning.append(ReasoningPart(redacted_data=signature or ""))
            continue
        if signature:
            reasoning.append(ReasoningPart(signature=signature))
        rest = {k: v for k, v in part.items() if k not in ("thought", "thoughtSignature")}
        if "functionCall" in rest:
            _refuse_unknown(rest, frozenset({"functionCall"}), at)
            call = _object(rest, "functionCall", f"{at}.functionCall")
            _refuse_unknown(call, frozenset({"id", "name", "args"}), f"{at}.functionCall")
            name = _string(call, "name", f"{at}.functionCall")
            call_id = text_field(call, "id", f"{at}.functionCall.id") or f"{CALL_ID_PREFIX}{turn}_{len(calls)}"
            names[call_id] = name
            calls.append(ToolCall(call_id, name, _arguments(call.get("args"), f"{at}.functionCall.args")))
        else:
            part_read = _content(rest, at)
            if not isinstance(part_read, TextPart):
                raise InvalidInput(at, type(part_read).__name__, "a model turn carries text parts only")
            content.append(part_read)
    if calls and content == [TextPart("")]:
        content = []
    message = _message_of(Role.ASSISTANT, content)
    return Message(Role.ASSISTANT, message.text, tuple(calls), parts=message.parts, reasoning=tuple(reasoning))
