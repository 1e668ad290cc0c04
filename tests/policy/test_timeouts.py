"""Timeouts that match how providers fail, through a running sidecar, a route and the fake provider.

The settings are the ones the docs suggest for interactive use (two retries, ``preset: interactive``,
30 s request and stream-idle timeouts, ``mid_stream: fail``), with no timeout of the issue's own set:
the preset's header and first-token timeouts (10 s each) are the documented defaults. They run on
the sidecar's injected clock, so each is driven by ``clock.advance``, never by waiting; what is
asserted is which deployment served, the attempts the fake provider logged, and the clock's time.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator, Callable
from typing import Any

import openai
import pytest
import pytest_asyncio
import sidecar_client as sc
from sidecar_client import pb, user

from sidecar.config import PRESETS, Config, ConfigError, parse_config
from sidecar.config.bounds import INTERACTIVE_FIRST_TOKEN_TIMEOUT_S, INTERACTIVE_HEADER_TIMEOUT_S
from sidecar.telemetry.testing import InMemoryTelemetry, install_in_memory
from tests.conftest import Running, Start, base_config, timer_set

PRIMARY = "fake-gpt-a"
FALLBACK = "fake-claude"
DOCUMENTED = {"upstream_retries": 2, "preset": "interactive", "mid_stream": "fail"}
ROUTE = {"route": {"fallbacks": ["gpt-a", "claude"]}}
GPT_A = {
    "provider": "oai",
    "upstream_model": PRIMARY,
    "context_window": 8000,
    "max_output_tokens": 2048,
    "default_output_tokens": 256,  # a whole reply's head waits max(10 s, 256 tokens at 100/s)
}
ANSWER_BOUND_S = 15.0
"""The issue's bound: a provider that never answers is answered by the fallback within this."""
SLOW_FIRST_TOKEN_S = 20.0
"""The issue's slow first token: the fallback's must come before it."""


def providers(provider_url: str) -> dict[str, Any]:
    """The conftest providers with the documented 30 s request and stream-idle timeouts (no header or
    first-token timeout of their own: the preset's)."""
    found = base_config(provider_url, "http://127.0.0.1:9")["providers"]
    return {name: {**p, "timeout_s": 30, "stream_idle_timeout_s": 30} for name, p in found.items()}


@pytest_asyncio.fixture
async def documented(start_sidecar: Start, provider: Any) -> Running:
    """A sidecar with the documented settings, its HTTP port on, and the route ``fallback``."""
    return await start_sidecar(
        policy=DOCUMENTED,
        providers=providers(provider.url),
        models={"gpt-a": GPT_A, "fallback": ROUTE},
        http={"listen": "127.0.0.1:0"},
    )


@pytest_asyncio.fixture
async def client(documented: Running) -> AsyncIterator[openai.AsyncOpenAI]:
    assert documented.app.http is not None
    url = f"http://127.0.0.1:{documented.app.http.port}/v1"
    async with openai.AsyncOpenAI(base_url=url, api_key="unused", max_retries=0) as c:
        yield c


@pytest.fixture
def otel() -> InMemoryTelemetry:
    telemetry = install_in_memory()
    telemetry.clear()
    return telemetry


def sent(r: Running, upstream: str) -> list[dict[str, Any]]:
    return r.provider.requests(model=upstream)


