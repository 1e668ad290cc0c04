"""A generateContent request read into the core's ModelRequest (``front.GeminiFront.parse``).

``parse_request`` is the inverse of ``upstream.GeminiUpstream.body`` (its table). Keys are read in
lowerCamelCase or snake_case, as Google's JSON reads both (``camel``: the SDK sends ``thinking_budget``,
``parameters_json_schema``); the body is then checked once against ``shapes.Request``, a wrong value or
a key it does not declare named by its path, as the caller wrote it (``as_written``). Beyond the inverse::

    a user content          its functionResponse parts a tool message (response {"output" | "error": text}:
                            that text, is_error; another object: its JSON), its other parts a user message
    allowedFunctionNames    mode ANY with one name: that tool
    thinkingConfig          includeThoughts read and implied; thinkingLevel in any case

What the types cannot say is checked by hand, each named by its path: a part is of one kind; a user
turn has no thought and no functionCall, a model turn no functionResponse and no media; inlineData is
base64 of an image or a PDF; topK is a whole number; a response schema goes with responseMimeType
application/json; one forced tool.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
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
from sidecar.core.details import InvalidInputDetail
from sidecar.core.kinds import Role
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.formats.arguments import arguments_text
from sidecar.providers.formats.carried import refuse_unknown
from sidecar.providers.formats.chat import compact_json, message_of
from sidecar.providers.formats.fields import shown
from sidecar.providers.formats.gemini import shapes
from sidecar.providers.formats.gemini.shapes import REQUEST, Request
from sidecar.providers.formats.gemini.upstream import LEVELS
from sidecar.providers.formats.gemini.vocab import CALL_ID_PREFIX, PDF
from sidecar.providers.formats.inline import base64_field
from sidecar.providers.formats.shapes import declared

__all__ = ["as_written", "camel", "parse_request"]

_MODES = {"AUTO": "auto", "NONE": "none", "ANY": "required"}
_KINDS = ("text", "inlineData", "fileData", "functionCall", "functionResponse")
"""What a part holds, one of (``thought`` and ``thoughtSignature`` go with a model turn's text or call)."""
_USER_PART = declared(shapes.Part) - {"thought", "thoughtSignature", "functionCall"}
_MODEL_PART = declared(shapes.Part) - {"functionResponse"}
_STEP = re.compile(r"\[(\d+)\]|\.?([^.\[]+)")
"""One step of a path: ``[2]`` or a key."""
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


def as_written(refused: InvalidInput, body: Any) -> InvalidInput:
    """``refused`` naming its path with the keys as the caller wrote them in ``body`` (``camel`` renamed them)."""
    detail = refused.detail
    assert isinstance(detail, InvalidInputDetail)
    path, node = "", body
    for index, step in _STEP.findall(detail.parameter):
        if index:
            path += f"[{index}]"
            node = node[int(index)] if isinstance(node, list) and int(index) < len(node) else None
            continue
        keys = [k for k in node if isinstance(k, str) and _camel_key(k) == step] if isinstance(node, dict) else []
        key = keys[0] if keys else step
        node = node.get(key) if isinstance(node, dict) else None
        path += f".{key}" if path else key
    if path == detail.parameter:
        return refused
    return InvalidInput(path, detail.value, detail.rule, as_sent=True)


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
    data = b"" if blob is None else base64_field(blob["data"], f"{at}.inlineData.data")
    if media != PDF and not media.startswith("image/"):
        raise InvalidInput(f"{at}.{kind}.mimeType", media, "must be an image's media type or application/pdf")
    if blob is None:
        return DocumentPart(url=file["fileUri"]) if media == PDF else ImagePart(url=file["fileUri"])
    return DocumentPart(PDF, data) if media == PDF else ImagePart(media, data)


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
        out.append(message_of(Role.USER, content))
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
            calls.append(ToolCall(call_id, call["name"], arguments_text(call.get("args"))))
        elif text is not None:
            content.append(TextPart(text))
        else:
            raise InvalidInput(at, kind, "a model turn carries text parts only")
    if calls and content == [TextPart("")]:
        content = []
    message = message_of(Role.ASSISTANT, content)
    return Message(Role.ASSISTANT, message.text, tuple(calls), parts=message.parts, reasoning=tuple(reasoning))
