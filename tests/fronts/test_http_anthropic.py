"""The Anthropic-compatible front, with the official ``anthropic`` SDK as its client.

As tests/fronts/test_http_openai.py does for the OpenAI front: a sidecar with ``http.listen``, the fake
provider behind it (either wire format), and what the SDK reads: its ``Message``, its stream
helpers, its parsed structured output, and each failure as its own exception class.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx
import pytest
import pytest_asyncio
from pydantic import BaseModel

from sidecar.telemetry.testing import InMemoryTelemetry, install_in_memory
from tests.conftest import Running, Start
from tests.fronts.test_http_openai import (
    HTTP,
    MODELS,
    ONE_TRY,
    ROUTES,
    SECRET,
    UNAVAILABLE,
    both,
    extension,
    script,
    sent,
)
from tests.processes.test_telemetry import settled


def base_url(r: Running) -> str:
    assert r.app.http is not None
    return f"http://127.0.0.1:{r.app.http.port}"


@pytest_asyncio.fixture
async def http_sidecar(start_sidecar: Start) -> Running:
    return await start_sidecar(http=HTTP, models=ROUTES)


@pytest_asyncio.fixture
async def client(http_sidecar: Running) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(base_url=base_url(http_sidecar), api_key="unused", max_retries=0) as c:
        yield c


@pytest.fixture
def otel() -> InMemoryTelemetry:
    telemetry = install_in_memory()
    telemetry.clear()
    return telemetry


def user(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


def sidecar_of(error: anthropic.APIStatusError) -> dict[str, Any]:
    assert isinstance(error.body, dict)
    value = error.body["error"]["sidecar"]
    assert isinstance(value, dict)
    return value


# ---------------------------------------------------------------- replies


@both
async def test_a_plain_reply_is_a_message_with_the_attempts(
    http_sidecar: Running, client: anthropic.AsyncAnthropic, model: str
) -> None:
    raw = await client.messages.with_raw_response.create(
        model=model, max_tokens=100, system="be brief", messages=user("hello there")
    )
    message = await raw.parse()
    assert raw.headers["x-sidecar-attempts"] == "1"
    assert message.type == "message"
    assert message.role == "assistant"
    assert message.model == MODELS[model]  # the model as its provider reported it, as Anthropic's API says
    (block,) = message.content
    assert block.type == "text"
    assert block.text == "You said: hello there"
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens > 0
    assert extension(message)["served_by"] == model
    body = sent(http_sidecar, model)[-1]["body"]
    assert body["max_tokens"] == 100
    assert (body["system"] if model == "claude" else body["messages"][0]["content"]) == "be brief"


@both
async def test_a_stream_is_what_the_sdks_stream_helper_accumulates(
    http_sidecar: Running, client: anthropic.AsyncAnthropic, model: str
) -> None:
    async with client.messages.stream(model=model, max_tokens=100, messages=user("one two three")) as stream:
        pieces = [text async for text in stream.text_stream]
        final = await stream.get_final_message()
    assert len(pieces) > 1
    assert "".join(pieces) == "You said: one two three"
    assert [b.type for b in final.content] == ["text"]
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens > 0


@both
async def test_a_tool_use_and_its_result_make_a_round_streamed_and_whole(
    http_sidecar: Running, client: anthropic.AsyncAnthropic, model: str
) -> None:
    (tool,) = [t for t in await http_sidecar.client.list_tools() if t.definition.name == "search"]
    tools: Any = [json.loads(tool.anthropic_json)]
    messages: list[Any] = user("find retries")
    script(http_sidecar, model, {"delta_chars": 3})
    async with client.messages.stream(model=model, max_tokens=200, messages=messages, tools=tools) as stream:
        first = await stream.get_final_message()
    assert first.stop_reason == "tool_use"
    (use,) = [b for b in first.content if b.type == "tool_use"]
    assert use.name == "search"
    assert use.input == {"query": "find retries"}
    outcome = await http_sidecar.client.execute_tool("search", json.dumps(use.input), call_id=use.id)
    messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]})
    messages.append(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": outcome.model_text}]}
    )
    second = await client.messages.create(model=model, max_tokens=200, messages=messages, tools=tools)
    block = second.content[0]
    assert block.type == "text"
    assert block.text.startswith("Based on the tool result")


class Person(BaseModel):
    name: str
    age: int


@both
async def test_structured_output_is_the_sdks_parsed_output(
    http_sidecar: Running, client: anthropic.AsyncAnthropic, model: str
) -> None:
    script(http_sidecar, model, {"preset": "bad_json"})
    parsed = await client.messages.parse(model=model, max_tokens=200, messages=user("who?"), output_format=Person)
    assert isinstance(parsed.parsed_output, Person)
    assert extension(parsed)["corrections"] == 1


async def test_a_route_id_is_a_model(http_sidecar: Running, client: anthropic.AsyncAnthropic) -> None:
    script(http_sidecar, "gpt-a", {"preset": "insufficient_quota"})
    message = await client.messages.create(model="fallback", max_tokens=50, messages=user("hi"))
    assert extension(message)["served_by"] == "claude"


async def test_the_model_list_is_in_anthropics_shape(client: anthropic.AsyncAnthropic) -> None:
    listed = [m async for m in client.models.list()]
    assert [m.id for m in listed] == ["gpt", "claude", "gpt-a", "fallback"]
    assert listed[0].type == "model"
    one = await client.models.retrieve("claude")
    assert one.id == "claude"
    with pytest.raises(anthropic.NotFoundError) as caught:
        await client.models.retrieve("nope")
    assert caught.value.type == "not_found_error"


# ---------------------------------------------------------------- failures


@pytest.mark.parametrize(
    ("steps", "cls", "status", "kind", "error_type"),
    [
        ([{"preset": "rate_limit"}] * 4, anthropic.RateLimitError, 429, "UPSTREAM_RETRIES_EXHAUSTED",
         "rate_limit_error"),
        ([{"preset": "overloaded"}] * 4, anthropic.OverloadedError, 529, "UPSTREAM_RETRIES_EXHAUSTED",
         "overloaded_error"),
        ([{"preset": "server_error"}] * 4, anthropic.ServiceUnavailableError, 503, "UPSTREAM_RETRIES_EXHAUSTED",
         "api_error"),
        ([{"preset": "insufficient_quota"}], anthropic.PaymentRequiredError, 402, "QUOTA_EXHAUSTED", "billing_error"),
        ([{"preset": "context_too_long"}], anthropic.BadRequestError, 400, "CONTEXT_OVERFLOW",
         "invalid_request_error"),
        ([{"preset": "invalid_key"}], anthropic.InternalServerError, 502, "UNAUTHORIZED", "api_error"),
        ([{"preset": "model_not_found"}], anthropic.NotFoundError, 404, "MODEL_NOT_FOUND", "not_found_error"),
    ],
)  # fmt: skip
@both
async def test_each_failure_is_the_sdks_own_exception_class_with_the_sidecars_failure(
    http_sidecar: Running,
    client: anthropic.AsyncAnthropic,
    model: str,
    steps: list[dict[str, Any]],
    cls: type[anthropic.APIStatusError],
    status: int,
    kind: str,
    error_type: str,
) -> None:
    script(http_sidecar, model, *steps)
    with pytest.raises(cls) as caught:
        await client.messages.create(model=model, max_tokens=50, messages=user("hi"))
    error = caught.value
    assert error.status_code == status
    assert error.type == error_type
    assert isinstance(error.body, dict)
    assert error.body["type"] == "error"
    ext = sidecar_of(error)
    assert ext["kind"] == kind
    assert ext["attempts"] == len(steps)
    assert error.response.headers["x-sidecar-attempts"] == str(len(steps))
    assert error.response.headers["x-should-retry"] == "false"
    assert SECRET not in error.response.text


async def test_the_deadline_header_is_a_gateway_timeout(
    http_sidecar: Running, client: anthropic.AsyncAnthropic
) -> None:
    script(http_sidecar, "claude", {"preset": "overloaded", "retry_after": "12"})  # within interactive's 15 s wait
    with pytest.raises(anthropic.GatewayTimeoutError) as caught:
        await client.messages.create(
            model="claude", max_tokens=50, messages=user("hi"), extra_headers={"x-sidecar-timeout-s": "5"}
        )
    assert caught.value.type == "timeout_error"
    assert sidecar_of(caught.value)["kind"] == "JOB_TIMEOUT"


@pytest.mark.parametrize(
    ("body", "parameter"),
    [
        ({"model": "claude", "max_tokens": 5, "messages": [{"role": "system", "content": "hi"}]}, "messages[0].role"),
        ({"model": "claude", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image"}]}]},
         "messages[0].content[0].source"),
        ({"model": "claude", "max_tokens": 5, "messages": user("hi"), "tool_choice": {"type": "any"}},
         "tool_choice.type"),  # carried since issue 21: refused for naming no tool to call, by the caller's key
        ({"model": "claude", "max_tokens": 5, "messages": user("hi"), "output_config": {"format": {"type": "xml"}}},
         "output_config.format.type"),
    ],
)  # fmt: skip
async def test_a_request_the_sidecar_cannot_carry_is_bad_request_naming_the_field(
    http_sidecar: Running, client: anthropic.AsyncAnthropic, body: dict[str, Any], parameter: str
) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        await client.post("/v1/messages", body=body, cast_to=httpx.Response)
    assert caught.value.type == "invalid_request_error"
    ext = sidecar_of(caught.value)
    assert ext["kind"] == "INVALID_INPUT"
    assert ext["failure"]["invalid_input"]["parameter"] == parameter
    assert http_sidecar.provider.requests() == []


async def test_a_stream_that_fails_before_its_first_delta_is_the_sdks_exception(
    http_sidecar: Running, client: anthropic.AsyncAnthropic
) -> None:
    script(http_sidecar, "claude", *[{"preset": "overloaded"}] * 4)
    with pytest.raises(anthropic.OverloadedError):
        async with client.messages.stream(model="claude", max_tokens=50, messages=user("hi")) as stream:
            await stream.get_final_message()


async def test_a_fault_after_deltas_is_the_formats_error_event(
    http_sidecar: Running, client: anthropic.AsyncAnthropic
) -> None:
    script(http_sidecar, "claude", {"stream_fault": "overloaded", "after_deltas": 2})
    texts: list[str] = []
    fail = {"x-sidecar-mid-stream": "fail"}  # by default the front continues the stream instead

    async def read() -> None:
        messages = user("one two three")
        async with client.messages.stream(
            model="claude", max_tokens=50, messages=messages, extra_headers=fail
        ) as stream:
            async for text in stream.text_stream:
                texts.append(text)

    with pytest.raises(anthropic.APIStatusError) as caught:
        await read()
    error = caught.value
    assert error.type == "api_error"
    ext = sidecar_of(error)
    assert ext["kind"] == "STREAM_INTERRUPTED"
    assert ext["failure"]["stream"]["partial_text"] == "".join(texts) == "You said:"


async def test_a_caller_that_opts_in_gets_the_restart_as_a_sidecar_event(http_sidecar: Running) -> None:
    script(http_sidecar, "claude", {"stream_fault": "overloaded", "after_deltas": 2}, {})
    body = {"model": "claude", "max_tokens": 50, "messages": user("one two"), "stream": True}
    headers = {"x-sidecar-mid-stream": "restart", "anthropic-version": "2023-06-01"}
    async with httpx.AsyncClient(base_url=base_url(http_sidecar)) as raw:
        answered = await raw.post("/v1/messages", json=body, headers=headers)
    names = [line.removeprefix("event: ") for line in answered.text.splitlines() if line.startswith("event: ")]
    assert names.count("sidecar_restart") == 1
    after = names[names.index("sidecar_restart") + 1 :]
    assert after[0] == "content_block_start"
    assert after[-2:] == ["message_delta", "message_stop"]


async def test_the_anthropic_sdks_api_key_is_the_sidecars_token(start_sidecar: Start) -> None:
    token = "agent-token-0123456789abcdef"
    r = await start_sidecar(http=HTTP, server={"auth": {"tokens": [token]}})
    async with anthropic.AsyncAnthropic(base_url=base_url(r), api_key="wrong", max_retries=0) as c:
        with pytest.raises(anthropic.AuthenticationError):
            await c.messages.create(model="claude", max_tokens=50, messages=user("hi"))
    async with anthropic.AsyncAnthropic(base_url=base_url(r), api_key=token, max_retries=0) as c:
        message = await c.messages.create(model="claude", max_tokens=50, messages=user("hi"))
    assert message.content[0].type == "text"


async def test_the_call_has_its_server_span(
    http_sidecar: Running, client: anthropic.AsyncAnthropic, otel: InMemoryTelemetry
) -> None:
    await client.messages.create(model="gpt", max_tokens=50, messages=user("hi"))
    t = await settled(otel, "POST /v1/messages")
    assert t.parent(t.one("chat gpt")) is t.one("POST /v1/messages")


# ---------------------------------------------------------------- issue 21: what an Anthropic agent sends, carried

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000" + "1f15c489")
PNG_B64 = base64.b64encode(PNG).decode()
PDF_B64 = base64.b64encode(b"%PDF-1.7 a minimal document").decode()
THINKING: Any = {"type": "enabled", "budget_tokens": 1024}
SEARCH: Any = [{"name": "search", "description": "Search.", "input_schema": {"type": "object", "properties": {
    "query": {"type": "string"}}, "required": ["query"]}}]  # fmt: skip


def provider_body(r: Running) -> dict[str, Any]:
    body = sent(r, "claude")[-1]["body"]
    assert isinstance(body, dict)
    return body


@pytest.mark.parametrize("streamed", [False, True])
async def test_an_image_and_a_pdf_reach_the_provider_whole_and_streamed(
    http_sidecar: Running, client: anthropic.AsyncAnthropic, streamed: bool
) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}}
    pdf = {"type": "document", "title": "Report",
           "source": {"type": "base64", "media_type": "application/pdf", "data": PDF_B64}}  # fmt: skip
    messages: Any = [{"role": "user", "content": [image, pdf, {"type": "text", "text": "what are these?"}]}]
    if streamed:
        async with client.messages.stream(model="claude", max_tokens=100, messages=messages) as stream:
            message = await stream.get_final_message()
    else:
        message = await client.messages.create(model="claude", max_tokens=100, messages=messages)
    assert message.content[0].type == "text"
    assert message.content[0].text == "You said: what are these?"
    assert provider_body(http_sidecar)["messages"][0]["content"][:2] == [image, pdf]


async def test_a_thinking_tool_loop_of_three_turns_passes_the_signatures_back(
    http_sidecar: Running, client: anthropic.AsyncAnthropic
) -> None:
    """The fake checks every thinking block's signature as the API does: a byte changed on the way is a 400."""
    script(
        http_sidecar, "claude", {}, {"preset": "reply", "tool_calls": [{"name": "search", "arguments": {"query": "b"}}]}
    )
    messages: list[Any] = user("find retries")
    thoughts: list[anthropic.types.ThinkingBlock] = []
    for turn in range(3):
        kwargs: Any = {"model": "claude", "max_tokens": 2048, "thinking": THINKING, "tools": SEARCH}
        if turn == 1:  # one turn streamed: its blocks are the same as a whole reply's
            async with client.messages.stream(messages=messages, **kwargs) as stream:
                message = await stream.get_final_message()
        else:
            message = await client.messages.create(messages=messages, **kwargs)
        thought = message.content[0]
        assert thought.type == "thinking"
        assert thought.signature
        thoughts.append(thought)
        assert message.usage.output_tokens_details is not None
        assert message.usage.output_tokens_details.thinking_tokens > 0
        if turn < 2:
            assert message.stop_reason == "tool_use"
            use = message.content[-1]
            assert use.type == "tool_use"
            messages.append({"role": "assistant", "content": message.content})  # as the SDK's own objects
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": use.id, "content": f"result {turn}"}]})  # fmt: skip
    assert message.content[-1].type == "text"
    assert message.content[-1].text == "Based on the tool result: result 1"
    passed = [m["content"][0] for m in provider_body(http_sidecar)["messages"] if m["role"] == "assistant"]
    assert passed == [t.model_dump() for t in thoughts[:2]]


