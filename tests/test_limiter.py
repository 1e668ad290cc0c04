"""StretchLimiter: aiolimiter's bucket on the injected clock, stretched by a throttle."""

from __future__ import annotations

from importlib.metadata import version

import pytest
from aiolimiter import AsyncLimiter

from sidecar.core.clock import FakeClock
from sidecar.core.limiter import StretchLimiter


def test_the_aiolimiter_surface_it_relies_on_is_there() -> None:
    assert version("aiolimiter").startswith("1.")
    for name in ("_leak", "_wake_next", "_level", "_rate_per_sec", "_event_loop"):
        assert name in dir(AsyncLimiter) or name in AsyncLimiter.__slots__


async def test_take_waits_on_the_injected_clock_exactly() -> None:
    clock = FakeClock()
    bucket = StretchLimiter(2, 1.0, clock)
    assert await bucket.take() == 0
    assert await bucket.take() == 0
    assert await bucket.take() == pytest.approx(0.5)
    bucket.stretch(3.0)
    assert bucket.wait_time() == pytest.approx(1.5)
    assert await bucket.take() == pytest.approx(1.5)
    assert clock.sleeps == pytest.approx([0.5, 1.5])
