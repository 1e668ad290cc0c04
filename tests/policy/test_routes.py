"""Routes over real gRPC: two fake providers on two ports (OpenAI and Anthropic), one chain per call.

Every hop is the one model call it is (its own retry budget, the call's deadline); the reply says
which deployment served it and lists every hop, a failure of the whole chain carries every hop.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio
import sidecar_client as sc
from sidecar_client import pb, user
from sidecar_contract.v1 import sidecar_pb2_grpc as pb_grpc

from sidecar.config import ConfigError, parse_config
from sidecar.core.circuit import CircuitState
from sidecar.core.routing import DEPLOYMENT_CIRCUIT
from sidecar.fakes import FakeProvider, ThreadedServer
from sidecar.providers.formats.anthropic_messages import front as anthropic
from sidecar.providers.formats.anthropic_messages.fake_signing import sign_thinking
from sidecar.providers.formats.openai_chat import front as openai
from sidecar.telemetry.testing import install_in_memory
from tests.conftest import Running, Start, until

KEY_A = "sk-test-KEYAAAAAAAAAAAAAAAA1"
KEY_B = "sk-test-KEYBBBBBBBBBBBBBBBB2"
ANT_KEY = "sk-ant-ANTKEY1234567890"
UNCORRECTABLE = "[This error is not correctable - consider an alternative approach]"


def deployment(provider: str, upstream: str, **extra: Any) -> dict[str, Any]:
    return {
        "provider": provider,
        "upstream_model": upstream,
        "context_window": 8000,
        "max_output_tokens": 2048,
        "default_output_tokens": 256,
        **extra,
    }


MODELS: dict[str, Any] = {
    "gpt-a": deployment("oai", "up-gpt-a"),
    "gpt-b": deployment("oai", "up-gpt-b"),
    "claude-a": deployment("ant", "up-claude-a"),
    "key-a": deployment("oai", "shared-gpt"),
    "key-b": deployment("oai-b", "shared-gpt"),
    "small": deployment("oai", "up-small", context_window=400, max_output_tokens=64, default_output_tokens=32),
    "claude-long": deployment("ant", "up-claude-long", context_window=200_000, default_output_tokens=1024),
    "dead": deployment("oai", "up-dead"),
    "claude-then-gpt": {"route": {"fallbacks": ["claude-a", "gpt-a"]}},
    "gpt-then-claude": {"route": {"fallbacks": ["gpt-a", "claude-a"]}},
    "keys": {"route": {"fallbacks": ["key-a", "key-b"]}},
    "balanced": {"route": {"balance": {"gpt-a": 3, "gpt-b": 1}}},
    "long": {"route": {"fallbacks": ["small"], "context_fallback": "claude-long"}},
    "three": {"route": {"fallbacks": ["gpt-a", "gpt-b", "claude-a"]}},
    "guarded": {"route": {"fallbacks": ["dead", "gpt-b"]}},
}


@dataclass
class Routed:
    r: Running
    ant: FakeProvider

    @property
    def oai(self) -> FakeProvider:
        return self.r.provider

    @property
    def client(self) -> sc.AsyncSidecarClient:
        return self.r.client

    def sent(self, upstream: str) -> list[dict[str, Any]]:
        fake = self.ant if "claude" in upstream else self.oai
        return fake.requests(model=upstream)

    def script(self, upstream: str, *steps: dict[str, Any]) -> None:
        (self.ant if "claude" in upstream else self.oai).script(upstream, list(steps))


@pytest.fixture
def anthropic_fake() -> Iterator[ThreadedServer[FakeProvider]]:
    with ThreadedServer(FakeProvider()) as srv:
        yield srv


@pytest_asyncio.fixture
async def routed(
    start_sidecar: Start, provider: ThreadedServer[FakeProvider], anthropic_fake: ThreadedServer[FakeProvider]
) -> AsyncIterator[Callable[..., Awaitable[Routed]]]:
    async def start(**models: Any) -> Routed:
        providers = {
            "oai": {"wire_format": "openai", "base_url": provider.url + "/v1", "api_key": KEY_A},
            "oai-b": {"wire_format": "openai", "base_url": provider.url + "/v1", "api_key": KEY_B},
            "ant": {"wire_format": "anthropic", "base_url": anthropic_fake.url, "api_key": ANT_KEY},
        }
        running = await start_sidecar(providers=providers, models={**MODELS, **models})
        return Routed(running, anthropic_fake.server)

    yield start


def hops(hop_list: Any) -> list[tuple[str, str, int, bool]]:
    return [(h.deployment, pb.FailureKind.Name(h.kind).removeprefix("FAILURE_KIND_"), h.attempts, h.skipped)
            for h in hop_list]  # fmt: skip


# ---------------------------------------------------------------- fallbacks


async def test_overloads_past_the_budget_fall_back_to_a_deployment_of_the_other_wire_format(routed: Any) -> None:
    rt: Routed = await routed()
    rt.script("up-claude-a", {"preset": "overloaded", "repeat": 4})
    history = [
        user("What is the weather in Paris?"),
        pb.Message(
            role=pb.ROLE_ASSISTANT,
            text="Looking.",
            tool_calls=[pb.ToolCall(id="call_1", name="weather", arguments_json='{"city":"Paris"}')],
        ),
        pb.Message(
            role=pb.ROLE_TOOL,
            tool_results=[pb.ToolCallResult(call_id="call_1", content="18 C", is_error=False, name="weather")],
        ),
    ]
    tool = pb.ToolDefinition(name="weather", description="The weather.", parameters_json='{"type":"object"}')
    reply = await rt.client.call_model("claude-then-gpt", history, system="Be brief.", tools=[tool])
    assert reply.served_by == "gpt-a"
    assert hops(reply.hops) == [
        ("claude-a", "UPSTREAM_RETRIES_EXHAUSTED", 4, False),
        ("gpt-a", "UNSPECIFIED", 1, False),
    ]
    assert reply.hops[1].reason == "served"
    assert "still failed after 3 upstream retries" in reply.hops[0].reason
    assert reply.attempts == 5
    assert reply.provider == "oai"
    assert reply.message.text.startswith("Based on the tool result")
    assert len(rt.sent("up-claude-a")) == 4
    # the conversation the OpenAI deployment received is the one the Anthropic one did
    claude = anthropic.parse_request(rt.sent("up-claude-a")[-1]["body"])
    gpt = openai.parse_request(rt.sent("up-gpt-a")[0]["body"])
    assert replace(gpt, model="") == replace(claude, model="")
    assert gpt.system == "Be brief."
    assert gpt.messages[2].tool_results[0].name == "weather"


async def test_quota_on_key_a_is_served_by_key_b(routed: Any) -> None:
    rt: Routed = await routed()
    rt.script("shared-gpt", {"preset": "insufficient_quota"})
    reply = await rt.client.call_model("keys", [user("hello")])
    assert reply.served_by == "key-b"
    assert reply.provider == "oai-b"
    assert hops(reply.hops) == [("key-a", "QUOTA_EXHAUSTED", 1, False), ("key-b", "UNSPECIFIED", 1, False)]
    keys = [r["headers"]["authorization"] for r in rt.sent("shared-gpt")]
    assert keys == [f"Bearer {KEY_A}", f"Bearer {KEY_B}"]
    assert KEY_A not in reply.hops[0].reason


async def test_weighted_balance_holds_within_five_percent_over_2000_calls(routed: Any) -> None:
    rt: Routed = await routed()
    served: Counter[str] = Counter()
    for _ in range(20):
        replies = await asyncio.gather(*(rt.client.call_model("balanced", [user("hi")]) for _ in range(100)))
        served.update(r.served_by for r in replies)
    assert sum(served.values()) == 2000
    assert abs(served["gpt-a"] / 2000 - 0.75) <= 0.05
    assert abs(served["gpt-b"] / 2000 - 0.25) <= 0.05
    assert len(rt.sent("up-gpt-a")) == served["gpt-a"]


async def test_a_balanced_key_that_fails_hands_over_to_the_other(routed: Any) -> None:
    rt: Routed = await routed()
    rt.script("up-gpt-a", {"preset": "invalid_key", "repeat": 50})
    rt.script("up-gpt-b", {"preset": "invalid_key", "repeat": 50})
    err = await _fails(rt, "balanced", sc.UnauthorizedError)
    assert sorted(h.deployment for h in err.hops) == ["gpt-a", "gpt-b"]
    assert {h.kind for h in err.hops} == {pb.FAILURE_KIND_UNAUTHORIZED}


# ---------------------------------------------------------------- the context fallback


async def test_a_conversation_that_does_not_fit_goes_to_the_context_fallback(routed: Any) -> None:
    rt: Routed = await routed()
    reply = await rt.client.call_model("long", [user("long words " * 200)])
    assert reply.served_by == "claude-long"
    assert hops(reply.hops) == [("small", "TOKEN_ESTIMATE_EXCEEDS_LIMIT", 0, False),
                                ("claude-long", "UNSPECIFIED", 1, False)]  # fmt: skip
    assert rt.sent("up-small") == []
    assert "this is the sidecar's estimate" in reply.hops[0].reason.lower()


async def test_the_provider_saying_the_context_is_too_long_goes_to_the_context_fallback(routed: Any) -> None:
    rt: Routed = await routed()
    rt.script("up-small", {"preset": "context_too_long"})
    reply = await rt.client.call_model("long", [user("short")])
    assert reply.served_by == "claude-long"
    assert hops(reply.hops)[0] == ("small", "CONTEXT_OVERFLOW", 1, False)


async def test_without_a_context_fallback_a_conversation_too_long_ends_the_chain(routed: Any) -> None:
    rt: Routed = await routed(tight={"route": {"fallbacks": ["small", "claude-long"]}})
    err = await _fails(rt, "tight", sc.TokenEstimateExceedsLimitError, messages=[user("long words " * 200)])
    assert hops(err.hops) == [("small", "TOKEN_ESTIMATE_EXCEEDS_LIMIT", 0, False)]
    assert "the route has no context_fallback" in err.message
    assert rt.sent("up-claude-long") == []


# ---------------------------------------------------------------- what never moves on


@pytest.mark.parametrize(
    ("step", "error", "kind"),
    [
        (
            {"status": 400, "body": {"error": {"message": "Invalid 'tools[0].name'", "type": "invalid_request_error"}}},
            sc.InvalidInputError,
            "INVALID_INPUT",
        ),
        ({"preset": "refusal"}, sc.ProviderRefusalError, "PROVIDER_REFUSAL"),
    ],
)
async def test_the_callers_mistake_and_a_refusal_never_move_on(
    routed: Any, step: dict[str, Any], error: type[sc.SidecarError], kind: str
) -> None:
    rt: Routed = await routed()
    rt.script("up-gpt-a", step)
    err = await _fails(rt, "gpt-then-claude", error)
    assert hops(err.hops) == [("gpt-a", kind, 1, False)]
    assert f"Route gpt-then-claude stopped at gpt-a: {kind} does not move on to another deployment" in err.message
    assert rt.sent("up-claude-a") == []


async def test_a_request_the_checks_refuse_fails_before_any_hop(routed: Any) -> None:
    rt: Routed = await routed()
    err = await _fails(rt, "long", sc.InvalidInputError, max_output_tokens=100)
    assert err.detail.parameter == "max_output_tokens"
    assert "the smallest maximum output among route long's deployments" in err.message
    assert list(err.hops) == []
    assert rt.sent("up-small") == []


# ---------------------------------------------------------------- one deadline


async def test_a_wait_that_would_pass_the_deadline_moves_on_to_a_deployment_that_answers_at_once(
    routed: Any,
) -> None:
    rt: Routed = await routed()
    rt.script("up-gpt-a", {"preset": "overloaded", "retry_after": "30"})
    reply = await rt.client.call_model("three", [user("hi")], timeout=10)
    assert reply.served_by == "gpt-b"
    assert hops(reply.hops) == [("gpt-a", "JOB_TIMEOUT", 1, False), ("gpt-b", "UNSPECIFIED", 1, False)]
    assert rt.r.clock.sleeps == []  # no wait ran: the 30 s one would have passed the deadline


async def test_the_deadline_cuts_the_chain_short(routed: Any) -> None:
    rt: Routed = await routed()
    rt.script("up-gpt-a", {"preset": "overloaded", "delay_ms": 1500})
    call = asyncio.ensure_future(rt.client.call_model("three", [user("hi")], timeout=10))
    await asyncio.to_thread(rt.oai.wait_for, lambda rs: any(r["model"] == "up-gpt-a" for r in rs))
    rt.r.clock.advance(11)  # the deadline passes while gpt-a's attempt is out
    with pytest.raises(sc.JobTimeoutError) as caught:
        await call
    err = caught.value
    assert err.grpc_code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert hops(err.hops) == [("gpt-a", "JOB_TIMEOUT", 1, False)]
    assert "Route three ran out of time: the caller's deadline passed before gpt-b, claude-a could be tried" in (
        err.message
    )
    assert rt.sent("up-gpt-b") == []
    assert rt.sent("up-claude-a") == []


# ---------------------------------------------------------------- the chain's failure


async def test_a_chain_that_fails_everywhere_tells_every_hop(routed: Any) -> None:
    rt: Routed = await routed()
    rt.script("up-gpt-a", {"preset": "overloaded", "repeat": 4})
    rt.script("up-claude-a", {"preset": "rate_limit", "repeat": 4})
    err = await _fails(rt, "gpt-then-claude", sc.UpstreamRetriesExhaustedError)
    assert err.grpc_code == grpc.StatusCode.UNAVAILABLE
    assert hops(err.hops) == [("gpt-a", "UPSTREAM_RETRIES_EXHAUSTED", 4, False),
                              ("claude-a", "UPSTREAM_RETRIES_EXHAUSTED", 4, False)]  # fmt: skip
    assert err.attempts == 8
    assert err.message.startswith(
        "Route gpt-then-claude found no deployment to serve the call; each one it tried failed. "
        "1) gpt-a, UPSTREAM_RETRIES_EXHAUSTED after 4 attempts: Model gpt-a (oai) still failed after 3 upstream retries"
    )
    assert ". 2) claude-a, UPSTREAM_RETRIES_EXHAUSTED after 4 attempts: Model claude-a (ant)" in err.message
    assert "last signal: rate limit" in err.message
    assert err.failure.explanation == f"{err.message}\n{UNCORRECTABLE}"
    assert err.http is not None
    assert err.http.status_code == 429  # the last hop's answer
    assert err.detail.target == "Model claude-a (ant)"


# ---------------------------------------------------------------- a circuit per deployment


async def test_a_dead_deployment_is_skipped_then_probed_once(routed: Any) -> None:
    rt: Routed = await routed()
    rt.script("up-dead", {"preset": "invalid_key", "repeat": 3})
    for _ in range(3):
        reply = await rt.client.call_model("guarded", [user("hi")])
        assert hops(reply.hops) == [("dead", "UNAUTHORIZED", 1, False), ("gpt-b", "UNSPECIFIED", 1, False)]
    guard = rt.r.app.models.routes.guard("dead")  # type: ignore[union-attr]
    assert guard.state is CircuitState.OPEN
    skipped = await rt.client.call_model("guarded", [user("hi")])
    assert hops(skipped.hops) == [("dead", "CIRCUIT_OPEN", 0, True), ("gpt-b", "UNSPECIFIED", 1, False)]
    assert skipped.hops[0].reason.startswith("the circuit of dead is open for about 4 s after repeated failures")
    assert "opened by HTTP 401 (UNAUTHORIZED" in skipped.hops[0].reason
    assert len(rt.sent("up-dead")) == 3

    rt.r.clock.advance(DEPLOYMENT_CIRCUIT.cooldown_s)
    rt.script("up-dead", {"delay_ms": 1500})
    probing = await rt.client.call_model("guarded", [user("hi")])  # its request probes dead on the side
    assert hops(probing.hops) == [("dead", "CIRCUIT_OPEN", 0, True), ("gpt-b", "UNSPECIFIED", 1, False)]
    assert probing.hops[0].reason.startswith("the circuit of dead is half-open: this call's request probes it")
    await asyncio.to_thread(rt.oai.wait_for, lambda rs: sum(r["model"] == "up-dead" for r in rs) == 4)
    meanwhile = await rt.client.call_model("guarded", [user("hi")])  # the probe is out: this call skips dead
    assert hops(meanwhile.hops) == [("dead", "CIRCUIT_OPEN", 0, True), ("gpt-b", "UNSPECIFIED", 1, False)]
    assert meanwhile.hops[0].reason.startswith("the circuit of dead is being probed by another call")
    await until(lambda: guard.state is CircuitState.CLOSED, "the probe served: dead's circuit closed")
    after = await rt.client.call_model("guarded", [user("hi")])
    assert hops(after.hops) == [("dead", "UNSPECIFIED", 1, False)]
    assert len(rt.sent("up-dead")) == 5


async def _open(rt: Routed, upstream: str, route: str) -> None:
    """Three failed hops on ``upstream`` open its circuit (DEPLOYMENT_CIRCUIT)."""
    rt.script(upstream, {"preset": "invalid_key", "repeat": 3})
    for _ in range(3):
        await rt.client.call_model(route, [user("hi")])


async def test_a_cancelled_probe_is_lost_and_the_circuit_reopens_with_its_cooldown(routed: Any) -> None:
    """The probe is the caller's own hop on a route with no fallback (``alone``): cancelling the call cancels it."""
    rt: Routed = await routed(alone={"route": {"fallbacks": ["dead"]}})
    await _open(rt, "up-dead", "guarded")
    guard = rt.r.app.models.routes.guard("dead")  # type: ignore[union-attr]
    rt.r.clock.advance(DEPLOYMENT_CIRCUIT.cooldown_s)
    rt.script("up-dead", {"fault": "hang"})
    probe = asyncio.ensure_future(rt.client.call_model("alone", [user("hi")]))
    await asyncio.to_thread(rt.oai.wait_for, lambda rs: sum(r["model"] == "up-dead" for r in rs) == 4)
    assert guard.state is CircuitState.HALF_OPEN
    probe.cancel()
    with pytest.raises(asyncio.CancelledError):
        await probe
    for _ in range(200):  # the server sees the cancellation a moment after the client
        if guard.state is CircuitState.OPEN:
            break
        await asyncio.sleep(0.01)
    assert guard.state is CircuitState.OPEN
    assert guard.cooldown == DEPLOYMENT_CIRCUIT.cooldown_s  # lost, not failed: the cooldown is not doubled


