"""A half-open route deployment's probe over real gRPC, on the fake clock: one attempt, none of the caller's time.

| what                                 | proved                                                                 |
|---|---|
| a probe is one upstream attempt      | whatever the retry budget (the config's, the caller's own)             |
| a probe with a closed fallback       | sent on the side: the caller skips the deployment (CIRCUIT_OPEN) and   |
|                                      | the fallback answers at once, 0 s of the caller's time, whether the    |
|                                      | probe fails, hangs or succeeds                                         |
| a probe with no closed fallback      | the hop itself, one attempt: a recovered deployment serves the caller  |
| the probe's verdict                  | failed: reopened, cooldown doubled (4 s -> 8 s); served: closed, and   |
|                                      | the next call is served there                                          |
| a lone deployment's failed probe     | one attempt; its failure is the call's answer (not CIRCUIT_OPEN,       |
|                                      | which says no attempt was made)                                        |
| the probe attempt's span             | ``sidecar.circuit.probe`` true, under the probe's own ``route.hop``    |
|                                      | span in the caller's trace                                             |
| a stream's probe                     | on the side as a plain call; the stream is the fallback's              |
| the service closed, a probe out      | cancelled: lost (reopened, cooldown unchanged)                         |

The caller's time is measured on the sidecar's fake clock: every backoff is a ``clock.sleep`` (listed in
``clock.sleeps``, the clock advanced by it), and nothing else moves the clock during a call. On main, before
this, the failed probe of the first test cost the caller 2.6 s (two retries) and 17.9 s (five).
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
from tests.conftest import Running, Start, timer_set, until

KEY = "sk-test-PROBEPROBEPROBE1"
DOWN = {"status": 503, "repeat": 10_000}
ASIDE = "the circuit of primary is half-open: this call's request probes it on the side (one attempt)"


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
            "backup-only": {"route": {"fallbacks": ["backup"]}},
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


def _sent(r: Running) -> int:
    return len(r.provider.requests(model="up-primary"))


def _state(guard: ServiceGuard) -> CircuitState:
    """The circuit's state now (read afresh: the probe on the side changes it between two reads)."""
    return guard.state


async def _verdict(guard: ServiceGuard) -> None:
    """Until the probe on the side has its verdict (the circuit is no longer half-open)."""
    await until(lambda: guard.state is not CircuitState.HALF_OPEN, "the probe's verdict")


@pytest.mark.parametrize("retries", [2, 5])
async def test_a_failed_probe_costs_the_caller_no_backoff_and_the_fallback_answers(
    start_sidecar: Start, provider: Any, retries: int
) -> None:
    r = await _sidecar(start_sidecar, provider, retries)
    guard = await _half_open(r, "chat")
    sent_before = _sent(r)
    r.clock.sleeps.clear()
    asked = r.clock.time()

    reply = await r.client.call_model("chat", [user("hi")])

    caller_s = r.clock.time() - asked
    assert r.clock.sleeps == []  # no backoff (before: one per retry of the probe, seconds of the caller's time)
    assert caller_s == 0.0
    assert reply.served_by == "backup"
    assert hops(reply.hops) == [("primary", "CIRCUIT_OPEN", 0, True), ("backup", "UNSPECIFIED", 1, False)]
    assert reply.hops[0].reason.startswith(ASIDE)
    await _verdict(guard)
    assert _sent(r) - sent_before == 1  # the probe: one attempt, whatever the budget
    assert guard.state is CircuitState.OPEN
    assert guard.cooldown == 2 * DEPLOYMENT_CIRCUIT.cooldown_s  # reopened as ever: cooldown doubled
    assert r.clock.sleeps == []


async def test_a_probe_is_one_attempt_whatever_the_callers_own_retry_budget(
    start_sidecar: Start, provider: Any
) -> None:
    r = await _sidecar(start_sidecar, provider)
    guard = await _half_open(r, "chat")
    sent_before = _sent(r)
    r.clock.sleeps.clear()

    reply = await r.client.call_model("chat", [user("hi")], job=pb.Job(upstream_retries=7))

    assert reply.served_by == "backup"
    await _verdict(guard)
    assert _sent(r) - sent_before == 1
    assert r.clock.sleeps == []


