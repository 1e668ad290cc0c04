"""`sidecar serve` as a real process: health, reflection, lists, unix socket, size limit, SIGTERM, exposure."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
from sidecar_client import SidecarClient, pb

from tests.conftest import ONE_TOOL


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Proc:
    def __init__(self, *args: str) -> None:
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "sidecar", "serve", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.banner = self.popen.stdout.readline() if self.popen.stdout else ""

    def stop(self) -> tuple[int, str]:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        _, err = self.popen.communicate(timeout=30)
        return self.popen.returncode, err


def _embedded_url(proc: Proc, name: str) -> str:
    """The URL of an embedded fake, from the banner's ``local <name>:`` line."""
    assert proc.popen.stdout is not None
    for _ in range(20):
        line = proc.popen.stdout.readline()
        if line.strip().startswith(f"local {name}:"):
            return line.split(": ", 1)[1].strip()
    raise AssertionError(f"no 'local {name}:' line in the banner")


@pytest.fixture
def served() -> Iterator[tuple[Proc, str]]:
    addr = f"127.0.0.1:{_free_port()}"
    proc = Proc("--listen", addr)
    yield proc, addr
    if proc.popen.poll() is None:
        proc.popen.kill()
    proc.popen.communicate()  # its pipes closed here, not by a later test's collection


def test_banner_says_where_it_listens(served: tuple[Proc, str]) -> None:
    proc, addr = served
    assert f"listening on {addr}" in proc.banner
    assert "embedded default" in proc.banner


def test_health_reflection_and_lists(served: tuple[Proc, str]) -> None:
    _, addr = served
    with grpc.insecure_channel(addr) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "sidecar.v1.Sidecar"):
            reply = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        db = ProtoReflectionDescriptorDatabase(channel)
        assert "sidecar.v1.Sidecar" in db.get_services()
        assert "grpc.health.v1.Health" in db.get_services()
        service = db.FindFileContainingSymbol("sidecar.v1.Sidecar")
        assert service.name == "sidecar/v1/sidecar.proto"
    with SidecarClient(addr) as client:
        tools = {t.definition.name: t for t in client.list_tools()}
        assert {"search_docs", "fetch_doc", "create_note", "flaky_lookup"} <= set(tools)
        assert tools["create_note"].idempotent is False
        assert '"input_schema"' in tools["search_docs"].anthropic_json
        assert '"type": "function"' in tools["search_docs"].openai_json
        models = {m.id: m for m in client.list_models()}
        assert models["local-gpt"].wire_format == "openai"
        assert models["local-claude"].wire_format == "anthropic"


def test_sigterm_lets_the_call_in_flight_finish_then_exits_zero(served: tuple[Proc, str]) -> None:
    proc, addr = served
    tools = _embedded_url(proc, "tools")
    result: dict[str, pb.ExecuteToolResponse] = {}
    with SidecarClient(addr) as client:
        client.list_tools()  # connected
        call = threading.Thread(
            target=lambda: result.setdefault("r", client.execute_tool("flaky_lookup", {"mode": "slow"}, timeout=30))
        )
        call.start()
        end = time.monotonic() + 30
        while not httpx.get(tools + "/_fake/requests", timeout=5).json():  # in flight: the backend holds it 2 s
            assert time.monotonic() < end, "the call never reached the tool backend"
            time.sleep(0.01)
        proc.popen.send_signal(signal.SIGTERM)
        call.join(timeout=30)
        code, err = proc.stop()
    assert result["r"].HasField("result"), result["r"]
    assert result["r"].result.status_code == 200
    assert code == 0
    assert "SIGTERM received" in err


def test_unix_socket() -> None:
    path = Path(tempfile.mkdtemp()) / "sidecar.sock"
    proc = Proc("--listen", f"unix:{path}")
    try:
        with SidecarClient(f"unix:{path}") as client:
            assert client.list_models()
    finally:
        code, _ = proc.stop()
    assert code == 0


def test_message_size_limit_is_a_clear_error(tmp_path: Path) -> None:
    cfg = tmp_path / "small.yaml"
    port = _free_port()
    cfg.write_text(f"server: {{listen: '127.0.0.1:{port}', max_message_bytes: 1024}}\n{ONE_TOOL}")
    proc = Proc("--config", str(cfg))
    try:
        with SidecarClient(f"127.0.0.1:{port}") as client, pytest.raises(grpc.RpcError) as caught:
            client.execute_tool("anything", {"query": "x" * 4096}, timeout=10)
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED  # type: ignore[attr-defined]
        assert "larger than max" in (caught.value.details() or "")  # type: ignore[attr-defined]
    finally:
        code, _ = proc.stop()
    assert code == 0


