"""The official OpenAI and Anthropic SDKs as real peers of the fake's streams.

Each SDK reads a stream from the fake the way it reads one from its provider: the text, tool
calls, usage and finish come out whole, and each scripted mid-stream fault surfaces the way the
real provider's would (an SDK error for an error event, a connection error for a drop, a timeout
for a stall, unknown events skipped).  SDK retries are off: the fake's script is the only actor.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from sidecar.fakes import FakeProvider, ThreadedServer

Srv = ThreadedServer[FakeProvider]
TEXT = "one two three four five six"
REPLY = "You said: " + TEXT
DELTAS = ["You", " said:", " one", " two", " three", " four", " five", " six"]
MESSAGES: Any = [{"role": "user", "content": TEXT}]
OPENAI_TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        },
    }
]
ANTHROPIC_TOOLS: Any = [
    {"name": "search", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}
]


@pytest.fixture
def oai(provider: Srv) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=provider.url + "/v1", api_key="sk-test-0123456789", max_retries=0, timeout=5) as c:
        yield c


@pytest.fixture
def ant(provider: Srv) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=provider.url, api_key="sk-ant-test-0123", max_retries=0, timeout=5) as c:
        yield c


def _openai_texts(stream: Any, into: list[str]) -> None:
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            into.append(chunk.choices[0].delta.content)


# ---- OpenAI ------------------------------------------------------------------------------------


def test_openai_stream_text_finish_and_usage(provider: Srv, oai: openai.OpenAI) -> None:
    stream = oai.chat.completions.create(
        model="m", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    texts = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert texts == DELTAS
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    usage = chunks[-1].usage
    assert usage is not None
    assert chunks[-1].choices == []
    assert (usage.completion_tokens, usage.total_tokens) == (10, usage.prompt_tokens + 10)  # ceil(37/4)


def test_openai_stream_helper_puts_tool_calls_together(provider: Srv, oai: openai.OpenAI) -> None:
    with oai.chat.completions.stream(model="m", messages=MESSAGES, tools=OPENAI_TOOLS) as stream:
        kinds = {event.type for event in stream}
        final = stream.get_final_completion()
    assert "tool_calls.function.arguments.delta" in kinds
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls
    assert calls is not None
    assert len(calls) == 1
    call = calls[0]
    assert call.type == "function"
    assert call.id.startswith("call_fake")
    assert (call.function.name, json.loads(call.function.arguments)) == ("search", {"q": TEXT})


def test_openai_stream_helper_puts_a_refusal_together(provider: Srv, oai: openai.OpenAI) -> None:
    provider.server.script("m", [{"preset": "refusal", "text": "No, I will not do that."}])
    with oai.chat.completions.stream(model="m", messages=MESSAGES) as stream:
        final = stream.get_final_completion()
    message = final.choices[0].message
    assert (message.content, message.refusal) == (None, "No, I will not do that.")


def test_openai_overload_mid_stream_raises_an_api_error(provider: Srv, oai: openai.OpenAI) -> None:
    provider.server.script("m", [{"stream_fault": "overloaded", "after_deltas": 3}])
    seen: list[str] = []
    with pytest.raises(openai.APIError) as info:
        _openai_texts(oai.chat.completions.create(model="m", messages=MESSAGES, stream=True), seen)
    assert not isinstance(info.value, openai.APIStatusError)  # HTTP said 200: the error came in the stream
    assert isinstance(info.value.body, dict)
    assert info.value.body["type"] == "overloaded_error"
    assert seen == DELTAS[:3]


def test_openai_restart_after_an_overload(provider: Srv, oai: openai.OpenAI) -> None:
    provider.server.script("m", [{"stream_fault": "overloaded", "after_deltas": 3}, {}])
    with pytest.raises(openai.APIError):
        _openai_texts(oai.chat.completions.create(model="m", messages=MESSAGES, stream=True), [])
    again: list[str] = []
    _openai_texts(oai.chat.completions.create(model="m", messages=MESSAGES, stream=True), again)
    assert "".join(again) == REPLY


@pytest.mark.parametrize("fault", ["drop", "reset"])
def test_openai_dropped_stream_is_a_connection_error(provider: Srv, oai: openai.OpenAI, fault: str) -> None:
    provider.server.script("m", [{"stream_fault": fault, "after_deltas": 2}])
    with pytest.raises(openai.APIConnectionError):
        _openai_texts(oai.chat.completions.create(model="m", messages=MESSAGES, stream=True), [])


def test_openai_stalled_stream_times_out(provider: Srv, oai: openai.OpenAI) -> None:
    provider.server.script("m", [{"stream_fault": "stall", "after_deltas": 2}])
    seen: list[str] = []
    stream = oai.chat.completions.create(model="m", messages=MESSAGES, stream=True, timeout=0.3)
    with pytest.raises(openai.APITimeoutError):
        _openai_texts(stream, seen)
    assert seen == DELTAS[:2]
    provider.server.wait_for(lambda rs: rs[-1]["client_disconnected"], timeout=5)


def test_openai_skips_the_unknown_event(provider: Srv, oai: openai.OpenAI) -> None:
    provider.server.script("m", [{"stream_fault": "unknown_event", "after_deltas": 2}])
    seen: list[str] = []
    _openai_texts(oai.chat.completions.create(model="m", messages=MESSAGES, stream=True), seen)
    assert seen == DELTAS


def test_openai_garbled_event_fails_to_parse(provider: Srv, oai: openai.OpenAI) -> None:
    provider.server.script("m", [{"stream_fault": "garbled", "after_deltas": 2}])
    with pytest.raises(ValueError, match=r"Unterminated string|Expecting"):
        _openai_texts(oai.chat.completions.create(model="m", messages=MESSAGES, stream=True), [])


def test_openai_truncated_stream_finishes_with_length(provider: Srv, oai: openai.OpenAI) -> None:
    provider.server.script("m", [{"stream_fault": "truncated", "after_deltas": 4}])
    with (
        pytest.raises(openai.LengthFinishReasonError) as info,
        oai.chat.completions.stream(model="m", messages=MESSAGES) as stream,
    ):  # the helper's own verdict on "length"
        stream.get_final_completion()
    choice = info.value.completion.choices[0]
    assert (choice.message.content, choice.finish_reason) == ("You said: one two", "length")


def test_openai_error_before_the_stream_is_a_status_error(provider: Srv, oai: openai.OpenAI) -> None:
    provider.server.script("m", [{"preset": "rate_limit", "retry_after": "0"}])
    with pytest.raises(openai.RateLimitError):
        oai.chat.completions.create(model="m", messages=MESSAGES, stream=True)


async def test_async_openai_reads_the_stream(provider: Srv) -> None:
    provider.server.script("m", [{"delta_delay_ms": 5}])
    async with openai.AsyncOpenAI(base_url=provider.url + "/v1", api_key="sk-test", max_retries=0) as client:
        stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        texts = [c.choices[0].delta.content async for c in stream if c.choices and c.choices[0].delta.content]
    assert texts == DELTAS


# ---- Anthropic ---------------------------------------------------------------------------------


def test_anthropic_stream_text_stop_and_usage(provider: Srv, ant: anthropic.Anthropic) -> None:
    with ant.messages.stream(model="m", max_tokens=1024, messages=MESSAGES) as stream:
        texts = list(stream.text_stream)
        final = stream.get_final_message()
    assert texts == DELTAS
    assert final.stop_reason == "end_turn"
    assert final.content[0].type == "text"
    assert final.content[0].text == REPLY
    assert (final.usage.input_tokens, final.usage.output_tokens) == (7, 10)  # ceil(27 / 4), ceil(37 / 4)


def test_anthropic_stream_puts_tool_use_together(provider: Srv, ant: anthropic.Anthropic) -> None:
    with ant.messages.stream(model="m", max_tokens=1024, messages=MESSAGES, tools=ANTHROPIC_TOOLS) as stream:
        kinds = {event.type for event in stream}
        final = stream.get_final_message()
    assert "input_json" in kinds
    assert final.stop_reason == "tool_use"
    block = final.content[0]
    assert block.type == "tool_use"
    assert block.id.startswith("toolu_fake")
    assert (block.name, block.input) == ("search", {"q": TEXT})


def test_anthropic_overload_mid_stream_raises(provider: Srv, ant: anthropic.Anthropic) -> None:
    provider.server.script("m", [{"stream_fault": "overloaded", "after_deltas": 3}])
    seen: list[str] = []
    with (
        pytest.raises(anthropic.APIStatusError) as info,
        ant.messages.stream(model="m", max_tokens=1024, messages=MESSAGES) as stream,
    ):
        seen.extend(stream.text_stream)
    assert info.value.status_code == 200  # the error arrived inside a 200 stream
    assert info.value.body == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert seen == DELTAS[:3]


def test_anthropic_restart_after_an_overload(provider: Srv, ant: anthropic.Anthropic) -> None:
    provider.server.script("m", [{"stream_fault": "overloaded", "after_deltas": 3}, {}])
    with (
        pytest.raises(anthropic.APIStatusError),
        ant.messages.stream(model="m", max_tokens=1024, messages=MESSAGES) as stream,
    ):
        stream.until_done()
    with ant.messages.stream(model="m", max_tokens=1024, messages=MESSAGES) as stream:
        assert stream.get_final_text() == REPLY


def test_anthropic_skips_ping_and_the_unknown_event(provider: Srv, ant: anthropic.Anthropic) -> None:
    provider.server.script("m", [{"stream_fault": "unknown_event", "after_deltas": 2}])
    with ant.messages.stream(model="m", max_tokens=1024, messages=MESSAGES) as stream:
        texts = list(stream.text_stream)
        final = stream.get_final_message()
    assert texts == DELTAS
    assert final.stop_reason == "end_turn"


def test_anthropic_dropped_stream_raises(provider: Srv, ant: anthropic.Anthropic) -> None:
    provider.server.script("m", [{"stream_fault": "drop", "after_deltas": 2}])
    with (
        pytest.raises(Exception, match="incomplete chunked read"),
        ant.messages.stream(model="m", max_tokens=1024, messages=MESSAGES) as stream,
    ):
        stream.until_done()


def test_anthropic_stalled_stream_times_out(provider: Srv, ant: anthropic.Anthropic) -> None:
    provider.server.script("m", [{"stream_fault": "stall", "after_deltas": 2}])
    seen: list[str] = []
    with (
        pytest.raises(Exception, match=r"(?i)timed out|timeout"),
        ant.messages.stream(model="m", max_tokens=1024, messages=MESSAGES, timeout=0.3) as stream,
    ):
        seen.extend(stream.text_stream)
    assert seen == DELTAS[:2]
    provider.server.wait_for(lambda rs: rs[-1]["client_disconnected"], timeout=5)


def test_anthropic_garbled_event_fails_to_parse(provider: Srv, ant: anthropic.Anthropic) -> None:
    provider.server.script("m", [{"stream_fault": "garbled", "after_deltas": 2}])
    with (
        pytest.raises(ValueError, match=r"Unterminated string|Expecting"),
        ant.messages.stream(model="m", max_tokens=1024, messages=MESSAGES) as stream,
    ):
        stream.until_done()


def test_anthropic_truncated_stream_stops_at_max_tokens(provider: Srv, ant: anthropic.Anthropic) -> None:
    provider.server.script("m", [{"stream_fault": "truncated", "after_deltas": 4}])
    with ant.messages.stream(model="m", max_tokens=1024, messages=MESSAGES) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "max_tokens"
    assert final.content[0].type == "text"
    assert final.content[0].text == "You said: one two"


def test_anthropic_error_before_the_stream_is_a_status_error(provider: Srv, ant: anthropic.Anthropic) -> None:
    provider.server.script("m", [{"preset": "overloaded"}])
    with (
        pytest.raises(anthropic.InternalServerError) as info,
        ant.messages.stream(model="m", max_tokens=1024, messages=MESSAGES) as stream,
    ):
        stream.until_done()
    assert info.value.status_code == 529


async def test_async_anthropic_reads_the_stream(provider: Srv) -> None:
    provider.server.script("m", [{"delta_delay_ms": 5}])
    async with (
        anthropic.AsyncAnthropic(base_url=provider.url, api_key="sk-ant", max_retries=0) as client,
        client.messages.stream(model="m", max_tokens=1024, messages=MESSAGES) as stream,
    ):
        texts = [t async for t in stream.text_stream]
    assert texts == DELTAS
