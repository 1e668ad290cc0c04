"""The OpenAI-compatible front, with the official ``openai`` SDK as its client.

The sidecar runs with ``http.listen`` on a free loopback port beside its gRPC port, the fake
provider behind it (both wire formats: an OpenAI SDK call can reach an Anthropic model). What the
SDK gets is what CallModel / StreamModel give, in OpenAI's shapes, and each failure is read as
the SDK's own exception class, with the sidecar's Failure in ``error.sidecar``.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
import pytest_asyncio
import sidecar_client as sc
from openai.types.chat import ChatCompletion
from opentelemetry import propagate, trace
from pydantic import BaseModel

from sidecar.telemetry import names as n
from sidecar.telemetry.testing import InMemoryTelemetry, install_in_memory
from tests.conftest import Running, Start
from tests.processes.test_telemetry import attrs, settled

MODELS = {"gpt": "fake-gpt", "claude": "fake-claude", "gpt-a": "fake-gpt-a"}
HTTP = {"listen": "127.0.0.1:0"}
both = pytest.mark.parametrize("model", ["gpt", "claude"])
SECRET = "sk-test-SECRETKEY1234567890"
"""The OpenAI provider's configured key (tests/conftest.py): masked in every answer."""
ROUTES = {
    "gpt-a": {"provider": "oai", "upstream_model": "fake-gpt-a", "context_window": 8000, "max_output_tokens": 2048},
    "fallback": {"route": {"fallbacks": ["gpt-a", "claude"]}},
}


def base_url(r: Running) -> str:
    assert r.app.http is not None
    return f"http://127.0.0.1:{r.app.http.port}/v1"


@pytest_asyncio.fixture
async def http_sidecar(start_sidecar: Start) -> Running:
    return await start_sidecar(http=HTTP, models=ROUTES)


@pytest_asyncio.fixture
async def client(http_sidecar: Running) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=base_url(http_sidecar), api_key="unused", max_retries=0) as c:
        yield c


@pytest.fixture
def otel() -> InMemoryTelemetry:
    telemetry = install_in_memory()
    telemetry.clear()
    return telemetry


def script(r: Running, model: str, *steps: dict[str, Any]) -> None:
    r.provider.script(MODELS[model], list(steps))


def sent(r: Running, model: str) -> list[dict[str, Any]]:
    return r.provider.requests(model=MODELS[model])


