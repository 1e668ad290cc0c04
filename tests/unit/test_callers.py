"""server.callers: each caller's buckets on a virtual clock: refused at once past a limit, nothing charged,
the wait told, the other caller untouched; refilled as virtual time passes.

aiolimiter reads the running event loop's ``time()``, not the sidecar's injected clock, so these tests
run the buckets on an event loop whose ``time()`` is virtual (the loop's public method, overridden in a
subclass): no test waits for real, and no private attribute of the library is read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterator
from typing import TypeVar

import pytest
from pydantic import SecretStr

from sidecar.config import CallerConfig, parse_config
from sidecar.core.conversation import Message, ModelRequest
from sidecar.core.details import InvalidInputDetail, ServiceDetail
from sidecar.core.kinds import FailureKind, Role
from sidecar.core.taxonomy import SidecarFailure
from sidecar.server.callers import Callers, model_charge
from sidecar.server.refusals import CALLER_LIMIT_DETAIL, SIDECAR_SERVICE

T = TypeVar("T")


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose ``time()`` moves only when the test says (``advance``)."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 1000.0

    def time(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def loop() -> Iterator[VirtualTimeLoop]:
    virtual = VirtualTimeLoop()
    try:
        yield virtual
    finally:
        virtual.close()


def run(loop: VirtualTimeLoop, work: Awaitable[T]) -> T:
    async def whole() -> T:
        return await work

    return loop.run_until_complete(whole())


def caller(name: str, rps: float | None = None, tpm: int | None = None) -> CallerConfig:
    return CallerConfig(token=SecretStr(name * 16), name=name, requests_per_second=rps, tokens_per_minute=tpm)


def refusal(failure: SidecarFailure | None) -> ServiceDetail:
    assert failure is not None
    assert failure.kind is FailureKind.UPSTREAM_THROTTLE
    assert isinstance(failure.detail, ServiceDetail)
    assert failure.detail.service == SIDECAR_SERVICE
    assert failure.detail.detail.startswith(CALLER_LIMIT_DETAIL)
    return failure.detail


def test_requests_per_second_refuses_the_call_past_the_burst_at_once_and_refills(loop: VirtualTimeLoop) -> None:
    callers = Callers([caller("runaway", rps=2), caller("quiet", rps=2)])
    assert [run(loop, callers.admit(0, "CallModel")) for _ in range(2)] == [None, None]
    refused = run(loop, callers.admit(0, "CallModel"))
    assert "runaway" in refusal(refused).detail
    assert "requests_per_second 2" in refusal(refused).detail
    assert refused is not None
    assert refused.retry_after == 0.5
    assert "Caller runaway is over its limit of 2 requests a second" in refused.message
    assert run(loop, callers.admit(1, "CallModel")) is None  # the other caller: untouched, same instant
    loop.advance(0.5)
    assert run(loop, callers.admit(0, "CallModel")) is None  # the wait told was enough
    assert run(loop, callers.admit(0, "CallModel")) is not None
    runaway = callers.snapshot()[0]
    assert (runaway["admitted"], runaway["refused"]) == (3, 2)


def test_a_refused_call_charges_nothing(loop: VirtualTimeLoop) -> None:
    callers = Callers([caller("a", rps=1, tpm=1000)])
    assert run(loop, callers.admit(0, "CallModel", 600)) is None
    refused = run(loop, callers.admit(0, "CallModel", 600))  # both buckets short: the requests' is named first
    assert refusal(refused).detail.endswith("requests_per_second 1")
    loop.advance(1.0)  # the request bucket leaked; 600 tokens a minute leak in 36 s, 10 of them leaked
    refused = run(loop, callers.admit(0, "CallModel", 600))
    assert refusal(refused).detail.endswith("tokens_per_minute 1000")
    assert refused is not None
    assert refused.retry_after == 36.0
    assert callers.snapshot()[0]["tokens_charged"] == 600
    loop.advance(35.0)  # 36 s since the first: 600 leaked; the refusals took no request, no token
    assert run(loop, callers.admit(0, "CallModel", 600)) is None
    assert callers.snapshot()[0]["tokens_charged"] == 1200


def test_a_rate_under_one_a_second_still_admits_one_call(loop: VirtualTimeLoop) -> None:
    callers = Callers([caller("slow", rps=0.1)])
    assert run(loop, callers.admit(0, "ExecuteTool")) is None
    refused = run(loop, callers.admit(0, "ExecuteTool"))
    assert refused is not None
    assert refused.retry_after == 10.0
    loop.advance(9.9)
    assert run(loop, callers.admit(0, "ExecuteTool")) is not None
    loop.advance(0.1)
    assert run(loop, callers.admit(0, "ExecuteTool")) is None


def test_a_call_larger_than_the_whole_minute_is_invalid_input_naming_max_output_tokens(loop: VirtualTimeLoop) -> None:
    callers = Callers([caller("a", tpm=1000)])
    failure = run(loop, callers.admit(0, "CallModel", 1001))
    assert failure is not None
    assert failure.kind is FailureKind.INVALID_INPUT
    assert isinstance(failure.detail, InvalidInputDetail)
    assert failure.detail.parameter == "max_output_tokens"
    assert "caller a's whole tokens_per_minute (1000)" in failure.detail.rule
    assert callers.snapshot()[0]["tokens_charged"] == 0


def test_a_caller_without_limits_is_counted_and_unnamed_ones_are_shown_by_place(loop: VirtualTimeLoop) -> None:
    callers = Callers([CallerConfig(token=SecretStr("x" * 16)), caller("b")])
    for _ in range(50):
        assert run(loop, callers.admit(0, "CallModel", 10_000)) is None
    assert run(loop, callers.admit(None, "CallModel")) is None  # no auth: no caller
    assert callers.snapshot()[0] == {
        "name": "tokens[0]",
        "requests_per_second": None,
        "tokens_per_minute": None,
        "admitted": 50,
        "refused": 0,
        "tokens_charged": 500_000,
    }


def test_the_charge_is_the_input_estimate_plus_the_output_budget() -> None:
    config = parse_config(
        "providers: {p: {wire_format: openai, base_url: 'http://127.0.0.1:1'}}\n"
        "models:\n"
        "  small: {provider: p, upstream_model: s, context_window: 8000, max_output_tokens: 500}\n"
        "  big: {provider: p, upstream_model: b, context_window: 8000, max_output_tokens: 4000,\n"
        "        default_output_tokens: 3000}\n"
        "  both: {route: {balance: {small: 1}, fallbacks: [big]}}\n"
    )
    request = ModelRequest(model="small", messages=(Message(role=Role.USER, text="x" * 400),))
    estimate = model_charge(config, request) - 500  # the model's budget: min(max_output_tokens, 1024)
    assert estimate > 100
    assert model_charge(config, ModelRequest(model="small", messages=request.messages, max_output_tokens=7)) == (
        estimate + 7
    )
    assert model_charge(config, ModelRequest(model="both", messages=request.messages)) == estimate + 3000
    assert model_charge(config, ModelRequest(model="nowhere", messages=request.messages)) == estimate
