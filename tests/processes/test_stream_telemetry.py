"""A StreamModel in the trace: the server span, the chat span, an attempt span each, the first-token
event, the restart on the chat span, and the two GenAI streaming histograms."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
import pytest_asyncio
import sidecar_client as sc
from opentelemetry.sdk.trace import ReadableSpan
from sidecar_client import AsyncSidecarClient, user

from sidecar.config import Config
from sidecar.core.clock import FakeClock
from sidecar.fakes import FakeProvider, FakeToolBackend, ThreadedServer
from sidecar.server.app import running
from sidecar.server.grpc.spans import ServerSpanInterceptor
from sidecar.telemetry import names as n
from sidecar.telemetry.testing import InMemoryTelemetry, install_in_memory
from tests.conftest import base_config

STREAM_MODEL = "sidecar.v1.Sidecar/StreamModel"
UPSTREAM = {"gpt": "fake-gpt", "claude": "fake-claude"}
both = pytest.mark.parametrize("model", ["gpt", "claude"])
TEXT = "one two three four five six"  # "You said: one two three four five six": 8 deltas


@pytest.fixture(scope="session")
def otel() -> InMemoryTelemetry:
    return install_in_memory()


@pytest.fixture(autouse=True)
def _fresh(otel: InMemoryTelemetry) -> None:
    otel.clear()


@pytest_asyncio.fixture
async def traced(
    provider: ThreadedServer[FakeProvider], backend: ThreadedServer[FakeToolBackend], clock: FakeClock
) -> AsyncIterator[tuple[AsyncSidecarClient, FakeProvider, FakeClock]]:
    cfg = Config.model_validate(base_config(provider.url, backend.url))
    ctx = running(cfg, listen="127.0.0.1:0", clock=clock, rng=random.Random(7), interceptors=[ServerSpanInterceptor()])
    app = await ctx.__aenter__()
    client = AsyncSidecarClient(app.address)
    try:
        yield client, provider.server, clock
    finally:
        await client.close()
        await ctx.__aexit__(None, None, None)


async def spans_once(otel: InMemoryTelemetry, name: str) -> list[ReadableSpan]:
    """The finished spans once ``name`` has ended (the server span ends a moment after the status)."""
    for _ in range(400):
        if any(s.name == name for s in otel.spans()):
            break
        await asyncio.sleep(0.005)
    return list(otel.spans())


def named(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.name == name), key=lambda s: s.start_time or 0)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def event_names(span: ReadableSpan) -> list[str]:
    return [e.name for e in span.events]


@both
async def test_a_restarted_stream_shows_its_attempts_first_tokens_and_the_restart(
    traced: tuple[AsyncSidecarClient, FakeProvider, FakeClock], otel: InMemoryTelemetry, model: str
) -> None:
    client, provider, _ = traced
    provider.script(UPSTREAM[model], [{"stream_fault": "overloaded", "after_deltas": 3}, {}])
    agent = otel.tracer_provider.get_tracer("agent")
    with agent.start_as_current_span("agent.turn") as turn:
        reply = await client.stream_model(model, [user(TEXT)]).collect()
    assert reply.attempts == 2
    spans = await spans_once(otel, STREAM_MODEL)
    (server,) = named(spans, STREAM_MODEL)
    assert server.parent is not None
    assert server.parent.span_id == turn.get_span_context().span_id  # the caller's trace continues
    assert attrs(server)[n.RPC_GRPC_STATUS] == 0
    (chat,) = named(spans, f"chat {model}")
    assert chat.parent is not None
    assert chat.parent.span_id == server.context.span_id
    assert attrs(chat)[n.STREAMED] is True
    assert attrs(chat)[n.ATTEMPTS] == 2
    restarts = [e for e in chat.events if e.name == n.EVENT_STREAM_RESTART]
    assert len(restarts) == 1
    restart = dict(restarts[0].attributes or {})
    assert restart[n.ATTEMPT] == 2
    assert restart[n.RESTART_CAUSE] == "upstream_fault"
    assert str(restart[n.RESTART_REASON]).startswith("overload after 3 deltas")
    posts = [s for s in named(spans, "POST") if s.parent is not None and s.parent.span_id == chat.context.span_id]
    assert len(posts) == 2
    assert [event_names(p).count(n.EVENT_FIRST_TOKEN) for p in posts] == [1, 1]
    assert attrs(posts[0])[n.ERROR_TYPE] == "stream_error_event"
    assert attrs(posts[0])[n.RETRY_SIGNAL] == "overload"
    assert n.ERROR_TYPE not in attrs(posts[1])
    assert attrs(posts[1])[n.HTTP_RESEND_COUNT] == 1
    assert len(named(spans, n.SPAN_BACKOFF)) == 1


@both
async def test_time_to_first_chunk_and_time_per_output_chunk_are_recorded_for_streams_only(
    traced: tuple[AsyncSidecarClient, FakeProvider, FakeClock], otel: InMemoryTelemetry, model: str
) -> None:
    client, provider, _ = traced
    provider.script(UPSTREAM[model], [{"stream_fault": "drop", "after_deltas": 3}, {}])
    await client.stream_model(model, [user(TEXT)]).collect()
    await client.call_model(model, [user(TEXT)])
    points = otel.metrics()
    (first,) = points[n.METRIC_TIME_TO_FIRST_CHUNK]
    assert first.count == 2  # one per attempt that sent a delta
    assert dict(first.attributes) == {
        n.GEN_AI_OPERATION: "chat",
        n.GEN_AI_REQUEST_MODEL: model,
        n.GEN_AI_PROVIDER: {"gpt": "openai", "claude": "anthropic"}[model],
    }
    assert list(first.explicit_bounds) == list(n.DURATION_BUCKETS)
    (per_chunk,) = points[n.METRIC_TIME_PER_OUTPUT_CHUNK]
    assert per_chunk.count == (3 - 1) + (8 - 1)  # every delta after its attempt's first
    assert first.sum == 0  # the fake clock did not move while the deltas came
    (duration,) = [p for p in points[n.METRIC_DURATION] if p.count == 2]  # the stream and the call
    assert dict(duration.attributes)[n.GEN_AI_REQUEST_MODEL] == model


@both
async def test_a_cancelled_stream_ends_its_attempt_and_its_call_as_cancelled(
    traced: tuple[AsyncSidecarClient, FakeProvider, FakeClock], otel: InMemoryTelemetry, model: str
) -> None:
    client, provider, _ = traced
    provider.script(UPSTREAM[model], [{"stream_fault": "stall", "after_deltas": 2}])
    call = client.stream_model(model, [user(TEXT)])
    await call.__anext__()
    call.cancel()
    with pytest.raises(sc.JobCancelledError):
        await call.__anext__()
    spans = await spans_once(otel, STREAM_MODEL)
    for _ in range(400):
        spans = list(otel.spans())
        if named(spans, f"chat {model}"):
            break
        await asyncio.sleep(0.005)
    (chat,) = named(spans, f"chat {model}")
    assert attrs(chat)[n.ERROR_TYPE] == "JOB_CANCELLED"
    (post,) = named(spans, "POST")
    assert attrs(post)[n.ERROR_TYPE] == "cancelled"
    assert event_names(post) == [n.EVENT_FIRST_TOKEN]
    (server,) = named(spans, STREAM_MODEL)
    assert attrs(server)[n.RPC_GRPC_STATUS] == grpc.StatusCode.CANCELLED.value[0]
