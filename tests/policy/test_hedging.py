"""Hedging over real gRPC and the OpenAI front, on the fake clock: a slow first token raced by the next deployment.

| what                                   | proved                                                                   |
|---|---|
| the hedge's time                       | the next deployment is asked at exactly ``hedge_after_s`` on the         |
|                                        | injected clock (not a hair before), CallModel and StreamModel            |
| the winner                             | its text is the reply; the loser's hop is ``cancelled``, the hedge's     |
|                                        | ``hedge``; the loser's upstream connection is closed (the fake sees it)  |
| a prompt first deployment              | no hedge: one request, one hop                                           |
| one hedge at most                      | both racers silent: a third deployment is never asked, however long      |
| the deadline                           | a hedge due at or past the caller's deadline is not sent                 |
| the retry budget                       | a call whose budget allows no second attempt is not hedged               |
| a racer's failure                      | the other goes on and serves                                             |
| spend                                  | the loser's prompt is counted (estimated) in the reply's total usage     |
| spans                                  | the hedge's ``route.hop`` span says hedge, the loser's says cancelled    |
| ``hedge_after: p50``                   | no hedge with fewer than MIN_SAMPLES times; then at the percentile of    |
|                                        | the times observed (nearest rank, the last FIRST_TOKEN_WINDOW of them)   |
| the percentile's window                | a hedge that lost (the hedged deployment answered first) adds nothing to |
|                                        | its deployment's window; a hedged deployment that lost adds the time it  |
|                                        | had waited when cancelled (a lower bound), which moves the percentile    |
| a bad hedge in the config              | refused naming its key: not a percentile, not positive, both keys given, |
|                                        | a route of one deployment                                                |
| the OpenAI front, official SDK         | a streamed and a whole reply from the hedge, the ``sidecar`` hops        |
|                                        | carrying ``hedge`` and ``cancelled``                                     |
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import openai
import pytest
import sidecar_client as sc
from sidecar_client import pb, user

from sidecar.config import ConfigError, parse_config
from sidecar.core.hedging import FIRST_TOKEN_WINDOW, MIN_SAMPLES, FirstTokens, Hedge
from sidecar.telemetry.testing import install_in_memory
from tests.conftest import Running, Start, timer_set, until
from tests.policy.test_routes import CONFIG

KEY = "sk-test-HEDGEHEDGEHEDGE1"
HEDGE_S = 2.0
SLOW = "up-slow"
FAST = "up-fast"
THIRD = "up-third"
HANG = {"fault": "hang"}


def deployment(upstream: str) -> dict[str, Any]:
    return {
        "provider": "oai",
        "upstream_model": upstream,
        "context_window": 8000,
        "max_output_tokens": 2048,
        "default_output_tokens": 256,
        "input_price_per_mtok": 1.0,
        "output_price_per_mtok": 2.0,
    }


async def _sidecar(start_sidecar: Start, provider: Any, more: dict[str, Any] | None = None, **route: Any) -> Running:
    """The batch preset (no header or first-token limit: the hedge's is the only timer), a retry budget;
    ``more``: other routes over the same deployments."""
    return await start_sidecar(
        policy={"preset": "batch", "upstream_retries": 2},
        providers={"oai": {"wire_format": "openai", "base_url": provider.url + "/v1", "api_key": KEY}},
        models={
            "slow": deployment(SLOW),
            "fast": deployment(FAST),
            "third": deployment(THIRD),
            "chat": {"route": {"fallbacks": ["slow", "fast", "third"], **(route or {"hedge_after_s": HEDGE_S})}},
            **(more or {}),
        },
        http={"listen": "127.0.0.1:0"},
    )


def sent(r: Running, upstream: str) -> list[dict[str, Any]]:
    return r.provider.requests(model=upstream)


def hops(hop_list: Any) -> list[tuple[str, str, bool, bool]]:
    return [(h.deployment, pb.FailureKind.Name(h.kind).removeprefix("FAILURE_KIND_"), h.hedge, h.cancelled)
            for h in hop_list]  # fmt: skip


async def _at_hedge_time(r: Running) -> None:
    """Once the slow deployment holds the request and the hedge's timer is set: just short of it, then on it."""
    await until(lambda: len(sent(r, SLOW)) == 1, "the request reached the slow deployment")
    await timer_set(r.clock, "the hedge", due_within_s=HEDGE_S)
    r.clock.advance(HEDGE_S - 0.001)
    await asyncio.sleep(0.2)
    assert sent(r, FAST) == []  # not a hair before hedge_after_s
    r.clock.advance(0.001)


async def _closed(r: Running, upstream: str) -> None:
    await until(lambda: all(q["client_disconnected"] for q in sent(r, upstream)), f"{upstream}'s response closed")


async def test_callmodel_is_hedged_at_exactly_hedge_after_and_the_hedge_wins(
    start_sidecar: Start, provider: Any
) -> None:
    otel = install_in_memory()
    otel.clear()
    r = await _sidecar(start_sidecar, provider)
    r.provider.script(SLOW, [HANG])
    began = r.clock.time()
    call = asyncio.create_task(r.client.call_model("chat", [user("hi")]))
    await _at_hedge_time(r)
    reply = await call

    assert reply.served_by == "fast"
    assert reply.message.text == "You said: hi"
    assert hops(reply.hops) == [("slow", "JOB_CANCELLED", False, True), ("fast", "UNSPECIFIED", True, False)]
    assert "lost a hedged race: fast sent a first token first" in reply.hops[0].reason
    assert r.clock.time() - began == HEDGE_S
    assert len(sent(r, FAST)) == 1
    assert sent(r, THIRD) == []
    await _closed(r, SLOW)
    # spend: the winner's tokens, and the loser's prompt (it read it; no token of its came)
    assert reply.total_usage.input_tokens > reply.usage.input_tokens
    assert reply.total_usage.output_tokens == reply.usage.output_tokens
    total = reply.total_usage
    assert reply.cost_usd == pytest.approx((total.input_tokens * 1.0 + total.output_tokens * 2.0) / 1e6)
    spans = {s.name: dict(s.attributes or {}) for s in otel.spans() if s.name.startswith("route.hop")}
    assert spans["route.hop slow"].get("sidecar.hop.cancelled") is True
    assert spans["route.hop fast"].get("sidecar.hop.hedge") is True


async def test_streammodel_is_hedged_and_the_first_delta_wins(start_sidecar: Start, provider: Any) -> None:
    r = await _sidecar(start_sidecar, provider)
    r.provider.script(SLOW, [HANG])
    stream = r.client.stream_model("chat", [user("hello there")])
    events: list[Any] = []

    async def read() -> None:
        async for event in stream:
            events.append(event)

    reading = asyncio.create_task(read())
    await _at_hedge_time(r)
    await reading
    final = events[-1].final
    text = "".join(e.text.text for e in events if e.WhichOneof("event") == "text")
    assert text == final.message.text == "You said: hello there"
    assert final.served_by == "fast"
    assert hops(final.hops) == [("slow", "JOB_CANCELLED", False, True), ("fast", "UNSPECIFIED", True, False)]
    await _closed(r, SLOW)


async def test_a_prompt_first_deployment_is_not_hedged(start_sidecar: Start, provider: Any) -> None:
    r = await _sidecar(start_sidecar, provider)
    reply = await r.client.call_model("chat", [user("hi")])
    assert reply.served_by == "slow"
    assert hops(reply.hops) == [("slow", "UNSPECIFIED", False, False)]
    assert sent(r, FAST) == []
    assert r.clock.timers == []  # the hedge's timer cancelled with the race


async def test_at_most_one_hedge_whatever_the_wait(start_sidecar: Start, provider: Any) -> None:
    r = await _sidecar(start_sidecar, provider)
    r.provider.script(SLOW, [HANG])
    r.provider.script(FAST, [HANG])
    call = asyncio.create_task(r.client.call_model("chat", [user("hi")]))
    await _at_hedge_time(r)
    await until(lambda: len(sent(r, FAST)) == 1, "the hedge went out")
    for _ in range(5):
        r.clock.advance(10 * HEDGE_S)
        await asyncio.sleep(0.05)
    assert sent(r, THIRD) == []
    assert len(sent(r, SLOW)) == len(sent(r, FAST)) == 1
    call.cancel()  # the caller leaves: both racers are cancelled, both upstream responses closed
    with contextlib.suppress(asyncio.CancelledError):
        await call
    await _closed(r, SLOW)
    await _closed(r, FAST)


async def test_no_hedge_at_or_past_the_deadline(start_sidecar: Start, provider: Any) -> None:
    r = await _sidecar(start_sidecar, provider, hedge_after_s=30.0)
    r.provider.script(SLOW, [HANG])
    call = asyncio.create_task(r.client.call_model("chat", [user("hi")], timeout=2))
    await until(lambda: len(sent(r, SLOW)) == 1, "the request reached the slow deployment")
    await timer_set(r.clock, "the attempt's own timeout")
    assert not any(abs(when - r.clock.now - 30.0) < 0.5 for when in r.clock.timers)  # no hedge: the deadline is first
    with pytest.raises(sc.JobTimeoutError):
        await call  # the caller's deadline (2 s of real time: the fake clock does not end a silent attempt)
    assert sent(r, FAST) == []
    await _closed(r, SLOW)


async def test_no_hedge_when_the_retry_budget_allows_no_second_attempt(start_sidecar: Start, provider: Any) -> None:
    r = await _sidecar(start_sidecar, provider)
    r.provider.script(SLOW, [HANG])
    call = asyncio.create_task(r.client.call_model("chat", [user("hi")], job=pb.Job(upstream_retries=0)))
    await until(lambda: len(sent(r, SLOW)) == 1, "the request reached the slow deployment")
    await asyncio.sleep(0.1)
    assert all(when - r.clock.now >= 60 for when in r.clock.timers)  # no hedge timer
    r.clock.advance(10 * HEDGE_S)
    await asyncio.sleep(0.2)
    assert sent(r, FAST) == []
    call.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await call
    await _closed(r, SLOW)


async def test_the_hedged_racer_failing_lets_the_hedge_serve(start_sidecar: Start, provider: Any) -> None:
    r = await _sidecar(start_sidecar, provider)
    r.provider.script(SLOW, [{"delay_ms": 600, "preset": "invalid_key"}])  # fails while the hedge is out
    r.provider.script(FAST, [{"delay_ms": 1500}])
    call = asyncio.create_task(r.client.call_model("chat", [user("hi")]))
    await _at_hedge_time(r)
    reply = await call
    assert reply.served_by == "fast"
    assert [h[0] for h in hops(reply.hops)] == ["slow", "fast"]
    assert hops(reply.hops)[1] == ("fast", "UNSPECIFIED", True, False)
    assert hops(reply.hops)[0] == ("slow", "UNAUTHORIZED", False, False)


async def test_percentile_mode_waits_for_samples_then_hedges_at_the_percentile(
    start_sidecar: Start, provider: Any
) -> None:
    r = await _sidecar(start_sidecar, provider, hedge_after="p50")
    r.provider.script(SLOW, [HANG])
    cold = asyncio.create_task(r.client.call_model("chat", [user("hi")]))
    await until(lambda: len(sent(r, SLOW)) == 1, "the cold call reached the slow deployment")
    await asyncio.sleep(0.1)
    assert all(when - r.clock.now >= 60 for when in r.clock.timers)  # no times yet: no hedge timer
    cold.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await cold
    for i in range(1, MIN_SAMPLES + 1):  # times to first token 0.1 s .. 2.0 s on the injected clock
        r.provider.script(SLOW, [{"delay_ms": 150}])
        call = asyncio.create_task(r.client.call_model("chat", [user("hi")]))
        await until(lambda: len(sent(r, SLOW)) == i + 1, "the request reached the slow deployment")  # noqa: B023
        r.clock.advance(0.1 * i)
        assert (await call).served_by == "slow"
    assert sent(r, FAST) == []
    r.provider.script(SLOW, [HANG])
    call = asyncio.create_task(r.client.call_model("chat", [user("hi")]))
    await until(lambda: len(sent(r, SLOW)) == MIN_SAMPLES + 2, "the request reached the slow deployment")
    await timer_set(r.clock, "the hedge", due_within_s=HEDGE_S)
    due = min(r.clock.timers)  # the hedge's (the attempt's own timeout is a minute)
    assert due - r.clock.now == pytest.approx(1.0)  # the nearest-rank p50 of 0.1 .. 2.0
    r.clock.advance(1.0)
    reply = await call
    assert reply.served_by == "fast"
    assert hops(reply.hops)[1] == ("fast", "UNSPECIFIED", True, False)


async def _last_closed(r: Running, upstream: str) -> None:
    await until(lambda: sent(r, upstream)[-1]["client_disconnected"], f"{upstream}'s last response closed")


async def _timed_calls(r: Running, model: str, upstream: str, seconds: float, count: int) -> None:
    """``count`` calls to ``model`` served by ``upstream`` whose first token comes ``seconds`` after the hop's
    start on the injected clock (each a time in the deployment's window), none hedged."""
    for _ in range(count):
        before = len(sent(r, upstream))
        r.provider.script(upstream, [{"delay_ms": 150}])
        call = asyncio.create_task(r.client.call_model(model, [user("hi")]))
        await until(lambda: len(sent(r, upstream)) == before + 1, f"the request reached {upstream}")  # noqa: B023
        r.clock.advance(seconds)
        reply = await call
        assert reply.served_by == upstream.removeprefix("up-")
        assert not any(h.hedge for h in reply.hops)


async def _hedge_due(r: Running, model: str, upstream: str) -> float | None:
    """A call to ``model`` whose first deployment (``upstream``) hangs: the seconds after its start at which it
    is hedged, or None (no new timer due within a minute: the attempt's own timeout is a minute, the failure
    log's windows were set before); the call then cancelled."""
    before = len(sent(r, upstream))
    earlier = set(r.clock.timers)
    r.provider.script(upstream, [HANG])
    call = asyncio.create_task(r.client.call_model(model, [user("hi")]))
    await until(lambda: len(sent(r, upstream)) == before + 1, f"the request reached {upstream}")
    await asyncio.sleep(0.2)
    due = [when - r.clock.now for when in r.clock.timers if when - r.clock.now < 60 and when not in earlier]
    call.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await call
    await _last_closed(r, upstream)
    return min(due) if due else None


async def test_a_hedge_that_lost_adds_nothing_to_its_deployments_window(start_sidecar: Start, provider: Any) -> None:
    back = {"back": {"route": {"fallbacks": ["fast", "third"], "hedge_after": "p99"}}}  # fast's window, seen
    r = await _sidecar(start_sidecar, provider, back, hedge_after="p99")
    await _timed_calls(r, "back", FAST, 1.0, MIN_SAMPLES - 1)  # fast: one time short of a percentile
    await _timed_calls(r, "chat", SLOW, 1.0, MIN_SAMPLES)  # slow: hedged at its p99, 1 s
    assert await _hedge_due(r, "back", FAST) is None
    r.provider.script(SLOW, [{"delay_ms": 1500}])  # slow answers after the hedge went out
    r.provider.script(FAST, [HANG])
    call = asyncio.create_task(r.client.call_model("chat", [user("hi")]))
    await until(lambda: len(sent(r, SLOW)) == MIN_SAMPLES + 1, "the request reached the slow deployment")
    await timer_set(r.clock, "the hedge", due_within_s=HEDGE_S)
    r.clock.advance(1.0)
    await until(lambda: len(sent(r, FAST)) == MIN_SAMPLES, "the hedge reached the fast deployment")
    r.clock.advance(0.5)  # the hedge waits half a second, then slow's first token wins
    reply = await call
    assert reply.served_by == "slow"
    assert hops(reply.hops) == [("slow", "UNSPECIFIED", False, False), ("fast", "JOB_CANCELLED", True, True)]
    await _last_closed(r, FAST)
    assert await _hedge_due(r, "back", FAST) is None  # the lost hedge's wait is not fast's 20th time
    await _timed_calls(r, "back", FAST, 1.0, 1)  # a time of fast's own is (the window was one short)
    assert await _hedge_due(r, "back", FAST) == pytest.approx(1.0)


async def test_a_hedged_deployment_that_lost_adds_its_wait_as_a_lower_bound(
    start_sidecar: Start, provider: Any
) -> None:
    r = await _sidecar(start_sidecar, provider, hedge_after="p99")
    await _timed_calls(r, "chat", SLOW, 1.0, MIN_SAMPLES)
    r.provider.script(SLOW, [HANG])
    r.provider.script(FAST, [{"delay_ms": 150}])
    call = asyncio.create_task(r.client.call_model("chat", [user("hi")]))
    await until(lambda: len(sent(r, SLOW)) == MIN_SAMPLES + 1, "the request reached the slow deployment")
    await timer_set(r.clock, "the hedge", due_within_s=HEDGE_S)
    assert min(r.clock.timers) - r.clock.now == pytest.approx(1.0)  # the p99 of twenty times of 1 s
    r.clock.advance(1.0)
    await until(lambda: len(sent(r, FAST)) == 1, "the hedge reached the fast deployment")
    r.clock.advance(4.0)  # the hedge's first token 4 s later: slow had waited 5 s when cancelled
    reply = await call
    assert reply.served_by == "fast"
    assert hops(reply.hops) == [("slow", "JOB_CANCELLED", False, True), ("fast", "UNSPECIFIED", True, False)]
    await _last_closed(r, SLOW)
    # slow's window: twenty times of 1 s and its 5 s wait, at least; the p99 (nearest rank 21 of 21) is the wait
    assert await _hedge_due(r, "chat", SLOW) == pytest.approx(5.0)


async def test_the_openai_front_hedges_with_the_official_sdk(start_sidecar: Start, provider: Any) -> None:
    r = await _sidecar(start_sidecar, provider)
    assert r.app.http is not None
    url = f"http://127.0.0.1:{r.app.http.port}/v1"
    async with openai.AsyncOpenAI(base_url=url, api_key="unused", max_retries=0) as client:
        r.provider.script(SLOW, [HANG])
        whole = asyncio.create_task(client.chat.completions.create(model="chat", messages=[user_json("hi")]))
        await _at_hedge_time(r)
        completion = await whole
        assert completion.choices[0].message.content == "You said: hi"
        extension = (completion.model_extra or {})["sidecar"]
        assert [(h["deployment"], h["hedge"], h["cancelled"]) for h in extension["hops"]] == [
            ("slow", False, True),
            ("fast", True, False),
        ]

        r.provider.script(SLOW, [HANG])

        async def streamed() -> str:
            stream = await client.chat.completions.create(model="chat", messages=[user_json("yo")], stream=True)
            return "".join(c.choices[0].delta.content or "" for c in [chunk async for chunk in stream] if c.choices)

        text = asyncio.create_task(streamed())
        await until(lambda: len(sent(r, SLOW)) == 2, "the stream reached the slow deployment")
        await timer_set(r.clock, "the hedge", due_within_s=HEDGE_S)
        r.clock.advance(HEDGE_S)
        assert await text == "You said: yo"
        await _closed(r, SLOW)


def user_json(text: str) -> Any:
    return {"role": "user", "content": text}


@pytest.mark.parametrize(
    ("route", "expected"),
    [
        ("{fallbacks: [a, b], hedge_after: p100}", "models.r.route.hedge_after: 'p100' is not a percentile"),
        ("{fallbacks: [a, b], hedge_after: fast}", "models.r.route.hedge_after: 'fast' is not a percentile"),
        ("{fallbacks: [a, b], hedge_after_s: 0}", "models.r.route.hedge_after_s: Input should be greater than 0"),
        ("{fallbacks: [a, b], hedge_after_s: soon}", "models.r.route.hedge_after_s: Input should be a valid number"),
        ("{fallbacks: [a, b], hedge_after_s: 1, hedge_after: p95}", "hedge_after_s and hedge_after: give one"),
        (
            "{fallbacks: [a], hedge_after_s: 1}",
            "models.r.route: hedge_after_s: hedging races a deployment with the next",
        ),
    ],
)
def test_a_bad_hedge_is_a_config_error_naming_the_key(route: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(CONFIG % route)
    assert expected in str(caught.value)


def test_a_good_hedge_reads_as_the_policy() -> None:
    assert parse_config(CONFIG % "{fallbacks: [a, b], hedge_after_s: 1.5}").routes["r"].route.hedge == Hedge(1.5)
    assert parse_config(CONFIG % "{balance: {a: 1, b: 1}, hedge_after: p99.5}").routes["r"].route.hedge == Hedge(
        percentile=99.5
    )
    assert parse_config(CONFIG % "{fallbacks: [a, b]}").routes["r"].route.hedge is None


def test_the_percentile_reads_the_last_window_of_times_nearest_rank() -> None:
    times = FirstTokens()
    for i in range(MIN_SAMPLES - 1):
        times.add(float(i))
    assert times.percentile(50) is None  # too few: no hedge
    times.add(float(MIN_SAMPLES - 1))  # 0 .. 19
    assert times.percentile(50) == 9.0
    assert times.percentile(95) == 18.0
    assert times.percentile(99.9) == 19.0
    for _ in range(FIRST_TOKEN_WINDOW):
        times.add(100.0)  # the old times leave the window
    assert len(times) == FIRST_TOKEN_WINDOW
    assert times.percentile(1) == 100.0
