"""LlamaIndex's function agent as a real peer of the OpenAI-compatible front (docs/peers.md).

tests/peers/llamaindex/agent.py runs ``FunctionAgent`` (``llama_index.core.agent.workflow``) over
``OpenAILike(api_base=<the sidecar>/v1)`` against this sidecar, which calls the fake provider. It runs in
a venv of its own, ``.venv-peers/llamaindex`` (``make peers-deps``: its pins are
tests/peers/llamaindex/requirements.txt), since LlamaIndex's OpenAI LLM requires ``openai<3`` and the
project's venv pins ``openai`` 3; the test runs it as a subprocess, as the Vercel AI SDK's script is run.
Its tools are the sidecar's, called over /mcp: ``fail_fetch`` fails (the fake tool backend's 422) and
raises, and the agent hands the exception's text, the sidecar's ``model_text``, back to the model; the
fake provider's next request carries it. The agent runs at its defaults (``streaming=True``: every model
call streamed) and whole (``streaming=False``).

LlamaIndex does not read ``x-should-retry``: its OpenAI LLM wraps each whole call in retries of its own
(tenacity; ``max_retries=3`` tries in all within 60 s, on a 429, a 5xx, a timeout or a connection error,
the 429's ``retry-after`` or else 1 s, then 1 to 2 s, apart), and so re-sends a failure the sidecar already
judged final; a streamed call's request is made after those retries returned the stream, so it is not
re-sent. The last test proves both, and that the re-sends are answered from memory
(server/http/resends.py): the provider is called once.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from sidecar.telemetry import names as n
from sidecar.telemetry.testing import InMemoryTelemetry, install_in_memory
from tests.conftest import Running, Start

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "sidecar" / "__init__.py").is_file())
"""The checkout: wherever in tests/ this file is moved."""
SCRIPT = ROOT / "tests" / "peers" / "llamaindex" / "agent.py"
# make peers-latest points it at a scratch venv holding the newest releases (tools/peers_latest.py)
PYTHON = Path(os.environ.get("SIDECAR_PEER_LLAMAINDEX") or ROOT / ".venv-peers" / "llamaindex") / "bin" / "python"
UPSTREAM = "fake-gpt"
FAIL = {"preset": "reply", "tool_calls": [{"name": "fail_fetch", "arguments": {"mode": "422"}}]}
FETCH = {"preset": "reply", "tool_calls": [{"name": "fetch", "arguments": {"id": "doc-1"}}]}
QUOTA = [{"preset": "insufficient_quota", "repeat": 50}]


@pytest_asyncio.fixture
async def http_sidecar(start_sidecar: Start) -> Running:
    return await start_sidecar(http={"listen": "127.0.0.1:0"})


async def run_peer(r: Running, mode: str) -> dict[str, Any]:
    assert PYTHON.is_file(), f"{PYTHON} is missing: make peers-deps"
    assert r.app.http is not None
    proc = await asyncio.create_subprocess_exec(
        PYTHON,
        "-I",  # the peer's venv alone: not this checkout, not PYTHONPATH
        SCRIPT,
        f"http://127.0.0.1:{r.app.http.port}",
        mode,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=90)
    assert proc.returncode == 0, err.decode()
    value = json.loads(out.decode().strip().splitlines()[-1])
    assert isinstance(value, dict)
    return value


def tool_messages(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["body"]["messages"] if m["role"] == "tool"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["stream", "whole"])
async def test_the_function_agent_reads_a_failing_tools_model_text_and_answers(
    http_sidecar: Running, mode: str
) -> None:
    streamed = mode == "stream"
    http_sidecar.provider.script(UPSTREAM, [FAIL, FETCH] + ([{"delta_chars": 4}] if streamed else []))
    run = await run_peer(http_sidecar, mode)
    requests = http_sidecar.provider.requests(model=UPSTREAM)
    assert len(requests) == 3  # fail_fetch, fetch, the answer
    assert all(bool(r["body"].get("stream")) is streamed for r in requests)
    # LlamaIndex's defaults, carried to the provider as sent (docs/carried.md)
    assert {r["body"]["tool_choice"] for r in requests} == {"auto"}
    assert {r["body"]["parallel_tool_calls"] for r in requests} == {True}
    assert {t["function"]["strict"] for r in requests for t in r["body"]["tools"]} == {False}
    (failed,) = tool_messages(requests[1])
    assert "422" in failed
    assert "correctable" in failed
    after_failure, fetched = tool_messages(requests[2])
    assert after_failure == failed
    assert json.loads(fetched)["id"] == "doc-1"
    assert [(t["name"], t["is_error"]) for t in run["tools"]] == [("fail_fetch", True), ("fetch", False)]
    assert run["tools"][0]["content"] == failed  # what the agent handed back is the sidecar's model_text
    assert run["text"].startswith("Based on the tool result")
    if streamed:
        assert run["deltas"] > 1


@pytest.fixture
def otel() -> InMemoryTelemetry:
    telemetry = install_in_memory()
    telemetry.clear()
    return telemetry


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["stream", "whole"])
async def test_the_agent_re_sends_a_whole_calls_failure_not_a_streams_and_the_provider_sees_it_once(
    http_sidecar: Running, otel: InMemoryTelemetry, mode: str
) -> None:
    http_sidecar.provider.script(UPSTREAM, QUOTA)
    run = await run_peer(http_sidecar, mode)
    # whole: OpenAILike's own retries re-send the 429 twice (1 s, then 1 to 2 s, apart) and get the first answer
    # again; streamed (the agent's default): its retries wrap only the making of the stream, not the request, so
    # nothing is re-sent (and the SDK beneath reads x-should-retry: false)
    resends = 2 if mode == "whole" else 0
    assert run == {"error": "RateLimitError", "status": 429, "replayed": "true" if resends else None}
    assert len(http_sidecar.provider.requests(model=UPSTREAM)) == 1  # quota is final: one attempt, once
    points = otel.metrics().get(n.METRIC_REPLAYED, [])
    assert [(dict(p.attributes), p.value) for p in points] == (
        [({n.HTTP_ROUTE: "/v1/chat/completions", n.FAILURE_KIND: "QUOTA_EXHAUSTED"}, resends)] if resends else []
    )
