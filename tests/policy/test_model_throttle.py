"""The shared model throttle's arithmetic, on an injected clock."""

from __future__ import annotations

import asyncio
import math

import pytest

from sidecar.core.clock import FakeClock
from sidecar.core.kinds import RetrySignal
from sidecar.core.model_throttle import ModelThrottle, Overdue, Ticket

RATE_LIMIT = RetrySignal.RATE_LIMIT
OVERLOAD = RetrySignal.OVERLOAD


async def send(throttle: ModelThrottle, tokens: int = 0) -> Ticket:
    ticket = throttle.reserve(tokens)
    await throttle.wait(ticket)
    return ticket


async def test_a_cold_start_is_paced_from_the_concurrency_not_a_floor() -> None:
    clock = FakeClock()
    throttle = ModelThrottle("m", clock)
    in_flight = [await send(throttle) for _ in range(16)]  # 16 callers at once
    clock.advance(0.010)
    throttle.signal(in_flight[0], RATE_LIMIT, None)  # the first 429, 10 ms after the first request
    assert throttle.throttle == 0.5
    observed = 16 / 0.010  # the concurrency over the round trip just seen
    assert throttle.paced_rate == pytest.approx(observed / 1.5)
    slots = [throttle.reserve().at - clock.now for _ in range(16)]  # everyone sends again
    assert max(slots) == pytest.approx(15 / (observed / 1.5))  # within 15 ms, not 16 s at 1 call/s


async def test_an_unconfigured_model_is_paced_from_the_rate_it_was_called_at() -> None:
    clock = FakeClock()
    throttle = ModelThrottle("m", clock)
    for _ in range(150):  # 50 calls a second, one at a time, each answered in 1 ms
        ticket = await send(throttle)
        clock.advance(0.001)
        throttle.success(ticket)
        clock.advance(0.019)
    ticket = await send(throttle)
    clock.advance(0.001)
    throttle.signal(ticket, RATE_LIMIT, None)
    assert 50 / 1.5 <= throttle.paced_rate < math.inf  # at least the observed rate, stretched by 1.5


async def test_a_burst_of_429s_from_calls_already_in_flight_raises_it_once() -> None:
    clock = FakeClock()
    throttle = ModelThrottle("m", clock)
    in_flight = [await send(throttle) for _ in range(16)]
    clock.advance(0.5)
    for ticket in in_flight:  # all sent before the first increase: the old rate's answers
        throttle.signal(ticket, RATE_LIMIT, None)
    assert throttle.throttle == 0.5
    later = await send(throttle)  # sent at the new rate
    clock.advance(0.5)
    throttle.signal(later, RATE_LIMIT, None)
    assert throttle.throttle == 1.0


async def test_a_stronger_signal_of_the_same_epoch_adds_only_the_difference() -> None:
    clock = FakeClock()
    throttle = ModelThrottle("m", clock)
    first, second = await send(throttle), await send(throttle)
    throttle.signal(first, RATE_LIMIT, None)
    throttle.signal(second, OVERLOAD, None)
    assert throttle.throttle == 1.5


@pytest.mark.parametrize(("signal", "step"), [(RATE_LIMIT, 0.5), (OVERLOAD, 1.5)])
async def test_signals_add_their_step_up_to_nine(signal: int, step: float) -> None:
    throttle = ModelThrottle("m", FakeClock())
    throttle.signal(await send(throttle), signal, None)
    assert throttle.throttle == step
    for _ in range(20):
        throttle.signal(await send(throttle), signal, None)
    assert throttle.throttle == 9.0


async def test_a_transient_fault_slows_no_one() -> None:
    throttle = ModelThrottle("m", FakeClock())
    throttle.signal(await send(throttle), RetrySignal.TRANSIENT, 30.0)
    assert throttle.throttle == 0
    assert throttle.paused_until == 0
    assert throttle.reserve().at == throttle.reserve().at


async def test_a_round_trip_of_successes_gives_back_a_quarter_of_the_base_rate() -> None:
    clock = FakeClock()
    throttle = ModelThrottle("m", clock)
    throttle.signal(await send(throttle), OVERLOAD, None)  # 1 / (1 + 1.5) = 40 % of the base
    alone = await send(throttle)
    throttle.success(alone)  # one in flight: one success is the round trip
    assert 1 / (1 + throttle.throttle) == pytest.approx(0.65)
    four = [await send(throttle) for _ in range(4)]
    for _ in range(4):  # four in flight (each answered call sent again): each gives back a quarter of it
        throttle.success(four.pop(0))
        four.append(await send(throttle))
    assert 1 / (1 + throttle.throttle) == pytest.approx(0.9, abs=1e-5)
    for ticket in four:
        throttle.settle(ticket)
    throttle.success(await send(throttle))
    assert throttle.throttle == 0
    assert throttle.paced_rate == math.inf  # no configured rate, no throttle: not paced


async def test_after_five_quiet_minutes_every_success_takes_at_least_half_off() -> None:
    clock = FakeClock()
    throttle = ModelThrottle("m", clock, requests_per_minute=600)
    for _ in range(6):
        throttle.signal(await send(throttle), OVERLOAD, None)
    assert throttle.throttle == 9.0
    clock.advance(300)
    throttle.success(await send(throttle))
    assert throttle.throttle == pytest.approx(1 / (0.1 + 0.25) - 1)  # the round trip's share is more
    tickets = [await send(throttle) for _ in range(20)]
    before = throttle.throttle
    throttle.success(tickets[0])  # 20 in flight: the share is small, the quiet half is more
    assert throttle.throttle == pytest.approx(before - 0.5)