async def test_a_route_whose_every_circuit_is_open_fails_circuit_open_without_an_attempt(routed: Any) -> None:
    rt: Routed = await routed(both={"route": {"fallbacks": ["gpt-a", "gpt-b"]}})
    rt.script("up-gpt-a", {"preset": "invalid_key", "repeat": 3})
    rt.script("up-gpt-b", {"preset": "invalid_key", "repeat": 3})
    for _ in range(3):
        with pytest.raises(sc.UnauthorizedError):
            await rt.client.call_model("both", [user("hi")])
    err = await _fails(rt, "both", sc.CircuitOpenError)
    assert hops(err.hops) == [("gpt-a", "CIRCUIT_OPEN", 0, True), ("gpt-b", "CIRCUIT_OPEN", 0, True)]
    assert err.attempts == 0
    assert err.grpc_code == grpc.StatusCode.UNAVAILABLE
    assert "1) gpt-a, skipped (CIRCUIT_OPEN): the circuit of gpt-a is open for about 4 s" in err.message
    assert err.retry_after is not None
    assert err.retry_after == pytest.approx(DEPLOYMENT_CIRCUIT.cooldown_s, abs=1)
    assert len(rt.sent("up-gpt-a")) == 3


async def test_a_429_still_paces_the_deployment_within_its_hop(routed: Any) -> None:
    rt: Routed = await routed()
    rt.script("up-gpt-a", {"preset": "rate_limit", "retry_after": "2", "repeat": 4})
    reply = await rt.client.call_model("gpt-then-claude", [user("hi")])
    assert hops(reply.hops) == [
        ("gpt-a", "UPSTREAM_RETRIES_EXHAUSTED", 4, False),
        ("claude-a", "UNSPECIFIED", 1, False),
    ]
    assert rt.r.clock.sleeps == [2.0, 2.0, 2.0]  # gpt-a's Retry-After, honoured within its hop
    models = rt.r.app.models
    assert models.throttle("gpt-a").throttle >= 0.5  # type: ignore[union-attr]
    assert models.throttle("claude-a").throttle == 0  # type: ignore[union-attr]


