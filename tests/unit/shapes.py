"""Conversations of every shape the core carries, and the ChatRequest a call sends for one (the wire tests)."""

from __future__ import annotations

import json
from typing import Any

from sidecar.core.conversation import Message, ModelRequest, ToolCall, ToolCallResult, ToolDefinition
from sidecar.core.kinds import Role
from sidecar.providers.formats.chat import ChatRequest

__all__ = ["SHAPES", "as_sent", "chat"]

SCHEMA = '{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}'
WEATHER = ToolDefinition("weather", "The weather in a city.", SCHEMA)
CALL = ToolCall("call_1", "weather", '{"city":"Paris"}')
ASKED = Message(Role.USER, "What is the weather in Paris?")

SHAPES: dict[str, ModelRequest] = {
    "user text": ModelRequest("m", (ASKED,)),
    "system": ModelRequest("m", (ASKED,), system="You answer briefly.\nAlways in French."),
    "assistant text": ModelRequest("m", (ASKED, Message(Role.ASSISTANT, "Sunny."), Message(Role.USER, "Thanks"))),
    "assistant tool calls": ModelRequest(
        "m", (ASKED, Message(Role.ASSISTANT, "Let me look.", (CALL, ToolCall("call_2", "weather", '{"city":"Nice"}'))))
    ),
    "assistant tool call without text": ModelRequest("m", (ASKED, Message(Role.ASSISTANT, "", (CALL,)))),
    "arguments that are not JSON": ModelRequest(
        "m", (ASKED, Message(Role.ASSISTANT, "", (ToolCall("call_1", "weather", "Paris, please"),)))
    ),
    "tool results": ModelRequest(
        "m",
        (
            ASKED,
            Message(Role.ASSISTANT, "", (CALL, ToolCall("call_2", "weather", '{"city":"Nice"}'))),
            Message(
                Role.TOOL,
                tool_results=(
                    ToolCallResult("call_1", "18 C", False, "weather"),
                    ToolCallResult("call_2", "21 C", False, "weather"),
                ),
            ),
        ),
    ),
    "a tool result that is an error": ModelRequest(
        "m",
        (
            ASKED,
            Message(Role.ASSISTANT, "", (CALL,)),
            Message(
                Role.TOOL, tool_results=(ToolCallResult("call_1", "The weather service failed.", True, "weather"),)
            ),
            Message(Role.ASSISTANT, "I could not find out."),
        ),
    ),
    "tool results then the user": ModelRequest(
        "m",
        (
            ASKED,
            Message(Role.ASSISTANT, "", (CALL,)),
            Message(Role.TOOL, tool_results=(ToolCallResult("call_1", "18 C", False, "weather"),)),
            Message(Role.USER, "And tomorrow?"),
        ),
    ),
    "tools with schemas": ModelRequest(
        "m",
        (ASKED,),
        tools=(WEATHER, ToolDefinition("now", "", '{"type":"object","properties":{}}')),
    ),
    "response schema": ModelRequest("m", (ASKED,), system="Be exact.", response_schema_json=SCHEMA),
    "response schema without a system prompt": ModelRequest("m", (ASKED,), response_schema_json=SCHEMA),
    "temperature and max tokens": ModelRequest("m", (ASKED,), max_output_tokens=321, temperature=0.25),
    "everything at once": ModelRequest(
        "m",
        (
            ASKED,
            Message(Role.ASSISTANT, "Looking.", (CALL,)),
            Message(Role.TOOL, tool_results=(ToolCallResult("call_1", "no answer", True, "weather"),)),
            Message(Role.ASSISTANT, "Trying again.", (ToolCall("call_3", "weather", '{"city":"Paris, FR"}'),)),
            Message(Role.TOOL, tool_results=(ToolCallResult("call_3", "18 C", False, "weather"),)),
            Message(Role.USER, "Ünïcode too: 東京?"),
        ),
        system="You are terse.",
        tools=(WEATHER,),
        response_schema_json=SCHEMA,
        max_output_tokens=64,
        temperature=0.0,
    ),
}
DEFAULT_MAX_TOKENS = 1024


def chat(request: ModelRequest) -> ChatRequest:
    """The ChatRequest a call to ``request`` sends (as ModelService builds it)."""
    return ChatRequest(
        upstream_model=request.model,
        system=request.system,
        messages=list(request.messages),
        tools=list(request.tools),
        response_schema=json.loads(request.response_schema_json) if request.response_schema_json else None,
        max_tokens=request.max_output_tokens or DEFAULT_MAX_TOKENS,
        temperature=request.temperature,
    )


def as_sent(request: ModelRequest) -> ModelRequest:
    """``request`` as a body carries it: the output budget is always sent."""
    return request if request.max_output_tokens else ModelRequest(**{**_fields(request), "max_output_tokens": 1024})


def _fields(request: ModelRequest) -> dict[str, Any]:
    return {name: getattr(request, name) for name in request.__dataclass_fields__}