def user(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


def extension(obj: Any) -> dict[str, Any]:
    """The ``sidecar`` field an SDK object kept (pydantic extra)."""
    extra = obj.model_extra or {}
    value = extra["sidecar"]
    assert isinstance(value, dict)
    return value


# ---------------------------------------------------------------- replies


@both
async def test_a_plain_reply_is_a_chat_completion_with_the_attempts(
    http_sidecar: Running, client: openai.AsyncOpenAI, model: str
) -> None:
    raw = await client.chat.completions.with_raw_response.create(model=model, messages=user("hello there"))
    reply = raw.parse()
    over_grpc = await http_sidecar.client.call_model(model, [{"role": 1, "text": "hello there"}])
    assert raw.headers["x-sidecar-attempts"] == "1"
    assert reply.object == "chat.completion"
    assert reply.model == MODELS[model]  # the model as its provider reported it, as OpenAI's API says
    (choice,) = reply.choices
    assert choice.message.role == "assistant"
    assert choice.message.content == over_grpc.message.text == "You said: hello there"
    assert choice.finish_reason == "stop"
    assert reply.usage is not None
    assert reply.usage.prompt_tokens == over_grpc.usage.input_tokens
    assert reply.usage.completion_tokens == over_grpc.usage.output_tokens
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    ext = extension(reply)
    assert ext["attempts"] == 1
    assert ext["served_by"] == model
    assert ext["provider"] == {"gpt": "oai", "claude": "ant"}[model]


async def test_a_reply_retried_beneath_the_sdk_says_how_many_attempts_it_took(
    http_sidecar: Running, client: openai.AsyncOpenAI
) -> None:
    script(http_sidecar, "gpt", {"preset": "rate_limit"}, {"preset": "overloaded"})
    raw = await client.chat.completions.with_raw_response.create(model="gpt", messages=user("hi"))
    assert raw.headers["x-sidecar-attempts"] == "3"
    assert extension(raw.parse())["attempts"] == 3
    assert len(sent(http_sidecar, "gpt")) == 3


@pytest.mark.parametrize("key", ["max_tokens", "max_completion_tokens"])
async def test_max_tokens_in_either_spelling_is_the_output_budget(
    http_sidecar: Running, client: openai.AsyncOpenAI, key: str
) -> None:
    await client.chat.completions.create(model="gpt", messages=user("hi"), **{key: 77})  # type: ignore[call-overload]
    assert sent(http_sidecar, "gpt")[-1]["body"]["max_tokens"] == 77


@both
async def test_a_tool_call_and_its_result_make_a_round(
    http_sidecar: Running, client: openai.AsyncOpenAI, model: str
) -> None:
    (tool,) = [t for t in await http_sidecar.client.list_tools() if t.definition.name == "search"]
    tools: Any = [json.loads(tool.openai_json)]
    messages: list[Any] = user("find retries")
    first = await client.chat.completions.create(model=model, messages=messages, tools=tools)
    (choice,) = first.choices
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    (call,) = choice.message.tool_calls
    assert call.type == "function"
    assert call.function.name == "search"
    arguments = json.loads(call.function.arguments)
    outcome = await http_sidecar.client.execute_tool("search", arguments, call_id=call.id)
    messages.append(choice.message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": outcome.model_text})
    second = await client.chat.completions.create(model=model, messages=messages, tools=tools)
    content = second.choices[0].message.content
    assert content is not None
    assert content.startswith("Based on the tool result")
    assert second.choices[0].finish_reason == "stop"


class Person(BaseModel):
    name: str
    age: int


@both
async def test_structured_output_is_the_sdks_parsed_object(
    http_sidecar: Running, client: openai.AsyncOpenAI, model: str
) -> None:
    parsed = await client.chat.completions.parse(model=model, messages=user("who?"), response_format=Person)
    person = parsed.choices[0].message.parsed
    assert isinstance(person, Person)
    body = sent(http_sidecar, model)[-1]["body"]
    schema = Person.model_json_schema()
    if model == "gpt":
        assert body["response_format"]["json_schema"]["schema"]["required"] == schema["required"]
    else:
        assert '"required":["name","age"]' in body["system"]


async def test_a_reply_that_is_not_the_json_asked_for_is_corrected_beneath_the_sdk(
    http_sidecar: Running, client: openai.AsyncOpenAI
) -> None:
    script(http_sidecar, "gpt", {"preset": "bad_json"})
    parsed = await client.chat.completions.parse(model="gpt", messages=user("who?"), response_format=Person)
    assert isinstance(parsed.choices[0].message.parsed, Person)
    ext = extension(parsed)
    assert ext["corrections"] == 1
    assert ext["attempts"] == 2


async def test_a_route_id_is_a_model_and_the_reply_names_who_served_it(
    http_sidecar: Running, client: openai.AsyncOpenAI
) -> None:
    script(http_sidecar, "gpt-a", {"preset": "insufficient_quota"})
    reply = await client.chat.completions.create(model="fallback", messages=user("hi"))
    assert reply.model == "fake-claude"  # the deployment that served, as its provider named itself
    ext = extension(reply)
    assert ext["served_by"] == "claude"
    hops = [(h["deployment"], h["kind"]) for h in ext["hops"]]
    assert hops == [("gpt-a", "QUOTA_EXHAUSTED"), ("claude", "UNSPECIFIED")]


UNAVAILABLE = {"status": 503, "body": {"error": {"message": "down", "type": "server_error"}}}
ONE_TRY = {"x-sidecar-upstream-retries": "0"}
"""No retry on the primary: its 503 moves the route on at once (no backoff wait on the fake clock)."""


async def test_after_failover_the_reply_names_the_model_that_served_as_openai_would(
    http_sidecar: Running, client: openai.AsyncOpenAI
) -> None:
    script(http_sidecar, "gpt-a", UNAVAILABLE)
    reply = await client.chat.completions.create(model="fallback", messages=user("hi"), extra_headers=ONE_TRY)
    over_grpc_usage = reply.usage
    assert reply.model == "fake-claude"
    ext = extension(reply)
    assert ext["served_by"] == "claude"
    assert ext["response_model"] == "fake-claude"
    assert [(h["deployment"], h["kind"]) for h in ext["hops"]] == [
        ("gpt-a", "UPSTREAM_RETRIES_EXHAUSTED"),
        ("claude", "UNSPECIFIED"),
    ]
    assert over_grpc_usage is not None
    assert over_grpc_usage.prompt_tokens > 0  # the serving attempt's; the 503 spent none
    assert ext["total_usage"] == {
        "input_tokens": over_grpc_usage.prompt_tokens,
        "output_tokens": over_grpc_usage.completion_tokens,
    }
    assert len(sent(http_sidecar, "gpt-a")) == 1


async def test_a_streamed_failover_carries_the_serving_attempts_usage_and_every_hop(
    http_sidecar: Running, client: openai.AsyncOpenAI
) -> None:
    script(http_sidecar, "gpt-a", UNAVAILABLE)
    stream = await client.chat.completions.create(
        model="fallback",
        messages=user("hi"),
        stream=True,
        stream_options={"include_usage": True},
        extra_headers=ONE_TRY,
    )
    chunks = [c async for c in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "You said: hi"
    assert {c.model for c in chunks} == {"fake-claude"}  # every chunk, the first included, names who served
    usage = chunks[-1].usage
    assert usage is not None
    assert usage.prompt_tokens > 0
    ext = extension(chunks[-1])
    assert ext["served_by"] == "claude"
    assert ext["response_model"] == "fake-claude"
    assert [h["deployment"] for h in ext["hops"]] == ["gpt-a", "claude"]
    assert ext["total_usage"] == {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens}


async def test_configured_secrets_are_masked_in_every_answer(http_sidecar: Running, client: openai.AsyncOpenAI) -> None:
    script(http_sidecar, "gpt", {"preset": "reply", "text": f"the key is {SECRET}"})
    script(http_sidecar, "gpt", {"preset": "reply", "text": f"the key is {SECRET}"})
    whole = await client.chat.completions.create(model="gpt", messages=user("hi"))
    assert SECRET not in whole.model_dump_json()
    assert "redacted" in (whole.choices[0].message.content or "")
    stream = await client.chat.completions.create(model="gpt", messages=user("hi"), stream=True)
    chunks = [c async for c in stream]
    assert all(SECRET not in c.model_dump_json() for c in chunks)


# ---------------------------------------------------------------- what issue 21 carries (to an OpenAI-format model)

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000" + "1f15c489")
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()
PDF_DATA = "data:application/pdf;base64," + base64.b64encode(b"%PDF-1.7 minimal").decode()
SHOWN: Any = [
    {"type": "text", "text": "What are these?"},
    {"type": "image_url", "image_url": {"url": PNG_URL, "detail": "low"}},
    {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
    {"type": "file", "file": {"filename": "report.pdf", "file_data": PDF_DATA}},
]


async def streamed_text(stream: Any) -> tuple[str, list[Any]]:
    chunks = [c async for c in stream]
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices), chunks


@pytest.mark.parametrize("stream", [False, True])
async def test_an_image_and_a_file_reach_the_provider_as_the_sdk_sent_them(
    http_sidecar: Running, client: openai.AsyncOpenAI, stream: bool
) -> None:
    messages: Any = [{"role": "user", "content": SHOWN}]
    answer = await client.chat.completions.create(model="gpt", messages=messages, stream=stream)
    if stream:
        text, _ = await streamed_text(answer)
    else:
        assert isinstance(answer, ChatCompletion)
        text = answer.choices[0].message.content or ""
    assert text == "You said: What are these?"
    assert sent(http_sidecar, "gpt")[-1]["body"]["messages"] == messages  # every part, as it came


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_choice_required_makes_the_call_a_tool_call(
    http_sidecar: Running, client: openai.AsyncOpenAI, stream: bool
) -> None:
    tools: Any = [{"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}},
                  {"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]  # fmt: skip
    choice: Any = {"type": "function", "function": {"name": "weather"}}
    for tool_choice, called in (("required", "now"), (choice, "weather")):
        answer = await client.chat.completions.create(
            model="gpt", messages=user("hi"), tools=tools, tool_choice=tool_choice, parallel_tool_calls=False,
            stream=stream,
        )  # fmt: skip
        if stream:
            _, chunks = await streamed_text(answer)
            names = [t.function.name for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or []
                     if t.function and t.function.name]  # fmt: skip
        else:
            assert isinstance(answer, ChatCompletion)
            names = [t.function.name for t in answer.choices[0].message.tool_calls or [] if t.type == "function"]
        assert names == [called]
        body = sent(http_sidecar, "gpt")[-1]["body"]
        assert (body["tool_choice"], body["parallel_tool_calls"]) == (tool_choice, False)


@pytest.mark.parametrize("stream", [False, True])
async def test_stop_and_reasoning_effort_are_sent_and_cached_and_reasoning_tokens_come_back(
    http_sidecar: Running, client: openai.AsyncOpenAI, stream: bool
) -> None:
    usage = {"cache_read_input_tokens": 1024, "reasoning_tokens": 48}
    script(http_sidecar, "gpt", {"preset": "reply", "text": "Sure.", "usage": usage})
    answer = await client.chat.completions.create(
        model="gpt", messages=user("x" * 5000), stop=["\n", "END"], reasoning_effort="high", seed=3, top_p=0.5,
        user="u-7", max_completion_tokens=100, stream=stream, stream_options={"include_usage": True} if stream
        else openai.omit,
    )  # fmt: skip
    if stream:
        text, chunks = await streamed_text(answer)
        got = chunks[-1].usage
    else:
        assert isinstance(answer, ChatCompletion)
        text, got = answer.choices[0].message.content or "", answer.usage
    assert text == "Sure."
    assert got is not None
    assert got.prompt_tokens_details is not None
    assert got.completion_tokens_details is not None
    assert (got.prompt_tokens_details.cached_tokens, got.completion_tokens_details.reasoning_tokens) == (1024, 48)
    assert got.prompt_tokens > 1024
    body = sent(http_sidecar, "gpt")[-1]["body"]
    keys = ("stop", "reasoning_effort", "seed", "top_p", "user", "max_completion_tokens")
    assert {k: body[k] for k in keys} == {"stop": ["\n", "END"], "reasoning_effort": "high", "seed": 3,
                                          "top_p": 0.5, "user": "u-7", "max_completion_tokens": 100}  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"messages": [{"role": "system", "content": "be brief", "name": "ops"}, *user("hi")]}, "messages[0].name"),
        ({"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "file-abc"}}]}]},
         "messages[0].content[0].file.file_id"),
        ({"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "x",
                                                                                           "format": "wav"}}]}]},
         "messages[0].content[0].type"),
    ],
)  # fmt: skip
async def test_a_key_no_element_can_carry_is_bad_request_naming_it(
    http_sidecar: Running, client: openai.AsyncOpenAI, extra: dict[str, Any], param: str
) -> None:
    kwargs: Any = {"model": "gpt", "messages": user("hi"), **extra}  # a key it does not interpret is carried
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(**kwargs)
    assert caught.value.param == param
    assert caught.value.type == "invalid_request_error"
    assert sidecar_of(caught.value)["kind"] == "INVALID_INPUT"
    assert http_sidecar.provider.requests() == []