async def test_an_altered_signature_is_the_providers_400(
    http_sidecar: Running, client: anthropic.AsyncAnthropic
) -> None:
    first = await client.messages.create(
        model="claude", max_tokens=2048, thinking=THINKING, tools=SEARCH, messages=user("find retries")
    )
    thought, use = first.content
    assert thought.type == "thinking"
    assert use.type == "tool_use"
    flipped = ("B" if thought.signature[0] == "A" else "A") + thought.signature[1:]
    altered = thought.model_copy(update={"signature": flipped})
    answer = {"type": "tool_result", "tool_use_id": use.id, "content": "x"}
    messages: Any = [*user("find retries"), {"role": "assistant", "content": [altered, use]},
                     {"role": "user", "content": [answer]}]  # fmt: skip
    with pytest.raises(anthropic.BadRequestError) as caught:
        await client.messages.create(model="claude", max_tokens=2048, thinking=THINKING, tools=SEARCH,
                                     messages=messages)  # fmt: skip
    assert sidecar_of(caught.value)["kind"] == "INVALID_INPUT"
    assert "Invalid `signature` in `thinking` block" in sidecar_of(caught.value)["failure"]["http"]["body"]


async def test_streamed_thinking_is_thinking_and_signature_deltas(
    http_sidecar: Running, client: anthropic.AsyncAnthropic
) -> None:
    kinds: list[str] = []
    async with client.messages.stream(
        model="claude", max_tokens=2048, thinking=THINKING, messages=user("one two three")
    ) as stream:
        async for event in stream:
            if event.type in ("content_block_start", "content_block_delta"):
                kinds.append(event.content_block.type if event.type == "content_block_start" else event.delta.type)
        final = await stream.get_final_message()
    assert kinds[0] == "thinking"
    assert kinds.count("thinking_delta") > 1
    assert kinds.index("signature_delta") < kinds.index("text")
    thought = final.content[0]
    assert thought.type == "thinking"
    assert thought.signature
    whole = await client.messages.create(
        model="claude", max_tokens=2048, thinking=THINKING, messages=user("one two three")
    )
    assert whole.content[0] == thought  # the fake thinks the same twice: streamed, it is the same block
    assert [b.type for b in final.content] == ["thinking", "text"]