async def test_a_partial_circuit_keeps_the_deployment_defaults_so_the_third_failed_hop_opens_it(routed: Any) -> None:
    """``circuit: {cooldown_s: 30}`` once took the tool services' defaults for the rest: 12 failed hops to open."""
    rt: Routed = await routed(
        down=deployment("oai", "up-down"),
        spare=deployment("oai", "up-spare"),
        slow={"route": {"fallbacks": ["down", "spare"], "circuit": {"cooldown_s": 30}}},
    )
    await _open(rt, "up-down", "slow")
    guard = rt.r.app.models.routes.guard("down")  # type: ignore[union-attr]
    assert guard.state is CircuitState.OPEN
    assert guard.cooldown == 30
    skipped = await rt.client.call_model("slow", [user("hi")])
    assert hops(skipped.hops) == [("down", "CIRCUIT_OPEN", 0, True), ("spare", "UNSPECIFIED", 1, False)]
    assert len(rt.sent("up-down")) == 3


async def test_a_primary_down_for_a_minute_is_serving_again_within_8_s_of_recovering(
    start_sidecar: Start, provider: ThreadedServer[FakeProvider]
) -> None:
    """The documented defaults with the interactive preset and two retries (issue 22): a call every second
    of the fake clock, the primary answering 503 for 60 s, then healthy. Every call is served, by the
    fallback while the primary is down; the primary serves again within its circuit's 8 s of recovering."""
    oai = {"wire_format": "openai", "base_url": provider.url + "/v1", "api_key": KEY_A}
    r = await start_sidecar(
        policy={"preset": "interactive", "upstream_retries": 2},
        providers={"oai": oai},
        models={
            "primary": deployment("oai", "up-primary"),
            "backup": deployment("oai", "up-backup"),
            "chat": {"route": {"fallbacks": ["primary", "backup"]}},
        },
    )
    fake, clock = r.provider, r.clock
    fake.script("up-primary", [{"status": 503, "repeat": 10_000}])
    start = clock.time()
    recovered_at: float | None = None
    sent_while_down = 0
    served: list[tuple[float, str]] = []
    while clock.time() < start + 90:
        if recovered_at is None and clock.time() >= start + 60:
            fake.script("up-primary", [])  # healthy from now on
            recovered_at = clock.time()
            sent_while_down = len(fake.requests(model="up-primary"))
        asked = clock.time()
        reply = await r.client.call_model("chat", [user("hi")])
        served.append((asked, reply.served_by))
        clock.advance(max(1.0 - (clock.time() - asked), 0.0))  # the next call a second after this one began
    assert recovered_at is not None
    assert {who for t, who in served if t < recovered_at} == {"backup"}
    back = next(t for t, who in served if t >= recovered_at and who == "primary")
    assert back - recovered_at <= DEPLOYMENT_CIRCUIT.max_cooldown_s + 1.0 <= 10
    assert {who for t, who in served if t > back} == {"primary"}
    assert sent_while_down <= 3 * 3 + 60 / DEPLOYMENT_CIRCUIT.cooldown_s  # 3 hops of 3 attempts open it; a probe is 1


