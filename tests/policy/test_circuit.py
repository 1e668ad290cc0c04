"""The per-service throttle and circuit, its whole life on an injected clock."""

from __future__ import annotations

import asyncio

import pytest
from sidecar_client import job, pb

from sidecar.config import CircuitConfig, ServiceConfig
from sidecar.core.circuit import Admission, CircuitState, ServiceGuard
from sidecar.core.clock import FakeClock
from sidecar.core.details import Trigger
from sidecar.core.taxonomy import CircuitOpen
from sidecar.server import convert
from tests.conftest import Running, Start

T503 = Trigger(503, "service unavailable")


def guard(clock: FakeClock, **circuit: float) -> ServiceGuard:
    return ServiceGuard("docs", ServiceConfig(rate=1000), CircuitConfig(**circuit), clock)  # type: ignore[arg-type]


def fail(g: ServiceGuard, times: int, trigger: Trigger = T503, retry_after: float | None = None) -> None:
    for _ in range(times):
        g.failure(g.check(), trigger, retry_after)


def test_each_failure_raises_the_throttle_by_one_up_to_nine() -> None:
    g = guard(FakeClock())
    fail(g, 5)
    assert g.throttle == 5.0
    fail(g, 4)
    assert g.throttle == 9.0
    assert g.state is CircuitState.CLOSED


def test_the_third_failure_at_max_throttle_opens_the_circuit() -> None:
    g = guard(FakeClock())
    fail(g, 9 + 2)
    assert g.state is CircuitState.CLOSED
    fail(g, 1)
    assert g.state is CircuitState.OPEN
    assert g.cooldown == 30


def test_open_circuit_refuses_and_quotes_the_response_that_opened_it() -> None:
    clock = FakeClock()
    g = guard(clock)
    fail(g, 12, Trigger(503, "service unavailable", "7"))
    clock.advance(10)
    with pytest.raises(CircuitOpen) as caught:
        g.check()
    refusal = caught.value
    assert refusal.message == (
        "The docs service is switched off after repeated failures (circuit open). Do not retry tools of this "
        "service for about 20 s. It was switched off by: HTTP 503 (service unavailable, Retry-After: 7)."
    )
    detail = convert.failure(refusal).circuit
    assert detail.state == pb.CIRCUIT_STATE_OPEN
    assert detail.opened_by.status_code == 503
    assert detail.opened_by.retry_after_raw == "7"
    assert detail.cooldown.seconds == 30
    assert refusal.retry_after == pytest.approx(20)


def test_no_response_trigger_is_quoted_as_such() -> None:
    g = guard(FakeClock())
    fail(g, 12, Trigger(None, "connection refused"))
    with pytest.raises(CircuitOpen, match=r"switched off by: no response \(connection refused\)"):
        g.check()


def test_after_the_cooldown_exactly_one_probe_goes_through() -> None:
    clock = FakeClock()
    g = guard(clock)
    fail(g, 12)
    clock.advance(30)
    probe = g.check()
    assert probe.probe
    assert g.state is CircuitState.HALF_OPEN
    for _ in range(3):
        with pytest.raises(CircuitOpen, match="is being probed"):
            g.check()
    g.success(probe)
    assert g.state is CircuitState.CLOSED
    assert not g.check().probe


def test_a_failed_probe_doubles_the_cooldown_up_to_an_hour() -> None:
    clock = FakeClock()
    g = guard(clock)
    fail(g, 12)
    expected = 30.0
    for _ in range(10):
        clock.advance(expected)
        probe = g.check()
        assert probe.probe
        g.failure(probe, T503, None)
        expected = min(expected * 2, 3600)
        assert g.cooldown == expected
        assert g.state is CircuitState.OPEN
        clock.advance(expected - 0.001)
        with pytest.raises(CircuitOpen):
            g.check()
        clock.advance(0.001 - expected)
    assert g.cooldown == 3600


def test_a_closed_circuit_starts_again_from_thirty_seconds() -> None:
    clock = FakeClock()
    g = guard(clock)
    fail(g, 12)
    clock.advance(30)
    g.failure(g.check(), T503, None)
    assert g.cooldown == 60
    clock.advance(60)
    g.success(g.check())
    assert g.cooldown == 30


def test_retry_after_is_the_cooldowns_floor() -> None:
    clock = FakeClock()
    g = guard(clock)
    fail(g, 11)
    g.failure(g.check(), T503, 120.0)
    clock.advance(119)
    with pytest.raises(CircuitOpen):
        g.check()
    clock.advance(1)
    assert g.check().probe


def test_a_lost_probe_reopens_with_the_cooldown_unchanged() -> None:
    clock = FakeClock()
    g = guard(clock)
    fail(g, 12)
    clock.advance(30)
    g.lost(g.check())  # cancelled
    assert g.state is CircuitState.OPEN
    assert g.cooldown == 30
    clock.advance(30)
    probe = g.check()
    clock.advance(60)  # no verdict within probe_timeout_s
    with pytest.raises(CircuitOpen):
        g.check()
    assert g.cooldown == 30
    g.success(probe)  # a late verdict of a lost probe changes nothing
    assert g.state is CircuitState.OPEN


