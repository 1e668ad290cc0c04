"""pydantic-ai as a real peer of the OpenAI-compatible front (docs/peers.md).

An ``Agent`` on ``OpenAIChatModel`` + ``OpenAIProvider(base_url=<the sidecar>/v1)`` runs a tool loop
against the sidecar, which calls the fake provider. Its two tools are the sidecar's own tools, run
through ExecuteTool: ``fetch`` answers, ``fail_fetch`` fails (the fake tool backend's 422), and the
tool function hands the sidecar's ``model_text`` back to the model as pydantic-ai's ``ModelRetry``.
The fake provider's next request carries that text in the tool message: the model reads it.

pydantic-ai's ``AnthropicModel`` at its defaults (``max_tokens: 16384`` for a model it does not know)
runs whole and streamed against ``sidecar serve --http`` on the embedded default, as ``make run`` serves.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from anthropic import AsyncAnthropic
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

from tests.conftest import Running, Start
from tests.fronts.test_http_limits import Served, received, serving_the_default

UPSTREAM = "fake-gpt"
FAIL = {"preset": "reply", "tool_calls": [{"name": "fail_fetch", "arguments": {"mode": "422"}}]}
FETCH = {"preset": "reply", "tool_calls": [{"name": "fetch", "arguments": {"id": "doc-1"}}]}


@pytest_asyncio.fixture
async def http_sidecar(start_sidecar: Start) -> Running:
    return await start_sidecar(http={"listen": "127.0.0.1:0"})


@pytest_asyncio.fixture
async def agent(http_sidecar: Running) -> AsyncIterator[tuple[Agent[None, str], list[str]]]:
    assert http_sidecar.app.http is not None
    base_url = f"http://127.0.0.1:{http_sidecar.app.http.port}/v1"
    provider = OpenAIProvider(base_url=base_url, api_key="unused-by-the-sidecar")
    model = OpenAIChatModel("gpt", provider=provider)  # pydantic-ai's defaults: strict tools where the schema allows
    agent: Agent[None, str] = Agent(model, instructions="Use the tools.", retries=2)
    model_texts: list[str] = []

    async def run(name: str, arguments: dict[str, Any]) -> str:
        outcome = await http_sidecar.client.execute_tool(name, json.dumps(arguments))
        if outcome.WhichOneof("outcome") == "failure":
            model_texts.append(outcome.model_text)
            raise ModelRetry(outcome.model_text)
        return outcome.model_text

    @agent.tool_plain
    async def fail_fetch(mode: str) -> str:
        """Fetch from the flaky service."""
        return await run("fail_fetch", {"mode": mode})

    @agent.tool_plain
    async def fetch(id: str) -> str:
        """Fetch a document by its id."""
        return await run("fetch", {"id": id})

    yield agent, model_texts
    await provider.client.close()


def error_of(message: dict[str, Any]) -> str:
    """What a failed tool's message says: pydantic-ai wraps a ModelRetry's text as ``{"error": text}``."""
    error = json.loads(message["content"])["error"]
    assert isinstance(error, str)
    return error


def tool_messages(r: Running) -> list[dict[str, Any]]:
    """The tool messages of the last request the fake provider received."""
    body = r.provider.requests(model=UPSTREAM)[-1]["body"]
    return [m for m in body["messages"] if m["role"] == "tool"]


async def test_a_whole_run_reads_the_failing_tools_model_text_and_finishes(
    http_sidecar: Running, agent: tuple[Agent[None, str], list[str]]
) -> None:
    runner, model_texts = agent
    http_sidecar.provider.script(UPSTREAM, [FAIL, FETCH])
    result = await runner.run("read doc-1")
    (failed,) = model_texts
    assert failed  # the sidecar's text for the model, about the 422
    requests = http_sidecar.provider.requests(model=UPSTREAM)
    assert len(requests) == 3  # fail_fetch, fetch, the answer
    # pydantic-ai's default strict tools reached the provider strict, not refused and not dropped
    assert all([t["function"].get("strict") for t in r["body"]["tools"]] == [True, True] for r in requests)
    second = [m for m in requests[1]["body"]["messages"] if m["role"] == "tool"]
    assert failed in error_of(second[-1])  # what the model read after the failure
    (fail_msg, fetch_msg) = tool_messages(http_sidecar)
    assert failed in error_of(fail_msg)
    assert result.output.startswith("Based on the tool result")
    assert fetch_msg["content"][:40] in result.output


async def test_a_streamed_run_reads_the_failing_tools_model_text_and_streams_the_answer(
    http_sidecar: Running, agent: tuple[Agent[None, str], list[str]]
) -> None:
    runner, model_texts = agent
    http_sidecar.provider.script(UPSTREAM, [FAIL, FETCH, {"delta_chars": 4}])
    async with runner.run_stream("read doc-1") as stream:
        pieces = [piece async for piece in stream.stream_text(delta=True, debounce_by=None)]
    (failed,) = model_texts
    assert len(pieces) > 1
    text = "".join(pieces)
    assert text.startswith("Based on the tool result")
    requests = http_sidecar.provider.requests(model=UPSTREAM)
    assert all(r["body"].get("stream") for r in requests)
    (fail_msg, _) = tool_messages(http_sidecar)
    assert failed in error_of(fail_msg)


# ---------------------------------------------------------------- the Anthropic model at its defaults


@pytest.fixture(scope="module")
def default_sidecar() -> Iterator[Served]:
    with serving_the_default() as running:
        yield running


@pytest_asyncio.fixture
async def anthropic_agent(default_sidecar: Served) -> AsyncIterator[Agent[None, str]]:
    """pydantic-ai's Anthropic model as it comes: for a model it does not know, ``max_tokens: 16384``.
    Its client is closed after the test: one left to the garbage collector, collected during a later
    ``ast.parse``, trips CPython 3.11.7's "AST constructor recursion depth mismatch"
    (tests/processes/test_layout.py)."""
    async with AsyncAnthropic(base_url=default_sidecar.http, api_key="unused", max_retries=0) as client:
        provider = AnthropicProvider(anthropic_client=client)
        yield Agent(AnthropicModel("local-claude", provider=provider), instructions="Be brief.")


async def test_the_anthropic_model_at_its_defaults_runs_against_the_embedded_default(
    default_sidecar: Served, anthropic_agent: Agent[None, str]
) -> None:
    result = await anthropic_agent.run("hello")
    assert result.output == "You said: hello"
    body = received(default_sidecar, "fake-claude")[-1]
    assert body["max_tokens"] == 16_384  # its default, taken as Anthropic takes it
    assert not body.get("stream")


async def test_the_anthropic_model_at_its_defaults_streams_against_the_embedded_default(
    default_sidecar: Served, anthropic_agent: Agent[None, str]
) -> None:
    async with anthropic_agent.run_stream("hello there") as stream:
        pieces = [piece async for piece in stream.stream_text(delta=True, debounce_by=None)]
    assert "".join(pieces) == "You said: hello there"
    body = received(default_sidecar, "fake-claude")[-1]
    assert (body["max_tokens"], body["stream"]) == (16_384, True)
