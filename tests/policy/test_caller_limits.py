"""Limits per caller at the doors, through a running sidecar with two callers (``server.callers``): the
runaway is refused at once (RESOURCE_EXHAUSTED with RetryInfo on gRPC; 429 with Retry-After in each front's
own error shape), and the other is served untouched in the same window.

The runaway's limit is one call per 10 s, so the window is real time no test waits out: its second call
is refused however slow the machine, and the wait told is the whole 10 s (the bucket's own clock is
tested virtual in tests/unit/test_callers.py).
"""

from __future__ import annotations

import asyncio
import io
import random
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import grpc
import httpx
import openai
import pytest
import pytest_asyncio
import sidecar_client as sc
from google.rpc import error_details_pb2, status_pb2
from rich.console import Console
from sidecar_client import user
from sidecar_contract.v1 import admin_pb2 as apb
from sidecar_contract.v1 import admin_pb2_grpc as apb_grpc

from sidecar.config import Config
from sidecar.core.clock import FakeClock
from sidecar.fakes import FakeProvider, FakeToolBackend, ThreadedServer
from sidecar.server.app import running
from sidecar.server.grpc.spans import ServerSpanInterceptor
from sidecar.status import document, run_status
from sidecar.telemetry import names as n
from sidecar.telemetry.testing import InMemoryTelemetry, install_in_memory
from tests.conftest import Running, base_config
from tests.processes.test_telemetry import attrs, settled

RUNAWAY = "runaway-token-0123456789abcdef"
STEADY = "steady-token-0123456789abcdef"
THRIFTY = "thrifty-token-0123456789abcdef"
WAIT_S = 10.0
"""The runaway's limit: requests_per_second 0.1, one call per 10 s."""
CALLERS = {
    "auth": {
        "tokens": [
            {"token": RUNAWAY, "name": "runaway", "requests_per_second": 1 / WAIT_S},
            {"token": STEADY, "name": "steady", "requests_per_second": 50},
            {"token": THRIFTY, "name": "thrifty", "tokens_per_minute": 1000},
        ]
    },
    "admin": {"read_on_loopback": True},
}
HTTP = {"listen": "127.0.0.1:0"}


@pytest_asyncio.fixture
async def two(
    provider: ThreadedServer[FakeProvider], backend: ThreadedServer[FakeToolBackend], clock: FakeClock
) -> AsyncIterator[Running]:
    """A sidecar with the three callers, its gRPC port traced (the SERVER span names the caller)."""
    cfg = Config.model_validate(base_config(provider.url, backend.url, server=CALLERS, http=HTTP))
    spans = [ServerSpanInterceptor()]
    async with running(cfg, listen="127.0.0.1:0", clock=clock, rng=random.Random(7), interceptors=spans) as app:
        client = sc.AsyncSidecarClient(app.address)
        yield Running(app, client, clock, provider.server, backend.server)
        await client.close()


@pytest_asyncio.fixture
async def clients(two: Running) -> AsyncIterator[dict[str, sc.AsyncSidecarClient]]:
    made = {name: sc.AsyncSidecarClient(two.app.address, token=token) for name, token in _TOKENS.items()}
    yield made
    for client in made.values():
        await client.close()


_TOKENS = {"runaway": RUNAWAY, "steady": STEADY, "thrifty": THRIFTY}


def base(r: Running) -> str:
    assert r.app.http is not None
    return f"http://127.0.0.1:{r.app.http.port}"


async def state(r: Running) -> dict[str, Any]:
    """Each caller's entry of the admin state view (``GET /admin/state``, read on loopback), by name."""
    async with httpx.AsyncClient() as client:
        answer = await client.get(base(r) + "/admin/state")
    return {c["name"]: c for c in answer.json()["callers"]}


@pytest.fixture
def otel() -> InMemoryTelemetry:
    telemetry = install_in_memory()
    telemetry.clear()
    return telemetry


def _retry_info(exc: BaseException | None) -> float:
    assert isinstance(exc, grpc.aio.AioRpcError)
    status = status_pb2.Status.FromString(dict(exc.trailing_metadata() or ())["grpc-status-details-bin"])
    info = error_details_pb2.RetryInfo()
    assert next(d for d in status.details if d.Is(error_details_pb2.RetryInfo.DESCRIPTOR)).Unpack(info)
    return float(info.retry_delay.ToTimedelta().total_seconds())


