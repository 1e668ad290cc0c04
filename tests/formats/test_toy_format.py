"""A wire format registered from a folder of its own alone is served whole, by real processes.

``tests/formats/toy_format/`` is a sixth format kept outside ``sidecar/``: its front, upstream and fake, and
a launcher (``python -m toy_format ARGS``) that registers it (``registry.register("toy", "toy_format")``) and
runs the sidecar's own command line. Nothing of the sidecar names it. The test starts its fake provider and a
sidecar with ``wire_format: toy`` as two processes (the folder's parent on their ``PYTHONPATH``: nothing in
this process imports it, so no other test sees a toy format), and a CallModel goes through the toy's upstream
to its fake and back: the reply, and a failure of the toy's wire classified by the toy's upstream. Unregistered,
the same name is refused at load with every registered name listed.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sidecar_client import SidecarClient, SidecarError, user

HERE = Path(__file__).resolve().parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)}
UPSTREAM = "toy-1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "toy_format", *args],
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
    proc.communicate(timeout=30)


@pytest.fixture
def toy_provider() -> Iterator[str]:
    """The fake provider with the toy registered: its URL."""
    proc = _start("fake-provider", "--port", "0")
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    assert url.startswith("http://"), proc.stderr.read() if proc.stderr else url
    yield url
    _stop(proc)


def _config(tmp_path: Path, wire_format: str, provider_url: str = "http://127.0.0.1:9") -> Path:
    path = tmp_path / "toy.yaml"
    config = {
        "providers": {"toys": {"wire_format": wire_format, "base_url": provider_url}},
        "models": {"toy-model": {"provider": "toys", "upstream_model": UPSTREAM, "context_window": 4096,
                                "max_output_tokens": 256, "upstream_retries": 0}},
    }  # fmt: skip
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


def test_a_toy_format_from_its_own_folder_serves_call_model_through_its_fake(toy_provider: str, tmp_path: Path) -> None:
    addr = f"127.0.0.1:{_free_port()}"
    sidecar = _start("serve", "--config", str(_config(tmp_path, "toy", toy_provider)), "--listen", addr)
    try:
        assert sidecar.stdout is not None
        banner = sidecar.stdout.readline()
        assert f"listening on {addr}" in banner, banner + (sidecar.stderr.read() if sidecar.stderr else "")
        with SidecarClient(addr) as client:
            reply = client.call_model("toy-model", [user("hello, toy")], timeout=30)
            assert reply.message.text == "You said: hello, toy"  # the fake's brain, through the toy's front
            assert reply.usage.output_tokens > 0
            script = {"model": UPSTREAM, "steps": [{"preset": "model_not_found"}]}
            httpx.post(f"{toy_provider}/_fake/script", json=script).raise_for_status()
            with pytest.raises(SidecarError) as caught:
                client.call_model("toy-model", [user("again")], timeout=30)
            assert caught.value.kind_name == "MODEL_NOT_FOUND"  # the toy's 404, classified by its upstream
        sent = httpx.get(f"{toy_provider}/_fake/requests").json()
        assert [(r["wire"], r["path"], r["body"]["prompt"][-1]["text"]) for r in sent] == [
            ("toy", "/toy/complete", "hello, toy"),
            ("toy", "/toy/complete", "again"),
        ]
    finally:
        _stop(sidecar)


def test_the_toy_name_is_the_registrys_and_a_wrong_one_lists_every_format(tmp_path: Path) -> None:
    registered = _start("check-config", str(_config(tmp_path, "toy")))
    out, err = registered.communicate(timeout=60)
    assert registered.returncode == 0, err
    assert "ok (1 models" in out
    typo = _start("check-config", str(_config(tmp_path, "toyy")))
    _, err = typo.communicate(timeout=60)
    assert typo.returncode == 2
    assert "providers.toys.wire_format: must be a wire format: 'openai', 'anthropic'" in err
    assert "'bedrock_converse' or 'toy' (got 'toyy')" in err  # the registered toy among them, last
    unregistered = subprocess.run(
        [sys.executable, "-m", "sidecar", "check-config", str(_config(tmp_path, "toy"))],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert unregistered.returncode == 2
    assert "'openai_responses' or 'bedrock_converse' (got 'toy')" in unregistered.stderr
