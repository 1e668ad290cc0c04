"""Pacer: slots booked in order on the injected clock, stretched, refused past a deadline, given back."""

from __future__ import annotations

import asyncio
import math

import pytest

from sidecar.core.clock import FakeClock
from sidecar.core.pacer import Overdue, Pacer


def test_the_burst_goes_at_once_then_slots_follow_one_interval_apart() -> None:
    clock = FakeClock()
    pacer = Pacer(2, 1.0, clock)  # 2 a second, a burst of 2
    slots = [pacer.reserve().at - clock.now for _ in range(5)]
    assert slots == pytest.approx([0, 0, 0.5, 1.0, 1.5])


def test_each_slot_counts_everyone_booked_ahead_of_it() -> None:
    clock = FakeClock()
    pacer = Pacer(1, 10.0, clock)
    first, second, third = (pacer.reserve() for _ in range(3))
    assert [b.at - clock.now for b in (first, second, third)] == pytest.approx([0, 10, 20])
    assert pacer.wait_time() == pytest.approx(30)
    clock.advance(25)
    assert pacer.wait_time() == pytest.approx(5)


def test_a_slot_past_the_deadline_is_refused_at_once_and_nothing_is_booked() -> None:
    clock = FakeClock()
    pacer = Pacer(1, 10.0, clock)
    pacer.reserve()
    with pytest.raises(Overdue) as refused:
        pacer.reserve(deadline=clock.now + 9.5)
    assert refused.value.wait == pytest.approx(10)
    assert pacer.wait_time() == pytest.approx(10)  # the refusal took nothing
    assert pacer.reserve(deadline=clock.now + 10).at == pytest.approx(clock.now + 10)  # a slot at the deadline fits


async def test_waiting_sleeps_on_the_clock_exactly() -> None:
    clock = FakeClock()
    pacer = Pacer(2, 1.0, clock)
    for _ in range(3):
        await pacer.wait(pacer.reserve())
    assert clock.sleeps == pytest.approx([0.5])


async def test_concurrent_waiters_go_in_the_order_they_booked() -> None:
    clock = FakeClock()
    pacer = Pacer(1, 1.0, clock)
    went: list[int] = []

    async def caller(i: int) -> None:
        await pacer.wait(pacer.reserve())
        went.append(i)

    await asyncio.gather(*(caller(i) for i in range(5)))
    assert went == [0, 1, 2, 3, 4]
    assert clock.now == pytest.approx(1004)


async def test_a_cancelled_last_waiter_gives_its_slot_back() -> None:
    clock = FakeClock()
    pacer = Pacer(1, 10.0, clock)
    pacer.reserve()
    waiter = asyncio.ensure_future(pacer.wait(pacer.reserve()))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert clock.now == pytest.approx(1010)  # the fake sleep moved the clock to the cancelled slot ...
    assert pacer.wait_time() == 0  # ... which is free again (kept, the next one would be 10 s away)


def test_a_slot_given_back_from_the_middle_waits_for_those_behind_it() -> None:
    clock = FakeClock()
    pacer = Pacer(1, 10.0, clock)
    first, middle, last = (pacer.reserve() for _ in range(3))
    pacer.release(middle)
    assert pacer.wait_time() == pytest.approx(30)  # the last one's slot is promised: the gap stays
    pacer.release(last)
    assert pacer.wait_time() == pytest.approx(10)  # now both come back
    pacer.release(last)  # twice is harmless
    assert pacer.wait_time() == pytest.approx(10)
    assert first.at == clock.now


def test_stretching_slows_the_slots_booked_after_it_not_the_promised_ones() -> None:
    clock = FakeClock()
    pacer = Pacer(1, 1.0, clock)
    pacer.reserve()
    promised = pacer.reserve()
    assert promised.at == pytest.approx(clock.now + 1)
    pacer.stretch(3.0)
    assert promised.at == pytest.approx(clock.now + 1)
    assert pacer.interval == pytest.approx(3.0)
    assert pacer.wait_time() == pytest.approx(6.0)  # the two in the bucket now drain at 3 s each
    pacer.stretch(1.0)
    assert pacer.wait_time() == pytest.approx(2.0)


def test_stretching_drains_what_is_in_the_bucket_at_the_new_rate() -> None:
    clock = FakeClock()
    pacer = Pacer(60, 60.0, clock)  # a minute's burst
    for _ in range(60):
        pacer.reserve()
    assert pacer.wait_time() == pytest.approx(1.0)
    pacer.stretch(2.5)
    assert pacer.wait_time() == pytest.approx(2.5)
    assert pacer.level() == pytest.approx(60)


def test_float_noise_is_no_wait() -> None:
    clock = FakeClock(start=1000.1)
    pacer = Pacer(3, 1.0, clock)
    for _ in range(3):
        pacer.reserve()
    for _ in range(30):  # one a third of a second: each slot is due exactly when the clock gets there
        clock.advance(1 / 3)
        assert pacer.reserve().at == clock.now  # now, never a sleep of 1e-13


def test_a_cost_above_the_capacity_is_charged_as_the_capacity() -> None:
    clock = FakeClock()
    pacer = Pacer(100, 60.0, clock)
    assert pacer.reserve(1000).at == clock.now
    assert pacer.wait_time(1) == pytest.approx(0.6)


def test_not_before_holds_the_slot_and_those_after_it() -> None:
    clock = FakeClock()
    pacer = Pacer(1, 1.0, clock, burst=1)
    assert pacer.reserve(not_before=clock.now + 20).at == pytest.approx(clock.now + 20)
    assert pacer.reserve().at == pytest.approx(clock.now + 21)
    pacer.stretch(2.0)  # the pause is not stretched, only what is booked after it
    assert pacer.reserve().at == pytest.approx(clock.now + 24)  # the two booked after it drain at 2 s each


def test_an_unpaced_pacer_lets_everything_through_and_can_be_paced_later() -> None:
    clock = FakeClock()
    pacer = Pacer(math.inf, 1.0, clock)
    assert all(pacer.reserve().at == clock.now for _ in range(1000))
    assert pacer.rate == math.inf
    pacer.rebase(10.0)
    assert pacer.reserve().at == clock.now
    assert pacer.reserve().at == pytest.approx(clock.now + 0.1)
    pacer.rebase(math.inf)
    assert pacer.reserve().at == clock.now  # unpaced again: at once


def test_its_repr_tells_its_state() -> None:
    clock = FakeClock()
    pacer = Pacer(2, 1.0, clock)
    pacer.reserve()
    pacer.reserve()
    pacer.reserve()
    pacer.stretch(2.0)
    assert repr(pacer) == "<Pacer 1/s (x2) burst=2 level=3.000 booked=1>"


def test_a_pacer_needs_a_positive_rate() -> None:
    with pytest.raises(ValueError, match="positive rate"):
        Pacer(0, 1.0, FakeClock())