async def until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` (the calls cross real sockets); fail naming ``what`` if it never holds."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


async def silence_for(r: Running, seconds: float, upstream: str = PRIMARY, attempts: int = 1) -> None:
    """Once the primary holds its ``attempts``-th request, ``seconds`` pass on the sidecar's clock."""
    await until(lambda: len(sent(r, upstream)) == attempts, f"attempt {attempts} reached {upstream}")
    await timer_set(r.clock, f"attempt {attempts}'s timeout")  # set before the request went out
    r.clock.advance(seconds)


def hops(hop_list: Any) -> list[tuple[str, str, int]]:
    return [(h.deployment, pb.FailureKind.Name(h.kind).removeprefix("FAILURE_KIND_"), h.attempts) for h in hop_list]


def attempt_errors(otel: InMemoryTelemetry) -> list[Any]:
    return [dict(s.attributes or {}).get("error.type") for s in sorted(otel.spans(), key=lambda s: s.start_time or 0)
            if s.name == "POST"]  # fmt: skip


# ---------------------------------------------------------------- the defaults, as numbers


def test_the_documented_defaults_bound_a_silent_provider_and_a_slow_first_token() -> None:
    """With the documented settings a silent deployment is left at 10 s (header timeout), well within 15 s,
    and a first token later than 10 s moves on before a 20 s one would have come."""
    cfg = Config.model_validate(
        base_config("http://127.0.0.1:9", "http://127.0.0.1:9", policy=DOCUMENTED,
                    providers=providers("http://127.0.0.1:9"), models={"gpt-a": GPT_A, "fallback": ROUTE})
    )  # fmt: skip
    limits = cfg.models["gpt-a"].timeouts(cfg.providers["oai"], cfg.policy.preset)
    assert (limits.header_s, limits.first_token_s) == (INTERACTIVE_HEADER_TIMEOUT_S, INTERACTIVE_FIRST_TOKEN_TIMEOUT_S)
    assert (limits.header_s or math.inf) < ANSWER_BOUND_S
    assert (limits.first_token_s or math.inf) < SLOW_FIRST_TOKEN_S
    batch = cfg.models["gpt-a"].timeouts(cfg.providers["oai"], "batch")
    assert (batch.header_s, batch.first_token_s) == (None, None)  # batch: timeout_s and stream_idle_timeout_s
    assert PRESETS["interactive"].max_wait_s == ANSWER_BOUND_S


def test_each_door_takes_its_own_preset_where_the_configuration_names_none() -> None:
    """No ``preset`` anywhere: a call at an HTTP front is interactive (its windows, header, first-token and
    stream-idle limits), one over gRPC batch; ``policy.preset`` (or the model's) applies at every door."""
    from sidecar.config.bounds import DEFAULT_STREAM_IDLE_TIMEOUT_S, INTERACTIVE_STREAM_IDLE_TIMEOUT_S
    from sidecar.core.clock import FakeClock
    from sidecar.server.convert import call_options as grpc_options
    from sidecar.server.http.envelope import call_options as http_options

    http, grpc = http_options({}, FakeClock()).preset, grpc_options(pb.Job(), None, FakeClock()).preset
    assert (http, grpc) == ("interactive", None)
    bare = base_config("http://127.0.0.1:9", "http://127.0.0.1:9", models={"gpt-a": GPT_A})
    del bare["policy"]
    cfg = Config.model_validate(bare)
    model, oai = cfg.models["gpt-a"], cfg.providers["oai"]
    assert cfg.policy.preset is None
    at_front = model.timeouts(oai, cfg.policy.preset or http)
    assert (at_front.header_s, at_front.first_token_s, at_front.idle_s) == (
        INTERACTIVE_HEADER_TIMEOUT_S,
        INTERACTIVE_FIRST_TOKEN_TIMEOUT_S,
        INTERACTIVE_STREAM_IDLE_TIMEOUT_S,
    )
    over_grpc = model.timeouts(oai, cfg.policy.preset or grpc)
    assert (over_grpc.header_s, over_grpc.first_token_s, over_grpc.idle_s) == (
        None,
        None,
        DEFAULT_STREAM_IDLE_TIMEOUT_S,
    )
    assert cfg.policy.windows_for(None, None, http) == PRESETS["interactive"]
    assert cfg.policy.windows_for(None, None, grpc) == PRESETS["batch"]
    batch = Config.model_validate({**bare, "policy": {"preset": "batch"}})
    assert batch.policy.windows_for(None, None, http) == PRESETS["batch"]  # configured: every door
    assert model.timeouts(oai, batch.policy.preset or http).header_s is None
    slow = {**bare["providers"]["oai"], "stream_idle_timeout_s": 40}
    idle = Config.model_validate({**bare, "providers": {**bare["providers"], "oai": slow}})
    assert idle.models["gpt-a"].timeouts(idle.providers["oai"], http).idle_s == 40  # the provider's beats any preset


# ---------------------------------------------------------------- CallModel


async def test_a_silent_deployment_is_left_at_the_header_timeout_and_the_fallback_answers(
    documented: Running, otel: InMemoryTelemetry
) -> None:
    r = documented
    r.provider.script(PRIMARY, [{"fault": "hang"}])
    began = r.clock.time()
    call = asyncio.create_task(r.client.call_model("fallback", [user("hi")]))
    await silence_for(r, INTERACTIVE_HEADER_TIMEOUT_S - 0.1)
    await asyncio.sleep(0.05)
    assert not call.done()  # not yet
    r.clock.advance(0.1)
    reply = await call
    assert reply.served_by == "claude"
    assert reply.message.text == "You said: hi"
    assert hops(reply.hops) == [("gpt-a", "EXTERNAL_SERVICE", 1), ("claude", "UNSPECIFIED", 1)]
    assert "no response headers within 10 s" in reply.hops[0].reason
    assert r.clock.time() - began <= ANSWER_BOUND_S
    assert r.clock.sleeps == []  # moved on at once: no backoff on the silent deployment
    (only,) = sent(r, PRIMARY)  # one attempt, not three
    await until(lambda: only["client_disconnected"], "the silent attempt was closed")
    assert attempt_errors(otel) == ["header_timeout", None]


async def test_a_header_timeout_on_a_plain_model_is_a_transient_fault_retried(
    documented: Running, otel: InMemoryTelemetry
) -> None:
    r = documented
    r.provider.script(PRIMARY, [{"fault": "hang"}, {}])
    call = asyncio.create_task(r.client.call_model("gpt-a", [user("hi")]))
    await silence_for(r, INTERACTIVE_HEADER_TIMEOUT_S)
    reply = await call
    assert reply.attempts == 2
    assert len(sent(r, PRIMARY)) == 2
    (wait,) = r.clock.sleeps
    assert 0.25 <= wait < 2  # the interactive transient window
    assert attempt_errors(otel) == ["header_timeout", None]


async def test_every_attempt_timing_out_spends_the_budget_as_transient_faults(documented: Running) -> None:
    r = documented
    r.provider.script(PRIMARY, [{"fault": "hang", "repeat": 3}])
    call = asyncio.create_task(r.client.call_model("gpt-a", [user("hi")]))
    for attempt in (1, 2, 3):
        await silence_for(r, INTERACTIVE_HEADER_TIMEOUT_S, attempts=attempt)
    with pytest.raises(sc.UpstreamRetriesExhaustedError) as caught:
        await call
    assert "no response headers within 10 s" in caught.value.message
    assert caught.value.attempts == 3


async def test_a_route_without_the_timeout_kind_in_move_on_spends_its_budget_on_the_silent_one(
    start_sidecar: Start, provider: Any
) -> None:
    route = {"route": {"fallbacks": ["gpt-a", "claude"], "move_on": ["UPSTREAM_RETRIES_EXHAUSTED"]}}
    r = await start_sidecar(policy=DOCUMENTED, providers=providers(provider.url), models={"gpt-a": GPT_A, "r": route})
    r.provider.script(PRIMARY, [{"fault": "hang", "repeat": 3}])
    call = asyncio.create_task(r.client.call_model("r", [user("hi")]))
    for attempt in (1, 2, 3):
        await silence_for(r, INTERACTIVE_HEADER_TIMEOUT_S, attempts=attempt)
    reply = await call
    assert reply.served_by == "claude"
    assert hops(reply.hops) == [("gpt-a", "UPSTREAM_RETRIES_EXHAUSTED", 3), ("claude", "UNSPECIFIED", 1)]


async def test_the_header_timeout_is_configured_per_provider_and_per_model(start_sidecar: Start, provider: Any) -> None:
    given = providers(provider.url)
    given["oai"]["header_timeout_s"] = 4
    models = {"gpt-a": GPT_A, "slow-thinker": {**GPT_A, "header_timeout_s": 25}, "fallback": ROUTE}
    r = await start_sidecar(policy=DOCUMENTED, providers=given, models=models)
    limits = {m: r.app.config.models[m].timeouts(r.app.config.providers["oai"], "interactive").header_s
              for m in ("gpt-a", "slow-thinker")}  # fmt: skip
    assert limits == {"gpt-a": 4, "slow-thinker": 25}
    r.provider.script(PRIMARY, [{"fault": "hang"}])
    call = asyncio.create_task(r.client.call_model("fallback", [user("hi")]))
    await silence_for(r, 4)
    assert (await call).served_by == "claude"


@pytest.mark.parametrize(
    ("where", "entry", "message"),
    [
        ("provider", {"header_timeout_s": 31}, "header_timeout_s (31) must not exceed timeout_s (30)"),
        ("provider", {"header_timeout_s": 0}, "header_timeout_s: Input should be greater than 0"),
        ("provider", {"first_token_timeout_s": -1}, "first_token_timeout_s: Input should be greater than 0"),
        ("model", {"header_timeout_s": 45}, "models.gpt-a.header_timeout_s: 45 exceeds its provider's timeout_s (30)"),
        ("model", {"first_token_timeout_s": 7200}, "first_token_timeout_s: Input should be less than or equal"),
    ],
)
def test_a_timeout_out_of_bounds_is_refused_naming_it(where: str, entry: dict[str, Any], message: str) -> None:
    oai: dict[str, Any] = {"wire_format": "openai", "base_url": "http://127.0.0.1:9/v1", "timeout_s": 30}
    model = dict(GPT_A)
    (oai if where == "provider" else model).update(entry)
    with pytest.raises(ConfigError) as caught:
        parse_config(json.dumps({"providers": {"oai": oai}, "models": {"gpt-a": model}}))
    assert message in str(caught.value)


# ---------------------------------------------------------------- StreamModel


async def test_a_first_token_later_than_the_timeout_is_served_by_the_fallback_first(
    documented: Running, otel: InMemoryTelemetry
) -> None:
    """The primary answers its head and opening events at once, then would send its first delta after 20 s
    (a real 20 s stall): at 10 s on the sidecar's clock the fallback takes over and streams it all."""
    r = documented
    r.provider.script(PRIMARY, [{"stream_fault": "stall", "after_deltas": 0, "stall_ms": SLOW_FIRST_TOKEN_S * 1000}])
    began = r.clock.time()
    call = r.client.stream_model("fallback", [user("one two three")])
    reading = asyncio.create_task(_all(call))
    await silence_for(r, INTERACTIVE_FIRST_TOKEN_TIMEOUT_S)
    events = await reading
    assert r.clock.time() - began < SLOW_FIRST_TOKEN_S
    final = events[-1].final
    assert final.served_by == "claude"
    assert call.text == "You said: one two three"
    assert [e.WhichOneof("event") for e in events].count("restart") == 0  # nothing had reached the caller
    assert hops(final.hops) == [("gpt-a", "EXTERNAL_SERVICE", 1), ("claude", "UNSPECIFIED", 1)]
    assert "no content within 10 s of the request" in final.hops[0].reason
    (only,) = sent(r, PRIMARY)
    await until(lambda: only["client_disconnected"], "the slow stream was closed")
    assert attempt_errors(otel) == ["first_token_timeout", None]


async def test_a_stream_with_no_response_head_is_left_at_the_header_timeout(
    documented: Running, otel: InMemoryTelemetry
) -> None:
    r = documented
    r.provider.script(PRIMARY, [{"fault": "hang"}])
    call = r.client.stream_model("fallback", [user("hi")])
    reading = asyncio.create_task(_all(call))
    await silence_for(r, INTERACTIVE_HEADER_TIMEOUT_S)
    events = await reading
    assert events[-1].final.served_by == "claude"
    assert hops(events[-1].final.hops)[0] == ("gpt-a", "EXTERNAL_SERVICE", 1)
    assert attempt_errors(otel) == ["header_timeout", None]


async def test_a_slow_first_token_on_a_plain_model_is_retried_and_pings_do_not_count(documented: Running) -> None:
    """The Anthropic fake opens with message_start and a ping (bytes, no delta): the first-token timeout still
    fires at 10 s, sooner than the 30 s stream-idle timeout, and the retry streams the reply."""
    r = documented
    r.provider.script(FALLBACK, [{"stream_fault": "stall", "after_deltas": 0}, {}])
    call = r.client.stream_model("claude", [user("hi")])
    reading = asyncio.create_task(_all(call))
    await silence_for(r, INTERACTIVE_FIRST_TOKEN_TIMEOUT_S, upstream=FALLBACK)
    events = await reading
    assert events[-1].final.attempts == 2
    assert call.text == "You said: hi"


async def test_after_the_first_token_only_the_idle_timeout_applies(documented: Running) -> None:
    r = documented
    r.provider.script(PRIMARY, [{"stream_fault": "stall", "after_deltas": 2}, {}])
    call = r.client.stream_model("gpt-a", [user("one two three")], mid_stream=pb.MID_STREAM_POLICY_RESTART)
    first = [await call.__anext__(), await call.__anext__()]
    assert [e.WhichOneof("event") for e in first] == ["text", "text"]
    r.clock.advance(29.9)  # past the first-token timeout: deltas came, so no fault
    await asyncio.sleep(0.1)
    assert len(sent(r, PRIMARY)) == 1
    r.clock.advance(0.1)  # stream_idle_timeout_s
    rest = [e async for e in call]
    assert rest[-1].final.attempts == 2


async def _all(call: Any) -> list[Any]:
    return [event async for event in call]


# ---------------------------------------------------------------- the OpenAI front, a plain openai client


async def test_the_openai_front_answers_a_silent_primary_from_the_fallback(
    documented: Running, client: openai.AsyncOpenAI
) -> None:
    r = documented
    r.provider.script(PRIMARY, [{"fault": "hang"}])
    began = r.clock.time()
    messages: Any = [{"role": "user", "content": "hi"}]
    asked = asyncio.create_task(client.chat.completions.create(model="fallback", messages=messages))
    await silence_for(r, INTERACTIVE_HEADER_TIMEOUT_S)
    reply = await asked
    assert reply.choices[0].message.content == "You said: hi"
    extra = (reply.model_extra or {})["sidecar"]
    assert extra["served_by"] == "claude"
    assert r.clock.time() - began <= ANSWER_BOUND_S
    assert len(sent(r, PRIMARY)) == 1


async def test_the_openai_front_streams_the_fallback_when_the_first_token_is_slow(
    documented: Running, client: openai.AsyncOpenAI
) -> None:
    r = documented
    r.provider.script(PRIMARY, [{"stream_fault": "stall", "after_deltas": 0, "stall_ms": SLOW_FIRST_TOKEN_S * 1000}])
    began = r.clock.time()

    async def read() -> list[Any]:
        stream = await client.chat.completions.create(
            model="fallback", messages=[{"role": "user", "content": "one two three"}], stream=True
        )
        return [c async for c in stream]

    reading = asyncio.create_task(read())
    await silence_for(r, INTERACTIVE_FIRST_TOKEN_TIMEOUT_S)
    chunks = await reading
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "You said: one two three"
    assert r.clock.time() - began < SLOW_FIRST_TOKEN_S
    assert len(sent(r, PRIMARY)) == 1
    assert len(sent(r, FALLBACK)) == 1


# ---------------------------------------------------------------- every deployment silent, and the circuit


async def test_when_every_deployment_is_silent_the_last_one_spends_its_budget(documented: Running) -> None:
    r = documented
    r.provider.script(PRIMARY, [{"fault": "hang"}])
    r.provider.script(FALLBACK, [{"fault": "hang", "repeat": 3}])
    call = asyncio.create_task(r.client.call_model("fallback", [user("hi")]))
    await silence_for(r, INTERACTIVE_HEADER_TIMEOUT_S)
    for attempt in (1, 2, 3):  # nothing after it: its timeouts are retried as transient faults
        await silence_for(r, INTERACTIVE_HEADER_TIMEOUT_S, upstream=FALLBACK, attempts=attempt)
    with pytest.raises(sc.UpstreamRetriesExhaustedError) as caught:
        await call
    assert hops(caught.value.hops) == [("gpt-a", "EXTERNAL_SERVICE", 1), ("claude", "UPSTREAM_RETRIES_EXHAUSTED", 3)]
    assert len(sent(r, PRIMARY)) == 1


async def test_silent_hops_open_the_deployments_circuit_and_later_calls_skip_it_without_waiting(
    documented: Running,
) -> None:
    r = documented
    for silent in range(1, 10):
        r.provider.script(PRIMARY, [{"fault": "hang"}])
        call = asyncio.create_task(r.client.call_model("fallback", [user("hi")]))
        await silence_for(r, INTERACTIVE_HEADER_TIMEOUT_S, attempts=silent)
        assert hops((await call).hops)[0] == ("gpt-a", "EXTERNAL_SERVICE", 1)
        if r.app.models.routes.guard("gpt-a").state.name == "OPEN":
            break
    else:
        raise AssertionError("the silent deployment's circuit never opened")
    began = r.clock.time()
    reply = await r.client.call_model("fallback", [user("hi")])  # no clock advance: nothing waits
    assert r.clock.time() == began
    assert hops(reply.hops) == [("gpt-a", "CIRCUIT_OPEN", 0), ("claude", "UNSPECIFIED", 1)]
    assert len(sent(r, PRIMARY)) == silent