def test_successes_bring_the_throttle_down() -> None:
    clock = FakeClock()
    g = guard(clock)
    fail(g, 3)
    for _ in range(3):
        g.success(g.check())
    assert g.throttle == pytest.approx(2.8)
    clock.advance(300)
    g.success(g.check())
    assert g.throttle == pytest.approx(2.3)


def test_uncharged_outcomes_leave_the_throttle_alone() -> None:
    g = guard(FakeClock())
    g.lost(g.check())
    assert g.throttle == 0


async def test_throttle_stretches_the_leaky_bucket_window() -> None:
    clock = FakeClock()
    g = ServiceGuard("docs", ServiceConfig(rate=1, per_s=1), CircuitConfig(), clock)
    await g.pace()
    assert g.throttle_wait() == pytest.approx(1.0)
    fail(g, 2)
    assert g.throttle_wait() == pytest.approx(3.0)  # (1 + 2) x the base window


PROBE_MS = 1000
"""How long the backend holds the probe: the four other calls are refused in milliseconds meanwhile."""


async def test_concurrent_callers_during_a_probe_are_refused(start_sidecar: Start) -> None:
    sidecar = await start_sidecar()  # fail_fetch's timeout (ANSWER_MARGIN_S) is far past the probe's answer
    g = sidecar.app.guards.get("flaky")  # type: ignore[union-attr]
    fail(g, 12)
    sidecar.clock.advance(30)
    sidecar.backend.script("/fail/slow", [{"delay_ms": PROBE_MS}])
    calls = [sidecar.client.execute_tool("fail_fetch", {"mode": "slow"}, job=job(upstream_retries=0)) for _ in range(5)]
    results = await asyncio.gather(*calls)
    outcomes = sorted(r.WhichOneof("outcome") for r in results)
    assert outcomes == ["failure"] * 4 + ["result"]
    refused = [r for r in results if r.HasField("failure")]
    assert all(r.failure.kind == pb.FAILURE_KIND_CIRCUIT_OPEN and r.attempts == 0 for r in refused)
    assert g.state is CircuitState.CLOSED
    assert len(sidecar.backend.requests(path="/fail/slow")) == 1


async def test_the_circuit_opens_for_every_caller_through_the_sidecar(sidecar: Running) -> None:
    for _ in range(4):  # 3 attempts each: 12 failures
        await sidecar.client.execute_tool("fail_fetch", {"mode": "503"})
    refused = await sidecar.client.execute_tool("fail_search", {"mode": "500"})
    assert refused.failure.kind == pb.FAILURE_KIND_CIRCUIT_OPEN
    assert refused.attempts == 0
    assert "The flaky service is switched off" in refused.model_text
    assert "HTTP 503 (service unavailable)" in refused.model_text
    assert "Do not retry tools of this service for about 30 s" in refused.model_text
    other = await sidecar.client.execute_tool("fetch", {"id": "doc-1"})  # another service is unaffected
    assert other.HasField("result")


async def test_correctable_failures_never_count_against_a_service(sidecar: Running) -> None:
    for _ in range(15):
        await sidecar.client.execute_tool("fail_fetch", {"mode": "404"})
        await sidecar.client.execute_tool("fail_fetch", {"mode": "400"})
    g = sidecar.app.guards.get("flaky")  # type: ignore[union-attr]
    assert g.throttle == 0
    assert g.state is CircuitState.CLOSED


def test_admission_is_settled_once() -> None:
    g = guard(FakeClock())
    a: Admission = g.check()
    g.failure(a, T503, None)
    g.failure(a, T503, None)
    assert g.throttle == 1


def test_failures_at_max_are_counted_again_after_the_throttle_came_down() -> None:
    clock = FakeClock()
    g = guard(clock)
    fail(g, 11)  # two failures at maximum
    clock.advance(300)
    g.success(g.check())  # 9.0 -> 8.5: below maximum
    fail(g, 1)  # back at 9.0 (the failure that reaches the maximum is not "at" it)
    fail(g, 2)
    assert g.state is CircuitState.CLOSED
    fail(g, 1)
    assert g.state is CircuitState.OPEN


def test_an_open_circuit_keeps_quoting_the_response_that_opened_it() -> None:
    clock = FakeClock()
    g = guard(clock)
    fail(g, 12, Trigger(503, "service unavailable"))
    g.failure(None, Trigger(500, "a later straggler"), None)
    with pytest.raises(CircuitOpen, match="HTTP 503"):
        g.check()


def test_a_huge_retry_after_is_floored_at_most_to_the_longest_cooldown() -> None:
    clock = FakeClock()
    g = guard(clock)
    fail(g, 11)
    g.failure(g.check(), T503, 2147483647.0)
    clock.advance(3600)
    assert g.check().probe