# ---------------------------------------------------------------- ListModels, spans


async def test_list_models_shows_routes_and_their_deployments(routed: Any) -> None:
    rt: Routed = await routed()
    models = {m.id: m for m in await rt.client.list_models()}
    balanced = models["balanced"]
    assert [(d.id, d.role, d.weight) for d in balanced.deployments] == [("gpt-a", "balance", 3.0),
                                                                          ("gpt-b", "balance", 1.0)]  # fmt: skip
    assert balanced.wire_format == "openai"
    long = models["long"]
    assert [(d.id, d.role) for d in long.deployments] == [("small", "fallback"), ("claude-long", "context")]
    assert long.context_window == 200_000
    assert long.max_output_tokens == 64
    assert long.wire_format == ""
    assert list(models["gpt-a"].deployments) == []


async def test_each_hop_is_a_span_under_the_chat_span_with_its_attempts_under_it(routed: Any) -> None:
    otel = install_in_memory()
    otel.clear()
    rt: Routed = await routed()
    rt.script("up-claude-a", {"preset": "overloaded", "repeat": 4})
    await rt.client.call_model("claude-then-gpt", [user("hi")])
    spans = otel.spans()
    chat = next(s for s in spans if s.name == "chat claude-then-gpt")
    kids = sorted((s for s in spans if s.parent and s.parent.span_id == chat.context.span_id),
                  key=lambda s: s.start_time or 0)  # fmt: skip
    assert [s.name for s in kids] == ["route.hop claude-a", "route.hop gpt-a"]
    first, second = kids
    assert dict(first.attributes or {})["error.type"] == "UPSTREAM_RETRIES_EXHAUSTED"
    assert dict(first.attributes or {})["sidecar.hop.role"] == "fallback"
    assert dict(first.attributes or {})["gen_ai.provider.name"] == "anthropic"
    under_first = [s.name for s in spans if s.parent and s.parent.span_id == first.context.span_id]
    assert under_first.count("POST") == 4
    assert under_first.count("sidecar.backoff") == 3
    under_second = [s.name for s in spans if s.parent and s.parent.span_id == second.context.span_id]
    assert under_second == ["POST"]
    assert dict(chat.attributes or {})["sidecar.served_by"] == "gpt-a"
    assert dict(chat.attributes or {})["sidecar.hops"] == 2
    assert dict(chat.attributes or {})["gen_ai.provider.name"] == "multiple"


