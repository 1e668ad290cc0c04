"""The fake Anthropic provider as the API is for issue 21: what it refuses, and what it answers.

Every reply body and stream event it sends parses with the official SDK's own types
(``anthropic.types.Message``, ``RawMessageStreamEvent``, ``ErrorResponse``) with no field the SDK
does not know; each rule the API enforces (thinking, signatures, cache breakpoints, images, PDFs)
is a 400 ``invalid_request_error`` with the API's words.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pydantic
import pytest
from anthropic.types import ErrorResponse, Message, RawMessageStreamEvent

from sidecar.fakes import FakeProvider, ThreadedServer
from sidecar.providers.formats.anthropic_messages.fake_answers import REDACTED_TRIGGER
from tests.fakes.helpers import ANTHROPIC_PATH, script

Srv = ThreadedServer[FakeProvider]
HEADERS = {"x-api-key": "sk-ant-test-0123456789", "anthropic-version": "2023-06-01"}
TOOLS: Any = [{"name": "search", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}]
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000" + "1f15c489")
EVENTS = pydantic.TypeAdapter(RawMessageStreamEvent)
THINKING = {"type": "enabled", "budget_tokens": 2048}
CACHED = {"type": "ephemeral"}
SKIPPED = ("ping", "fake_future_event")
"""Events the SDK's types do not model and clients skip."""


def _extras(model: pydantic.BaseModel, where: str = "") -> list[str]:
    """Fields of ``model`` (recursively) the SDK's type does not declare."""
    out = [f"{where}.{k}" for k in (model.model_extra or {})]
    for name in type(model).model_fields:
        value = getattr(model, name)
        for i, item in enumerate(value if isinstance(value, list) else [value]):
            if isinstance(item, pydantic.BaseModel):
                out += _extras(item, f"{where}.{name}[{i}]")
    return out


def post(client: httpx.Client, provider: Srv, **body: Any) -> httpx.Response:
    full = {"model": "claude-fake", "max_tokens": 4096, "messages": [{"role": "user", "content": "hello"}], **body}
    return client.post(provider.url + ANTHROPIC_PATH, json=full, headers=HEADERS)


def whole(client: httpx.Client, provider: Srv, **body: Any) -> Message:
    resp = post(client, provider, **body)
    assert resp.status_code == 200, resp.text
    message = Message.model_validate(resp.json())
    assert _extras(message) == []
    return message


def streamed(client: httpx.Client, provider: Srv, **body: Any) -> list[Any]:
    resp = post(client, provider, stream=True, **body)
    assert resp.status_code == 200, resp.text
    events = []
    for line in resp.text.splitlines():
        if line.startswith("data: "):
            data = json.loads(line.removeprefix("data: "))
            if data["type"] in SKIPPED:
                continue
            if data["type"] == "error":
                events.append(ErrorResponse.model_validate(data))
                continue
            event = EVENTS.validate_python(data)
            assert _extras(event) == [], data
            events.append(event)
    return events


def refused(client: httpx.Client, provider: Srv, **body: Any) -> str:
    resp = post(client, provider, **body)
    assert resp.status_code == 400, resp.text
    error = ErrorResponse.model_validate(resp.json())
    assert error.error.type == "invalid_request_error"
    return error.error.message


def turns(*content: Any) -> list[dict[str, Any]]:
    roles = ["user", "assistant"]
    return [{"role": roles[i % 2], "content": c} for i, c in enumerate(content)]


# ---------------------------------------------------------------- every reply parses with the SDK's types