async def test_redacted_thinking_is_passed_through(http_sidecar: Running, client: anthropic.AsyncAnthropic) -> None:
    from sidecar.providers.formats.anthropic_messages.fake_answers import REDACTED_TRIGGER

    message = await client.messages.create(
        model="claude", max_tokens=2048, thinking=THINKING, messages=user(REDACTED_TRIGGER)
    )
    assert message.content[0].type == "redacted_thinking"
    async with client.messages.stream(model="claude", max_tokens=2048, thinking=THINKING,
                                      messages=user(REDACTED_TRIGGER)) as stream:  # fmt: skip
        final = await stream.get_final_message()
    assert final.content[0] == message.content[0]


@pytest.mark.parametrize("streamed", [False, True])
async def test_cache_control_is_sent_and_the_cache_usage_comes_back(
    http_sidecar: Running, client: anthropic.AsyncAnthropic, streamed: bool
) -> None:
    system: Any = [{"type": "text", "text": "You are careful. " * 80, "cache_control": {"type": "ephemeral"}}]
    usages = []
    for question in ("first", "second"):
        kwargs: Any = {"model": "claude", "max_tokens": 100, "system": system, "messages": user(question)}
        if streamed:
            async with client.messages.stream(**kwargs) as stream:
                usages.append((await stream.get_final_message()).usage)
        else:
            usages.append((await client.messages.create(**kwargs)).usage)
    first, second = usages
    assert first.cache_creation_input_tokens
    assert not first.cache_read_input_tokens
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert second.input_tokens < second.cache_read_input_tokens  # Anthropic's count: without the cache's
    assert provider_body(http_sidecar)["system"] == system


