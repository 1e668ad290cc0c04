"""LangGraph's prebuilt ReAct agent as a real peer of the OpenAI-compatible front (docs/peers.md).

LangGraph's ``create_react_agent`` (deprecated since LangGraph 1.0, still what most apps call) and its
successor, LangChain's ``create_agent`` (a LangGraph graph too), each over
``ChatOpenAI(base_url=<the sidecar>/v1)``, all at their defaults, run the
tool loop against the sidecar, which calls the fake provider. Its two tools are the sidecar's own, run
through ExecuteTool: ``fetch`` answers, ``fail_fetch`` fails (the fake tool backend's 422) and raises
LangChain's ``ToolException`` with the sidecar's ``model_text``, which the tool node hands back to the
model as an error ``ToolMessage``. The fake provider's next request carries that text: the model reads
it. The agent runs whole (``ainvoke``) and streamed token by token (``astream(stream_mode="messages")``).
LangSmith tracing is off (no network).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import pytest_asyncio
from langchain.agents import create_agent
from langchain_core.messages import AIMessageChunk, ToolMessage
from langchain_core.tools import BaseTool, ToolException, tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent
from langgraph.warnings import LangGraphDeprecatedSinceV10

from tests.conftest import Running, Start

UPSTREAM = "fake-gpt"
FAIL = {"preset": "reply", "tool_calls": [{"name": "fail_fetch", "arguments": {"mode": "422"}}]}
FETCH = {"preset": "reply", "tool_calls": [{"name": "fetch", "arguments": {"id": "doc-1"}}]}


@pytest.fixture(autouse=True)
def no_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING"):
        monkeypatch.setenv(name, "false")


@pytest_asyncio.fixture
async def http_sidecar(start_sidecar: Start) -> Running:
    return await start_sidecar(http={"listen": "127.0.0.1:0"})


def tools_of(r: Running) -> list[BaseTool]:
    async def run(name: str, arguments: dict[str, Any]) -> str:
        outcome = await r.client.execute_tool(name, json.dumps(arguments))
        if outcome.WhichOneof("outcome") == "failure":
            raise ToolException(outcome.model_text)  # the tool node answers it as an error ToolMessage
        return outcome.model_text

    @tool
    async def fail_fetch(mode: str) -> str:
        """Fetch from the flaky service."""
        return await run("fail_fetch", {"mode": mode})

    @tool
    async def fetch(id: str) -> str:
        """Fetch a document by its id."""
        return await run("fetch", {"id": id})

    for each in (fail_fetch, fetch):
        each.handle_tool_error = True  # LangChain's way for a tool to tell the model it failed
    return [fail_fetch, fetch]


def agent_of(r: Running, builder: str) -> Any:
    assert r.app.http is not None
    llm = ChatOpenAI(model="gpt", base_url=f"http://127.0.0.1:{r.app.http.port}/v1", api_key="unused-by-the-sidecar")
    if builder == "create_agent":
        return create_agent(llm, tools_of(r))
    with pytest.warns(LangGraphDeprecatedSinceV10):  # it says so, and runs
        return create_react_agent(llm, tools_of(r))


def tool_messages(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["body"]["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize("builder", ["create_react_agent", "create_agent"])
@pytest.mark.parametrize("streamed", [False, True])
async def test_the_react_agent_reads_a_failing_tools_model_text_and_answers(
    http_sidecar: Running, streamed: bool, builder: str
) -> None:
    http_sidecar.provider.script(UPSTREAM, [FAIL, FETCH] + ([{"delta_chars": 4}] if streamed else []))
    agent = agent_of(http_sidecar, builder)
    question = {"messages": [("user", "read doc-1")]}
    if streamed:
        tokens: list[str] = []
        results: list[ToolMessage] = []
        async for message, _ in agent.astream(question, stream_mode="messages"):
            if isinstance(message, AIMessageChunk) and message.text:
                tokens.append(message.text)
            elif isinstance(message, ToolMessage):
                results.append(message)
        assert len(tokens) > 1
        answer = "".join(tokens)
    else:
        state = await agent.ainvoke(question)
        results = [m for m in state["messages"] if isinstance(m, ToolMessage)]
        answer = state["messages"][-1].text
    requests = http_sidecar.provider.requests(model=UPSTREAM)
    assert len(requests) == 3  # fail_fetch, fetch, the answer
    assert all(bool(r["body"].get("stream")) is streamed for r in requests)
    (failed,) = tool_messages(requests[1])
    assert "422" in failed
    assert "correctable" in failed
    after_failure, fetched = tool_messages(requests[2])
    assert after_failure == failed
    assert json.loads(fetched)["id"] == "doc-1"
    assert [(m.name, m.status) for m in results] == [("fail_fetch", "error"), ("fetch", "success")]
    assert results[0].content == failed
    assert answer.startswith("Based on the tool result")
