"""The shared model throttle's arithmetic, on an injected clock."""

from __future__ import annotations

import pytest
from sidecar_client import pb

from sidecar.core.clock import FakeClock
from sidecar.core.model_throttle import ModelThrottle


async def _call_at(throttle: ModelThrottle, clock: FakeClock, rps: float, seconds: float) -> None:
    for _ in range(int(rps * seconds)):
        await throttle.acquire()
        clock.advance(1 / rps)


async def test_an_unconfigured_model_is_paced_from_the_rate_it_was_called_at() -> None:
    clock = FakeClock()
    throttle = ModelThrottle("m", clock)
    await _call_at(throttle, clock, 50, 3)
    assert throttle.recent_rate == pytest.approx(50, rel=0.05)
    throttle.signal(pb.RETRY_SIGNAL_RATE_LIMIT, None)  # +0.5: paced at 50 / 1.5 per second
    before = clock.now
    for _ in range(100):
        await throttle.acquire()
    assert clock.now - before == pytest.approx(100 / (50 / 1.5), rel=0.1)


@pytest.mark.parametrize(("signal", "step"), [(pb.RETRY_SIGNAL_RATE_LIMIT, 0.5), (pb.RETRY_SIGNAL_OVERLOAD, 1.5)])
async def test_signals_add_their_step_up_to_nine(signal: int, step: float) -> None:
    throttle = ModelThrottle("m", FakeClock())
    throttle.signal(signal, None)
    assert throttle.throttle == step
    for _ in range(20):
        throttle.signal(signal, None)
    assert throttle.throttle == 9.0


async def test_a_transient_fault_slows_no_one() -> None:
    throttle = ModelThrottle("m", FakeClock())
    throttle.signal(pb.RETRY_SIGNAL_TRANSIENT, 30.0)
    assert throttle.throttle == 0
    assert throttle.wait_time() == 0


async def test_successes_take_the_throttle_down() -> None:
    clock = FakeClock()
    throttle = ModelThrottle("m", clock)
    throttle.signal(pb.RETRY_SIGNAL_OVERLOAD, None)
    for _ in range(3):
        throttle.success()
    assert throttle.throttle == pytest.approx(1.3)
    clock.advance(300)
    throttle.success()
    assert throttle.throttle == pytest.approx(0.8)


async def test_a_429_retry_after_pauses_the_model() -> None:
    clock = FakeClock()
    throttle = ModelThrottle("m", clock)
    throttle.signal(pb.RETRY_SIGNAL_RATE_LIMIT, 12.0)
    assert throttle.wait_time() == pytest.approx(12.0)
    await throttle.acquire()
    assert clock.sleeps[0] == pytest.approx(12.0)


async def test_a_configured_rate_is_enforced_and_stretched() -> None:
    clock = FakeClock()
    throttle = ModelThrottle("m", clock, requests_per_minute=60)
    for _ in range(60):  # the burst
        await throttle.acquire()
    assert throttle.wait_time() == pytest.approx(1.0)
    throttle.signal(pb.RETRY_SIGNAL_OVERLOAD, None)
    assert throttle.wait_time() == pytest.approx(2.5)
