"""Reload without a restart, on a real process under load (``server/reload.py``).

64 CallModel calls stay in flight (the fake provider answers each after a deliberate delay) while the
config file is reloaded 20 times: none fails, and what the process learned before (a tool service's
open circuit, a route deployment's, a model's Retry-After pause, a workflow's spend) is all still
there after, read from GET /admin/state. A removed model's in-flight calls finish, its next call
is MODEL_NOT_FOUND; a bad file is refused with check-config's error and the old config still serves;
SIGHUP, POST /admin/reload and ``server.watch_config`` (a ConfigMap-style ``..data`` swap) each
trigger it; ``--workers 2`` reloads both workers; ``sidecar.config.reloads`` counts both outcomes.
A file that would empty the sidecar (empty, only comments, or keeping none of its models and tools)
is refused at every door and under ``watch_config`` with calls in flight; the last kind is applied
when an operator forces it. Counts prove it, not timing: every call's outcome is tallied.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import yaml
from sidecar_client import pb, user
from sidecar_contract.v1 import admin_pb2 as apb
from sidecar_contract.v1 import admin_pb2_grpc as apb_grpc
from sidecar_contract.v1 import sidecar_pb2_grpc as pb_grpc

from sidecar.cli import main
from sidecar.config import Config
from sidecar.core.circuit import CircuitState
from sidecar.core.details import Trigger
from sidecar.fakes import FakeProvider, FakeToolBackend, ThreadedServer
from sidecar.server.reload import FORCE_HINT
from tests.conftest import Start, base_config
from tests.redis_server import RedisServer, redis_server  # noqa: F401  (the fixture)

pytestmark = pytest.mark.asyncio

ADMIN = "admin-token-0123456789abcdef"
IN_FLIGHT = 64
RELOADS = 20


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(provider: str, tools: str, http: int, prom: int, *, old_model: bool, **server: Any) -> dict[str, Any]:
    cfg = base_config(
        provider,
        tools,
        http={"listen": f"127.0.0.1:{http}"},
        telemetry={"prometheus_port": prom},
    )
    cfg["server"].update({"admin": {"tokens": ["${SIDECAR_TEST_ADMIN}"]}, **server})
    cfg["providers"]["oai"]["api_key"] = "${SIDECAR_TEST_KEY}"
    cfg["providers"]["ant"]["api_key"] = "${SIDECAR_TEST_KEY}"
    if old_model:
        cfg["models"]["gpt-old"] = {**cfg["models"]["gpt"], "upstream_model": "fake-old"}
    return cfg


def _write(path: Path, cfg: dict[str, Any] | str) -> None:
    text = cfg if isinstance(cfg, str) else yaml.safe_dump(cfg)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)  # atomic: a watcher never reads half a file


class Served:
    def __init__(self, path: Path, *args: str) -> None:
        self.grpc_port, self.http_port = _port(), 0
        env = {**os.environ, "SIDECAR_TEST_ADMIN": ADMIN, "SIDECAR_TEST_KEY": "sk-test-SECRETKEY1234567890"}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sidecar",
                "serve",
                "--config",
                str(path),
                "--listen",
                f"127.0.0.1:{self.grpc_port}",
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=open(path.with_suffix(".log"), "w"),  # noqa: SIM115
            text=True,
            env=env,
        )
        self.log = path.with_suffix(".log")
        assert self.proc.stdout is not None
        line = self.first_line = self.proc.stdout.readline()
        assert "listening" in line or "workers on" in line, line

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.proc.communicate(timeout=30)


ADMIN_GRPC_MD = (("authorization", f"Bearer {ADMIN}"),)


async def _admin_reload(http: int, query: str = "", body: bytes = b"") -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as client:
        url = f"http://127.0.0.1:{http}/admin/reload{query}"
        return await client.post(url, headers={"authorization": f"Bearer {ADMIN}"}, content=body)


async def _until(check: Any, what: str, tries: int = 200) -> None:
    for _ in range(tries):
        if await check():
            return
        await asyncio.sleep(0.05)  # polling a real process, not waiting out a backoff
    raise AssertionError(f"never: {what}")


KEPT_COOLDOWN = {"cooldown_s": 3600, "max_cooldown_s": 3600}
"""An opened circuit stays open the whole test, however slow the machine."""


def _with_state_to_keep(cfg: dict[str, Any]) -> dict[str, Any]:
    """Names whose state the reloads must keep: the refusing service ``down``, a route ``assistant`` of
    one deployment ``gpt-dep`` (its upstream failing), and a capped workflow."""
    cfg["policy"]["tool_retries"] = 0
    cfg["policy"]["spend_caps"] = {"wf-kept": 100.0}
    cfg["services"]["down"] = {"circuit": {**KEPT_COOLDOWN, "max_throttle": 1, "failures_to_open": 2}}  # 3 calls
    cfg["models"]["gpt-dep"] = {**cfg["models"]["gpt"], "upstream_model": "fake-dep"}
    cfg["models"]["assistant"] = {"route": {"balance": {"gpt-dep": 1}, "circuit": KEPT_COOLDOWN}}
    return cfg


async def _admin_state(http: int) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=30) as client:
        answer = await client.get(f"http://127.0.0.1:{http}/admin/state", headers={"authorization": f"Bearer {ADMIN}"})
    assert answer.status_code == 200, answer.text
    state: dict[str, Any] = answer.json()
    return state


def _kept(state: dict[str, Any]) -> tuple[str, str, bool, float]:
    """What the reloads must keep: the circuit of ``down`` and of the deployment ``gpt-dep``, whether
    ``claude`` is paused, and the spend of ``wf-kept``."""
    services = {s["name"]: s["circuit"] for s in state["services"]}
    deployments = {d["name"]: d["circuit"] for d in state["deployments"]}
    paused = {m["model"]: m["pause_left_s"] > 0 for m in state["models"]}
    spent = {w["workflow"]: w["spent_usd"] for w in state["workflows"]}
    return (
        services.get("down", "-"),
        deployments.get("gpt-dep", "-"),
        paused.get("claude", False),
        spent.get("wf-kept", 0),
    )


async def _seed_state_to_keep(stub: pb_grpc.SidecarStub, http: int) -> tuple[str, str, bool, float]:
    """Through real calls: ``down``'s circuit opened by refused connections, ``gpt-dep``'s by 500s,
    ``claude`` paused by a 429's Retry-After, and ``wf-kept`` charged for a call."""
    once = pb.Job(upstream_retries=0)
    for _ in range(4):
        await stub.ExecuteTool(pb.ExecuteToolRequest(tool="refused", arguments_json='{"id": "a"}', job=once))
    for _ in range(4):
        with pytest.raises(grpc.aio.AioRpcError):
            await stub.CallModel(pb.CallModelRequest(model="assistant", messages=[user("x")], job=once))
    with pytest.raises(grpc.aio.AioRpcError):
        await stub.CallModel(pb.CallModelRequest(model="claude", messages=[user("x")], job=once), timeout=30)
    await stub.CallModel(pb.CallModelRequest(model="gpt", messages=[user("x")], job=pb.Job(workflow_id="wf-kept")))
    kept = _kept(await _admin_state(http))
    assert kept[:3] == ("open", "open", True), kept
    assert kept[3] > 0, kept
    return kept