async def test_grpc_the_runaway_is_refused_with_retry_info_and_the_other_is_served(
    two: Running, clients: dict[str, sc.AsyncSidecarClient], otel: InMemoryTelemetry
) -> None:
    runaway, steady = clients["runaway"], clients["steady"]
    await runaway.call_model("gpt", [user("first")])
    with pytest.raises(sc.UpstreamThrottleError) as caught:
        await runaway.call_model("gpt", [user("second")])
    err = caught.value
    assert err.grpc_code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert err.retry_after == WAIT_S
    assert _retry_info(err.__cause__) == WAIT_S
    assert "Caller runaway is over its limit of 0.1 requests a second" in err.message
    assert RUNAWAY not in err.message
    with pytest.raises(grpc.aio.AioRpcError) as tool_refused:  # a tool call counts against the same limit
        await runaway.execute_tool("search", {"query": "retries"})
    assert tool_refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    with pytest.raises(sc.UpstreamThrottleError):
        async for _ in runaway.stream_model("gpt", [user("third")]):
            pass
    for i in range(5):  # the same window: the other caller untouched
        reply = await steady.call_model("gpt", [user(f"steady {i}")])
        assert reply.message.text == f"You said: steady {i}"
    assert [r["body"]["messages"][-1]["content"] for r in two.provider.requests(model="fake-gpt")] == [
        "first",
        *(f"steady {i}" for i in range(5)),
    ]
    seen = await state(two)
    assert (seen["runaway"]["admitted"], seen["runaway"]["refused"]) == (1, 3)
    assert (seen["steady"]["admitted"], seen["steady"]["refused"]) == (5, 0)
    assert seen["runaway"]["requests_per_second"] == 1 / WAIT_S
    async with grpc.aio.insecure_channel(two.app.address) as ch:  # GetState (read on loopback): its callers field
        typed = await apb_grpc.AdminStub(ch).GetState(apb.GetStateRequest())
    assert [c.name for c in typed.callers] == ["runaway", "steady", "thrifty"]
    assert document(typed)["callers"] == list(seen.values())
    console = Console(record=True, width=200, file=io.StringIO())  # sidecar status over gRPC shows them too
    assert await asyncio.to_thread(run_status, two.app.address, None, console) == 0
    shown = console.export_text()
    assert "callers" in shown
    cells = [[c.strip() for c in line.strip("│ ").split("│")] for line in shown.splitlines() if "│ runaway" in line]
    assert cells == [["runaway", "0.1", "-", "1", "3", "266"]]  # "first": 10 tokens estimated + gpt's 256 budget
    tree = await settled(otel, "sidecar.v1.Sidecar/CallModel")
    servers = [s for s in tree.spans if s.name == "sidecar.v1.Sidecar/CallModel"]
    assert {attrs(s).get(n.CALLER) for s in servers} == {"runaway", "steady"}
    calls = otel.metrics()[n.METRIC_CALLER_CALLS]
    counted = {
        (p.attributes[n.CALLER], p.attributes[n.CALLER_OUTCOME], p.attributes[n.CALLER_LIMIT]): p.value for p in calls
    }
    assert counted == {
        ("runaway", "admitted", "none"): 1,
        ("runaway", "refused", "requests_per_second"): 3,
        ("steady", "admitted", "none"): 5,
    }


async def test_openai_sdk_the_runaway_gets_a_429_with_retry_after_and_the_other_is_served(
    two: Running, otel: InMemoryTelemetry
) -> None:
    url = base(two) + "/v1"
    async with (
        openai.AsyncOpenAI(base_url=url, api_key=RUNAWAY, max_retries=0) as runaway,
        openai.AsyncOpenAI(base_url=url, api_key=STEADY, max_retries=0) as steady,
    ):
        await runaway.chat.completions.create(model="gpt", messages=[{"role": "user", "content": "first"}])
        with pytest.raises(openai.RateLimitError) as caught:
            await runaway.chat.completions.create(model="gpt", messages=[{"role": "user", "content": "second"}])
        with pytest.raises(openai.RateLimitError) as responses:  # the Responses front: its own shape
            await runaway.responses.create(model="gpt", input="third")
        for i in range(3):
            reply = await steady.chat.completions.create(model="gpt", messages=[{"role": "user", "content": f"s{i}"}])
            assert reply.choices[0].message.content == f"You said: s{i}"
    refused = caught.value
    assert refused.status_code == 429
    assert refused.response.headers["retry-after"] == "10"
    assert refused.response.headers["retry-after-ms"] == "10000"
    assert refused.response.headers["x-should-retry"] == "true"
    body = refused.response.json()["error"]
    assert body["type"] == "rate_limit_error"
    assert body["code"] == "rate_limit_exceeded"
    assert "Caller runaway is over its limit" in body["message"]
    assert RUNAWAY not in refused.response.text
    assert responses.value.response.headers["retry-after"] == "10"
    assert responses.value.response.json()["error"]["type"] == "rate_limit_error"
    assert len(two.provider.requests(model="fake-gpt")) == 4  # the runaway's first and the other's three
    spans = [s for s in otel.spans() if s.name == "POST /v1/chat/completions"]
    assert {attrs(s).get(n.CALLER) for s in spans} == {"runaway", "steady"}


