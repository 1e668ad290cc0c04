"""The official SDK judges the fake: every Gemini reply and stream chunk it sends is Google's shape.

The fake provider (``sidecar/providers/formats/gemini/fake.py``) answers on loopback; each whole body and each
``data:`` chunk of each stream is validated as ``google.genai.types.GenerateContentResponse``
(``google-genai``, pinned in constraints.txt), whose models forbid any field Google does not define.
Then the SDK's own client is pointed at the fake: ``generate_content`` and
``generate_content_stream`` read its replies, and its error answers raise the SDK's ``APIError``
with their code and status. So the fake cannot drift from the real shapes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from google import genai
from google.genai import errors, types

from sidecar.fakes._threaded import ThreadedServer
from sidecar.fakes.provider import FakeProvider

MODEL = "fake-gemini"
KEY = "AIza-test-key"
SEARCH = {"name": "search", "description": "Search.", "parametersJsonSchema": {"type": "object", "properties":
          {"query": {"type": "string"}}, "required": ["query"]}}  # fmt: skip
ASK = {
    "contents": [{"role": "user", "parts": [{"text": "find retries"}]}],
    "tools": [{"functionDeclarations": [SEARCH]}],
}
THINKING = {"generationConfig": {"thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": True}}}
STEPS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "the brain's reply": ({}, {}),
    "a tool call": ({"preset": "reply", "tool_calls": [{"name": "search", "arguments": {"query": "x"}}]}, {}),
    "two tool calls and text": ({"preset": "reply", "text": "Looking.", "tool_calls": [
        {"name": "search", "arguments": {"query": "a"}}, {"name": "search", "arguments": {"query": "b"}}]}, {}),
    "thinking and a tool call": ({"preset": "reply", "tool_calls": [{"name": "search", "arguments": {}}]}, THINKING),
    "thinking and text": ({}, THINKING),
    "cache and reasoning usage": ({"usage": {"cache_read_input_tokens": 5, "reasoning_tokens": 7}}, {}),
    "truncated": ({"preset": "truncated"}, {}),
    "a refusal": ({"preset": "refusal"}, {}),
    "finish content_filter": ({"preset": "reply", "finish": "content_filter"}, {}),
    "content_filter": ({"preset": "content_filter", "categories": ["hate", "sexual"]}, {}),
    "content_policy (prompt blocked)": ({"preset": "content_policy"}, {}),
    "missing fields": ({"preset": "missing_fields"}, {"generationConfig": {
        "responseMimeType": "application/json", "responseJsonSchema": {"type": "object", "properties": {
            "name": {"type": "string"}}, "required": ["name"]}}}),
    "mid-stream content filter": ({"stream_fault": "content_filter", "after_deltas": 2}, {}),
}  # fmt: skip
ERRORS = [
    ("rate_limit", 429, "RESOURCE_EXHAUSTED"),
    ("insufficient_quota", 429, "RESOURCE_EXHAUSTED"),
    ("overloaded", 503, "UNAVAILABLE"),
    ("server_error", 500, "INTERNAL"),
    ("context_too_long", 400, "INVALID_ARGUMENT"),
    ("invalid_key", 400, "INVALID_ARGUMENT"),
    ("model_not_found", 404, "NOT_FOUND"),
]


@pytest.fixture(scope="module")
def fake() -> Iterator[ThreadedServer[FakeProvider]]:
    with ThreadedServer(FakeProvider()) as srv:
        yield srv


def post(fake: ThreadedServer[FakeProvider], step: dict[str, Any], extra: dict[str, Any], *, stream: bool) -> Any:
    fake.server.script(MODEL, [step])
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    url = f"{fake.url}/v1beta/models/{MODEL}:{method}"
    return httpx.post(url, json={**ASK, **extra}, headers={"x-goog-api-key": KEY}, timeout=30)


def chunks(text: str) -> list[str]:
    return [line[len("data: ") :] for line in text.splitlines() if line.startswith("data: ")]


@pytest.mark.parametrize("case", list(STEPS))
def test_every_whole_reply_is_a_generate_content_response(fake: ThreadedServer[FakeProvider], case: str) -> None:
    step, extra = STEPS[case]
    if "stream_fault" in step:
        return  # a stream's fault only
    answer = post(fake, step, extra, stream=False)
    assert answer.status_code == 200
    parsed = types.GenerateContentResponse.model_validate_json(answer.text)
    assert parsed.response_id
    assert parsed.candidates or parsed.prompt_feedback


@pytest.mark.parametrize("case", list(STEPS))
def test_every_stream_chunk_is_a_generate_content_response(fake: ThreadedServer[FakeProvider], case: str) -> None:
    step, extra = STEPS[case]
    answer = post(fake, step, extra, stream=True)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    data = chunks(answer.text)
    assert data
    parsed = [types.GenerateContentResponse.model_validate_json(d) for d in data]
    last = parsed[-1]
    assert (last.candidates and last.candidates[0].finish_reason) or last.prompt_feedback


def test_the_sdk_reads_a_whole_reply_and_a_stream_of_the_fake(fake: ThreadedServer[FakeProvider]) -> None:
    client = genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=fake.url, api_version="v1beta"))
    fake.server.script(MODEL, [{"preset": "reply", "text": "Sunny in Paris."}])
    reply = client.models.generate_content(model=MODEL, contents="weather?")
    assert reply.text == "Sunny in Paris."
    assert reply.candidates is not None
    assert reply.candidates[0].finish_reason == types.FinishReason.STOP
    assert reply.usage_metadata is not None
    assert reply.usage_metadata.prompt_token_count
    fake.server.script(MODEL, [{"preset": "reply", "tool_calls": [{"name": "search", "arguments": {"q": "x"}}]}])
    config = types.GenerateContentConfig(thinking_config=types.ThinkingConfig(thinking_budget=1024,
                                                                              include_thoughts=True))  # fmt: skip
    called = client.models.generate_content(model=MODEL, contents="find", config=config)
    assert called.function_calls is not None
    assert called.function_calls[0].args == {"q": "x"}
    assert called.candidates is not None
    assert called.candidates[0].content is not None
    parts = called.candidates[0].content.parts or []
    assert parts[0].thought is True
    assert isinstance(parts[1].thought_signature, bytes)
    text = "".join(c.text or "" for c in client.models.generate_content_stream(model=MODEL, contents="one two"))
    assert text == "You said: one two"
    assert fake.server.requests(model=MODEL)[-1]["headers"]["x-goog-api-key"] == KEY


@pytest.mark.parametrize(("preset", "code", "status"), ERRORS)
def test_every_error_answer_is_the_sdks_api_error(
    fake: ThreadedServer[FakeProvider], preset: str, code: int, status: str
) -> None:
    once = types.HttpRetryOptions(attempts=1)
    options = types.HttpOptions(base_url=fake.url, api_version="v1beta", retry_options=once)
    client = genai.Client(api_key=KEY, http_options=options)
    fake.server.script(MODEL, [{"preset": preset}])
    with pytest.raises(errors.APIError) as caught:
        client.models.generate_content(model=MODEL, contents="hi")
    assert (caught.value.code, caught.value.status) == (code, status)
    assert caught.value.message
    body = json.loads(json.dumps(caught.value.details))
    assert body["error"]["code"] == code
