"""Compaction at the HTTP fronts, with the official ``openai`` and ``anthropic`` SDKs as the clients.

A caller asks for it per call with ``x-sidecar-on-overflow: compact`` (and ``x-sidecar-compaction`` for the
strategies), or the model's ``on_overflow`` does; what was compacted is in the reply's ``sidecar`` field.

| front                 | proved                                                                                 |
|---|---|
| OpenAI chat           | the headers compact a model whose policy is fail; without them it fails as before;    |
|                       | the provider's too long compacts and retries; a stream's last chunk says it; a bad     |
|                       | header, or a summarize the model cannot run, refused naming the header                  |
| OpenAI Responses      | compacts; a stream's last event (``response.completed``) carries ``sidecar.compaction``  |
| Anthropic Messages    | compacts by the model's policy; the headers (``extra_headers``) compact a model whose   |
|                       | policy is fail, in the strategies they name; a stream's ``message_delta`` (the last     |
|                       | event before ``message_stop``) carries ``sidecar.compaction``                            |
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import openai
import pytest
import pytest_asyncio

from tests.conftest import Running, Start

HTTP = {"listen": "127.0.0.1:0"}
BIG = 20_000
"""A tool result's characters: two overflow the 8,000-token window, one fits."""
LAST = "Which version fixed the leak?"


def _model(provider: str, upstream: str, **more: Any) -> dict[str, Any]:
    return {
        "provider": provider,
        "upstream_model": upstream,
        "context_window": 8000,
        "max_output_tokens": 2048,
        "default_output_tokens": 256,
        "compaction": {"keep_tool_results": 1},
        **more,
    }


MODELS = {
    "gpt": _model("oai", "fake-gpt"),  # on_overflow: fail, unless the call asks
    "claude": _model("ant", "fake-claude", on_overflow="compact"),
    "claude-plain": _model("ant", "fake-claude-plain"),  # on_overflow: fail, unless the call asks
}
COMPACT = {"x-sidecar-on-overflow": "compact"}


@pytest_asyncio.fixture
async def front(start_sidecar: Start) -> Running:
    return await start_sidecar(http=HTTP, models=MODELS)


def port(r: Running) -> int:
    assert r.app.http is not None
    return r.app.http.port


@pytest_asyncio.fixture
async def oai(front: Running) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port(front)}/v1", api_key="x", max_retries=0) as c:
        yield c


@pytest_asyncio.fixture
async def ant(front: Running) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(base_url=f"http://127.0.0.1:{port(front)}", api_key="x", max_retries=0) as c:
        yield c


def extension(obj: Any) -> dict[str, Any]:
    value = (obj.model_extra or {})["sidecar"]
    assert isinstance(value, dict)
    return value


def result_text(i: int) -> str:
    return (f"result {i} " * BIG)[:BIG]


def chat_loop() -> list[dict[str, Any]]:
    def asked(i: int) -> dict[str, Any]:
        fn = {"name": "search", "arguments": json.dumps({"query": f"q{i}"})}
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": f"call_{i}", "type": "function", "function": fn}],
        }

    return [
        {"role": "user", "content": "Find the release notes."},
        asked(1),
        {"role": "tool", "tool_call_id": "call_1", "content": result_text(1)},
        asked(2),
        {"role": "tool", "tool_call_id": "call_2", "content": result_text(2)},
        {"role": "assistant", "content": "Here they are."},
        {"role": "user", "content": LAST},
    ]


def check(ext: dict[str, Any], trigger: str = "estimate") -> None:
    c = ext["compaction"]
    assert c["trigger"] == trigger
    assert c["tokens_before"] > c["tokens_after"]
    assert [s["strategy"] for s in c["steps"]] == ["tool_results"]
    assert c["summarizer_calls"] == 0
    assert c["messages"][-1]["text"] == LAST
    assert "tool search removed (20000 characters)" in c["messages"][2]["tool_results"][0]["content"]


