"""Three ``sidecar serve`` processes, one real Redis, one fake provider and tool backend: one policy.

Each scenario uses its own model, service or workflow, so that they share the three processes
(started once per test worker). Nothing here is timed: every check polls for a state with a
generous overall timeout, and a call that hung would hit its gRPC deadline and fail the test.

    a 429 with Retry-After on one      the other two refuse at once (JOB_TIMEOUT: paused), nothing sent
    a rate-limit budget about to run   the next call, on whichever replica, waits for the reset: the fake's
      out, told by the headers           request limit answers no 429 to a caller going round the three
    overloads on one                   the other two's throttle of that model rises (their gauge)
    a service failing through one      the other two refuse (CIRCUIT_OPEN, quoting the same response);
                                       after the cooldown one probe in the fleet, then closed on all three
    a workflow's spend cap             reached across the three, as by one ledger
    Redis killed and restarted         every call answered meanwhile; one warning per replica; the spend
                                       added during the outage reaches Redis once it is back

Every scenario runs twice: the three on a single Redis, then on a Redis Cluster of three primaries and three
replicas (tests/redis_cluster.py, started once per session; this module's prefix is its own). On the cluster,
"Redis killed" is the primary serving the spend's key, killed with SIGKILL under the calls: its replica is
promoted, and the killed node, started again, comes back as a replica.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import yaml
from sidecar_client import AsyncSidecarClient, SidecarError, pb, user

from sidecar.fakes import FakeProvider, FakeToolBackend, ThreadedServer
from sidecar.state.redis.keys import key as state_key
from tests.conftest import base_config, tool
from tests.redis_cluster import Cluster, Target, redis_cluster  # noqa: F401  (the fixture)
from tests.redis_server import RedisServer, free_port

T = TypeVar("T")
REPLICAS = 3
POLL_TIMEOUT_S = 20.0
CALL_TIMEOUT_S = 10.0
KEY_ENV = "FLEET_TEST_KEY"
COOLDOWN_S = 4.0
"""Twenty times what the checks made while the circuit is open take here (0.1-0.2 s, loaded or not)."""
CIRCUIT = {
    "max_throttle": 1.0,
    "failure_step": 1.0,
    "failures_to_open": 1,
    "cooldown_s": COOLDOWN_S,
    "probe_timeout_s": 30,
}
"""A circuit that opens on the second failure and half-opens COOLDOWN_S later."""
ROUTE_CIRCUIT = {**CIRCUIT, "cooldown_s": 300}
"""A deployment's circuit: the test only sees it open, so its cooldown can be as long as it likes."""
SPEND_CAP = 0.01
DOC = "doc-1"
"""A document the tool backend has (a probe it answers proves the service up)."""


def _model(upstream: str, **extra: Any) -> dict[str, Any]:
    return {
        "provider": "oai",
        "upstream_model": upstream,
        "context_window": 8000,
        "max_output_tokens": 512,
        "default_output_tokens": 64,
        **extra,
    }


def _config(provider: str, backend: str, state: dict[str, Any], port: int, prometheus: int) -> dict[str, Any]:
    cfg = base_config(
        provider,
        backend,
        server={"listen": f"127.0.0.1:{port}", "grace_period_s": 2},
        policy={"upstream_retries": 3, "tool_retries": 0},
        models={
            "m429": _model("up-429"),
            "m529": _model("up-529"),
            "mbudget": _model("up-budget"),
            "mspend": _model("up-spend", input_price_per_mtok=200.0, output_price_per_mtok=200.0),
            "mout": _model("up-out", input_price_per_mtok=10.0, output_price_per_mtok=10.0),
            "dep-dead": _model("up-dead"),
            "dep-ok": _model("up-ok"),
            "fleet-route": {"route": {"fallbacks": ["dep-dead", "dep-ok"], "circuit": ROUTE_CIRCUIT}},
            "dep-probed": _model("up-probed"),
            "dep-spare": _model("up-spare"),
            "probe-route": {"route": {"fallbacks": ["dep-probed", "dep-spare"], "circuit": CIRCUIT}},
        },
        services={"fleetsvc": {"rate": 1000, "circuit": CIRCUIT}},
        tools={"fleet_doc": tool(backend + "/docs/{id}", "fetch", "fleetsvc")},
        state=state,
        telemetry={"prometheus_port": prometheus, "log_level": "INFO"},
    )
    cfg["policy"]["spend_caps"] = {"wf-spend": SPEND_CAP, "wf-out": 1000.0}
    for p in cfg["providers"].values():
        p["api_key"] = "${" + KEY_ENV + "}"  # a file holds no secret
    return cfg