CASES: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = {
    "plain": ([], {}),
    "tool call": ([], {"tools": TOOLS}),
    "thinking": ([], {"thinking": THINKING}),
    "thinking and a tool call": ([], {"thinking": THINKING, "tools": TOOLS}),
    "adaptive thinking": ([], {"thinking": {"type": "adaptive"}, "output_config": {"effort": "low"}}),
    "redacted thinking": (
        [],
        {"thinking": THINKING, "messages": [{"role": "user", "content": REDACTED_TRIGGER}]},
    ),
    "cache write": ([], {"system": [{"type": "text", "text": "A long system prompt.", "cache_control": CACHED}]}),
    "stop sequence": ([], {"stop_sequences": ["said"]}),
    "reply preset": ([{"preset": "reply", "text": "Scripted."}], {}),
    "truncated": ([{"preset": "truncated"}], {"thinking": THINKING}),
    "refusal": ([{"preset": "refusal"}], {}),
    "bad_json": ([{"preset": "bad_json"}], {}),
    "tool calls preset": ([{"preset": "reply", "tool_calls": [{"name": "search", "arguments": {"q": "x"}}]}], {}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_reply_is_the_sdks_message(client: httpx.Client, provider: Srv, case: str) -> None:
    steps, body = CASES[case]
    if steps:
        script(client, provider.url, steps, model="claude-fake")
    whole(client, provider, **body)


@pytest.mark.parametrize("case", list(CASES))
def test_every_stream_event_is_the_sdks_event(client: httpx.Client, provider: Srv, case: str) -> None:
    steps, body = CASES[case]
    if steps:
        script(client, provider.url, steps, model="claude-fake")
    events = streamed(client, provider, **body)
    assert events[0].type == "message_start"
    assert events[-1].type == "message_stop"


def test_a_stream_fault_event_is_the_sdks_error(client: httpx.Client, provider: Srv) -> None:
    script(client, provider.url, [{"stream_fault": "overloaded", "after_deltas": 2}], model="claude-fake")
    events = streamed(client, provider, thinking=THINKING)
    assert isinstance(events[-1], ErrorResponse)
    assert events[-1].error.type == "overloaded_error"


# ---------------------------------------------------------------- what it answers


def test_thinking_comes_first_signed_and_is_counted(client: httpx.Client, provider: Srv) -> None:
    message = whole(client, provider, thinking=THINKING, tools=TOOLS)
    thinking, use = message.content
    assert thinking.type == "thinking"
    assert thinking.signature
    assert "hello" in thinking.thinking
    assert use.type == "tool_use"
    assert message.usage.output_tokens_details is not None
    assert 0 < message.usage.output_tokens_details.thinking_tokens < message.usage.output_tokens


def test_a_streamed_thinking_block_is_the_whole_ones(client: httpx.Client, provider: Srv) -> None:
    message = whole(client, provider, thinking=THINKING)
    events = streamed(client, provider, thinking=THINKING)
    deltas = [e.delta for e in events if e.type == "content_block_delta" and e.index == 0]
    assert [e.content_block.type for e in events if e.type == "content_block_start"] == ["thinking", "text"]
    assert "".join(d.thinking for d in deltas if d.type == "thinking_delta") == message.content[0].thinking  # type: ignore[union-attr]
    assert [d.signature for d in deltas if d.type == "signature_delta"] == [message.content[0].signature]  # type: ignore[union-attr]


def test_the_test_string_gets_redacted_thinking(client: httpx.Client, provider: Srv) -> None:
    message = whole(client, provider, thinking=THINKING, messages=[{"role": "user", "content": REDACTED_TRIGGER}])
    assert message.content[0].type == "redacted_thinking"
    events = streamed(client, provider, thinking=THINKING, messages=[{"role": "user", "content": REDACTED_TRIGGER}])
    start = next(e for e in events if e.type == "content_block_start")
    assert start.content_block.type == "redacted_thinking"
    assert start.content_block.data == message.content[0].data  # type: ignore[union-attr]


def test_a_cached_prefix_is_written_once_then_read(client: httpx.Client, provider: Srv) -> None:
    hour = {"type": "ephemeral", "ttl": "1h"}
    system = [{"type": "text", "text": "A long system prompt. " * 40, "cache_control": hour}]
    first = whole(client, provider, system=system).usage
    assert first.cache_creation_input_tokens
    assert not first.cache_read_input_tokens
    assert first.cache_creation is not None
    assert first.cache_creation.ephemeral_1h_input_tokens == first.cache_creation_input_tokens
    second = whole(client, provider, system=system, messages=[{"role": "user", "content": "another question"}]).usage
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert not second.cache_creation_input_tokens
    events = streamed(client, provider, system=system)
    start = events[0].message.usage
    assert start.cache_read_input_tokens == first.cache_creation_input_tokens
    assert events[-2].usage.cache_read_input_tokens == start.cache_read_input_tokens
    provider.server.reset()
    assert whole(client, provider, system=system).usage.cache_creation_input_tokens == first.cache_creation_input_tokens


def test_a_scripted_usage_is_reported_when_the_request_marks_no_cache(client: httpx.Client, provider: Srv) -> None:
    usage = {"cache_read_input_tokens": 40, "cache_write_input_tokens": 20, "reasoning_tokens": 10}
    script(client, provider.url, [{"preset": "reply", "text": "ok", "usage": usage}], model="claude-fake")
    reported = whole(client, provider).usage
    assert (reported.cache_read_input_tokens, reported.cache_creation_input_tokens) == (40, 20)


def test_a_stop_sequence_ends_the_reply_before_it(client: httpx.Client, provider: Srv) -> None:
    message = whole(client, provider, stop_sequences=["hel"])
    assert (message.content[0].text, message.stop_reason, message.stop_sequence) == ("You said: ", "stop_sequence",  # type: ignore[union-attr]
                                                                                     "hel")  # fmt: skip
    events = streamed(client, provider, stop_sequences=["hel"])
    text = "".join(e.delta.text for e in events if e.type == "content_block_delta")
    assert text == "You said: "
    assert (events[-2].delta.stop_reason, events[-2].delta.stop_sequence) == ("stop_sequence", "hel")


# ---------------------------------------------------------------- what it refuses, as the API does


def _thinking_turn(client: httpx.Client, provider: Srv) -> list[dict[str, Any]]:
    """A thinking tool turn, answered: the conversation to send back with the tool's result."""
    first = whole(client, provider, thinking=THINKING, tools=TOOLS)
    use = first.content[1]
    result = [{"type": "tool_result", "tool_use_id": use.id, "content": "found it"}]  # type: ignore[union-attr]
    return turns("hello", [b.model_dump(exclude_none=True) for b in first.content], result)


def test_a_thinking_tool_turn_passed_back_whole_is_answered(client: httpx.Client, provider: Srv) -> None:
    messages = _thinking_turn(client, provider)
    message = whole(client, provider, thinking=THINKING, tools=TOOLS, messages=messages)
    assert message.content[-1].text.startswith("Based on the tool result")  # type: ignore[union-attr]


def test_a_thinking_tool_turn_without_its_thinking_is_refused(client: httpx.Client, provider: Srv) -> None:
    messages = _thinking_turn(client, provider)
    messages[1]["content"] = messages[1]["content"][1:]
    said = refused(client, provider, thinking=THINKING, tools=TOOLS, messages=messages)
    assert "Expected `thinking` or `redacted_thinking`, but found `tool_use`" in said


@pytest.mark.parametrize("field", ["thinking", "signature"])
def test_a_thinking_block_altered_by_one_byte_is_refused(client: httpx.Client, provider: Srv, field: str) -> None:
    messages = _thinking_turn(client, provider)
    block = messages[1]["content"][0]
    block[field] = block[field][:-1] + ("A" if block[field][-1] != "A" else "B")
    said = refused(client, provider, thinking=THINKING, tools=TOOLS, messages=messages)
    assert said == "messages.1.content.0: Invalid `signature` in `thinking` block"


def test_redacted_data_altered_is_refused(client: httpx.Client, provider: Srv) -> None:
    blocks = [{"type": "redacted_thinking", "data": base64.b64encode(b"not the fake's own data").decode()}]
    said = refused(client, provider, messages=turns("hi", [*blocks, {"type": "text", "text": "ok"}], "more"))
    assert said == "messages.1.content.0: Invalid `data` in `redacted_thinking` block"


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"thinking": {"type": "enabled", "budget_tokens": 1000}}, "greater than or equal to 1024"),
        ({"thinking": {"type": "enabled", "budget_tokens": 4096}}, "`max_tokens` must be greater than"),
        ({"thinking": THINKING, "temperature": 0.5}, "`temperature` may only be set to 1"),
        ({"thinking": THINKING, "top_k": 5}, "`top_k` must be unset"),
        ({"thinking": THINKING, "top_p": 0.5}, "`top_p` must be greater than or equal to 0.95"),
        ({"thinking": THINKING, "tools": TOOLS, "tool_choice": {"type": "any"}}, "forces tool use"),
        ({"thinking": THINKING, "messages": turns("hi", "Sure")}, "final message must be a user message"),
        (
            {"system": [{"type": "text", "text": "x", "cache_control": CACHED}],
             "tools": [dict(TOOLS[0], cache_control=CACHED)],
             "messages": [{"role": "user", "content": [{"type": "text", "text": t, "cache_control": CACHED}
                                                        for t in "abc"]}]},
            "A maximum of 4 blocks with cache_control may be provided. Found 5.",
        ),
        (
            {"system": [{"type": "text", "text": "x", "cache_control": CACHED}],
             "messages": [{"role": "user", "content": [
                 {"type": "text", "text": "y", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}]},
            "must not come after a ttl='5m'",
        ),
    ],
)  # fmt: skip
def test_the_apis_rules_are_refused_in_its_words(
    client: httpx.Client, provider: Srv, body: dict[str, Any], said: str
) -> None:
    assert said in refused(client, provider, **body)
    assert provider.server.requests()  # it was heard, and answered 400