@pytest.mark.parametrize(
    ("choice", "uses"),
    [({"type": "any"}, True), ({"type": "tool", "name": "search"}, True), ({"type": "none"}, False),
     ({"type": "auto", "disable_parallel_tool_use": True}, True)],
)  # fmt: skip
async def test_tool_choice_reaches_the_provider(
    http_sidecar: Running, client: anthropic.AsyncAnthropic, choice: Any, uses: bool
) -> None:
    message = await client.messages.create(
        model="claude", max_tokens=100, tools=SEARCH, tool_choice=choice, messages=user("find it")
    )
    assert (message.stop_reason == "tool_use") is uses
    assert provider_body(http_sidecar)["tool_choice"] == choice


@pytest.mark.parametrize("streamed", [False, True])
async def test_stop_sequences_top_k_top_p_and_the_user_reach_the_provider(
    http_sidecar: Running, client: anthropic.AsyncAnthropic, streamed: bool
) -> None:
    kwargs: Any = {"model": "claude", "max_tokens": 100, "messages": user("one END two"), "stop_sequences": ["END"],
                   "metadata": {"user_id": "user-42"},
                   "extra_body": {"top_k": 40, "top_p": 0.9}}  # fmt: skip  # this SDK's create() has no sampling args
    if streamed:
        async with client.messages.stream(**kwargs) as stream:
            message = await stream.get_final_message()
    else:
        message = await client.messages.create(**kwargs)
    assert message.content[0].type == "text"
    assert message.content[0].text == "You said: one "
    assert message.stop_reason == "stop_sequence"
    body = provider_body(http_sidecar)
    assert (body["stop_sequences"], body["top_k"], body["top_p"]) == (["END"], 40, 0.9)
    assert body["metadata"] == {"user_id": "user-42"}