def test_port_in_use_exits_nonzero() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "sidecar", "serve", "--listen", f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ},
        )
    assert proc.returncode == 1
    assert "cannot listen" in proc.stderr


def test_demo_plays_a_session_against_the_embedded_default() -> None:
    addr = f"127.0.0.1:{_free_port()}"
    proc = Proc("--listen", addr)
    try:
        lines = [proc.popen.stdout.readline() for _ in range(6)] if proc.popen.stdout else []
        provider = next(line.split(": ", 1)[1].strip() for line in lines if "local provider:" in line)
        demo = subprocess.run(
            [sys.executable, "-m", "sidecar", "demo", "--target", addr, "--provider", provider],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        proc.stop()
    assert demo.returncode == 0, demo.stdout + demo.stderr
    out = demo.stdout
    assert "the 429 was waited out beneath the agent" in out
    assert "ExecuteTool fetch_doc: RESOURCE_NOT_FOUND" in out
    assert "ExecuteTool search_docs: result" in out
    assert "1 correction" in out
    assert "restart, attempt 2: overload after 5 deltas" in out
    assert "(2 attempts)" in out.splitlines()[-2]


@pytest.mark.parametrize("command", ["fake-provider", "tool-backend"])
def test_the_bundled_fakes_run_from_the_sidecar_command(command: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "sidecar", command, "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        url = proc.stdout.readline().strip() if proc.stdout else ""
        assert url.startswith("http://127.0.0.1:")
        import httpx

        assert httpx.get(url + "/_fake/health", timeout=5).json()["ok"] is True
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        if proc.stdout is not None:
            proc.stdout.close()


def _serve_briefly(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sidecar", "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_beyond_loopback_without_tls_or_tokens_is_refused_with_exit_2() -> None:
    proc = _serve_briefly("--listen", f"0.0.0.0:{_free_port()}")
    assert proc.returncode == 2
    assert "refusing to listen on 0.0.0.0:" in proc.stderr
    for key in ("server.tls", "server.auth", "server.allow_insecure"):
        assert key in proc.stderr
    assert "listening on" not in proc.stdout


def test_beyond_loopback_with_tokens_from_the_environment_serves(tmp_path: Path) -> None:
    port = _free_port()
    cfg = tmp_path / "tokens.yaml"
    cfg.write_text(f"server: {{listen: '0.0.0.0:{port}', auth: {{tokens: ['${{AGENT_A_TOKEN}}']}}}}\n{ONE_TOOL}")
    token = "agent-a-" + "0" * 24
    proc = subprocess.Popen(
        [sys.executable, "-m", "sidecar", "serve", "--config", str(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "AGENT_A_TOKEN": token},
    )
    try:
        banner = proc.stdout.readline() if proc.stdout else ""
        assert f"listening on 0.0.0.0:{port}" in banner
        with SidecarClient(f"127.0.0.1:{port}", token=token) as client:
            assert client.list_models() == []
        with SidecarClient(f"127.0.0.1:{port}") as client, pytest.raises(grpc.RpcError) as caught:
            client.list_models()
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED  # type: ignore[attr-defined]
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert token not in err


def test_allow_insecure_serves_beyond_loopback(tmp_path: Path) -> None:
    port = _free_port()
    cfg = tmp_path / "open.yaml"
    cfg.write_text(f"server: {{listen: '0.0.0.0:{port}', allow_insecure: true}}\n{ONE_TOOL}")
    proc = Proc("--config", str(cfg))
    try:
        assert f"listening on 0.0.0.0:{port}" in proc.banner
        with SidecarClient(f"127.0.0.1:{port}") as client:
            assert client.list_models() == []
    finally:
        code, _ = proc.stop()
    assert code == 0


def test_an_unreadable_tls_file_exits_2_naming_the_key(tmp_path: Path) -> None:
    cfg = tmp_path / "tls.yaml"
    missing = tmp_path / "missing.pem"
    cfg.write_text(
        f"server: {{listen: '127.0.0.1:{_free_port()}', tls: {{cert: '{missing}', key: '{missing}'}}}}\n{ONE_TOOL}"
    )
    proc = _serve_briefly("--config", str(cfg))
    assert proc.returncode == 2
    assert f"server.tls.cert: cannot read {missing}" in proc.stderr
