"""A newcomer's first minutes: ``make run`` (the embedded default), then ``sidecar demo`` and ``sidecar status``.

Real processes (``sidecar serve`` on the embedded default, each on ports of its own) and the real CLI:
the demo scripts the provider of the very sidecar it is pointed at, found through that sidecar's
admin view (the embedded fakes listen on free ports, no well-known one); the state view answers a
caller on loopback with no token (``server.admin.read_on_loopback``, set by the embedded default)
while the operator actions and reload stay behind an operator token, at both doors.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import yaml
from sidecar_contract.v1 import admin_pb2 as apb
from sidecar_contract.v1 import admin_pb2_grpc as apb_grpc

from sidecar.cli import main
from sidecar.config import ConfigError, load_default_config, parse_config
from sidecar.server.security import is_loopback_peer
from sidecar.status import TOKEN_ENV
from tests.processes.test_server_process import Proc, _embedded_url, _free_port

OPERATOR = "operator-token-for-the-newcomer-tests"
PROVIDER_HEADER = "x-sidecar-embedded-provider"
LOOPBACK_ONLY = "its state view answers callers on loopback only (server.admin.read_on_loopback)"
ENV = {k: v for k, v in os.environ.items() if k != TOKEN_ENV} | {"COLUMNS": "200"}
"""The CLI's environment: no operator token (a newcomer has none), tables wide enough to show names whole."""


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sidecar", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env or ENV,
    )


def _stopped(proc: Proc) -> None:
    if proc.popen.poll() is None:
        proc.stop()


@pytest.fixture
def embedded() -> Iterator[tuple[Proc, str, str]]:
    """A sidecar serving the embedded default (``make run``) on its own gRPC and HTTP ports; its address,
    its HTTP port's URL."""
    addr, http = f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"
    proc = Proc("--listen", addr, "--http", http)
    yield proc, addr, f"http://{http}"
    _stopped(proc)


def _health(provider: str) -> dict[str, Any]:
    """A fake's own count of what it received and what is still scripted."""
    body: dict[str, Any] = httpx.get(f"{provider}/_fake/health", timeout=5, trust_env=False).json()
    return body


def test_the_demo_scripts_the_provider_of_the_sidecar_it_is_pointed_at() -> None:
    first_addr, second_addr = f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"
    first = Proc("--listen", first_addr)
    second = Proc("--listen", second_addr)
    try:
        first_provider, second_provider = _embedded_url(first, "provider"), _embedded_url(second, "provider")
        assert first_provider != second_provider
        demo = _cli("demo", "--target", second_addr)  # no --provider: the second sidecar names its own
        first_saw, second_saw = _health(first_provider), _health(second_provider)
    finally:
        _stopped(first)
        _stopped(second)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "the 429 was waited out beneath the agent (Retry-After: 1)" in demo.stdout
    assert "restart, attempt 2: overload after 5 deltas" in demo.stdout
    assert first_saw["requests"] == 0, first_saw  # the first sidecar's provider: no script, no call
    assert first_saw["pending_steps"] == {}, first_saw
    assert second_saw["requests"] >= 8, second_saw  # every scripted step was the second's
    assert second_saw["pending_steps"] == {}, second_saw


def test_the_demo_through_the_http_port_scripts_that_sidecars_provider() -> None:
    other = Proc("--listen", f"127.0.0.1:{_free_port()}")  # a sidecar started first, on the same machine
    http = f"127.0.0.1:{_free_port()}"
    proc = Proc("--listen", f"127.0.0.1:{_free_port()}", "--http", http)
    try:
        provider, others = _embedded_url(proc, "provider"), _embedded_url(other, "provider")
        demo = _cli("demo", "--http", f"http://{http}")  # no --provider: the sidecar's HTTP admin view names its own
        saw, other_saw = _health(provider), _health(others)
    finally:
        _stopped(other)
        _stopped(proc)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "the 429 was waited out beneath the SDK" in demo.stdout
    assert other_saw["requests"] == 0, other_saw
    assert other_saw["pending_steps"] == {}, other_saw
    assert saw["requests"] >= 8, saw
    assert saw["pending_steps"] == {}, saw