# ---------------------------------------------------------------- the configuration

CONFIG = """
providers:
  oai: {wire_format: openai, base_url: "http://127.0.0.1:1/v1"}
models:
  a: {provider: oai, upstream_model: a, context_window: 100, max_output_tokens: 10}
  b: {provider: oai, upstream_model: b, context_window: 100, max_output_tokens: 10}
  r: {route: %s}
"""


@pytest.mark.parametrize(
    ("route", "expected"),
    [
        ("{fallbacks: [a, nope]}", "models.r.route.fallbacks[1]: 'nope' is not a catalog model (deployments: a, b)"),
        ("{balance: {a: 0}}", "models.r.route.balance.a: Input should be greater than 0"),
        ("{balance: {a: .inf}}", "models.r.route.balance.a: Input should be a finite number"),
        ("{balance: {a: -1, b: 1}}", "models.r.route.balance.a"),
        ("{fallbacks: [a, a]}", "a: a deployment is named once, in balance or in fallbacks"),
        ("{fallbacks: [r]}", "models.r.route.fallbacks[0]: 'r' is a route; a route's deployments are catalog models"),
        ("{}", "a route needs at least one deployment in balance or fallbacks"),
        ("{fallbacks: [a], move_on: [INVALID_INPUT]}", "INVALID_INPUT never moves on"),
        ("{fallbacks: [a], move_on: [OVERLOAD]}", "'OVERLOAD' is not a failure kind"),
        ("{fallbacks: [a], context_fallback: c}", "models.r.route.context_fallback: 'c' is not a catalog model"),
        ("{fallbacks: [a], colour: red}", "models.r.route.colour: unknown key"),
    ],
)
def test_a_bad_route_is_a_config_error_naming_the_key(route: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(CONFIG % route)
    assert expected in str(caught.value)


def test_a_route_entry_holds_only_its_route() -> None:
    text = CONFIG.replace("r: {route: %s}", "r: {route: {fallbacks: [a]}, provider: oai}")
    with pytest.raises(ConfigError, match=r"models\.r\.provider: unknown key"):
        parse_config(text)


def test_a_routes_section_is_refused() -> None:
    with pytest.raises(ConfigError, match="routes: unknown key; a route is an entry of models"):
        parse_config((CONFIG % "{fallbacks: [a]}") + "routes: {}\n")


def test_two_routes_may_not_give_one_deployment_two_circuits() -> None:
    text = (CONFIG % "{fallbacks: [a], circuit: {cooldown_s: 5}}") + "  s: {route: {fallbacks: [a]}}\n"
    with pytest.raises(ConfigError, match="a has one circuit, but route r gives it another"):
        parse_config(text)


@pytest.mark.parametrize(
    ("circuit", "expected"),
    [
        ("{cooldown_s: 30}", {"cooldown_s": 30.0, "max_cooldown_s": 30.0}),  # at least the cooldown given
        ("{cooldown_s: 2}", {"cooldown_s": 2.0}),
        ("{failures_to_open: 1}", {"failures_to_open": 1}),  # the first failed hop still takes it to its maximum
        ("{cooldown_s: 60, max_cooldown_s: 600}", {"cooldown_s": 60.0, "max_cooldown_s": 600.0}),
        ("{probe_timeout_s: 20}", {"probe_timeout_s": 20.0}),
    ],
)
def test_a_partial_circuit_takes_the_deployment_defaults_for_what_it_leaves_out(
    circuit: str, expected: dict[str, Any]
) -> None:
    config = parse_config(CONFIG % f"{{fallbacks: [a], circuit: {circuit}}}")
    assert config.routes["r"].route.deployment_circuit == DEPLOYMENT_CIRCUIT.model_copy(update=expected)


def test_a_circuit_whose_cooldowns_disagree_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"models\.r\.route\.circuit.*max_cooldown_s \(10\.0\) must not be below"):
        parse_config(CONFIG % "{fallbacks: [a], circuit: {cooldown_s: 30, max_cooldown_s: 10}}")
    with pytest.raises(ConfigError, match=r"models\.r\.route\.circuit\.colour: unknown key"):
        parse_config(CONFIG % "{fallbacks: [a], circuit: {colour: red}}")


