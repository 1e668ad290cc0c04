"""A provider's content-policy refusal, at every door: PROVIDER_REFUSAL with its category, never retried.

The fake provider sends each shape a provider refuses with (OpenAI's 400 content_policy_violation,
Azure OpenAI's 400 content_filter / ResponsibleAIPolicyViolation with its filter's categories,
Anthropic's "Output blocked by content filtering policy", a reply that finishes content_filter, and
each of them mid-stream); the sidecar runs over real gRPC and HTTP on loopback. Every case checks
that the provider was asked exactly once: a refusal is never re-rolled.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import grpc
import openai
import pytest
import pytest_asyncio
import sidecar_client as sc
from google.rpc import error_details_pb2, status_pb2
from sidecar_client import pb, user

from tests.conftest import Running, Start

UPSTREAM = {"gpt": "fake-gpt", "claude": "fake-claude", "azure": "fake-azure", "gpt-b": "fake-gpt-b"}
SECRET = "sk-test-SECRETKEY1234567890"


def deployment(provider: str, upstream: str) -> dict[str, Any]:
    return {"provider": provider, "upstream_model": upstream, "context_window": 8000, "max_output_tokens": 2048}


MODELS = {
    "azure": deployment("oai", "fake-azure"),
    "gpt-b": deployment("oai", "fake-gpt-b"),
    "strict": {"route": {"fallbacks": ["azure", "gpt-b"]}},
    "lenient": {
        "route": {"fallbacks": ["azure", "gpt-b"], "move_on": ["UPSTREAM_RETRIES_EXHAUSTED", "PROVIDER_REFUSAL"]}
    },
}


@pytest_asyncio.fixture
async def r(start_sidecar: Start) -> Running:
    return await start_sidecar(http={"listen": "127.0.0.1:0"}, models=MODELS)


def script(r: Running, model: str, *steps: dict[str, Any]) -> None:
    r.provider.script(UPSTREAM[model], list(steps))


def sent(r: Running, model: str) -> int:
    return len(r.provider.requests(model=UPSTREAM[model]))


def base_url(r: Running, suffix: str = "") -> str:
    assert r.app.http is not None
    return f"http://127.0.0.1:{r.app.http.port}{suffix}"


@pytest_asyncio.fixture
async def oai(r: Running) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=base_url(r, "/v1"), api_key="unused", max_retries=0) as c:
        yield c


@pytest_asyncio.fixture
async def ant(r: Running) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(base_url=base_url(r), api_key="unused", max_retries=0) as c:
        yield c


AZURE_WORDS = "The response was filtered due to the prompt triggering Azure OpenAI's content management policy"
OPENAI_WORDS = "Your request was rejected as a result of our safety system"
ANTHROPIC_WORDS = "Output blocked by content filtering policy"

CASES = [  # model, step, category, the provider's words
    ("gpt", {"preset": "content_policy"}, "content_policy_violation", OPENAI_WORDS),
    ("gpt", {"preset": "content_filter"}, "hate", AZURE_WORDS),
    ("gpt", {"preset": "content_filter", "categories": ["self_harm", "violence"]}, "self_harm,violence", AZURE_WORDS),
    ("claude", {"preset": "content_filter"}, "content_filter", ANTHROPIC_WORDS),
    ("gpt", {"preset": "reply", "finish": "content_filter", "categories": ["sexual"]}, "sexual", ""),
]


async def _read_into(into: list[Any], stream: Any) -> None:
    async for item in stream:
        into.append(item)


# ---------------------------------------------------------------- gRPC


@pytest.mark.parametrize(("model", "step", "category", "words"), CASES)
async def test_call_model_fails_provider_refusal_with_the_category_after_one_attempt(
    r: Running, model: str, step: dict[str, Any], category: str, words: str
) -> None:
    script(r, model, step, step, step)  # were it retried, the next attempts would be refused too
    with pytest.raises(sc.ProviderRefusalError) as caught:
        await r.client.call_model(model, [user("hello")])
    err = caught.value
    assert err.grpc_code == grpc.StatusCode.FAILED_PRECONDITION
    assert err.failure.kind == pb.FAILURE_KIND_PROVIDER_REFUSAL
    assert err.correctable is False
    assert err.attempts == 1
    assert err.detail.model == model
    assert err.detail.category == category
    assert words in err.detail.explanation
    assert f"Model {model} refused the request ({category.replace(',', ', ')})" in err.message
    assert err.message.endswith("Retrying the same model will not help.")
    assert sent(r, model) == 1
    rpc = err.__cause__
    assert isinstance(rpc, grpc.aio.AioRpcError)
    status = status_pb2.Status.FromString(dict(rpc.trailing_metadata() or ())["grpc-status-details-bin"])
    info = error_details_pb2.ErrorInfo()
    assert status.details[1].Unpack(info)
    assert (info.reason, info.metadata["category"]) == ("PROVIDER_REFUSAL", category)
    if step["preset"] != "reply":  # an error answer: kept, as any upstream answer is
        assert err.http is not None
        assert err.http.status_code == 400
    assert SECRET not in str(err.failure)


@pytest.mark.parametrize(
    ("model", "fault", "category"),
    [
        ("gpt", "content_policy", "content_policy_violation"),
        ("gpt", "content_filter", "violence"),
        ("claude", "content_filter", "content_filter"),
    ],
)
async def test_a_refusal_mid_stream_ends_the_stream_with_provider_refusal_not_a_restart(
    r: Running, model: str, fault: str, category: str
) -> None:
    step = {"stream_fault": fault, "after_deltas": 2, "categories": ["violence"]}
    script(r, model, step, {})  # a retry would find a clean answer waiting
    events: list[pb.StreamModelEvent] = []
    call = r.client.stream_model(model, [user("one two three four")], mid_stream=pb.MID_STREAM_POLICY_RESTART)
    with pytest.raises(sc.ProviderRefusalError) as caught:
        await _read_into(events, call)
    err = caught.value
    assert err.detail.category == category
    assert err.attempts == 1
    assert [e.WhichOneof("event") for e in events].count("restart") == 0
    assert sent(r, model) == 1


async def test_a_streamed_reply_that_finishes_content_filter_names_azures_categories(r: Running) -> None:
    script(r, "gpt", {"preset": "reply", "text": "some words", "finish": "content_filter", "categories": ["hate"]})
    with pytest.raises(sc.ProviderRefusalError) as caught:
        await _read_into([], r.client.stream_model("gpt", [user("hi")]))
    assert caught.value.detail.category == "hate"
    assert sent(r, "gpt") == 1


# ---------------------------------------------------------------- routes


async def test_a_route_stops_at_a_refusal_by_default(r: Running) -> None:
    script(r, "azure", {"preset": "content_filter"})
    with pytest.raises(sc.ProviderRefusalError) as caught:
        await r.client.call_model("strict", [user("hello")])
    err = caught.value
    assert [(h.deployment, h.kind, h.attempts) for h in err.hops] == [("azure", pb.FAILURE_KIND_PROVIDER_REFUSAL, 1)]
    assert "Route strict stopped at azure: PROVIDER_REFUSAL does not move on to another deployment" in err.message
    assert err.detail.category == "hate"
    assert sent(r, "gpt-b") == 0


async def test_a_route_that_lists_provider_refusal_moves_on_and_leaves_the_circuit_closed(r: Running) -> None:
    for _ in range(3):  # three refusals in a row: the deployment answered each time
        script(r, "azure", {"preset": "content_filter"})
        reply = await r.client.call_model("lenient", [user("hello")])
        assert reply.served_by == "gpt-b"
        assert [(h.deployment, h.kind) for h in reply.hops] == [
            ("azure", pb.FAILURE_KIND_PROVIDER_REFUSAL),
            ("gpt-b", pb.FAILURE_KIND_UNSPECIFIED),
        ]
    reply = await r.client.call_model("lenient", [user("hello")])
    assert reply.served_by == "azure"  # never switched off by its refusals
    assert sent(r, "azure") == 4


# ---------------------------------------------------------------- the HTTP doors


@pytest.mark.parametrize(("model", "step", "category", "words"), CASES)
async def test_the_openai_door_answers_openais_own_refusal(
    r: Running, oai: openai.AsyncOpenAI, model: str, step: dict[str, Any], category: str, words: str
) -> None:
    script(r, model, step, step, step)
    with pytest.raises(openai.BadRequestError) as caught:
        await oai.chat.completions.create(model=model, messages=[{"role": "user", "content": "hello"}])
    error = caught.value
    assert error.status_code == 400
    assert error.type == "invalid_request_error"
    assert error.code == "content_policy_violation"
    assert isinstance(error.body, dict)
    ext = error.body["sidecar"]  # the SDK keeps the error object as the body
    assert ext["kind"] == "PROVIDER_REFUSAL"
    assert ext["correctable"] is False
    assert ext["failure"]["refusal"]["category"] == category
    assert error.response.headers["x-should-retry"] == "false"
    assert error.response.headers["x-sidecar-attempts"] == "1"
    assert sent(r, model) == 1


async def test_the_openai_door_streams_a_refusal_after_text_as_an_error_event(
    r: Running, oai: openai.AsyncOpenAI
) -> None:
    script(r, "gpt", {"stream_fault": "content_filter", "after_deltas": 2}, {})
    stream = await oai.chat.completions.create(
        model="gpt", messages=[{"role": "user", "content": "one two three"}], stream=True
    )
    with pytest.raises(openai.APIError) as caught:
        await _read_into([], stream)
    error = caught.value
    assert error.code == "content_policy_violation"
    assert error.type == "invalid_request_error"
    assert isinstance(error.body, dict)
    assert error.body["sidecar"]["failure"]["refusal"]["category"] == "hate"
    assert sent(r, "gpt") == 1


@pytest.mark.parametrize(("model", "step", "category", "words"), CASES)
async def test_the_anthropic_door_answers_anthropics_own_refusal(
    r: Running, ant: anthropic.AsyncAnthropic, model: str, step: dict[str, Any], category: str, words: str
) -> None:
    script(r, model, step, step, step)
    with pytest.raises(anthropic.BadRequestError) as caught:
        await ant.messages.create(model=model, max_tokens=50, messages=[{"role": "user", "content": "hello"}])
    error = caught.value
    assert error.status_code == 400
    assert isinstance(error.body, dict)
    assert error.body["error"]["type"] == "invalid_request_error"
    ext = error.body["error"]["sidecar"]
    assert ext["kind"] == "PROVIDER_REFUSAL"
    assert ext["failure"]["refusal"]["category"] == category
    assert sent(r, model) == 1
