"""The model fronts against the embedded default (``make run``), as a real process, with the official SDKs:
the catalog's real output limits, and every refusal the core makes named in the caller's own parameters.

A framework's default output budget (pydantic-ai's Anthropic model sends ``max_tokens: 16384``) fits
the embedded default's models as it fits the real ones; past a model's maximum the answer is 400 naming
the key the caller sent (``max_tokens``, ``max_completion_tokens``, ``max_output_tokens``), the value
and the maximum, as the providers answer. A refusal the core raises in the gRPC contract's names
(``tools[0].parameters_json``, ``messages[0].parts[1]``) reads in the door's names: ``error.param``,
the message, and the sidecar extension's Failure detail.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.processes.test_server_process import Proc, _free_port

CLAUDE, GPT = "local-claude", "local-gpt"
CLAUDE_MAX, GPT_MAX = 64_000, 16_384
"""The embedded default's maximum outputs (claude-sonnet-4-5's and gpt-4o-mini's)."""
BAD_SCHEMA = {"type": "object", "properties": {"q": {"type": "strnig"}}}
"""A JSON schema object the fronts read and the core refuses (no such type)."""
FTP = "ftp://example.com/a.png"
"""An image URL the fronts read and the core refuses (https, http or data: only)."""


@dataclass(frozen=True)
class Served:
    http: str
    provider: str


@contextmanager
def serving_the_default() -> Iterator[Served]:
    """``sidecar serve --http`` on the embedded default, as ``make run`` serves it."""
    addr, http = f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"
    proc = Proc("--listen", addr, "--http", http)
    try:
        lines = [proc.popen.stdout.readline() for _ in range(8)] if proc.popen.stdout else []
        provider = next(line.split(": ", 1)[1].strip() for line in lines if "local provider:" in line)
        yield Served(f"http://{http}", provider)
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with serving_the_default() as running:
        yield running


@pytest.fixture
def claude(served: Served) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=served.http, api_key="unused", max_retries=0) as client:
        yield client


@pytest.fixture
def gpt(served: Served) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{served.http}/v1", api_key="unused", max_retries=0) as client:
        yield client


def received(served: Served, upstream: str) -> list[dict[str, Any]]:
    """The bodies the embedded provider received for ``upstream``, oldest first."""
    answer = httpx.get(f"{served.provider}/_fake/requests", params={"model": upstream}, timeout=10)
    answer.raise_for_status()
    return [r["body"] for r in answer.json()]