def test_the_demo_against_a_sidecar_that_names_no_provider_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A config of one's own runs no embedded provider: the demo says to give --provider, and scripts nothing."""
    addr = f"127.0.0.1:{_free_port()}"
    path = _own_config(tmp_path, listen=addr, admin={"tokens": ["${SIDECAR_ADMIN_TOKEN}"]})
    cfg = yaml.safe_load(path.read_text())
    for provider in cfg["providers"].values():
        provider["base_url"] = "http://127.0.0.1:9/v1"
    path.write_text(yaml.safe_dump(cfg))
    monkeypatch.setenv(TOKEN_ENV, OPERATOR)  # the served config reads the operator token from the environment
    proc = Proc("--config", str(path))
    try:
        demo = _cli("demo", "--target", addr, env=ENV | {TOKEN_ENV: OPERATOR})
    finally:
        _stopped(proc)
    assert demo.returncode == 1
    assert f"the sidecar at {addr} runs no embedded local provider" in demo.stdout
    assert "give --provider URL" in demo.stdout


def test_status_prints_the_state_of_a_plain_embedded_default(embedded: tuple[Proc, str, str]) -> None:
    _, addr, _ = embedded
    status = _cli("status", "--target", addr)  # one-shot, no token in the environment
    assert status.returncode == 0, status.stdout + status.stderr
    for shown in ("models", "local-gpt", "local-claude", "circuits", "state backend", "memory"):
        assert shown in status.stdout, status.stdout


def test_status_the_demo_and_admin_default_to_the_port_make_run_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every command that talks to a running sidecar, given no --target, finds the gRPC port ``make run`` serves
    (the HTTP port is off in some configurations; the gRPC port never is)."""
    asked: dict[str, Any] = {}
    monkeypatch.setattr("sidecar.status.run_status", lambda target, watch, transport: asked.update(status=target))
    monkeypatch.setattr("sidecar.demo.run_demo", lambda target, provider, http: asked.update(demo=(target, provider)))
    monkeypatch.setattr("sidecar.status.run_action", lambda target, action, name, transport: asked.update(admin=target))
    monkeypatch.setattr("sidecar.status.run_reload", lambda target, transport, force: asked.update(reload=target))
    main(["status"])
    main(["demo"])
    main(["admin", "close-circuit", "search"])
    main(["admin", "reload"])
    listen = load_default_config().server.listen
    assert asked == {"status": listen, "demo": (listen, None), "admin": listen, "reload": listen}


def test_grpc_get_state_answers_a_loopback_caller_without_a_token(embedded: tuple[Proc, str, str]) -> None:
    proc, addr, _ = embedded
    provider = _embedded_url(proc, "provider")
    with grpc.insecure_channel(addr) as channel:
        state, call = apb_grpc.AdminStub(channel).GetState.with_call(apb.GetStateRequest(), timeout=10)
    assert [m.model for m in state.models] == ["local-gpt", "local-claude"]
    assert state.state.backend == "memory"
    assert dict(call.trailing_metadata() or ())[PROVIDER_HEADER] == provider


def test_grpc_actions_and_reload_without_a_token_are_refused(embedded: tuple[Proc, str, str]) -> None:
    _, addr, _ = embedded
    with grpc.insecure_channel(addr) as channel:
        stub = apb_grpc.AdminStub(channel)
        calls = [
            lambda md: stub.CloseCircuit(apb.CloseCircuitRequest(name="docs"), metadata=md, timeout=10),
            lambda md: stub.LiftPause(apb.LiftPauseRequest(model="local-gpt"), metadata=md, timeout=10),
            lambda md: stub.ResetSpend(apb.ResetSpendRequest(workflow="w"), metadata=md, timeout=10),
            lambda md: stub.Reload(apb.ReloadRequest(), metadata=md, timeout=10),
        ]
        for call in calls:
            for metadata in ((), (("authorization", f"Bearer {OPERATOR}"),)):  # none, or one nobody configured
                with pytest.raises(grpc.RpcError) as caught:
                    call(metadata)
                assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
                assert LOOPBACK_ONLY in (caught.value.details() or "")


def test_the_cli_action_without_a_token_is_refused(embedded: tuple[Proc, str, str]) -> None:
    _, addr, http = embedded
    for target in (addr, http):
        acted = _cli("admin", "close-circuit", "docs", "--target", target)
        assert acted.returncode == 1, acted.stdout
        assert "no operator token (server.admin.tokens)" in acted.stdout.replace("\n", " ")


def test_http_state_answers_loopback_while_actions_and_reload_are_refused(embedded: tuple[Proc, str, str]) -> None:
    proc, _, http = embedded
    provider = _embedded_url(proc, "provider")
    with httpx.Client(base_url=http, timeout=10, trust_env=False) as client:
        state = client.get("/admin/state")
        assert state.status_code == 200, state.text
        assert [m["model"] for m in state.json()["models"]] == ["local-gpt", "local-claude"]
        assert state.headers[PROVIDER_HEADER] == provider
        for path, body in (("/admin/actions/close-circuit", {"name": "docs"}), ("/admin/reload", None)):
            refused = client.post(path, json=body)
            assert refused.status_code == 403, refused.text
            assert refused.json()["error"]["type"] == "admin_off"
            assert LOOPBACK_ONLY in refused.json()["error"]["message"]


def _own_config(tmp_path: Path, **server: Any) -> Path:
    """The embedded default's models and tools under a ``server`` section of one's own, as a file."""
    cfg = yaml.safe_load((Path(__file__).parents[2] / "sidecar" / "default_config.yaml").read_text())
    cfg["server"] = server
    path = tmp_path / "own.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _own_address() -> str | None:
    """This machine's address on a non-loopback interface (the source of a route outward), if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("203.0.113.1", 9))  # TEST-NET-3: nothing is sent, only the route is looked up
        except OSError:
            return None
        host = str(s.getsockname()[0])
    return None if is_loopback_peer(host) else host


