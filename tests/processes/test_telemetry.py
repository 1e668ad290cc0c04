"""Spans, metrics and their names, pinned with the in-memory exporter and reader.

One in-memory tracer and meter provider serve the whole process (``install_in_memory``): the
global providers can be set only once, and every test clears what the ones before it recorded.
The sidecar runs on real gRPC with the server span interceptor and a fake clock; "the agent" is
a span of the test's own, propagated in gRPC metadata as W3C ``traceparent``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
import pytest_asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import ReadableSpan
from sidecar_client import AsyncSidecarClient, user
from sidecar_contract.v1 import sidecar_pb2 as pb
from sidecar_contract.v1 import sidecar_pb2_grpc as pb_grpc

from sidecar.config import Config
from sidecar.core.clock import FakeClock
from sidecar.core.model_throttle import PAUSED
from sidecar.fakes import FakeProvider, FakeToolBackend, ThreadedServer
from sidecar.server.app import SidecarApp, running
from sidecar.server.grpc.spans import ServerSpanInterceptor
from sidecar.telemetry import names as n
from sidecar.telemetry.testing import InMemoryTelemetry, install_in_memory
from tests.conftest import base_config

KEY = "sk-test-SECRETKEY1234567890"
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"]}  # fmt: skip
CALL_MODEL = "sidecar.v1.Sidecar/CallModel"
EXECUTE_TOOL = "sidecar.v1.Sidecar/ExecuteTool"
CIRCUIT_FAST = {"flaky": {"circuit": {"failures_to_open": 1, "max_throttle": 1.0}}}


@pytest.fixture(scope="session")
def otel() -> InMemoryTelemetry:
    return install_in_memory()


@pytest.fixture(autouse=True)
def _fresh(otel: InMemoryTelemetry) -> None:
    otel.clear()


# ---------------------------------------------------------------- the traced sidecar


@dataclass
class Traced:
    app: SidecarApp
    stub: pb_grpc.SidecarStub
    channel: grpc.aio.Channel
    clock: FakeClock
    provider: FakeProvider
    backend: FakeToolBackend
    otel: InMemoryTelemetry

    def agent(self, name: str = "agent.turn") -> Any:
        """A span of "the agent": the parent every call of the test continues."""
        return self.otel.tracer_provider.get_tracer("agent").start_as_current_span(name)

    async def call_model(self, text: str = "hi", model: str = "gpt", **fields: Any) -> pb.CallModelResponse:
        req = pb.CallModelRequest(model=model, messages=[pb.Message(role=pb.ROLE_USER, text=text)], **fields)
        return await self.stub.CallModel(req, metadata=traceparent())

    async def execute_tool(self, tool: str, arguments: dict[str, Any], call_id: str = "") -> pb.ExecuteToolResponse:
        req = pb.ExecuteToolRequest(tool=tool, arguments_json=json.dumps(arguments), call_id=call_id)
        return await self.stub.ExecuteTool(req, metadata=traceparent())


def traceparent() -> list[tuple[str, str]]:
    """The current context as gRPC metadata, the way an instrumented agent sends it."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return list(carrier.items())


StartTraced = Callable[..., Awaitable[Traced]]


@pytest_asyncio.fixture
async def start_traced(
    provider: ThreadedServer[FakeProvider],
    backend: ThreadedServer[FakeToolBackend],
    clock: FakeClock,
    otel: InMemoryTelemetry,
) -> AsyncIterator[StartTraced]:
    stack: list[tuple[Any, grpc.aio.Channel]] = []

    async def start(**sections: Any) -> Traced:
        cfg = Config.model_validate(base_config(provider.url, backend.url, **sections))
        ctx = running(
            cfg, listen="127.0.0.1:0", clock=clock, rng=random.Random(7), interceptors=[ServerSpanInterceptor()]
        )
        app = await ctx.__aenter__()
        channel = grpc.aio.insecure_channel(app.address)
        stack.append((ctx, channel))
        return Traced(app, pb_grpc.SidecarStub(channel), channel, clock, provider.server, backend.server, otel)

    yield start
    for ctx, channel in reversed(stack):
        await channel.close()
        await ctx.__aexit__(None, None, None)


@pytest_asyncio.fixture
async def traced(start_traced: StartTraced) -> Traced:
    return await start_traced()


# ---------------------------------------------------------------- reading the tree


class Tree:
    """Finished spans as a tree: children in the order they started."""

    def __init__(self, spans: Iterable[ReadableSpan]) -> None:
        self.spans = list(spans)
        self.by_id = {s.context.span_id: s for s in self.spans}

    def named(self, name: str) -> list[ReadableSpan]:
        return sorted((s for s in self.spans if s.name == name), key=lambda s: s.start_time or 0)

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, f"{len(found)} spans named {name!r}: {[s.name for s in self.spans]}"
        return found[0]

    def parent(self, span: ReadableSpan) -> ReadableSpan | None:
        return self.by_id.get(span.parent.span_id) if span.parent else None

    def children(self, span: ReadableSpan) -> list[ReadableSpan]:
        kids = [s for s in self.spans if s.parent is not None and s.parent.span_id == span.context.span_id]
        return sorted(kids, key=lambda s: s.start_time or 0)

    def names(self, span: ReadableSpan) -> list[str]:
        return [s.name for s in self.children(span)]

    def ancestors(self, span: ReadableSpan) -> list[str]:
        out: list[str] = []
        p = self.parent(span)
        while p is not None:
            out.append(p.name)
            p = self.parent(p)
        return out


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def events(span: ReadableSpan) -> list[tuple[str, dict[str, Any]]]:
    return [(e.name, dict(e.attributes or {})) for e in span.events]


def tree(otel: InMemoryTelemetry) -> Tree:
    return Tree(otel.spans())


async def settled(otel: InMemoryTelemetry, name: str) -> Tree:
    """The tree once the span ``name`` has ended.

    A failed RPC's status reaches the client as the handler aborts, a moment before the server
    span around the handler ends: give the server's side of the loop that moment.
    """
    for _ in range(400):
        if any(s.name == name for s in otel.spans()):
            break
        await asyncio.sleep(0.005)
    return tree(otel)


# ---------------------------------------------------------------- the server span and the caller's trace


