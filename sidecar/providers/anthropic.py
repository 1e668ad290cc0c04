"""The Anthropic Messages wire format.

``AnthropicAdapter.body`` renders a request, ``parse_request`` reads one back (its inverse)::

    core (ModelRequest / ChatRequest)           Anthropic body
    system                                      "system" (a string; a list of text blocks is read too)
    response schema                             appended to system: "\n\n" JSON_INSTRUCTION "\n" compact schema
                                                (read back from the end of system)
    Message(USER, text)                         {"role": "user", "content": [{"type": "text"}]}
    Message(ASSISTANT, text, tool_calls)        {"role": "assistant", "content": [text, {"type": "tool_use", input}]}
                                                (arguments that are not JSON: input {"_raw": text})
    Message(TOOL, tool_results)                 {"role": "user", "content": [{"type": "tool_result", tool_use_id,
                                                content, is_error}]}; its name is the call's, by id
    consecutive messages of one role            merged into one (the API wants roles to alternate); read back
                                                one message per text block, tool results apart
    tools                                       [{name, description, input_schema}]
    max_tokens, temperature                     max_tokens, temperature

What ``parse_request`` cannot carry is INVALID_INPUT naming the field (blocks other than text,
tool_use and tool_result); other request keys are the front's business and ignored here.
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
    JSON_INSTRUCTION,
    ChatReply,
    ChatRequest,
    compact_json,
    number_field,
    object_list,
    schema_text,
    shown,
)

__all__ = ["RAW_ARGUMENTS", "AnthropicAdapter", "parse_request"]

RAW_ARGUMENTS = "_raw"
"""The one key of a tool_use input that carries arguments that were not JSON, as written."""
_SCHEMA_MARK = f"{JSON_INSTRUCTION}\n"

_FINISH = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "pause_turn": FinishReason.STOP,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "tool_use": FinishReason.TOOL_CALLS,
    "refusal": FinishReason.CONTENT_FILTER,
}


class AnthropicAdapter:
    wire = "anthropic"

    def __init__(self, version: str = "2023-06-01") -> None:
        self._version = version

    def path(self) -> str:
        return "/v1/messages"

    def headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": self._version}
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def body(self, request: ChatRequest) -> dict[str, Any]:
        system = request.system
        if request.response_schema is not None:
            schema = json.dumps(request.response_schema, separators=(",", ":"))
            system = f"{system}\n\n{JSON_INSTRUCTION}\n{schema}".strip()
        messages: list[dict[str, Any]] = []
        for m in request.messages:
            role, blocks = _message(m)
            if messages and messages[-1]["role"] == role:
                messages[-1]["content"].extend(blocks)  # the API wants roles to alternate
            else:
                messages.append({"role": role, "content": blocks})
        body: dict[str, Any] = {
            "model": request.upstream_model,
            "max_tokens": request.max_tokens,
            "messages": messages,
        }
        if system:
            body["system"] = system
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.tools:
            body["tools"] = [
                render_tool(
                    "anthropic", t.name, t.description, json.loads(t.parameters_json) if t.parameters_json else None
                )
                for t in request.tools
            ]
        return body

    def parse(self, body: dict[str, Any]) -> ChatReply:
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in body.get("content") or []:
            if block.get("type") == "text":
                texts.append(str(block.get("text", "")))
            elif block.get("type") == "tool_use":
                calls.append(
                    ToolCall(
                        id=str(block.get("id", "")),
                        name=str(block.get("name", "")),
                        arguments_json=json.dumps(block.get("input") or {}),
                    )
                )
        raw_finish = str(body.get("stop_reason") or "")
        usage = body.get("usage") or {}
        return ChatReply(
            text="".join(texts),
            tool_calls=calls,
            finish=_FINISH.get(raw_finish, FinishReason.UNSPECIFIED),
            raw_finish=raw_finish,
            refusal=("".join(texts) or "the model declined to answer") if raw_finish == "refusal" else None,
            input_tokens=int(usage.get("input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
            response_model=str(body.get("model") or ""),
            response_id=str(body.get("id") or ""),
        )


def _message(m: Message) -> tuple[str, list[dict[str, Any]]]:
    if m.role == Role.ASSISTANT:
        blocks: list[dict[str, Any]] = []
        if m.text:
            blocks.append({"type": "text", "text": m.text})
        for c in m.tool_calls:
            try:  # bounded before: CallChecks refused arguments past the size cap or nested past 64 deep
                args = json.loads(c.arguments_json or "{}")
            except (ValueError, RecursionError):
                args = {RAW_ARGUMENTS: c.arguments_json}
            blocks.append({"type": "tool_use", "id": c.id, "name": c.name, "input": args})
        return "assistant", blocks
    blocks = [
        {"type": "tool_result", "tool_use_id": r.call_id, "content": r.content, "is_error": r.is_error}
        for r in m.tool_results
    ]
    if m.text or not blocks:
        blocks.append({"type": "text", "text": m.text})
    return "user", blocks


# ---------------------------------------------------------------------------- requests read back


def parse_request(body: Mapping[str, Any]) -> ModelRequest:
    """An Anthropic Messages request as the core's ModelRequest (the module's table)."""
    model = body.get("model")
    if not isinstance(model, str):
        raise InvalidInput("model", shown(model), "must be the model's name (a string)")
    system, schema = _split_system(_system(body.get("system")))
    messages: list[Message] = []
    names: dict[str, str] = {}
    for i, m in enumerate(object_list(body, "messages", required=True)):
        role, where = m.get("role"), f"messages[{i}]"
        blocks = _blocks(m.get("content"), f"{where}.content")
        if role == "assistant":
            messages.extend(_assistant(blocks, where, names))
        elif role == "user":
            messages.extend(_user(blocks, where, names))
        else:
            raise InvalidInput(f"{where}.role", shown(role), "must be user or assistant")
    return ModelRequest(
        model=model,
        messages=tuple(messages),
        system=system,
        tools=tuple(_tool(t, f"tools[{i}]") for i, t in enumerate(object_list(body, "tools"))),
        response_schema_json=schema,
        max_output_tokens=number_field(body, "max_tokens", int),
        temperature=number_field(body, "temperature", float),
    )


def _system(value: Any) -> str:
    if value is None or isinstance(value, str):
        return value or ""
    return "".join(_text_block(b, f"system[{j}]") for j, b in enumerate(_blocks(value, "system")))


def _split_system(system: str) -> tuple[str, str]:
    """The system prompt and the response schema ``body`` appended to it ("" when there is none)."""
    at = system.rfind(_SCHEMA_MARK)
    if at < 0 or (at > 0 and not system[:at].endswith("\n\n")):
        return system, ""
    text = system[at + len(_SCHEMA_MARK) :]
    try:
        schema = json.loads(text)
    except ValueError:
        return system, ""
    if not isinstance(schema, dict) or compact_json(schema) != text:
        return system, ""
    return system[:at].removesuffix("\n\n"), text


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        raise InvalidInput(where, shown(content), "must be a string or a list of content blocks")
    return content


def _text_block(block: dict[str, Any], where: str) -> str:
    if block.get("type") != "text" or not isinstance(block.get("text"), str):
        raise InvalidInput(where, shown(block.get("type")), "must be a text block (the sidecar carries text only)")
    return str(block["text"])


def _assistant(blocks: list[dict[str, Any]], where: str, names: dict[str, str]) -> list[Message]:
    """One message per text block, the tool_use blocks after it belonging to it."""
    out: list[Message] = []
    for j, block in enumerate(blocks):
        if block.get("type") == "tool_use":
            name, call_id = block.get("name"), str(block.get("id") or "")
            if not isinstance(name, str):
                raise InvalidInput(f"{where}.content[{j}].name", shown(name), "must name the tool called")
            names[call_id] = name
            call = ToolCall(call_id, name, _arguments(block.get("input")))
            last = out.pop() if out else Message(Role.ASSISTANT)
            out.append(Message(Role.ASSISTANT, last.text, (*last.tool_calls, call)))
        else:
            out.append(Message(Role.ASSISTANT, _text_block(block, f"{where}.content[{j}]")))
    return out


def _arguments(value: Any) -> str:
    if isinstance(value, dict) and list(value) == [RAW_ARGUMENTS] and isinstance(value[RAW_ARGUMENTS], str):
        return str(value[RAW_ARGUMENTS])
    return compact_json(value if value is not None else {})


def _user(blocks: list[dict[str, Any]], where: str, names: dict[str, str]) -> list[Message]:
    """Tool results (consecutive ones together) and one message per text block, in order."""
    out: list[Message] = []
    for j, block in enumerate(blocks):
        at = f"{where}.content[{j}]"
        if block.get("type") != "tool_result":
            out.append(Message(Role.USER, _text_block(block, at)))
            continue
        call_id = str(block.get("tool_use_id") or "")
        content = block.get("content")
        text = content if isinstance(content, str) else _result_text(content, f"{at}.content")
        result = ToolCallResult(call_id, text, block.get("is_error") is True, names.get(call_id, ""))
        if out and out[-1].role is Role.TOOL:
            out[-1] = Message(Role.TOOL, tool_results=(*out[-1].tool_results, result))
        else:
            out.append(Message(Role.TOOL, tool_results=(result,)))
    return out


def _result_text(content: Any, where: str) -> str:
    """A tool result's content given as text blocks (joined); none is ""."""
    if content is None:
        return ""
    return "".join(_text_block(b, f"{where}[{j}]") for j, b in enumerate(_blocks(content, where)))


def _tool(t: dict[str, Any], where: str) -> ToolDefinition:
    name = t.get("name")
    if not isinstance(name, str):
        raise InvalidInput(f"{where}.name", shown(name), "must be the tool's name")
    schema = t.get("input_schema")
    params = "" if schema is None else schema_text(schema, f"{where}.input_schema")
    return ToolDefinition(name, str(t.get("description") or ""), params)
