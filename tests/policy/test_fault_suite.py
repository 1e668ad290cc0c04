"""Sixteen provider faults, each through the OpenAI front with a plain ``openai`` client.

The suite a gateway is judged by (issues 22 and 38): a route of two OpenAI-compatible deployments
(``primary``, then ``secondary``; ``large`` takes what does not fit), a configuration that lists only
providers, models and routes (every policy key at its documented default: the front's interactive
preset, three retries, a prefill tried where none is declared), and the official ``openai`` SDK with
its own retries off. Every scenario runs again with the policy docs/retries.md suggests for a caller
who waits (``preset: interactive``, two retries) and deployments declaring ``prefill``. Each fault is
scripted on the fake provider; each scenario states what the caller must get (the complete
answer, or the right refusal), who serves it, and a bound on the injected clock: the time the
sidecar spent from the request to the answer. Where the sidecar waits on a timer of the
injected clock (a silent provider, a stall, a slow first token), the test advances that clock
once the fake shows the fault in place, so no test waits for real.

Hammering fails every scenario: the fake logs each attempt with the injected clock's time, and
``_no_hammering`` checks that an attempt after a failed one to the same deployment is never closer
than the policy's shortest wait (after a success the next call may go at once), and that no
request follows an answer no retry can fix (a 400).
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import openai
import pytest
import pytest_asyncio

from sidecar.config import Config
from sidecar.config.bounds import (
    DEFAULT_UPSTREAM_RETRIES,
    INTERACTIVE_FIRST_TOKEN_TIMEOUT_S,
    INTERACTIVE_HEADER_TIMEOUT_S,
    INTERACTIVE_STREAM_IDLE_TIMEOUT_S,
)
from sidecar.core.clock import FakeClock
from sidecar.fakes import FakeProvider, FakeToolBackend, ThreadedServer
from sidecar.server.app import SidecarApp, running
from tests.conftest import base_config, timer_set, until

REPLY_WORDS = 60
PROMPT = "tell me about retries " + " ".join(f"w{i}" for i in range(REPLY_WORDS - 4))
"""The fake's default reply echoes the prompt: ``You said: ...`` (60 words)."""
ANSWER = f"You said: {PROMPT}"
MIN_GAP_S = 0.1
"""No two attempts to one deployment closer than this on the injected clock: every preset's
shortest wait is above it (core.settings.PRESETS)."""


def deployment(upstream: str, **extra: Any) -> dict[str, Any]:
    return {
        "provider": "oai",
        "upstream_model": upstream,
        "context_window": 8000,
        "max_output_tokens": 2048,
        "default_output_tokens": 256,
        **extra,
    }


MODELS: dict[str, Any] = {
    # OpenAI-compatible servers that continue a trailing assistant message (vLLM, most others); none says
    # so: the fronts' default mid-stream policy, continue, tries a prefill and learns a refusal
    "primary": deployment("up-primary"),
    "secondary": deployment("up-secondary"),
    "large": deployment("up-large", context_window=200_000),
    "agent": {"route": {"fallbacks": ["primary", "secondary"], "context_fallback": "large"}},
}
CONFIGS = {"defaults": DEFAULT_UPSTREAM_RETRIES, "interactive": 2}
"""Each configuration the suite runs, and its upstream retries."""
EVERY = -1
"""An upstream's attempts in a scenario: every attempt of one hop's budget (the configuration's retries + 1)."""
"""``CONFIGS``' keys: ``defaults``: providers, models and routes, nothing else (issue 38); ``interactive``: the policy
docs/retries.md suggests for a caller who waits, and deployments that declare ``prefill``."""


def documented_config(provider_url: str, tools_url: str, which: str) -> Config:
    """``tests/conftest.py``'s providers and tools, ``MODELS``, and either no policy at all or the interactive one."""
    models = MODELS
    if which == "interactive":
        models = {**MODELS, **{name: {**MODELS[name], "prefill": True} for name in ("primary", "secondary")}}
    cfg = base_config(provider_url, tools_url, http={"listen": "127.0.0.1:0"}, models=models)
    del cfg["policy"]  # every key at its documented default
    if which == "interactive":
        cfg["policy"] = {"preset": "interactive", "upstream_retries": CONFIGS[which]}
    return Config.model_validate(cfg)


@dataclass
class Suite:
    app: SidecarApp
    clock: FakeClock
    provider: FakeProvider
    sdk: openai.AsyncOpenAI
    budget: int
    """A hop's attempts: the configuration's upstream retries + 1."""
    read: list[str] = field(default_factory=list)
    """The text deltas the caller has read so far of a streamed call (``streamed``)."""

    def attempts(self, upstream: str) -> list[dict[str, Any]]:
        return self.provider.requests(model=upstream)


