"""Compaction on every upstream wire format: old tool results shortened, and the provider's own too-long.

Each format's fake answers from its own wire (``providers/formats/*/fake.py``); the conversation goes in over
gRPC (a tool loop, two long results), and what the fake received is read back: the older result a note
naming the tool, its call still paired with it, the newer result and the last user turn whole. The fake's
``context_too_long`` is each provider's own words for it (OpenAI's ``context_length_exceeded``, Anthropic's
"prompt is too long", Gemini's token count, Bedrock's ValidationException): the sidecar compacts and tries
once more.
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

from sidecar.fakes import FakeProvider, ThreadedServer
from sidecar.providers.formats.bedrock_converse.fake import FAKE_ACCESS_KEY, FAKE_SECRET_KEY
from tests.conftest import Running, Start

BIG = 20_000
LAST = "Which version fixed the leak?"
FORMATS = {
    "openai": ("/v1", {"api_key": "sk-test-SECRETKEY1234567890"}, "fake-gpt"),
    "openai_responses": ("/v1", {"api_key": "sk-resp-test-SECRETKEY1234567890"}, "fake-resp"),
    "anthropic": ("", {"api_key": "sk-ant-SECRETKEY1234567890"}, "fake-claude"),
    "gemini": ("", {"api_key": "AIza-test-SECRETKEY1234567890"}, "fake-gemini"),
    "bedrock_converse": ("", {"region": "us-east-1"}, "anthropic.claude-sonnet-4-20250514-v1:0"),
}
every_format = pytest.mark.parametrize("wire", list(FORMATS))


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", FAKE_ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", FAKE_SECRET_KEY)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)


@pytest_asyncio.fixture
async def on_format(aws_env: None, start_sidecar: Start, provider: ThreadedServer[FakeProvider]) -> AsyncIterator[Any]:
    channels: list[grpc.aio.Channel] = []

    async def start(wire: str) -> tuple[Running, pb_grpc.SidecarStub, str]:
        path, extra, upstream = FORMATS[wire]
        running = await start_sidecar(
            providers={"up": {"wire_format": wire, "base_url": provider.url + path, **extra}},
            models={
                "m": {
                    "provider": "up",
                    "upstream_model": upstream,
                    "context_window": 8000,
                    "max_output_tokens": 2048,
                    "default_output_tokens": 256,
                    "on_overflow": "compact",
                    "compaction": {"keep_tool_results": 1},
                }
            },
        )
        channel = grpc.aio.insecure_channel(running.app.address)
        channels.append(channel)
        return running, pb_grpc.SidecarStub(channel), upstream

    yield start
    for channel in channels:
        await channel.close()


def result_text(i: int, chars: int) -> str:
    return (f"result {i} " * chars)[:chars]


def tool_loop(chars: int = BIG) -> list[pb.Message]:
    def asked(i: int) -> pb.Message:
        call = pb.ToolCall(id=f"call_{i}", name="search", arguments_json=json.dumps({"query": f"q{i}"}))
        return pb.Message(role=pb.ROLE_ASSISTANT, tool_calls=[call])

    def answered(i: int) -> pb.Message:
        done = pb.ToolCallResult(call_id=f"call_{i}", name="search", content=result_text(i, chars))
        return pb.Message(role=pb.ROLE_TOOL, tool_results=[done])

    return [
        pb.Message(role=pb.ROLE_USER, text="Find the release notes."),
        asked(1),
        answered(1),
        asked(2),
        answered(2),
        pb.Message(role=pb.ROLE_ASSISTANT, text="Here they are."),
        pb.Message(role=pb.ROLE_USER, text=LAST),
    ]


SEARCH = pb.ToolDefinition(
    name="search",
    description="Search the docs.",
    parameters_json=json.dumps({"type": "object", "properties": {"query": {"type": "string"}}}),
)


def request(chars: int = BIG) -> pb.CallModelRequest:
    return pb.CallModelRequest(model="m", messages=tool_loop(chars), tools=[SEARCH])


def body_text(record: dict[str, Any]) -> str:
    return json.dumps(record["body"], ensure_ascii=False)


@every_format
async def test_old_tool_results_are_shortened_on_every_format(on_format: Any, wire: str) -> None:
    running, stub, upstream = await on_format(wire)
    reply = await stub.CallModel(request())
    c = reply.compaction
    assert c.trigger == pb.COMPACTION_TRIGGER_ESTIMATE
    assert [(s.strategy, list(s.turns)) for s in c.steps] == [(pb.COMPACTION_STRATEGY_TOOL_RESULTS, [2])]
    (sent,) = running.provider.requests(model=upstream)
    body = body_text(sent)
    assert "an older result of tool search removed (20000 characters)" in body
    assert result_text(2, BIG) in body
    assert result_text(1, BIG) not in body
    assert body.count("call_1") >= 2  # the call and its (shortened) result, still paired
    assert LAST in body
    print(f"\n{wire}: {c.tokens_before} -> {c.tokens_after} estimated tokens")


@every_format
async def test_the_providers_own_too_long_compacts_on_every_format(on_format: Any, wire: str) -> None:
    running, stub, upstream = await on_format(wire)
    running.provider.script(upstream, [{"preset": "context_too_long"}])
    reply = await stub.CallModel(request(8_000))  # fits the estimate: only the provider's count says too long
    c = reply.compaction
    assert c.trigger == pb.COMPACTION_TRIGGER_PROVIDER
    assert [s.strategy for s in c.steps] == [pb.COMPACTION_STRATEGY_TOOL_RESULTS]
    first, second = running.provider.requests(model=upstream)
    assert result_text(1, 8_000) in body_text(first)
    assert "tool search removed (8000 characters)" in body_text(second)
    assert result_text(2, 8_000) in body_text(second)
