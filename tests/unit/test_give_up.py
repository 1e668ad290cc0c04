"""What stopping means for each caller of the retry engine (the ``GiveUp`` of a model call and of a tool call).

    model call   budget spent            -> UPSTREAM_RETRIES_EXHAUSTED, the last signal named
                 Retry-After > max wait  -> UPSTREAM_RETRIES_EXHAUSTED, the wait asked for named
                 wait past the deadline  -> JOB_TIMEOUT, the wait and the time left named
    tool call    any of the three        -> the last attempt's own failure, as it is

Each is checked alone, then through ``run_attempts`` on the fake clock with a scripted sender.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from sidecar.core.clock import FakeClock
from sidecar.core.details import HttpInfo, RetryDetail
from sidecar.core.kinds import FailureKind, RetrySignal
from sidecar.core.observer import NULL_OBSERVER, AttemptStart, Target
from sidecar.core.retry import Attempt, Done, Fail, GiveUp, Retry, RetryPolicy, Tally, run_attempts
from sidecar.core.settings import Window, Windows
from sidecar.core.taxonomy import ExternalService, JobTimeout, SidecarFailure, UpstreamRetriesExhausted
from sidecar.providers.give_up import GiveUp as ModelGiveUp
from sidecar.tools.service import _GiveUp as ToolGiveUp

HTTP = HttpInfo(429, "oai", "https://api.example/v1/chat/completions", '{"error": "busy"}', "500")
RATE_LIMITED = Retry(RetrySignal.RATE_LIMIT, "busy", retry_after=500.0, http=HTTP)


def model_give_up(budget: int = 3) -> ModelGiveUp:
    return ModelGiveUp("gpt", "oai", Tally(budget=budget))


# ---------------------------------------------------------------- a model call


def test_a_model_call_past_its_budget_is_upstream_retries_exhausted_naming_the_last_signal() -> None:
    failure = model_give_up().exhausted(Retry(RetrySignal.OVERLOAD, "Overloaded", http=HTTP), Tally(budget=2))
    assert isinstance(failure, UpstreamRetriesExhausted)
    assert failure.message == (
        "Model gpt (oai) still failed after 2 upstream retries (the call's budget); last signal: overload (Overloaded)."
    )
    assert failure.http is HTTP
    assert failure.detail == RetryDetail(target="Model gpt (oai)", budget=2, last_signal=RetrySignal.OVERLOAD)


def test_a_model_call_told_to_wait_too_long_says_the_wait_asked_for() -> None:
    failure = model_give_up(budget=3).too_long(RATE_LIMITED, 300.0)
    assert isinstance(failure, UpstreamRetriesExhausted)
    assert failure.message == (
        "Model gpt (oai) was told to wait 500 s, past the 300 s a wait may last (the call's budget is 3 upstream "
        "retries); last signal: rate limit (busy)."
    )
    assert failure.retry_after == 500.0
    assert failure.http is HTTP


def test_a_model_call_whose_next_wait_passes_the_deadline_is_job_timeout() -> None:
    failure = model_give_up(budget=4).past_deadline(Retry(RetrySignal.TRANSIENT, "HTTP 503"), 12.0, 3.25)
    assert isinstance(failure, JobTimeout)
    assert failure.message == (
        "The call to model gpt would not finish before the caller's deadline: the next retry would wait 12.0 s "
        "after a transient fault (HTTP 503), but only 3.2 s remain."
    )
    assert failure.retry_after == 12.0
    assert failure.detail == RetryDetail(
        target="model gpt", budget=4, last_signal=RetrySignal.TRANSIENT, next_wait_s=12.0
    )


# ---------------------------------------------------------------- a tool call


THROTTLED = ExternalService("docs", "https://docs.example/v1", "busy")


@pytest.mark.parametrize(
    "give_up",
    [
        lambda g, r: g.exhausted(r, Tally(budget=2)),
        lambda g, r: g.too_long(r, 30.0),
        lambda g, r: g.past_deadline(r, 10.0, 1.0),
    ],
)
def test_a_tool_call_that_stops_reports_its_last_failure_as_it_is(give_up: object) -> None:
    retry = Retry(RetrySignal.TRANSIENT, "busy", failure=THROTTLED)
    assert give_up(ToolGiveUp(), retry) is THROTTLED  # type: ignore[operator]


def test_a_tool_retry_without_its_failure_is_a_bug_caught_at_once() -> None:
    with pytest.raises(AssertionError, match="always carries its failure"):
        ToolGiveUp().exhausted(Retry(RetrySignal.TRANSIENT, "busy"), Tally(budget=0))


# ---------------------------------------------------------------- through the engine


@dataclass
class Script:
    """A sender that answers each attempt from the list, the last one again and again."""

    outcomes: list[Done[str] | Fail | Retry]
    sent: int = 0

    def describe(self, number: int) -> AttemptStart:
        return AttemptStart(Target.MODEL, "gpt", number, "POST", "https://api.example/v1/chat/completions")

    async def send(self, attempt: Attempt) -> Done[str] | Fail | Retry:
        self.sent += 1
        return self.outcomes[min(self.sent, len(self.outcomes)) - 1]


@dataclass
class Ticket:
    wait_s: float = 0.0
    throttle: float = 0.0

    async def ready(self) -> None:
        pass

    def settle(self, outcome: object) -> None:
        pass

    def release(self) -> None:
        pass


@dataclass
class OpenGate:
    target: Target = Target.MODEL
    name: str = "gpt"
    admitted: list[Ticket] = field(default_factory=list)

    def admit(self, deadline: float | None) -> Ticket:
        self.admitted.append(Ticket())
        return self.admitted[-1]


WINDOWS = Windows(rate_limit=Window(min_s=5, max_s=30), transient=Window(min_s=5, max_s=30), max_wait_s=300)


async def run(script: Script, give_up: GiveUp, *, budget: int = 2, deadline: float | None = None) -> str:
    clock = FakeClock(start=0.0)
    return await run_attempts(
        script,
        policy=RetryPolicy(WINDOWS, give_up, random.Random(1)),
        clock=clock,
        deadline=deadline,
        pacer=OpenGate(),
        observer=NULL_OBSERVER,
        tally=Tally(budget=budget),
    )


async def test_the_engine_raises_the_model_give_up_for_each_way_of_stopping() -> None:
    busy = Retry(RetrySignal.RATE_LIMIT, "busy")
    with pytest.raises(UpstreamRetriesExhausted, match="still failed after 2 upstream retries"):
        await run(Script([busy]), model_give_up(2), budget=2)
    with pytest.raises(UpstreamRetriesExhausted, match="was told to wait 500 s, past the 300 s"):
        await run(Script([RATE_LIMITED]), model_give_up(2))
    with pytest.raises(JobTimeout, match=r"would wait 10\.0 s after a rate limit"):
        await run(Script([Retry(RetrySignal.RATE_LIMIT, "busy", retry_after=10.0)]), model_give_up(2), deadline=5.0)


async def test_the_engine_raises_a_tool_calls_last_failure_and_returns_a_success() -> None:
    last = ExternalService("docs", "https://docs.example/v1", "still down")
    first = ExternalService("docs", "https://docs.example/v1", "down")
    script = Script(
        [Retry(RetrySignal.TRANSIENT, "down", failure=first), Retry(RetrySignal.TRANSIENT, "x", failure=last)]
    )
    with pytest.raises(SidecarFailure) as caught:
        await run(script, ToolGiveUp(), budget=1)
    assert caught.value is last
    assert caught.value.kind is FailureKind.EXTERNAL_SERVICE
    assert script.sent == 2  # the first attempt and its one retry
    assert await run(Script([Retry(RetrySignal.TRANSIENT, "down", failure=first), Done("ok")]), ToolGiveUp()) == "ok"