async def test_the_callers_trace_continues_through_one_server_span(traced: Traced) -> None:
    with traced.agent() as agent:
        await traced.call_model()
    t = tree(traced.otel)
    root = t.one("agent.turn")
    server = t.one(CALL_MODEL)
    chat = t.one("chat gpt")
    attempt = t.one("POST")
    assert {s.context.trace_id for s in t.spans} == {agent.get_span_context().trace_id}
    assert t.parent(server) is root
    assert t.parent(chat) is server
    assert t.parent(attempt) is chat
    assert server.kind is trace.SpanKind.SERVER
    assert attrs(server) == {
        n.RPC_SYSTEM: "grpc",
        n.RPC_SERVICE: "sidecar.v1.Sidecar",
        n.RPC_METHOD: "CallModel",
        n.RPC_GRPC_STATUS: 0,
        n.NETWORK_PEER_ADDRESS: "127.0.0.1",
        n.NETWORK_PEER_PORT: attrs(server)[n.NETWORK_PEER_PORT],
    }
    assert server.status.status_code is trace.StatusCode.UNSET
    assert server.events == ()


async def test_the_python_client_sends_the_agents_trace_by_itself(traced: Traced) -> None:
    async with AsyncSidecarClient(traced.app.address) as client:
        with traced.agent() as agent:
            await client.call_model("gpt", [user("hi")])
            await client.execute_tool("search", {"query": "retries"})
    t = tree(traced.otel)
    root = t.one("agent.turn")
    assert {s.context.trace_id for s in t.spans} == {agent.get_span_context().trace_id}
    assert t.parent(t.one(CALL_MODEL)) is root
    assert t.parent(t.named("sidecar.v1.Sidecar/ExecuteTool")[0]) is root


async def test_a_call_without_traceparent_starts_its_own_trace(traced: Traced) -> None:
    req = pb.CallModelRequest(model="gpt", messages=[pb.Message(role=pb.ROLE_USER, text="hi")])
    await traced.stub.CallModel(req)
    t = tree(traced.otel)
    server = t.one(CALL_MODEL)
    assert server.parent is None
    assert t.parent(t.one("chat gpt")) is server


async def test_health_checks_are_not_traced(traced: Traced) -> None:
    health = health_pb2_grpc.HealthStub(traced.channel)
    reply = await health.Check(health_pb2.HealthCheckRequest(service=""))
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    await traced.stub.ListTools(pb.ListToolsRequest())
    assert [s.name for s in traced.otel.spans()] == ["sidecar.v1.Sidecar/ListTools"]


# ---------------------------------------------------------------- CallModel: chat {model} and its attempts


async def test_the_chat_span_carries_the_genai_attributes(traced: Traced) -> None:
    with traced.agent():
        reply = await traced.call_model(max_output_tokens=100, temperature=0.5)
    t = tree(traced.otel)
    chat = t.one("chat gpt")
    assert chat.kind is trace.SpanKind.CLIENT
    a = attrs(chat)
    assert a[n.GEN_AI_OPERATION] == "chat"
    assert a[n.GEN_AI_PROVIDER] == "openai"
    assert a[n.GEN_AI_REQUEST_MODEL] == "gpt"
    assert a[n.GEN_AI_RESPONSE_MODEL] == "fake-gpt"
    assert a[n.GEN_AI_REQUEST_MAX_TOKENS] == 100
    assert a[n.GEN_AI_REQUEST_TEMPERATURE] == 0.5
    assert a[n.GEN_AI_FINISH_REASONS] == ("stop",)
    assert a[n.GEN_AI_INPUT_TOKENS] == reply.usage.input_tokens > 0
    assert a[n.GEN_AI_OUTPUT_TOKENS] == reply.usage.output_tokens > 0
    assert a[n.GEN_AI_RESPONSE_ID].startswith("chatcmpl-")
    assert a[n.SERVER_ADDRESS] == "127.0.0.1"
    assert a[n.SERVER_PORT] == int(traced.provider.url.rsplit(":", 1)[1])
    assert a[n.ATTEMPTS] == 1
    assert a[n.CORRECTIONS] == 0
    assert n.ERROR_TYPE not in a
    assert n.GEN_AI_INPUT_MESSAGES not in a  # content is opt-in
    assert n.GEN_AI_OUTPUT_MESSAGES not in a
    assert chat.status.status_code is trace.StatusCode.UNSET
    attempt = attrs(t.one("POST"))
    assert attempt[n.HTTP_METHOD] == "POST"
    assert attempt[n.HTTP_STATUS] == 200
    assert attempt[n.URL_FULL] == f"{traced.provider.url}/v1/chat/completions"
    assert attempt[n.ATTEMPT] == 1
    assert attempt[n.OUTPUT_BUDGET] == 100
    assert n.HTTP_RESEND_COUNT not in attempt  # the first send is no resend
    assert n.ERROR_TYPE not in attempt


async def test_every_attempt_of_a_retried_and_corrected_call_is_a_span(traced: Traced) -> None:
    traced.provider.script("fake-gpt", [{"preset": "rate_limit"}, {"preset": "overloaded"}, {"preset": "bad_json"}])
    with traced.agent():
        reply = await traced.call_model(response_schema_json=json.dumps(SCHEMA))
    assert (reply.attempts, reply.corrections) == (4, 1)
    t = tree(traced.otel)
    chat = t.one("chat gpt")
    assert t.names(chat) == [
        "POST",
        n.SPAN_BACKOFF,
        "POST",
        n.SPAN_BACKOFF,
        "POST",
        n.SPAN_THROTTLE_WAIT,  # the 529 left the model throttled: the next send is paced
        "POST",
    ]
    a1, b1, a2, b2, a3, w, a4 = t.children(chat)
    assert [attrs(a).get(n.HTTP_RESEND_COUNT) for a in (a1, a2, a3, a4)] == [None, 1, 2, 3]
    assert [attrs(a)[n.ATTEMPT] for a in (a1, a2, a3, a4)] == [1, 2, 3, 4]
    assert [attrs(a)[n.HTTP_STATUS] for a in (a1, a2, a3, a4)] == [429, 529, 200, 200]
    assert [attrs(a).get(n.ERROR_TYPE) for a in (a1, a2, a3, a4)] == ["429", "529", None, None]
    assert [a.status.status_code for a in (a1, a2, a3, a4)] == [trace.StatusCode.ERROR] * 2 + [
        trace.StatusCode.UNSET
    ] * 2
    assert [attrs(a).get(n.RETRY_SIGNAL) for a in (a1, a2, a3, a4)] == ["rate_limit", "overload", None, None]
    assert [attrs(a).get(n.CORRECTION_REASON) for a in (a1, a2, a3, a4)] == [None, None, "JSON_PARSE", None]
    # the wait that followed each signal, on the attempt and as a span of its own, as long as it said
    assert traced.clock.sleeps[:2] == [attrs(a1)[n.RETRY_WAIT], attrs(a2)[n.RETRY_WAIT]]
    for attempt, backoff, signal in ((a1, b1, "rate_limit"), (a2, b2, "overload")):
        assert attrs(backoff) == {
            n.WAIT_SECONDS: attrs(attempt)[n.RETRY_WAIT],
            n.RETRY_SIGNAL: signal,
            n.ATTEMPT: attrs(attempt)[n.ATTEMPT],
            n.MODEL_ID: "gpt",
        }
        assert (backoff.end_time or 0) - (backoff.start_time or 0) >= 0
    # 2.0 after the 529; the third attempt's success (alone in flight) gave back a quarter of the base
    relieved = 1 / (1 / 3 + 0.25) - 1
    assert attrs(w)[n.THROTTLE] == pytest.approx(relieved, abs=1e-6)
    assert attrs(w)[n.MODEL_ID] == "gpt"
    # the base on the fake clock: one call in flight over the shortest round trip (1 ms), stretched
    assert attrs(w)[n.WAIT_SECONDS] == pytest.approx((1 + relieved) * 0.001)
    assert all(n.RETRY_WAIT not in attrs(a) for a in (a3, a4))
    # the attempts do not overlap, and each ends before the next wait begins
    ordered = t.children(chat)
    for before, after in itertools.pairwise(ordered):
        assert (before.end_time or 0) <= (after.start_time or 0)
    assert events(chat) == [
        (n.EVENT_MODEL_THROTTLE, {n.MODEL_ID: "gpt", n.THROTTLE: 0.5}),
        (n.EVENT_MODEL_THROTTLE, {n.MODEL_ID: "gpt", n.THROTTLE: 2.0}),
        (n.EVENT_MODEL_THROTTLE, {n.MODEL_ID: "gpt", n.THROTTLE: round(relieved, 6)}),
        (n.EVENT_CORRECTION, {n.CORRECTION_REASON: "JSON_PARSE", n.CORRECTIONS: 1}),
        (n.EVENT_MODEL_THROTTLE, {n.MODEL_ID: "gpt", n.THROTTLE: 0.2}),  # the last success: 1 / (7/12 + 1/4) - 1
    ]
    assert attrs(chat)[n.ATTEMPTS] == 4
    assert attrs(chat)[n.CORRECTIONS] == 1