# ---------------------------------------------------------------- streams


@both
async def test_a_stream_is_chunks_ending_in_done_with_the_usage_asked_for(
    http_sidecar: Running, client: openai.AsyncOpenAI, model: str
) -> None:
    async with httpx.AsyncClient(base_url=base_url(http_sidecar)) as raw:
        body = {"model": model, "messages": user("one two three"), "stream": True,
                "stream_options": {"include_usage": True}}  # fmt: skip
        answered = await raw.post("/chat/completions", json=body)
    assert answered.status_code == 200
    assert answered.headers["content-type"].startswith("text/event-stream")
    datas = [line.removeprefix("data: ") for line in answered.text.splitlines() if line.startswith("data: ")]
    assert datas[-1] == "[DONE]"
    chunks = [json.loads(d) for d in datas[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "You said: one two three"
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert finish == ["stop"]
    usage = chunks[-1]
    assert usage["choices"] == []
    assert usage["usage"]["completion_tokens"] > 0
    assert usage["sidecar"]["attempts"] == 1

    stream = await client.chat.completions.create(model=model, messages=user("one two three"), stream=True)
    sdk_chunks = [c async for c in stream]
    assert "".join(c.choices[0].delta.content or "" for c in sdk_chunks if c.choices) == text
    assert extension(sdk_chunks[-1])["attempts"] == 1  # without include_usage: on the finish chunk
    assert all(c.usage is None for c in sdk_chunks)


@both
async def test_a_streamed_tool_call_is_fragments_the_sdk_joins(
    http_sidecar: Running, client: openai.AsyncOpenAI, model: str
) -> None:
    (tool,) = [t for t in await http_sidecar.client.list_tools() if t.definition.name == "search"]
    tools: Any = [json.loads(tool.openai_json)]
    script(http_sidecar, model, {"delta_chars": 3})
    stream = await client.chat.completions.create(model=model, messages=user("find"), tools=tools, stream=True)
    pieces = [c.choices[0].delta.tool_calls for c in [c async for c in stream] if c.choices]
    fragments = [p for ps in pieces if ps for p in ps]
    assert len(fragments) > 1
    assert fragments[0].id
    assert fragments[0].function is not None
    assert fragments[0].function.name == "search"
    assert all(f.index == 0 for f in fragments)
    assert all(f.id is None for f in fragments[1:])
    joined = "".join((f.function.arguments or "") if f.function else "" for f in fragments)
    assert json.loads(joined) == {"query": "find"}


async def test_a_stream_that_fails_before_its_first_delta_is_the_sdks_exception(
    http_sidecar: Running, client: openai.AsyncOpenAI
) -> None:
    script(http_sidecar, "gpt", *[{"preset": "rate_limit", "retry_after": "2"}] * 4)
    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(model="gpt", messages=user("hi"), stream=True)
    assert caught.value.status_code == 429
    assert caught.value.response.headers["x-sidecar-attempts"] == "4"
    assert sidecar_of(caught.value)["kind"] == "UPSTREAM_RETRIES_EXHAUSTED"


async def test_a_fault_after_deltas_ends_the_stream_with_the_sdks_api_error(
    http_sidecar: Running, client: openai.AsyncOpenAI
) -> None:
    script(http_sidecar, "gpt", {"stream_fault": "overloaded", "after_deltas": 2})
    stream = await client.chat.completions.create(
        model="gpt", messages=user("one two three four"), stream=True, extra_headers={"x-sidecar-mid-stream": "fail"}
    )
    texts: list[str] = []

    async def read() -> None:
        async for chunk in stream:
            texts.extend(c.delta.content or "" for c in chunk.choices)

    with pytest.raises(openai.APIError) as caught:
        await read()
    error = caught.value
    assert not isinstance(error, openai.APIStatusError)  # in a stream: the SDK's APIError, its body the error
    assert error.type == "server_error"
    assert error.code == "stream_interrupted"
    ext = sidecar_of(error)
    assert ext["kind"] == "STREAM_INTERRUPTED"
    assert ext["failure"]["stream"]["partial_text"] == "".join(texts) == "You said:"
    assert len(sent(http_sidecar, "gpt")) == 1  # mid_stream fail: nothing re-sent behind a caller that holds text


async def test_a_caller_that_opts_in_gets_the_restart_as_a_sidecar_chunk(
    http_sidecar: Running, client: openai.AsyncOpenAI
) -> None:
    script(http_sidecar, "gpt", {"stream_fault": "overloaded", "after_deltas": 2}, {})
    stream = await client.chat.completions.create(
        model="gpt",
        messages=user("one two"),
        stream=True,
        extra_headers={"x-sidecar-mid-stream": "restart"},
    )
    held: list[str] = []
    restarts = []
    async for chunk in stream:
        ext = (chunk.model_extra or {}).get("sidecar") or {}
        if "restart" in ext:
            restarts.append(ext["restart"])
            held.clear()  # what a caller that opted in does
        held.extend(c.delta.content or "" for c in chunk.choices)
    assert "".join(held) == "You said: one two"
    (restart,) = restarts
    assert restart["cause"] == "upstream_fault"
    assert restart["attempt"] == 2


async def test_a_correction_after_deltas_without_the_opt_in_is_stream_interrupted(
    http_sidecar: Running, client: openai.AsyncOpenAI
) -> None:
    script(http_sidecar, "gpt", {"preset": "bad_json"})
    stream = await client.chat.completions.create(
        model="gpt",
        messages=user("who?"),
        stream=True,
        response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": Person.model_json_schema()}},
    )
    with pytest.raises(openai.APIError) as caught:
        async for _chunk in stream:
            pass
    ext = sidecar_of(caught.value)
    assert ext["kind"] == "STREAM_INTERRUPTED"
    assert "cannot take back the deltas it sent" in ext["message"]
    assert "x-sidecar-mid-stream: restart" in ext["message"]


# ---------------------------------------------------------------- failures, as the SDK's exception classes


def sidecar_of(error: openai.APIError) -> dict[str, Any]:
    assert isinstance(error.body, dict)
    value = error.body["sidecar"]
    assert isinstance(value, dict)
    return value


@pytest.mark.parametrize(
    ("steps", "cls", "status", "kind", "kind_type", "code"),
    [
        ([{"preset": "rate_limit"}] * 4, openai.RateLimitError, 429, "UPSTREAM_RETRIES_EXHAUSTED",
         "rate_limit_error", "rate_limit_exceeded"),
        ([{"preset": "overloaded"}] * 4, openai.InternalServerError, 503, "UPSTREAM_RETRIES_EXHAUSTED",
         "server_error", "overloaded"),
        ([{"preset": "server_error"}] * 4, openai.InternalServerError, 503, "UPSTREAM_RETRIES_EXHAUSTED",
         "server_error", "upstream_unavailable"),
        ([{"preset": "insufficient_quota"}], openai.RateLimitError, 429, "QUOTA_EXHAUSTED",
         "insufficient_quota", "insufficient_quota"),
        ([{"preset": "context_too_long"}], openai.BadRequestError, 400, "CONTEXT_OVERFLOW",
         "invalid_request_error", "context_length_exceeded"),
        ([{"preset": "invalid_key"}], openai.InternalServerError, 502, "UNAUTHORIZED",
         "server_error", "upstream_unauthorized"),
        ([{"preset": "model_not_found"}], openai.NotFoundError, 404, "MODEL_NOT_FOUND",
         "invalid_request_error", "model_not_found"),
        ([{"preset": "refusal"}], openai.BadRequestError, 400, "PROVIDER_REFUSAL",
         "invalid_request_error", "content_policy_violation"),
    ],
)  # fmt: skip
@both
async def test_each_failure_is_the_sdks_own_exception_class_with_the_sidecars_failure(
    http_sidecar: Running,
    client: openai.AsyncOpenAI,
    model: str,
    steps: list[dict[str, Any]],
    cls: type[openai.APIStatusError],
    status: int,
    kind: str,
    kind_type: str,
    code: str,
) -> None:
    script(http_sidecar, model, *steps)
    with pytest.raises(cls) as caught:
        await client.chat.completions.create(model=model, messages=user("hi"))
    error = caught.value
    assert error.status_code == status
    assert error.type == kind_type
    assert error.code == code
    ext = sidecar_of(error)
    assert ext["kind"] == kind
    assert ext["correctable"] is False
    assert ext["explanation"] == f"{ext['message']}\n{ext['retry_line']}"
    assert ext["message"] in error.message
    assert ext["retry_line"].startswith("[This error is not correctable")
    assert ext["attempts"] == len(steps)
    assert ext["failure"]["kind"] == f"FAILURE_KIND_{kind}"
    assert error.response.headers["x-sidecar-attempts"] == str(len(steps))
    assert error.response.headers["x-should-retry"] == "false"
    assert SECRET not in error.response.text


async def test_a_wait_the_failure_knows_is_retry_after(http_sidecar: Running, client: openai.AsyncOpenAI) -> None:
    script(http_sidecar, "gpt", *[{"preset": "rate_limit", "retry_after": "7"}] * 4)
    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(model="gpt", messages=user("hi"))
    headers = caught.value.response.headers
    assert headers["retry-after"] == "7"
    assert headers["retry-after-ms"] == "7000"
    assert sidecar_of(caught.value)["retry_after_s"] == 7


async def test_an_unknown_model_is_not_found(client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        await client.chat.completions.create(model="nope", messages=user("hi"))
    assert caught.value.code == "model_not_found"
    assert "Models that exist: claude, fallback, gpt, gpt-a" in caught.value.message
    assert sidecar_of(caught.value)["attempts"] == 0


async def test_the_callers_deadline_header_is_the_calls_deadline(
    http_sidecar: Running, client: openai.AsyncOpenAI
) -> None:
    script(http_sidecar, "gpt", {"preset": "rate_limit", "retry_after": "12"})  # within interactive's 15 s wait
    with pytest.raises(openai.InternalServerError) as caught:
        await client.chat.completions.create(
            model="gpt", messages=user("hi"), extra_headers={"x-sidecar-timeout-s": "5"}
        )
    assert caught.value.status_code == 504
    assert caught.value.type == "timeout"
    assert sidecar_of(caught.value)["kind"] == "JOB_TIMEOUT"
    assert http_sidecar.clock.sleeps == []  # it did not wait 12 s it did not have


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "gpt", "messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role"),
        ({"model": "gpt", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
         "messages[0].content[0].image_url"),
        ({"model": "gpt", "messages": [{"role": "user", "content": "hi"}], "n": 2}, "n"),
        ({"model": "gpt", "messages": [{"role": "user", "content": "hi"}], "tool_choice": "required"}, "tool_choice"),
        ({"model": "gpt", "messages": [{"role": "user", "content": "hi"}], "stream": "yes"}, "stream"),
        ({"model": 7, "messages": []}, "model"),
    ],
)  # fmt: skip
async def test_a_request_the_sidecar_cannot_carry_is_bad_request_naming_the_field(
    http_sidecar: Running, client: openai.AsyncOpenAI, body: dict[str, Any], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await client.post("/chat/completions", body=body, cast_to=httpx.Response)
    assert caught.value.param == param
    ext = sidecar_of(caught.value)
    assert ext["kind"] == "INVALID_INPUT"
    assert ext["correctable"] is True
    assert http_sidecar.provider.requests() == []


@pytest.mark.parametrize(
    ("headers", "param"),
    [
        ({"x-sidecar-timeout-s": "soon"}, "header x-sidecar-timeout-s"),
        ({"x-sidecar-timeout-s": "0"}, "header x-sidecar-timeout-s"),
        ({"x-sidecar-upstream-retries": "-1"}, "header x-sidecar-upstream-retries"),
        ({"x-sidecar-mid-stream": "sometimes"}, "header x-sidecar-mid-stream"),
    ],
)
async def test_a_bad_sidecar_header_is_bad_request_naming_it(
    client: openai.AsyncOpenAI, headers: dict[str, str], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(model="gpt", messages=user("hi"), extra_headers=headers)
    assert caught.value.param == param


async def test_a_body_that_is_not_json_or_too_large_is_refused_before_any_work(start_sidecar: Start) -> None:
    r = await start_sidecar(http=HTTP, server={"max_message_bytes": 4096})
    async with httpx.AsyncClient(base_url=base_url(r)) as raw:
        json_type = {"content-type": "application/json"}
        garbled = await raw.post("/chat/completions", content=b"{not json", headers=json_type)
        large = await raw.post("/chat/completions", json={"model": "gpt", "messages": user("x" * 5000)})
    assert garbled.status_code == 400
    assert garbled.json()["error"]["param"] == "body"
    assert large.status_code == 413
    assert large.json()["error"]["sidecar"]["kind"] == "INVALID_INPUT"
    assert r.provider.requests() == []


async def test_the_callers_budget_header_overrides_the_configured_one(
    http_sidecar: Running, client: openai.AsyncOpenAI
) -> None:
    script(http_sidecar, "gpt", *[{"preset": "rate_limit"}] * 4)
    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(
            model="gpt", messages=user("hi"), extra_headers={"x-sidecar-upstream-retries": "1"}
        )
    assert caught.value.response.headers["x-sidecar-attempts"] == "2"


async def holding_the_one_slot(r: Running) -> asyncio.Future[Any]:
    """A gRPC call that holds the one slot (server.max_in_flight 1) until the test cancels it: the
    provider never answers it (fake-claude hangs), and it is returned once it is out."""
    r.provider.script("fake-claude", [{"fault": "hang"}])
    slow = asyncio.ensure_future(r.client.call_model("claude", [sc.user("hold")]))
    for _ in range(2000):
        if r.provider.requests(model="fake-claude"):
            return slow
        assert not slow.done(), slow
        await asyncio.sleep(0.01)
    raise AssertionError("the holding call never reached the provider")


async def test_a_call_past_the_in_flight_limit_is_shed_as_a_retryable_503(start_sidecar: Start) -> None:
    r = await start_sidecar(http=HTTP, server={"max_in_flight": 1})
    slow = await holding_the_one_slot(r)
    async with openai.AsyncOpenAI(base_url=base_url(r), api_key="unused", max_retries=0) as c:
        with pytest.raises(openai.InternalServerError) as caught:
            await c.chat.completions.create(model="gpt", messages=user("hi"))
    slow.cancel()
    await asyncio.gather(slow, return_exceptions=True)
    assert caught.value.status_code == 503
    assert caught.value.code == "overloaded"
    assert caught.value.response.headers["x-should-retry"] == "true"
    assert caught.value.response.headers["retry-after"] == "1"
    assert sidecar_of(caught.value)["kind"] == "UPSTREAM_THROTTLE"
    assert r.provider.requests(model="fake-gpt") == []


async def test_without_the_sidecars_token_the_sdk_raises_authentication_error(start_sidecar: Start) -> None:
    token = "agent-token-0123456789abcdef"
    r = await start_sidecar(http=HTTP, server={"auth": {"tokens": [token]}})
    async with openai.AsyncOpenAI(base_url=base_url(r), api_key="wrong", max_retries=0) as c:
        with pytest.raises(openai.AuthenticationError):
            await c.chat.completions.create(model="gpt", messages=user("hi"))
    async with openai.AsyncOpenAI(base_url=base_url(r), api_key=token, max_retries=0) as c:
        reply = await c.chat.completions.create(model="gpt", messages=user("hi"))
    assert reply.choices[0].message.content == "You said: hi"


# ---------------------------------------------------------------- the model list


async def test_the_model_list_is_the_catalog_and_the_routes(client: openai.AsyncOpenAI) -> None:
    listed = [m async for m in client.models.list()]
    assert [m.id for m in listed] == ["gpt", "claude", "gpt-a", "fallback"]
    assert listed[0].owned_by == "oai"
    route = extension(listed[3])
    assert [d["id"] for d in route["deployments"]] == ["gpt-a", "claude"]
    one = await client.models.retrieve("claude")
    assert extension(one)["wire_format"] == "anthropic"
    with pytest.raises(openai.NotFoundError):
        await client.models.retrieve("nope")


# ---------------------------------------------------------------- the trace


async def test_the_call_continues_the_callers_trace_under_a_server_span(
    http_sidecar: Running, client: openai.AsyncOpenAI, otel: InMemoryTelemetry
) -> None:
    with otel.tracer_provider.get_tracer("agent").start_as_current_span("agent.turn") as agent:
        headers: dict[str, str] = {"x-sidecar-job-id": "job-42", "x-sidecar-workflow-id": "wf-7"}
        propagate.inject(headers)
    script(http_sidecar, "gpt", {"preset": "rate_limit"})
    await client.chat.completions.create(model="gpt", messages=user("hi"), extra_headers=headers)
    t = await settled(otel, "POST /v1/chat/completions")
    server, chat = t.one("POST /v1/chat/completions"), t.one("chat gpt")
    assert server.kind is trace.SpanKind.SERVER
    assert server.parent is not None
    assert server.parent.span_id == agent.get_span_context().span_id
    assert t.parent(chat) is server
    assert [s.name for s in t.children(chat)].count("POST") == 2
    assert {s.context.trace_id for s in otel.spans()} == {agent.get_span_context().trace_id}
    assert attrs(server)[n.HTTP_ROUTE] == "/v1/chat/completions"
    assert attrs(server)[n.HTTP_STATUS] == 200
    assert attrs(chat)[n.JOB_ID] == "job-42"
    assert attrs(chat)[n.WORKFLOW_ID] == "wf-7"


async def test_a_stream_keeps_its_server_span_open_to_its_last_chunk(
    http_sidecar: Running, client: openai.AsyncOpenAI, otel: InMemoryTelemetry
) -> None:
    stream = await client.chat.completions.create(model="claude", messages=user("hi"), stream=True)
    _ = [c async for c in stream]
    t = await settled(otel, "POST /v1/chat/completions")  # it ends once the last chunk went out
    server, chat = t.one("POST /v1/chat/completions"), t.one("chat claude")
    assert t.parent(chat) is server
    assert attrs(chat)[n.STREAMED] is True
    assert (server.end_time or 0) >= (chat.end_time or 0)


async def test_a_failure_marks_the_server_span_with_its_status(
    http_sidecar: Running, client: openai.AsyncOpenAI, otel: InMemoryTelemetry
) -> None:
    script(http_sidecar, "gpt", *[{"preset": "overloaded"}] * 4)
    with pytest.raises(openai.InternalServerError):
        await client.chat.completions.create(model="gpt", messages=user("hi"))
    server = (await settled(otel, "POST /v1/chat/completions")).one("POST /v1/chat/completions")
    assert attrs(server)[n.HTTP_STATUS] == 503
    assert attrs(server)[n.ERROR_TYPE] == "503"
    assert server.status.status_code is trace.StatusCode.ERROR