def test_a_valid_route_is_kept_apart_from_the_deployments() -> None:
    config = parse_config(CONFIG % "{balance: {a: 2, b: 1}, move_on: [QUOTA_EXHAUSTED, OUTPUT_TRUNCATED]}")
    assert set(config.models) == {"a", "b"}
    assert config.routes["r"].route.balance == {"a": 2.0, "b": 1.0}
    assert config.catalog == ["a", "b", "r"]
    assert {k.name for k in config.routes["r"].route.move_on_kinds} == {"QUOTA_EXHAUSTED", "OUTPUT_TRUNCATED"}


DOC_PROVIDERS = """providers:
  openai-a: {wire_format: openai, base_url: "https://a.example/v1"}
  openai-b: {wire_format: openai, base_url: "https://b.example/v1"}
  anthropic: {wire_format: anthropic, base_url: "https://c.example"}
"""


@pytest.mark.parametrize(("doc", "providers"), [("routing.md", DOC_PROVIDERS), ("configuration.md", "")])
def test_the_documented_routes_load(doc: str, providers: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (Path(__file__).parents[2] / "docs" / doc).read_text()
    found = re.search(r"```yaml\n(.*?)```", text, re.S)
    assert found is not None
    block = found.group(1)
    for name in set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", block)):
        monkeypatch.setenv(name, f"sk-doc-{name}-0123456789abcdef")
    config = parse_config(providers + block, doc)
    assert "assistant" in config.routes


# ---------------------------------------------------------------- helpers


async def _fails(rt: Routed, model: str, expected: type[sc.SidecarError], **kwargs: Any) -> sc.SidecarError:
    messages = kwargs.pop("messages", [user("hello")])
    with pytest.raises(expected) as caught:
        await rt.client.call_model(model, messages, **kwargs)
    return caught.value


# ---------------------------------------------------------------- streams (issue 14, item 5)


def _events_of(events: list[pb.StreamModelEvent], kind: str) -> list[pb.StreamModelEvent]:
    return [e for e in events if e.WhichOneof("event") == kind]


async def test_a_stream_fails_over_before_its_first_delta_with_no_restart(routed: Any) -> None:
    rt: Routed = await routed()
    rt.script("up-claude-a", {"preset": "overloaded", "repeat": 4})
    call = rt.client.stream_model("claude-then-gpt", [user("Hello there")])
    events = [event async for event in call]
    assert _events_of(events, "restart") == []  # nothing had reached the caller: nothing to void
    final = events[-1].final
    assert final.served_by == "gpt-a"
    assert hops(final.hops) == [
        ("claude-a", "UPSTREAM_RETRIES_EXHAUSTED", 4, False),
        ("gpt-a", "UNSPECIFIED", 1, False),
    ]
    assert call.text == final.message.text


async def test_a_stream_cut_after_deltas_fails_over_under_the_restart_policy(routed: Any) -> None:
    rt: Routed = await routed()
    rt.script("up-claude-a", *[{"stream_fault": "drop", "after_deltas": 2}] * 4)  # no restart left on claude-a
    call = rt.client.stream_model("claude-then-gpt", [user("Hello there")], mid_stream=pb.MID_STREAM_POLICY_RESTART)
    events = [event async for event in call]
    causes = [e.restart.cause for e in _events_of(events, "restart")]
    assert causes[-1] == pb.RESTART_CAUSE_FAILOVER  # the caller drops claude-a's text, then gpt-a's comes
    assert "failover to gpt-a" in _events_of(events, "restart")[-1].restart.reason
    final = events[-1].final
    assert final.served_by == "gpt-a"
    assert [h.deployment for h in final.hops] == ["claude-a", "gpt-a"]
    assert final.hops[0].kind == pb.FAILURE_KIND_STREAM_INTERRUPTED
    assert call.text == final.message.text  # what the caller holds is gpt-a's reply alone


async def test_a_stream_cut_after_deltas_under_the_fail_policy_does_not_fail_over(routed: Any) -> None:
    rt: Routed = await routed()
    rt.script("up-claude-a", {"stream_fault": "drop", "after_deltas": 2})
    call = rt.client.stream_model("claude-then-gpt", [user("Hello there")], mid_stream=pb.MID_STREAM_POLICY_FAIL)
    with pytest.raises(sc.StreamInterruptedError) as caught:
        async for _ in call:
            pass
    assert [h.deployment for h in caught.value.hops] == ["claude-a"]
    assert rt.sent("up-gpt-a") == []  # the fallback was never called


# ---------------------------------------------------------------- routes that cross formats (issue 21, item 7)


async def test_a_part_one_deployment_cannot_carry_moves_on_to_one_that_can(routed: Any) -> None:
    """A PDF by URL: the OpenAI deployment's format refuses it before sending (no attempt), the chain
    goes on, and the Anthropic deployment carries it as a document block."""
    rt: Routed = await routed()
    pdf = pb.Message(role=pb.ROLE_USER, parts=[pb.Part(document=pb.DocumentPart(url="https://example.com/a.pdf",
                     title="Report")), pb.Part(text="Sum it up.")])  # fmt: skip
    reply = await rt.client.call_model("gpt-then-claude", [pdf])
    assert reply.served_by == "claude-a"
    assert hops(reply.hops) == [("gpt-a", "INVALID_INPUT", 0, False), ("claude-a", "UNSPECIFIED", 1, False)]
    assert "does not carry parts.document_url" in reply.hops[0].reason
    assert rt.sent("up-gpt-a") == []
    [sent] = rt.sent("up-claude-a")
    document = sent["body"]["messages"][0]["content"][0]
    assert document == {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"},
                        "title": "Report"}  # fmt: skip


async def test_when_no_deployment_carries_a_part_the_chain_fails_naming_it(routed: Any) -> None:
    rt: Routed = await routed()
    request = pb.CallModelRequest(model="gpt-then-claude", messages=[user("hi")], top_k=5, seed=7)
    async with grpc.aio.insecure_channel(rt.r.app.address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await pb_grpc.SidecarStub(channel).CallModel(request)
    err = sc.from_rpc_error(caught.value)
    assert isinstance(err, sc.InvalidInputError)
    assert err.detail.parameter == "seed"  # OpenAI takes the seed and refuses top_k; Anthropic the other way
    assert [h.deployment for h in err.hops] == ["gpt-a", "claude-a"]
    assert rt.sent("up-gpt-a") == []
    assert rt.sent("up-claude-a") == []


async def test_reasoning_another_format_made_is_dropped_from_the_hop_with_a_warning(routed: Any) -> None:
    """Claude's signed thinking goes back byte-identical to an Anthropic deployment; when the route
    falls back to an OpenAI one, only its provider could verify it: dropped, and the reply says so."""
    rt: Routed = await routed()
    thought = pb.ReasoningPart(text="The user greets.", signature=sign_thinking("The user greets."), format="anthropic")
    history = [user("hi"), pb.Message(role=pb.ROLE_ASSISTANT, text="Hello.", reasoning=[thought]), user("and?")]
    rt.script("up-claude-a", *[{"preset": "overloaded"}] * 4)
    reply = await rt.client.call_model("claude-then-gpt", history)
    assert reply.served_by == "gpt-a"
    assert any(w.startswith("reasoning dropped: 1 by the anthropic format; model gpt-a speaks openai") for w in
               reply.warnings)  # fmt: skip
    assert "reasoning" not in str(rt.sent("up-gpt-a")[0]["body"])
    first = rt.sent("up-claude-a")[0]["body"]["messages"][1]["content"][0]
    assert first == {"type": "thinking", "thinking": "The user greets.", "signature": thought.signature}
