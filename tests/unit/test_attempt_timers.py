"""The attempt's timers on the fake clock: a whole call's header wait (``Timer``) and a stream's ``Watch``
with its header and first-token limits beside the idle timeout and the deadline."""

from __future__ import annotations

import asyncio

import pytest

from sidecar.config.catalog import PRESET_TIMEOUTS, AttemptTimeouts
from sidecar.core.clock import FakeClock
from sidecar.providers.client import TimedOut, Timer
from sidecar.providers.streaming.watch import Stalled, Watch


async def test_the_timer_cancels_the_block_at_its_time_and_says_so() -> None:
    clock = FakeClock()

    async def body() -> None:
        clock.advance(9.9)
        await asyncio.sleep(0)  # not yet
        clock.advance(0.1)
        await asyncio.sleep(1)  # cancelled here

    with pytest.raises(TimedOut):
        async with Timer(clock, clock.now + 10):
            await body()
    assert clock.now == 1010
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_a_timer_that_did_not_fire_leaves_the_task_alone() -> None:
    clock = FakeClock()
    async with Timer(clock, clock.now + 10):
        await asyncio.sleep(0)
    clock.advance(60)  # after the block: its timer is gone
    await asyncio.sleep(0)


async def test_a_timer_of_none_never_fires() -> None:
    clock = FakeClock()
    async with Timer(clock, None):
        clock.advance(3600)
        await asyncio.sleep(0)


async def test_a_cancellation_from_outside_passes_through_the_timer() -> None:
    clock = FakeClock()

    async def timed() -> None:
        async with Timer(clock, clock.now + 10):
            await asyncio.sleep(10)

    task = asyncio.ensure_future(timed())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    clock.advance(60)


async def stalled(clock: FakeClock, watch: Watch, *steps: float | str) -> Stalled:
    """Run ``watch`` over steps (a number: that many seconds pass; ``touch``, ``pause``, ``resume``: told to
    the watch), then wait for it; the ``Stalled`` it raised."""

    async def body() -> None:
        async with watch:
            for step in steps:
                if isinstance(step, str):
                    getattr(watch, step)()
                else:
                    clock.advance(step)
                    await asyncio.sleep(0)
            await asyncio.sleep(1)

    with pytest.raises(Stalled) as caught:
        await body()
    return caught.value


async def test_the_watch_fires_at_the_header_timeout_without_a_response_head() -> None:
    clock = FakeClock()
    fired = await stalled(clock, Watch(clock, 30, None, header_s=10, first_token_s=20), 9.9, 0.1)
    assert fired.cause == Stalled.HEAD
    assert not fired.deadline
    assert clock.now == 1010


async def test_bytes_without_a_delta_do_not_hold_off_the_first_token_timeout() -> None:
    """A head, then pings every few seconds: the idle timer is fed, the first-token one is not."""
    pings = [step for _ in range(5) for step in ("touch", 3.0)]
    clock = FakeClock()
    fired = await stalled(clock, Watch(clock, 30, None, header_s=10, first_token_s=15), *pings)
    assert fired.cause == Stalled.FIRST_TOKEN
    assert clock.now == 1015


async def test_after_the_first_delta_only_idle_and_the_deadline_remain() -> None:
    clock = FakeClock()
    watch = Watch(clock, 30, None, header_s=10, first_token_s=15)
    fired = await stalled(clock, watch, "touch", 5, "pause", "resume", 29.9, 0.1)  # past both first limits: no fault
    assert fired.cause == Stalled.IDLE
    assert clock.now == 1035


async def test_the_deadline_comes_before_a_timeout_due_at_the_same_time() -> None:
    clock = FakeClock()
    fired = await stalled(clock, Watch(clock, 30, clock.now + 10, header_s=10), 10)
    assert fired.deadline


def test_a_whole_reply_under_the_preset_waits_for_its_budget_to_be_generated() -> None:
    preset = PRESET_TIMEOUTS["interactive"]
    assert preset.head_wait(stream=True, max_tokens=4096) == 10.0  # a stream's head comes at once
    assert preset.head_wait(stream=False, max_tokens=256) == 10.0
    assert preset.head_wait(stream=False, max_tokens=4096) == pytest.approx(40.96)
    configured = AttemptTimeouts(header_s=5.0)  # a header_timeout_s written in the file: as written
    assert configured.head_wait(stream=False, max_tokens=4096) == 5.0
    assert PRESET_TIMEOUTS["batch"].head_wait(stream=False, max_tokens=4096) is None
