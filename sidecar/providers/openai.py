"""The OpenAI Chat Completions wire format (also vLLM, Ollama and the compatible servers).

``OpenAIAdapter.body`` renders a request, ``parse_request`` reads one back (its inverse)::

    core (ModelRequest / ChatRequest)           OpenAI body
    system                                      {"role": "system"} first ("developer" read as system too)
    Message(USER, text)                         {"role": "user", "content": text}
    Message(ASSISTANT, text, tool_calls)        {"role": "assistant", "content": text or null, "tool_calls": [...]}
    Message(TOOL, tool_results)                 one {"role": "tool", "tool_call_id", "content"} per result; a
                                                result with is_error has TOOL_ERROR_PREFIX before its content
                                                (the wire has no flag); its name is the call's, by id
    tools                                       [{"type": "function", "function": {name, description, parameters}}]
    response schema                             response_format {"type": "json_schema", "json_schema": {schema}}
                                                ({"type": "json_object"} reads as {"type": "object"})
    max_tokens, temperature                     max_tokens (max_completion_tokens read too), temperature

What ``parse_request`` cannot carry is INVALID_INPUT naming the field (content other than text);
other request keys (stream, tool_choice, n ...) are the front's business and ignored here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sidecar.core.conversation import Message, ModelRequest, ToolCall, ToolCallResult, ToolDefinition
from sidecar.core.kinds import FinishReason, Role
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.tool_shapes import render_tool
from sidecar.providers.wire import (
    ChatReply,
    ChatRequest,
    compact_json,
    number_field,
    object_list,
    schema_text,
    shown,
)

__all__ = ["TOOL_ERROR_PREFIX", "OpenAIAdapter", "parse_request"]

TOOL_ERROR_PREFIX = "[tool error] "
"""Before the content of a tool result that is an error: the OpenAI wire has no is_error flag."""

_FINISH = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,
    "content_filter": FinishReason.CONTENT_FILTER,
}


class OpenAIAdapter:
    wire = "openai"

    def path(self) -> str:
        return "/chat/completions"

    def headers(self, api_key: str | None) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    def body(self, request: ChatRequest) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        for m in request.messages:
            messages.extend(_message(m))
        body: dict[str, Any] = {
            "model": request.upstream_model,
            "messages": messages,
            "max_tokens": request.max_tokens,
        }
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.tools:
            body["tools"] = [
                render_tool(
                    "openai", t.name, t.description, json.loads(t.parameters_json) if t.parameters_json else None
                )
                for t in request.tools
            ]
        if request.response_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": request.response_schema, "strict": False},
            }
        return body

    def parse(self, body: dict[str, Any]) -> ChatReply:
        choice = (body.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        raw_finish = str(choice.get("finish_reason") or "")
        calls = [
            ToolCall(
                id=str(c.get("id", "")),
                name=str((c.get("function") or {}).get("name", "")),
                arguments_json=str((c.get("function") or {}).get("arguments") or "{}"),
            )
            for c in message.get("tool_calls") or []
        ]
        usage = body.get("usage") or {}
        content = message.get("content") or ""
        if not isinstance(content, str):
            raise ValueError("the reply's content is not text")
        return ChatReply(
            text=content,
            tool_calls=calls,
            finish=_FINISH.get(raw_finish, FinishReason.UNSPECIFIED),
            raw_finish=raw_finish,
            refusal=message.get("refusal") or None,
            input_tokens=int(usage.get("prompt_tokens") or 0),
            output_tokens=int(usage.get("completion_tokens") or 0),
            response_model=str(body.get("model") or ""),
            response_id=str(body.get("id") or ""),
        )


def _message(m: Message) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if m.role == Role.ASSISTANT:
        msg: dict[str, Any] = {"role": "assistant", "content": m.text or None}
        if m.tool_calls:
            msg["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json or "{}"}}
                for c in m.tool_calls
            ]
        return [msg]
    for r in m.tool_results:
        content = TOOL_ERROR_PREFIX + r.content if r.is_error else r.content
        out.append({"role": "tool", "tool_call_id": r.call_id, "content": content})
    if m.text or not m.tool_results:
        out.append({"role": "user", "content": m.text})
    return out


# ---------------------------------------------------------------------------- requests read back


def parse_request(body: Mapping[str, Any]) -> ModelRequest:
    """An OpenAI Chat Completions request as the core's ModelRequest (the module's table)."""
    model = body.get("model")
    if not isinstance(model, str):
        raise InvalidInput("model", shown(model), "must be the model's name (a string)")
    system: list[str] = []
    messages: list[Message] = []
    results: list[ToolCallResult] = []
    names: dict[str, str] = {}
    for i, m in enumerate(object_list(body, "messages", required=True)):
        role = m.get("role")
        where = f"messages[{i}]"
        if role != "tool" and results:
            messages.append(Message(Role.TOOL, tool_results=tuple(results)))
            results = []
        if role in ("system", "developer"):
            system.append(_text(m.get("content"), f"{where}.content"))
        elif role == "user":
            messages.append(Message(Role.USER, _text(m.get("content"), f"{where}.content")))
        elif role == "assistant":
            calls = tuple(_call(c, f"{where}.tool_calls[{j}]") for j, c in enumerate(object_list(m, "tool_calls")))
            names.update((c.id, c.name) for c in calls)
            messages.append(Message(Role.ASSISTANT, _text(m.get("content"), f"{where}.content"), calls))
        elif role == "tool":
            content = _text(m.get("content"), f"{where}.content")
            error = content.startswith(TOOL_ERROR_PREFIX)
            call_id = str(m.get("tool_call_id") or "")
            content = content.removeprefix(TOOL_ERROR_PREFIX) if error else content
            results.append(ToolCallResult(call_id, content, error, names.get(call_id, "")))
        else:
            raise InvalidInput(f"{where}.role", shown(role), "must be system, developer, user, assistant or tool")
    if results:
        messages.append(Message(Role.TOOL, tool_results=tuple(results)))
    max_tokens = number_field(body, "max_tokens", int)
    if max_tokens is None:
        max_tokens = number_field(body, "max_completion_tokens", int)
    return ModelRequest(
        model=model,
        messages=tuple(messages),
        system="\n\n".join(system),
        tools=tuple(_tool(t, f"tools[{i}]") for i, t in enumerate(object_list(body, "tools"))),
        response_schema_json=_response_schema(body.get("response_format")),
        max_output_tokens=max_tokens,
        temperature=number_field(body, "temperature", float),
    )


def _text(content: Any, where: str) -> str:
    """A message's content: a string, null, or a list of text parts (joined)."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise InvalidInput(where, shown(content), "must be a string or a list of text parts")
    parts = []
    for j, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
            kind = part.get("type") if isinstance(part, dict) else part
            raise InvalidInput(f"{where}[{j}]", shown(kind), "must be a text part (the sidecar carries text only)")
        parts.append(part["text"])
    return "".join(parts)