async def test_openai_chat_compacts_when_the_call_asks(front: Running, oai: openai.AsyncOpenAI) -> None:
    reply = await oai.chat.completions.create(
        model="gpt", messages=chat_loop(), extra_headers={"x-sidecar-on-overflow": "compact"}
    )
    check(extension(reply))
    sent = front.provider.requests(model="fake-gpt")[-1]["body"]["messages"]
    assert "removed (20000 characters)" in sent[2]["content"]
    assert sent[4]["content"] == result_text(2)


async def test_openai_chat_without_the_header_fails_as_before(front: Running, oai: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        await oai.chat.completions.create(model="gpt", messages=chat_loop())
    assert err.value.code == "context_length_exceeded"
    assert front.provider.requests(model="fake-gpt") == []


async def test_openai_chat_provider_too_long_compacts_and_retries(front: Running, oai: openai.AsyncOpenAI) -> None:
    front.provider.script("fake-gpt", [{"preset": "context_too_long"}])
    messages = chat_loop()
    messages[2]["content"], messages[4]["content"] = "r1 " * 2000, "r2 " * 2000  # fits the estimate
    reply = await oai.chat.completions.create(
        model="gpt",
        messages=messages,
        extra_headers={"x-sidecar-on-overflow": "compact", "x-sidecar-compaction": "reasoning,tool_results"},
    )
    c = extension(reply)["compaction"]
    assert c["trigger"] == "provider"
    assert [s["strategy"] for s in c["steps"]] == ["tool_results"]
    assert len(front.provider.requests(model="fake-gpt")) == 2


async def test_openai_chat_stream_says_it_in_the_last_chunk(oai: openai.AsyncOpenAI) -> None:
    stream = await oai.chat.completions.create(
        model="gpt", messages=chat_loop(), stream=True, extra_headers={"x-sidecar-on-overflow": "compact"}
    )
    chunks = [chunk async for chunk in stream]
    check(extension(chunks[-1]))


async def test_a_bad_header_is_refused_naming_it(oai: openai.AsyncOpenAI) -> None:
    for header, value in [("x-sidecar-on-overflow", "shrink"), ("x-sidecar-compaction", "tool_results,shrink")]:
        with pytest.raises(openai.BadRequestError) as err:
            await oai.chat.completions.create(model="gpt", messages=chat_loop(), extra_headers={header: value})
        assert f"header {header}" in err.value.message


async def test_a_summarize_the_model_cannot_run_is_refused_naming_the_header(oai: openai.AsyncOpenAI) -> None:
    headers = {"x-sidecar-on-overflow": "compact", "x-sidecar-compaction": "summarize"}
    with pytest.raises(openai.BadRequestError) as err:
        await oai.chat.completions.create(model="gpt", messages=chat_loop(), extra_headers=headers)
    assert "header x-sidecar-compaction" in err.value.message
    assert "needs a summarizer" in err.value.message


async def test_openai_responses_compacts(front: Running, oai: openai.AsyncOpenAI) -> None:
    reply = await oai.responses.create(model="gpt", input=responses_loop(), extra_headers=COMPACT)
    c = extension(reply)["compaction"]
    assert [s["strategy"] for s in c["steps"]] == ["tool_results"]
    assert c["tokens_before"] > c["tokens_after"]
    assert c["messages"][-1]["text"] == LAST


def anthropic_loop() -> list[Any]:
    """The tool loop in the Messages shape: two long tool results, an answer, the last user turn."""
    messages: list[Any] = [{"role": "user", "content": "Find the release notes."}]
    for i in (1, 2):
        messages.append(
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"tu_{i}", "name": "search", "input": {}}]}
        )
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"tu_{i}", "content": result_text(i)}]}
        )
    return [*messages, {"role": "assistant", "content": "Here they are."}, {"role": "user", "content": LAST}]


