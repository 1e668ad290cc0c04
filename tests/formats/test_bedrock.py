"""A model of the Amazon Bedrock Converse wire format (``wire_format: bedrock_converse``) through the running sidecar.

gRPC in, the fake provider's Bedrock wire out (``sidecar/providers/formats/bedrock_converse/fake.py``), on
loopback. Requests are
signed with SigV4 by botocore's signer from the standard AWS environment variables (the fake recomputes
the signature of its own test credential and refuses one that does not match), or carry a Bedrock API
key as a bearer token. A whole reply and a streamed one (binary event-stream frames the fake encodes and
botocore's parser reads), a tool round with the reasoning passed back byte-identical (the fake verifies
its signature), and every failure Bedrock answers with, each landing in the one taxonomy:
ThrottlingException is a rate limit, ServiceUnavailableException and ModelNotReadyException overload,
ValidationException invalid input or, "Input is too long", context overflow, AccessDeniedException
unauthorized, ResourceNotFoundException model not found, ModelTimeoutException transient, an exception
frame mid-stream the mid-stream policy's, guardrail_intervened / content_filtered a refusal with the stop
reason as its category, max_tokens truncation.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import grpc
import pytest
import sidecar_client as sc
from sidecar_client import pb, user
from sidecar_contract.v1 import sidecar_pb2_grpc as pb_grpc

from sidecar.fakes._threaded import ThreadedServer
from sidecar.fakes.provider import FakeProvider
from sidecar.providers.formats.bedrock_converse.fake import FAKE_ACCESS_KEY, FAKE_SECRET_KEY, GUARDRAIL_TEXT
from tests.conftest import Running, Start
from tests.unit.shapes import PNG

UPSTREAM = "anthropic.claude-sonnet-4-20250514-v1:0"
REGION = "us-west-2"
BEARER = "ABSKQmVkcm9ja0FQSUtleS1test-SECRET-bedrock-key"
BED = {
    "provider": "bed",
    "upstream_model": UPSTREAM,
    "context_window": 8000,
    "max_output_tokens": 2048,
    "default_output_tokens": 256,
}
SEARCH = pb.ToolDefinition(
    name="search",
    description="Search the docs.",
    parameters_json=json.dumps({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
)
THINK = pb.Reasoning(budget_tokens=1024)
TEXT = "one two three four five six"
DELTAS = ["You", " said:", " one", " two", " three", " four", " five", " six"]
SIGV4 = re.compile(
    rf"^AWS4-HMAC-SHA256 Credential={FAKE_ACCESS_KEY}/(\d{{8}})/{REGION}/bedrock/aws4_request, "
    r"SignedHeaders=([a-z0-9;-]+), Signature=[0-9a-f]{64}$"
)


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", FAKE_ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", FAKE_SECRET_KEY)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)


@pytest.fixture
async def bed(aws_env: None, start_sidecar: Start, provider: ThreadedServer[FakeProvider]) -> Running:
    return await start_sidecar(
        providers={"bed": {"wire_format": "bedrock_converse", "base_url": provider.url, "region": REGION}},
        models={"bed": BED},
    )


def script(r: Running, *steps: dict[str, Any]) -> None:
    r.provider.script(UPSTREAM, list(steps))


def sent(r: Running) -> list[dict[str, Any]]:
    return r.provider.requests(model=UPSTREAM)


def request(*messages: pb.Message, **fields: Any) -> pb.CallModelRequest:
    return pb.CallModelRequest(model="bed", messages=list(messages), **fields)


async def call(r: Running, req: pb.CallModelRequest) -> pb.CallModelResponse:
    async with grpc.aio.insecure_channel(r.app.address) as channel:
        return await pb_grpc.SidecarStub(channel).CallModel(req)


async def failed(r: Running, req: pb.CallModelRequest | None = None) -> sc.SidecarError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(r, req or request(user("hello")))
    return sc.from_rpc_error(caught.value)


async def streamed(r: Running, text: str = TEXT) -> list[pb.StreamModelEvent]:
    return [e async for e in r.client.stream_model("bed", [user(text)])]


def assistant(reply: pb.CallModelResponse) -> pb.Message:
    m = reply.message
    return pb.Message(role=pb.ROLE_ASSISTANT, text=m.text, tool_calls=m.tool_calls, reasoning=m.reasoning)


def result(reply: pb.CallModelResponse, text: str) -> pb.Message:
    (c,) = reply.message.tool_calls
    return pb.Message(role=pb.ROLE_TOOL, tool_results=[pb.ToolCallResult(call_id=c.id, content=text, name=c.name)])


def waits(r: Running) -> list[float]:
    return [w for w in r.clock.sleeps if w >= 1]  # throttle pacing waits are sub-second


def raw_error(status: int, error_type: str, message: str) -> dict[str, Any]:
    """A scripted answer as Bedrock sends an error: the status, x-amzn-ErrorType, {"message"}."""
    return {"status": status, "body": {"message": message}, "headers": {"x-amzn-ErrorType": error_type}}


# ---------------------------------------------------------------- replies, signed


async def test_a_whole_reply_goes_to_converse_signed_with_sigv4(bed: Running) -> None:
    reply = await bed.client.call_model("bed", [user("hello there")], system="Be brief.", temperature=0.5)
    assert reply.message.text == "You said: hello there"
    assert reply.finish_reason == pb.FINISH_REASON_STOP
    assert reply.usage.input_tokens > 0
    assert reply.usage.output_tokens > 0
    assert (reply.attempts, reply.provider) == (1, "bed")
    (record,) = sent(bed)
    assert record["path"] == f"/model/{UPSTREAM}/converse"
    headers = record["headers"]
    signed = SIGV4.match(headers["authorization"])
    assert signed is not None, headers["authorization"]
    assert signed.group(1) == headers["x-amz-date"][:8]
    assert set(signed.group(2).split(";")) == {"content-type", "host", "x-amz-date"}
    body = record["body"]
    assert body["messages"] == [{"role": "user", "content": [{"text": "hello there"}]}]
    assert body["system"] == [{"text": "Be brief."}]
    assert body["inferenceConfig"] == {"maxTokens": 256, "temperature": 0.5}
    assert "modelId" not in body
    assert FAKE_SECRET_KEY not in reply.SerializeToString().decode("utf-8", "replace")


async def test_a_signature_under_another_secret_is_refused_as_unauthorized(
    bed: Running, monkeypatch: pytest.MonkeyPatch, start_sidecar: Start, provider: ThreadedServer[FakeProvider]
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret-the-fake-knows")
    other = await start_sidecar(
        providers={"bed": {"wire_format": "bedrock_converse", "base_url": provider.url, "region": REGION}},
        models={"bed": BED},
    )
    err = await failed(other)
    assert isinstance(err, sc.UnauthorizedError)
    assert err.http is not None
    assert err.http.status_code == 403
    assert "InvalidSignatureException" in err.message
    assert "not-the-secret" not in err.message + err.http.body


async def test_a_bedrock_api_key_goes_as_a_bearer_token_unsigned(
    monkeypatch: pytest.MonkeyPatch, start_sidecar: Start, provider: ThreadedServer[FakeProvider]
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", BEARER)
    r = await start_sidecar(
        providers={"bed": {"wire_format": "bedrock_converse", "base_url": provider.url}}, models={"bed": BED}
    )
    reply = await r.client.call_model("bed", [user("hi")])
    assert reply.message.text == "You said: hi"
    (record,) = sent(r)
    assert record["headers"]["authorization"] == f"Bearer {BEARER}"
    assert "x-amz-date" not in record["headers"]
    assert BEARER not in reply.SerializeToString().decode("utf-8", "replace")
    script(r, raw_error(400, "ValidationException", f"The key {BEARER} is not valid for this model."))
    err = await failed(r)  # a key read from the environment by the format is masked like a configured one
    assert isinstance(err, sc.InvalidInputError)
    assert err.http is not None
    assert BEARER not in err.message + err.http.body


async def test_no_credentials_at_all_is_unauthorized_before_sending(
    monkeypatch: pytest.MonkeyPatch, start_sidecar: Start, provider: ThreadedServer[FakeProvider]
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK"):
        monkeypatch.delenv(name, raising=False)
    r = await start_sidecar(
        providers={"bed": {"wire_format": "bedrock_converse", "base_url": provider.url, "region": REGION}},
        models={"bed": BED},
    )
    err = await failed(r)
    assert isinstance(err, sc.UnauthorizedError)
    assert "AWS_ACCESS_KEY_ID" in err.message
    assert sent(r) == []


async def test_a_stream_goes_to_converse_stream_as_event_stream_frames(bed: Running) -> None:
    events = await streamed(bed)
    assert [e.WhichOneof("event") for e in events] == ["text"] * len(DELTAS) + ["final"]
    assert [e.text.text for e in events[:-1]] == DELTAS
    final = events[-1].final
    assert final.message.text == "You said: " + TEXT
    assert final.usage.output_tokens > 0
    (record,) = sent(bed)
    assert record["path"] == f"/model/{UPSTREAM}/converse-stream"
    assert record["headers"]["accept"] == "application/vnd.amazon.eventstream"
    assert SIGV4.match(record["headers"]["authorization"])
    assert record["stream"] is True
    whole = await bed.client.call_model("bed", [user(TEXT)])
    assert final == whole


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        ({"stream_fault": "overloaded"}, "overload"),
        ({"stream_fault": "server_error"}, "transient fault"),
        ({"stream_fault": "overloaded", "extra_error_fields": {"__type": "ThrottlingException"}}, "rate limit"),
        (
            {"stream_fault": "server_error", "extra_error_fields": {"__type": "ModelStreamErrorException"}},
            "transient fault",
        ),
    ],
)
async def test_an_exception_frame_mid_stream_restarts_under_the_policy(
    bed: Running, fault: dict[str, Any], said: str
) -> None:
    script(bed, {**fault, "after_deltas": 3}, {})
    events = await streamed(bed)
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds == ["text"] * 3 + ["restart"] + ["text"] * len(DELTAS) + ["final"]
    (restart,) = [e.restart for e in events if e.WhichOneof("event") == "restart"]
    assert restart.reason.startswith(f"{said} after 3 deltas: ")
    assert events[-1].final.attempts == 2
    assert len(sent(bed)) == 2


async def test_a_validation_exception_frame_mid_stream_fails_the_call(bed: Running) -> None:
    extra = {"__type": "ValidationException", "message": "The model returned the following errors: bad input"}
    script(bed, {"stream_fault": "server_error", "after_deltas": 2, "extra_error_fields": extra})
    with pytest.raises(sc.InvalidInputError):
        await streamed(bed)
    assert len(sent(bed)) == 1


@pytest.mark.parametrize("fault", ["end_early", "drop", "garbled"])
async def test_a_broken_or_cut_stream_is_a_transient_fault(bed: Running, fault: str) -> None:
    script(bed, {"stream_fault": fault, "after_deltas": 2}, {})
    events = await streamed(bed)
    final = events[-1].final
    if fault == "garbled":  # one frame whose JSON payload is cut: skipped (its delta lost), the stream goes on
        assert final.message.text == "You said: two three four five six"
        assert final.attempts == 1
        assert any("skipped" in w for w in final.warnings)
    else:
        assert final.message.text == "You said: " + TEXT
        assert final.attempts == 2


async def test_an_event_it_does_not_know_is_ignored(bed: Running) -> None:
    script(bed, {"stream_fault": "unknown_event", "after_deltas": 2})
    events = await streamed(bed)
    assert events[-1].final.message.text == "You said: " + TEXT
    assert events[-1].final.attempts == 1


async def test_max_tokens_is_truncation_raised_once_then_output_truncated(bed: Running) -> None:
    script(bed, {"preset": "truncated"}, {"preset": "truncated"})
    err = await failed(bed)
    assert isinstance(err, sc.OutputTruncatedError)
    budgets = [r["body"]["inferenceConfig"]["maxTokens"] for r in sent(bed)]
    assert budgets == [256, 2048]


async def test_cache_usage_is_read_from_the_reply(bed: Running) -> None:
    script(bed, {"usage": {"cache_read_input_tokens": 40, "cache_write_input_tokens": 10}})
    reply = await bed.client.call_model("bed", [user("hi")])
    assert reply.usage.cache_read_input_tokens == 40
    assert reply.usage.cache_write_input_tokens == 10
    assert reply.usage.input_tokens >= 50


# ---------------------------------------------------------------- a tool round, thinking on


async def test_a_tool_round_passes_the_reasoning_back_byte_identical(bed: Running) -> None:
    script(bed, {"preset": "reply", "tool_calls": [{"name": "search", "arguments": {"query": "retries"}}]})
    asked = user("find retries")
    first = await call(bed, request(asked, tools=[SEARCH], reasoning=THINK))
    assert first.finish_reason == pb.FINISH_REASON_TOOL_CALLS
    (c,) = first.message.tool_calls
    assert (c.name, json.loads(c.arguments_json)) == ("search", {"query": "retries"})
    (thought,) = first.message.reasoning
    assert thought.text.startswith("The user asks:")
    assert thought.signature
    assert thought.format == "bedrock_converse"
    second = await call(bed, request(asked, assistant(first), result(first, "3 retries"), tools=[SEARCH],
                                     reasoning=THINK))  # fmt: skip
    assert second.message.text == "Based on the tool result: 3 retries"
    bodies = [r["body"] for r in sent(bed)]
    assert bodies[0]["additionalModelRequestFields"] == {"thinking": {"type": "enabled", "budget_tokens": 1024}}
    spec = {"name": "search", "description": "Search the docs.", "inputSchema": {"json": json.loads(
        SEARCH.parameters_json)}}  # fmt: skip
    assert bodies[0]["toolConfig"]["tools"] == [{"toolSpec": spec}]
    turn, results = bodies[1]["messages"][1:]
    assert turn == {
        "role": "assistant",
        "content": [
            {"reasoningContent": {"reasoningText": {"text": thought.text, "signature": thought.signature}}},
            {"toolUse": {"toolUseId": c.id, "name": "search", "input": {"query": "retries"}}},
        ],
    }
    assert results == {"role": "user", "content": [
        {"toolResult": {"toolUseId": c.id, "content": [{"text": "3 retries"}], "status": "success"}}]}  # fmt: skip


async def test_a_streamed_tool_call_arrives_in_fragments(bed: Running) -> None:
    script(bed, {"preset": "reply", "tool_calls": [{"name": "search", "arguments": {"query": "retries"}}]})
    events = [e async for e in bed.client.stream_model("bed", [user("find")], tools=[SEARCH])]
    assert {e.WhichOneof("event") for e in events[:-1]} == {"tool_call"}
    (c,) = events[-1].final.message.tool_calls
    assert (c.name, json.loads(c.arguments_json)) == ("search", {"query": "retries"})


async def test_an_altered_reasoning_signature_is_the_providers_400_classified(bed: Running) -> None:
    script(bed, {"preset": "reply", "tool_calls": [{"name": "search", "arguments": {"query": "x"}}]})
    first = await call(bed, request(user("find"), tools=[SEARCH], reasoning=THINK))
    turn = assistant(first)
    turn.reasoning[0].signature = turn.reasoning[0].signature[:-2] + "AA"
    err = await failed(bed, request(user("find"), turn, result(first, "x"), tools=[SEARCH], reasoning=THINK))
    assert isinstance(err, sc.InvalidInputError)
    assert err.http is not None
    assert err.http.status_code == 400
    assert "Invalid `signature`" in err.http.body


async def test_tool_choice_and_cache_points_are_carried(bed: Running) -> None:
    choice = pb.ToolChoice(mode=pb.TOOL_CHOICE_MODE_TOOL, name="search")
    reply = await call(bed, request(user("anything"), tools=[SEARCH], tool_choice=choice, stop=["END"], top_p=0.9))
    assert reply.message.tool_calls[0].name == "search"
    body = sent(bed)[0]["body"]
    assert body["toolConfig"]["toolChoice"] == {"tool": {"name": "search"}}
    assert body["inferenceConfig"] == {"maxTokens": 256, "topP": pytest.approx(0.9), "stopSequences": ["END"]}


async def test_provider_options_go_in_as_they_are(bed: Running) -> None:
    guardrail = {"guardrailIdentifier": "g-1", "guardrailVersion": "1"}
    options = {"bedrock_converse": {"additionalModelRequestFields": {"top_k": 40}, "guardrailConfig": guardrail}}
    await call(bed, request(user("hi"), provider_options_json=json.dumps(options)))
    body = sent(bed)[0]["body"]
    assert body["additionalModelRequestFields"] == {"top_k": 40}
    assert body["guardrailConfig"] == guardrail


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"end_user": "u-1"}, "does not carry end_user"),
        ({"top_k": 40}, "does not carry top_k"),
        ({"tool_choice": pb.ToolChoice(mode=pb.TOOL_CHOICE_MODE_NONE), "tools": [SEARCH]}, "no tool choice none"),
    ],
)
async def test_what_converse_does_not_carry_is_refused_before_sending(
    bed: Running, fields: dict[str, Any], said: str
) -> None:
    err = await failed(bed, request(user("hi"), **fields))
    assert isinstance(err, sc.InvalidInputError)
    assert said in err.message
    assert sent(bed) == []


# ---------------------------------------------------------------- failures, each in the taxonomy


async def test_a_throttling_exception_is_a_rate_limit_retried(bed: Running) -> None:
    script(bed, {"preset": "rate_limit", "retry_after": 7}, {"preset": "rate_limit"})
    reply = await bed.client.call_model("bed", [user("hi")])
    assert reply.attempts == 3
    assert waits(bed)[0] == 7.0
    assert all(SIGV4.match(r["headers"]["authorization"]) for r in sent(bed))  # each attempt signed afresh


@pytest.mark.parametrize(
    "step",
    [{"preset": "overloaded"}, raw_error(429, "ModelNotReadyException", "Model is not ready to serve inference.")],
)
async def test_service_unavailable_and_model_not_ready_are_overload(bed: Running, step: dict[str, Any]) -> None:
    script(bed, *[step] * 4)
    err = await failed(bed)
    assert isinstance(err, sc.UpstreamRetriesExhaustedError)
    assert err.detail.last_signal == pb.RETRY_SIGNAL_OVERLOAD
    assert len(sent(bed)) == 4


TRANSIENT = [
    raw_error(408, "ModelTimeoutException", "Model has timed out in processing the request."),
    {"preset": "server_error"},
    raw_error(424, "ModelErrorException", "The model failed."),
]


@pytest.mark.parametrize("step", TRANSIENT)
async def test_a_model_timeout_and_a_server_error_are_transient(bed: Running, step: dict[str, Any]) -> None:
    script(bed, step)
    reply = await bed.client.call_model("bed", [user("hi")])
    assert reply.attempts == 2


@pytest.mark.parametrize(
    ("step", "error", "status"),
    [
        ({"preset": "context_too_long"}, sc.ContextOverflowError, 400),
        (raw_error(400, "ValidationException", "Malformed input request: #: extraneous key [x]"),
         sc.InvalidInputError, 400),
        (raw_error(403, "AccessDeniedException", "You don't have access to the model with the specified model ID."),
         sc.UnauthorizedError, 403),
        ({"preset": "invalid_key"}, sc.UnauthorizedError, 403),
        ({"preset": "model_not_found"}, sc.ModelNotFoundError, 404),
        ({"preset": "insufficient_quota"}, sc.QuotaExhaustedError, 400),
    ],
)  # fmt: skip
async def test_each_terminal_answer_fails_at_once_with_its_kind(
    bed: Running, step: dict[str, Any], error: type[sc.SidecarError], status: int
) -> None:
    script(bed, step)
    err = await failed(bed)
    assert isinstance(err, error)
    assert err.http is not None
    assert err.http.status_code == status
    assert len(sent(bed)) == 1
    assert FAKE_SECRET_KEY not in err.message + err.http.body


@pytest.mark.parametrize(
    ("step", "category"),
    [
        ({"preset": "content_policy"}, "guardrail_intervened"),
        ({"preset": "content_filter"}, "content_filtered"),
        ({"preset": "refusal"}, "guardrail_intervened"),
        ({"preset": "reply", "finish": "content_filter"}, "content_filtered"),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_a_guardrail_or_filter_is_provider_refusal_with_its_category(
    bed: Running, step: dict[str, Any], category: str, stream: bool
) -> None:
    script(bed, step)
    if stream:
        with pytest.raises(sc.ProviderRefusalError) as caught:
            await streamed(bed)
        err: sc.SidecarError = caught.value
    else:
        err = await failed(bed)
    assert isinstance(err, sc.ProviderRefusalError)
    assert err.detail.category == category
    if step.get("preset") == "content_policy":
        assert GUARDRAIL_TEXT in err.message
    assert len(sent(bed)) == 1


async def test_an_inference_profile_arn_is_signed_as_its_path_is_sent(
    aws_env: None, monkeypatch: pytest.MonkeyPatch, start_sidecar: Start, provider: ThreadedServer[FakeProvider]
) -> None:
    monkeypatch.setenv("AWS_SESSION_TOKEN", "FwoGZXIvYXdzEXAMPLE-session-token")
    arn = "arn:aws:bedrock:us-west-2:123456789012:inference-profile/us.anthropic.claude-sonnet-4-v1:0"
    r = await start_sidecar(
        providers={"bed": {"wire_format": "bedrock_converse", "base_url": provider.url, "region": REGION}},
        models={"bed": {**BED, "upstream_model": arn}},
    )
    reply = await r.client.call_model("bed", [user("hi")])  # the fake recomputes the signature: it holds
    assert reply.message.text == "You said: hi"
    (record,) = r.provider.requests(model=arn)
    assert record["headers"]["x-amz-security-token"] == "FwoGZXIvYXdzEXAMPLE-session-token"
    assert "x-amz-security-token" in record["headers"]["authorization"]


async def test_a_reply_without_a_stop_reason_is_an_unexpected_shape_retried(bed: Running) -> None:
    script(bed, {"status": 200, "body": {"output": {"message": {"role": "assistant", "content": []}}}})
    reply = await bed.client.call_model("bed", [user("hi")])
    assert reply.attempts == 2


async def test_streamed_reasoning_arrives_as_reasoning_deltas_with_its_signature(bed: Running) -> None:
    events = [e async for e in bed.client.stream_model("bed", [user("why?")], reasoning=1024)]
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds[0] == "reasoning"
    assert kinds[-1] == "final"
    (thought,) = events[-1].final.message.reasoning
    assert thought.signature
    assert thought.format == "bedrock_converse"
    pieces = [e.reasoning for e in events if e.WhichOneof("event") == "reasoning"]
    assert "".join(p.text for p in pieces) == thought.text
    assert [p.signature for p in pieces if p.signature] == [thought.signature]
    assert events[-1].final.message.text == "You said: why?"


async def test_parts_and_cache_points_go_as_converse_blocks(bed: Running) -> None:
    one_hour = pb.CacheBreakpoint(ttl=pb.CACHE_TTL_1H)
    asked = pb.Message(role=pb.ROLE_USER, parts=[
        pb.Part(text="A long shared context.", cache=one_hour),
        pb.Part(image=pb.ImagePart(data=PNG, media_type="image/png")),
        pb.Part(document=pb.DocumentPart(data=b"%PDF-1.7 minimal", media_type="application/pdf", title="Report")),
        pb.Part(text="What is it?"),
    ])  # fmt: skip
    tool = pb.ToolDefinition(name=SEARCH.name, description=SEARCH.description,
                             parameters_json=SEARCH.parameters_json, cache=pb.CacheBreakpoint())  # fmt: skip
    reply = await call(bed, request(asked, system="Be exact.", system_cache=pb.CacheBreakpoint(), tools=[tool]))
    assert reply.message.tool_calls  # the fake read every block back (its brain calls the tool offered)
    body = sent(bed)[0]["body"]
    assert body["system"] == [{"text": "Be exact."}, {"cachePoint": {"type": "default"}}]
    assert body["toolConfig"]["tools"][1] == {"cachePoint": {"type": "default"}}
    (message,) = body["messages"]
    assert message["content"] == [
        {"text": "A long shared context."},
        {"cachePoint": {"type": "default", "ttl": "1h"}},
        {"image": {"format": "png", "source": {"bytes": base64.b64encode(PNG).decode()}}},
        {"document": {"format": "pdf", "name": "Report",
                      "source": {"bytes": base64.b64encode(b"%PDF-1.7 minimal").decode()}}},
        {"text": "What is it?"},
    ]  # fmt: skip
