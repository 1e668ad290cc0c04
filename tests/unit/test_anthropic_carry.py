"""The Anthropic format's halves for what issue 21 adds: reasoning and cache usage in replies and streams,
the request keys the front reads (tool results with breakpoints, runs of blocks), and provider options."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sidecar.core.conversation import (
    CacheBreakpoint,
    Carried,
    Controls,
    Message,
    ModelRequest,
    ReasoningPart,
    TextPart,
    ToolCall,
)
from sidecar.core.kinds import FinishReason, Role
from sidecar.core.stream import Delta, ReasoningDelta, TextDelta
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.formats.anthropic_messages import FORMAT
from sidecar.providers.formats.anthropic_messages.front import parse_request
from sidecar.providers.formats.anthropic_messages.upstream import AnthropicUpstream
from sidecar.providers.formats.chat import ChatReply
from sidecar.providers.formats.protocol import ReplyHead
from tests.unit.shapes import chat

HEAD = ReplyHead("msg_1", "claude-x")
THOUGHT = ReasoningPart("Let me think.", "c2lnbmF0dXJl", format="anthropic")
REDACTED = ReasoningPart(redacted_data="b3BhcXVl", format="anthropic")
REPLY = ChatReply(
    "Sunny.",
    [ToolCall("toolu_1", "weather", '{"city": "Paris"}')],
    FinishReason.TOOL_CALLS,
    input_tokens=1000,
    output_tokens=50,
    reasoning=[THOUGHT, REDACTED],
    cache_read_input_tokens=600,
    cache_write_input_tokens=300,
    reasoning_tokens=20,
)


def test_a_reply_with_reasoning_and_cache_usage_reads_back_as_itself() -> None:
    body = FORMAT.front.render(REPLY, HEAD)
    assert [b["type"] for b in body["content"]] == ["thinking", "redacted_thinking", "text", "tool_use"]
    assert body["usage"] == {
        "input_tokens": 100,
        "output_tokens": 50,
        "cache_creation_input_tokens": 300,
        "cache_read_input_tokens": 600,
        "output_tokens_details": {"thinking_tokens": 20},
    }
    got = AnthropicUpstream().parse(body)
    assert got.reasoning == REPLY.reasoning
    assert got.usage == REPLY.usage


def test_a_stream_with_reasoning_reads_back_as_the_same_deltas_and_reply() -> None:
    writer = FORMAT.front.writer(HEAD)
    sent: list[Delta] = [
        ReasoningDelta(0, text="Let me "),
        ReasoningDelta(0, text="think."),
        ReasoningDelta(0, signature="c2lnbmF0dXJl"),
        ReasoningDelta(1, redacted_data="b3BhcXVl"),
        TextDelta("Sunny."),
    ]
    events = writer.start()
    for delta in sent:
        events += writer.delta(delta)
    events += writer.final(ChatReply("Sunny.", finish=FinishReason.STOP, **_usage_fields(REPLY)))
    decoder = AnthropicUpstream().stream_decoder()
    got: list[Delta] = []
    for name, data in events:
        got += decoder.feed(name, json.dumps(data))
    assert got == sent
    reply = decoder.reply()
    assert reply is not None
    assert reply.reasoning == [THOUGHT, REDACTED]
    assert reply.usage == REPLY.usage
    starts = [d["content_block"]["type"] for n, d in events if n == "content_block_start"]  # type: ignore[index]
    assert starts == ["thinking", "redacted_thinking", "text"]


def _usage_fields(reply: ChatReply) -> dict[str, Any]:
    u = reply.usage
    return {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens, "reasoning_tokens": u.reasoning_tokens,
            "cache_read_input_tokens": u.cache_read_input_tokens,
            "cache_write_input_tokens": u.cache_write_input_tokens}  # fmt: skip


def test_message_start_usage_is_read_when_message_delta_leaves_it_out() -> None:
    decoder = AnthropicUpstream().stream_decoder()
    usage = {"input_tokens": 10, "cache_read_input_tokens": 90, "cache_creation_input_tokens": 5, "output_tokens": 1}
    start = {"type": "message_start", "message": {"id": "m", "model": "x", "usage": usage}}
    decoder.feed("message_start", json.dumps(start))
    decoder.feed("message_delta", json.dumps({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                              "usage": {"output_tokens": 7}}))  # fmt: skip
    reply = decoder.reply()
    assert reply is not None
    assert (reply.input_tokens, reply.cache_read_input_tokens, reply.cache_write_input_tokens) == (105, 90, 5)
    assert reply.output_tokens == 7


def test_a_providers_stop_sequence_is_its_stop_reason() -> None:
    reply = ChatReply("You said", finish=FinishReason.STOP, raw_finish="stop_sequence")
    assert FORMAT.front.render(reply, HEAD)["stop_reason"] == "stop_sequence"
    assert FORMAT.front.render(ChatReply("x", finish=FinishReason.STOP, raw_finish="stop"), HEAD)["stop_reason"] == (
        "end_turn"
    )


def _user(*content: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": list(content)}]}


def test_a_tool_results_cache_control_is_a_breakpoint_on_its_last_part() -> None:
    block = {"type": "tool_result", "tool_use_id": "t1", "content": "18 C", "cache_control": {"type": "ephemeral"}}
    (message,) = parse_request(_user(block)).messages
    (result,) = message.tool_results
    assert (result.content, result.parts) == ("", (TextPart("18 C", CacheBreakpoint()),))
    rendered = AnthropicUpstream().body(chat(parse_request(_user(block))))["messages"][0]["content"][0]
    assert rendered["content"] == [{"type": "text", "text": "18 C", "cache_control": {"type": "ephemeral"}}]


def test_a_run_of_blocks_is_one_message_and_one_plain_text_block_its_text() -> None:
    one = parse_request(_user({"type": "text", "text": "hi"}))
    assert one.messages == (Message(Role.USER, "hi"),)
    two = parse_request(_user({"type": "text", "text": "a"}, {"type": "text", "text": "b"}))
    assert two.messages == (Message(Role.USER, parts=(TextPart("a"), TextPart("b"))),)


def test_a_null_key_says_nothing_and_an_unknown_one_is_carried() -> None:
    echoed = {"type": "text", "text": "ok", "citations": None}
    body = {"model": "m", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": [echoed]}]}
    request = parse_request(body)
    assert request.messages[1] == Message(Role.ASSISTANT, "ok")
    assert request.carried is None
    assert parse_request({**body, "container": "c1"}).carried == Carried(
        "anthropic", {"container": "c1"}, "", ("container",)
    )


def test_a_cache_control_on_a_system_block_but_the_last_is_refused() -> None:
    system = [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "b"}]
    with pytest.raises(InvalidInput) as caught:
        parse_request({"model": "m", "messages": [{"role": "user", "content": "q"}], "system": system})
    assert caught.value.detail.parameter == "system[0].cache_control"  # type: ignore[union-attr]


def test_provider_options_for_this_format_are_merged_and_the_others_left() -> None:
    options = json.dumps({"anthropic": {"service_tier": "auto"}, "openai": {"store": False}})
    request = ModelRequest("m", (Message(Role.USER, "hi"),), controls=Controls(provider_options_json=options))
    body = AnthropicUpstream().body(chat(request))
    assert body["service_tier"] == "auto"
    assert "store" not in body
    AnthropicUpstream().check(request, "m")


def test_a_data_url_image_is_sent_as_its_base64_source() -> None:
    from sidecar.core.conversation import ImagePart

    request = ModelRequest("m", (Message(Role.USER, parts=(ImagePart(url="data:image/png;base64,iVBORw0KGgo="),)),))
    block = AnthropicUpstream().body(chat(request))["messages"][0]["content"][0]
    assert block["source"] == {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
