"""``sidecar serve --workers N``: a supervisor and N processes on one address, as real processes.

memory state with workers > 1            refused, exit 2, naming state.backend: redis
a unix socket with workers > 1           refused, exit 2, saying why
two workers on one port (redis state)    both serve; policy shared (a 429 on one pauses the other)
a worker killed                          the supervisor starts another
SIGTERM                                  health NOT_SERVING while the call in flight finishes; exit 0
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sidecar_client import SidecarClient, SidecarError, user

from sidecar.config import ConfigError, parse_config
from sidecar.fakes import FakeProvider, ThreadedServer
from tests.conftest import ONE_TOOL, base_config
from tests.redis_server import RedisServer, free_port, redis_server  # noqa: F401  (the fixture)

KEY_ENV = "WORKERS_TEST_KEY"
WAIT_S = 300.0
"""How long a worker may take to start or stop: two Python processes starting at once on one busy core
took more than 30 s (a run under taskset -c 0 beside other work); only a hang waits this long."""
pytestmark = pytest.mark.timeout(3 * WAIT_S)
"""Above the suite's 120 s: a start slower than that on a busy machine is waited for, and a hang
fails in ``banners`` with the workers' stderr rather than as a bare pytest-timeout."""
BANNER = re.compile(r"worker (\d+)/(\d+) \(pid (\d+)\) listening on (\S+)")


def _serve(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "sidecar", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, KEY_ENV: "sk-test-WORKERSKEY123456789", "OTEL_TRACES_EXPORTER": "none", **(env or {})},
    )


def test_memory_state_with_several_workers_is_refused_naming_the_fix() -> None:
    proc = _serve("--workers", "2", "--listen", f"127.0.0.1:{free_port()}")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "state.backend: redis" in err
    with pytest.raises(ConfigError, match=r"server\.workers: 2 .*state\.backend: redis"):
        parse_config("server: {workers: 2}")
    with pytest.raises(ConfigError, match=r"auto \(one per core\)"):
        parse_config("server: {workers: auto}")


def test_a_unix_socket_with_several_workers_is_refused_saying_why(tmp_path: Path) -> None:
    cfg = tmp_path / "unix.yaml"
    cfg.write_text("state: {backend: redis, url: 'redis://127.0.0.1:1/0'}\n" + ONE_TOOL)
    proc = _serve("--config", str(cfg), "--workers", "2", "--listen", f"unix:{tmp_path}/s.sock")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "cannot share the unix socket" in err
    assert "SO_REUSEPORT" in err