async def test_adaptive_thinking_at_an_effort_reaches_the_provider(
    http_sidecar: Running, client: anthropic.AsyncAnthropic
) -> None:
    message = await client.messages.create(
        model="claude", max_tokens=100, thinking={"type": "adaptive"}, output_config={"effort": "medium"},
        messages=user("hi"),
    )  # fmt: skip
    assert message.content[0].type == "thinking"
    body = provider_body(http_sidecar)
    assert (body["thinking"], body["output_config"]) == ({"type": "adaptive"}, {"effort": "medium"})


@pytest.mark.parametrize(
    ("extra", "parameter"),
    [
        ({"system": [{"type": "text", "text": "be brief", "bogus": 1}]}, "system[0].bogus"),
        ({"thinking": {"type": "disabled", "display": "omitted"}}, "thinking.display"),
        ({"output_config": {"format": {"type": "json_schema", "schema": {}, "x": 1}}}, "output_config.format.x"),
        ({"tools": [{**SEARCH[0], "strict": "yes"}]}, "tools[0].strict"),
    ],
)
async def test_a_key_no_element_can_carry_or_a_wrong_value_is_a_400_naming_it(
    http_sidecar: Running, client: anthropic.AsyncAnthropic, extra: dict[str, Any], parameter: str
) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        await client.messages.create(model="claude", max_tokens=50, messages=user("hi"), extra_body=extra)
    assert caught.value.type == "invalid_request_error"
    assert sidecar_of(caught.value)["failure"]["invalid_input"]["parameter"] == parameter
    assert http_sidecar.provider.requests() == []