async def test_each_attempt_sends_its_own_traceparent_upstream(traced: Traced) -> None:
    traced.provider.script("fake-gpt", [{"preset": "server_error"}])
    with traced.agent():
        await traced.call_model()
    t = tree(traced.otel)
    sent = [r["headers"]["traceparent"] for r in traced.provider.requests(model="fake-gpt")]
    attempts = t.named("POST")
    assert [h.split("-")[2] for h in sent] == [format(a.context.span_id, "016x") for a in attempts]
    assert {h.split("-")[1] for h in sent} == {format(attempts[0].context.trace_id, "032x")}


async def test_a_retry_after_is_recorded_on_the_attempt_and_pauses_the_model(traced: Traced) -> None:
    traced.provider.script("fake-gpt", [{"preset": "rate_limit", "retry_after": "7"}])
    with traced.agent():
        await traced.call_model()
    t = tree(traced.otel)
    first = t.named("POST")[0]
    assert attrs(first)[n.RETRY_AFTER] == 7.0
    assert attrs(first)[n.RETRY_WAIT] == 7.0
    paused = {n.MODEL_ID: "gpt", "sidecar.pause_s": 7.0, "sidecar.reason": PAUSED}
    assert (n.EVENT_MODEL_PAUSED, paused) in events(t.one("chat gpt"))


async def test_a_failed_call_names_its_kind_on_chat_and_its_code_on_the_server_span(traced: Traced) -> None:
    traced.provider.script("fake-gpt", [{"preset": "rate_limit"}] * 4)
    with traced.agent(), pytest.raises(grpc.aio.AioRpcError) as caught:
        await traced.call_model()
    assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
    t = await settled(traced.otel, CALL_MODEL)
    server, chat = t.one(CALL_MODEL), t.one("chat gpt")
    assert attrs(server)[n.RPC_GRPC_STATUS] == grpc.StatusCode.UNAVAILABLE.value[0]
    assert attrs(server)[n.ERROR_TYPE] == "UNAVAILABLE"
    assert server.status.status_code is trace.StatusCode.ERROR
    assert server.events == ()  # the abort is the RPC's outcome, not an exception to record
    assert attrs(chat)[n.ERROR_TYPE] == "UPSTREAM_RETRIES_EXHAUSTED"
    assert attrs(chat)[n.FAILURE_KIND] == "UPSTREAM_RETRIES_EXHAUSTED"
    assert attrs(chat)[n.CORRECTABLE] is False
    assert attrs(chat)[n.ATTEMPTS] == 4
    assert chat.status.status_code is trace.StatusCode.ERROR
    assert chat.events[-1].name != "exception"
    assert t.names(chat) == ["POST", n.SPAN_BACKOFF] * 3 + ["POST"]
    last = t.named("POST")[-1]
    assert attrs(last)[n.RETRY_SIGNAL] == "rate_limit"
    assert n.RETRY_WAIT not in attrs(last)  # no wait followed: the budget was spent


async def test_a_client_side_failure_is_not_a_server_error(traced: Traced) -> None:
    with traced.agent(), pytest.raises(grpc.aio.AioRpcError) as caught:
        await traced.call_model(model="nope")
    assert caught.value.code() is grpc.StatusCode.NOT_FOUND
    t = await settled(traced.otel, CALL_MODEL)
    server, chat = t.one(CALL_MODEL), t.one("chat nope")
    assert attrs(server)[n.RPC_GRPC_STATUS] == grpc.StatusCode.NOT_FOUND.value[0]
    assert attrs(server)[n.ERROR_TYPE] == "NOT_FOUND"
    assert server.status.status_code is trace.StatusCode.UNSET  # the server-side rule for NOT_FOUND
    assert attrs(chat)[n.ERROR_TYPE] == "MODEL_NOT_FOUND"
    assert attrs(chat)[n.GEN_AI_PROVIDER] == "unknown"
    assert t.children(chat) == []


async def test_a_truncated_reply_is_rerun_with_the_budget_raised(traced: Traced) -> None:
    traced.provider.script("fake-gpt", [{"preset": "truncated"}])
    with traced.agent():
        reply = await traced.call_model()
    assert reply.output_budget_raised
    t = tree(traced.otel)
    chat = t.one("chat gpt")
    first, second = t.named("POST")
    assert attrs(first)[n.GEN_AI_FINISH_REASONS] == ("length",)
    assert (attrs(first)[n.OUTPUT_BUDGET], attrs(second)[n.OUTPUT_BUDGET]) == (256, 2048)
    assert (n.EVENT_OUTPUT_BUDGET_RAISED, {n.OUTPUT_BUDGET: 2048}) in events(chat)
    assert attrs(chat)[n.OUTPUT_BUDGET_RAISED] is True