class Supervisor:
    """``sidecar serve --workers 2`` with its stdout read line by line (the banners)."""

    def __init__(self, config: Path) -> None:
        self.proc = _serve("--config", str(config), "--workers", "2")
        self.lines: queue.Queue[str] = queue.Queue()
        self._err: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self._err_reader = threading.Thread(target=self._read_err, daemon=True)
        self._err_reader.start()
        self.workers: dict[int, int] = {}  # index -> pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def _read_err(self) -> None:
        """Read as it is written: a pipe nobody reads blocks its writers once full (64 KiB)."""
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._err.append(line)

    def banners(self, count: int) -> list[tuple[int, int]]:
        """The next ``count`` worker banners: (index, pid)."""
        found: list[tuple[int, int]] = []
        end = time.monotonic() + WAIT_S
        while len(found) < count:
            try:
                line = self.lines.get(timeout=max(end - time.monotonic(), 0.01))
            except queue.Empty:
                pytest.fail(f"worker banners: {found}, wanted {count}; stderr: {self.stderr_after_kill()}")
            for m in BANNER.finditer(line):  # every banner on the line: two written at once may share one
                found.append((int(m.group(1)), int(m.group(3))))
                self.workers[int(m.group(1))] = int(m.group(3))
        return found

    def stderr(self) -> str:
        """What the supervisor and its workers wrote to stderr, once the supervisor has exited."""
        if self.proc.poll() is None:
            return "(still running)"
        self._err_reader.join(10)  # the workers leave once they see their supervisor gone (PARENT_CHECK_S)
        return "".join(self._err)

    def stderr_after_kill(self) -> str:
        """The supervisor killed, the end of what it and its workers wrote to stderr."""
        self.proc.kill()
        self.proc.wait()
        return self.stderr()[-4000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid in self.workers.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for stream in (self.proc.stdout, self.proc.stderr):  # closed here, not by a later test's collection
            if stream is not None:
                stream.close()


@pytest.fixture
def workers(tmp_path: Path, redis_server: RedisServer) -> Iterator[tuple[Supervisor, str, FakeProvider]]:  # noqa: F811
    with ThreadedServer(FakeProvider()) as provider:
        address = f"127.0.0.1:{free_port()}"
        cfg = base_config(
            provider.url,
            "http://127.0.0.1:9",
            server={"listen": address, "grace_period_s": 10},
            state={"backend": "redis", "url": redis_server.url, "prefix": "workers"},
        )
        cfg["tools"] = {}
        for p in cfg["providers"].values():
            p["api_key"] = "${" + KEY_ENV + "}"
        path = tmp_path / "workers.yaml"
        path.write_text(yaml.safe_dump(cfg))
        supervisor = Supervisor(path)
        try:
            yield supervisor, address, provider.server
        finally:
            supervisor.stop()


def test_two_workers_serve_one_port_and_share_policy(workers: tuple[Supervisor, str, FakeProvider]) -> None:
    supervisor, address, provider = workers
    started = supervisor.banners(2)
    assert sorted(i for i, _ in started) == [0, 1]
    assert len({pid for _, pid in started}) == 2
    provider.script("fake-gpt", [{"preset": "rate_limit", "retry_after": "60"}])
    with SidecarClient(address) as client:
        with pytest.raises(SidecarError) as first:
            client.call_model("gpt", [user("hi")], timeout=3)
        assert first.value.kind_name == "JOB_TIMEOUT"
        for _ in range(6):  # new connections land on either worker: each knows the pause
            with SidecarClient(address) as fresh, pytest.raises(SidecarError) as paused:
                fresh.call_model("gpt", [user("hi")], timeout=5)
            assert "paused by the provider's Retry-After" in paused.value.message
    assert len(provider.requests(model="fake-gpt")) == 1


def test_a_dead_worker_is_restarted(workers: tuple[Supervisor, str, FakeProvider]) -> None:
    supervisor, address, _ = workers
    started = dict(supervisor.banners(2))
    os.kill(started[1], signal.SIGKILL)
    [(index, pid)] = supervisor.banners(1)
    assert index == 1
    assert pid != started[1]
    with SidecarClient(address) as client:
        assert client.call_model("gpt", [user("still here")], timeout=10).message.text


SIGNAL_DELIVERED_S = 1.0
"""Time for the supervisor to forward a SIGTERM and each worker to act on it (it takes milliseconds)."""


def test_sigterm_drains_every_worker_health_not_serving_meanwhile(
    workers: tuple[Supervisor, str, FakeProvider],
) -> None:
    supervisor, address, provider = workers
    supervisor.banners(2)
    provider.script("fake-gpt", [{"delay_ms": 3000}])
    answer: queue.Queue[object] = queue.Queue()

    def slow_call() -> None:
        with SidecarClient(address) as client:
            try:
                answer.put(client.call_model("gpt", [user("slow")], timeout=20).message.text)
            except Exception as exc:
                answer.put(exc)

    threading.Thread(target=slow_call, daemon=True).start()
    end = time.monotonic() + WAIT_S
    while not provider.requests(model="fake-gpt"):  # the call is in flight upstream
        assert time.monotonic() < end, "the slow call never reached the provider"
        time.sleep(0.02)
    supervisor.proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    seen: list[tuple[float, int]] = []  # (seconds after the SIGTERM the probe was sent, status)
    while answer.empty() and time.monotonic() < end:
        with grpc.insecure_channel(address) as channel:
            sent = time.monotonic() - signalled
            try:
                reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1)
                seen.append((sent, reply.status))
            except grpc.RpcError:
                pass  # a worker that has finished draining no longer listens
        time.sleep(0.05)
    assert any(status == health_pb2.HealthCheckResponse.NOT_SERVING for _, status in seen)
    # A probe sent before a worker's own SIGTERM arrived (the supervisor forwards it) may still see
    # SERVING; once the signal has reached both, none does, for the 2 s the slow call still runs.
    late = [status for sent, status in seen if sent > SIGNAL_DELIVERED_S]
    assert late, seen
    assert health_pb2.HealthCheckResponse.SERVING not in late, seen
    text = answer.get(timeout=WAIT_S)
    assert isinstance(text, str), text
    assert supervisor.proc.wait(WAIT_S) == 0
    assert "every worker stopped" in supervisor.stderr()