async def test_a_strict_tool_reaches_the_provider_strict(
    http_sidecar: Running, client: anthropic.AsyncAnthropic
) -> None:
    tools = [{**SEARCH[0], "strict": True}, {**SEARCH[0], "name": "loose", "strict": False}, {**SEARCH[0], "name": "x"}]
    await client.messages.create(model="claude", max_tokens=50, messages=user("hi"), extra_body={"tools": tools})
    assert [t.get("strict") for t in provider_body(http_sidecar)["tools"]] == [True, False, None]  # unset: not sent


async def test_thinking_with_a_temperature_is_refused_before_sending(
    http_sidecar: Running, client: anthropic.AsyncAnthropic
) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        await client.messages.create(
            model="claude", max_tokens=2048, thinking=THINKING, messages=user("hi"), extra_body={"temperature": 0.2}
        )
    assert sidecar_of(caught.value)["failure"]["invalid_input"]["parameter"] == "temperature"
    assert http_sidecar.provider.requests() == []


async def test_after_failover_the_message_names_the_model_that_served_as_anthropic_would(
    http_sidecar: Running, client: anthropic.AsyncAnthropic
) -> None:
    script(http_sidecar, "gpt-a", UNAVAILABLE, UNAVAILABLE)  # the whole call's hop, then the stream's
    message = await client.messages.create(model="fallback", max_tokens=100, messages=user("hi"), extra_headers=ONE_TRY)
    assert message.model == "fake-claude"
    ext = extension(message)
    assert ext["served_by"] == "claude"
    assert [h["deployment"] for h in ext["hops"]] == ["gpt-a", "claude"]
    assert ext["total_usage"] == {
        "input_tokens": message.usage.input_tokens,
        "output_tokens": message.usage.output_tokens,
    }
    async with client.messages.stream(
        model="fallback", max_tokens=100, messages=user("hi"), extra_headers=ONE_TRY
    ) as stream:
        final = await stream.get_final_message()
    assert final.model == "fake-claude"  # message_start names the model that served
    assert final.content[0].type == "text"
    assert final.content[0].text == "You said: hi"
    assert final.usage.output_tokens > 0
    assert len(sent(http_sidecar, "gpt-a")) == 2
