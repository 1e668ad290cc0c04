"""botocore judges the fake: every Converse reply, stream frame and error the Bedrock wire sends is AWS's shape.

The fake provider (``sidecar/providers/formats/bedrock_converse/fake.py``) answers on loopback. botocore's
own ``bedrock-runtime``
client (its service model, SigV4 signer, REST-JSON and event-stream parsers; ``botocore`` pinned in
constraints.txt) is pointed at it: ``converse`` and ``converse_stream`` read its replies and streams, and
its error answers raise botocore's ``ClientError`` / ``EventStreamError`` with their code. The fake in
turn verifies botocore's signature with its test credential. botocore's parsers drop what a shape does
not define, so each raw body and each raw frame (read by botocore's ``EventStreamBuffer``) is also walked
against the service model's shapes, strictly: no member the model does not define, every required one
present, a union with exactly one member. So the fake cannot drift from the real shapes.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import botocore.session
import httpx
import pytest
from botocore.config import Config
from botocore.eventstream import EventStreamBuffer
from botocore.exceptions import ClientError, EventStreamError
from botocore.model import ListShape, MapShape, ServiceModel, Shape, StructureShape

from sidecar.fakes._threaded import ThreadedServer
from sidecar.fakes.provider import FakeProvider
from sidecar.providers.formats.bedrock_converse.fake import FAKE_ACCESS_KEY, FAKE_SECRET_KEY

MODEL = "anthropic.claude-sonnet-4-20250514-v1:0"
REGION = "us-east-1"
SEARCH = {"toolSpec": {"name": "search", "description": "Search.", "inputSchema": {"json": {
    "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}}  # fmt: skip
ASK: dict[str, Any] = {
    "messages": [{"role": "user", "content": [{"text": "find retries"}]}],
    "toolConfig": {"tools": [SEARCH]},
}
THINKING = {"additionalModelRequestFields": {"thinking": {"type": "enabled", "budget_tokens": 1024}}}
STEPS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "the brain's reply": ({}, {}),
    "a tool call": ({"preset": "reply", "tool_calls": [{"name": "search", "arguments": {"query": "x"}}]}, {}),
    "two tool calls and text": ({"preset": "reply", "text": "Looking.", "tool_calls": [
        {"name": "search", "arguments": {"query": "a"}}, {"name": "search", "arguments": {"query": "b"}}]}, {}),
    "thinking and a tool call": ({"preset": "reply", "tool_calls": [{"name": "search", "arguments": {}}]}, THINKING),
    "thinking and text": ({}, THINKING),
    "cache usage": ({"usage": {"cache_read_input_tokens": 5, "cache_write_input_tokens": 7}}, {}),
    "truncated": ({"preset": "truncated"}, {}),
    "a refusal": ({"preset": "refusal"}, {}),
    "finish content_filter": ({"preset": "reply", "finish": "content_filter"}, {}),
    "content_filter": ({"preset": "content_filter"}, {}),
    "content_policy (a guardrail)": ({"preset": "content_policy"}, {}),
    "mid-stream overload": ({"stream_fault": "overloaded", "after_deltas": 2}, {}),
    "mid-stream throttling": ({"stream_fault": "overloaded", "after_deltas": 2,
                               "extra_error_fields": {"__type": "ThrottlingException"}}, {}),
    "mid-stream model stream error": ({"stream_fault": "server_error", "after_deltas": 1,
                                       "extra_error_fields": {"__type": "ModelStreamErrorException"}}, {}),
}  # fmt: skip
ERRORS = [
    ({"preset": "rate_limit"}, "ThrottlingException", 429),
    ({"preset": "overloaded"}, "ServiceUnavailableException", 503),
    ({"preset": "server_error"}, "InternalServerException", 500),
    ({"preset": "context_too_long"}, "ValidationException", 400),
    ({"preset": "invalid_key"}, "UnrecognizedClientException", 403),
    ({"preset": "model_not_found"}, "ResourceNotFoundException", 404),
    ({"status": 408}, "ModelTimeoutException", 408),
    ({"status": 424}, "ModelErrorException", 424),
    ({"status": 403}, "AccessDeniedException", 403),
]


@pytest.fixture(scope="module")
def fake() -> Iterator[ThreadedServer[FakeProvider]]:
    with ThreadedServer(FakeProvider()) as srv:
        yield srv


@pytest.fixture(scope="module")
def model() -> ServiceModel:
    return botocore.session.get_session().get_service_model("bedrock-runtime")


def client(fake: ThreadedServer[FakeProvider]) -> Any:
    return botocore.session.get_session().create_client(
        "bedrock-runtime",
        endpoint_url=fake.url,
        region_name=REGION,
        aws_access_key_id=FAKE_ACCESS_KEY,
        aws_secret_access_key=FAKE_SECRET_KEY,
        config=Config(retries={"total_max_attempts": 1}),
    )


def post(fake: ThreadedServer[FakeProvider], step: dict[str, Any], extra: dict[str, Any], *, stream: bool) -> Any:
    fake.server.script(MODEL, [step])
    url = f"{fake.url}/model/{MODEL}/{'converse-stream' if stream else 'converse'}"
    return httpx.post(url, json={**ASK, **extra}, headers={"authorization": "Bearer test-key"}, timeout=30)


def conforms(value: Any, shape: Shape, at: str = "$") -> None:
    """``value`` (JSON as the wire sends it) is of ``shape``, strictly (the module's docstring)."""
    kind = shape.type_name
    if isinstance(shape, StructureShape):
        if shape.metadata.get("document"):
            return  # a Document: any JSON
        assert isinstance(value, dict), f"{at}: {value!r} is not an object"
        unknown = set(value) - set(shape.members)
        assert not unknown, f"{at}: {sorted(unknown)} are not members of {shape.name}"
        missing = set(shape.required_members) - set(value)
        assert not missing, f"{at}: {shape.name} lacks required {sorted(missing)}"
        if shape.is_tagged_union:
            assert len(value) == 1, f"{at}: the union {shape.name} holds {sorted(value)}"
        for key, item in value.items():
            conforms(item, shape.members[key], f"{at}.{key}")
    elif isinstance(shape, ListShape):
        assert isinstance(value, list), f"{at}: not a list"
        for i, item in enumerate(value):
            conforms(item, shape.member, f"{at}[{i}]")
    elif isinstance(shape, MapShape):
        assert isinstance(value, dict), f"{at}: not a map"
        for key, item in value.items():
            conforms(item, shape.value, f"{at}.{key}")
    elif kind == "string":
        assert isinstance(value, str), f"{at}: {value!r} is not a string"
        if shape.enum:
            assert value in shape.enum, f"{at}: {value!r} is not one of {shape.name}'s {shape.enum}"
    elif kind in ("integer", "long"):
        assert not isinstance(value, bool), f"{at}: {value!r} is not an integer"
        assert isinstance(value, int), f"{at}: {value!r} is not an integer"
    elif kind in ("float", "double"):
        assert not isinstance(value, bool), f"{at}: {value!r} is not a number"
        assert isinstance(value, int | float), f"{at}: {value!r} is not a number"
    elif kind == "boolean":
        assert isinstance(value, bool), f"{at}: not a boolean"
    elif kind == "blob":
        assert isinstance(value, str), f"{at}: a blob is base64 text"
        base64.b64decode(value, validate=True)
    else:
        raise AssertionError(f"{at}: a {kind} shape the fake should not send")


def frames(body: bytes) -> list[tuple[dict[str, Any], bytes]]:
    """Every event-stream frame of ``body``, as botocore's buffer parses it (prelude, headers, CRCs)."""
    buffer = EventStreamBuffer()
    buffer.add_data(body)
    messages = list(buffer)
    assert sum(m.prelude.total_length for m in messages) == len(body)  # no half frame left over
    return [(m.to_response_dict()["headers"], m.payload) for m in messages]


@pytest.mark.parametrize("case", list(STEPS))
def test_every_whole_reply_is_a_converse_response(
    fake: ThreadedServer[FakeProvider], model: ServiceModel, case: str
) -> None:
    step, extra = STEPS[case]
    if "stream_fault" in step:
        return  # a stream's fault only
    answer = post(fake, step, extra, stream=False)
    assert answer.status_code == 200, answer.text
    conforms(answer.json(), model.operation_model("Converse").output_shape)


@pytest.mark.parametrize("case", list(STEPS))
def test_every_stream_frame_is_a_converse_stream_event(
    fake: ThreadedServer[FakeProvider], model: ServiceModel, case: str
) -> None:
    step, extra = STEPS[case]
    answer = post(fake, step, extra, stream=True)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/vnd.amazon.eventstream"
    events = model.shape_for("ConverseStreamOutput")
    assert isinstance(events, StructureShape)
    read = frames(answer.content)
    assert read
    names = []
    for headers, payload in read:
        assert headers[":content-type"] == "application/json"
        name = headers[":event-type"] if headers[":message-type"] == "event" else headers[":exception-type"]
        assert headers[":message-type"] in ("event", "exception")
        assert name in events.members, f"{name} is no ConverseStream event"
        conforms(json.loads(payload), events.members[name], name)
        names.append(name)
    if "stream_fault" in step:
        assert names[-1].endswith("Exception")
    else:
        assert names[0] == "messageStart"
        assert names[-2:] == ["messageStop", "metadata"]


@pytest.mark.parametrize("case", list(STEPS))
def test_botocore_reads_every_reply_and_stream_of_the_fake(fake: ThreadedServer[FakeProvider], case: str) -> None:
    step, extra = STEPS[case]
    bedrock = client(fake)
    ask = {"modelId": MODEL, **ASK, **extra}
    if "stream_fault" not in step:
        fake.server.script(MODEL, [step])
        reply = bedrock.converse(**ask)
        assert reply["stopReason"] in ("end_turn", "tool_use", "max_tokens", "guardrail_intervened",
                                       "content_filtered")  # fmt: skip
        assert reply["usage"]["inputTokens"] >= 0
        assert reply["output"]["message"]["role"] == "assistant"
    fake.server.script(MODEL, [step])
    stream = bedrock.converse_stream(**ask)["stream"]
    if "stream_fault" in step:
        with pytest.raises(EventStreamError) as caught:
            for _ in stream:
                pass
        named = step.get("extra_error_fields", {}).get("__type")
        default = "ServiceUnavailableException" if step["stream_fault"] == "overloaded" else "InternalServerException"
        code = named or default  # in a stream botocore reports the member name, lowerCamelCase, as AWS sends it
        assert caught.value.response["Error"]["Code"] == code[0].lower() + code[1:]
        return
    events = list(stream)
    assert list(events[0]) == ["messageStart"]
    assert [next(iter(e)) for e in events[-2:]] == ["messageStop", "metadata"]
    assert events[-1]["metadata"]["usage"]["outputTokens"] >= 0


def test_botocore_reads_text_tool_calls_and_signed_reasoning(fake: ThreadedServer[FakeProvider]) -> None:
    bedrock = client(fake)
    fake.server.script(MODEL, [{"preset": "reply", "text": "Sunny in Paris."}])
    reply = bedrock.converse(modelId=MODEL, messages=[{"role": "user", "content": [{"text": "weather?"}]}])
    assert reply["output"]["message"]["content"] == [{"text": "Sunny in Paris."}]
    assert reply["stopReason"] == "end_turn"
    fake.server.script(MODEL, [{"preset": "reply", "tool_calls": [{"name": "search", "arguments": {"query": "x"}}]}])
    called = bedrock.converse(modelId=MODEL, **ASK, **THINKING)
    thought, use = called["output"]["message"]["content"]
    assert thought["reasoningContent"]["reasoningText"]["signature"]
    assert use["toolUse"]["input"] == {"query": "x"}
    assert called["stopReason"] == "tool_use"
    back = {"role": "assistant", "content": [thought, use]}
    result = {"role": "user", "content": [{"toolResult": {"toolUseId": use["toolUse"]["toolUseId"],
                                                          "content": [{"text": "3 retries"}]}}]}  # fmt: skip
    second = bedrock.converse(modelId=MODEL, messages=[*ASK["messages"], back, result], toolConfig=ASK["toolConfig"],
                              **THINKING)  # fmt: skip
    assert second["output"]["message"]["content"][-1] == {"text": "Based on the tool result: 3 retries"}
    stream = bedrock.converse_stream(modelId=MODEL, messages=[{"role": "user", "content": [{"text": "one two"}]}])
    text = "".join(e["contentBlockDelta"]["delta"]["text"] for e in stream["stream"] if "contentBlockDelta" in e)
    assert text == "You said: one two"
    record = fake.server.requests(model=MODEL)[-1]
    assert record["headers"]["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={FAKE_ACCESS_KEY}/")


@pytest.mark.parametrize(("step", "code", "status"), ERRORS)
def test_every_error_answer_is_botocores_client_error(
    fake: ThreadedServer[FakeProvider], step: dict[str, Any], code: str, status: int
) -> None:
    fake.server.script(MODEL, [step])
    with pytest.raises(ClientError) as caught:
        client(fake).converse(modelId=MODEL, messages=[{"role": "user", "content": [{"text": "hi"}]}])
    error = caught.value.response
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == (code, status)
    assert error["Error"]["Message"]


def test_a_signature_botocore_made_under_another_secret_is_refused(fake: ThreadedServer[FakeProvider]) -> None:
    bedrock = botocore.session.get_session().create_client(
        "bedrock-runtime", endpoint_url=fake.url, region_name=REGION, aws_access_key_id=FAKE_ACCESS_KEY,
        aws_secret_access_key="another-secret", config=Config(retries={"total_max_attempts": 1}),
    )  # fmt: skip
    with pytest.raises(ClientError) as caught:
        bedrock.converse(modelId=MODEL, messages=[{"role": "user", "content": [{"text": "hi"}]}])
    assert caught.value.response["Error"]["Code"] == "InvalidSignatureException"
