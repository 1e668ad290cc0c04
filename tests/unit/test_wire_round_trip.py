"""A conversation crosses wire formats faithfully: core -> OpenAI -> core -> Anthropic -> core is the original.

A route may fall back from an OpenAI-format deployment to an Anthropic-format one and back; each
adapter renders its own body from the core's types, and each format's ``parse_request`` reads a
body back. For every message shape, the round trip through both formats gives back the request
it started from, and a body read back and rendered again is the same body.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from sidecar.core.conversation import Message, ModelRequest, ToolCall, ToolCallResult, ToolDefinition
from sidecar.core.kinds import Role
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers import anthropic, openai
from sidecar.providers.anthropic import AnthropicAdapter
from sidecar.providers.openai import TOOL_ERROR_PREFIX, OpenAIAdapter
from sidecar.providers.wire import ChatRequest

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


@pytest.mark.parametrize("shape", list(SHAPES))
def test_core_openai_core_anthropic_core_is_the_original(shape: str) -> None:
    original = as_sent(SHAPES[shape])
    via_openai = openai.parse_request(OpenAIAdapter().body(chat(original)))
    assert via_openai == original
    via_anthropic = anthropic.parse_request(AnthropicAdapter().body(chat(via_openai)))
    assert via_anthropic == original


@pytest.mark.parametrize("shape", list(SHAPES))
def test_core_anthropic_core_openai_core_is_the_original(shape: str) -> None:
    original = as_sent(SHAPES[shape])
    via_anthropic = anthropic.parse_request(AnthropicAdapter().body(chat(original)))
    assert via_anthropic == original
    assert openai.parse_request(OpenAIAdapter().body(chat(via_anthropic))) == original


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_body_read_back_renders_the_same_body(shape: str) -> None:
    for adapter, parse in ((OpenAIAdapter(), openai.parse_request), (AnthropicAdapter(), anthropic.parse_request)):
        body = adapter.body(chat(as_sent(SHAPES[shape])))
        assert adapter.body(chat(parse(body))) == body


def test_an_error_result_is_marked_in_the_openai_content_and_flagged_in_anthropic() -> None:
    request = SHAPES["a tool result that is an error"]
    tool = OpenAIAdapter().body(chat(request))["messages"][2]
    assert tool == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": TOOL_ERROR_PREFIX + "The weather service failed.",
    }
    result = AnthropicAdapter().body(chat(request))["messages"][2]["content"][0]
    assert result == {"type": "tool_result", "tool_use_id": "call_1", "content": "The weather service failed.",
                      "is_error": True}  # fmt: skip


def test_the_openai_parser_reads_what_other_clients_send() -> None:
    request = openai.parse_request(
        {
            "model": "gpt",
            "messages": [
                {"role": "developer", "content": "Be kind."},
                {"role": "user", "content": [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}]},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": {"city": "Oslo"}}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "5 C"},
            ],
            "max_completion_tokens": 50,
            "response_format": {"type": "json_object"},
        }
    )  # fmt: skip
    assert request.system == "Be kind."
    assert request.messages[0] == Message(Role.USER, "Hello")
    assert request.messages[1].tool_calls == (ToolCall("c1", "weather", '{"city":"Oslo"}'),)
    assert request.messages[2] == Message(Role.TOOL, tool_results=(ToolCallResult("c1", "5 C", False, "weather"),))
    assert request.max_output_tokens == 50
    assert request.response_schema_json == '{"type":"object"}'


def test_the_anthropic_parser_reads_string_content_and_system_blocks() -> None:
    request = anthropic.parse_request(
        {
            "model": "claude",
            "system": [{"type": "text", "text": "Be kind."}],
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi"}],
        }
    )
    assert request.system == "Be kind."
    assert request.messages == (Message(Role.USER, "Hello"), Message(Role.ASSISTANT, "Hi"))


@pytest.mark.parametrize(
    ("parse", "body", "parameter"),
    [
        (openai.parse_request, {"model": "m"}, "messages"),
        (openai.parse_request, {"model": 3, "messages": []}, "model"),
        (openai.parse_request, {"model": "m", "messages": [{"role": "robot"}]}, "messages[0].role"),
        (
            openai.parse_request,
            {"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
            "messages[0].content[0]",
        ),
        (openai.parse_request, {"model": "m", "messages": [], "max_tokens": "many"}, "max_tokens"),
        (
            openai.parse_request,
            {"model": "m", "messages": [], "response_format": {"type": "yaml"}},
            "response_format.type",
        ),
        (
            anthropic.parse_request,
            {"model": "m", "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
            "messages[0].content[0]",
        ),
        (anthropic.parse_request, {"model": "m", "messages": [{"role": "system", "content": "x"}]}, "messages[0].role"),
        (anthropic.parse_request, {"model": "m", "messages": [], "temperature": True}, "temperature"),
    ],
)
def test_what_a_parser_cannot_carry_is_invalid_input_naming_the_field(parse: Any, body: Any, parameter: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse(body)
    assert caught.value.detail.parameter == parameter  # type: ignore[union-attr]
