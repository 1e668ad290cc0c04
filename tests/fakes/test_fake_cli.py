"""``python -m sidecar.fakes.provider`` / ``...tool_backend`` print their URL and serve."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from sidecar.fakes import provider, tool_backend

ROOT = Path(__file__).resolve().parents[2]


def _spawn(module: str, *args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", module, "--port", "0", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.stderr else url
    return proc, url


def _stop(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_provider_cli_with_chaos(client: httpx.Client) -> None:
    proc, url = _spawn("sidecar.fakes.provider", "--chaos-rate-limit", "1", "--retry-after", "0", "--seed", "3")
    try:
        resp = client.post(url + "/v1/chat/completions", json={"model": "m", "messages": []})
        assert resp.status_code == 429
        assert resp.headers["retry-after"] == "0"
        assert client.get(url + "/_fake/health").json()["chaos"]["seed"] == 3
    finally:
        assert _stop(proc) == 0


def test_tool_backend_cli(client: httpx.Client) -> None:
    proc, url = _spawn("sidecar.fakes.tool_backend")
    try:
        assert client.get(url + "/docs/doc-1").json()["id"] == "doc-1"
    finally:
        assert _stop(proc) == 0


def test_bad_arguments_exit_2() -> None:
    with pytest.raises(SystemExit) as info:
        provider.main(["--chaos-rate-limit", "2"])
    assert info.value.code == 2
    with pytest.raises(SystemExit):
        tool_backend.main(["--port", "nope"])
