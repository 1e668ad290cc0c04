"""LangChain's ``ChatAnthropic`` as a real peer of the Anthropic front (docs/peers.md).

``ChatAnthropic(base_url=<the sidecar>)`` is bound to the sidecar's own tool definitions (ListTools'
Anthropic JSON) and runs a tool loop: each tool call runs through the sidecar's ExecuteTool, and its
``model_text`` goes back as a ``ToolMessage`` (``status="error"`` when the tool failed). The failing
tool is the fake tool backend's 422; the fake provider's next request carries the sidecar's text in
its ``tool_result`` block: the model reads it. LangSmith tracing is off (no network).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import pytest_asyncio
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage

from tests.conftest import Running, Start

UPSTREAM = "fake-claude"
FAIL = {"preset": "reply", "tool_calls": [{"name": "fail_fetch", "arguments": {"mode": "422"}}]}
FETCH = {"preset": "reply", "tool_calls": [{"name": "fetch", "arguments": {"id": "doc-1"}}]}


@pytest.fixture(autouse=True)
def no_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING"):
        monkeypatch.setenv(name, "false")


@pytest_asyncio.fixture
async def http_sidecar(start_sidecar: Start) -> Running:
    return await start_sidecar(http={"listen": "127.0.0.1:0"})


async def bound(r: Running, *, streaming: bool) -> Any:
    assert r.app.http is not None
    tools = [json.loads(t.anthropic_json) for t in await r.client.list_tools()]
    tools = [t for t in tools if t["name"] in {"fetch", "fail_fetch"}]
    llm = ChatAnthropic(
        model="claude",
        base_url=f"http://127.0.0.1:{r.app.http.port}",
        api_key="unused-by-the-sidecar",
        max_retries=0,
        max_tokens=256,
        streaming=streaming,
    )
    return llm.bind_tools(tools)


async def loop(r: Running, llm: Any, *, streamed: bool, turns: int = 4) -> tuple[AIMessage, list[ToolMessage]]:
    """The manual tool loop: call the model, run its tool calls through the sidecar, until it answers."""
    messages: list[BaseMessage] = [HumanMessage("read doc-1")]
    results: list[ToolMessage] = []
    for _ in range(turns):
        if streamed:
            chunks = [chunk async for chunk in llm.astream(messages)]
            assert len(chunks) > 1
            total = chunks[0]
            for chunk in chunks[1:]:
                total = total + chunk
            assert isinstance(total, AIMessageChunk)
            reply: AIMessage = total
        else:
            reply = await llm.ainvoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            return reply, results
        for call in reply.tool_calls:
            outcome = await r.client.execute_tool(call["name"], json.dumps(call["args"]), call_id=call["id"] or "")
            failed = outcome.WhichOneof("outcome") == "failure"
            result = ToolMessage(outcome.model_text, tool_call_id=call["id"], status="error" if failed else "success")
            results.append(result)
            messages.append(result)
    raise AssertionError(f"no answer in {turns} turns")


def tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        block
        for m in request["body"]["messages"]
        if isinstance(m["content"], list)
        for block in m["content"]
        if block.get("type") == "tool_result"
    ]


def text_of(block: dict[str, Any]) -> str:
    content = block["content"]
    return content if isinstance(content, str) else "".join(part["text"] for part in content)


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_tool_loop_reads_a_failing_tools_model_text_and_answers(http_sidecar: Running, streamed: bool) -> None:
    http_sidecar.provider.script(UPSTREAM, [FAIL, FETCH] + ([{"delta_chars": 4}] if streamed else []))
    llm = await bound(http_sidecar, streaming=streamed)
    answer, (failed, fetched) = await loop(http_sidecar, llm, streamed=streamed)
    assert failed.status == "error"
    assert "422" in str(failed.content)
    requests = http_sidecar.provider.requests(model=UPSTREAM)
    assert len(requests) == 3  # fail_fetch, fetch, the answer
    assert all(bool(r["body"].get("stream")) is streamed for r in requests)
    (after_failure,) = tool_results(requests[1])
    assert text_of(after_failure) == failed.content  # the sidecar's model_text, as the model read it
    assert after_failure.get("is_error") is True
    _, after_fetch = tool_results(requests[2])
    assert text_of(after_fetch) == fetched.content
    assert isinstance(answer.content, (str, list))
    assert answer.text.startswith("Based on the tool result")