def _call(c: dict[str, Any], where: str) -> ToolCall:
    function = c.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise InvalidInput(f"{where}.function", shown(function), "must name the function called")
    arguments = function.get("arguments")
    text = arguments if isinstance(arguments, str) else compact_json(arguments if arguments is not None else {})
    return ToolCall(str(c.get("id") or ""), function["name"], text)


def _tool(t: dict[str, Any], where: str) -> ToolDefinition:
    function = t.get("function")
    if t.get("type", "function") != "function" or not isinstance(function, dict):
        raise InvalidInput(where, shown(t.get("type")), 'must be {"type": "function", "function": {...}}')
    name = function.get("name")
    if not isinstance(name, str):
        raise InvalidInput(f"{where}.function.name", shown(name), "must be the tool's name")
    parameters = function.get("parameters")
    params = "" if parameters is None else schema_text(parameters, f"{where}.function.parameters")
    return ToolDefinition(name, str(function.get("description") or ""), params)


def _response_schema(fmt: Any) -> str:
    if fmt is None:
        return ""
    if not isinstance(fmt, dict):
        raise InvalidInput("response_format", shown(fmt), "must be an object")
    kind = fmt.get("type")
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        return schema_text(schema, "response_format.json_schema.schema")
    if kind == "json_object":
        return compact_json({"type": "object"})
    if kind in (None, "text"):
        return ""
    raise InvalidInput("response_format.type", shown(kind), "must be text, json_object or json_schema")