def responses_loop() -> list[Any]:
    """The tool loop as Responses input items."""
    items: list[Any] = [{"role": "user", "content": "Find the release notes."}]
    for i in (1, 2):
        items.append({"type": "function_call", "call_id": f"call_{i}", "name": "search", "arguments": "{}"})
        items.append({"type": "function_call_output", "call_id": f"call_{i}", "output": result_text(i)})
    return [*items, {"role": "assistant", "content": "Here they are."}, {"role": "user", "content": LAST}]


def check_anthropic_sent(front: Running, upstream: str) -> None:
    """The older tool result became a note, the newer one and the last turn went whole."""
    sent = front.provider.requests(model=upstream)[-1]["body"]["messages"]
    first = sent[2]["content"][0]
    assert first["tool_use_id"] == "tu_1"
    assert "removed (20000 characters)" in json.dumps(first["content"])
    assert sent[4]["content"][0]["content"] in (result_text(2), [{"type": "text", "text": result_text(2)}])
    assert sent[-1]["content"] in (LAST, [{"type": "text", "text": LAST}])


async def test_anthropic_messages_compact_by_the_models_policy(front: Running, ant: anthropic.AsyncAnthropic) -> None:
    reply = await ant.messages.create(model="claude", max_tokens=256, messages=anthropic_loop())
    c = extension(reply)["compaction"]
    assert c["trigger"] == "estimate"
    assert [s["strategy"] for s in c["steps"]] == ["tool_results"]
    check_anthropic_sent(front, "fake-claude")


async def test_anthropic_headers_compact_a_model_whose_policy_is_fail(
    front: Running, ant: anthropic.AsyncAnthropic
) -> None:
    with pytest.raises(anthropic.BadRequestError):  # the model's own policy: fail
        await ant.messages.create(model="claude-plain", max_tokens=256, messages=anthropic_loop())
    assert front.provider.requests(model="fake-claude-plain") == []
    reply = await ant.messages.create(
        model="claude-plain", max_tokens=256, messages=anthropic_loop(), extra_headers=COMPACT
    )
    check(extension(reply))
    check_anthropic_sent(front, "fake-claude-plain")
    assert len(front.provider.requests(model="fake-claude-plain")) == 1


async def test_anthropic_compaction_header_names_the_strategies(front: Running, ant: anthropic.AsyncAnthropic) -> None:
    only_reasoning = {**COMPACT, "x-sidecar-compaction": "reasoning"}  # no reasoning here: nothing to compact
    with pytest.raises(anthropic.BadRequestError) as err:
        await ant.messages.create(
            model="claude-plain", max_tokens=256, messages=anthropic_loop(), extra_headers=only_reasoning
        )
    assert "even compacted (nothing to compact by reasoning)" in err.value.message
    assert front.provider.requests(model="fake-claude-plain") == []
    both = {**COMPACT, "x-sidecar-compaction": "reasoning,tool_results"}
    reply = await ant.messages.create(
        model="claude-plain", max_tokens=256, messages=anthropic_loop(), extra_headers=both
    )
    check(extension(reply))


async def test_anthropic_stream_says_it_in_its_message_delta(ant: anthropic.AsyncAnthropic) -> None:
    stream = await ant.messages.create(
        model="claude-plain", max_tokens=256, messages=anthropic_loop(), stream=True, extra_headers=COMPACT
    )
    events = [event async for event in stream]
    assert [e.type for e in events[-2:]] == ["message_delta", "message_stop"]
    check(extension(events[-2]))
    assert all("sidecar" not in (e.model_extra or {}) for e in events[:-2])  # said once, at the end


async def test_openai_responses_stream_says_it_in_its_last_event(oai: openai.AsyncOpenAI) -> None:
    stream = await oai.responses.create(model="gpt", input=responses_loop(), stream=True, extra_headers=COMPACT)
    events = [event async for event in stream]
    last = events[-1]
    assert last.type == "response.completed"
    c = extension(last.response)["compaction"]
    assert c["trigger"] == "estimate"
    assert [s["strategy"] for s in c["steps"]] == ["tool_results"]
    assert c["tokens_before"] > c["tokens_after"]
    assert c["messages"][-1]["text"] == LAST