@pytest_asyncio.fixture(params=list(CONFIGS))
async def suite(
    request: pytest.FixtureRequest,
    provider: ThreadedServer[FakeProvider],
    backend: ThreadedServer[FakeToolBackend],
    clock: FakeClock,
) -> AsyncIterator[Suite]:
    provider.server.stamp_with(clock.time)
    cfg = documented_config(provider.url, backend.url, request.param)
    async with running(cfg, listen="127.0.0.1:0", clock=clock, rng=random.Random(7)) as app:
        assert app.http is not None
        url = f"http://127.0.0.1:{app.http.port}/v1"
        async with openai.AsyncOpenAI(base_url=url, api_key="unused", max_retries=0) as sdk:
            yield Suite(app, clock, provider.server, sdk, CONFIGS[request.param] + 1)


def user(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


async def whole(s: Suite) -> tuple[str, str, str]:
    """One call, whole: (the answer's text, the model it names, the model that wrote its end: ``served_by``'s)."""
    reply = await s.sdk.chat.completions.create(model="agent", messages=user(PROMPT))
    (choice,) = reply.choices
    return choice.message.content or "", reply.model, (reply.model_extra or {})["sidecar"]["response_model"]


async def streamed(s: Suite) -> tuple[str, str, str]:
    """One call, streamed: (the text as the caller read it, delta by delta, the model its chunks name, and
    the model that wrote its end, as the last chunk's ``sidecar`` extension says)."""
    text: list[str] = []
    model = wrote = ""
    stream = await s.sdk.chat.completions.create(model="agent", messages=user(PROMPT), stream=True)
    async for chunk in stream:
        model = chunk.model
        wrote = (chunk.model_extra or {}).get("sidecar", {}).get("response_model", wrote)
        for choice in chunk.choices:
            text.append(choice.delta.content or "")
            if choice.delta.content:
                s.read.append(choice.delta.content)
    return "".join(text), model, wrote


def _no_hammering(s: Suite) -> None:
    by_model: dict[str, list[dict[str, Any]]] = {}
    for record in s.provider.requests():
        by_model.setdefault(record["body"]["model"], []).append(record)
    for upstream, records in by_model.items():
        for before, after in itertools.pairwise(records):
            if 200 <= (before["status_sent"] or 0) < 300:
                continue  # no retry follows a success: the next call may (a probe on the side that closed the circuit)
            gap = after["stamped_at"] - before["stamped_at"]
            seen = [(r["stamped_at"], r["status_sent"]) for r in records]
            assert gap >= MIN_GAP_S, f"{upstream}: attempts {gap:.3f} s apart on the injected clock: {seen}"
            assert before["status_sent"] not in (400, 404), f"{upstream}: retried a {before['status_sent']}"


def stalled(upstream: str, deltas: int, seconds: float) -> Callable[[Suite], Awaitable[None]]:
    """Once ``upstream`` has sent ``deltas`` deltas of its stream and gone quiet, ``seconds`` pass.

    The caller holding every one of them is what says the sidecar has read them all: it hands a delta on
    before it reads on, and it does not count a silence while a delta is on its way to the caller (an
    advance then would pass the stall by)."""

    async def drive(s: Suite) -> None:
        await until(lambda: len(s.read) >= deltas, f"the caller read the {deltas} deltas before the stall")
        await timer_set(s.clock, "the stream's idle watch", seconds)
        s.clock.advance(seconds)

    return drive


def silent(upstream: str, seconds: float) -> Callable[[Suite], Awaitable[None]]:
    """Once ``upstream`` holds a request it has not answered, ``seconds`` pass on the sidecar's clock."""

    async def drive(s: Suite) -> None:
        await until(lambda: any(r["status_sent"] in (None, 200) for r in s.attempts(upstream)), f"{upstream} asked")
        await timer_set(s.clock, "the attempt's timeout", seconds)  # set before the request went out
        s.clock.advance(seconds)

    return drive


@dataclass(frozen=True)
class Fault:
    """One scenario: what the fake does, how the caller calls, and what the caller must get."""

    name: str
    script: dict[str, list[dict[str, Any]]]
    served_by: str
    bound_s: float
    stream: bool = False
    attempts: dict[str, int] = field(default_factory=dict)
    """Upstream model -> exactly how many attempts it got (``EVERY``: a hop's whole budget)."""
    drive: Callable[[Suite], Awaitable[None]] | None = None
    """Advances the injected clock once the fault is in place (a silent provider, a stall)."""
    waited_s: float = 0.0
    """At least this long passed on the injected clock (a Retry-After honoured)."""
    named: str = ""
    """The model the reply names, when not ``served_by``: a stream's chunks keep the name of the model
    that began it when another continues it (``server/http/fronts.py``)."""


FAULTS = [
    Fault(
        "429 with Retry-After once",
        {"up-primary": [{"preset": "rate_limit", "retry_after": 2}]},
        served_by="up-primary",
        bound_s=3,
        attempts={"up-primary": 2},
        waited_s=2,
    ),
    Fault(
        "429 persistent",
        {"up-primary": [{"preset": "rate_limit", "repeat": 100}]},
        served_by="up-secondary",
        bound_s=15,
        attempts={"up-primary": EVERY, "up-secondary": 1},
    ),
    Fault(
        "500 once",
        {"up-primary": [{"preset": "server_error"}]},
        served_by="up-primary",
        bound_s=5,
        attempts={"up-primary": 2},
    ),
    Fault(
        "503 persistent, the fallback answers",
        {"up-primary": [{"status": 503, "body": {"error": {"message": "unavailable"}}, "repeat": 100}]},
        served_by="up-secondary",
        bound_s=15,
        attempts={"up-primary": EVERY, "up-secondary": 1},
    ),
    Fault(
        "primary 503, the fallback answers, streamed",
        {"up-primary": [{"status": 503, "body": {"error": {"message": "unavailable"}}, "repeat": 100}]},
        served_by="up-secondary",
        bound_s=15,
        stream=True,
        attempts={"up-primary": EVERY, "up-secondary": 1},
    ),
    Fault(
        "a reset before headers",
        {"up-primary": [{"fault": "reset"}]},
        served_by="up-primary",
        bound_s=5,
        attempts={"up-primary": 2},
    ),
    Fault(
        "no response",
        {"up-primary": [{"fault": "hang"}]},
        served_by="up-secondary",
        bound_s=15,
        attempts={"up-primary": 1, "up-secondary": 1},
        drive=silent("up-primary", INTERACTIVE_HEADER_TIMEOUT_S),
    ),
    Fault(
        "a first token after 20 s",
        {"up-primary": [{"stream_fault": "stall", "after_deltas": 0, "stall_ms": 20_000}]},
        served_by="up-secondary",
        bound_s=15,
        stream=True,
        attempts={"up-primary": 1, "up-secondary": 1},
        drive=silent("up-primary", INTERACTIVE_FIRST_TOKEN_TIMEOUT_S),
    ),
    Fault(
        "context_length_exceeded, the larger model",
        {"up-primary": [{"preset": "context_too_long"}]},
        served_by="up-large",
        bound_s=1,
        attempts={"up-primary": 1, "up-secondary": 0, "up-large": 1},
    ),
    Fault(
        "a stream cut after 40 of 60 words",
        {"up-primary": [{"stream_fault": "drop", "after_deltas": 40}]},
        served_by="up-primary",
        bound_s=3,
        stream=True,
        attempts={"up-primary": 2, "up-secondary": 0},  # the cut attempt, then its continuation
    ),
    Fault(
        "a 30 s stall with the connection open",
        {"up-primary": [{"stream_fault": "stall", "after_deltas": 40}]},
        served_by="up-secondary",
        named="up-primary",
        bound_s=32,
        stream=True,
        attempts={"up-primary": 1, "up-secondary": 1},  # the stalled attempt, then its continuation elsewhere
        drive=stalled("up-primary", 40, INTERACTIVE_STREAM_IDLE_TIMEOUT_S),
    ),
    Fault(
        "no [DONE]",
        {"up-primary": [{"stream_fault": "no_end_marker"}]},
        served_by="up-primary",
        bound_s=1,
        stream=True,
        attempts={"up-primary": 1},
    ),
]


@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
async def test_the_caller_gets_the_complete_answer(suite: Suite, fault: Fault) -> None:
    for upstream, steps in fault.script.items():
        suite.provider.script(upstream, steps)
    start = suite.clock.time()
    call = asyncio.ensure_future(streamed(suite) if fault.stream else whole(suite))
    if fault.drive is not None:
        await fault.drive(suite)
    text, model, wrote = await call
    assert text == ANSWER
    assert model == (fault.named or fault.served_by)
    assert wrote == fault.served_by
    assert fault.waited_s <= suite.clock.time() - start <= fault.bound_s
    for upstream, count in fault.attempts.items():
        assert len(suite.attempts(upstream)) == (suite.budget if count == EVERY else count), upstream
    _no_hammering(suite)


@pytest.mark.parametrize("preset", ["content_policy", "content_filter"])
async def test_a_content_filter_400_is_the_refusal_at_once(suite: Suite, preset: str) -> None:
    """OpenAI's 400 ``content_policy_violation`` and Azure's ``content_filter``: PROVIDER_REFUSAL
    (uncorrectable), the OpenAI front's refusal, never retried and not re-rolled on the fallback."""
    suite.provider.script("up-primary", [{"preset": preset, "repeat": 10}])
    start = suite.clock.time()
    with pytest.raises(openai.BadRequestError) as caught:
        await whole(suite)
    assert caught.value.code == "content_policy_violation"
    body: Any = caught.value.body
    assert body["sidecar"]["failure"]["kind"] == "FAILURE_KIND_PROVIDER_REFUSAL"
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert suite.clock.time() == start  # no wait
    assert (len(suite.attempts("up-primary")), len(suite.attempts("up-secondary"))) == (1, 0)
    _no_hammering(suite)


async def test_the_primary_down_for_a_minute_serves_again_within_10_s_of_recovering(suite: Suite) -> None:
    """A call every second of the injected clock; the primary answers 503 for 60 s, then is healthy.
    Every call gets the complete answer, from the fallback while the primary is down."""
    suite.provider.script("up-primary", [{"status": 503, "repeat": 10_000}])
    start = suite.clock.time()
    served: list[tuple[float, str]] = []
    while suite.clock.time() < start + 80:
        if suite.clock.time() >= start + 60 and served[-1][0] < start + 60:
            suite.provider.script("up-primary", [])  # healthy from now on
        asked = suite.clock.time()
        text, model, _ = await whole(suite)
        assert text == ANSWER
        served.append((asked - start, model))
        suite.clock.advance(1)
    assert {m for t, m in served if t < 60} == {"up-secondary"}
    back = min(t for t, m in served if t >= 60 and m == "up-primary")
    assert back - 60 <= 10
    assert {m for t, m in served if t >= back} == {"up-primary"}
    _no_hammering(suite)


async def test_a_malformed_chunk_is_skipped_with_a_warning_and_the_stream_goes_on(suite: Suite) -> None:
    """The fake cuts one event's JSON in half: the sidecar skips it and says so; the rest arrives."""
    suite.provider.script("up-primary", [{"stream_fault": "garbled", "after_deltas": 20}])
    stream = await suite.sdk.chat.completions.create(model="agent", messages=user(PROMPT), stream=True)
    chunks = [c async for c in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    cut = next(i for i, (a, b) in enumerate(zip(text, ANSWER, strict=False)) if a != b)
    lost = len(ANSWER) - len(text)
    assert 0 < lost <= len(" w99")  # one word, and nothing else
    assert ANSWER[:cut] + ANSWER[cut + lost :] == text
    (warning,) = (chunks[-1].model_extra or {})["sidecar"]["warnings"]
    assert "it was skipped and the stream went on" in warning
    assert len(suite.attempts("up-primary")) == 1
    _no_hammering(suite)


async def test_a_cut_stream_whose_fallback_refuses_a_prefill_ends_with_the_real_fault(suite: Suite) -> None:
    """The primary's stream breaks and the primary stays down; the fallback answers the prefilled request
    with a 400. The caller holds the partial text and then reads the stream's interruption, never the 400
    and never a truncated success."""
    unavailable = {"status": 503, "body": {"error": {"message": "down", "type": "server_error"}}, "repeat": 100}
    suite.provider.script("up-primary", [{"stream_fault": "drop", "after_deltas": 40}, unavailable])
    suite.provider.script("up-secondary", [{"refuse_prefill": True}])
    text: list[str] = []
    stream = await suite.sdk.chat.completions.create(model="agent", messages=user(PROMPT), stream=True)

    async def read() -> None:
        async for chunk in stream:
            text.extend(c.delta.content or "" for c in chunk.choices)

    with pytest.raises(openai.APIError) as caught:
        await read()
    held = "".join(text)
    assert held
    assert ANSWER.startswith(held)
    assert held != ANSWER
    body: Any = caught.value.body
    failure = body["sidecar"]["failure"]  # the SDK's APIError.body: the error object of the stream's event
    assert failure["kind"] == "FAILURE_KIND_STREAM_INTERRUPTED"
    assert "refused to continue it (400" in caught.value.message
    assert len(suite.attempts("up-secondary")) == 1
    _no_hammering(suite)
