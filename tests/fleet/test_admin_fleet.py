"""Operator actions fleet-wide: two ``sidecar serve`` processes on one real Redis.

A Retry-After pause of ``gpt`` and 1.25 USD of ``wf-1``'s spend are in Redis before the two start
(each reads them back at connect, as a replica joining a fleet does). An operator lifts the pause
and resets the spend on replica A; replica B's admin view shows both gone, and the shared ledger
key is gone from Redis. Each replica's state section says how fresh its view of the fleet is.
An opening of ``flaky`` is there too: a close made on A while Redis is down reaches B.

The lift and the reset run on a single Redis and on a Redis Cluster (``redis_target``); the outages stop
the one Redis (``redis_server``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from sidecar.fakes import FakeProvider, FakeToolBackend, ThreadedServer
from sidecar.state.redis.keys import key
from tests.conftest import base_config
from tests.redis_cluster import Target, redis_cluster, redis_target  # noqa: F401  (the fixtures)
from tests.redis_server import RedisServer, free_port, redis_server  # noqa: F401  (the fixture)

ADMIN_ENV = "FLEET_ADMIN_TOKEN"
ADMIN = "fleet-admin-token-0123456789abcdef"
PREFIX = "admin-fleet"


class Replica:
    def __init__(self, tmp: Path, provider: str, backend: str, state: dict[str, Any]) -> None:
        self.http = free_port()
        self.stderr = tmp / "stderr.log"
        cfg = base_config(
            provider,
            backend,
            server={
                "listen": f"127.0.0.1:{free_port()}",
                "grace_period_s": 1,
                "admin": {"tokens": [f"${{{ADMIN_ENV}}}"]},
            },
            http={"listen": f"127.0.0.1:{self.http}"},
            state=state,
            policy={"spend_caps": {"wf-1": 2.5}},
        )
        for p in cfg["providers"].values():
            p["api_key"] = "${FLEET_TEST_KEY}"  # a file holds no secret
        path = tmp / "sidecar.yaml"
        path.write_text(yaml.safe_dump(cfg))
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}, "OTEL_TRACES_EXPORTER": "none"}
        env.update({"FLEET_TEST_KEY": "sk-test-FLEETKEY1234567890", ADMIN_ENV: ADMIN})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sidecar", "serve", "--config", str(path)],
            stdout=subprocess.PIPE,
            stderr=(tmp / "stderr.log").open("w"),
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        self.banner = self.proc.stdout.readline()

    def _url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.http}{path}"

    def state(self) -> dict[str, Any]:
        answer = httpx.get(self._url("/admin/state"), headers={"authorization": f"Bearer {ADMIN}"}, timeout=5)
        answer.raise_for_status()
        doc: dict[str, Any] = answer.json()
        return doc

    def act(self, action: str, name: str) -> dict[str, Any]:
        headers = {"authorization": f"Bearer {ADMIN}"}
        answer = httpx.post(self._url(f"/admin/actions/{action}"), json={"name": name}, headers=headers, timeout=5)
        answer.raise_for_status()
        doc: dict[str, Any] = answer.json()
        return doc

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _until(check: Callable[[], bool], what: str) -> None:
    end = time.monotonic() + 10
    while not check():  # real time: a publish crossing Redis between two processes
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _pause(r: Replica) -> float:
    return float(next(m for m in r.state()["models"] if m["model"] == "gpt")["pause_left_s"])


def _circuit(r: Replica) -> str:
    return str(next((g["circuit"] for g in r.state()["services"] if g["name"] == "flaky"), "none"))


def _spent(r: Replica) -> float:
    return float(next(w for w in r.state()["workflows"] if w["workflow"] == "wf-1")["spent_usd"])


def _two(tmp_path: Path, target: Target) -> Iterator[tuple[Replica, Replica]]:
    """Two replicas on ``target`` (a single Redis or the cluster), a pause, a spend and an opening in it first."""
    client = target.client()
    client.set(key(PREFIX, "mpause", "gpt"), "1", px=120_000)
    client.set(key(PREFIX, "spend", "wf-1"), "1.25", px=120_000)
    sec, usec = client.time()  # an opening 5 s old on Redis's clock (the instants kept in Redis are on it)
    opened = {"cooldown": 300, "since": time.time() - 5, "probe": 60, "at": sec * 1000 + usec // 1000 - 5000}
    client.set(key(PREFIX, "open", "flaky"), json.dumps(opened), px=600_000)
    replicas: list[Replica] = []
    with ThreadedServer(FakeProvider()) as provider, ThreadedServer(FakeToolBackend()) as backend:
        try:
            for name in ("a", "b"):
                (tmp_path / name).mkdir()
                replicas.append(Replica(tmp_path / name, provider.url, backend.url, target.state(PREFIX)))
                assert "listening on" in replicas[-1].banner
            yield replicas[0], replicas[1]
        finally:
            for r in replicas:
                r.stop()


@pytest.fixture
def both(tmp_path: Path, redis_target: Target) -> Iterator[tuple[Replica, Replica, Target]]:  # noqa: F811
    """Two replicas on a single Redis, then on the cluster."""
    for a, b in _two(tmp_path, redis_target):
        yield a, b, redis_target


@pytest.fixture
def fleet(tmp_path: Path, redis_server: RedisServer) -> Iterator[tuple[Replica, Replica, RedisServer]]:  # noqa: F811
    """Two replicas on one Redis the test stops and starts."""
    for a, b in _two(tmp_path, Target(redis_server, None)):
        yield a, b, redis_server


def test_lift_pause_and_reset_spend_reach_the_other_process(both: tuple[Replica, Replica, Target]) -> None:
    a, b, redis = both
    _until(lambda: _pause(b) > 60 and _spent(b) == 1.25, "replica B to read the pause and the spend back")
    assert _pause(a) > 60

    assert a.act("lift-pause", "gpt")["changed"] is True
    _until(lambda: _pause(b) == 0, "replica B to see the operator's lift")
    assert redis.client().exists(key(PREFIX, "mpause", "gpt")) == 0

    assert a.act("reset-spend", "wf-1")["was_usd"] == 1.25
    _until(lambda: _spent(b) == 0, "replica B to see the operator's reset")
    assert redis.client().exists(key(PREFIX, "spend", "wf-1")) == 0

    state = b.state()["state"]
    assert state["backend"] == "redis"
    assert state["reachable"] is True
    assert state["replicas"] == 2
    assert 0 <= state["staleness_s"] < 3  # a heartbeat every second
    assert "last_error" not in state


def test_a_stopped_redis_shows_unreachable_with_the_error_and_growing_staleness(
    fleet: tuple[Replica, Replica, RedisServer],
) -> None:
    a, _, redis = fleet
    _until(lambda: a.state()["state"]["reachable"] is True, "replica A to connect")
    redis.kill()
    _until(lambda: a.state()["state"]["reachable"] is False, "replica A to notice the outage")
    state = a.state()["state"]
    assert state["last_error"]
    assert ADMIN not in str(state)
    first = state["staleness_s"]
    assert first is not None
    _until(lambda: a.state()["state"]["staleness_s"] > first + 0.5, "the staleness to grow during the outage")


def test_actions_while_redis_is_down_are_queued_and_survive_the_resync(
    fleet: tuple[Replica, Replica, RedisServer],
) -> None:
    """Redis stopped under both replicas: the operator's lift and reset on A answer ``queued`` (applied
    on A, the fleet not reached) and are kept; B, cut off too, still holds the pause and the spend.
    Redis restarted (empty: no persistence): whichever replica re-syncs first, B's view pushed back
    does not bring the pause or the spend back, on either replica, and Redis holds neither."""
    a, b, redis = fleet
    _until(lambda: _pause(b) > 60 and _spent(b) == 1.25 and _pause(a) > 60, "both replicas to read the state")
    redis.kill()
    _until(lambda: not a.state()["state"]["reachable"] and not b.state()["state"]["reachable"], "the outage")

    lifted = a.act("lift-pause", "gpt")
    assert (lifted["changed"], lifted["reach"]) == (True, "queued")
    assert "Redis is not reachable" in lifted["note"]
    env = {**os.environ, "SIDECAR_ADMIN_TOKEN": ADMIN}
    cli = subprocess.run(
        [sys.executable, "-m", "sidecar", "admin", "reset-spend", "wf-1", "--target", a._url("")],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "was_usd=1.25, reach=queued" in cli.stdout
    assert "queued, and published to the fleet when Redis answers again" in " ".join(cli.stdout.split())
    assert a.state()["state"]["pending_actions"] == 2
    assert _pause(a) == 0
    assert _spent(a) == 0
    assert _pause(b) > 60  # B was not reached
    assert _spent(b) == 1.25

    redis.start()
    _until(lambda: a.state()["state"]["reachable"] and b.state()["state"]["reachable"], "both back")
    _until(lambda: _pause(b) == 0 and _spent(b) == 0, "B to drop the pause and the spend")
    assert a.state()["state"]["pending_actions"] == 0
    time.sleep(2.5)  # real time: two heartbeats and any late re-push between two processes
    for r in (a, b):
        assert _pause(r) == 0
        assert _spent(r) == 0
    client = redis.client()
    assert client.exists(key(PREFIX, "mpause", "gpt")) == 0
    assert float(client.get(key(PREFIX, "spend", "wf-1")) or 0) == 0
    assert client.exists(key(PREFIX, "mlift", "gpt"), key(PREFIX, "sreset", "wf-1")) == 2


def test_a_close_while_redis_is_down_reaches_the_replica_cut_off_with_it(
    fleet: tuple[Replica, Replica, RedisServer],
) -> None:
    """``flaky``'s circuit is open on both (read from Redis at start). Redis killed; the operator closes
    it on A (``queued``); B, cut off too, still refuses. Redis restarted empty, with B held
    (SIGSTOP) until A has replayed the close, so that B hears no publish and must read the ``closed``
    record back: B's admin view shows it closed, on both, and Redis holds no opening. Before, B kept
    its opening until its own cooldown (300 s) and probe (this test failed)."""
    a, b, redis = fleet
    _until(lambda: _circuit(a) == "open" and _circuit(b) == "open", "both replicas to read the opening")
    redis.kill()
    _until(lambda: not a.state()["state"]["reachable"] and not b.state()["state"]["reachable"], "the outage")
    closed = a.act("close-circuit", "flaky")
    assert (closed["changed"], closed["reach"]) == (True, "queued")
    assert _circuit(a) == "closed"
    assert _circuit(b) == "open"  # B was not reached
    b.proc.send_signal(signal.SIGSTOP)  # B re-syncs after A has replayed the close (it hears no publish)
    try:
        redis.start()
        _until(lambda: redis.client().exists(key(PREFIX, "closed", "flaky")) == 1, "A to replay the close")
    finally:
        b.proc.send_signal(signal.SIGCONT)
    _until(lambda: a.state()["state"]["reachable"] and b.state()["state"]["reachable"], "both back")
    _until(lambda: _circuit(b) == "closed", "B to close the circuit")
    assert a.state()["state"]["pending_actions"] == 0
    time.sleep(2.5)  # real time: two heartbeats and any late re-push between two processes
    assert (_circuit(a), _circuit(b)) == ("closed", "closed")
    client = redis.client()
    assert client.exists(key(PREFIX, "open", "flaky")) == 0
    assert client.exists(key(PREFIX, "closed", "flaky")) == 1


def test_a_replica_stopped_with_actions_queued_tries_then_names_each_one_lost(
    fleet: tuple[Replica, Replica, RedisServer],
) -> None:
    """SIGTERM on A with a lift queued and Redis still down: A tries for state.shutdown_flush_s (5 s by
    default), then exits, its log naming the action lost to the fleet; B still holds the pause."""
    a, b, redis = fleet
    _until(lambda: _pause(a) > 60 and _pause(b) > 60, "both replicas to read the pause")
    redis.kill()
    _until(lambda: not a.state()["state"]["reachable"], "A to notice the outage")
    lifted = a.act("lift-pause", "gpt")
    assert lifted["reach"] == "queued"
    assert "state.shutdown_flush_s (5 s) more" in lifted["note"]
    started = time.monotonic()
    a.stop()
    took = time.monotonic() - started
    assert a.proc.returncode == 0
    assert 5.0 <= took < 15.0  # the grace period (1 s, nothing in flight), the 5 s of tries, the exit
    log = a.stderr.read_text()
    assert "1 operator actions never reached the fleet" in log
    assert "lift-pause gpt (made " in log
    assert "Repeat them on a running replica once Redis answers" in log
    assert _pause(b) > 60  # the fleet was never told
