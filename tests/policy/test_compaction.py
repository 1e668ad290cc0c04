"""Compaction over real gRPC: a conversation that does not fit compacted by the model's strategies and sent.

Each test runs a real sidecar on the fake provider and reads both sides: what the fake received (the
compacted conversation, the summarizer's requests counted) and ``CallModelResponse.compaction``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
import pytest_asyncio
from sidecar_contract.v1 import sidecar_pb2 as pb
from sidecar_contract.v1 import sidecar_pb2_grpc as pb_grpc

from sidecar.config import ConfigError, parse_config
from sidecar.telemetry.testing import install_in_memory
from tests.conftest import Running, Start, base_config

BIG = 20_000
"""A tool result's characters: 5,000 estimated tokens, so two of them overflow an 8,000-token window."""


def compacting(**compaction: Any) -> dict[str, Any]:
    """The base models, gpt compacting (keep one tool result, summarize with cheap), and cheap itself."""
    return {
        "gpt": {
            "provider": "oai",
            "upstream_model": "fake-gpt",
            "context_window": 8000,
            "max_output_tokens": 2048,
            "default_output_tokens": 256,
            "on_overflow": "compact",
            "compaction": {"keep_tool_results": 1, "summarizer": "cheap", **compaction},
        },
        "plain": {
            "provider": "oai",
            "upstream_model": "fake-plain",
            "context_window": 8000,
            "max_output_tokens": 2048,
            "default_output_tokens": 256,
            "compaction": {"keep_tool_results": 1},  # on_overflow: fail (the default), unless a call asks
        },
        "cheap": {
            "provider": "oai",
            "upstream_model": "fake-cheap",
            "context_window": 64000,
            "max_output_tokens": 2048,
        },
    }


def msg(role: int, text: str = "", **fields: Any) -> pb.Message:
    return pb.Message(role=role, text=text, **fields)  # type: ignore[arg-type]


def call(i: int) -> pb.ToolCall:
    return pb.ToolCall(id=f"call_{i}", name="search", arguments_json=json.dumps({"query": f"q{i}"}))


def result(i: int, chars: int = BIG) -> pb.Message:
    content = (f"result {i} " * chars)[:chars]
    return msg(pb.ROLE_TOOL, tool_results=[pb.ToolCallResult(call_id=f"call_{i}", content=content, name="search")])


def tool_loop(chars: int = BIG) -> list[pb.Message]:
    """A user asks, the model searches twice (two long results), answers, and the user asks again."""
    return [
        msg(pb.ROLE_USER, "Find the release notes."),
        msg(pb.ROLE_ASSISTANT, tool_calls=[call(1)]),
        result(1, chars),
        msg(pb.ROLE_ASSISTANT, tool_calls=[call(2)]),
        result(2, chars),
        msg(pb.ROLE_ASSISTANT, "Here they are."),
        msg(pb.ROLE_USER, "Which version fixed the leak?"),
    ]


