"""The Vercel AI SDK as a real peer of the OpenAI-compatible front and the MCP front (docs/peers.md).

tests/peers/vercel/agent.mjs (``ai`` and ``@ai-sdk/openai-compatible``, pinned by its package-lock.json,
installed by ``make`` with ``npm ci``) runs ``generateText`` or ``streamText``, each a tool loop
(``stopWhen: stepCountIs(5)``) against this sidecar; its tools are the sidecar's, called over /mcp.
The failing tool (the fake tool backend's 422) throws the sidecar's ``model_text``; the SDK hands it
back to the model, and the fake provider's next request carries it in the tool message.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.conftest import Running, Start

PEER = Path(__file__).resolve().parent / "peers" / "vercel"
UPSTREAM = "fake-gpt"
FAIL = {"preset": "reply", "tool_calls": [{"name": "fail_fetch", "arguments": {"mode": "422"}}]}
FETCH = {"preset": "reply", "tool_calls": [{"name": "fetch", "arguments": {"id": "doc-1"}}]}


@pytest_asyncio.fixture
async def http_sidecar(start_sidecar: Start) -> Running:
    return await start_sidecar(http={"listen": "127.0.0.1:0"})


async def run_peer(r: Running, mode: str) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None, "node is missing"
    assert (PEER / "node_modules" / "ai").is_dir(), "tests/peers/vercel is not installed: make peers-deps"
    assert r.app.http is not None
    proc = await asyncio.create_subprocess_exec(
        node,
        "agent.mjs",
        f"http://127.0.0.1:{r.app.http.port}",
        mode,
        cwd=PEER,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()
    value = json.loads(out.decode().strip().splitlines()[-1])
    assert isinstance(value, dict)
    return value


def tool_messages(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["body"]["messages"] if m["role"] == "tool"]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", ["generate", "stream"])
async def test_a_tool_loop_reads_a_failing_tools_model_text_and_answers(http_sidecar: Running, mode: str) -> None:
    http_sidecar.provider.script(UPSTREAM, [FAIL, FETCH] + ([{"delta_chars": 4}] if mode == "stream" else []))
    run = await run_peer(http_sidecar, mode)
    sent = http_sidecar.provider.requests(model=UPSTREAM)
    assert len(sent) == 3  # fail_fetch, fetch, the answer
    assert all(bool(r["body"].get("stream")) is (mode == "stream") for r in sent)
    (failed,) = run["failures"]
    assert "422" in failed
    assert [s["toolCalls"] for s in run["steps"]] == [["fail_fetch"], ["fetch"], []]
    assert run["steps"][0]["toolErrors"] == [failed]
    assert tool_messages(sent[1]) == [failed]  # the sidecar's model_text, as the model read it
    (after_failure, fetched) = tool_messages(sent[2])
    assert after_failure == failed
    assert json.loads(fetched)["id"] == "doc-1"
    assert run["text"].startswith("Based on the tool result")
    if mode == "stream":
        assert run["deltas"] > 1
