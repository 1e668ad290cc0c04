"""The routing policy alone: the order of hops, what moves on, what a deployment's circuit learns."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from sidecar.core.kinds import FailureKind as K
from sidecar.core.routing import (
    CONTEXT_KINDS,
    DEFAULT_MOVE_ON,
    DEPLOYMENT_CIRCUIT,
    MOVABLE_KINDS,
    NEVER_MOVE_ON,
    TIMED_OUT,
    HopRole,
    Next,
    Route,
    Settle,
    never_reason,
    next_step,
    settle,
    timeout_moves_on,
    weighted_order,
)
from sidecar.core.settings import CircuitConfig

ROUTE = Route("any", balance=(("a1", 3.0), ("a2", 1.0)), fallbacks=("b", "a1"), context_fallback="long")


def test_the_order_is_the_balanced_deployments_then_the_fallbacks_each_once() -> None:
    orders = {tuple(ROUTE.order(random.Random(seed))) for seed in range(50)}
    assert orders == {
        (("a1", HopRole.BALANCE), ("a2", HopRole.BALANCE), ("b", HopRole.FALLBACK)),
        (("a2", HopRole.BALANCE), ("a1", HopRole.BALANCE), ("b", HopRole.FALLBACK)),
    }


def test_the_first_hop_is_drawn_by_weight() -> None:
    rng = random.Random(11)
    firsts = Counter(weighted_order([("a", 3.0), ("b", 1.0), ("c", 4.0)], rng)[0] for _ in range(40_000))
    for name, weight in (("a", 3), ("b", 1), ("c", 4)):
        assert abs(firsts[name] / 40_000 - weight / 8) < 0.01


def test_after_the_first_the_rest_is_drawn_by_weight_among_the_rest() -> None:
    rng = random.Random(5)
    seconds = Counter(tuple(weighted_order([("a", 2.0), ("b", 1.0), ("c", 1.0)], rng)[:2]) for _ in range(40_000))
    # a first (1/2), then b or c evenly: 1/4 each; b first (1/4), then a (2/3) or c (1/3)
    assert abs(seconds[("a", "b")] / 40_000 - 0.25) < 0.01
    assert abs(seconds[("b", "a")] / 40_000 - 1 / 6) < 0.01
    assert abs(seconds[("b", "c")] / 40_000 - 1 / 12) < 0.01


def test_fallbacks_only_keep_their_written_order() -> None:
    route = Route("r", fallbacks=("x", "y", "z"))
    assert [d for d, _ in route.order(random.Random(1))] == ["x", "y", "z"]


def test_deployments_lists_each_once_with_its_role() -> None:
    assert ROUTE.deployments == (
        ("a1", HopRole.BALANCE, 3.0),
        ("a2", HopRole.BALANCE, 1.0),
        ("b", HopRole.FALLBACK, 0.0),
        ("long", HopRole.CONTEXT, 0.0),
    )


@pytest.mark.parametrize("kind", sorted(DEFAULT_MOVE_ON - CONTEXT_KINDS))
def test_the_default_kinds_move_on(kind: K) -> None:
    assert next_step(ROUTE, kind, ["a1"]) is Next.MOVE_ON


@pytest.mark.parametrize("kind", sorted(NEVER_MOVE_ON))
def test_the_never_kinds_stop_the_chain_whatever_a_route_lists(kind: K) -> None:
    route = Route("r", fallbacks=("a", "b"), move_on=frozenset(K))
    assert next_step(route, kind, ["a"]) is Next.STOP
    assert never_reason(kind)


@pytest.mark.parametrize("kind", sorted(MOVABLE_KINDS - DEFAULT_MOVE_ON - CONTEXT_KINDS))
def test_the_other_kinds_move_on_only_when_listed(kind: K) -> None:
    assert next_step(ROUTE, kind, ["a1"]) is Next.STOP
    assert next_step(Route("r", fallbacks=("a", "b"), move_on=frozenset({kind})), kind, ["a"]) is Next.MOVE_ON


@pytest.mark.parametrize("kind", sorted(CONTEXT_KINDS))
def test_a_conversation_that_does_not_fit_goes_to_the_context_fallback_once(kind: K) -> None:
    assert next_step(ROUTE, kind, ["a1"]) is Next.CONTEXT
    assert next_step(ROUTE, kind, ["a1", "long"]) is Next.STOP
    assert next_step(Route("r", fallbacks=("a", "b")), kind, ["a"]) is Next.STOP


def test_a_move_on_list_replaces_the_default() -> None:
    route = Route("r", fallbacks=("a", "b"), move_on=frozenset({K.QUOTA_EXHAUSTED}))
    assert next_step(route, K.QUOTA_EXHAUSTED, ["a"]) is Next.MOVE_ON
    assert next_step(route, K.UPSTREAM_RETRIES_EXHAUSTED, ["a"]) is Next.STOP


@pytest.mark.parametrize(
    ("kind", "attempts", "verdict"),
    [
        (None, 1, Settle.SUCCESS),
        (K.UPSTREAM_RETRIES_EXHAUSTED, 4, Settle.CHARGE),
        (K.QUOTA_EXHAUSTED, 1, Settle.CHARGE),
        (K.UNAUTHORIZED, 1, Settle.CHARGE),
        (K.MODEL_NOT_FOUND, 1, Settle.CHARGE),
        (K.PROVIDER_REFUSAL, 1, Settle.SUCCESS),  # it answered: a probe proves it is up
        (K.INVALID_INPUT, 1, Settle.SUCCESS),
        (K.CONTEXT_OVERFLOW, 1, Settle.SUCCESS),
        (K.TOKEN_ESTIMATE_EXCEEDS_LIMIT, 0, Settle.LOST),  # never sent
        (K.JOB_TIMEOUT, 2, Settle.LOST),  # the caller's deadline, not the deployment's fault
        (K.EXTERNAL_SERVICE, 1, Settle.CHARGE),  # a timed-out (silent) deployment among them
        (K.PERMISSION_DENIED, 1, Settle.SUCCESS),  # a deployment fault, but this route does not move on from it
    ],
)
def test_what_the_deployments_circuit_learns(kind: K | None, attempts: int, verdict: Settle) -> None:
    assert settle(ROUTE, kind, attempts) is verdict


def test_the_deployment_circuit_opens_at_the_third_failed_hop() -> None:
    from sidecar.core.circuit import CircuitState, ServiceGuard
    from sidecar.core.clock import FakeClock
    from sidecar.core.details import Trigger
    from sidecar.core.settings import ServiceConfig

    guard = ServiceGuard("d", ServiceConfig(), DEPLOYMENT_CIRCUIT, FakeClock())
    for _ in range(2):
        guard.failure(guard.check(), Trigger(429, "QUOTA_EXHAUSTED"), None)
        assert guard.state is CircuitState.CLOSED
    guard.failure(guard.check(), Trigger(429, "QUOTA_EXHAUSTED"), None)
    assert guard.state is CircuitState.OPEN
    assert guard.cooldown == DEPLOYMENT_CIRCUIT.cooldown_s


# ---------------------------------------------------------------- the circuit's defaults, for calls people wait on


def _outage(
    down_s: float, gap_s: float, hop_s: float, circuit: CircuitConfig = DEPLOYMENT_CIRCUIT
) -> tuple[list[tuple[float, str]], int]:
    """A route [primary, fallback] under calls every ``gap_s`` for down_s + 40 s, the primary failing every
    hop (each ``hop_s`` long: its retries) until ``down_s``; each call's start and who served it, and how
    many hops the primary was sent while down."""
    from sidecar.core.circuit import ServiceGuard
    from sidecar.core.clock import FakeClock
    from sidecar.core.details import Trigger
    from sidecar.core.settings import ServiceConfig
    from sidecar.core.taxonomy import CircuitOpen

    clock = FakeClock(start=0.0)
    route = Route("r", fallbacks=("primary", "fallback"))
    guard = ServiceGuard("primary", ServiceConfig(), circuit, clock)
    served: list[tuple[float, str]] = []
    sent_while_down = 0
    while clock.time() < down_s + 40:
        start = clock.time()
        try:
            admission = guard.check()
        except CircuitOpen:
            served.append((start, "fallback"))  # skipped: no attempt, the fallback answers at once
        else:
            if start + hop_s <= down_s:  # every attempt of the hop meets the outage
                sent_while_down += 1
                clock.advance(hop_s)
                assert settle(route, K.UPSTREAM_RETRIES_EXHAUSTED, 3) is Settle.CHARGE
                guard.failure(admission, Trigger(503, "UPSTREAM_RETRIES_EXHAUSTED"), None)
                served.append((start, "fallback"))
            else:
                guard.success(admission)
                served.append((start, "primary"))
        clock.advance(max(gap_s - (clock.time() - start), 0.0))
    return served, sent_while_down


@pytest.mark.parametrize("gap_s", [0.1, 0.5, 1.0])
@pytest.mark.parametrize("hop_s", [0.0, 1.5, 3.0])
@pytest.mark.parametrize("down_s", [60.0, 61.3, 62.9])
def test_a_primary_down_for_a_minute_serves_again_within_8_s_of_recovering(
    down_s: float, gap_s: float, hop_s: float
) -> None:
    served, sent_while_down = _outage(down_s, gap_s, hop_s)
    back = next(t for t, who in served if t >= down_s and who == "primary")
    assert back - down_s <= DEPLOYMENT_CIRCUIT.max_cooldown_s + gap_s  # the first call after the last cooldown
    assert DEPLOYMENT_CIRCUIT.max_cooldown_s <= 8
    assert all(who == "primary" for t, who in served if t > back)  # and stays on it
    assert all(who == "fallback" for t, who in served if t + hop_s <= down_s)  # every call served meanwhile
    # the down primary is asked a few times, not by every call: three hops open its circuit, then a probe
    # every cooldown (4 s, then 8 s)
    assert sent_while_down <= 3 + down_s / DEPLOYMENT_CIRCUIT.cooldown_s


def test_the_old_defaults_did_not_return_to_the_primary_for_a_long_while() -> None:
    """Why the defaults changed: 30 s doubling to 1 h left a primary back at 60 s unused until 90 s or later."""
    old = CircuitConfig(failure_step=9.0, max_throttle=9.0, failures_to_open=2, cooldown_s=30.0)
    served, _ = _outage(60.0, 1.0, 1.5, old)
    back = next(t for t, who in served if t >= 60.0 and who == "primary")
    assert back - 60.0 > 20


def test_a_timed_out_hop_moves_on_at_once_only_with_a_deployment_after_it() -> None:
    assert TIMED_OUT in DEFAULT_MOVE_ON
    assert timeout_moves_on(ROUTE, following=True)
    assert not timeout_moves_on(ROUTE, following=False)  # the last hop retries its own deployment
    assert next_step(ROUTE, TIMED_OUT, ["a1"]) is Next.MOVE_ON
    assert settle(ROUTE, TIMED_OUT, 1) is Settle.CHARGE  # the silent deployment's circuit learns it


def test_a_route_that_does_not_list_the_timeout_kind_retries_its_silent_deployment() -> None:
    route = Route("r", fallbacks=("a", "b"), move_on=frozenset({K.UPSTREAM_RETRIES_EXHAUSTED}))
    assert not timeout_moves_on(route, following=True)
    assert next_step(route, K.UPSTREAM_RETRIES_EXHAUSTED, ["a"]) is Next.MOVE_ON  # after its budget, it moves on