async def test_twenty_reloads_under_load_fail_no_call(tmp_path: Path) -> None:
    with ThreadedServer(FakeProvider()) as provider, ThreadedServer(FakeToolBackend()) as backend:
        provider.server.script("fake-gpt", [{"delay_ms": 100, "repeat": 1_000_000}])
        provider.server.script("fake-old", [{"delay_ms": 600, "repeat": 1_000_000}])
        provider.server.script("fake-dep", [{"status": 500, "repeat": 1_000_000}])
        provider.server.script("fake-claude", [{"status": 429, "headers": {"retry-after": "3000"}}])
        http, prom = _port(), _port()
        with_old = _with_state_to_keep(
            _config(provider.url, backend.url, http, prom, old_model=True, watch_config=True)
        )
        without_old = _with_state_to_keep(
            _config(provider.url, backend.url, http, prom, old_model=False, watch_config=True)
        )
        # laid out as a Kubernetes ConfigMap volume: config.yaml -> ..data/config.yaml, ..data -> ..v1
        first, second = tmp_path / "..v1", tmp_path / "..v2"
        first.mkdir()
        second.mkdir()
        (tmp_path / "..data").symlink_to(first.name)
        path = tmp_path / "config.yaml"
        path.symlink_to("..data/config.yaml")
        real = first / "config.yaml"  # the file rewritten in place for the admin reloads and SIGHUP
        _write(real, with_old)
        _write(second / "config.yaml", with_old)
        served = Served(path)
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{served.grpc_port}") as channel:
                stub = pb_grpc.SidecarStub(channel)
                kept = await _seed_state_to_keep(stub, http)
                ok, failed = [0], [0]
                stop = asyncio.Event()

                async def caller() -> None:
                    while not stop.is_set():
                        try:
                            await stub.CallModel(pb.CallModelRequest(model="gpt", messages=[user("hi")]))
                            ok[0] += 1
                        except grpc.aio.AioRpcError:
                            failed[0] += 1

                callers = [asyncio.create_task(caller()) for _ in range(IN_FLIGHT)]

                async def call_old() -> pb.CallModelResponse:
                    return await stub.CallModel(pb.CallModelRequest(model="gpt-old", messages=[user("x")]))

                old_call = asyncio.create_task(call_old())
                await _until(lambda: _true(ok[0] > IN_FLIGHT), "calls answered")
                for i in range(RELOADS):
                    _write(real, with_old if i % 2 else without_old)
                    if i % 2:  # every other one through the gRPC Admin service, the same reload
                        admin = apb_grpc.AdminStub(channel)
                        outcome = await admin.Reload(apb.ReloadRequest(), metadata=ADMIN_GRPC_MD, timeout=30)
                        assert (outcome.applied, outcome.error) == (True, "")
                    else:
                        answer = await _admin_reload(http)
                        assert answer.status_code == 200, answer.text
                        assert answer.json()["applied"] is True
                    if i == 0:  # gpt-old removed while its call is in flight: that call still finishes
                        with pytest.raises(grpc.aio.AioRpcError) as err:
                            await stub.CallModel(pb.CallModelRequest(model="gpt-old", messages=[user("x")]))
                        assert err.value.code() == grpc.StatusCode.NOT_FOUND
                    before = ok[0]
                    await _until(lambda b=before: _true(ok[0] > b + IN_FLIGHT), "calls on the new config")  # type: ignore[misc]
                assert (await old_call).attempts >= 1  # started before its model was removed: answered
                # a bad file: refused with check-config's error, the config before serving
                _write(real, "models: {gpt: {provider: nowhere}}\n")
                check = await asyncio.to_thread(_check_config, path)
                answer = await _admin_reload(http)
                assert answer.status_code == 422
                assert answer.json()["error"] == check.stderr.strip().removeprefix("sidecar: ")
                before = ok[0]
                await _until(lambda: _true(ok[0] > before + IN_FLIGHT), "calls after the refusal")
                # SIGHUP: the last good file had gpt-old (i = 19); this one removes it
                _write(real, without_old)
                served.proc.send_signal(signal.SIGHUP)

                async def old_gone() -> bool:
                    try:
                        await stub.CallModel(pb.CallModelRequest(model="gpt-old", messages=[user("x")]))
                        return False
                    except grpc.aio.AioRpcError as exc:
                        return exc.code() == grpc.StatusCode.NOT_FOUND

                await _until(old_gone, "SIGHUP applied the file")
                # server.watch_config: the kubelet's swap of ..data (to a file with gpt-old) is seen
                (tmp_path / "..data_tmp").symlink_to(second.name)
                (tmp_path / "..data_tmp").replace(tmp_path / "..data")
                await _until(lambda: _not(old_gone()), "the watched ConfigMap swap applied")
                stop.set()
                await asyncio.gather(*callers)
                assert failed[0] == 0, f"{failed[0]} calls failed across {RELOADS} reloads"
                assert ok[0] > RELOADS * IN_FLIGHT
                # every name kept its state through the 20 reloads, the refusal, SIGHUP and the swap
                assert _kept(await _admin_state(http)) == kept
            async with httpx.AsyncClient() as client:
                scrape = (await client.get(f"http://127.0.0.1:{prom}/metrics")).text
            assert (_counter(scrape, "sidecar_config_reloads", outcome="applied") or 0) >= RELOADS + 1
            assert (_counter(scrape, "sidecar_config_reloads", outcome="refused") or 0) >= 1  # the watcher's too
        finally:
            served.stop()
        log = served.log.read_text()
        assert "refused, the config before keeps serving" in log
        assert "reload (watch_config): the new config serves" in log


