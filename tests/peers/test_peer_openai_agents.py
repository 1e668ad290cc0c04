"""The OpenAI Agents SDK as a real peer: an Agent on the sidecar's Responses front, its tools the sidecar's.

``openai-agents`` (pinned in constraints.txt) runs a real ``Agent`` whose model is
``OpenAIResponsesModel`` over an ``AsyncOpenAI`` client pointed at the sidecar's ``/v1/responses``;
the sidecar calls the fake provider in the Responses format. The agent's two function tools call
the sidecar's ExecuteTool (the configured ``search`` and ``note`` tools, against the fake tool
backend). The fake model is scripted: its first turn calls ``search`` with an empty query, which the
sidecar refuses as a correctable INVALID_INPUT; the tool hands the model the failure's
``model_text`` (its explanation and the "may be correctable" line), and the model's next turn
calls it correctly, then calls ``note``, then answers. A second run streams (``Runner.run_streamed``).

Tracing is off (``set_tracing_disabled``): the SDK never calls the network. The tools are the SDK's
defaults (``@function_tool``: strict mode on), so each is sent ``"strict": true``; the sidecar
carries it to the fake provider's request (docs/carried.md, tools.strict).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest_asyncio
from agents import Agent, ModelSettings, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from agents.items import ToolCallOutputItem
from agents.tool import FunctionTool

from sidecar.fakes._threaded import ThreadedServer
from sidecar.fakes.provider import FakeProvider
from tests.conftest import Running, Start

MODEL = "fake-resp"
CORRECTABLE = "[This error may be correctable - you can retry with different parameters or try a different approach]"


@pytest_asyncio.fixture
async def front(start_sidecar: Start, provider: ThreadedServer[FakeProvider]) -> Running:
    set_tracing_disabled(True)
    return await start_sidecar(
        http={"listen": "127.0.0.1:0"},
        providers={"resp": {"wire_format": "openai_responses", "base_url": provider.url + "/v1", "api_key": "sk-x"}},
        models={"resp": {"provider": "resp", "upstream_model": MODEL, "context_window": 16000,
                         "max_output_tokens": 2048, "default_output_tokens": 512}},
    )  # fmt: skip


@pytest_asyncio.fixture
async def client(front: Running) -> AsyncIterator[openai.AsyncOpenAI]:
    assert front.app.http is not None
    url = f"http://127.0.0.1:{front.app.http.port}/v1"
    async with openai.AsyncOpenAI(base_url=url, api_key="unused", max_retries=0) as c:
        yield c


def tools(r: Running) -> list[FunctionTool]:
    """Two function tools, each the sidecar's ExecuteTool: what the model reads is the answer's model_text."""

    @function_tool
    async def search(query: str) -> str:
        """Search the docs for a query."""
        answer = await r.client.execute_tool("search", {"query": query})
        return answer.model_text

    @function_tool
    async def note(text: str) -> str:
        """Write a note down."""
        answer = await r.client.execute_tool("note", {"text": text})
        return answer.model_text

    return [search, note]


def agent(r: Running, client: openai.AsyncOpenAI) -> Agent[Any]:
    return Agent(
        name="researcher",
        instructions="Find what the user asks, note it down, then answer.",
        model=OpenAIResponsesModel(model="resp", openai_client=client),
        model_settings=ModelSettings(),
        tools=list(tools(r)),
    )


def sent(r: Running) -> list[dict[str, Any]]:
    return [rec["body"] for rec in r.provider.requests(model=MODEL)]


def outputs(body: dict[str, Any]) -> list[Any]:
    return [i["output"] for i in body["input"] if isinstance(i, dict) and i.get("type") == "function_call_output"]


async def test_an_agent_corrects_a_failing_tool_call_from_the_model_text_it_read(
    front: Running, client: openai.AsyncOpenAI
) -> None:
    front.provider.script(MODEL, [
        {"preset": "reply", "tool_calls": [{"name": "search", "arguments": {"query": ""}}]},
        {"preset": "reply", "tool_calls": [{"name": "search", "arguments": {"query": "retries"}}]},
        {"preset": "reply", "tool_calls": [{"name": "note", "arguments": {"text": "3 retries by default"}}]},
    ])  # fmt: skip
    result = await Runner.run(agent(front, client), "How many retries does the sidecar make?")
    assert isinstance(result.final_output, str)
    assert result.final_output.startswith("Based on the tool result")
    bodies = sent(front)
    assert len(bodies) == 4
    assert all(b["store"] is False for b in bodies)  # the upstream runs stateless, whatever the SDK sends
    assert all("previous_response_id" not in b for b in bodies)
    # the SDK's default strict tools reached the provider strict, not refused and not dropped
    assert all([t["strict"] for t in b["tools"]] == [True, True] for b in bodies)
    failed = outputs(bodies[1])[0]
    assert CORRECTABLE in failed  # what the model read: the sidecar's explanation and the retry line
    assert "query" in failed
    assert CORRECTABLE not in outputs(bodies[2])[1]  # the corrected call succeeded
    called = [i for i in result.new_items if isinstance(i, ToolCallOutputItem)]
    assert len(called) == 3
    assert [rec["path"] for rec in front.backend.requests()] == ["/search", "/notes"]  # the refused call sent nothing


async def test_a_streamed_agent_run_reads_the_deltas_through_the_front(
    front: Running, client: openai.AsyncOpenAI
) -> None:
    front.provider.script(MODEL, [{"preset": "reply", "tool_calls": [{"name": "search", "arguments": {"query": "x"}}]}])
    run = Runner.run_streamed(agent(front, client), "Search for x")
    deltas: list[str] = []
    kinds: set[str] = set()
    async for event in run.stream_events():
        kinds.add(event.type)
        if event.type == "raw_response_event" and event.data.type == "response.output_text.delta":
            deltas.append(event.data.delta)
    assert {"raw_response_event", "run_item_stream_event"} <= kinds
    assert isinstance(run.final_output, str)
    assert "".join(deltas) == run.final_output
    assert run.final_output.startswith("Based on the tool result")
    bodies = sent(front)
    assert [b.get("stream") for b in bodies] == [True, True]
