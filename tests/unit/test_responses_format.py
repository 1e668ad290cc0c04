"""The Responses format's own rules, beyond the round trips every format makes (``test_formats.py``).

Reasoning items: a reply's reasoning (its own, with an id and encrypted content; another format's, a
bare signature or redacted data) rendered by the front, whole and streamed, reads back through the
upstream as the same parts, so a Responses client can hand an Anthropic model's thinking back.
The front refuses what a stateless sidecar cannot carry, naming the key. A Response object's
``"error": null`` is a reply; a failed one, a stream's ``response.failed`` and ``error`` events are
error answers of their code's status.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from sidecar.config import ProviderConfig
from sidecar.core.conversation import ReasoningPart, ToolCall
from sidecar.core.kinds import FailureKind, FinishReason, RetrySignal
from sidecar.core.retry import Retry
from sidecar.core.stream import Delta, ReasoningDelta, TextDelta, ToolCallDelta
from sidecar.core.taxonomy import InvalidInput, SidecarFailure
from sidecar.providers.errors import Target
from sidecar.providers.formats.chat import ChatReply, StreamFault
from sidecar.providers.formats.openai_responses import FORMAT
from sidecar.providers.formats.openai_responses.upstream import ResponsesUpstream
from sidecar.providers.formats.protocol import ReplyHead

HEAD = ReplyHead("resp_1", "m", 1_700_000_000)
TARGET = Target("prov", "acct", "m", "up-m", "http://provider/v1/responses")
NOW = datetime(2026, 1, 1, tzinfo=UTC)
REASONING = {
    "own, two summaries": [
        ReasoningPart("First I read.", "rs_abc gAAAAencrypted==", "", "openai_responses"),
        ReasoningPart("Then I plan.", "", "", "openai_responses"),
    ],
    "own, no summary": [ReasoningPart("", "rs_abc gAAAAencrypted==", "", "openai_responses")],
    "anthropic's, two blocks": [
        ReasoningPart("Think one.", "EqQBsig1", "", "anthropic"),
        ReasoningPart("Think two.", "EqQBsig2", "", "anthropic"),
    ],
    "redacted": [ReasoningPart(redacted_data="EmwKopaque", format="anthropic")],
}


def upstream() -> ResponsesUpstream:
    return FORMAT.upstream(ProviderConfig(wire_format="openai_responses", base_url="http://p"))


def plain(parts: list[ReasoningPart]) -> list[tuple[str, str, str]]:
    return [(r.text, r.signature, r.redacted_data) for r in parts]


def reply_of(case: str) -> ChatReply:
    calls = [ToolCall("call_1", "search", '{"q":"x"}')]
    return ChatReply("", calls, FinishReason.TOOL_CALLS, reasoning=REASONING[case], input_tokens=3, output_tokens=4)


@pytest.mark.parametrize("case", list(REASONING))
def test_reasoning_rendered_whole_reads_back_as_the_same_parts(case: str) -> None:
    body = FORMAT.front.render(reply_of(case), HEAD)
    got = upstream().parse(json.loads(json.dumps(body)))
    assert plain(got.reasoning) == plain(REASONING[case])
    assert [c.id for c in got.tool_calls] == ["call_1"]


@pytest.mark.parametrize("case", list(REASONING))
def test_reasoning_streamed_reads_back_as_the_same_parts(case: str) -> None:
    writer = FORMAT.front.writer(HEAD)
    events = writer.start()
    sent: list[Delta] = []
    signed: list[ReasoningDelta] = []  # an item's signature comes after its summaries (output_item.done)
    for i, r in enumerate(REASONING[case]):
        if r.signature or r.redacted_data:
            sent += signed
            signed = []
        if r.redacted_data:
            sent.append(ReasoningDelta(i, redacted_data=r.redacted_data))
            continue
        sent += [ReasoningDelta(i, text=r.text)] if r.text else [ReasoningDelta(i)]
        if r.signature:
            signed.append(ReasoningDelta(i, signature=r.signature))
    sent += signed
    sent += [ToolCallDelta(0, "call_1", "search", ""), ToolCallDelta(0, "", "", '{"q":"x"}')]
    for d in sent:
        events += writer.delta(d)
    events += writer.final(reply_of(case))
    decoder = upstream().stream_decoder()
    for name, data in events:
        decoder.feed(name, json.dumps(data))
    assert decoder.complete
    got = decoder.reply()
    assert got is not None
    assert plain(got.reasoning) == plain(REASONING[case])


def test_a_reasoning_item_from_the_front_goes_upstream_byte_identical() -> None:
    body = {"model": "m", "input": [
        {"role": "user", "content": "hi"},
        {"type": "reasoning", "id": "rs_abc", "encrypted_content": "gAAAA+/=", "summary": [
            {"type": "summary_text", "text": "a"}, {"type": "summary_text", "text": "b"}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "id": "fc_1", "status": "completed"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ]}  # fmt: skip
    from sidecar.providers.formats.chat import ChatRequest

    request = FORMAT.front.parse(body).request
    chat = ChatRequest("m", "", list(request.messages), [], None, 10, None)
    sent = upstream().body(chat)
    assert sent["input"][1] == {"type": "reasoning", "id": "rs_abc", "summary": body["input"][1]["summary"],
                                "encrypted_content": "gAAAA+/="}  # fmt: skip
    assert sent["store"] is False
    assert sent["include"] == ["reasoning.encrypted_content"]


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ({"previous_response_id": "resp_0"}, "previous_response_id"),
        ({"conversation": {"id": "conv_1"}}, "conversation"),
        ({"store": True}, "store"),
        ({"background": True}, "background"),
        ({"include": ["file_search_call.results"]}, "include[0]"),
        ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
        ({"tools": [{"type": "function", "name": "f", "strict": "yes"}]}, "tools[0].strict"),
        ({"text": {"format": {"type": "json_schema", "name": "r", "schema": {}, "strict": 1}}}, "text.format.strict"),
        ({"text": {"format": {"type": "json_object", "x_mode": "fast"}}}, "text.format.x_mode"),  # nowhere to carry it
        ({"text": {"format": {"type": "text", "x_mode": "fast"}}}, "text.format.x_mode"),
    ],
)
def test_the_front_refuses_what_a_stateless_sidecar_cannot_carry(extra: dict[str, Any], key: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        FORMAT.front.parse({"model": "m", "input": "hi", **extra})
    assert caught.value.detail.parameter == key


def test_strict_tools_are_carried_and_a_strict_schema_is_held_by_the_sidecar() -> None:
    """What the Agents SDK sends by default: strict function tools, and a strict output schema."""
    schema = {"type": "object", "properties": {"a": {}}, "required": ["a"], "additionalProperties": False}
    tools = [{"type": "function", "name": n, "parameters": schema, **s} for n, s in
             (("f", {"strict": True}), ("g", {"strict": False}), ("h", {}))]  # fmt: skip
    text = {"format": {"type": "json_schema", "name": "r", "schema": schema, "strict": True}}
    request = FORMAT.front.parse({"model": "m", "input": "hi", "tools": tools, "text": text}).request
    assert [t.strict for t in request.tools] == [True, False, None]
    assert json.loads(request.response_schema_json) == schema  # validated by the sidecar: strict or not


def test_store_false_and_the_encrypted_content_include_are_accepted() -> None:
    ask = FORMAT.front.parse({"model": "m", "input": "hi", "store": False, "include": ["reasoning.encrypted_content"]})
    assert ask.request.messages[0].text == "hi"


@pytest.mark.parametrize(
    ("code", "means"),
    [
        ("rate_limit_exceeded", RetrySignal.RATE_LIMIT),
        ("server_error", RetrySignal.TRANSIENT),
        ("context_length_exceeded", FailureKind.CONTEXT_OVERFLOW),
        ("invalid_prompt", FailureKind.INVALID_INPUT),
    ],
)
def test_a_failed_response_and_a_streams_error_are_classified_by_their_code(
    code: str, means: RetrySignal | FailureKind
) -> None:
    error = {"code": code, "message": "something happened"}
    failed = {"type": "response.failed", "sequence_number": 3,
              "response": {"id": "r", "status": "failed", "output": [], "error": error}}  # fmt: skip
    for event in (failed, {"type": "error", "sequence_number": 3, **error}):
        decoder = upstream().stream_decoder()
        decoder.feed("response.output_text.delta", json.dumps({"type": "response.output_text.delta", "delta": "x"}))
        with pytest.raises(StreamFault) as caught:
            decoder.feed(event["type"], json.dumps(event))
        body = caught.value.error_body
        assert body is not None
        outcome = upstream().classify(500, {}, body, TARGET, (), NOW)
        if isinstance(means, RetrySignal):
            assert isinstance(outcome, Retry)
            assert outcome.signal is means
        else:
            assert isinstance(outcome, SidecarFailure)
            assert outcome.kind is means


def test_a_flagged_invalid_prompt_is_a_refusal() -> None:
    body = {"error": {"code": "invalid_prompt", "message": "Your prompt was flagged as potentially violating our "
                      "usage policy."}}  # fmt: skip
    outcome = upstream().classify(400, {}, json.dumps(body), TARGET, (), NOW)
    assert isinstance(outcome, SidecarFailure)
    assert outcome.kind is FailureKind.PROVIDER_REFUSAL


def test_unknown_events_are_skipped_and_garbled_data_is_a_fault() -> None:
    decoder = upstream().stream_decoder()
    assert decoder.feed("response.fake_new", json.dumps({"type": "response.fake_new", "x": 1})) == []
    assert decoder.feed("", "") == []
    assert decoder.feed("response.output_text.delta", '{"type":"response.output_text.delta","delta":"hi"}') == [
        TextDelta("hi")
    ]
    with pytest.raises(StreamFault) as caught:
        decoder.feed("response.output_text.delta", '{"type":"response.out')
    assert caught.value.error_body is None


def test_azure_on_the_responses_format_goes_to_the_v1_path_with_the_key_in_api_key() -> None:
    from sidecar.config import ProviderConfig
    from sidecar.providers.formats.registry import format_named

    provider = ProviderConfig.model_validate(
        {"wire_format": "openai_responses", "base_url": "https://r.openai.azure.com", "azure": {"path": "v1"}}
    )
    upstream = format_named("openai_responses").upstream(provider)
    assert upstream.path("gpt4o-prod", stream=False) == "/openai/v1/responses"
    assert upstream.headers("azure-key-1234567890") == {"api-key": "azure-key-1234567890"}


def test_azure_deployment_urls_are_refused_on_the_responses_format() -> None:
    import pytest
    from pydantic import ValidationError

    from sidecar.config import ProviderConfig

    with pytest.raises(ValidationError, match="Responses API at /openai/v1/responses only"):
        ProviderConfig.model_validate(
            {"wire_format": "openai_responses", "base_url": "https://r.openai.azure.com", "azure": {}}
        )