async def test_a_429_retry_after_pauses_the_model_for_every_caller() -> None:
    clock = FakeClock()
    throttle = ModelThrottle("m", clock)
    throttle.signal(await send(throttle), RATE_LIMIT, 12.0)
    assert throttle.paused_until == pytest.approx(clock.now + 12)
    ticket = throttle.reserve()
    assert ticket.at == pytest.approx(clock.now + 12)
    await throttle.wait(ticket)
    assert clock.sleeps == pytest.approx([12.0])


async def test_a_wait_past_the_deadline_is_refused_at_once_counting_everyone_queued() -> None:
    clock = FakeClock()
    throttle = ModelThrottle("m", clock, requests_per_minute=6)  # a burst of 6, then one every 10 s
    for _ in range(6):
        throttle.reserve()
    ahead = [throttle.reserve() for _ in range(2)]
    assert [t.at - clock.now for t in ahead] == pytest.approx([10, 20])
    with pytest.raises(Overdue) as refused:
        throttle.reserve(deadline=clock.now + 25)  # its slot would be at 30 s
    assert refused.value.wait == pytest.approx(30)
    assert refused.value.reason == "the model is throttled"
    assert throttle.reserve(deadline=clock.now + 30).at == pytest.approx(clock.now + 30)  # nothing was booked


async def test_a_pause_past_the_deadline_is_refused_at_once() -> None:
    clock = FakeClock()
    throttle = ModelThrottle("m", clock)
    throttle.signal(await send(throttle), RATE_LIMIT, 20.0)
    with pytest.raises(Overdue) as refused:
        throttle.reserve(deadline=clock.now + 5)
    assert refused.value.wait == pytest.approx(20)
    assert refused.value.reason == "the model is paused by the provider's Retry-After"


async def test_a_pause_that_begins_while_a_call_waits_is_checked_against_its_deadline() -> None:
    clock = FakeClock()
    throttle = ModelThrottle("m", clock, requests_per_minute=60)
    limited = await send(throttle)
    for _ in range(59):
        throttle.reserve()
    fits = throttle.reserve(deadline=clock.now + 100)
    late = throttle.reserve(deadline=clock.now + 5)
    assert (fits.at - clock.now, late.at - clock.now) == pytest.approx((1, 2))
    throttle.signal(limited, RATE_LIMIT, 30.0)  # ... and then a Retry-After of 30 s arrives
    with pytest.raises(Overdue, match="paused"):
        await throttle.wait(late)
    await throttle.wait(fits)
    assert clock.now >= throttle.paused_until


async def test_a_cancelled_waiter_gives_its_slot_back() -> None:
    clock = FakeClock()
    throttle = ModelThrottle("m", clock, requests_per_minute=1)
    await send(throttle)
    waiting = throttle.reserve()
    assert waiting.at == pytest.approx(clock.now + 60)
    task = asyncio.ensure_future(throttle.wait(waiting))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert "queued=0" in repr(throttle)
    assert throttle.reserve().at == pytest.approx(clock.now)  # the fake sleep reached the slot it gave back


async def test_a_configured_rate_is_enforced_and_stretched() -> None:
    clock = FakeClock()
    throttle = ModelThrottle("m", clock, requests_per_minute=60)
    for _ in range(60):  # the burst
        await send(throttle)
    assert clock.sleeps == []
    ticket = throttle.reserve()
    assert ticket.at - clock.now == pytest.approx(1.0)
    throttle.settle(ticket)  # not sent: its slot is given back
    throttle.signal(await send(throttle), OVERLOAD, None)
    assert throttle.reserve().at - clock.now == pytest.approx(2.5)


async def test_tokens_per_minute_is_a_second_pacer() -> None:
    clock = FakeClock()
    throttle = ModelThrottle("m", clock, tokens_per_minute=6000)
    await send(throttle, tokens=6000)
    assert throttle.reserve(tokens=600).at - clock.now == pytest.approx(6.0)
    assert throttle.reserve().at == clock.now  # a call without an estimate is not held by tokens


async def test_settling_is_idempotent_and_its_repr_tells_its_state() -> None:
    clock = FakeClock()
    throttle = ModelThrottle("m", clock)
    ticket = await send(throttle)
    queued = throttle.reserve()
    assert repr(throttle) == "<ModelThrottle m throttle=0.000 paced=inf/s in_flight=1 queued=1 paused_until=0.000>"
    throttle.success(ticket)
    throttle.success(ticket)
    throttle.signal(ticket, RATE_LIMIT, None)  # already settled: nothing
    throttle.settle(queued)
    throttle.settle(queued)
    assert throttle.throttle == 0
    assert repr(throttle) == "<ModelThrottle m throttle=0.000 paced=inf/s in_flight=0 queued=0 paused_until=0.000>"


async def test_a_ticket_is_sent_once() -> None:
    throttle = ModelThrottle("m", FakeClock())
    ticket = await send(throttle)
    with pytest.raises(RuntimeError, match="already sent or settled"):
        await throttle.wait(ticket)
