"""Issue 37: a request key the sidecar does not interpret is carried, not refused, through a front to its own format.

A real sidecar process with its HTTP port, the fake provider behind it (which records the body it got), and
the official SDK as the client. A key the sidecar has never heard of, at the body, a message, a content block,
a tool and a tool's schema (and the Vercel AI SDK's ``eager_input_streaming``), reaches an Anthropic
deployment as sent, whole and streamed; the same through the OpenAI front (a content part, a tool's
function and its parameters, stream_options) to an OpenAI deployment. To a deployment of another format
it is refused by name before anything is sent; a route moves on to a deployment of the key's own format.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import openai
import pytest
import pytest_asyncio

from tests.conftest import Running, Start
from tests.fronts.test_http_anthropic import base_url
from tests.fronts.test_http_openai import base_url as openai_url

GEMINI = {"wire_format": "gemini", "base_url": "", "api_key": "key-gemini-1234567890abcdef"}
DEPLOYMENTS = {
    "flash": {"provider": "gem", "upstream_model": "fake-flash", "context_window": 8000, "max_output_tokens": 2048},
    "flash-then-claude": {"route": {"fallbacks": ["flash", "claude"]}},
}
SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "x-never-heard": {"deep": [1, 2]}}
TOOL = {"name": "search", "description": "Search.", "input_schema": SCHEMA, "eager_input_streaming": True}
BLOCK = {"type": "text", "text": "hi", "x_block": [1, "two", None]}
MESSAGE = {"role": "user", "content": [BLOCK], "x_message": {"a": 1}}
THINKING = {"type": "enabled", "budget_tokens": 1024, "display": "omitted"}
BODY_KEYS = {"context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]}, "container": "c-1"}
"""Keys of the API the sidecar does not read (the fake, as the API, refuses a body key the API does not have)."""


@pytest_asyncio.fixture
async def http_sidecar(start_sidecar: Start, provider: Any) -> Running:
    gemini = {**GEMINI, "base_url": provider.url}
    return await start_sidecar(http={"listen": "127.0.0.1:0"}, providers={"gem": gemini}, models=DEPLOYMENTS)


@pytest_asyncio.fixture
async def client(http_sidecar: Running) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(base_url=base_url(http_sidecar), api_key="unused", max_retries=0) as c:
        yield c


def asked(model: str) -> dict[str, Any]:
    """A Messages request with a key the sidecar never heard of at every depth (copies: the SDK may hold them)."""
    return {
        "model": model,
        "max_tokens": 2048,
        "messages": [copy.deepcopy(MESSAGE)],
        "tools": [copy.deepcopy(TOOL)],
        "thinking": dict(THINKING),
        "extra_body": copy.deepcopy(BODY_KEYS),
    }


def assert_arrived_as_sent(body: dict[str, Any]) -> None:
    for key, value in BODY_KEYS.items():
        assert body[key] == value
    assert body["thinking"] == THINKING
    assert body["tools"] == [TOOL]
    (message,) = body["messages"]
    assert message["x_message"] == MESSAGE["x_message"]
    assert message["content"] == [BLOCK]


async def ask(client: anthropic.AsyncAnthropic, streamed: bool, **kwargs: Any) -> anthropic.types.Message:
    if not streamed:
        return await client.messages.create(**kwargs)
    async with client.messages.stream(**kwargs) as stream:
        return await stream.get_final_message()


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_unknown_keys_at_every_depth_reach_an_anthropic_deployment_as_sent(
    http_sidecar: Running, client: anthropic.AsyncAnthropic, streamed: bool
) -> None:
    message = await ask(client, streamed, **asked("claude"))
    assert message.content
    (sent,) = http_sidecar.provider.requests(model="fake-claude")
    assert sent["body"].get("stream", False) is streamed
    assert_arrived_as_sent(sent["body"])


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_across_formats_the_key_is_refused_by_name_and_nothing_is_sent(
    http_sidecar: Running, client: anthropic.AsyncAnthropic, streamed: bool
) -> None:
    kwargs = asked("flash")
    del kwargs["extra_body"], kwargs["thinking"], kwargs["messages"]
    with pytest.raises(anthropic.BadRequestError) as caught:
        await ask(client, streamed, messages=[{"role": "user", "content": "hi"}], **kwargs)
    assert isinstance(caught.value.body, dict)
    failure = caught.value.body["error"]["sidecar"]["failure"]
    assert failure["invalid_input"]["parameter"] == "tools[0].eager_input_streaming"
    assert "carried only to a deployment of the anthropic wire format; model flash speaks gemini" in str(failure)
    assert http_sidecar.provider.requests() == []


async def test_a_route_moves_on_to_a_deployment_of_the_keys_own_format(
    http_sidecar: Running, client: anthropic.AsyncAnthropic
) -> None:
    message = await client.messages.create(**asked("flash-then-claude"))
    assert message.model == "fake-claude"
    assert http_sidecar.provider.requests(model="fake-flash") == []
    (sent,) = http_sidecar.provider.requests(model="fake-claude")
    assert_arrived_as_sent(sent["body"])


# ---------------------------------------------------------------- the OpenAI front to an OpenAI deployment

FUNCTION = {"name": "search", "description": "Search.", "parameters": SCHEMA, "x_function": 1}
OPENAI_TOOL = {"type": "function", "function": FUNCTION, "x_tool": {"b": [True]}}
PART = {"type": "text", "text": "hi", "x_part": "p"}
OPENAI_MESSAGE = {"role": "user", "content": [PART], "x_message": 7}
OPENAI_BODY = {"metadata": {"run": "7", "deep": "x"}, "service_tier": "flex"}
"""Body keys the API knows and the sidecar does not interpret (the fake, as the API, refuses one it never heard of)."""


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_unknown_keys_at_every_depth_reach_an_openai_deployment_as_sent(
    http_sidecar: Running, streamed: bool
) -> None:
    async with openai.AsyncOpenAI(base_url=openai_url(http_sidecar), api_key="unused", max_retries=0) as client:
        kwargs: Any = {
            "model": "gpt",
            "messages": [copy.deepcopy(OPENAI_MESSAGE)],
            "tools": [copy.deepcopy(OPENAI_TOOL)],
            "extra_body": copy.deepcopy(OPENAI_BODY),
        }
        if streamed:
            options = {"include_usage": True, "include_obfuscation": False}
            chunks = [
                c async for c in await client.chat.completions.create(stream=True, stream_options=options, **kwargs)
            ]
            assert chunks
        else:
            assert (await client.chat.completions.create(**kwargs)).choices
    (sent,) = http_sidecar.provider.requests(model="fake-gpt")
    body = sent["body"]
    for key, value in OPENAI_BODY.items():
        assert body[key] == value
    assert body["tools"] == [OPENAI_TOOL]
    (message,) = body["messages"]
    assert message == {**OPENAI_MESSAGE, "content": [PART]}
    if streamed:
        assert body["stream_options"] == {"include_usage": True, "include_obfuscation": False}
