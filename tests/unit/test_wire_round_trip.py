"""A conversation crosses wire formats faithfully: core -> OpenAI -> core -> Anthropic -> core is the original.

A route may fall back from an OpenAI-format deployment to an Anthropic-format one and back; each
format's upstream renders its own body from the core's types, and each format's front reads a
body back (``parse_request``). For every message shape, the round trip through both formats gives
back the request it started from, and a body read back and rendered again is the same body
(``test_formats.py`` proves each format's two halves inverse on their own).
"""

from __future__ import annotations

from typing import Any

import pytest

from sidecar.core.conversation import Message, TextPart, ToolCall, ToolCallResult
from sidecar.core.kinds import Role
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.formats.anthropic_messages import front as anthropic
from sidecar.providers.formats.anthropic_messages.upstream import AnthropicUpstream
from sidecar.providers.formats.openai_chat import front as openai
from sidecar.providers.formats.openai_chat.upstream import OpenAIUpstream
from sidecar.providers.formats.openai_chat.vocab import TOOL_ERROR_PREFIX
from tests.unit.shapes import SHAPES, as_sent, chat, features, read_back

BOTH = [
    shape
    for shape, request in SHAPES.items()
    if features(request) <= OpenAIUpstream.carries & AnthropicUpstream.carries
]
"""The shapes both formats carry (what only one carries crosses by the rules of docs/carried.md)."""


@pytest.mark.parametrize("shape", BOTH)
def test_core_openai_core_anthropic_core_is_the_original(shape: str) -> None:
    original = as_sent(SHAPES[shape])
    via_openai = openai.parse_request(OpenAIUpstream().body(chat(original)))
    assert via_openai == original
    via_anthropic = anthropic.parse_request(AnthropicUpstream().body(chat(via_openai)))
    assert via_anthropic == read_back(original, "anthropic")  # an image's detail: Anthropic has none


@pytest.mark.parametrize("shape", BOTH)
def test_core_anthropic_core_openai_core_is_the_original(shape: str) -> None:
    original = as_sent(SHAPES[shape])
    via_anthropic = anthropic.parse_request(AnthropicUpstream().body(chat(original)))
    assert via_anthropic == read_back(original, "anthropic")  # an image's detail: Anthropic has none
    assert openai.parse_request(OpenAIUpstream().body(chat(via_anthropic))) == read_back(original, "anthropic")


@pytest.mark.parametrize("shape", BOTH)
def test_a_body_read_back_renders_the_same_body(shape: str) -> None:
    for adapter, parse in ((OpenAIUpstream(), openai.parse_request), (AnthropicUpstream(), anthropic.parse_request)):
        body = adapter.body(chat(as_sent(SHAPES[shape])))
        assert adapter.body(chat(parse(body))) == body


def test_an_error_result_is_marked_in_the_openai_content_and_flagged_in_anthropic() -> None:
    request = SHAPES["a tool result that is an error"]
    tool = OpenAIUpstream().body(chat(request))["messages"][2]
    assert tool == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": TOOL_ERROR_PREFIX + "The weather service failed.",
    }
    result = AnthropicUpstream().body(chat(request))["messages"][2]["content"][0]
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
    assert request.messages[0] == Message(Role.USER, parts=(TextPart("Hel"), TextPart("lo")))  # parts, as sent
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
            "messages[0].content[0].image_url.url",
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
            "messages[0].content[0].source.type",
        ),
        (anthropic.parse_request, {"model": "m", "messages": [{"role": "system", "content": "x"}]}, "messages[0].role"),
        (anthropic.parse_request, {"model": "m", "messages": [], "temperature": True}, "temperature"),
    ],
)
def test_what_a_parser_cannot_carry_is_invalid_input_naming_the_field(parse: Any, body: Any, parameter: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse(body)
    assert caught.value.detail.parameter == parameter  # type: ignore[union-attr]