async def test_a_probe_that_hangs_costs_the_caller_nothing_and_fails_at_its_header_timeout(
    start_sidecar: Start, provider: Any
) -> None:
    """The case a probe inline could not help: a silent deployment would hold the caller for its header timeout."""
    r = await _sidecar(start_sidecar, provider)
    guard = await _half_open(r, "chat")
    r.provider.script("up-primary", [{"fault": "hang"}])
    sent_before = _sent(r)
    asked = r.clock.time()

    reply = await r.client.call_model("chat", [user("hi")])

    assert r.clock.time() - asked == 0.0
    assert reply.served_by == "backup"
    await until(lambda: _sent(r) - sent_before == 1, "the probe sent")
    assert _state(guard) is CircuitState.HALF_OPEN
    meanwhile = await r.client.call_model("chat", [user("hi")])  # the probe is out: this call skips primary
    assert hops(meanwhile.hops) == [("primary", "CIRCUIT_OPEN", 0, True), ("backup", "UNSPECIFIED", 1, False)]
    assert meanwhile.hops[0].reason.startswith("the circuit of primary is being probed by another call")
    await timer_set(r.clock, "the probe's header timeout")
    r.clock.advance(max(r.clock.timers) - r.clock.time())
    await _verdict(guard)
    assert _state(guard) is CircuitState.OPEN
    assert guard.cooldown == 2 * DEPLOYMENT_CIRCUIT.cooldown_s
    assert _sent(r) - sent_before == 1


async def test_a_probe_that_succeeds_closes_the_circuit_and_the_next_call_is_served_there(
    start_sidecar: Start, provider: Any
) -> None:
    r = await _sidecar(start_sidecar, provider)
    guard = await _half_open(r, "chat")
    r.provider.script("up-primary", [])  # recovered

    reply = await r.client.call_model("chat", [user("hi")])

    assert reply.served_by == "backup"  # the caller did not wait for the probe
    await _verdict(guard)
    assert guard.state is CircuitState.CLOSED
    assert guard.cooldown == DEPLOYMENT_CIRCUIT.cooldown_s
    after = await r.client.call_model("chat", [user("hi")])
    assert hops(after.hops) == [("primary", "UNSPECIFIED", 1, False)]


async def test_a_lone_deployments_probe_is_the_hop_one_attempt_and_its_failure_is_the_answer(
    start_sidecar: Start, provider: Any
) -> None:
    """No fallback: the caller gets what the probe got (an attempt was made: not CIRCUIT_OPEN, which says none was)."""
    r = await _sidecar(start_sidecar, provider, retries=5)
    guard = await _half_open(r, "solo")
    sent_before = _sent(r)
    r.clock.sleeps.clear()
    asked = r.clock.time()

    with pytest.raises(sc.UpstreamRetriesExhaustedError) as caught:
        await r.client.call_model("solo", [user("hi")])

    err = caught.value
    assert r.clock.sleeps == []
    assert r.clock.time() - asked == 0.0
    assert _sent(r) - sent_before == 1
    assert err.attempts == 1
    assert hops(err.hops) == [("primary", "UPSTREAM_RETRIES_EXHAUSTED", 1, False)]
    assert "1) primary, UPSTREAM_RETRIES_EXHAUSTED after 1 attempt: Model primary (oai) failed the one attempt" in (
        err.message
    )
    assert err.http is not None
    assert err.http.status_code == 503
    assert guard.state is CircuitState.OPEN
    assert guard.cooldown == 2 * DEPLOYMENT_CIRCUIT.cooldown_s
    with pytest.raises(sc.CircuitOpenError) as refused:  # reopened: the next call is refused without an attempt
        await r.client.call_model("solo", [user("hi")])
    assert hops(refused.value.hops) == [("primary", "CIRCUIT_OPEN", 0, True)]