def _image(media_type: str, data: str) -> list[dict[str, Any]]:
    block = {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    return [{"role": "user", "content": [block, {"type": "text", "text": "what is it?"}]}]


@pytest.mark.parametrize(
    ("messages", "said"),
    [
        (_image("image/bmp", base64.b64encode(PNG).decode()), "Input should be 'image/jpeg'"),
        (_image("image/png", "not base64!"), "must be base64 text"),
        (_image("image/jpeg", base64.b64encode(PNG).decode()), "Image does not match the provided media type"),
        (
            [{"role": "user", "content": [{"type": "document", "source": {
                "type": "base64", "media_type": "application/pdf", "data": base64.b64encode(b"plain").decode()}}]}],
            "The PDF specified was not valid.",
        ),
    ],
)  # fmt: skip
def test_a_bad_image_or_pdf_is_refused(
    client: httpx.Client, provider: Srv, messages: list[dict[str, Any]], said: str
) -> None:
    assert said in refused(client, provider, messages=messages)


def test_a_good_image_and_pdf_are_answered(client: httpx.Client, provider: Srv) -> None:
    source = {"type": "base64", "media_type": "application/pdf", "data": base64.b64encode(b"%PDF-1.7").decode()}
    pdf = {"type": "document", "title": "T", "source": source}
    messages = _image("image/png", base64.b64encode(PNG).decode())
    messages[0]["content"].insert(0, pdf)
    assert whole(client, provider, messages=messages).content[0].text == "You said: what is it?"  # type: ignore[union-attr]


def test_a_key_the_api_has_and_the_front_does_not_carry_is_taken(client: httpx.Client, provider: Srv) -> None:
    whole(client, provider, service_tier="auto")
    assert provider.server.requests()[-1]["body"]["service_tier"] == "auto"
    assert "bogus" in refused(client, provider, bogus=1)
