"""``sidecar serve --http`` and ``sidecar demo --http``: the session played through the HTTP port.

The sidecar runs as a real process on the embedded default with ``--http``; the demo plays the
session with the official OpenAI SDK (model calls) and MCP client (tool calls), as an agent
that knows neither gRPC nor the sidecar's client would.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from sidecar.cli import main
from tests.processes.test_server_process import Proc, _free_port


def test_the_demo_plays_the_session_through_the_openai_sdk() -> None:
    addr, http = f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"
    proc = Proc("--listen", addr, "--http", http)
    try:
        lines = [proc.popen.stdout.readline() for _ in range(8)] if proc.popen.stdout else []
        assert any(f"OpenAI http://{http}/v1/chat/completions" in line for line in lines), lines
        provider = next(line.split(": ", 1)[1].strip() for line in lines if "local provider:" in line)
        demo = subprocess.run(
            [sys.executable, "-m", "sidecar", "demo", "--http", f"http://{http}", "--provider", provider],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        proc.stop()
    assert demo.returncode == 0, demo.stdout + demo.stderr
    out = demo.stdout
    assert "the 429 was waited out beneath the SDK (x-sidecar-attempts: 2" in out
    assert "MCP tools/call fetch_doc: RESOURCE_NOT_FOUND" in out
    assert "MCP tools/call search_docs: result" in out
    assert "(2 attempts, 1 correction)" in out
    assert "restart, attempt 2: overload after 5 deltas" in out
    assert "(2 attempts)" in out.splitlines()[-2]


def test_serve_http_refuses_an_address_that_is_not_host_port(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--http", "nowhere"]) == 2
    assert "sidecar: --http nowhere: must be host:port (port 0-65535)" in capsys.readouterr().err
