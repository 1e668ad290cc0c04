"""Pace before the 429: the providers' rate-limit headers hold a model's calls until the reset.

The fake provider enforces a request limit (``FakeProvider.limit_requests``: a fixed window on the
sidecar's own fake clock) and tells its budget on every answer in the format's headers (OpenAI's
``x-ratelimit-remaining-requests`` / ``-reset-requests`` as a duration, Anthropic's
``anthropic-ratelimit-requests-remaining`` / ``-reset`` as an RFC 3339 time). A steady caller that
would meet a 429 (the same calls straight to the fake do) meets none through the sidecar: every
call is answered at its first attempt, the fake refused nothing, and the only waits are the
resets, on the fake clock. Through Redis, two sidecars sharing the fake's budget hold each other:
the hold one of them decides crosses as a pause. The parsers and the policy are checked here too.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import sidecar_client as sc
from sidecar_client import user

from sidecar.core.clock import FakeClock
from sidecar.core.model_throttle import HELD, ModelThrottle
from sidecar.core.observer import ModelPaused, NullObserver
from sidecar.core.rate_budget import REQUESTS_FLOOR, UNKNOWN_RESET_S, Allowance, Budget, hold_s
from sidecar.fakes._threaded import ThreadedServer
from sidecar.fakes.provider import FakeProvider
from sidecar.providers.formats.anthropic_messages.vocab import rate_budget as anthropic_budget
from sidecar.providers.formats.openai_chat.fake import duration
from sidecar.providers.formats.openai_chat.vocab import parse_duration
from sidecar.providers.formats.openai_chat.vocab import rate_budget as openai_budget
from tests.conftest import Running, Start
from tests.redis_server import RedisServer, redis_server  # noqa: F401  (the fixture)

LIMIT = 5
WINDOW_S = 60.0
CALLS = 12
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def resets(r: Running) -> list[float]:
    return [w for w in r.clock.sleeps if w >= 1]  # throttle pacing waits are sub-second


def limited(r: Running, limit: int = LIMIT) -> None:
    r.provider.limit_requests(limit, r.clock, window_s=WINDOW_S)


# ---------------------------------------------------------------- the parsers


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("6m0s", 360.0), ("1s", 1.0), ("20ms", 0.02), ("1h2m3.5s", 3723.5), ("0.5s", 0.5), ("250us", 0.00025)],
)
def test_openai_durations_read_as_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "6", "soon", "-1s", "1d", "s", "1 s", "9" * 5000 + "s"])
def test_what_is_not_a_duration_reads_as_none(text: str) -> None:
    assert parse_duration(text) is None


@pytest.mark.parametrize("seconds", [0.02, 0.999, 1.0, 1.5, 59.5, 60.0, 360.0, 3723.5])
def test_the_fakes_durations_read_back(seconds: float) -> None:
    assert parse_duration(duration(seconds)) == pytest.approx(seconds)


def test_openais_headers_read_into_a_budget_in_any_case() -> None:
    headers = {
        "X-RateLimit-Remaining-Requests": "4",
        "x-ratelimit-reset-requests": "6m0s",
        "x-ratelimit-remaining-tokens": "149984",
        "x-ratelimit-reset-tokens": "6ms",
    }
    assert openai_budget(headers) == Budget(Allowance(4, 360.0), Allowance(149984, 0.006))
    assert openai_budget({"x-ratelimit-remaining-requests": "9"}) == Budget(Allowance(9, None))  # Azure: no reset
    assert openai_budget({"x-ratelimit-remaining-requests": "many", "x-ratelimit-reset-requests": "1s"}) == Budget()
    assert openai_budget({}) == Budget()
    assert not Budget()


def test_anthropics_headers_read_into_a_budget_against_the_wall_clock() -> None:
    at = (NOW + timedelta(seconds=42)).isoformat().replace("+00:00", "Z")
    headers = {
        "anthropic-ratelimit-requests-remaining": "3",
        "anthropic-ratelimit-requests-reset": at,
        "anthropic-ratelimit-input-tokens-remaining": "9000",
        "anthropic-ratelimit-input-tokens-reset": "2026-01-01T00:00:01+00:00",
    }
    assert anthropic_budget(headers, NOW) == Budget(Allowance(3, 42.0), Allowance(9000, 1.0))
    past = {"anthropic-ratelimit-requests-remaining": "0", "anthropic-ratelimit-requests-reset": "2025-12-31T23:59Z"}
    assert anthropic_budget(past, NOW) == Budget(Allowance(0, 0.0))
    naive = {"anthropic-ratelimit-requests-remaining": "0", "anthropic-ratelimit-requests-reset": "2026-01-01T00:01"}
    assert anthropic_budget(naive, NOW) == Budget(Allowance(0, None))  # a time with no zone is no time


# ---------------------------------------------------------------- the policy


def test_the_hold_is_the_reset_of_a_budget_about_to_run_out() -> None:
    assert hold_s(Budget(Allowance(REQUESTS_FLOOR + 1, 30.0))) is None
    assert hold_s(Budget(Allowance(REQUESTS_FLOOR, 30.0))) == 30.0
    assert hold_s(Budget(Allowance(0, 30.0))) == 30.0
    assert hold_s(Budget(Allowance(REQUESTS_FLOOR + 2, 30.0)), others_in_flight=2) == 30.0  # theirs come first
    assert hold_s(Budget(Allowance(0, None))) == UNKNOWN_RESET_S
    assert hold_s(Budget(Allowance(0, 0.0))) is None  # already whole again
    assert hold_s(Budget(tokens=Allowance(900, 12.0)), tokens=1000) == 12.0  # another call like it does not fit
    assert hold_s(Budget(tokens=Allowance(1000, 12.0)), tokens=1000) is None
    assert hold_s(Budget(Allowance(0, 5.0), Allowance(0, 12.0)), tokens=10) == 12.0  # the longer
    assert hold_s(Budget(Allowance(0, 30.0)), status=429) is None  # the 429 is paced as a retry signal
    assert hold_s(Budget(Allowance(0, 30.0)), status=500) == 30.0
    assert hold_s(None) is None
    assert hold_s(Budget()) is None


def test_a_hold_pauses_the_model_says_why_and_leaves_the_throttle_alone() -> None:
    clock, observer = FakeClock(), NullObserver(keep=True)
    throttle = ModelThrottle("m", clock, observer=observer)
    throttle.hold(30.0)
    assert (throttle.pause_left(), throttle.throttle) == (30.0, 0.0)
    assert [e for e in observer.events if isinstance(e, ModelPaused)] == [ModelPaused("m", 30.0, HELD)]


# ---------------------------------------------------------------- a steady caller, through the sidecar


def test_the_same_caller_straight_to_the_fake_meets_the_429(provider: ThreadedServer[FakeProvider]) -> None:
    provider.server.limit_requests(LIMIT, window_s=WINDOW_S)
    body = {"model": "fake-gpt", "messages": [{"role": "user", "content": "hi"}]}
    statuses = [httpx.post(f"{provider.url}/v1/chat/completions", json=body).status_code for _ in range(LIMIT + 1)]
    assert statuses == [200] * LIMIT + [429]
    assert provider.server.rate_limited == 1


async def test_openais_headers_hold_a_steady_caller_until_the_reset_and_no_429_comes(sidecar: Running) -> None:
    limited(sidecar)
    replies = [await sidecar.client.call_model("gpt", [user(f"call {i}")]) for i in range(CALLS)]
    assert all(r.attempts == 1 for r in replies)
    assert sidecar.provider.rate_limited == 0
    assert resets(sidecar) == [WINDOW_S, WINDOW_S]  # 4 calls a window: the 5th kept as slack
    throttle = sidecar.app.models.throttle("gpt")
    assert throttle.throttle == 0  # nobody was told off: the throttle never rose


async def test_anthropics_headers_hold_a_steady_caller_until_the_reset_and_no_429_comes(sidecar: Running) -> None:
    limited(sidecar)
    replies = [await sidecar.client.call_model("claude", [user(f"call {i}")]) for i in range(CALLS)]
    assert all(r.attempts == 1 for r in replies)
    assert sidecar.provider.rate_limited == 0
    assert resets(sidecar) == [WINDOW_S, WINDOW_S]


async def test_streamed_calls_are_held_by_the_headers_of_their_head(sidecar: Running) -> None:
    limited(sidecar, 3)
    for i in range(6):
        events = [e async for e in sidecar.client.stream_model("gpt", [user(f"call {i}")])]
        assert events[-1].final.attempts == 1
    assert sidecar.provider.rate_limited == 0
    assert resets(sidecar) == [WINDOW_S, WINDOW_S]  # 2 calls a window


async def test_a_call_whose_deadline_ends_before_the_reset_fails_at_once(sidecar: Running) -> None:
    limited(sidecar, 2)
    await sidecar.client.call_model("gpt", [user("one")])  # 1 left: held until the reset
    with pytest.raises(sc.JobTimeoutError) as caught:
        await sidecar.client.call_model("gpt", [user("two")], timeout=5)
    assert "held until the provider's rate-limit budget resets" in caught.value.message
    assert sidecar.clock.sleeps == []
    assert len(sidecar.provider.requests()) == 1


# ---------------------------------------------------------------- two sidecars through Redis


async def _until(check: Any, what: str, timeout_s: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    while not check():
        if loop.time() > end:
            pytest.fail(f"not within {timeout_s:g} s: {what}")
        await asyncio.sleep(0.01)


async def test_two_sidecars_sharing_redis_hold_each_other_before_the_429(
    start_sidecar: Start,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    state = {"backend": "redis", "url": redis_server.url, "prefix": f"budget-{uuid.uuid4().hex[:8]}", "timeout_ms": 500}
    a = await start_sidecar(state=state)
    b = await start_sidecar(state=state)  # the same fake provider, the same fake clock
    await _until(lambda: a.app.state.available and b.app.state.available, "both connected")
    limited(a)
    throttles = [a.app.models.throttle("gpt"), b.app.models.throttle("gpt")]
    for i in range(CALLS):
        caller = (a, b)[i % 2]
        reply = await caller.client.call_model("gpt", [user(f"call {i}")])
        assert reply.attempts == 1
        if any(t.pause_left() > 0 for t in throttles):  # a hold decided by one: the other has it before its call
            await _until(lambda: all(t.pause_left() > 0 for t in throttles), "the hold shared through Redis")
    assert a.provider.rate_limited == 0
    assert len(a.provider.requests(model="fake-gpt")) == CALLS
    assert resets(a) == [WINDOW_S, WINDOW_S]  # one clock: each reset waited once, by whoever called next
