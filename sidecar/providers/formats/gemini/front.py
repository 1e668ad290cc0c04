"""The Gemini front: a generateContent request read, the answer rendered (whole, streamed, failed).

The sidecar has no Gemini door yet; this half is what the fake provider speaks (``fakes/_gemini.py``)
and what ``tests/unit/test_formats.py`` reads the upstream's bodies back with. A request names its
model and whether it streams in its URL, not its body: ``routed(path, body)`` puts them in the body
as ``model`` and ``stream`` (the keys ``parse`` reads them from), for a path of ``upstream.generate_path``.

``GeminiFront.parse`` reads a request into the core's: the inverse of ``upstream.GeminiUpstream.body``
(its table). Keys are read in lowerCamelCase or snake_case, as Google's JSON reads both (``camel``: the
SDK sends ``thinking_budget``); the body is then checked once against ``shapes.Request``, a wrong value or
a key it does not declare named by its path. Beyond the inverse::

    a user content          its functionResponse parts a tool message (response {"output" | "error": text}:
                            that text, is_error; another object: its JSON), its other parts a user message
    allowedFunctionNames    mode ANY with one name: that tool
    thinkingConfig          includeThoughts read and implied; thinkingLevel in any case

What the types cannot say is checked by hand, each named by its path: a part is of one kind; a user
turn has no thought and no functionCall, a model turn no functionResponse and no media; inlineData is
base64 of an image or a PDF; a response schema goes with responseMimeType application/json; one
forced tool. ``render``, ``writer`` and ``error_body`` answer in the format (``shapes.Response``)::

    ChatReply               one candidate: content {"role": "model", "parts"}, finishReason, index 0,
      reasoning, text,      usageMetadata, modelVersion, responseId; thought parts, a text part,
      tool calls            functionCall parts (``vocab.signed_parts``)
      a refusal             no content; finishReason the reply's block reason (else SAFETY),
                            finishMessage its words
    a stream                one chunk for each delta (a function call whole, when its arguments end),
                            the last with the finishReason and usageMetadata; a signature that is not
                            a thought's rides on the next part
    a failure               {"error": {"code", "message", "status"}}; in a stream the same as a chunk
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping
from typing import Any, cast

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
from sidecar.providers.formats.carried import refuse_unknown
from sidecar.providers.formats.chat import ChatReply, compact_json
from sidecar.providers.formats.fields import positive_budget, shown
from sidecar.providers.formats.gemini import shapes
from sidecar.providers.formats.gemini.shapes import REQUEST, Candidate, Request, Response, UsageMetadata
from sidecar.providers.formats.gemini.upstream import API_PATH, LEVELS
from sidecar.providers.formats.gemini.vocab import (
    API_KEY_HEADER,
    BLOCKED,
    CALL_ID_PREFIX,
    FINISH,
    FINISH_NAMES,
    PDF,
    STATUS_CODES,
    STATUS_NAMES,
    args_of,
    arguments_of,
    signed_parts,
)
from sidecar.providers.formats.protocol import Ask, ParamNames, ReplyHead, Sse
from sidecar.providers.formats.routes import model_route
from sidecar.providers.formats.shapes import declared

__all__ = ["GeminiFront", "GeminiWriter", "finish_reason", "parse_request"]

_MODES = {"AUTO": "auto", "NONE": "none", "ANY": "required"}
_KINDS = ("text", "inlineData", "fileData", "functionCall", "functionResponse")
"""What a part holds, one of (``thought`` and ``thoughtSignature`` go with a model turn's text or call)."""
_USER_PART = declared(shapes.Part) - {"thought", "thoughtSignature", "functionCall"}
_MODEL_PART = declared(shapes.Part) - {"functionResponse"}
_NO_DOOR: ParamNames = {}
"""No door serves the format (only its fake speaks it): no parameter is renamed (``ParamNames``)."""
_ANSWERS: Mapping[str, str] = {
    **dict.fromkeys(("invalid_value", "context_length_exceeded", "content_policy_violation"), "INVALID_ARGUMENT"),
    "output_truncated": "INVALID_ARGUMENT",
    **dict.fromkeys(("insufficient_quota", "spend_cap_exceeded", "rate_limit_exceeded"), "RESOURCE_EXHAUSTED"),
    **dict.fromkeys(("model_not_found", "resource_not_found"), "NOT_FOUND"),
    "permission_denied": "PERMISSION_DENIED",
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
        candidate = _finished(reply)
        parts = [] if reply.refusal is not None else _reply_parts(reply)
        if parts:
            candidate["content"] = {"role": "model", "parts": parts}
        out = _response(head, candidate)
        out["usageMetadata"] = usage_metadata(reply)
        if extension is not None:
            out["sidecar"] = dict(extension)
        return dict(out)

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
        error: shapes.Error = {"code": STATUS_CODES.get(error_type, 500), "message": message, "status": error_type}
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


def usage_metadata(reply: ChatReply) -> UsageMetadata:
    """Gemini's usage: candidates without the thoughts (the core's output tokens count them)."""
    usage: UsageMetadata = {
        "promptTokenCount": reply.input_tokens,
        "candidatesTokenCount": max(reply.output_tokens - reply.reasoning_tokens, 0),
        "totalTokenCount": reply.input_tokens + reply.output_tokens,
    }
    if reply.cache_read_input_tokens:
        usage["cachedContentTokenCount"] = reply.cache_read_input_tokens
    if reply.reasoning_tokens:
        usage["thoughtsTokenCount"] = reply.reasoning_tokens
    return usage


def _finished(reply: ChatReply) -> Candidate:
    candidate: Candidate = {"finishReason": finish_reason(reply), "index": 0}
    if reply.refusal is not None:
        candidate["finishMessage"] = reply.refusal
    return candidate


def _response(head: ReplyHead, candidate: Candidate) -> Response:
    return {"candidates": [candidate], "modelVersion": head.model, "responseId": head.reply_id}


def _reply_parts(reply: ChatReply) -> list[shapes.Part]:
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

    def _chunk(self, part: shapes.Part | None, candidate: Candidate | None = None) -> Response:
        candidate = candidate or {"index": 0}
        if part is not None:
            if self._signature and not part.get("thought"):
                part["thoughtSignature"], self._signature = self._signature, ""
            candidate["content"] = {"role": "model", "parts": [part]}
        return _response(self._head, candidate)

    def _sent(self, part: shapes.Part) -> list[Sse]:
        return [("", dict(self._chunk(part)))]

    def _flush(self) -> list[Sse]:
        if self._call is None:
            return []
        call_id, name, *fragments = self._call
        self._call = None
        call: shapes.FunctionCall = {"name": name, "args": args_of("".join(fragments))}
        if call_id and not call_id.startswith(CALL_ID_PREFIX):
            call = {"id": call_id, **call}
        return self._sent({"functionCall": call})

    def start(self, input_tokens: int = 0) -> list[Sse]:
        return []

    def delta(self, delta: Delta) -> list[Sse]:
        if isinstance(delta, TextDelta):
            return [*self._flush(), *self._sent({"text": delta.text})]
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
            return self._sent({"text": "", "thought": True, "thoughtSignature": delta.redacted_data})
        if not delta.text:  # a signature alone: on the next part that is not a thought
            self._signature = delta.signature or self._signature
            return []
        part: shapes.Part = {"text": delta.text, "thought": True}
        if delta.signature:
            part["thoughtSignature"] = delta.signature
        return self._sent(part)

    def refusal(self, text: str) -> list[Sse]:
        return [*self._flush(), *self._sent({"text": text})]

    def restarted(self, words: Mapping[str, Any]) -> list[Sse]:
        self._call, self._signature = None, ""
        return [("", {"sidecar_restart": dict(words)})]

    def final(self, reply: ChatReply, extension: Mapping[str, Any] | None = None) -> list[Sse]:
        out = self._flush()
        last = self._chunk({"text": ""} if self._signature else None, _finished(reply))
        last["usageMetadata"] = usage_metadata(reply)
        if extension is not None:
            last["sidecar"] = dict(extension)
        return [*out, ("", dict(last))]

    def error(self, body: dict[str, Any]) -> list[Sse]:
        return [("", body)]


# ---------------------------------------------------------------------------- requests read


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


def parse_request(body: dict[str, Any]) -> ModelRequest:
    """A generateContent request (``routed``) as the core's ModelRequest (the module's table)."""
    REQUEST.check(body)
    request = cast(Request, body)
    messages: list[Message] = []
    names: dict[str, str] = {}
    for i, content in enumerate(request["contents"]):
        if content.get("role") == "model":
            messages.append(_model(content["parts"], f"contents[{i}].parts", names, i))
        else:
            messages.extend(_user(content["parts"], f"contents[{i}].parts", names))
    generation: shapes.GenerationConfig = request.get("generationConfig") or {}
    system = request.get("systemInstruction")
    return ModelRequest(
        model=request["model"],
        messages=tuple(messages),
        system="".join(part["text"] for part in system["parts"]) if system else "",
        tools=tuple(_tools(request.get("tools") or [])),
        response_schema_json=_schema(generation),
        max_output_tokens=generation.get("maxOutputTokens"),
        temperature=_float(generation.get("temperature")),
        controls=_controls(request, generation),
    )


def _float(value: float | None) -> float | None:
    """A number as a float (an integer is a number: ``1`` is ``1.0``)."""
    return None if value is None else float(value)


def _tools(tools: list[shapes.Tool]) -> Iterator[ToolDefinition]:
    for tool in tools:
        for d in tool.get("functionDeclarations") or []:
            schema = d.get("parametersJsonSchema")
            yield ToolDefinition(d["name"], d.get("description") or "", "" if schema is None else compact_json(schema))


def _schema(generation: shapes.GenerationConfig) -> str:
    schema = generation.get("responseJsonSchema")
    json_out = generation.get("responseMimeType") == "application/json"
    if schema is not None and not json_out:  # one key that goes with another's value
        raise InvalidInput("generationConfig.responseJsonSchema", "", "goes with responseMimeType application/json")
    if not json_out:
        return ""
    return compact_json({"type": "object"} if schema is None else schema)


def _controls(request: Request, generation: shapes.GenerationConfig) -> Controls:
    return Controls(
        reasoning=_reasoning(generation.get("thinkingConfig")),
        tool_choice=_tool_choice(request.get("toolConfig")),
        stop=tuple(generation.get("stopSequences") or ()),
        top_p=_float(generation.get("topP")),
        top_k=_top_k(generation.get("topK")),
        seed=generation.get("seed"),
        presence_penalty=_float(generation.get("presencePenalty")),
        frequency_penalty=_float(generation.get("frequencyPenalty")),
    )


def _top_k(value: float | None) -> int | None:
    """topK: a whole number, which the SDK types a float (and sends 20 as 20.0)."""
    if value is not None and not float(value).is_integer():
        raise InvalidInput("generationConfig.topK", shown(value), "must be a whole number")
    return None if value is None else int(value)


def _tool_choice(config: shapes.ToolConfig | None) -> ToolChoice | None:
    if config is None:
        return None
    calling = config["functionCallingConfig"]
    names = calling.get("allowedFunctionNames")
    if names is None:
        return ToolChoice(_MODES[calling["mode"]])
    if calling["mode"] != "ANY" or len(names) != 1:  # the core forces one tool
        rule = "the sidecar forces one tool: mode ANY with one name (or no allowedFunctionNames)"
        raise InvalidInput("toolConfig.functionCallingConfig.allowedFunctionNames", shown(names), rule)
    return ToolChoice("tool", names[0])


def _reasoning(config: shapes.ThinkingConfig | None) -> Reasoning | None:
    if config is None:
        return None
    budget, level = config.get("thinkingBudget"), config.get("thinkingLevel")
    if budget is not None:
        return Reasoning(budget_tokens=budget)
    if level is None:
        return None
    if level.lower() not in LEVELS:  # a level in any case
        raise InvalidInput(
            "generationConfig.thinkingConfig.thinkingLevel", level, "must be MINIMAL, LOW, MEDIUM or HIGH"
        )
    return Reasoning(effort=level.lower())


def _kind(part: shapes.Part, known: frozenset[str], at: str) -> str:
    """The one kind of content a part holds (of ``_KINDS``), its other keys among ``known``."""
    refuse_unknown(part, known, at, here=True)
    kinds = [k for k in _KINDS if part.get(k) is not None]
    if len(kinds) != 1:  # exactly one of several keys
        rule = f"must be a part of exactly one kind: {', '.join(k for k in _KINDS if k in known)}"
        raise InvalidInput(at, shown(sorted(part)), rule)
    return kinds[0]


def _content(part: shapes.Part, kind: str, at: str) -> Part:
    """A text, inlineData or fileData part as the core's (an image or a PDF, by its media type)."""
    if kind == "text":
        return TextPart(part.get("text") or "")
    blob = part.get("inlineData")
    file: shapes.FileData = part.get("fileData") or {"fileUri": ""}
    media = (blob or file).get("mimeType") or ""
    data = b"" if blob is None else _data(blob["data"], f"{at}.inlineData.data")
    if media != PDF and not media.startswith("image/"):
        raise InvalidInput(f"{at}.{kind}.mimeType", media, "must be an image's media type or application/pdf")
    if blob is None:
        return DocumentPart(url=file["fileUri"]) if media == PDF else ImagePart(url=file["fileUri"])
    return DocumentPart(PDF, data) if media == PDF else ImagePart(media, data)


def _data(text: str, where: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise InvalidInput(where, text[:40], "must be base64 text") from None


def _message_of(role: Role, parts: list[Part]) -> Message:
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return Message(role, parts[0].text)
    return Message(role, parts=tuple(parts))


def _user(parts: list[shapes.Part], where: str, names: dict[str, str]) -> list[Message]:
    results: list[ToolCallResult] = []
    content: list[Part] = []
    for j, part in enumerate(parts):
        kind = _kind(part, _USER_PART, f"{where}[{j}]")
        reply = part.get("functionResponse")
        if reply is not None:
            results.append(_result(reply, names))
        else:
            content.append(_content(part, kind, f"{where}[{j}]"))
    out = []
    if results:
        out.append(Message(Role.TOOL, tool_results=tuple(results)))
    if content and not (results and content == [TextPart("")]):
        out.append(_message_of(Role.USER, content))
    return out or [Message(Role.USER, "")]


def _result(reply: shapes.FunctionResponse, names: dict[str, str]) -> ToolCallResult:
    name, call_id = reply["name"], reply.get("id")
    if call_id is None:
        call_id = next((i for i, known in names.items() if known == name and i.startswith(CALL_ID_PREFIX)), "")
    response = reply.get("response") or {}
    if list(response) in (["output"], ["error"]) and isinstance(next(iter(response.values())), str):
        key = next(iter(response))
        return ToolCallResult(call_id, str(response[key]), key == "error", name)
    return ToolCallResult(call_id, compact_json(response), "error" in response, name)


def _model(parts: list[shapes.Part], where: str, names: dict[str, str], turn: int) -> Message:
    reasoning: list[ReasoningPart] = []
    content: list[Part] = []
    calls: list[ToolCall] = []
    for j, part in enumerate(parts):
        at = f"{where}[{j}]"
        kind = _kind(part, _MODEL_PART, at)
        signature, text, call = part.get("thoughtSignature") or "", part.get("text"), part.get("functionCall")
        if part.get("thought"):
            if text is None:  # a thought is text
                raise InvalidInput(f"{at}.thought", "true", "goes with a text part")
            reasoning.append(ReasoningPart(text, signature) if text else ReasoningPart(redacted_data=signature))
            continue
        if signature:
            reasoning.append(ReasoningPart(signature=signature))
        if call is not None:
            call_id = call.get("id") or f"{CALL_ID_PREFIX}{turn}_{len(calls)}"
            names[call_id] = call["name"]
            calls.append(ToolCall(call_id, call["name"], arguments_of(call.get("args"))))
        elif text is not None:
            content.append(TextPart(text))
        else:
            raise InvalidInput(at, kind, "a model turn carries text parts only")
    if calls and content == [TextPart("")]:
        content = []
    message = _message_of(Role.ASSISTANT, content)
    return Message(Role.ASSISTANT, message.text, tuple(calls), parts=message.parts, reasoning=tuple(reasoning))