async def test_anthropic_sdk_the_runaway_gets_its_own_429_shape(two: Running) -> None:
    async with (
        anthropic.AsyncAnthropic(base_url=base(two), api_key=RUNAWAY, max_retries=0) as runaway,
        anthropic.AsyncAnthropic(base_url=base(two), api_key=STEADY, max_retries=0) as steady,
    ):
        say = [{"role": "user", "content": "hi"}]
        await runaway.messages.create(model="claude", max_tokens=64, messages=say)  # type: ignore[arg-type]
        with pytest.raises(anthropic.RateLimitError) as caught:
            await runaway.messages.create(model="claude", max_tokens=64, messages=say)  # type: ignore[arg-type]
        reply = await steady.messages.create(model="claude", max_tokens=64, messages=say)  # type: ignore[arg-type]
    assert reply.content[0].type == "text"
    refused = caught.value
    assert refused.response.headers["retry-after"] == "10"
    shaped = refused.response.json()
    assert shaped["type"] == "error"
    assert shaped["error"]["type"] == "rate_limit_error"
    assert "Caller runaway" in shaped["error"]["message"]


async def test_mcp_a_tools_call_past_the_limit_is_a_429_json_rpc_error(two: Running, otel: InMemoryTelemetry) -> None:
    async def call(token: str, i: int) -> httpx.Response:
        body = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "search", "arguments": {}}}
        headers = {
            "authorization": f"Bearer {token}",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2025-06-18",
        }
        async with httpx.AsyncClient() as client:
            return await client.post(base(two) + "/mcp", json=body, headers=headers)

    assert (await call(RUNAWAY, 1)).status_code == 200
    refused = await call(RUNAWAY, 2)
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "10"
    answer = refused.json()
    assert answer["id"] == 2
    assert answer["error"]["code"] == -32029
    assert answer["error"]["data"] == {"kind": "UPSTREAM_THROTTLE", "caller": "runaway", "retry_after_s": WAIT_S}
    assert RUNAWAY not in refused.text
    for i in range(3):
        assert (await call(STEADY, 10 + i)).status_code == 200
    spans = [s for s in otel.spans() if s.name == n.SPAN_MCP_SERVER.format(tool="search")]
    assert [attrs(s).get(n.CALLER) for s in spans] == ["runaway", "steady", "steady", "steady"]


async def test_tokens_per_minute_charges_the_estimate_and_the_output_budget(
    two: Running, clients: dict[str, sc.AsyncSidecarClient]
) -> None:
    thrifty = clients["thrifty"]
    await thrifty.call_model("gpt", [user("hi")], max_output_tokens=600)
    charged = (await state(two))["thrifty"]["tokens_charged"]
    assert 600 < charged < 620  # the budget and the input's estimate
    with pytest.raises(sc.UpstreamThrottleError) as caught:
        await thrifty.call_model("gpt", [user("hi")], max_output_tokens=600)
    assert "over its limit of 1000 tokens a minute" in caught.value.message
    assert caught.value.retry_after is not None
    assert 36.0 <= caught.value.retry_after <= 37.2  # ~605 tokens at 1000 a minute
    with pytest.raises(sc.InvalidInputError) as too_big:  # larger than the whole minute: never admitted
        await thrifty.call_model("gpt", [user("hi")], max_output_tokens=2000)
    assert too_big.value.grpc_code == grpc.StatusCode.INVALID_ARGUMENT
    assert "tokens_per_minute (1000)" in too_big.value.message
    assert (await state(two))["thrifty"]["tokens_charged"] == charged  # the refusals charged nothing
    async with anthropic.AsyncAnthropic(base_url=base(two), api_key=THRIFTY, max_retries=0) as client:
        with pytest.raises(anthropic.BadRequestError) as named:
            await client.messages.create(
                model="claude",
                max_tokens=2000,
                messages=[{"role": "user", "content": "hi"}],
            )
    assert "'max_tokens'" in named.value.response.json()["error"]["message"]  # the caller's own parameter
