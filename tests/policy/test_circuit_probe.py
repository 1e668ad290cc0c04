"""A half-open route deployment's probe over real gRPC, on the fake clock: one attempt, no caller's time.

| what                                   | proved                                                              |
|---|---|
| a probe is one upstream attempt        | whatever the retry budget (the config's, the caller's own): one POST |
| a failed probe on a route              | the fallback answers with no backoff: 0 s of the caller's time       |
| the probe's circuit                    | reopened, cooldown doubled (4 s -> 8 s)                              |
| a lone deployment's failed probe       | one attempt; the call's answer is that failure (not CIRCUIT_OPEN)    |
| the probe attempt's span               | ``sidecar.circuit.probe`` true; the fallback's attempt has none      |

The caller's time is measured on the sidecar's fake clock: every backoff is a ``clock.sleep`` (listed in
``clock.sleeps``, the clock advanced by it), and nothing else moves the clock during a call.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import sidecar_client as sc
from sidecar_client import pb, user

from sidecar.core.circuit import CircuitState, ServiceGuard
from sidecar.core.routing import DEPLOYMENT_CIRCUIT
from sidecar.telemetry.testing import install_in_memory
from tests.conftest import Running, Start

KEY = "sk-test-PROBEPROBEPROBE1"
DOWN = {"status": 503, "repeat": 10_000}


def deployment(upstream: str) -> dict[str, Any]:
    return {
        "provider": "oai",
        "upstream_model": upstream,
        "context_window": 8000,
        "max_output_tokens": 2048,
        "default_output_tokens": 256,
    }


async def _sidecar(start_sidecar: Start, provider: Any, retries: int = 2) -> Running:
    """The issue's setting: the interactive preset, a retry budget, a primary with a healthy fallback."""
    return await start_sidecar(
        policy={"preset": "interactive", "upstream_retries": retries},
        providers={"oai": {"wire_format": "openai", "base_url": provider.url + "/v1", "api_key": KEY}},
        models={
            "primary": deployment("up-primary"),
            "backup": deployment("up-backup"),
            "chat": {"route": {"fallbacks": ["primary", "backup"]}},
            "solo": {"route": {"fallbacks": ["primary"]}},
        },
    )


def hops(hop_list: Any) -> list[tuple[str, str, int, bool]]:
    return [(h.deployment, pb.FailureKind.Name(h.kind).removeprefix("FAILURE_KIND_"), h.attempts, h.skipped)
            for h in hop_list]  # fmt: skip


async def _half_open(r: Running, route: str) -> ServiceGuard:
    """The primary down (503 to every attempt), three failed hops open its circuit; its cooldown passes."""
    r.provider.script("up-primary", [DOWN])
    for _ in range(3):
        with contextlib.suppress(sc.SidecarError):  # a lone deployment's failed hop is the call's failure
            await r.client.call_model(route, [user("hi")])
    guard = r.app.models.routes.guard("primary")  # type: ignore[union-attr]
    assert guard.state is CircuitState.OPEN
    assert guard.cooldown == DEPLOYMENT_CIRCUIT.cooldown_s
    r.clock.advance(DEPLOYMENT_CIRCUIT.cooldown_s)  # the next call is the one probe
    return guard


@pytest.mark.parametrize("retries", [2, 5])
async def test_a_failed_probe_costs_the_caller_no_backoff_and_the_fallback_answers(
    start_sidecar: Start, provider: Any, retries: int
) -> None:
    r = await _sidecar(start_sidecar, provider, retries)
    guard = await _half_open(r, "chat")
    sent_before = len(r.provider.requests(model="up-primary"))
    r.clock.sleeps.clear()
    asked = r.clock.time()

    reply = await r.client.call_model("chat", [user("hi")])

    caller_s = r.clock.time() - asked
    assert r.clock.sleeps == []  # no backoff on the probe (before: one per retry, seconds of the caller's time)
    assert caller_s == 0.0
    assert reply.served_by == "backup"
    assert hops(reply.hops) == [
        ("primary", "UPSTREAM_RETRIES_EXHAUSTED", 1, False),
        ("backup", "UNSPECIFIED", 1, False),
    ]
    assert len(r.provider.requests(model="up-primary")) - sent_before == 1  # the probe: one attempt
    assert "failed the one attempt that probes its half-open circuit" in reply.hops[0].reason
    assert guard.state is CircuitState.OPEN
    assert guard.cooldown == 2 * DEPLOYMENT_CIRCUIT.cooldown_s  # reopened as ever: cooldown doubled