def chatty(chars: int = 40_000) -> list[pb.Message]:
    """An old turn far too long for the window (no tool results to shorten), then the last user turn."""
    return [
        msg(pb.ROLE_USER, "Remember this: " + "lorem ipsum " * (chars // 12)),
        msg(pb.ROLE_ASSISTANT, "Remembered."),
        msg(pb.ROLE_USER, "What did I ask you to remember?"),
    ]


@pytest_asyncio.fixture
async def stub(start_sidecar: Start) -> AsyncIterator[tuple[Running, pb_grpc.SidecarStub]]:
    running = await start_sidecar(models=compacting())
    async with grpc.aio.insecure_channel(running.app.address) as channel:
        yield running, pb_grpc.SidecarStub(channel)


def sent_messages(running: Running, upstream: str) -> list[dict[str, Any]]:
    return running.provider.requests(model=upstream)[-1]["body"]["messages"]  # type: ignore[no-any-return]


async def test_old_tool_results_are_shortened_when_the_estimate_does_not_fit(stub: Any) -> None:
    running, s = stub
    reply = await s.CallModel(pb.CallModelRequest(model="gpt", messages=tool_loop()))
    c = reply.compaction
    assert c.trigger == pb.COMPACTION_TRIGGER_ESTIMATE
    assert c.tokens_before + 256 > 8000
    assert c.tokens_after + 256 <= 8000
    assert [(s.strategy, list(s.turns)) for s in c.steps] == [(pb.COMPACTION_STRATEGY_TOOL_RESULTS, [2])]
    assert c.summarizer_calls == 0
    # the older result became a note naming the tool; the newer one, the pairs and the last turn are whole
    tools = [m for m in sent_messages(running, "fake-gpt") if m["role"] == "tool"]
    assert [t["tool_call_id"] for t in tools] == ["call_1", "call_2"]
    assert "tool search removed (20000 characters)" in tools[0]["content"]
    assert len(tools[1]["content"]) == BIG
    assert sent_messages(running, "fake-gpt")[-1]["content"] == "Which version fixed the leak?"
    # the messages to adopt are the ones sent
    assert len(c.messages) == 7
    assert c.messages[2].tool_results[0].content == tools[0]["content"]
    assert c.messages[6].text == "Which version fixed the leak?"
    print(f"\ntool results: {c.tokens_before} -> {c.tokens_after} estimated tokens")


async def test_without_compaction_the_same_conversation_fails_as_before(stub: Any) -> None:
    running, s = stub
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await s.CallModel(pb.CallModelRequest(model="plain", messages=tool_loop()))
    assert err.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert "estimated at" in (err.value.details() or "")
    assert running.provider.requests(model="fake-plain") == []


async def test_a_call_asks_for_compaction_on_a_model_that_fails_by_default(stub: Any) -> None:
    running, s = stub
    policy = pb.OverflowPolicy(action=pb.OVERFLOW_ACTION_COMPACT, strategies=[pb.COMPACTION_STRATEGY_TOOL_RESULTS])
    reply = await s.CallModel(pb.CallModelRequest(model="plain", messages=tool_loop(), on_overflow=policy))
    assert reply.HasField("compaction")
    assert reply.compaction.tokens_after < reply.compaction.tokens_before
    assert len(running.provider.requests(model="fake-plain")) == 1


async def test_a_call_that_says_fail_is_not_compacted(stub: Any) -> None:
    _, s = stub
    policy = pb.OverflowPolicy(action=pb.OVERFLOW_ACTION_FAIL)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await s.CallModel(pb.CallModelRequest(model="gpt", messages=tool_loop(), on_overflow=policy))
    assert err.value.code() is grpc.StatusCode.FAILED_PRECONDITION


async def test_a_summary_is_made_once_for_the_same_prefix(stub: Any) -> None:
    running, s = stub
    running.provider.script("fake-cheap", [{"preset": "reply", "text": "The user asked me to remember lorem ipsum."}])
    otel = install_in_memory()
    otel.clear()
    first = await s.CallModel(pb.CallModelRequest(model="gpt", messages=chatty()))
    c = first.compaction
    assert [st.strategy for st in c.steps] == [pb.COMPACTION_STRATEGY_SUMMARIZE]
    assert list(c.steps[0].turns) == [0, 1]
    assert c.summarizer_calls == 1
    sent = sent_messages(running, "fake-gpt")
    assert "The user asked me to remember lorem ipsum." in sent[0]["content"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[-1]["content"] == "What did I ask you to remember?"
    asked = running.provider.requests(model="fake-cheap")
    assert len(asked) == 1
    assert asked[0]["body"]["max_tokens"] == 1024
    # the same prefix again: the summary is reused, no second summarizing call
    second = await s.CallModel(pb.CallModelRequest(model="gpt", messages=chatty()))
    assert second.compaction.summarizer_calls == 0
    assert second.compaction.tokens_after == c.tokens_after
    assert len(running.provider.requests(model="fake-cheap")) == 1
    print(f"\nsummarize: {c.tokens_before} -> {c.tokens_after} estimated tokens, summarizer calls 1 then 0")
    # a compaction span, the summarizer's chat span its child with its own attempt
    spans = otel.spans()
    compactions = [sp for sp in spans if sp.name == "compaction"]
    assert len(compactions) == 2
    first_span = compactions[0]
    attrs = dict(first_span.attributes or {})
    assert attrs["sidecar.compaction.trigger"] == "estimate"
    assert attrs["sidecar.compaction.tokens_before"] == c.tokens_before
    assert attrs["sidecar.compaction.tokens_after"] == c.tokens_after
    assert list(attrs["sidecar.compaction.strategies"]) == ["summarize"]  # type: ignore[arg-type]
    assert attrs["sidecar.compaction.summarizer_calls"] == 1
    summarizer = [sp for sp in spans if sp.name == "chat cheap"]
    assert len(summarizer) == 1
    assert summarizer[0].parent is not None
    assert summarizer[0].parent.span_id == first_span.context.span_id
    attempts = [sp for sp in spans if sp.parent is not None and sp.parent.span_id == summarizer[0].context.span_id]
    assert [sp.name for sp in attempts] == ["POST"]


async def test_the_provider_saying_too_long_compacts_and_tries_once_more(stub: Any) -> None:
    running, s = stub
    running.provider.script("fake-gpt", [{"preset": "context_too_long"}])
    reply = await s.CallModel(pb.CallModelRequest(model="gpt", messages=tool_loop(8_000)))
    c = reply.compaction
    assert c.trigger == pb.COMPACTION_TRIGGER_PROVIDER
    assert [st.strategy for st in c.steps] == [pb.COMPACTION_STRATEGY_TOOL_RESULTS]
    assert reply.attempts == 2
    first, second = running.provider.requests(model="fake-gpt")
    assert len(first["body"]["messages"][2]["content"]) == 8_000
    assert "removed (8000 characters)" in second["body"]["messages"][2]["content"]


async def test_the_provider_saying_too_long_twice_fails_with_its_overflow(stub: Any) -> None:
    running, s = stub
    running.provider.script("fake-gpt", [{"preset": "context_too_long", "repeat": 2}])
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await s.CallModel(pb.CallModelRequest(model="gpt", messages=tool_loop(8_000)))
    assert err.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert len(running.provider.requests(model="fake-gpt")) == 2


async def test_a_conversation_that_does_not_fit_even_compacted_names_the_sizes(start_sidecar: Start) -> None:
    running = await start_sidecar(models=compacting(strategies=["tool_results", "reasoning"]))
    last = "What now? " + "x" * 40_000  # the last user turn alone is over the window: never touched
    messages = [*tool_loop()[:-1], msg(pb.ROLE_USER, last)]
    async with grpc.aio.insecure_channel(running.app.address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await pb_grpc.SidecarStub(channel).CallModel(pb.CallModelRequest(model="gpt", messages=messages))
    details = err.value.details() or ""
    assert err.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert "8000-token context window even compacted (tool_results)" in details
    assert "before compaction and" in details
    assert "plus an output budget of 256" in details
    assert running.provider.requests(model="fake-gpt") == []


async def test_a_strategy_the_model_cannot_run_is_refused_by_its_path(stub: Any) -> None:
    _, s = stub
    policy = pb.OverflowPolicy(action=pb.OVERFLOW_ACTION_COMPACT, strategies=[pb.COMPACTION_STRATEGY_SUMMARIZE])
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await s.CallModel(pb.CallModelRequest(model="plain", messages=tool_loop(), on_overflow=policy))
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "on_overflow.strategies[0]" in (err.value.details() or "")
    assert "needs a summarizer" in (err.value.details() or "")


async def test_stream_model_final_carries_the_compaction(stub: Any) -> None:
    _, s = stub
    events = [e async for e in s.StreamModel(pb.CallModelRequest(model="gpt", messages=tool_loop()))]
    final = [e for e in events if e.WhichOneof("event") == "final"]
    assert len(final) == 1
    assert final[0].final.compaction.trigger == pb.COMPACTION_TRIGGER_ESTIMATE


async def test_a_route_tries_its_context_fallback_before_compacting(start_sidecar: Start) -> None:
    models = compacting()
    models["big"] = {**models["plain"], "upstream_model": "fake-big", "context_window": 64000}
    models["long"] = {"route": {"balance": {"gpt": 1}, "context_fallback": "big"}}
    running = await start_sidecar(models=models)
    async with grpc.aio.insecure_channel(running.app.address) as channel:
        reply = await pb_grpc.SidecarStub(channel).CallModel(pb.CallModelRequest(model="long", messages=tool_loop()))
    assert reply.served_by == "big"
    assert not reply.HasField("compaction")
    assert len(running.provider.requests(model="fake-big")[0]["body"]["messages"][2]["content"]) == BIG


def _config_text(models: dict[str, Any]) -> str:
    cfg = base_config("http://127.0.0.1:1", "http://127.0.0.1:1", models=models)
    for p in cfg["providers"].values():
        p.pop("api_key")  # secrets come from the environment in a config file
    return json.dumps(cfg)


def test_bad_compaction_config_is_refused_by_its_path() -> None:
    for compaction, words in [
        ({"summarizer": "nope"}, "models.gpt.compaction.summarizer: 'nope' is not a catalog model"),
        ({"strategies": ["summarize"], "summarizer": None}, "summarize needs a summarizer"),
        ({"strategies": ["shrink"]}, "models.gpt.compaction.strategies"),
        ({"keep_tool_results": -1}, "models.gpt.compaction.keep_tool_results"),
    ]:
        with pytest.raises(ConfigError) as err:
            parse_config(_config_text(compacting(**compaction)))
        assert words in str(err.value), str(err.value)
    models = compacting()
    models["gpt"]["on_overflow"] = "shrink"
    with pytest.raises(ConfigError) as err:
        parse_config(_config_text(models))
    assert "models.gpt.on_overflow" in str(err.value)


async def test_a_prefix_longer_than_the_summarizers_window_is_summarized_from_its_ends(start_sidecar: Start) -> None:
    models = compacting(summary_max_tokens=200)
    models["cheap"]["context_window"] = 2000
    running = await start_sidecar(models=models)
    running.provider.script("fake-cheap", [{"preset": "reply", "text": "Lorem ipsum, remembered."}])
    async with grpc.aio.insecure_channel(running.app.address) as channel:
        reply = await pb_grpc.SidecarStub(channel).CallModel(pb.CallModelRequest(model="gpt", messages=chatty()))
    assert reply.compaction.summarizer_calls == 1
    (asked,) = running.provider.requests(model="fake-cheap")
    transcript = asked["body"]["messages"][-1]["content"]
    assert "characters left out" in transcript
    assert transcript.startswith("Summarize this conversation:\n\nuser: Remember this: lorem ipsum")
    assert transcript.endswith("assistant: Remembered.")
    assert len(transcript) <= (2000 - 200) * 0.9 * 4 + 100


async def test_a_stream_the_provider_says_is_too_long_is_compacted_before_its_first_delta(stub: Any) -> None:
    running, s = stub
    running.provider.script("fake-gpt", [{"preset": "context_too_long"}])
    events = [e async for e in s.StreamModel(pb.CallModelRequest(model="gpt", messages=tool_loop(8_000)))]
    assert not [e for e in events if e.WhichOneof("event") == "restart"]
    (final,) = [e.final for e in events if e.WhichOneof("event") == "final"]
    assert final.compaction.trigger == pb.COMPACTION_TRIGGER_PROVIDER
    assert "".join(e.text.text for e in events if e.WhichOneof("event") == "text") == final.message.text
    assert len(running.provider.requests(model="fake-gpt")) == 2


async def test_the_providers_too_long_with_nothing_to_compact_is_its_own_overflow(stub: Any) -> None:
    running, s = stub
    running.provider.script("fake-gpt", [{"preset": "context_too_long"}])
    short = [msg(pb.ROLE_USER, "hello")]
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await s.CallModel(pb.CallModelRequest(model="gpt", messages=short))
    assert err.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert "provider says the conversation is too long" in (err.value.details() or "")
    assert len(running.provider.requests(model="fake-gpt")) == 1


async def test_a_route_moves_on_from_a_deployment_that_cannot_summarize(start_sidecar: Start) -> None:
    models = compacting()
    models["plain2"] = {**models["plain"], "upstream_model": "fake-plain2"}
    models["mixed"] = {"route": {"fallbacks": ["plain", "gpt"]}}  # plain names no summarizer, gpt does
    models["none"] = {"route": {"fallbacks": ["plain", "plain2"]}}  # neither does
    running = await start_sidecar(models=models)
    running.provider.script("fake-cheap", [{"preset": "reply", "text": "The user asked me to remember lorem ipsum."}])
    policy = pb.OverflowPolicy(action=pb.OVERFLOW_ACTION_COMPACT, strategies=[pb.COMPACTION_STRATEGY_SUMMARIZE])
    async with grpc.aio.insecure_channel(running.app.address) as channel:
        s = pb_grpc.SidecarStub(channel)
        reply = await s.CallModel(pb.CallModelRequest(model="mixed", messages=chatty(), on_overflow=policy))
        assert reply.served_by == "gpt"
        assert [(h.deployment, h.kind) for h in reply.hops] == [
            ("plain", pb.FAILURE_KIND_INVALID_INPUT),
            ("gpt", pb.FAILURE_KIND_UNSPECIFIED),
        ]
        assert "on_overflow.strategies[0]" in reply.hops[0].reason
        assert "needs a summarizer" in reply.hops[0].reason
        assert [st.strategy for st in reply.compaction.steps] == [pb.COMPACTION_STRATEGY_SUMMARIZE]
        assert reply.compaction.summarizer_calls == 1
        assert running.provider.requests(model="fake-plain") == []  # refused before sending: no upstream call
        # no deployment of the route can summarize: the refusal is the call's, naming the caller's path
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await s.CallModel(pb.CallModelRequest(model="none", messages=chatty(), on_overflow=policy))
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "on_overflow.strategies[0]" in (err.value.details() or "")
    assert "needs a summarizer" in (err.value.details() or "")
    assert running.provider.requests(model="fake-plain") == running.provider.requests(model="fake-plain2") == []
