"""The Vercel AI SDK as a real peer of the model fronts and the MCP front (docs/peers.md).

tests/peers/vercel/agent.mjs (``ai`` and its provider packages, pinned by its package-lock.json,
installed by ``make`` with ``npm ci``) runs ``generateText`` or ``streamText``, each a tool loop
(``stopWhen: stepCountIs(5)``) against this sidecar; its tools are the sidecar's, called over /mcp.
The model is each provider package at its defaults: ``@ai-sdk/openai-compatible`` on the Chat
Completions front, ``@ai-sdk/openai`` (whose default model speaks the Responses API) on the Responses
front, ``@ai-sdk/anthropic`` on the Anthropic front (its tools' ``eager_input_streaming: true`` carried
to the Anthropic deployment). The failing tool (the fake tool backend's 422) goes back as the SDK's
``error-text``: the sidecar's ``model_text``, which the fake provider's next request carries.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.conftest import Running, Start, base_config

# make peers-latest points it at a scratch copy holding the newest releases (tools/peers_latest.py)
PEER = Path(os.environ.get("SIDECAR_PEER_VERCEL") or Path(__file__).resolve().parent / "vercel")
# the provider package: (the upstream model its front's model maps to, the fake's wire format)
PROVIDERS = {
    "compatible": ("fake-gpt", "openai"),
    "openai": ("fake-gpt", "openai"),
    "anthropic": ("fake-claude", "anthropic"),
}
FAIL = {"preset": "reply", "tool_calls": [{"name": "fail_fetch", "arguments": {"mode": "422"}}]}
FETCH = {"preset": "reply", "tool_calls": [{"name": "fetch", "arguments": {"id": "doc-1"}}]}


@pytest_asyncio.fixture
async def http_sidecar(start_sidecar: Start) -> Running:
    # claude's real limits, as the embedded default has them: @ai-sdk/anthropic's default max_tokens for a
    # model it does not know is 4096, past the test config's 2048
    models = base_config("", "")["models"]
    models["claude"] = {**models["claude"], "context_window": 200_000, "max_output_tokens": 64_000}
    return await start_sidecar(http={"listen": "127.0.0.1:0"}, models=models)


async def run_peer(r: Running, mode: str, package: str = "compatible") -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None, "node is missing"
    assert (PEER / "node_modules" / "ai").is_dir(), "tests/peers/vercel is not installed: make peers-deps"
    assert r.app.http is not None
    proc = await asyncio.create_subprocess_exec(
        node,
        "agent.mjs",
        f"http://127.0.0.1:{r.app.http.port}",
        mode,
        package,
        cwd=PEER,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()
    value = json.loads(out.decode().strip().splitlines()[-1])
    assert isinstance(value, dict)
    return value


def tool_results(request: dict[str, Any], wire: str) -> list[tuple[str, bool]]:
    """Each tool result the fake provider received, in order: (its text, marked an error)."""
    messages = request["body"]["messages"]
    if wire == "openai":
        return [(m["content"], False) for m in messages if m["role"] == "tool"]
    return [
        (
            b["content"] if isinstance(b["content"], str) else "".join(p["text"] for p in b["content"]),
            bool(b.get("is_error")),
        )
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("package", sorted(PROVIDERS))
@pytest.mark.parametrize("mode", ["generate", "stream"])
async def test_a_tool_loop_reads_a_failing_tools_model_text_and_answers(
    http_sidecar: Running, mode: str, package: str
) -> None:
    upstream, wire = PROVIDERS[package]
    http_sidecar.provider.script(upstream, [FAIL, FETCH] + ([{"delta_chars": 4}] if mode == "stream" else []))
    run = await run_peer(http_sidecar, mode, package)
    sent = http_sidecar.provider.requests(model=upstream)
    assert len(sent) == 3  # fail_fetch, fetch, the answer
    assert all(bool(r["body"].get("stream")) is (mode == "stream") for r in sent)
    (failed,) = run["failures"]
    assert "422" in failed
    assert [s["toolCalls"] for s in run["steps"]] == [["fail_fetch"], ["fetch"], []]
    assert run["steps"][0]["toolErrors"] == [failed]
    # the sidecar's model_text, as the model read it: @ai-sdk/openai wraps an error-text as {"error": text},
    # @ai-sdk/anthropic sends it in a tool_result marked is_error
    read = (
        json.dumps({"error": failed}, separators=(",", ":")) if package == "openai" else failed,
        wire == "anthropic",
    )
    assert tool_results(sent[1], wire) == [read]
    (after_failure, (fetched, _)) = tool_results(sent[2], wire)
    assert after_failure == read
    assert json.loads(fetched)["id"] == "doc-1"
    if package == "anthropic":  # the SDK's default when it streams, carried to the Anthropic deployment as sent
        eager = {t.get("eager_input_streaming") for r in sent for t in r["body"]["tools"]}
        assert eager == ({True} if mode == "stream" else {None})
    assert run["text"].startswith("Based on the tool result")
    if mode == "stream":
        assert run["deltas"] > 1
