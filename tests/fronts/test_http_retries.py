"""No retry multiplication: an SDK left at its default retries on top of the sidecar stays bounded.

The sidecar retries beneath the caller within one budget (here 3 retries: 4 attempts). An SDK
left at its defaults (openai, anthropic: ``max_retries=2``) would multiply that to
(1 + 2) × (1 + 3) = 12 upstream attempts for one call. The fronts prevent it where they can
(``x-should-retry: false`` on every failure the sidecar already retried, which both SDKs obey)
and show it where they cannot (an SDK that times out on its own retries regardless): every try
of the SDK is its own SERVER span, with its own ``chat`` span and attempts beneath it, and every
answer says in ``x-sidecar-attempts`` what the sidecar spent.
"""

from __future__ import annotations

import asyncio

import anthropic
import openai
import pytest
from opentelemetry.sdk.trace import ReadableSpan

from sidecar.telemetry import names as n
from sidecar.telemetry.testing import InMemoryTelemetry, install_in_memory
from tests.conftest import Running, Start
from tests.fronts.test_http_openai import HTTP, base_url, user
from tests.processes.test_telemetry import Tree, attrs, settled, tree

BUDGET = 3
SDK_DEFAULT_RETRIES = 2
BOUND = (1 + SDK_DEFAULT_RETRIES) * (1 + BUDGET)
SERVER = "POST /v1/chat/completions"


@pytest.fixture
def otel() -> InMemoryTelemetry:
    telemetry = install_in_memory()
    telemetry.clear()
    return telemetry


def attempts_under(t: Tree, server: ReadableSpan) -> int:
    """The upstream attempts (POST spans) beneath one SERVER span."""
    (chat,) = t.children(server)
    return sum(1 for s in t.children(chat) if s.name == "POST")


async def test_a_default_sdk_does_not_retry_what_the_sidecar_already_retried(
    start_sidecar: Start, otel: InMemoryTelemetry
) -> None:
    r: Running = await start_sidecar(http=HTTP)
    r.provider.script("fake-gpt", [{"preset": "rate_limit", "repeat": 20}])
    async with openai.AsyncOpenAI(base_url=base_url(r), api_key="unused") as sdk:  # max_retries left at 2
        assert sdk.max_retries == SDK_DEFAULT_RETRIES
        with pytest.raises(openai.RateLimitError) as caught:
            await sdk.chat.completions.create(model="gpt", messages=user("hi"))
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert caught.value.response.headers["x-sidecar-attempts"] == str(1 + BUDGET)
    t = await settled(otel, SERVER)
    (server,) = t.named(SERVER)  # one try: the SDK obeyed x-should-retry
    assert attempts_under(t, server) == 1 + BUDGET
    assert len(r.provider.requests()) == 1 + BUDGET <= BOUND


async def test_the_anthropic_sdk_obeys_it_too(start_sidecar: Start) -> None:
    r = await start_sidecar(http=HTTP)
    r.provider.script("fake-claude", [{"preset": "overloaded", "repeat": 20}])
    assert r.app.http is not None
    url = f"http://127.0.0.1:{r.app.http.port}"
    async with anthropic.AsyncAnthropic(base_url=url, api_key="unused") as sdk:
        with pytest.raises(anthropic.OverloadedError) as caught:
            await sdk.messages.create(model="claude", max_tokens=50, messages=user("hi"))
    assert caught.value.response.headers["x-sidecar-attempts"] == str(1 + BUDGET)
    assert len(r.provider.requests()) == 1 + BUDGET


async def test_an_sdk_that_retries_anyway_is_bounded_and_each_try_is_its_own_server_span(
    start_sidecar: Start, otel: InMemoryTelemetry
) -> None:
    r = await start_sidecar(http=HTTP)
    r.provider.script("fake-gpt", [{"fault": "hang", "repeat": 20}])
    # The SDK's own timeout: it gives up on each try and retries whatever the sidecar would say.
    async with openai.AsyncOpenAI(base_url=base_url(r), api_key="unused", timeout=0.5) as sdk:
        with pytest.raises(openai.APITimeoutError):
            await sdk.chat.completions.create(model="gpt", messages=user("hi"))
    for _ in range(400):  # the last try's span ends once the sidecar has seen the SDK leave
        if len(tree(otel).named(SERVER)) == 1 + SDK_DEFAULT_RETRIES:
            break
        await asyncio.sleep(0.005)
    t = tree(otel)
    tries = t.named(SERVER)
    assert len(tries) == 1 + SDK_DEFAULT_RETRIES  # each try a SERVER span of its own ...
    chats = [t.children(s)[0] for s in tries]
    assert [attrs(c)[n.ERROR_TYPE] for c in chats] == ["JOB_CANCELLED"] * len(tries)  # ... its call cancelled
    assert [attrs(s)[n.HTTP_STATUS] for s in tries] == [499] * len(tries)  # when the SDK left
    upstream = sum(attempts_under(t, s) for s in tries)
    assert upstream == len(r.provider.requests()) <= BOUND
