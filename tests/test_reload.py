"""Reload without a restart, on a real process under load (``server/reload.py``).

64 CallModel calls stay in flight (the fake provider answers each after a deliberate delay) while the
config file is reloaded 20 times: none fails. A removed model's in-flight calls finish, its next call
is MODEL_NOT_FOUND; a bad file is refused with check-config's error and the old config still serves;
SIGHUP and POST /admin/reload each trigger it; ``sidecar.config.reloads`` counts both outcomes.
Counts prove it, not timing: every call's outcome is tallied.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import yaml
from sidecar_client import pb, user
from sidecar_contract.v1 import sidecar_pb2_grpc as pb_grpc

from sidecar.fakes import FakeProvider, FakeToolBackend
from sidecar.fakes._threaded import ThreadedServer
from tests.conftest import base_config

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
            [sys.executable, "-m", "sidecar", "serve", "--config", str(path), "--listen", f"127.0.0.1:{self.grpc_port}", *args],
            stdout=subprocess.PIPE,
            stderr=open(path.with_suffix(".log"), "w"),  # noqa: SIM115
            text=True,
            env=env,
        )
        self.log = path.with_suffix(".log")
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert "listening" in line, line

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.proc.communicate(timeout=30)


async def _admin_reload(http: int) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as client:
        return await client.post(f"http://127.0.0.1:{http}/admin/reload", headers={"authorization": f"Bearer {ADMIN}"})


async def _until(check: Any, what: str, tries: int = 200) -> None:
    for _ in range(tries):
        if await check():
            return
        await asyncio.sleep(0.05)  # polling a real process, not waiting out a backoff
    raise AssertionError(f"never: {what}")


async def test_twenty_reloads_under_load_fail_no_call(tmp_path: Path) -> None:
    with ThreadedServer(FakeProvider()) as provider, ThreadedServer(FakeToolBackend()) as backend:
        provider.server.script("fake-gpt", [{"delay_ms": 150, "repeat": 1_000_000}])
        provider.server.script("fake-old", [{"delay_ms": 600, "repeat": 1_000_000}])
        http, prom = _port(), _port()
        path = tmp_path / "config.yaml"
        with_old = _config(provider.url, backend.url, http, prom, old_model=True)
        without_old = _config(provider.url, backend.url, http, prom, old_model=False)
        _write(path, with_old)
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
                async def call_old() -> pb.CallModelResponse:
                    return await stub.CallModel(pb.CallModelRequest(model="gpt-old", messages=[user("x")]))

                old_call = asyncio.create_task(call_old())
                await _until(lambda: _true(ok[0] > IN_FLIGHT), "calls answered")
                for i in range(RELOADS):
                    _write(path, with_old if i % 2 else without_old)
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
                _write(path, "models: {gpt: {provider: nowhere}}\n")
                check = subprocess.run(
                    [sys.executable, "-m", "sidecar", "check-config", str(path)], capture_output=True, text=True
                )
                answer = await _admin_reload(http)
                assert answer.status_code == 422
                assert answer.json()["error"] == check.stderr.strip().removeprefix("sidecar: ")
                before = ok[0]
                await _until(lambda: _true(ok[0] > before + IN_FLIGHT), "calls after the refusal")
                # SIGHUP: the file with gpt-old again (the last good one had it removed? either way, it serves after)
                _write(path, with_old)
                served.proc.send_signal(signal.SIGHUP)

                async def old_serves() -> bool:
                    try:
                        await stub.CallModel(pb.CallModelRequest(model="gpt-old", messages=[user("x")]))
                        return True
                    except grpc.aio.AioRpcError:
                        return False

                await _until(old_serves, "SIGHUP applied the file")
                stop.set()
                await asyncio.gather(*callers)
                assert failed[0] == 0, f"{failed[0]} calls failed across {RELOADS} reloads"
                assert ok[0] > RELOADS * IN_FLIGHT
            async with httpx.AsyncClient() as client:
                scrape = (await client.get(f"http://127.0.0.1:{prom}/metrics")).text
            assert 'sidecar_config_reloads_total{outcome="applied"} 2' in scrape.replace(".0", "") or "sidecar_config_reloads" in scrape
            applied = [l for l in scrape.splitlines() if l.startswith("sidecar_config_reloads") and 'outcome="applied"' in l]
            refused = [l for l in scrape.splitlines() if l.startswith("sidecar_config_reloads") and 'outcome="refused"' in l]
            assert applied and float(applied[0].rsplit(" ", 1)[1]) >= RELOADS + 1
            assert refused and float(refused[0].rsplit(" ", 1)[1]) == 1
        finally:
            served.stop()
        log = served.log.read_text()
        assert "refused, the config before keeps serving" in log


async def _true(value: bool) -> bool:
    return value