async def test_two_concurrent_calls_to_a_throttled_model_stay_parented(start_traced: StartTraced) -> None:
    models = base_config("http://x", "http://y")["models"]
    sidecar = await start_traced(models={**models, "gpt": {**models["gpt"], "requests_per_minute": 1}})
    sidecar.provider.script("fake-gpt", [{"preset": "rate_limit"}])
    tracer = sidecar.otel.tracer_provider.get_tracer("agent")

    async def turn(name: str) -> tuple[int, pb.CallModelResponse]:
        with tracer.start_as_current_span(name) as span:
            return span.get_span_context().trace_id, await sidecar.call_model(f"question from {name}")

    (trace_a, reply_a), (trace_b, reply_b) = await asyncio.gather(turn("agent.a"), turn("agent.b"))
    assert trace_a != trace_b
    assert reply_a.attempts + reply_b.attempts == 3  # one of them met the 429
    t = tree(sidecar.otel)
    for agent_name, trace_id in (("agent.a", trace_a), ("agent.b", trace_b)):
        agent = t.one(agent_name)
        server = t.children(agent)
        assert [s.name for s in server] == [CALL_MODEL]
        chats = t.children(server[0])
        assert [c.name for c in chats] == ["chat gpt"]
        for span in t.children(chats[0]):
            assert span.context.trace_id == trace_id
            assert span.name in ("POST", n.SPAN_BACKOFF, n.SPAN_THROTTLE_WAIT)
    # every span of the sidecar is under one of the two agents, in the agent's own trace
    for span in t.spans:
        if span.name.startswith("agent."):
            continue
        top = t.ancestors(span)[-1]
        assert top in ("agent.a", "agent.b")
        assert span.context.trace_id == (trace_a if top == "agent.a" else trace_b)
    waits = t.named(n.SPAN_THROTTLE_WAIT)
    assert waits, "the model's pacing made at least one call wait"
    for w in waits:
        assert t.parent(w) is not None
        assert t.parent(w).name == "chat gpt"  # type: ignore[union-attr]
    # the 429 and the throttle it raised are in the same call's trace
    (limited,) = [a for a in t.named("POST") if attrs(a)[n.HTTP_STATUS] == 429]
    owner = t.parent(limited)
    assert owner is not None
    assert (n.EVENT_MODEL_THROTTLE, {n.MODEL_ID: "gpt", n.THROTTLE: 0.5}) in events(owner)


# ---------------------------------------------------------------- ExecuteTool: execute_tool {tool}


async def test_the_execute_tool_span_carries_the_genai_attributes(traced: Traced) -> None:
    with traced.agent():
        resp = await traced.execute_tool("fetch", {"id": "doc-1"}, call_id="call-7")
    assert resp.WhichOneof("outcome") == "result"
    t = tree(traced.otel)
    server, span = t.one(EXECUTE_TOOL), t.one("execute_tool fetch")
    assert t.parent(span) is server
    assert span.kind is trace.SpanKind.INTERNAL
    assert attrs(span) == {
        n.GEN_AI_OPERATION: "execute_tool",
        n.GEN_AI_TOOL_NAME: "fetch",
        n.GEN_AI_TOOL_CALL_ID: "call-7",
        n.GEN_AI_TOOL_DESCRIPTION: "fetch tool",
        n.GEN_AI_TOOL_TYPE: "function",
        n.SERVICE: "docs",
        n.ATTEMPTS: 1,
    }
    (get,) = t.children(span)
    assert get.name == "GET"
    assert get.kind is trace.SpanKind.CLIENT
    assert attrs(get) == {
        n.HTTP_METHOD: "GET",
        n.URL_FULL: f"{traced.backend.url}/docs/doc-1",
        n.SERVER_ADDRESS: "127.0.0.1",
        n.SERVER_PORT: int(traced.backend.url.rsplit(":", 1)[1]),
        n.ATTEMPT: 1,
        n.SERVICE: "docs",
        n.HTTP_STATUS: 200,
    }


async def test_a_failing_tool_retries_opens_the_circuit_and_the_next_call_is_refused(
    start_traced: StartTraced,
) -> None:
    sidecar = await start_traced(services=CIRCUIT_FAST, policy={"upstream_retries": 3, "tool_retries": 1})
    with sidecar.agent():
        failed = await sidecar.execute_tool("fail_fetch", {"mode": "500"}, call_id="c1")
        refused = await sidecar.execute_tool("fail_fetch", {"mode": "500"}, call_id="c2")
    assert pb.FailureKind.Name(failed.failure.kind) == "FAILURE_KIND_EXTERNAL_SERVICE"
    assert pb.FailureKind.Name(refused.failure.kind) == "FAILURE_KIND_CIRCUIT_OPEN"
    t = tree(sidecar.otel)
    first, second = t.named("execute_tool fail_fetch")
    assert t.names(first) == ["GET", n.SPAN_BACKOFF, "GET"]
    g1, backoff, g2 = t.children(first)
    assert [attrs(g).get(n.HTTP_RESEND_COUNT) for g in (g1, g2)] == [None, 1]
    assert [attrs(g)[n.HTTP_STATUS] for g in (g1, g2)] == [500, 500]
    assert [attrs(g)[n.ERROR_TYPE] for g in (g1, g2)] == ["500", "500"]
    assert [attrs(g)[n.FAILURE_KIND] for g in (g1, g2)] == ["EXTERNAL_SERVICE"] * 2
    assert [attrs(g)[n.RETRY_SIGNAL] for g in (g1, g2)] == ["transient"] * 2
    assert attrs(g1)[n.RETRY_WAIT] == attrs(backoff)[n.WAIT_SECONDS] == sidecar.clock.sleeps[0]
    assert n.RETRY_WAIT not in attrs(g2)
    assert attrs(backoff) == {
        n.WAIT_SECONDS: attrs(g1)[n.RETRY_WAIT],
        n.RETRY_SIGNAL: "transient",
        n.ATTEMPT: 1,
        n.SERVICE: "flaky",
    }
    assert attrs(first)[n.ERROR_TYPE] == "EXTERNAL_SERVICE"
    assert first.status.status_code is trace.StatusCode.ERROR
    assert [name for name, _ in events(first)] == [n.EVENT_SERVICE_THROTTLE, n.EVENT_CIRCUIT_OPENED]
    opened = events(first)[1][1]
    assert opened[n.SERVICE] == "flaky"
    assert opened["sidecar.trigger"] == "HTTP 500 (internal server error)"
    assert t.children(second) == []  # refused before any attempt
    assert attrs(second)[n.ERROR_TYPE] == "CIRCUIT_OPEN"
    assert attrs(second)[n.ATTEMPTS] == 0
    assert [name for name, _ in events(second)] == [n.EVENT_CIRCUIT_REFUSED]
    assert events(second)[0][1][n.SERVICE] == "flaky"
    # a tool's failure is a result: the RPC itself succeeded
    assert [attrs(s)[n.RPC_GRPC_STATUS] for s in t.named(EXECUTE_TOOL)] == [0, 0]


