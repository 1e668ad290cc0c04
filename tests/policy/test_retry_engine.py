"""The retry engine alone, on the fake clock: budget, Retry-After, deadline, cancellation, pacing, spans."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sidecar.config import Window, Windows
from sidecar.core.backoff import parse_retry_after
from sidecar.core.clock import FakeClock
from sidecar.core.kinds import RetrySignal
from sidecar.core.observer import AttemptStart, Event, Retried, Target, WaitKind, WaitStart
from sidecar.core.retry import Attempt, Done, Fail, Retry, RetryPolicy, Tally, run_attempts
from sidecar.core.taxonomy import ExternalService, JobTimeout, SidecarFailure, UpstreamRetriesExhausted

WINDOWS = Windows(
    rate_limit=Window(min_s=5, max_s=30),
    overload=Window(min_s=15, max_s=90),
    transient=Window(min_s=5, max_s=30),
    factor_cap=10,
    max_wait_s=300,
)


class GiveUpAsModel:
    def exhausted(self, retry: Retry, tally: Tally) -> SidecarFailure:
        return UpstreamRetriesExhausted("m", tally.budget, retry.signal, retry.detail, http=None, retry_after=None)

    def too_long(self, retry: Retry, max_wait_s: float) -> SidecarFailure:
        return UpstreamRetriesExhausted(
            "m", 3, retry.signal, retry.detail, http=None, retry_after=retry.retry_after, asked_too_long=max_wait_s
        )

    def past_deadline(self, retry: Retry, wait_s: float, left_s: float) -> SidecarFailure:
        return JobTimeout("m", f"would wait {wait_s:.1f} s, {left_s:.1f} s left", retry_after=wait_s)


@dataclass
class Record:
    start: AttemptStart
    notes: list[tuple[str, Any]] = field(default_factory=list)
    open: bool = True

    def answered(self, status: int) -> None:
        self.notes.append(("answered", status))

    def transport_fault(self, error_type: str, detail: str) -> None:
        self.notes.append(("fault", error_type))

    def trace_headers(self) -> dict[str, str]:
        return {}

    def active(self) -> AbstractContextManager[None]:
        return nullcontext()

    def failed(self, error_type: str) -> None:
        self.notes.append(("failed", error_type))

    def failure_kind(self, kind: str) -> None:
        self.notes.append(("kind", kind))

    def retry_signal(self, signal: RetrySignal) -> None:
        self.notes.append(("signal", signal))

    def asked_to_wait(self, seconds: float) -> None:
        self.notes.append(("asked", seconds))

    def will_wait(self, seconds: float) -> None:
        self.notes.append(("wait", seconds))

    def usage(self, input_tokens: int, output_tokens: int, finish: str, response_model: str) -> None:
        self.notes.append(("usage", output_tokens))

    def correction(self, reason: str) -> None:
        self.notes.append(("correction", reason))

    def first_token(self) -> None:
        self.notes.append(("first_token", None))

    def ended(self, reason: str) -> None:
        self.notes.append(("ended", reason))


@dataclass
class Recorder:
    attempts: list[Record] = field(default_factory=list)
    waits: list[WaitStart] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    @contextmanager
    def attempt(self, start: AttemptStart) -> Iterator[Record]:
        record = Record(start)
        self.attempts.append(record)
        try:
            yield record
        finally:
            record.open = False

    @contextmanager
    def wait(self, start: WaitStart) -> Iterator[None]:
        self.waits.append(start)
        yield

    def event(self, event: Event) -> None:
        self.events.append(event)


@dataclass
class Ticket:
    wait_s: float = 0.0
    throttle: float = 0.0
    clock: FakeClock | None = None
    outcome: Any = None
    released: bool = False

    async def ready(self) -> None:
        if self.wait_s and self.clock is not None:
            await self.clock.sleep(self.wait_s)

    def settle(self, outcome: Any) -> None:
        self.outcome = outcome

    def release(self) -> None:
        if self.outcome is None:
            self.released = True


@dataclass
class Gate:
    """A pacer that admits at once, or after ``waits`` (one per attempt), or refuses."""

    clock: FakeClock
    waits: list[float] = field(default_factory=list)
    refuse: SidecarFailure | None = None
    tickets: list[Ticket] = field(default_factory=list)
    target: Target = Target.MODEL
    name: str = "m"

    def admit(self, deadline: float | None) -> Ticket:
        if self.refuse is not None:
            raise self.refuse
        wait = self.waits.pop(0) if self.waits else 0.0
        if deadline is not None and self.clock.time() + wait > deadline:
            raise JobTimeout("m", f"throttled for {wait} s")
        ticket = Ticket(wait, 1.5, self.clock)
        self.tickets.append(ticket)
        return ticket


@dataclass
class Script:
    """A sender answering from a list of outcomes, one per attempt."""

    outcomes: list[Any]
    seen: list[Attempt] = field(default_factory=list)

    def describe(self, number: int) -> AttemptStart:
        return AttemptStart(Target.MODEL, "m", number, "POST", "http://upstream/v1")

    async def send(self, attempt: Attempt) -> Any:
        self.seen.append(attempt)
        step = self.outcomes.pop(0)
        if isinstance(step, BaseException):
            raise step
        if callable(step):
            return await step(attempt)
        return step


RATE = Retry(RetrySignal.RATE_LIMIT, "slow down")
OVER = Retry(RetrySignal.OVERLOAD, "overloaded")
FLAKE = Retry(RetrySignal.TRANSIENT, "HTTP 500")


async def run(
    script: Script,
    clock: FakeClock,
    *,
    budget: int = 3,
    deadline: float | None = None,
    gate: Gate | None = None,
    observer: Recorder | None = None,
    tally: Tally | None = None,
    seed: int = 7,
) -> Any:
    return await run_attempts(
        script,
        policy=RetryPolicy(WINDOWS, GiveUpAsModel(), random.Random(seed)),
        clock=clock,
        deadline=deadline,
        pacer=gate or Gate(clock),
        observer=observer or Recorder(),
        tally=tally or Tally(budget),
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


async def test_a_first_success_returns_its_value_without_waiting(clock: FakeClock) -> None:
    assert await run(Script([Done("hi")]), clock) == "hi"
    assert clock.sleeps == []


async def test_signals_are_retried_with_growing_jittered_waits_within_the_window(clock: FakeClock) -> None:
    tally = Tally(3)
    assert await run(Script([RATE, OVER, FLAKE, Done("ok")]), clock, tally=tally) == "ok"
    assert tally.attempts == 4
    assert tally.retries == 3
    rate, over, flake = clock.sleeps
    assert 5 * 1 <= rate < 30 * 1  # rate limit window, factor 1
    assert 15 * 2 <= over < 90 * 2  # overload window, factor 2
    assert 5 * 3 <= flake < 30 * 3  # transient window, factor 3


async def test_the_same_seed_gives_the_same_waits(clock: FakeClock) -> None:
    other = FakeClock()
    await run(Script([RATE, RATE, Done(1)]), clock)
    await run(Script([RATE, RATE, Done(1)]), other)
    assert clock.sleeps == other.sleeps


async def test_the_factor_is_capped(clock: FakeClock) -> None:
    windows = WINDOWS.model_copy(update={"factor_cap": 2, "rate_limit": Window(min_s=10, max_s=10)})
    await run_attempts(
        Script([RATE, RATE, RATE, Done(1)]),
        policy=RetryPolicy(windows, GiveUpAsModel(), random.Random(1)),
        clock=clock,
        deadline=None,
        pacer=Gate(clock),
        observer=Recorder(),
        tally=Tally(5),
    )
    assert clock.sleeps == [10, 20, 20]


async def test_a_wait_is_capped_at_max_wait(clock: FakeClock) -> None:
    windows = WINDOWS.model_copy(update={"max_wait_s": 12.0})
    await run_attempts(
        Script([OVER, Done(1)]),
        policy=RetryPolicy(windows, GiveUpAsModel(), random.Random(1)),
        clock=clock,
        deadline=None,
        pacer=Gate(clock),
        observer=Recorder(),
        tally=Tally(3),
    )
    assert clock.sleeps == [12.0]


async def test_past_the_budget_the_call_gives_up_naming_the_last_signal(clock: FakeClock) -> None:
    tally = Tally(2)
    with pytest.raises(UpstreamRetriesExhausted) as info:
        await run(Script([RATE, FLAKE, OVER]), clock, tally=tally)
    assert tally.attempts == 3
    assert len(clock.sleeps) == 2
    assert info.value.detail.last_signal == RetrySignal.OVERLOAD  # type: ignore[union-attr]


async def test_a_budget_of_zero_sends_once(clock: FakeClock) -> None:
    with pytest.raises(UpstreamRetriesExhausted):
        await run(Script([FLAKE]), clock, budget=0)
    assert clock.sleeps == []


async def test_one_budget_is_shared_by_every_run_of_a_call(clock: FakeClock) -> None:
    tally = Tally(2)
    assert await run(Script([RATE, Done("first")]), clock, tally=tally) == "first"
    with pytest.raises(UpstreamRetriesExhausted):  # a correction's re-run has one retry left
        await run(Script([RATE, RATE]), clock, tally=tally)
    assert tally.attempts == 4
    assert tally.retries == 2


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"Retry-After": "0"}, 0.0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "Thu, 01 Jan 2026 00:00:42 GMT"}, 42.0),  # IMF-fixdate
        ({"retry-after": "Thursday, 01-Jan-26 00:00:42 GMT"}, 42.0),  # RFC 850
        ({"retry-after": "Thu Jan  1 00:00:42 2026"}, 42.0),  # asctime
    ],
)
async def test_every_usable_retry_after_form_is_the_wait(headers: dict[str, str], expected: float) -> None:
    clock = FakeClock(start=0.0, wall=datetime(2026, 1, 1, tzinfo=UTC))
    asked = parse_retry_after(headers, clock.wall())
    await run(Script([Retry(RetrySignal.RATE_LIMIT, "429", retry_after=asked), Done(1)]), clock)
    assert clock.sleeps == [pytest.approx(expected)]


@pytest.mark.parametrize("value", ["-1", "1.5", "soon", "", "99999999999999", "Thu, 99 Foo 2026"])
async def test_an_unusable_retry_after_falls_back_to_the_window(value: str) -> None:
    clock = FakeClock(start=0.0)
    asked = parse_retry_after({"retry-after": value}, clock.wall())
    await run(Script([Retry(RetrySignal.RATE_LIMIT, "429", retry_after=asked), Done(1)]), clock)
    assert 5 <= clock.sleeps[0] < 30


async def test_a_date_in_the_past_means_now() -> None:
    clock = FakeClock(start=0.0, wall=datetime(2026, 1, 1, tzinfo=UTC))
    past = (clock.wall() - timedelta(hours=1)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    asked = parse_retry_after({"retry-after": past}, clock.wall())
    await run(Script([Retry(RetrySignal.RATE_LIMIT, "429", retry_after=asked), Done(1)]), clock)
    assert clock.sleeps == [0.0]


async def test_a_retry_after_longer_than_max_wait_gives_up_at_once(clock: FakeClock) -> None:
    with pytest.raises(UpstreamRetriesExhausted) as info:
        await run(Script([Retry(RetrySignal.RATE_LIMIT, "429", retry_after=301.0)]), clock)
    assert clock.sleeps == []
    assert "past the 300 s a wait may last" in info.value.message


async def test_a_wait_that_cannot_fit_the_deadline_fails_at_once(clock: FakeClock) -> None:
    deadline = clock.time() + 10
    with pytest.raises(JobTimeout) as info:
        await run(Script([Retry(RetrySignal.RATE_LIMIT, "429", retry_after=11.0)]), clock, deadline=deadline)
    assert clock.sleeps == []
    assert "10.0 s left" in info.value.message


async def test_a_wait_that_fits_the_deadline_is_waited(clock: FakeClock) -> None:
    deadline = clock.time() + 10
    assert await run(
        Script([Retry(RetrySignal.RATE_LIMIT, "429", retry_after=10.0), Done(1)]), clock, deadline=deadline
    )
    assert clock.sleeps == [10.0]


async def test_attempts_see_their_timeout_clipped_to_the_deadline(clock: FakeClock) -> None:
    script = Script([Done(1)])
    await run(script, clock, deadline=clock.time() + 2.5)
    attempt = script.seen[0]
    assert attempt.timeout(120.0) == pytest.approx(2.5)
    assert attempt.clipped(120.0)
    assert not attempt.clipped(1.0)
    assert attempt.timeout(1.0) == 1.0


async def test_a_failure_is_raised_as_it_is_without_retrying(clock: FakeClock) -> None:
    failure = ExternalService("svc", "http://x", "boom")
    with pytest.raises(ExternalService) as info:
        await run(Script([Fail(failure), Done("never")]), clock)
    assert info.value is failure
    assert clock.sleeps == []


async def test_cancellation_during_a_backoff_stops_the_call_and_releases_nothing_twice() -> None:
    sleeping = asyncio.Event()

    class SlowClock(FakeClock):
        async def sleep(self, seconds: float) -> None:
            sleeping.set()
            await asyncio.Event().wait()  # never wakes: only cancellation ends it

    clock = SlowClock()
    gate = Gate(clock)
    script = Script([RATE, Done("never")])
    task = asyncio.create_task(run(script, clock, gate=gate))
    await sleeping.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(script.seen) == 1
    assert gate.tickets[0].outcome is RATE  # the attempt that was sent was settled
    assert not gate.tickets[0].released


async def test_cancellation_during_an_attempt_ends_its_span_and_releases_the_admission(clock: FakeClock) -> None:
    started = asyncio.Event()

    async def hang(attempt: Attempt) -> Any:
        started.set()
        await asyncio.Event().wait()

    gate = Gate(clock)
    observer = Recorder()
    task = asyncio.create_task(run(Script([hang]), clock, gate=gate, observer=observer))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gate.tickets[0].released
    assert observer.attempts[0].notes == [("ended", "cancelled")]
    assert not observer.attempts[0].open


async def test_a_bug_in_the_sender_releases_the_admission(clock: FakeClock) -> None:
    gate = Gate(clock)
    observer = Recorder()
    with pytest.raises(ZeroDivisionError):
        await run(Script([ZeroDivisionError()]), clock, gate=gate, observer=observer)
    assert gate.tickets[0].released
    assert observer.attempts[0].notes == [("ended", "internal")]


async def test_the_pacer_refusal_is_raised_before_any_attempt(clock: FakeClock) -> None:
    refusal = ExternalService("svc", "http://x", "circuit")
    script = Script([Done(1)])
    with pytest.raises(ExternalService):
        await run(script, clock, gate=Gate(clock, refuse=refusal))
    assert script.seen == []


async def test_a_throttle_wait_is_waited_under_its_own_wait_span(clock: FakeClock) -> None:
    observer = Recorder()
    gate = Gate(clock, waits=[2.0, 0.0])
    await run(Script([RATE, Done(1)]), clock, gate=gate, observer=observer)
    kinds = [(w.kind, w.seconds) for w in observer.waits]
    assert kinds[0] == (WaitKind.THROTTLE, 2.0)
    assert kinds[1][0] is WaitKind.BACKOFF
    assert observer.waits[0].throttle == 1.5
    assert clock.sleeps[0] == 2.0


async def test_a_throttle_wait_past_the_deadline_is_refused_by_the_pacer(clock: FakeClock) -> None:
    gate = Gate(clock, waits=[0.0, 50.0])
    with pytest.raises(JobTimeout):
        await run(
            Script([Retry(RetrySignal.RATE_LIMIT, "429", retry_after=1.0), Done(1)]),
            clock,
            gate=gate,
            deadline=clock.time() + 20,
        )
    assert clock.sleeps == [1.0]


async def test_every_attempt_has_its_own_closed_span_with_its_number_and_what_it_saw(clock: FakeClock) -> None:
    observer = Recorder()
    await run(Script([RATE, Done(1)]), clock, observer=observer)
    first, second = observer.attempts
    assert (first.start.number, second.start.number) == (1, 2)
    assert not first.open
    assert not second.open
    assert first.notes[0] == ("signal", RetrySignal.RATE_LIMIT)
    assert first.notes[1][0] == "wait"
    assert second.notes == []
    assert observer.events == [Retried(Target.MODEL, "m", RetrySignal.RATE_LIMIT)]


async def test_every_admission_is_told_its_attempt_outcome(clock: FakeClock) -> None:
    gate = Gate(clock)
    done = Done("x")
    await run(Script([OVER, done]), clock, gate=gate)
    assert [t.outcome for t in gate.tickets] == [OVER, done]
