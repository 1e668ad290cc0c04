"""The official ``openai`` SDK judges the Responses wire: the fake's shapes, and the sidecar's front.

(a) The fake provider (``sidecar/providers/formats/openai_responses/fake.py``) answers on loopback; each whole body is
validated as ``openai.types.responses.Response`` and each event of each stream as
``ResponseStreamEvent`` (a TypeAdapter over the SDK's union of every event type, so an event whose
``type`` or fields are not OpenAI's fails), so the fake cannot drift from the real shapes.

(b) The SDK's own client is pointed at the sidecar's ``/v1/responses`` front: ``responses.create``
and ``responses.stream`` read its answers, with the sidecar calling the fake in the Responses format
and, translated, in Anthropic's; its failures are the SDK's exception classes, and what the
stateless sidecar cannot carry (``previous_response_id``, ``store: true``) is a 400 naming the key.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import openai
import pytest
import pytest_asyncio
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from sidecar.fakes._threaded import ThreadedServer
from sidecar.fakes.provider import FakeProvider
from tests.conftest import Running, Start

MODEL = "fake-resp"
KEY = "sk-resp-test-key"
EVENTS: TypeAdapter[ResponseStreamEvent] = TypeAdapter(ResponseStreamEvent)
SEARCH = {"type": "function", "name": "search", "description": "Search.", "parameters": {"type": "object",
          "properties": {"query": {"type": "string"}}, "required": ["query"]}}  # fmt: skip
ASK: dict[str, Any] = {
    "model": MODEL,
    "input": [{"role": "user", "content": "find retries"}],
    "tools": [SEARCH],
    "store": False,
    "include": ["reasoning.encrypted_content"],
}
REASONING = {"reasoning": {"effort": "low", "summary": "auto"}}
STEPS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "the brain's reply": ({}, {}),
    "a tool call": ({"preset": "reply", "tool_calls": [{"name": "search", "arguments": {"query": "x"}}]}, {}),
    "two tool calls and text": ({"preset": "reply", "text": "Looking.", "tool_calls": [
        {"name": "search", "arguments": {"query": "a"}}, {"name": "search", "arguments": {"query": "b"}}]}, {}),
    "reasoning and a tool call": ({"preset": "reply", "tool_calls": [{"name": "search", "arguments": {}}]},
                                  REASONING),
    "reasoning and text": ({}, REASONING),
    "reasoning without a summary": ({}, {"reasoning": {"effort": "low"}}),
    "cache and reasoning usage": ({"usage": {"cache_read_input_tokens": 5, "reasoning_tokens": 7}}, {}),
    "truncated": ({"preset": "truncated"}, {}),
    "a refusal": ({"preset": "refusal"}, {}),
    "finish content_filter": ({"preset": "reply", "finish": "content_filter"}, {}),
    "missing fields": ({"preset": "missing_fields"}, {"text": {"format": {"type": "json_schema", "name": "r",
        "schema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}}}),
    "mid-stream overload": ({"stream_fault": "overloaded", "after_deltas": 2}, {}),
    "mid-stream content policy": ({"stream_fault": "content_policy", "after_deltas": 2}, {}),
}  # fmt: skip
ERRORS = [
    ("rate_limit", openai.RateLimitError),
    ("insufficient_quota", openai.RateLimitError),
    ("server_error", openai.InternalServerError),
    ("context_too_long", openai.BadRequestError),
    ("invalid_key", openai.AuthenticationError),
    ("model_not_found", openai.NotFoundError),
    ("content_policy", openai.BadRequestError),
]


# ---------------------------------------------------------------- (a) the fake's shapes


@pytest.fixture(scope="module")
def fake() -> Iterator[ThreadedServer[FakeProvider]]:
    with ThreadedServer(FakeProvider()) as srv:
        yield srv


def post(fake: ThreadedServer[FakeProvider], step: dict[str, Any], extra: dict[str, Any], *, stream: bool) -> Any:
    fake.server.script(MODEL, [step])
    body = {**ASK, **extra, **({"stream": True} if stream else {})}
    return httpx.post(f"{fake.url}/v1/responses", json=body, headers={"authorization": f"Bearer {KEY}"}, timeout=30)


def events(text: str) -> list[tuple[str, str]]:
    """(event name, data) of each server-sent event."""
    out = []
    for block in text.split("\n\n"):
        lines = block.splitlines()
        name = next((line[len("event: ") :] for line in lines if line.startswith("event: ")), "")
        data = next((line[len("data: ") :] for line in lines if line.startswith("data: ")), None)
        if data is not None:
            out.append((name, data))
    return out


@pytest.mark.parametrize("case", list(STEPS))
def test_every_whole_reply_is_a_response(fake: ThreadedServer[FakeProvider], case: str) -> None:
    step, extra = STEPS[case]
    if "stream_fault" in step:
        return  # a stream's fault only
    answer = post(fake, step, extra, stream=False)
    assert answer.status_code == 200
    parsed = Response.model_validate_json(answer.text)
    assert parsed.id.startswith("resp_fake")
    assert parsed.object == "response"
    assert parsed.usage is not None
    assert parsed.status in ("completed", "incomplete")
    for item in parsed.output:
        if item.type == "reasoning":
            assert item.encrypted_content


@pytest.mark.parametrize("case", list(STEPS))
def test_every_stream_event_is_a_response_stream_event(fake: ThreadedServer[FakeProvider], case: str) -> None:
    step, extra = STEPS[case]
    answer = post(fake, step, extra, stream=True)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    sent = events(answer.text)
    assert sent
    parsed = [EVENTS.validate_json(data) for _, data in sent]
    assert [name for name, _ in sent] == [e.type for e in parsed]  # each event named as its data's type
    numbers = [e.sequence_number for e in parsed if e.type != "error"]  # the fake numbers its error event apart
    assert numbers == list(range(len(numbers)))
    assert parsed[0].type == "response.created"
    last = parsed[-1]
    if "stream_fault" in step:
        assert last.type == "error"
    else:
        assert last.type in ("response.completed", "response.incomplete")


@pytest.mark.parametrize(("preset", "error"), ERRORS)
def test_every_error_answer_is_the_sdks_exception(
    fake: ThreadedServer[FakeProvider], preset: str, error: type[openai.APIStatusError]
) -> None:
    client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key=KEY, max_retries=0)
    fake.server.script(MODEL, [{"preset": preset}])
    with pytest.raises(error) as caught:
        client.responses.create(model=MODEL, input="hi", store=False)
    assert caught.value.body is not None


def test_the_sdk_reads_the_fake_whole_and_streamed(fake: ThreadedServer[FakeProvider]) -> None:
    client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key=KEY, max_retries=0)
    fake.server.script(MODEL, [{"preset": "reply", "text": "Sunny in Paris."}])
    reply = client.responses.create(model=MODEL, input="weather?", store=False)
    assert reply.output_text == "Sunny in Paris."
    with client.responses.stream(model=MODEL, input="one two", store=False) as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == final.output_text == "You said: one two"


# ---------------------------------------------------------------- (b) the sidecar's front

UPSTREAMS = {"resp": MODEL, "claude": "fake-claude"}
both = pytest.mark.parametrize("model", ["resp", "claude"])


@pytest_asyncio.fixture
async def front(start_sidecar: Start, provider: ThreadedServer[FakeProvider]) -> Running:
    return await start_sidecar(
        http={"listen": "127.0.0.1:0"},
        providers={"resp": {"wire_format": "openai_responses", "base_url": provider.url + "/v1", "api_key": KEY}},
        models={"resp": {"provider": "resp", "upstream_model": MODEL, "context_window": 8000,
                         "max_output_tokens": 2048, "default_output_tokens": 256}},
    )  # fmt: skip


@pytest_asyncio.fixture
async def client(front: Running) -> AsyncIterator[openai.AsyncOpenAI]:
    assert front.app.http is not None
    url = f"http://127.0.0.1:{front.app.http.port}/v1"
    async with openai.AsyncOpenAI(base_url=url, api_key="unused", max_retries=0) as c:
        yield c


def upstream_bodies(r: Running, model: str) -> list[dict[str, Any]]:
    return [rec["body"] for rec in r.provider.requests(model=UPSTREAMS[model])]


@both
async def test_responses_create_reads_a_reply_through_the_sidecar(
    front: Running, client: openai.AsyncOpenAI, model: str
) -> None:
    raw = await client.responses.with_raw_response.create(model=model, input="hello there", instructions="Be brief.")
    reply = raw.parse()
    assert raw.headers["x-sidecar-attempts"] == "1"
    assert reply.output_text == "You said: hello there"
    assert reply.status == "completed"
    assert reply.model == UPSTREAMS[model]
    assert reply.usage is not None
    assert reply.usage.input_tokens > 0
    assert (reply.model_extra or {})["sidecar"]["served_by"] == model
    (body,) = upstream_bodies(front, model)
    if model == "claude":
        assert body["system"] == "Be brief."  # translated: Anthropic's system prompt
        assert [m["role"] for m in body["messages"]] == ["user"]
    else:
        assert body["instructions"] == "Be brief."
        assert body["store"] is False


@both
async def test_responses_stream_reads_the_deltas_and_the_final_response(
    front: Running, client: openai.AsyncOpenAI, model: str
) -> None:
    async with client.responses.stream(model=model, input="one two three") as stream:
        deltas = [e.delta async for e in stream if e.type == "response.output_text.delta"]
        final = await stream.get_final_response()
    assert "".join(deltas) == final.output_text == "You said: one two three"
    assert final.status == "completed"
    assert final.usage is not None


@both
async def test_a_tool_loop_through_the_front_carries_calls_and_outputs(
    front: Running, client: openai.AsyncOpenAI, model: str
) -> None:
    front.provider.script(UPSTREAMS[model], [{"preset": "reply", "tool_calls": [
        {"name": "search", "arguments": {"query": "retries"}}]}])  # fmt: skip
    tools: Any = [SEARCH]
    first = await client.responses.create(model=model, input="find retries", tools=tools)
    (call,) = [i for i in first.output if i.type == "function_call"]
    assert (call.name, json.loads(call.arguments)) == ("search", {"query": "retries"})
    follow: Any = [
        {"role": "user", "content": "find retries"},
        *[i.model_dump(exclude_none=True) for i in first.output],
        {"type": "function_call_output", "call_id": call.call_id, "output": "3 retries"},
    ]
    second = await client.responses.create(model=model, input=follow, tools=tools)
    assert second.output_text == "Based on the tool result: 3 retries"


async def test_reasoning_items_round_trip_through_the_front(front: Running, client: openai.AsyncOpenAI) -> None:
    front.provider.script(MODEL, [{"preset": "reply", "tool_calls": [{"name": "search", "arguments": {"q": "x"}}]}])
    tools: Any = [SEARCH]
    first = await client.responses.create(
        model="resp", input="find", tools=tools, reasoning={"effort": "low", "summary": "auto"}
    )
    (thought,) = [i for i in first.output if i.type == "reasoning"]
    assert thought.id == "rs_fake00000001"
    assert thought.encrypted_content
    (call,) = [i for i in first.output if i.type == "function_call"]
    follow: Any = [
        {"role": "user", "content": "find"},
        *[i.model_dump(exclude_none=True) for i in first.output],
        {"type": "function_call_output", "call_id": call.call_id, "output": "found"},
    ]
    second = await client.responses.create(model="resp", input=follow, tools=tools, reasoning={"effort": "low"})
    assert second.output_text == "Based on the tool result: found"
    sent = upstream_bodies(front, "resp")[1]["input"][1]
    assert (sent["id"], sent["encrypted_content"]) == (thought.id, thought.encrypted_content)


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ({"previous_response_id": "resp_123"}, "previous_response_id"),
        ({"store": True}, "store"),
        ({"conversation": "conv_1"}, "conversation"),
        ({"background": True}, "background"),
    ],
)
async def test_what_a_stateless_sidecar_cannot_carry_is_a_400_naming_the_key(
    front: Running, client: openai.AsyncOpenAI, extra: dict[str, Any], key: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.create(model="resp", input="hi", **extra)
    assert caught.value.param == key
    assert key in caught.value.message
    assert upstream_bodies(front, "resp") == []


@both
async def test_failures_are_the_sdks_exceptions_in_openais_error_shape(
    front: Running, client: openai.AsyncOpenAI, model: str
) -> None:
    front.provider.script(UPSTREAMS[model], [{"preset": "context_too_long"}])
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.create(model=model, input="hi")
    assert caught.value.code == "context_length_exceeded"
    assert caught.value.response.headers["x-sidecar-attempts"] == "1"
    front.provider.script(UPSTREAMS[model], [{"preset": "insufficient_quota"}])
    with pytest.raises(openai.RateLimitError) as quota:  # another input: "hi" again is the failure replayed
        await client.responses.create(model=model, input="hi again")
    assert quota.value.code == "insufficient_quota"


async def test_a_failure_after_the_stream_began_is_an_error_event(front: Running, client: openai.AsyncOpenAI) -> None:
    front.provider.script(MODEL, [{"stream_fault": "content_policy", "after_deltas": 2}])
    stream = await client.responses.create(model="resp", input="one two three", stream=True)
    got = [e async for e in stream]
    assert got[-1].type == "error"
    assert got[-1].code == "content_policy_violation"


# ---------------------------------------------------------------- keys the sidecar does not interpret (issue 37)

R_SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "x-never-heard": {"deep": [1, 2]}}
R_TOOL = {"type": "function", "name": "search", "description": "Search.", "parameters": R_SCHEMA, "strict": False,
          "x_tool": {"b": [True]}}  # fmt: skip
R_PART = {"type": "input_text", "text": "hi", "x_part": "p"}
R_MESSAGE = {"type": "message", "role": "user", "content": [R_PART], "x_message": 7}
R_CALL = {"type": "function_call", "call_id": "c1", "name": "search", "arguments": "{}", "x_call": 1}
R_OUTPUT = {"type": "function_call_output", "call_id": "c1", "output": "found", "x_output": [2]}
R_BODY = {"metadata": {"run": "7"}, "service_tier": "flex", "x_body": "v"}


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_unknown_keys_at_every_depth_reach_a_responses_deployment_as_sent(
    front: Running, client: openai.AsyncOpenAI, streamed: bool
) -> None:
    asked: dict[str, Any] = {
        "model": "resp",
        "input": [R_MESSAGE, R_CALL, R_OUTPUT, {"role": "user", "content": "go on"}],
        "tools": [R_TOOL],
        "text": {"format": {"type": "json_schema", "name": "r", "schema": R_SCHEMA, "x_format": 1}, "verbosity": "low"},
        "reasoning": {"effort": "low", "x_reasoning": True},
        "extra_body": R_BODY,
    }
    if streamed:
        async with await client.responses.create(**asked, stream=True) as stream:
            [event async for event in stream]
    else:
        await client.responses.create(**asked)
    (body,) = upstream_bodies(front, "resp")
    assert {k: body[k] for k in R_BODY} == R_BODY
    assert body["tools"] == [R_TOOL]
    assert (body["text"]["format"]["x_format"], body["text"]["verbosity"]) == (1, "low")
    assert body["reasoning"]["x_reasoning"] is True
    message, call, output, _ = body["input"]
    assert message == R_MESSAGE
    assert call == {"type": "function_call", "call_id": "c1", "name": "search", "arguments": "{}", "x_call": 1}
    assert output == R_OUTPUT