async def test_the_circuits_probe_shows_half_open_then_closed(start_traced: StartTraced) -> None:
    sidecar = await start_traced(services=CIRCUIT_FAST, policy={"upstream_retries": 3, "tool_retries": 1})
    with sidecar.agent():
        await sidecar.execute_tool("fail_fetch", {"mode": "500"})
        sidecar.clock.advance(31)  # past the 30 s cooldown: the next call is the probe
        probe = await sidecar.execute_tool("fail_fetch", {"mode": "empty200"})
    assert probe.WhichOneof("outcome") == "result"
    t = tree(sidecar.otel)
    _, probing = t.named("execute_tool fail_fetch")
    assert [name for name, _ in events(probing)] == [n.EVENT_CIRCUIT_HALF_OPEN, n.EVENT_CIRCUIT_CLOSED]
    assert all(e[n.SERVICE] == "flaky" for _, e in events(probing))
    assert t.names(probing) == ["GET"]


async def test_a_throttled_tool_service_waits_in_a_span_of_its_own(start_traced: StartTraced) -> None:
    sidecar = await start_traced(services={"docs": {"rate": 1, "per_s": 10}})
    with sidecar.agent():
        await sidecar.execute_tool("fetch", {"id": "doc-1"})
        await sidecar.execute_tool("fetch", {"id": "doc-2"})
    t = tree(sidecar.otel)
    first, second = t.named("execute_tool fetch")
    assert t.names(first) == ["GET"]
    assert t.names(second) == [n.SPAN_THROTTLE_WAIT, "GET"]
    wait = t.children(second)[0]
    assert attrs(wait) == {n.WAIT_SECONDS: pytest.approx(10.0), n.SERVICE: "docs", n.THROTTLE: 0.0}


# ---------------------------------------------------------------- content, secrets


async def test_message_content_is_recorded_only_when_opted_in(start_traced: StartTraced) -> None:
    quiet = await start_traced()
    with quiet.agent():
        await quiet.call_model("what is the weather")
        await quiet.execute_tool("fetch", {"id": "doc-1"})
    for span in quiet.otel.spans():
        for key in (n.GEN_AI_INPUT_MESSAGES, n.GEN_AI_OUTPUT_MESSAGES, n.GEN_AI_TOOL_ARGUMENTS, n.GEN_AI_TOOL_RESULT):
            assert key not in attrs(span)
    quiet.otel.clear()
    loud = await start_traced(telemetry={"record_content": True})
    with loud.agent():
        await loud.call_model("what is the weather")
        await loud.execute_tool("fetch", {"id": "doc-1"})
    t = tree(loud.otel)
    chat = attrs(t.one("chat gpt"))
    assert json.loads(chat[n.GEN_AI_INPUT_MESSAGES]) == [{"role": "user", "content": "what is the weather"}]
    assert json.loads(chat[n.GEN_AI_OUTPUT_MESSAGES]) == [
        {"role": "assistant", "content": "You said: what is the weather"}
    ]
    tool = attrs(t.one("execute_tool fetch"))
    assert json.loads(tool[n.GEN_AI_TOOL_ARGUMENTS]) == {"id": "doc-1"}
    assert "doc-1" in tool[n.GEN_AI_TOOL_RESULT]


def _everything_recorded(spans: Sequence[ReadableSpan]) -> str:
    parts: list[str] = []
    for s in spans:
        parts.append(s.name)
        parts.extend(f"{k}={v}" for k, v in attrs(s).items())
        for e in s.events:
            parts.append(e.name)
            parts.extend(f"{k}={v}" for k, v in (e.attributes or {}).items())
        parts.append(str(s.status.description))
    return "\n".join(parts)


async def test_the_api_key_is_in_no_span_attribute_event_or_log_line(
    start_traced: StartTraced, caplog: pytest.LogCaptureFixture
) -> None:
    from sidecar.telemetry.logs import JsonFormatter

    sidecar = await start_traced(telemetry={"record_content": True})
    echo = f"Incorrect API key provided: {KEY}. You can find your API key at https://example.com."
    sidecar.provider.script(
        "fake-gpt",
        [
            {"preset": "server_error", "message": f"upstream said: key={KEY}"},
            {"preset": "invalid_key", "message": echo},
        ],
    )
    formatter = JsonFormatter(Config.model_validate(base_config("http://x", "http://y")).secrets)
    with caplog.at_level("DEBUG"), sidecar.agent():
        with pytest.raises(grpc.aio.AioRpcError):
            await sidecar.call_model(f"my key is {KEY}")
        await sidecar.call_model(f"my key is {KEY}")
        await sidecar.execute_tool("note", {"text": f"remember {KEY}"})
        await sidecar.execute_tool("fail_fetch", {"mode": "401"})
    recorded = _everything_recorded(sidecar.otel.spans())
    assert "UNAUTHORIZED" in recorded  # the failing call is there ...
    assert KEY not in recorded  # ... and the key is not
    assert "SECRETKEY" not in recorded
    lines = [formatter.format(r) for r in caplog.records]
    assert any("UNAUTHORIZED" in line for line in lines)
    for line in lines:
        assert "SECRETKEY" not in line
    for record in caplog.records:  # masked where the text is made, not only when the line is written
        assert "SECRETKEY" not in record.getMessage()


# ---------------------------------------------------------------- metrics


def _points(otel: InMemoryTelemetry) -> dict[str, list[Any]]:
    return otel.metrics()


def _find(points: list[Any], **want: Any) -> list[Any]:
    return [p for p in points if all(dict(p.attributes).get(k) == v for k, v in want.items())]