def test_a_caller_beyond_loopback_still_needs_a_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """read_on_loopback on a port that listens on every interface: loopback reads, the same machine's
    other address (as any host of the network would be) needs the operator's token; actions always do."""
    own = _own_address()
    if own is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    port, http_port = _free_port(), _free_port()
    admin = {"read_on_loopback": True, "tokens": ["${SIDECAR_ADMIN_TOKEN}"]}
    path = _own_config(tmp_path, listen=f"0.0.0.0:{port}", allow_insecure=True, admin=admin)
    monkeypatch.setenv(TOKEN_ENV, OPERATOR)
    proc = Proc("--config", str(path), "--http", f"0.0.0.0:{http_port}")
    operator = (("authorization", f"Bearer {OPERATOR}"),)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as local, grpc.insecure_channel(f"{own}:{port}") as far:
            assert apb_grpc.AdminStub(local).GetState(apb.GetStateRequest(), timeout=10).models
            with pytest.raises(grpc.RpcError) as caught:
                apb_grpc.AdminStub(far).GetState(apb.GetStateRequest(), timeout=10)
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert apb_grpc.AdminStub(far).GetState(apb.GetStateRequest(), metadata=operator, timeout=10).models
            with pytest.raises(grpc.RpcError) as acted:
                apb_grpc.AdminStub(local).LiftPause(apb.LiftPauseRequest(model="local-gpt"), timeout=10)
            assert acted.value.code() == grpc.StatusCode.UNAUTHENTICATED
            lifted = apb_grpc.AdminStub(local).LiftPause(
                apb.LiftPauseRequest(model="local-gpt"), metadata=operator, timeout=10
            )
            assert lifted.reach == "local"
        assert httpx.get(f"http://127.0.0.1:{http_port}/admin/state", timeout=10, trust_env=False).status_code == 200
        far_http = httpx.get(f"http://{own}:{http_port}/admin/state", timeout=10, trust_env=False)
        assert far_http.status_code == 401, far_http.text
        local_action = httpx.post(
            f"http://127.0.0.1:{http_port}/admin/actions/lift-pause", json={"name": "local-gpt"}, trust_env=False
        )
        assert local_action.status_code == 401, local_action.text
    finally:
        _stopped(proc)


@pytest.mark.parametrize(
    ("peer", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.3.4.5", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("ipv4:127.0.0.1:50051", True),
        ("ipv6:[::1]:50051", True),
        ("ipv6:%5B::1%5D:50051", True),
        ("ipv6:[::ffff:127.0.0.1]:4000", True),
        ("ipv4:192.0.2.2:50051", False),
        ("192.0.2.2", False),
        ("ipv6:[fd00::2]:50051", False),
        ("unix:/tmp/sidecar.sock", False),
        ("localhost", False),
        ("", False),
    ],
)
def test_which_peers_are_loopback(peer: str, loopback: bool) -> None:
    assert is_loopback_peer(peer) is loopback


def test_an_admin_section_that_opens_nothing_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(_own_config(tmp_path, admin={}).read_text(), "own.yaml")
    assert "server.admin" in str(caught.value)
    assert "give tokens" in str(caught.value)
    assert "read_on_loopback: true" in str(caught.value)
    admin = load_default_config().server.admin
    assert admin is not None
    assert admin.read_on_loopback
