"""The fake OpenAI provider as the API is for what issue 21 carries: its rules, its usage, the SDK's own types.

It refuses what the API refuses (a 400 in the API's words, with its ``param`` and ``code``), reads
images and files, reports the cache and reasoning tokens a step's ``usage`` says, and every reply
and stream chunk it sends parses with ``openai.types.chat.ChatCompletion`` / ``ChatCompletionChunk``.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from sidecar.fakes import FakeProvider, ThreadedServer

from .helpers import chat, script
from .sse import events

Srv = ThreadedServer[FakeProvider]
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000" + "1f15c489")
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()
PDF_DATA = "data:application/pdf;base64," + base64.b64encode(b"%PDF-1.7 minimal").decode()
TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]


def user(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": list(parts)}]


def image(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


@pytest.mark.parametrize(
    ("extra", "param", "code", "words"),
    [
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop", "array_above_max_length", "maximum length 4"),
        ({"tool_choice": "required"}, "tool_choice", None, "only allowed when 'tools' are specified"),
        ({"parallel_tool_calls": False}, "parallel_tool_calls", None, "only allowed when 'tools' are specified"),
        ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "other"}}}, "tool_choice",
         "invalid_value", "'other' is not one of the 'tools'"),
        ({"messages": user({"type": "video", "video": {}})}, "messages[0].content[0].type", "invalid_value",
         "Supported values are: 'text', 'image_url', 'input_audio', and 'file'"),
        ({"messages": [{"role": "tool", "tool_call_id": "c", "content": [image(PNG_URL)]}]},
         "messages[0].content[0].type", "invalid_value", "Supported values are: 'text'"),
        ({"messages": user(image("data:image/png;base64,@@not-base64@@"))}, "messages[0].content[0].image_url.url",
         "invalid_value", "base64-encoded data URL with an image MIME type"),
        ({"messages": user(image("data:text/plain;base64,aGk="))}, "messages[0].content[0].image_url.url",
         "invalid_value", "image MIME type"),
        ({"messages": user(image("data:image/tiff;base64,aGk="))}, None, "invalid_image_format",
         "unsupported image"),
        ({"messages": user({"type": "file", "file": {"filename": "a.pdf", "file_data": "JVBERi0x"}})},
         "messages[0].content[0].file.file_data", "invalid_value", "base64-encoded data URL"),
        ({"reasoning_effort": "extreme"}, "reasoning_effort", "invalid_value",
         "'minimal', 'low', 'medium', and 'high'"),
        ({"reasoning_effort": "low", "max_tokens": 10}, "max_tokens", "unsupported_parameter",
         "Use 'max_completion_tokens'"),
        ({"reasoning_effort": "low", "temperature": 0.2}, "temperature", "unsupported_value",
         "Only the default (1) value"),
        ({"frobnicate": True}, None, None, "Unrecognized request argument supplied: frobnicate"),
    ],
)  # fmt: skip
def test_a_request_breaking_an_api_rule_is_the_apis_400(
    provider: Srv, client: httpx.Client, extra: dict[str, Any], param: str | None, code: str | None, words: str
) -> None:
    answer = chat(client, provider.url, "openai", **extra)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert (error["param"], error["code"]) == (param, code)
    assert words in error["message"]


def test_images_files_and_keys_the_api_takes_are_accepted(provider: Srv, client: httpx.Client) -> None:
    parts = (
        {"type": "text", "text": "What are these?"},
        image(PNG_URL),
        image("https://example.com/cat.png"),
        {"type": "file", "file": {"filename": "r.pdf", "file_data": PDF_DATA}},
    )
    extra = {"metadata": {"run": "7"}, "service_tier": "flex", "prompt_cache_key": "k", "stop": ["a", "b", "c", "d"]}
    answer = chat(client, provider.url, "openai", messages=user(*parts), **extra)
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "You said: What are these?"
    reasoning = chat(client, provider.url, "openai", reasoning_effort="high", max_completion_tokens=50, temperature=1)
    assert reasoning.status_code == 200, reasoning.text


def test_a_steps_usage_is_the_replys_cached_and_reasoning_tokens(provider: Srv, client: httpx.Client) -> None:
    usage = {"cache_read_input_tokens": 1024, "reasoning_tokens": 40}
    script(client, provider.url, [{"preset": "reply", "text": "ok", "usage": usage}], model="m")
    body = chat(client, provider.url, "openai").json()
    got = body["usage"]
    assert got["prompt_tokens"] == 1024  # raised to hold the cached ones: they are part of the prompt
    assert got["prompt_tokens_details"] == {"cached_tokens": 1024}
    assert got["completion_tokens"] == 1 + 40  # "ok", and the reasoning
    assert got["completion_tokens_details"] == {"reasoning_tokens": 40}
    script(client, provider.url, [{"preset": "reply", "text": "ok", "usage": usage}], model="m")
    streamed = events(client, provider.url, "openai", {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                      "stream": True, "stream_options": {"include_usage": True}})  # fmt: skip
    last = json.loads(streamed[-2].data)
    assert last["usage"]["prompt_tokens_details"] == {"cached_tokens": 1024}
    assert last["usage"]["completion_tokens_details"] == {"reasoning_tokens": 40}


@pytest.mark.parametrize("usage", [{"cached": 3}, {"reasoning_tokens": -1}, {"reasoning_tokens": True}, []])
def test_a_usage_that_is_not_token_counts_is_refused_when_scripted(
    provider: Srv, client: httpx.Client, usage: Any
) -> None:
    answer = client.post(provider.url + "/_fake/script", json={"model": "m", "steps": [{"usage": usage}]})
    assert answer.status_code == 400
    assert "usage" in answer.json()["error"]


STEPS: dict[str, dict[str, Any]] = {
    "default": {},
    "reply": {"preset": "reply", "text": "Sunny."},
    "tool calls": {"preset": "reply", "tool_calls": [{"name": "search", "arguments": {"q": "x"}}]},
    "truncated": {"preset": "truncated"},
    "bad_json": {"preset": "bad_json"},
    "missing_fields": {"preset": "missing_fields"},
    "refusal": {"preset": "refusal"},
    "content_filter": {"preset": "reply", "finish": "content_filter"},
    "usage": {"preset": "reply", "text": "ok", "usage": {"cache_read_input_tokens": 9, "reasoning_tokens": 4}},
}


@pytest.mark.parametrize("step", list(STEPS))
def test_every_reply_parses_with_the_sdks_chat_completion(provider: Srv, client: httpx.Client, step: str) -> None:
    script(client, provider.url, [STEPS[step]], model="m")
    body = chat(client, provider.url, "openai", tools=TOOLS).json()
    reply = ChatCompletion.model_validate(body)
    assert reply.usage is not None
    assert reply.usage.prompt_tokens_details is not None
    assert reply.usage.completion_tokens_details is not None
    if step == "usage":
        assert reply.usage.prompt_tokens_details.cached_tokens == 9
        assert reply.usage.completion_tokens_details.reasoning_tokens == 4


@pytest.mark.parametrize("step", list(STEPS))
def test_every_stream_chunk_parses_with_the_sdks_chat_completion_chunk(
    provider: Srv, client: httpx.Client, step: str
) -> None:
    script(client, provider.url, [STEPS[step]], model="m")
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS, "stream": True,
            "stream_options": {"include_usage": True}}  # fmt: skip
    chunks = [ChatCompletionChunk.model_validate_json(e.data) for e in events(client, provider.url, "openai", body)
              if e.data != "[DONE]"]  # fmt: skip
    assert chunks
    usage = chunks[-1].usage
    assert usage is not None
    assert usage.prompt_tokens_details is not None
    assert usage.completion_tokens_details is not None