async def test_metrics_names_attributes_and_buckets(start_traced: StartTraced) -> None:
    sidecar = await start_traced(services=CIRCUIT_FAST, policy={"upstream_retries": 3, "tool_retries": 1})
    sidecar.provider.script("fake-gpt", [{"preset": "rate_limit"}, {"preset": "server_error"}])
    reply = await sidecar.call_model()
    await sidecar.execute_tool("fail_fetch", {"mode": "500"})
    with pytest.raises(grpc.aio.AioRpcError):
        await sidecar.call_model(model="nope")
    points = _points(sidecar.otel)
    assert set(points) >= {
        n.METRIC_DURATION,
        n.METRIC_TOKENS,
        n.METRIC_RETRIES,
        n.METRIC_WAIT,
        n.METRIC_FAILURES,
        n.METRIC_MODEL_THROTTLE,
        n.METRIC_SERVICE_THROTTLE,
        n.METRIC_CIRCUIT_STATE,
    }
    (chat,) = _find(points[n.METRIC_DURATION], **{n.GEN_AI_OPERATION: "chat", n.GEN_AI_REQUEST_MODEL: "gpt"})
    assert tuple(chat.explicit_bounds) == n.DURATION_BUCKETS
    assert chat.count == 1
    assert dict(chat.attributes) == {n.GEN_AI_OPERATION: "chat", n.GEN_AI_PROVIDER: "openai",
                                     n.GEN_AI_REQUEST_MODEL: "gpt"}  # fmt: skip
    (unknown,) = _find(points[n.METRIC_DURATION], **{n.ERROR_TYPE: "MODEL_NOT_FOUND"})
    assert dict(unknown.attributes)[n.GEN_AI_REQUEST_MODEL] == "_OTHER"  # a caller cannot add series at will
    (tool,) = _find(points[n.METRIC_DURATION], **{n.GEN_AI_OPERATION: "execute_tool"})
    assert dict(tool.attributes) == {n.GEN_AI_OPERATION: "execute_tool", n.GEN_AI_TOOL_NAME: "fail_fetch",
                                     n.ERROR_TYPE: "EXTERNAL_SERVICE"}  # fmt: skip
    tokens = {dict(p.attributes)[n.GEN_AI_TOKEN_TYPE]: p for p in points[n.METRIC_TOKENS]}
    assert set(tokens) == {"input", "output"}
    assert tuple(tokens["input"].explicit_bounds) == tuple(float(b) for b in n.TOKEN_BUCKETS)
    assert tokens["input"].sum == reply.total_usage.input_tokens
    assert tokens["output"].sum == reply.total_usage.output_tokens
    assert dict(tokens["input"].attributes)[n.GEN_AI_PROVIDER] == "openai"
    retries = {(dict(p.attributes).get(n.MODEL_ID), dict(p.attributes).get(n.SERVICE),
                dict(p.attributes)[n.RETRY_SIGNAL]): p.value for p in points[n.METRIC_RETRIES]}  # fmt: skip
    assert retries == {("gpt", None, "rate_limit"): 1, ("gpt", None, "transient"): 1, (None, "flaky", "transient"): 1}
    waits = {(dict(p.attributes)[n.WAIT_REASON], dict(p.attributes).get(n.MODEL_ID, dict(p.attributes).get(n.SERVICE))):
             p for p in points[n.METRIC_WAIT]}  # fmt: skip
    assert waits[("backoff", "gpt")].count == 2
    assert waits[("backoff", "gpt")].sum == pytest.approx(sum(sidecar.clock.sleeps[:2]))
    assert waits[("backoff", "flaky")].count == 1
    failures = {(dict(p.attributes)[n.FAILURE_KIND], dict(p.attributes)[n.GEN_AI_OPERATION]): p.value
                for p in points[n.METRIC_FAILURES]}  # fmt: skip
    assert failures == {("EXTERNAL_SERVICE", "execute_tool"): 1, ("MODEL_NOT_FOUND", "chat"): 1}
    model_throttle = {dict(p.attributes)[n.MODEL_ID]: p.value for p in points[n.METRIC_MODEL_THROTTLE]}
    assert model_throttle["gpt"] == pytest.approx(1 / (1 / 1.5 + 0.25) - 1, abs=1e-6)  # 0.5, then a success
    assert model_throttle["claude"] == 0.0
    service_throttle = {dict(p.attributes)[n.SERVICE]: p.value for p in points[n.METRIC_SERVICE_THROTTLE]}
    assert service_throttle["flaky"] == 1.0
    circuit = {dict(p.attributes)[n.SERVICE]: p.value for p in points[n.METRIC_CIRCUIT_STATE]}
    assert circuit["flaky"] == 2  # open


async def test_a_stopped_sidecar_stops_reporting_its_gauges(start_traced: StartTraced) -> None:
    sidecar = await start_traced(models={"solo": {"provider": "oai", "upstream_model": "fake-solo",
                                                  "context_window": 8000, "max_output_tokens": 512}})  # fmt: skip
    assert {dict(p.attributes)[n.MODEL_ID] for p in _points(sidecar.otel)[n.METRIC_MODEL_THROTTLE]} >= {"solo"}
    await sidecar.app.stop(grace=0)
    gauges = _points(sidecar.otel).get(n.METRIC_MODEL_THROTTLE, [])
    assert "solo" not in {dict(p.attributes)[n.MODEL_ID] for p in gauges}


# ---------------------------------------------------------------- setup from the standard variables

_PROBE = textwrap.dedent(
    """
    import json, sys
    from opentelemetry import metrics, trace
    from sidecar.server.grpc.spans import span_interceptors
    from sidecar.telemetry.setup import setup_telemetry
    t = setup_telemetry(int(sys.argv[1]) if len(sys.argv) > 1 else None)
    tp, mp = trace.get_tracer_provider(), metrics.get_meter_provider()
    out = {
        "enabled": t.enabled, "tracing": t.tracing, "describe": t.describe(),
        "interceptors": [type(i).__name__ for i in span_interceptors(t)],
        "tracer_provider": type(tp).__name__, "meter_provider": type(mp).__name__,
        "recording": trace.get_tracer("x").start_span("s").is_recording(),
    }
    from sidecar.telemetry.tracing import Tracer, sdk_installed
    if sdk_installed():
        from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
        out["sdk_tracer_provider"] = isinstance(tp, SdkTracerProvider)
    with Tracer("x").start_as_current_span("s") as span:
        out["sidecar_span"] = type(span).__name__
        out["sidecar_span_valid"] = span.get_span_context().is_valid
    out["sdk_installed"] = sdk_installed()
    if getattr(tp, "exporter", None) is not None:  # the lean provider: one exporter behind its sink
        out["sampler"] = tp.sampler.get_description()
        out["resource"] = dict(tp.resource.attributes)
        out["processors"] = [type(tp.exporter).__name__]
        out["masked"] = [tp.exporter.masked]
        out["exporters"] = [tp.exporter.protocol]
        out["schedule_delay"] = [tp.exporter.schedule_delay_millis]
    elif hasattr(tp, "sampler"):
        out["sampler"] = tp.sampler.get_description()
        out["resource"] = dict(tp.resource.attributes)
        procs = tp._active_span_processor._span_processors
        out["processors"] = [type(p).__name__ for p in procs]
        offloaded = [type(p).__name__ == "OffloadSpanProcessor" for p in procs]
        out["masked"] = [
            p.masked if off else type(p.span_exporter).__name__ == "MaskingSpanExporter"
            for p, off in zip(procs, offloaded)
        ]
        out["exporters"] = [
            p.exporter_module if off else type(p.span_exporter.inner).__module__ for p, off in zip(procs, offloaded)
        ]
        out["schedule_delay"] = [
            p.schedule_delay_millis if off else getattr(p, "_batch_processor", p)._schedule_delay
            for p, off in zip(procs, offloaded)
        ]
    if hasattr(mp, "_metric_readers"):
        out["readers"] = [type(r).__name__ for r in mp._metric_readers]
    if t.prometheus:
        from sidecar.telemetry.metrics import Metrics
        import urllib.request
        Metrics().operation("chat", "gpt", 0.03, None, "openai")
        url = "http://%s:%d/metrics" % t.prometheus
        out["scrape"] = urllib.request.urlopen(url, timeout=5).read().decode()
    t.shutdown()
    print(json.dumps(out))
    """
)