async def test_a_probe_whose_fallback_is_not_closed_is_the_hop_and_serves_the_caller(
    start_sidecar: Start, provider: Any
) -> None:
    """No closed circuit after it: the probe is this call's hop (one attempt), so a recovered deployment serves."""
    r = await _sidecar(start_sidecar, provider)
    guard = await _half_open(r, "chat")
    r.provider.script("up-backup", [{"preset": "invalid_key", "repeat": 3}])  # no retries: the clock stays
    for _ in range(3):
        with pytest.raises(sc.UnauthorizedError):
            await r.client.call_model("backup-only", [user("hi")])
    backup = r.app.models.routes.guard("backup")  # type: ignore[union-attr]
    assert backup.state is CircuitState.OPEN
    r.provider.script("up-primary", [])  # recovered

    reply = await r.client.call_model("chat", [user("hi")])

    assert hops(reply.hops) == [("primary", "UNSPECIFIED", 1, False)]
    assert guard.state is CircuitState.CLOSED


async def test_the_probe_attempts_span_says_it_is_a_probe(start_sidecar: Start, provider: Any) -> None:
    otel = install_in_memory()
    r = await _sidecar(start_sidecar, provider)
    guard = await _half_open(r, "chat")
    otel.clear()

    await r.client.call_model("chat", [user("hi")])
    await _verdict(guard)

    spans = otel.spans()
    chat = next(s for s in spans if s.name == "chat chat")
    hop_spans = [s for s in spans if s.name.startswith("route.hop")]
    assert {s.parent.span_id for s in hop_spans if s.parent} == {chat.context.span_id}  # all in the call's trace

    def posts(hop: Any) -> list[dict[str, Any]]:
        return [dict(a.attributes or {}) for a in spans
                if a.name == "POST" and a.parent and a.parent.span_id == hop.context.span_id]  # fmt: skip

    (skipped,) = [s for s in hop_spans if dict(s.attributes or {}).get("sidecar.hop.skipped")]
    (probe_hop,) = [s for s in hop_spans if s.name == "route.hop primary" and s is not skipped]  # its own hop
    (backup_hop,) = [s for s in hop_spans if s.name == "route.hop backup"]
    assert skipped.name == "route.hop primary"
    assert posts(skipped) == []
    (probe,) = posts(probe_hop)
    assert probe["sidecar.circuit.probe"] is True
    assert probe["http.response.status_code"] == 503
    (served,) = posts(backup_hop)
    assert "sidecar.circuit.probe" not in served
    assert not [s for s in spans if s.name == "sidecar.backoff"]


async def test_a_streams_probe_goes_on_the_side_as_a_plain_call_and_the_stream_is_the_fallbacks(
    start_sidecar: Start, provider: Any
) -> None:
    r = await _sidecar(start_sidecar, provider)
    guard = await _half_open(r, "chat")
    sent_before = _sent(r)
    asked = r.clock.time()

    final = await r.client.stream_model("chat", [user("hi")]).collect()

    assert r.clock.time() - asked == 0.0
    assert final.served_by == "backup"
    assert hops(final.hops) == [("primary", "CIRCUIT_OPEN", 0, True), ("backup", "UNSPECIFIED", 1, False)]
    await _verdict(guard)
    (probe,) = r.provider.requests(model="up-primary")[sent_before:]
    assert not probe["body"].get("stream")  # the probe is a plain call: its reply is read by no one
    assert _state(guard) is CircuitState.OPEN


async def test_a_probe_out_on_the_side_when_the_service_closes_is_lost(start_sidecar: Start, provider: Any) -> None:
    """Closing the model service (a shutdown, or a reload's old config) cancels the probe: lost, cooldown unchanged."""
    r = await _sidecar(start_sidecar, provider)
    guard = await _half_open(r, "chat")
    r.provider.script("up-primary", [{"fault": "hang"}])
    sent_before = _sent(r)
    assert (await r.client.call_model("chat", [user("hi")])).served_by == "backup"
    await until(lambda: _sent(r) - sent_before == 1, "the probe sent")

    await r.app.models.routes.aclose()  # type: ignore[union-attr]

    assert guard.state is CircuitState.OPEN
    assert guard.cooldown == DEPLOYMENT_CIRCUIT.cooldown_s  # lost, not failed: not doubled