class Replica:
    def __init__(self, path: Path, port: int, prometheus: int, log: Path) -> None:
        self.address = f"127.0.0.1:{port}"
        self.prometheus = prometheus
        self.log = log
        env = {**os.environ, KEY_ENV: "sk-test-FLEETKEY1234567890", "OTEL_TRACES_EXPORTER": "none"}
        with log.open("w") as stderr:  # the process has its own copy; ours is closed now, not when collected
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "sidecar", "serve", "--config", str(path)],
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=env,
            )
        self.banner = self.proc.stdout.readline() if self.proc.stdout else ""

    def logs(self) -> str:
        return self.log.read_text()

    def gauge(self, name: str, **labels: str) -> float | None:
        """A gauge's value on this replica's Prometheus endpoint (None: not reported)."""
        text = httpx.get(f"http://127.0.0.1:{self.prometheus}/metrics", timeout=5).text
        for line in text.splitlines():
            if not line.startswith(name) or line.startswith("#"):
                continue
            if all(f'{k}="{v}"' in line for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
        return None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class Fleet:
    def __init__(self, tmp: Path, cluster: Cluster | None) -> None:
        self.cluster = cluster
        self.server = RedisServer().start() if cluster is None else None
        self.target = Target(self.server, cluster)
        self.prefix = f"fleet-{uuid.uuid4().hex[:8]}"
        self.provider = ThreadedServer(FakeProvider()).start()
        self.backend = ThreadedServer(FakeToolBackend()).start()
        self.replicas: list[Replica] = []
        for i in range(REPLICAS):
            port, prometheus = free_port(), free_port()
            cfg = _config(self.provider.url, self.backend.url, self.target.state(self.prefix, 200), port, prometheus)
            path = tmp / f"replica{i}.yaml"
            path.write_text(yaml.safe_dump(cfg))
            self.replicas.append(Replica(path, port, prometheus, tmp / f"replica{i}.log"))
        for r in self.replicas:
            assert "listening on" in r.banner, r.logs()

    def close(self) -> None:
        for r in self.replicas:
            r.stop()
        self.provider.stop()
        self.backend.stop()
        if self.server is not None:
            self.server.kill()


@pytest.fixture(scope="module", params=["single", "cluster"])
def fleet(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Fleet]:
    cluster: Cluster | None = request.getfixturevalue("redis_cluster") if request.param == "cluster" else None
    if cluster is not None:
        cluster.wait_ok()
    fleet = Fleet(tmp_path_factory.mktemp("fleet"), cluster)
    try:
        yield fleet
    finally:
        fleet.close()


async def poll(check: Callable[[], Any], what: str, timeout: float = POLL_TIMEOUT_S) -> Any:
    """``check()`` (awaited if it is a coroutine) until it is truthy; fail naming ``what``."""
    end = time.monotonic() + timeout
    while True:
        got = check()
        if asyncio.iscoroutine(got):
            got = await got
        if got:
            return got
        if time.monotonic() > end:
            pytest.fail(f"not within {timeout:g} s: {what}")
        await asyncio.sleep(0.05)


def _job(workflow: str = "") -> pb.Job:
    return pb.Job(job_id=uuid.uuid4().hex, workflow_id=workflow)


async def _call(replica: Replica, model: str, workflow: str = "", timeout: float = CALL_TIMEOUT_S) -> Any:
    async with AsyncSidecarClient(replica.address) as client:
        return await client.call_model(model, [user("hello fleet")], job=_job(workflow), timeout=timeout)


async def _tool(replica: Replica, doc: str) -> pb.ExecuteToolResponse:
    async with AsyncSidecarClient(replica.address) as client:
        return await client.execute_tool("fleet_doc", {"id": doc}, job=_job(), timeout=CALL_TIMEOUT_S)


def _kind(response: pb.ExecuteToolResponse) -> str:
    if response.WhichOneof("outcome") == "result":
        return "OK"
    return pb.FailureKind.Name(response.failure.kind).removeprefix("FAILURE_KIND_")


async def test_a_429_with_retry_after_on_one_pauses_all_three(fleet: Fleet) -> None:
    a, b, c = fleet.replicas
    provider = fleet.provider.server
    provider.script("up-429", [{"preset": "rate_limit", "retry_after": "60"}])
    with pytest.raises(SidecarError) as first:  # its own retry would wait 60 s: past its deadline
        await _call(a, "m429", timeout=3)
    assert first.value.kind_name == "JOB_TIMEOUT"
    for other in (b, c):  # the raise travels with the pause: once it is there, the pause is too
        await poll(lambda r=other: (r.gauge("sidecar_model_throttle", sidecar_model="m429") or 0) > 0, "the raise")
    sent = len(provider.requests(model="up-429"))
    for other in (b, c):
        with pytest.raises(SidecarError) as paused:
            await _call(other, "m429", timeout=5)
        assert paused.value.kind_name == "JOB_TIMEOUT"
        assert "paused by the provider's Retry-After" in paused.value.message
    assert len(provider.requests(model="up-429")) == sent == 1  # nobody sent a thing while paused


async def test_a_budget_about_to_run_out_on_one_holds_all_three_before_the_429(fleet: Fleet) -> None:
    provider = fleet.provider.server
    # Real time (the processes keep their own clocks), with margins no machine crosses: a call takes
    # milliseconds, the steady caller's gap (0.5 s) is far longer than a hold takes to cross Redis, and
    # the window (6 s) far longer than the two calls before the hold.
    limit, window_s, calls, gap_s = 3, 6.0, 4, 0.5
    provider.limit_requests(limit, window_s=window_s)
    try:
        began = time.monotonic()
        replies = []
        for i in range(calls):
            replies.append(await _call(fleet.replicas[i % REPLICAS], "mbudget"))
            await asyncio.sleep(gap_s)
        took = time.monotonic() - began
        assert provider.rate_limited == 0
    finally:
        provider.limit_requests(None)
    assert [r.attempts for r in replies] == [1] * calls
    assert len(provider.requests(model="up-budget")) == calls
    assert took >= window_s * 0.9  # two calls a window (the last request kept as slack): one reset waited


async def test_overloads_on_one_slow_the_others(fleet: Fleet) -> None:
    a, b, c = fleet.replicas
    fleet.provider.server.script("up-529", [{"preset": "overloaded", "retry_after": "0"}] * 2)
    reply = await _call(a, "m529")
    assert reply.attempts == 3
    raised = a.gauge("sidecar_model_throttle", sidecar_model="m529")
    assert raised is not None
    assert raised > 0
    for other in (b, c):
        await poll(
            lambda r=other: (r.gauge("sidecar_model_throttle", sidecar_model="m529") or 0) >= 1.5,
            "the overload's raise on every replica",
        )


async def test_a_service_failing_through_one_opens_the_circuit_on_all_one_probe_closes_it(fleet: Fleet) -> None:
    a, b, c = fleet.replicas
    backend = fleet.backend.server
    backend.script("/docs/doc-1", [{"status": 500, "repeat": 10}])
    kinds = [_kind(await _tool(a, DOC)) for _ in range(2)]
    opened_by = time.monotonic()  # the second failure opened it: its cooldown began before this
    assert kinds == ["EXTERNAL_SERVICE", "EXTERNAL_SERVICE"]
    opened = await _tool(a, DOC)
    assert _kind(opened) == "CIRCUIT_OPEN"
    sent = len(backend.requests(path="/docs/doc-1"))
    for other in (b, c):
        await poll(
            lambda r=other: r.gauge("sidecar_service_circuit_state", sidecar_service="fleetsvc") == 2,
            "the circuit open on every replica",
        )
        refused = await _tool(other, DOC)
        assert _kind(refused) == "CIRCUIT_OPEN"
        assert "HTTP 500" in refused.failure.message  # the response that opened it, quoted everywhere
    assert len(backend.requests(path="/docs/doc-1")) == sent

    backend.reset()
    backend.script("/docs/doc-1", [{"delay_ms": 1500}])  # the probe: answered, slowly
    await asyncio.sleep(opened_by + COOLDOWN_S + 0.3 - time.monotonic())  # the cooldown passes (a wait, not a check)
    answers = await asyncio.gather(*(_tool(r, DOC) for r in (a, b, c)))
    kinds = sorted(_kind(x) for x in answers)
    assert kinds == ["CIRCUIT_OPEN", "CIRCUIT_OPEN", "OK"]  # one probe in the fleet
    assert len(backend.requests(path="/docs/doc-1")) == 1
    for r in (a, b, c):
        await poll(lambda r=r: _ok(r), "the circuit closed on every replica")


async def _ok(replica: Replica) -> bool:
    return _kind(await _tool(replica, DOC)) == "OK"


async def test_a_workflows_spend_cap_is_reached_across_replicas(fleet: Fleet) -> None:
    replicas = fleet.replicas
    costs: list[float] = []
    refused = None
    for i in range(40):
        try:
            costs.append((await _call(replicas[i % REPLICAS], "mspend", "wf-spend")).cost_usd)
        except SidecarError as exc:
            refused = exc
            break
    assert refused is not None
    assert refused.kind_name == "SPEND_CAP_EXCEEDED"
    one = costs[0]
    allowed = math.ceil(SPEND_CAP / one)  # one ledger lets calls through until the spend reaches the cap
    assert allowed >= 3
    # one ledger: a call or two of lag at most, never the 3 x allowed of three ledgers
    assert allowed <= len(costs) < 2 * allowed
    for r in replicas:
        await poll(lambda r=r: _capped(r), "the cap refusing on every replica")


async def _capped(replica: Replica) -> bool:
    try:
        await _call(replica, "mspend", "wf-spend")
    except SidecarError as exc:
        return exc.kind_name == "SPEND_CAP_EXCEEDED"
    return False


async def test_redis_killed_and_restarted_mid_run_loses_nothing_and_hangs_nothing(fleet: Fleet) -> None:
    """On the cluster: the primary of the spend's key killed (SIGKILL) while calls run; counted: calls failed
    (none: fail-open), the replica promoted, the fleet's spend in Redis converged to what the calls cost."""
    replicas = fleet.replicas
    key = state_key(fleet.prefix, "spend", "wf-out")
    spent = 0.0
    answered = 0

    async def round_of_calls() -> None:
        nonlocal spent, answered
        for r in replicas:  # every call answered (a hang would be DEADLINE_EXCEEDED)
            cost = (await _call(r, "mout", "wf-out")).cost_usd  # awaited first: rounds run at once on the cluster
            spent += cost
            answered += 1

    for _ in range(2):
        await round_of_calls()
    await poll(lambda: _stored(fleet, key) >= spent - 1e-12, "the spend before the outage in Redis")
    if fleet.cluster is None:
        assert fleet.server is not None
        fleet.server.kill()
        for _ in range(3):
            await round_of_calls()
        for r in replicas:
            await poll(lambda r=r: r.gauge("sidecar_state_available") == 0, "every replica seeing the outage")
        fleet.server.start()  # the same port, empty: the replicas re-sync it
    else:
        await _failover(fleet, key, round_of_calls)
    for r in replicas:
        await poll(lambda r=r: r.gauge("sidecar_state_available") == 1, "every replica back")
    await round_of_calls()
    total = await poll(lambda: _stored(fleet, key) >= spent - 1e-12 and _stored(fleet, key), "the spend in Redis")
    assert total == pytest.approx(spent, rel=1e-9)  # each replica's outage spend sent once, the rest restored
    assert answered == 18  # every call answered: none failed because Redis (or a primary of it) died
    for r in replicas:
        logs = [json.loads(line) for line in r.logs().splitlines() if line.startswith("{")]
        warned = [x for x in logs if x["logger"] == "sidecar.state" and x["level"] == "WARNING"]
        back = [x for x in logs if x["logger"] == "sidecar.state" and re.search("available again", x["message"])]
        assert len(warned) == 1, r.logs()  # one warning for the outage
        assert len(back) == 1, r.logs()


async def _failover(fleet: Fleet, key: str, round_of_calls: Callable[[], Any]) -> None:
    """The primary serving ``key`` killed under three rounds of calls; its replica promoted; it comes back."""
    assert fleet.cluster is not None
    cluster = fleet.cluster
    victim = cluster.owner(key)
    calls = asyncio.gather(*(round_of_calls() for _ in range(3)))
    victim.kill()  # SIGKILL, the calls under way
    await calls

    def promoted() -> bool:
        try:
            return cluster.owner(key).port != victim.port
        except Exception:  # the slot's primary still the dead one (not failed over yet)
            return False

    await poll(promoted, "the killed primary's replica promoted", timeout=60)
    victim.start()  # its nodes.conf kept: it rejoins, as a replica of the one promoted
    await asyncio.to_thread(cluster.wait_ok)
    assert cluster.owner(key).port != victim.port


def _stored(fleet: Fleet, key: str) -> float:
    try:
        value = fleet.target.client().get(key)
    except Exception:
        return 0.0
    return float(value) if value is not None else 0.0


async def test_a_route_deployments_circuit_opened_through_one_skips_it_on_the_others(fleet: Fleet) -> None:
    a, b, _ = fleet.replicas
    fleet.provider.server.script("up-dead", [{"preset": "insufficient_quota", "repeat": 20}])
    reply = await _call(a, "fleet-route")  # dep-dead's quota fails the hop; dep-ok serves
    assert reply.served_by == "dep-ok"
    reply = await _call(a, "fleet-route")  # the second failed hop opens dep-dead's circuit (CIRCUIT)
    assert reply.served_by == "dep-ok"

    await poll(  # B learns it from the shared state alone: it has never called dep-dead
        lambda: b.gauge("sidecar_service_circuit_state", sidecar_service="deployment:dep-dead") == 2,
        "replica B's view of dep-dead's circuit is open",
    )
    sent_to_dead = len(fleet.provider.server.requests(model="up-dead"))
    got = await _call(b, "fleet-route")
    assert got.hops[0].skipped
    assert got.hops[0].kind == pb.FAILURE_KIND_CIRCUIT_OPEN
    assert got.served_by == "dep-ok"
    assert len(fleet.provider.server.requests(model="up-dead")) == sent_to_dead  # B sent nothing to dep-dead


async def test_a_route_deployments_probe_is_one_in_the_fleet_on_the_side_and_closes_it_on_all(fleet: Fleet) -> None:
    """After the cooldown, three calls at once on three replicas: one probe in the fleet (claimed in Redis), sent
    on the side; every caller is served by the spare at once; the probe's success closes the circuit on all three."""
    a, b, c = fleet.replicas
    provider = fleet.provider.server
    provider.script("up-probed", [{"preset": "insufficient_quota", "repeat": 2}])
    for _ in range(2):  # the second failed hop opens dep-probed's circuit (CIRCUIT)
        assert (await _call(a, "probe-route")).served_by == "dep-spare"
    opened_by = time.monotonic()
    for other in (b, c):
        await poll(
            lambda r=other: r.gauge("sidecar_service_circuit_state", sidecar_service="deployment:dep-probed") == 2,
            "dep-probed's circuit open on every replica",
        )
    sent = len(provider.requests(model="up-probed"))

    provider.script("up-probed", [{"delay_ms": 1500}])  # the probe: answered, slowly
    await asyncio.sleep(opened_by + COOLDOWN_S + 0.3 - time.monotonic())  # the cooldown passes (a wait, not a check)
    replies = await asyncio.gather(*(_call(r, "probe-route") for r in (a, b, c)))
    assert [r.served_by for r in replies] == ["dep-spare"] * 3  # no caller waited for the probe
    assert all(r.hops[0].skipped for r in replies)
    reasons = sorted(r.hops[0].reason for r in replies)
    aside = "the circuit of dep-probed is half-open: this call's request probes it on the side"
    probed = "the circuit of dep-probed is being probed by another call"
    assert [x.startswith(aside) for x in reasons] == [False, False, True]
    assert [x.startswith(probed) for x in reasons] == [True, True, False]
    await poll(lambda: len(provider.requests(model="up-probed")) > sent, "the probe sent")
    for r in (a, b, c):
        await poll(
            lambda r=r: r.gauge("sidecar_service_circuit_state", sidecar_service="deployment:dep-probed") == 0,
            "the probe served: dep-probed's circuit closed on every replica",
        )
    assert len(provider.requests(model="up-probed")) - sent == 1  # one probe in the fleet, one attempt
    for r in (a, b, c):
        assert (await _call(r, "probe-route")).served_by == "dep-probed"