def _probe(env: dict[str, str], *args: str) -> dict[str, Any]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_with_nothing_set_no_sdk_is_installed() -> None:
    got = _probe({})
    assert got["enabled"] is False
    assert got["interceptors"] == []
    assert got["tracer_provider"] == "ProxyTracerProvider"
    assert got["meter_provider"] == "_ProxyMeterProvider"
    assert got["recording"] is False
    assert got["sdk_installed"] is False
    assert got["sidecar_span_valid"] is False  # the shared no-op: no span object, no context attached
    assert got["describe"].startswith("off")


def test_sdk_disabled_wins_over_an_endpoint() -> None:
    got = _probe({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert got["enabled"] is False
    assert got["tracer_provider"] == "ProxyTracerProvider"


def test_the_standard_variables_configure_the_sdk() -> None:
    got = _probe(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_SERVICE_NAME": "my-agent-sidecar",
            "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=test,service.name=ignored",
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "0.25",
            "OTEL_BSP_SCHEDULE_DELAY": "123",
            "OTEL_METRICS_EXPORTER": "none",
            "SIDECAR_TRACES_OFFLOAD": "true",
        }
    )
    assert got["enabled"] is True
    assert got["interceptors"] == ["ServerSpanInterceptor"]
    assert got["tracer_provider"] == "LeanTracerProvider"
    assert got["sdk_installed"] is True
    assert got["sidecar_span_valid"] is True  # a real span (recorded or sampled out: the ratio is 0.25)
    assert got["meter_provider"] == "_ProxyMeterProvider"  # OTEL_METRICS_EXPORTER=none: metrics stay no-op
    assert "TraceIdRatioBased{0.25}" in got["sampler"]
    assert got["resource"]["service.name"] == "my-agent-sidecar"
    assert got["resource"]["deployment.environment.name"] == "test"
    assert got["processors"] == ["OffloadSpanProcessor"]  # masked, encoded and exported by a child process
    assert got["masked"] == [True]  # every span is masked as the masking exporter masks
    assert got["exporters"] == ["http/protobuf"]
    assert got["schedule_delay"] == [123]
    assert "traces over OTLP http/protobuf to http://127.0.0.1:9" in got["describe"]


def test_spans_are_encoded_and_sent_in_process_on_request() -> None:
    got = _probe(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_BSP_SCHEDULE_DELAY": "123",
            "OTEL_METRICS_EXPORTER": "none",
            "SIDECAR_TRACES_OFFLOAD": "false",
        }
    )
    assert got["tracer_provider"] == "LeanTracerProvider"
    assert got["processors"] == ["SpanBatcher"]
    assert got["masked"] == [True]
    assert got["exporters"] == ["http/protobuf"]
    assert got["schedule_delay"] == [123]


def test_the_sdks_exporter_on_request() -> None:
    got = _probe(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_BSP_SCHEDULE_DELAY": "123",
            "OTEL_METRICS_EXPORTER": "none",
            "SIDECAR_TRACES_SDK": "true",
        }
    )
    assert got["tracer_provider"] == "QuietTracerProvider"  # the SDK's, its quiet scopes' tracers no-ops
    assert got["sdk_tracer_provider"] is True
    assert got["processors"] == ["BatchSpanProcessor"]
    assert got["masked"] == [True]
    assert got["exporters"] == ["opentelemetry.exporter.otlp.proto.http.trace_exporter"]
    assert got["schedule_delay"] == [0.123] or got["schedule_delay"] == [123]