def _check_config(path: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "sidecar", "check-config", str(path)]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def _counter(scrape: str, name: str, **labels: str) -> float | None:
    for line in scrape.splitlines():
        if line.startswith(name) and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


async def _not(check: Awaitable[bool]) -> bool:
    return not await check


async def _true(value: bool) -> bool:
    return value


async def test_kept_names_keep_their_state_removed_ones_go(
    start_sidecar: Start, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An open circuit of a kept service stays open, a throttled model keeps its level and pause, spend is
    kept; a removed service's guard goes (read through the admin state view, as an operator would)."""
    monkeypatch.setenv("SIDECAR_TEST_KEY", "sk-test-SECRETKEY1234567890")
    monkeypatch.setenv("SIDECAR_TEST_ADMIN", ADMIN)
    r = await start_sidecar(server={"admin": {"tokens": [ADMIN]}}, policy={"spend_caps": {"wf-1": 2.5}})
    app = r.app
    assert app.reloader is not None
    assert app.guards is not None
    assert app.models is not None
    guard = app.guards.get("flaky")
    for _ in range(20):  # to the maximum throttle, then past failures_to_open
        guard.failure(None, Trigger(503, "upstream said no"), None)
    assert guard.state is CircuitState.OPEN
    app.models.throttle("gpt").raised_elsewhere(3.0, 0.0)
    app.models.throttle("gpt").paused_elsewhere(30.0)
    app.guards.get("svc").failure(None, Trigger(503, "no"), None)
    assert app.state_view is not None
    app.state_view.ledger.record("wf-1", 1.25)
    cfg = base_config(r.provider.url, r.backend.url, server={"admin": {"tokens": ["${SIDECAR_TEST_ADMIN}"]}})
    cfg["policy"]["spend_caps"] = {"wf-1": 5.0}
    for p in cfg["providers"].values():
        p["api_key"] = "${SIDECAR_TEST_KEY}"
    cfg["tools"] = {k: t for k, t in cfg["tools"].items() if t.get("service") == "flaky"}  # svc's tools gone
    path = tmp_path / "config.yaml"
    _write(path, cfg)
    app.reloader.path = str(path)
    before = app.live.core if app.live is not None else None
    outcome = await app.reload()
    assert outcome.applied, outcome.error
    assert app.live is not None
    assert app.live.core is not before
    assert app.guards.get("flaky") is guard
    assert guard.state is CircuitState.OPEN
    assert app.models.throttle("gpt").throttle == 3.0
    assert app.models.throttle("gpt").pause_left() > 29
    doc = app.state_view.read()
    assert {w["workflow"]: (w["spent_usd"], w["cap_usd"]) for w in doc["workflows"]}["wf-1"] == (1.25, 5.0)
    assert "svc" not in {s["name"] for s in doc["services"]}
    assert {s["name"]: s["circuit"] for s in doc["services"]}["flaky"] == "open"
    # the listeners need a restart: not applied, said so
    cfg["server"]["max_in_flight"] = 7
    _write(path, cfg)
    outcome = await app.reload()
    assert outcome.applied
    assert outcome.restart_needed == ("server.max_in_flight",)
    assert app.live.core.config.server.max_in_flight != 7


async def test_a_built_core_changes_nothing_of_the_serving_one_until_the_swap(start_sidecar: Start) -> None:
    """The next core's settings for what it takes over (a kept guard's circuit, the ledger's caps) are
    staged: the core before serves as it was until ``Live.swap``, so a reload refused after the build
    leaves it whole."""
    r = await start_sidecar(policy={"spend_caps": {"wf-1": 2.5}})
    app = r.app
    assert app.live is not None
    old = app.live.core
    guard = old.guards.get("flaky")
    circuit_before = guard.circuit
    cfg = base_config(r.provider.url, r.backend.url)
    cfg["policy"]["spend_caps"] = {"wf-1": 5.0}
    cfg["services"]["flaky"]["circuit"] = {"failures_to_open": 7, "cooldown_s": 90, "max_cooldown_s": 900}
    core = await app.next_core(Config.model_validate(cfg), old)
    try:
        assert core.guards.get("flaky") is guard  # taken over ...
        assert guard.circuit is circuit_before  # ... its settings not yet changed
        assert old.ledger.cap_for("wf-1") == 2.5
        app.live.swap(core)
        assert guard.circuit.failures_to_open == 7
        assert guard.cooldown == 90
        assert core.ledger.cap_for("wf-1") == 5.0
    finally:
        await (core if app.live.core is not core else old).aclose()  # the one no longer serving


def _worker_pids(banners: list[str]) -> dict[int, int]:
    """Each worker's index and pid, from its banners (``worker 1/2 (pid 4242) listening on``), every
    banner on a line counted."""
    found = [m for b in banners for m in re.finditer(r"worker (\d+)/\d+ \(pid (\d+)\)", b)]
    return {int(m.group(1)): int(m.group(2)) for m in found}


class TwoWorkers:
    """``sidecar serve --workers 2`` on one real Redis, the HTTP port and the Admin service open."""

    def __init__(self, tmp_path: Path, provider: str, backend: str, redis_url: str, **server: Any) -> None:
        self.http = _port()
        self.path = tmp_path / "config.yaml"
        cfg = _config(provider, backend, self.http, _port(), old_model=True, **server)
        cfg["state"] = {"backend": "redis", "url": redis_url, "prefix": "reload-test"}
        _write(self.path, cfg)
        self.served = Served(self.path, "--workers", "2")
        stdout = self.served.proc.stdout
        assert stdout is not None
        banners = [self.served.first_line]  # the supervisor's line, or a worker's banner if it came first
        try:  # each worker's banner, once it serves; a line at a time until both are read (or stdout ends)
            while len(_worker_pids(banners)) < 2 and (line := stdout.readline()):
                banners.append(line)
            self.pids = _worker_pids(banners)
            assert sorted(self.pids) == [0, 1], banners
        except BaseException:
            self.served.stop()  # a failed start leaves no workers behind to hold the port
            raise
        self.target = f"127.0.0.1:{self.served.grpc_port}"

    async def serving(self) -> None:
        async with grpc.aio.insecure_channel(self.target) as channel:
            stub = pb_grpc.SidecarStub(channel)

            async def up() -> bool:
                try:
                    await stub.CallModel(pb.CallModelRequest(model="gpt", messages=[user("x")]))
                    return True
                except grpc.aio.AioRpcError:
                    return False

            await _until(up, "the workers serve")


async def test_two_workers_both_reload(tmp_path: Path, redis_server: RedisServer) -> None:  # noqa: F811
    """``--workers 2``: SIGHUP to the supervisor reloads both workers; an admin reload on either worker
    (the Admin Reload RPC, POST /admin/reload, ``sidecar admin reload``) answers with both workers'
    outcomes, each with its own pid, collected by the supervisor."""
    with ThreadedServer(FakeProvider()) as provider, ThreadedServer(FakeToolBackend()) as backend:
        fleet = TwoWorkers(tmp_path, provider.url, backend.url, redis_server.url)
        served = fleet.served
        try:
            await fleet.serving()
            served.proc.send_signal(signal.SIGHUP)

            def reported(count: int) -> bool:
                return served.log.read_text().count("reload applied") >= count

            await _until(lambda: _true(reported(2)), "both workers reported the SIGHUP reload")
            async with grpc.aio.insecure_channel(fleet.target) as channel:
                answer = await apb_grpc.AdminStub(channel).Reload(apb.ReloadRequest(), metadata=ADMIN_GRPC_MD)
            assert answer.applied, answer
            assert {(w.index, w.pid, w.applied, w.error) for w in answer.workers} == {
                (i, pid, True, "") for i, pid in fleet.pids.items()
            }
            assert fleet.pids[0] != fleet.pids[1]
            assert "2 of 2 workers applied it" in answer.note

            http = await _admin_reload(fleet.http)
            assert http.status_code == 200, http.text
            body = http.json()
            assert sorted((w["worker"], w["pid"], w["applied"], w["reported"]) for w in body["workers"]) == [
                (i, fleet.pids[i], True, True) for i in (0, 1)
            ]

            env = {**os.environ, "SIDECAR_ADMIN_TOKEN": ADMIN}
            cli = await asyncio.to_thread(
                subprocess.run,
                [sys.executable, "-m", "sidecar", "admin", "reload", "--target", fleet.target],
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
            )
            assert cli.returncode == 0, cli.stdout + cli.stderr
            for i, pid in fleet.pids.items():
                assert f"worker {i} (pid {pid}): applied" in cli.stdout, cli.stdout
            assert "reload applied" in cli.stdout
        finally:
            served.stop()
        log = served.log.read_text()
        assert "worker 0 (pid" in log
        assert "worker 1 (pid" in log


async def test_a_silent_worker_is_named_in_the_answer(tmp_path: Path, redis_server: RedisServer) -> None:  # noqa: F811
    """A worker stopped (SIGSTOP) cannot reload: the answer, after ``server.reload_wait_s``, names it
    as not having reported, the other worker's outcome beside it; the reload is not called applied."""
    with ThreadedServer(FakeProvider()) as provider, ThreadedServer(FakeToolBackend()) as backend:
        fleet = TwoWorkers(tmp_path, provider.url, backend.url, redis_server.url, reload_wait_s=1)
        served = fleet.served
        try:
            await fleet.serving()
            os.kill(fleet.pids[1], signal.SIGSTOP)
            try:
                body: dict[str, Any] = {}
                for _ in range(20):  # the kernel spreads connections: one that lands on the stopped worker waits
                    try:
                        async with httpx.AsyncClient(timeout=httpx.Timeout(10, connect=1)) as client:
                            answer = await client.post(
                                f"http://127.0.0.1:{fleet.http}/admin/reload",
                                headers={"authorization": f"Bearer {ADMIN}"},
                                extensions={"timeout": {"connect": 1, "read": 10, "write": 1, "pool": 1}},
                            )
                    except httpx.TimeoutException:
                        continue
                    body = answer.json()
                    break
                assert answer.status_code == 422, answer.text
            finally:
                os.kill(fleet.pids[1], signal.SIGCONT)
            assert body["applied"] is False
            assert body["error_type"] == "workers_not_reported"
            workers = {w["worker"]: w for w in body["workers"]}
            assert workers[0]["pid"] == fleet.pids[0]
            assert workers[0]["applied"] is True
            assert workers[1]["pid"] == fleet.pids[1]
            assert (workers[1]["applied"], workers[1]["reported"]) == (False, False)
            assert workers[1]["error"] == "did not report its reload within 1 s"
            assert f"worker 1 (pid {fleet.pids[1]}): did not report its reload within 1 s" in body["error"]
        finally:
            served.stop()


# ---------------------------------------------------------------- a file that would empty the sidecar

SERVES_NOTHING = "the config serves nothing: no model (models:) and no tool (tools:)"
EMPTY_FILES = ("", "# the editor saved only the header\n# and a second comment\n")


def _renamed(cfg: dict[str, Any]) -> dict[str, Any]:
    """``cfg`` with every model and tool under a new name: valid, serving, and keeping none of them."""
    return {
        **cfg,
        "models": {f"{k}-v2": v for k, v in cfg["models"].items()},
        "tools": {f"{k}-v2": v for k, v in cfg["tools"].items()},
    }


def _messages(log: Path) -> list[str]:
    """The message of each JSON log line the process wrote so far."""
    found = []
    for line in log.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("message"), str):
            found.append(record["message"])
    return found