async def test_a_probe_is_one_attempt_whatever_the_callers_own_retry_budget(
    start_sidecar: Start, provider: Any
) -> None:
    r = await _sidecar(start_sidecar, provider)
    await _half_open(r, "chat")
    sent_before = len(r.provider.requests(model="up-primary"))
    r.clock.sleeps.clear()

    reply = await r.client.call_model("chat", [user("hi")], job=pb.Job(upstream_retries=7))

    assert len(r.provider.requests(model="up-primary")) - sent_before == 1
    assert hops(reply.hops)[0] == ("primary", "UPSTREAM_RETRIES_EXHAUSTED", 1, False)
    assert r.clock.sleeps == []


async def test_a_probe_that_succeeds_serves_the_call_and_closes_the_circuit(
    start_sidecar: Start, provider: Any
) -> None:
    r = await _sidecar(start_sidecar, provider)
    guard = await _half_open(r, "chat")
    r.provider.script("up-primary", [])  # recovered

    reply = await r.client.call_model("chat", [user("hi")])

    assert hops(reply.hops) == [("primary", "UNSPECIFIED", 1, False)]
    assert guard.state is CircuitState.CLOSED
    assert guard.cooldown == DEPLOYMENT_CIRCUIT.cooldown_s


async def test_a_lone_deployments_failed_probe_is_one_attempt_and_its_failure_is_the_answer(
    start_sidecar: Start, provider: Any
) -> None:
    """No fallback: the caller gets what the probe got (an attempt was made: not CIRCUIT_OPEN, which says none was)."""
    r = await _sidecar(start_sidecar, provider, retries=5)
    guard = await _half_open(r, "solo")
    sent_before = len(r.provider.requests(model="up-primary"))
    r.clock.sleeps.clear()
    asked = r.clock.time()

    with pytest.raises(sc.UpstreamRetriesExhaustedError) as caught:
        await r.client.call_model("solo", [user("hi")])

    err = caught.value
    assert len(r.provider.requests(model="up-primary")) - sent_before == 1
    assert "1) primary, UPSTREAM_RETRIES_EXHAUSTED after 1 attempt: Model primary (oai) failed the one attempt" in (
        err.message
    )
    assert err.attempts == 1
    assert hops(err.hops) == [("primary", "UPSTREAM_RETRIES_EXHAUSTED", 1, False)]
    assert err.http is not None
    assert err.http.status_code == 503
    assert r.clock.sleeps == []
    assert r.clock.time() - asked == 0.0
    assert guard.state is CircuitState.OPEN
    assert guard.cooldown == 2 * DEPLOYMENT_CIRCUIT.cooldown_s

    skipped = await _fails(r, "solo")  # reopened: the next call is refused without an attempt
    assert hops(skipped.hops) == [("primary", "CIRCUIT_OPEN", 0, True)]


async def _fails(r: Running, route: str) -> sc.SidecarError:
    with pytest.raises(sc.CircuitOpenError) as caught:
        await r.client.call_model(route, [user("hi")])
    return caught.value


async def test_the_probe_attempts_span_says_it_is_a_probe(start_sidecar: Start, provider: Any) -> None:
    otel = install_in_memory()
    r = await _sidecar(start_sidecar, provider)
    await _half_open(r, "chat")
    otel.clear()

    await r.client.call_model("chat", [user("hi")])

    spans = otel.spans()
    hop_ids = {s.name: s.context.span_id for s in spans if s.name.startswith("route.hop")}
    by_hop = {
        name: [dict(s.attributes or {}) for s in spans if s.name == "POST" and s.parent and s.parent.span_id == sid]
        for name, sid in hop_ids.items()
    }
    (probe,) = by_hop["route.hop primary"]
    assert probe["sidecar.circuit.probe"] is True
    assert probe["http.response.status_code"] == 503
    (served,) = by_hop["route.hop backup"]
    assert "sidecar.circuit.probe" not in served
    assert not [s for s in spans if s.name == "sidecar.backoff"]
