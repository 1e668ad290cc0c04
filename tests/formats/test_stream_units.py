"""The pieces of a streamed attempt alone: each wire's stream decoder, and the idle watch on the fake clock."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from sidecar.core.clock import FakeClock
from sidecar.core.kinds import FinishReason
from sidecar.core.stream import ReasoningDelta, TextDelta, ToolCallDelta
from sidecar.providers.formats.anthropic_messages.upstream import AnthropicStream
from sidecar.providers.formats.chat import StreamFault
from sidecar.providers.formats.openai_chat.upstream import OpenAIStream
from sidecar.providers.streaming.watch import Stalled, Watch


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> str:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return json.dumps({"id": "c1", "model": "m-1", "choices": choices, **extra})


# ---------------------------------------------------------------- OpenAI


def test_openai_text_tool_calls_usage_and_the_end_marker() -> None:
    s = OpenAIStream()
    assert s.feed("", chunk({"role": "assistant", "content": ""})) == []
    assert s.feed("", chunk({"content": "Hi"})) == [TextDelta("Hi")]
    start = {
        "tool_calls": [{"index": 3, "id": "call_a", "type": "function", "function": {"name": "f", "arguments": ""}}]
    }
    assert s.feed("", chunk(start)) == [ToolCallDelta(0, "call_a", "f", "")]
    assert s.feed("", chunk({"tool_calls": [{"index": 3, "function": {"arguments": '{"a":'}}]})) == [
        ToolCallDelta(0, "", "", '{"a":')
    ]
    assert s.feed("", chunk({"tool_calls": [{"index": 3, "function": {"arguments": "1}"}}]})) == [
        ToolCallDelta(0, "", "", "1}")
    ]
    assert s.reply() is None  # no finish yet
    assert s.feed("", chunk({}, "tool_calls")) == []
    assert s.feed("", chunk(None, usage={"prompt_tokens": 7, "completion_tokens": 3})) == []
    assert not s.complete
    assert s.feed("", "[DONE]") == []
    assert s.complete
    reply = s.reply()
    assert reply is not None
    assert (reply.text, reply.finish, reply.raw_finish) == ("Hi", FinishReason.TOOL_CALLS, "tool_calls")
    assert [(c.id, c.name, c.arguments_json) for c in reply.tool_calls] == [("call_a", "f", '{"a":1}')]
    assert (reply.input_tokens, reply.output_tokens, reply.response_model, reply.response_id) == (7, 3, "m-1", "c1")


def test_openai_refusal_is_kept_for_the_reply_and_never_sent_as_text() -> None:
    s = OpenAIStream()
    assert s.feed("", chunk({"refusal": "I can't"})) == []
    assert s.feed("", chunk({"refusal": " help."}, "stop")) == []
    reply = s.reply()
    assert reply is not None
    assert (reply.text, reply.refusal) == ("", "I can't help.")


def test_openai_ignores_what_it_does_not_know_and_refuses_what_is_broken() -> None:
    s = OpenAIStream()
    assert s.feed("", json.dumps({"choices": [], "prompt_filter_results": [{"x": 1}]})) == []
    assert s.feed("", json.dumps({"choices": "odd"})) == []
    assert s.feed("", json.dumps({"choices": [{"index": 1, "delta": {"content": "other choice"}}]})) == []
    assert s.feed("ping", "not json at all") == []  # a named event the wire does not define
    assert s.feed("", "") == []
    with pytest.raises(StreamFault) as named:
        s.feed("error", '{"message": "overloaded_error"}')
    assert named.value.error_body == '{"message": "overloaded_error"}'
    with pytest.raises(StreamFault) as garbled:
        s.feed("", '{"choices": [{"delta": {"cont')
    assert garbled.value.error_body is None
    with pytest.raises(StreamFault):
        s.feed("", "[1, 2]")
    error = json.dumps({"error": {"type": "overloaded_error", "message": "Overloaded"}})
    with pytest.raises(StreamFault) as event:
        s.feed("", error)
    assert event.value.error_body == error


# ---------------------------------------------------------------- Anthropic


def ev(kind: str, **fields: Any) -> tuple[str, str]:
    return kind, json.dumps({"type": kind, **fields})


def test_anthropic_blocks_become_deltas_and_tool_calls_count_from_zero() -> None:
    s = AnthropicStream()
    feed = [
        ev("message_start", message={"id": "msg_1", "model": "claude-x",
                                     "usage": {"input_tokens": 9, "output_tokens": 1}}),
        ev("content_block_start", index=0, content_block={"type": "thinking", "thinking": ""}),
        ev("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "hmm"}),
        ev("content_block_stop", index=0),
        ev("content_block_start", index=1, content_block={"type": "text", "text": "Le"}),
        ev("ping"),
        ev("content_block_delta", index=1, delta={"type": "text_delta", "text": "t me"}),
        ev("content_block_stop", index=1),
        ev("content_block_start", index=2, content_block={"type": "tool_use", "id": "tu_1", "name": "f", "input": {}}),
        ev("content_block_delta", index=2, delta={"type": "input_json_delta", "partial_json": '{"a":  '}),
        ev("content_block_delta", index=2, delta={"type": "input_json_delta", "partial_json": "1}"}),
        ev("content_block_stop", index=2),
        ev("a_future_event", note="new"),
        ev("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 12}),
    ]  # fmt: skip
    out = [d for kind, data in feed for d in s.feed(kind, data)]
    assert out == [
        ReasoningDelta(0, text="hmm"),  # issue 21: a thinking block is the reply's reasoning, streamed
        TextDelta("Le"),
        TextDelta("t me"),
        ToolCallDelta(0, "tu_1", "f", ""),
        ToolCallDelta(0, "", "", '{"a":  '),
        ToolCallDelta(0, "", "", "1}"),
    ]
    assert not s.complete
    assert s.feed(*ev("message_stop")) == []
    assert s.complete
    reply = s.reply()
    assert reply is not None
    assert reply.text == "Let me"
    assert [(c.id, c.name, c.arguments_json) for c in reply.tool_calls] == [("tu_1", "f", json.dumps({"a": 1}))]
    assert (reply.finish, reply.input_tokens, reply.output_tokens) == (FinishReason.TOOL_CALLS, 9, 12)
    assert (reply.response_model, reply.response_id) == ("claude-x", "msg_1")
    assert [(r.text, r.format) for r in reply.reasoning] == [("hmm", "anthropic")]


def test_anthropic_error_events_and_garbled_data_are_faults() -> None:
    s = AnthropicStream()
    error = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    with pytest.raises(StreamFault) as event:
        s.feed("error", error)
    assert event.value.error_body == error
    with pytest.raises(StreamFault) as garbled:
        s.feed("content_block_delta", '{"type": "content_block_del')
    assert garbled.value.error_body is None


def test_anthropic_a_refusal_carries_its_text() -> None:
    s = AnthropicStream()
    s.feed(*ev("content_block_start", index=0, content_block={"type": "text", "text": ""}))
    s.feed(*ev("content_block_delta", index=0, delta={"type": "text_delta", "text": "No."}))
    s.feed(*ev("message_delta", delta={"stop_reason": "refusal"}))
    reply = s.reply()
    assert reply is not None
    assert (reply.finish, reply.refusal) == (FinishReason.CONTENT_FILTER, "No.")


# ---------------------------------------------------------------- the watch


async def test_the_watch_fires_after_idle_seconds_without_a_byte() -> None:
    clock = FakeClock()

    async def body(watch: Watch) -> None:
        clock.advance(9)
        watch.touch()
        clock.advance(9)  # 9 s since the last byte: not yet
        await asyncio.sleep(0)
        clock.advance(1)
        await asyncio.sleep(1)  # cancelled here

    with pytest.raises(Stalled) as caught:
        async with Watch(clock, 10, None) as watch:
            await body(watch)
    assert not caught.value.deadline
    assert clock.now == 1019


async def test_a_paused_watch_waits_for_the_reader_but_not_past_the_deadline() -> None:
    clock = FakeClock()

    async def body() -> None:
        async with Watch(clock, 10, clock.now + 100) as watch:
            watch.pause()
            clock.advance(50)  # the caller is not reading: no stall
            await asyncio.sleep(0)
            clock.advance(50)  # the deadline
            await asyncio.sleep(1)

    with pytest.raises(Stalled) as caught:
        await body()
    assert caught.value.deadline


async def test_a_cancellation_from_outside_stays_a_cancellation() -> None:
    clock = FakeClock()

    async def watched() -> None:
        async with Watch(clock, 10, None):
            await asyncio.sleep(10)

    task = asyncio.ensure_future(watched())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    clock.advance(60)  # its timer is gone with it: nothing fires


async def test_a_watch_that_did_not_fire_leaves_the_block_alone() -> None:
    clock = FakeClock()
    async with Watch(clock, 10, clock.now + 60) as watch:
        watch.touch()
        await asyncio.sleep(0)
    clock.advance(100)  # after the block: nothing is cancelled
    await asyncio.sleep(0)