def test_grpc_is_the_default_protocol_and_the_service_is_named_sidecar() -> None:
    got = _probe({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert got["processors"] == ["OffloadSpanProcessor"]  # the default: a child process encodes and sends
    assert got["exporters"] == ["grpc"]
    assert got["resource"]["service.name"] == "sidecar"
    assert got["readers"] == ["PeriodicExportingMetricReader"]
    assert got["sampler"].startswith("ParentBased{root:AlwaysOnSampler")


def test_the_prometheus_endpoint_serves_the_metrics(unused_tcp_port: int) -> None:
    got = _probe({}, str(unused_tcp_port))
    assert got["enabled"] is True
    assert got["tracing"] is False
    assert got["tracer_provider"] == "ProxyTracerProvider"  # metrics only: no spans recorded
    assert got["readers"] == ["PrometheusMetricReader"]
    scrape = got["scrape"]
    assert "gen_ai_client_operation_duration_seconds_bucket" in scrape
    assert 'le="0.04"' in scrape
    assert 'gen_ai_request_model="gpt"' in scrape


async def test_a_callers_long_model_and_tool_names_are_bounded_in_spans(traced: Traced) -> None:
    long = "m" * 5000
    with traced.agent(), pytest.raises(grpc.aio.AioRpcError):
        await traced.call_model(model=long)
    await traced.execute_tool("t" * 5000, {})
    spans = traced.otel.spans()
    chat = next(s for s in spans if s.name.startswith("chat "))
    tool = next(s for s in spans if s.name.startswith("execute_tool "))
    assert len(chat.name) <= len("chat ") + 128
    assert len(attrs(chat)[n.GEN_AI_REQUEST_MODEL]) <= 128
    assert len(tool.name) <= len("execute_tool ") + 128
    assert len(attrs(tool)[n.GEN_AI_TOOL_NAME]) <= 128


def test_recorded_content_shows_parts_by_size_and_reasoning_by_its_text_never_the_bytes() -> None:
    from sidecar.core.conversation import DocumentPart, ImagePart, Message, ModelRequest, ReasoningPart, TextPart
    from sidecar.core.kinds import Role
    from sidecar.telemetry.observer import _messages_json

    image = ImagePart("image/png", b"\x89PNG" + b"x" * 996)
    request = ModelRequest(
        "m",
        (
            Message(Role.USER, parts=(TextPart("look"), image, DocumentPart(url="https://x/a.pdf", title="A"))),
            Message(
                Role.ASSISTANT, "ok", reasoning=(ReasoningPart("why", "sig"), ReasoningPart(redacted_data="opaque"))
            ),
        ),
    )
    shown = _messages_json(request)
    assert json.loads(shown) == [
        {"role": "user", "content": [
            {"type": "text", "content": "look"},
            {"type": "image", "media_type": "image/png", "bytes": 1000},
            {"type": "document", "title": "A", "url": "https://x/a.pdf"},
        ]},
        {"role": "assistant", "content": "ok", "reasoning": ["why", "[redacted]"]},
    ]  # fmt: skip
    assert "sig" not in shown
    assert "zz" not in shown


class _HeaderPropagator(propagate.textmap.TextMapPropagator):
    """A propagator that reads a field of its own (as B3 or Jaeger's do)."""

    def extract(self, carrier: Any, context: Any = None, getter: Any = propagate.textmap.default_getter) -> Any:
        from opentelemetry import baggage
        from opentelemetry import context as otel_context

        value = getter.get(carrier, "x-custom-ctx")
        return baggage.set_baggage("custom", value[0], context) if value else (context or otel_context.get_current())

    def inject(self, carrier: Any, context: Any = None, setter: Any = propagate.textmap.default_setter) -> None:
        return None

    @property
    def fields(self) -> set[str]:
        return {"x-custom-ctx"}


def test_a_carrier_without_w3c_fields_propagates_nothing_and_others_always_extract() -> None:
    from opentelemetry import baggage

    from sidecar.telemetry.tracing import propagated

    assert propagated({"content-type": "application/grpc", "user-agent": "x"}) is None  # the W3C default: nothing
    parent = propagated({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
    assert parent is not None
    assert trace.get_current_span(parent).get_span_context().trace_id == 0x0AF7651916CD43DD8448EB211C80319C
    carried = propagated({"baggage": "tenant=a"})
    assert carried is not None
    assert baggage.get_baggage("tenant", carried) == "a"
    before = propagate.get_global_textmap()
    propagate.set_global_textmap(_HeaderPropagator())
    try:  # a propagator of other fields is always asked, never second-guessed
        extracted = propagated({"x-custom-ctx": "v"})
        assert extracted is not None
        assert baggage.get_baggage("custom", extracted) == "v"
        assert propagated({"content-type": "application/grpc"}) is not None
    finally:
        propagate.set_global_textmap(before)
    assert propagated({"content-type": "application/grpc"}) is None


def test_grpc_metadata_propagates_as_its_string_pairs_and_binary_values_carry_nothing() -> None:
    from sidecar.telemetry.tracing import propagated_metadata

    parent_id = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    assert propagated_metadata(None) is None
    assert propagated_metadata((("user-agent", "grpc-go"), ("x-blob-bin", b"\x00"))) is None
    parent = propagated_metadata((("x-blob-bin", b"\x00"), ("traceparent", parent_id)))
    assert parent is not None
    assert trace.get_current_span(parent).get_span_context().span_id == 0xB7AD6B7169203331
    before = propagate.get_global_textmap()
    propagate.set_global_textmap(_HeaderPropagator())
    try:  # another propagator reads other keys: it is always asked
        extracted = propagated_metadata((("x-custom-ctx", "v"),))
        assert extracted is not None
        assert baggage_of(extracted, "custom") == "v"
    finally:
        propagate.set_global_textmap(before)


def baggage_of(context: Any, key: str) -> object:
    from opentelemetry import baggage

    return baggage.get_baggage(key, context)


def test_the_server_span_parses_each_peer_once_and_its_memo_is_bounded() -> None:
    from sidecar.server.grpc import spans

    interceptor = spans.ServerSpanInterceptor()
    first = interceptor._peer("ipv4:127.0.0.1:5000")
    assert first == {n.NETWORK_PEER_ADDRESS: "127.0.0.1", n.NETWORK_PEER_PORT: 5000}
    assert interceptor._peer("ipv4:127.0.0.1:5000") is first
    assert interceptor._peer("ipv6:[::1]:6000") == {n.NETWORK_PEER_ADDRESS: "::1", n.NETWORK_PEER_PORT: 6000}
    assert interceptor._peer("unix:/tmp/s.sock") == {}
    for port in range(spans.MAX_PEERS + 10):
        interceptor._peer(f"ipv4:10.0.0.1:{port}")
    assert len(interceptor._peers) <= spans.MAX_PEERS


def test_injected_headers_are_what_the_global_propagators_inject() -> None:
    from opentelemetry import baggage
    from opentelemetry import context as otel_context
    from opentelemetry.propagators.composite import CompositePropagator
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    from sidecar.telemetry.tracing import injected

    def both(span: Any) -> tuple[dict[str, str], dict[str, str]]:
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            expected: dict[str, str] = {}
            propagate.inject(expected)
            return injected(span), expected
        finally:
            otel_context.detach(token)

    plain = NonRecordingSpan(SpanContext(0xABC, 0x12, False, TraceFlags(TraceFlags.SAMPLED)))
    stated = NonRecordingSpan(SpanContext(1, 2, False, TraceFlags(0), TraceState([("vendor", "v1")])))
    got, expected = both(plain)
    assert got == expected == {"traceparent": f"00-{0xABC:032x}-{0x12:016x}-01"}
    got, expected = both(stated)
    assert got == expected
    assert expected["tracestate"] == "vendor=v1"
    token = otel_context.attach(baggage.set_baggage("tenant", "a"))
    try:  # baggage in the context: the propagators' own injection, baggage carried
        got, expected = both(plain)
        assert got == expected
        assert expected["baggage"] == "tenant=a"
    finally:
        otel_context.detach(token)
    before = propagate.get_global_textmap()
    for other in (CompositePropagator([TraceContextTextMapPropagator()]), _HeaderPropagator()):
        propagate.set_global_textmap(other)
        try:
            got, expected = both(plain)
            assert got == expected
        finally:
            propagate.set_global_textmap(before)