def user(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


def anthropic_error(caught: pytest.ExceptionInfo[anthropic.BadRequestError]) -> dict[str, Any]:
    body = caught.value.body
    assert isinstance(body, dict)
    error = body["error"]
    assert isinstance(error, dict)
    return error


def openai_error(caught: pytest.ExceptionInfo[openai.BadRequestError]) -> dict[str, Any]:
    body = caught.value.body
    assert isinstance(body, dict)
    return body


def named(error: dict[str, Any], param: str) -> None:
    """``error`` names ``param`` everywhere: ``error.param``, the message, and the Failure's detail."""
    assert error["param"] == param
    assert f"parameter '{param}'" in error["message"]
    sidecar = error["sidecar"]
    assert sidecar["kind"] == "INVALID_INPUT"
    assert f"parameter '{param}'" in sidecar["message"]
    assert sidecar["failure"]["invalid_input"]["parameter"] == param


# ---------------------------------------------------------------- the catalog's real limits


@pytest.mark.parametrize("streamed", [False, True])
def test_a_frameworks_max_tokens_16384_is_taken_at_messages(
    served: Served, claude: anthropic.Anthropic, streamed: bool
) -> None:
    if streamed:
        with claude.messages.stream(model=CLAUDE, max_tokens=16_384, messages=user("hello")) as stream:
            text = "".join(stream.text_stream)
    else:
        reply = claude.messages.create(model=CLAUDE, max_tokens=16_384, messages=user("hello"))
        text = "".join(b.text for b in reply.content if b.type == "text")
    assert text == "You said: hello"
    assert received(served, "fake-claude")[-1]["max_tokens"] == 16_384


@pytest.mark.parametrize("streamed", [False, True])
def test_max_tokens_past_the_models_maximum_is_refused_naming_max_tokens(
    served: Served, claude: anthropic.Anthropic, streamed: bool
) -> None:
    before = len(received(served, "fake-claude"))
    with pytest.raises(anthropic.BadRequestError) as caught:
        # a timeout of its own: the SDK asks for streaming past 21,333 tokens with its default timeout
        claude.messages.create(
            model=CLAUDE, max_tokens=CLAUDE_MAX + 1, messages=user("hi"), stream=streamed, timeout=60
        )
    error = anthropic_error(caught)
    named(error, "max_tokens")
    assert f"got {CLAUDE_MAX + 1}" in error["message"]
    assert f"between 1 and {CLAUDE_MAX}" in error["message"]
    assert len(received(served, "fake-claude")) == before  # refused, as Anthropic refuses it: never lowered


@pytest.mark.parametrize("key", ["max_tokens", "max_completion_tokens"])
def test_an_openai_output_budget_past_the_maximum_names_the_key_the_caller_sent(gpt: openai.OpenAI, key: str) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        gpt.chat.completions.create(model=GPT, messages=user("hi"), **{key: GPT_MAX + 1})  # type: ignore[call-overload]
    assert caught.value.param == key
    error = openai_error(caught)
    named(error, key)
    assert f"got {GPT_MAX + 1}" in error["message"]
    assert f"between 1 and {GPT_MAX}" in error["message"]


def test_the_responses_output_budget_past_the_maximum_names_max_output_tokens(gpt: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        gpt.responses.create(model=GPT, input="hi", max_output_tokens=GPT_MAX + 1, store=False)
    assert caught.value.param == "max_output_tokens"
    error = openai_error(caught)
    named(error, "max_output_tokens")
    assert f"between 1 and {GPT_MAX}" in error["message"]


# ---------------------------------------------------------------- the core's refusals in the caller's names


@pytest.mark.parametrize("streamed", [False, True])
def test_a_tool_schema_the_core_refuses_is_named_input_schema_at_messages(
    claude: anthropic.Anthropic, streamed: bool
) -> None:
    tools: Any = [{"name": "a", "input_schema": {"type": "object"}}, {"name": "b", "input_schema": BAD_SCHEMA}]
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(model=CLAUDE, max_tokens=100, messages=user("hi"), tools=tools, stream=streamed)
    named(anthropic_error(caught), "tools[1].input_schema")


def test_a_tool_schema_the_core_refuses_is_named_function_parameters_at_chat_completions(gpt: openai.OpenAI) -> None:
    tools: Any = [{"type": "function", "function": {"name": "a", "parameters": BAD_SCHEMA}}]
    with pytest.raises(openai.BadRequestError) as caught:
        gpt.chat.completions.create(model=GPT, messages=user("hi"), tools=tools)
    assert caught.value.param == "tools[0].function.parameters"
    named(openai_error(caught), "tools[0].function.parameters")


def test_a_tool_schema_the_core_refuses_is_named_parameters_at_responses(gpt: openai.OpenAI) -> None:
    tools: Any = [{"type": "function", "name": "a", "parameters": BAD_SCHEMA, "strict": False}]
    with pytest.raises(openai.BadRequestError) as caught:
        gpt.responses.create(model=GPT, input="hi", tools=tools, store=False)
    named(openai_error(caught), "tools[0].parameters")


def test_a_part_the_core_refuses_names_the_callers_message_after_the_system_ones(gpt: openai.OpenAI) -> None:
    """The system message is moved out of the core's messages: its messages[0] is the caller's messages[1]."""
    image = {"type": "image_url", "image_url": {"url": FTP}}
    messages: Any = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "what is this"}, image]},
    ]
    with pytest.raises(openai.BadRequestError) as caught:
        gpt.chat.completions.create(model=GPT, messages=messages)
    named(openai_error(caught), "messages[1].content[1]")


def test_a_part_the_core_refuses_names_the_callers_block_at_messages(claude: anthropic.Anthropic) -> None:
    """The block, when the caller's message is the core's one for one; else the caller's message: a tool
    result and an image in one user message are two core messages (the image's is messages[3].parts[0])."""
    image = {"type": "image", "source": {"type": "url", "url": FTP}}
    messages: Any = [{"role": "user", "content": [{"type": "text", "text": "look"}, image]}]
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(model=CLAUDE, max_tokens=100, system="be brief", messages=messages)
    named(anthropic_error(caught), "messages[0].content[1]")
    call = {"type": "tool_use", "id": "t1", "name": "search_docs", "input": {"query": "x"}}
    messages = [
        {"role": "user", "content": "look it up"},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}, image]},
    ]
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(model=CLAUDE, max_tokens=100, system="be brief", messages=messages)
    named(anthropic_error(caught), "messages[2]")