def _admin_cli(target: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``sidecar admin reload --target TARGET ARGS``, its lines unwrapped (a wide console)."""
    env = {**os.environ, "SIDECAR_ADMIN_TOKEN": ADMIN, "COLUMNS": "10000"}
    command = [sys.executable, "-m", "sidecar", "admin", "reload", "--target", target, *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60, check=False)


async def _answers(stub: pb_grpc.SidecarStub, model: str) -> bool:
    """Whether a CallModel naming ``model`` is answered (False: NOT_FOUND)."""
    try:
        await stub.CallModel(pb.CallModelRequest(model=model, messages=[user("x")]), timeout=30)
    except grpc.aio.AioRpcError as exc:
        if exc.code() != grpc.StatusCode.NOT_FOUND:
            raise
        return False
    return True


async def test_an_empty_or_comments_only_file_is_refused_at_every_reload_door(tmp_path: Path) -> None:
    """It was applied (POST /admin/reload answered 200 and the next call was NOT_FOUND "Models that exist:
    none"). Each door now refuses it with check-config's words, ``force`` or not (a config serving
    nothing is never applied); the config before keeps serving."""
    with ThreadedServer(FakeProvider()) as provider, ThreadedServer(FakeToolBackend()) as backend:
        http, prom = _port(), _port()
        path = tmp_path / "config.yaml"
        _write(path, _config(provider.url, backend.url, http, prom, old_model=False))
        served = Served(path)
        grpc_target, http_target = f"127.0.0.1:{served.grpc_port}", f"http://127.0.0.1:{http}"
        try:
            async with grpc.aio.insecure_channel(grpc_target) as channel:
                stub, admin = pb_grpc.SidecarStub(channel), apb_grpc.AdminStub(channel)
                assert await _answers(stub, "gpt")
                for text in EMPTY_FILES:
                    _write(path, text)
                    check = await asyncio.to_thread(_check_config, path)
                    words = check.stderr.strip().removeprefix("sidecar: ")
                    assert words.startswith(f"{path}: {SERVES_NOTHING}"), check.stderr
                    for query in ("", "?force=true"):
                        answer = await _admin_reload(http, query)
                        assert answer.status_code == 422, answer.text
                        body = answer.json()
                        assert (body["applied"], body["error"], body["error_type"]) == (False, words, "config_refused")
                        assert body["force_required"] is False  # forcing cannot make it serve
                    for force in (False, True):
                        request = apb.ReloadRequest(force=force)
                        outcome = await admin.Reload(request, metadata=ADMIN_GRPC_MD, timeout=30)
                        assert (outcome.applied, outcome.error, outcome.force_required) == (False, words, False)
                    for target, args in ((grpc_target, ("--force",)), (http_target, ())):
                        cli = await asyncio.to_thread(_admin_cli, target, *args)
                        assert cli.returncode == 1, cli.stdout + cli.stderr
                        assert words in cli.stdout
                    said = f"reload (SIGHUP) refused, the config before keeps serving: {words}"
                    served.proc.send_signal(signal.SIGHUP)
                    await _until(lambda s=said: _true(s in _messages(served.log)), "the SIGHUP reload refused")  # type: ignore[misc]
                    assert await _answers(stub, "gpt")
                models = await stub.ListModels(pb.ListModelsRequest())
                assert {m.id for m in models.models} == {"gpt", "claude"}
            async with httpx.AsyncClient() as client:
                scrape = (await client.get(f"http://127.0.0.1:{prom}/metrics")).text
            assert _counter(scrape, "sidecar_config_reloads", outcome="refused") == 2 * 7  # 2 + 2 + 2 + SIGHUP
            assert _counter(scrape, "sidecar_config_reloads", outcome="applied") is None
        finally:
            served.stop()


async def test_a_reload_that_keeps_no_served_model_or_tool_is_refused_unless_forced(tmp_path: Path) -> None:
    """A valid file naming every model and tool anew would answer every call of every agent NOT_FOUND:
    refused at each door, saying what it removes and how to force it; SIGHUP cannot force. Forced at the
    HTTP door, the Admin RPC and ``sidecar admin reload --force``, it is applied."""
    with ThreadedServer(FakeProvider()) as provider, ThreadedServer(FakeToolBackend()) as backend:
        http, prom = _port(), _port()
        path = tmp_path / "config.yaml"
        first = _config(provider.url, backend.url, http, prom, old_model=False)
        second = _renamed(first)
        _write(path, first)
        served = Served(path)
        target = f"127.0.0.1:{served.grpc_port}"
        try:
            async with grpc.aio.insecure_channel(target) as channel:
                stub, admin = pb_grpc.SidecarStub(channel), apb_grpc.AdminStub(channel)
                _write(path, second)
                answer = await _admin_reload(http)
                assert answer.status_code == 422, answer.text
                body = answer.json()
                assert (body["applied"], body["error_type"], body["force_required"]) == (False, "force_required", True)
                error = body["error"]
                assert error.startswith(
                    "the new config would remove every model and tool this sidecar serves (models claude, gpt; "
                    "tools dns, fail_fetch, fail_search, fetch, note, refused, search): it keeps none of them"
                ), error
                assert "(it has models claude-v2, gpt-v2; tools dns-v2," in error
                assert error.endswith(FORCE_HINT)
                outcome = await admin.Reload(apb.ReloadRequest(), metadata=ADMIN_GRPC_MD, timeout=30)
                assert (outcome.applied, outcome.error, outcome.force_required) == (False, error, True)
                cli = await asyncio.to_thread(_admin_cli, target)
                assert cli.returncode == 1
                assert error in cli.stdout
                served.proc.send_signal(signal.SIGHUP)
                said = f"reload (SIGHUP) refused, the config before keeps serving: {error}"
                await _until(lambda: _true(said in _messages(served.log)), "the SIGHUP reload refused")
                for query, field in (
                    ("?force=yes", "'force'"),
                    ("?froce=true", "'froce'"),
                    ("?force=true&force=true", "'force'"),
                ):
                    bad = await _admin_reload(http, query)
                    assert bad.status_code == 400, bad.text
                    assert bad.json()["error"]["type"] == "invalid_request"
                    assert field in bad.json()["error"]["message"]
                # force asked in a body is not dropped (it would be refused, force_required): a 400 naming the query
                for body in (b'{"force": true}', b"force=true", b"[]"):
                    bad = await _admin_reload(http, "", body)
                    assert bad.status_code == 400, bad.text
                    assert "?force=true" in bad.json()["error"]["message"]
                assert (await _admin_reload(http, "", b" {} ")).json()["force_required"] is True  # {}: no body
                assert await _answers(stub, "gpt")
                assert not await _answers(stub, "gpt-v2")
                # forced: at the HTTP door, then back through the Admin RPC, then with the command
                answer = await _admin_reload(http, "?force=true")
                assert answer.status_code == 200, answer.text
                assert answer.json()["note"].startswith("forced: the new config would remove every model and tool")
                assert not await _answers(stub, "gpt")
                assert await _answers(stub, "gpt-v2")
                _write(path, first)
                outcome = await admin.Reload(apb.ReloadRequest(force=True), metadata=ADMIN_GRPC_MD, timeout=30)
                assert (outcome.applied, outcome.error, outcome.force_required) == (True, "", False)
                assert await _answers(stub, "gpt")
                _write(path, second)
                cli = await asyncio.to_thread(_admin_cli, target, "--force")
                assert cli.returncode == 0, cli.stdout + cli.stderr
                assert "reload applied" in cli.stdout
                assert await _answers(stub, "gpt-v2")
            async with httpx.AsyncClient() as client:
                scrape = (await client.get(f"http://127.0.0.1:{prom}/metrics")).text
            assert _counter(scrape, "sidecar_config_reloads", outcome="refused") == 5  # HTTP x2, RPC, CLI, SIGHUP
            assert _counter(scrape, "sidecar_config_reloads", outcome="applied") == 3
        finally:
            served.stop()
        forced = [m for m in _messages(served.log) if "forced by the operator" in m]
        assert len(forced) == 3


async def test_watch_config_keeps_serving_while_the_file_is_empty_or_would_empty_it(tmp_path: Path) -> None:
    """``server.watch_config`` with calls in flight: the file left empty, of only comments, naming every
    model anew, half written. Each is seen and refused (the test waits for each refusal in the log, then
    for IN_FLIGHT more answers while that file is in place); the good file back is applied. No call fails
    (1,106 of 1,522 failed when an empty file was applied)."""
    with ThreadedServer(FakeProvider()) as provider, ThreadedServer(FakeToolBackend()) as backend:
        provider.server.script("fake-gpt", [{"delay_ms": 50, "repeat": 1_000_000}])
        http, prom = _port(), _port()
        path = tmp_path / "config.yaml"
        good = _config(provider.url, backend.url, http, prom, old_model=False, watch_config=True)
        text = yaml.safe_dump(good)
        _write(path, text)
        served = Served(path)
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{served.grpc_port}") as channel:
                stub = pb_grpc.SidecarStub(channel)
                ok, failed = [0], [0]
                stop = asyncio.Event()

                async def caller() -> None:
                    while not stop.is_set():
                        try:
                            await stub.CallModel(pb.CallModelRequest(model="gpt", messages=[user("hi")]))
                            ok[0] += 1
                        except grpc.aio.AioRpcError:
                            failed[0] += 1

                callers = [asyncio.create_task(caller()) for _ in range(IN_FLIGHT)]
                await _until(lambda: _true(ok[0] > IN_FLIGHT), "calls answered")
                bad = (*EMPTY_FILES, yaml.safe_dump(_renamed(good)), text[: len(text) // 2])
                refused = "reload (watch_config) refused, the config before keeps serving: "
                for i, content in enumerate(bad, 1):
                    _write(path, content)

                    def seen(count: int = i) -> bool:
                        return sum(m.startswith(refused) for m in _messages(served.log)) >= count

                    await _until(lambda: _true(seen()), f"the watcher refused file {i}")
                    before = ok[0]
                    await _until(lambda b=before: _true(ok[0] > b + IN_FLIGHT), f"calls while file {i} is in place")  # type: ignore[misc]
                errors = [m.removeprefix(refused) for m in _messages(served.log) if m.startswith(refused)]
                assert [SERVES_NOTHING in e for e in errors] == [True, True, False, False]
                assert "SIGHUP and server.watch_config cannot force a reload" in errors[2]
                _write(path, text)
                applied = "reload (watch_config): the new config serves the next call"
                await _until(lambda: _true(applied in _messages(served.log)), "the good file applied")
                stop.set()
                await asyncio.gather(*callers)
            assert failed[0] == 0, f"{failed[0]} of {ok[0] + failed[0]} calls failed"
        finally:
            served.stop()


async def test_two_workers_refuse_what_would_empty_them_and_apply_it_forced(
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """``--workers 2``: SIGHUP to the supervisor with a file renaming everything: each worker refuses it
    (SIGHUP cannot force); with an empty file the supervisor refuses it and tells no worker; an admin
    reload is refused by the worker asked, before any round; forced, both workers apply it."""
    with ThreadedServer(FakeProvider()) as provider, ThreadedServer(FakeToolBackend()) as backend:
        fleet = TwoWorkers(tmp_path, provider.url, backend.url, redis_server.url)
        served = fleet.served
        good = yaml.safe_load(fleet.path.read_text())
        try:
            await fleet.serving()
            _write(fleet.path, _renamed(good))
            served.proc.send_signal(signal.SIGHUP)

            def refused_by_workers() -> list[str]:
                return [m for m in _messages(served.log) if "reload refused: the new config would remove" in m]

            await _until(lambda: _true(len(refused_by_workers()) >= 2), "both workers refused the SIGHUP round")
            assert sorted(m.split(" (pid")[0] for m in refused_by_workers()) == ["worker 0", "worker 1"]
            rounds = sum("workers told to reload" in m for m in _messages(served.log))
            _write(fleet.path, "")
            served.proc.send_signal(signal.SIGHUP)
            by_supervisor = (
                "reload (SIGHUP) refused by the supervisor, no worker told; the config before keeps serving: "
            )
            await _until(
                lambda: _true(any(m.startswith(by_supervisor) and SERVES_NOTHING in m for m in _messages(served.log))),
                "the supervisor refused the empty file",
            )
            assert sum("workers told to reload" in m for m in _messages(served.log)) == rounds
            _write(fleet.path, _renamed(good))
            answer = await _admin_reload(fleet.http)
            assert answer.status_code == 422, answer.text
            body = answer.json()
            assert (body["error_type"], body["force_required"]) == ("force_required", True)
            assert body["note"] == "refused by this worker before asking the others (they read the same file)"
            assert [(w["pid"] in fleet.pids.values(), w["applied"]) for w in body["workers"]] == [(True, False)]
            answer = await _admin_reload(fleet.http, "?force=true")
            assert answer.status_code == 200, answer.text
            workers = sorted((w["worker"], w["pid"], w["applied"]) for w in answer.json()["workers"])
            assert workers == [(i, fleet.pids[i], True) for i in (0, 1)]
            async with grpc.aio.insecure_channel(fleet.target) as channel:
                stub = pb_grpc.SidecarStub(channel)
                assert await _answers(stub, "gpt-v2")
                assert not await _answers(stub, "gpt")
        finally:
            served.stop()


async def test_force_is_an_argument_of_admin_reload_alone(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["admin", "close-circuit", "docs", "--force"])
    assert caught.value.code == 2
    assert "--force is for admin reload, not admin close-circuit" in capsys.readouterr().err
