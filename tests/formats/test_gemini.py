"""A model of the Gemini wire format (``wire_format: gemini``) through the running sidecar.

gRPC in, the fake provider's Gemini wire out (``sidecar/providers/formats/gemini/fake.py``), on loopback: a whole
reply and a streamed one, a tool round with the thought signature passed back byte-identical (the
fake verifies it, and refuses a turn without it, as Gemini 3 does), structured output, and every
failure Gemini answers with, each landing in the one taxonomy: a 429 with RetryInfo waits its
``retryDelay`` on the fake clock, a 429 of a per-day quota is QUOTA_EXHAUSTED and never retried,
503 "overloaded" is overload, 400 over the input token limit is context overflow, 403 and an
invalid key are unauthorized, 404 is model not found, a safety block (the finish reason or the
prompt's feedback) is PROVIDER_REFUSAL with its category, MAX_TOKENS is truncation.
"""

from __future__ import annotations

import json
from typing import Any

import grpc
import pytest
import sidecar_client as sc
from sidecar_client import pb, user
from sidecar_contract.v1 import sidecar_pb2_grpc as pb_grpc

from sidecar.fakes._threaded import ThreadedServer
from sidecar.fakes.provider import FakeProvider
from tests.conftest import Running, Start

KEY = "AIza-test-SECRETKEY1234567890"
UPSTREAM = "fake-gemini"
GEMINI = {
    "provider": "gem",
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
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"]}  # fmt: skip
TEXT = "one two three four five six"
DELTAS = ["You", " said:", " one", " two", " three", " four", " five", " six"]
RPC = "type.googleapis.com/google.rpc."


@pytest.fixture
async def gem(start_sidecar: Start, provider: ThreadedServer[FakeProvider]) -> Running:
    return await start_sidecar(
        providers={"gem": {"wire_format": "gemini", "base_url": provider.url, "api_key": KEY}},
        models={"gem": GEMINI},
    )


def script(r: Running, *steps: dict[str, Any]) -> None:
    r.provider.script(UPSTREAM, list(steps))


def sent(r: Running) -> list[dict[str, Any]]:
    return r.provider.requests(model=UPSTREAM)


def request(*messages: pb.Message, **fields: Any) -> pb.CallModelRequest:
    return pb.CallModelRequest(model="gem", messages=list(messages), **fields)


async def call(r: Running, req: pb.CallModelRequest) -> pb.CallModelResponse:
    async with grpc.aio.insecure_channel(r.app.address) as channel:
        return await pb_grpc.SidecarStub(channel).CallModel(req)


async def failed(r: Running, req: pb.CallModelRequest | None = None) -> sc.SidecarError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(r, req or request(user("hello")))
    return sc.from_rpc_error(caught.value)


def assistant(reply: pb.CallModelResponse) -> pb.Message:
    m = reply.message
    return pb.Message(role=pb.ROLE_ASSISTANT, text=m.text, tool_calls=m.tool_calls, reasoning=m.reasoning)


def result(reply: pb.CallModelResponse, text: str) -> pb.Message:
    (c,) = reply.message.tool_calls
    return pb.Message(role=pb.ROLE_TOOL, tool_results=[pb.ToolCallResult(call_id=c.id, content=text, name=c.name)])


def waits(r: Running) -> list[float]:
    return [w for w in r.clock.sleeps if w >= 1]  # throttle pacing waits are sub-second


# ---------------------------------------------------------------- replies


async def test_a_whole_reply_goes_to_generate_content_with_the_key_in_its_header(gem: Running) -> None:
    reply = await gem.client.call_model("gem", [user("hello there")], system="Be brief.", temperature=0.5)
    assert reply.message.text == "You said: hello there"
    assert reply.finish_reason == pb.FINISH_REASON_STOP
    assert reply.usage.input_tokens > 0
    assert reply.usage.output_tokens > 0
    assert (reply.attempts, reply.provider, reply.response_model) == (1, "gem", UPSTREAM)
    (record,) = sent(gem)
    assert record["path"] == f"/v1beta/models/{UPSTREAM}:generateContent"
    assert record["headers"]["x-goog-api-key"] == KEY
    body = record["body"]
    assert body["contents"] == [{"role": "user", "parts": [{"text": "hello there"}]}]
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["generationConfig"] == {"maxOutputTokens": 256, "temperature": 0.5}
    assert "model" not in body
    assert "stream" not in body
    assert KEY not in reply.SerializeToString().decode("utf-8", "replace")


async def test_a_stream_goes_to_stream_generate_content_as_sse_and_ends_with_the_body(gem: Running) -> None:
    call = gem.client.stream_model("gem", [user(TEXT)])
    events = [e async for e in call]
    assert [e.WhichOneof("event") for e in events] == ["text"] * len(DELTAS) + ["final"]
    assert [e.text.text for e in events[:-1]] == DELTAS
    final = events[-1].final
    assert final.message.text == call.text == "You said: " + TEXT
    assert final.usage.output_tokens > 0
    (record,) = sent(gem)
    assert record["path"] == f"/v1beta/models/{UPSTREAM}:streamGenerateContent"
    assert record["query"] == {"alt": "sse"}
    assert record["stream"] is True
    whole = await gem.client.call_model("gem", [user(TEXT)])
    assert final == whole


async def test_a_mid_stream_overload_restarts_under_the_policy(gem: Running) -> None:
    script(gem, {"stream_fault": "overloaded", "after_deltas": 3}, {})
    events = [e async for e in gem.client.stream_model("gem", [user(TEXT)])]
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds == ["text"] * 3 + ["restart"] + ["text"] * len(DELTAS) + ["final"]
    (restart,) = [e.restart for e in events if e.WhichOneof("event") == "restart"]
    assert restart.reason.startswith("overload after 3 deltas: ")
    assert events[-1].final.attempts == 2
    assert len(sent(gem)) == 2


async def test_a_stream_that_ends_before_its_finish_is_a_transient_fault(gem: Running) -> None:
    script(gem, {"stream_fault": "end_early", "after_deltas": 2}, {})
    events = [e async for e in gem.client.stream_model("gem", [user(TEXT)])]
    assert events[-1].final.message.text == "You said: " + TEXT
    assert events[-1].final.attempts == 2


async def test_structured_output_asks_for_json_and_corrects_a_missing_field(gem: Running) -> None:
    script(gem, {"preset": "missing_fields"})
    reply = await gem.client.call_model("gem", [user("who?")], response_schema=SCHEMA)
    assert reply.corrections == 1
    assert set(json.loads(reply.message.text)) >= {"name", "age"}
    config = sent(gem)[0]["body"]["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"] == SCHEMA


async def test_max_tokens_is_truncation_raised_once_then_output_truncated(gem: Running) -> None:
    script(gem, {"preset": "truncated"}, {"preset": "truncated"})
    err = await failed(gem)
    assert isinstance(err, sc.OutputTruncatedError)
    budgets = [r["body"]["generationConfig"]["maxOutputTokens"] for r in sent(gem)]
    assert budgets == [256, 2048]


# ---------------------------------------------------------------- a tool round, thinking on


async def test_a_tool_round_passes_the_thought_signature_back_byte_identical(gem: Running) -> None:
    script(gem, {"preset": "reply", "tool_calls": [{"name": "search", "arguments": {"query": "retries"}}]})
    asked = user("find retries")
    first = await call(gem, request(asked, tools=[SEARCH], reasoning=THINK))
    assert first.finish_reason == pb.FINISH_REASON_TOOL_CALLS
    (c,) = first.message.tool_calls
    assert (c.name, json.loads(c.arguments_json)) == ("search", {"query": "retries"})
    thought, signed = first.message.reasoning
    assert thought.text.startswith("**Reading the question**")
    assert signed.signature
    assert not signed.text
    assert {thought.format, signed.format} == {"gemini"}
    assert first.usage.reasoning_tokens > 0
    second = await call(gem, request(asked, assistant(first), result(first, "3 retries"), tools=[SEARCH],
                                     reasoning=THINK))  # fmt: skip
    assert second.message.text == "Based on the tool result: 3 retries"
    bodies = [r["body"] for r in sent(gem)]
    assert bodies[0]["generationConfig"]["thinkingConfig"] == {"includeThoughts": True, "thinkingBudget": 1024}
    model_turn, tool_turn = bodies[1]["contents"][1:]
    assert model_turn == {
        "role": "model",
        "parts": [
            {"text": thought.text, "thought": True},
            {"functionCall": {"id": c.id, "name": "search", "args": {"query": "retries"}},
             "thoughtSignature": signed.signature},
        ],
    }  # fmt: skip
    assert tool_turn == {"role": "user", "parts": [
        {"functionResponse": {"id": c.id, "name": "search", "response": {"output": "3 retries"}}}]}  # fmt: skip


@pytest.mark.parametrize("change", ["altered", "missing"])
async def test_an_altered_or_missing_signature_is_the_providers_400_classified(gem: Running, change: str) -> None:
    script(gem, {"preset": "reply", "tool_calls": [{"name": "search", "arguments": {"query": "x"}}]})
    first = await call(gem, request(user("find"), tools=[SEARCH], reasoning=THINK))
    turn = assistant(first)
    if change == "missing":
        del turn.reasoning[1:]
    else:
        turn.reasoning[1].signature = turn.reasoning[1].signature[:-2] + "AA"
    err = await failed(gem, request(user("find"), turn, result(first, "x"), tools=[SEARCH], reasoning=THINK))
    assert isinstance(err, sc.InvalidInputError)
    assert err.attempts == 1
    assert err.http is not None
    assert err.http.status_code == 400
    said = "missing a thought_signature" if change == "missing" else "Thought signature is not valid"
    assert said in err.http.body


async def test_tool_choice_is_the_function_calling_mode(gem: Running) -> None:
    choice = pb.ToolChoice(mode=pb.TOOL_CHOICE_MODE_TOOL, name="search")
    reply = await call(gem, request(user("anything"), tools=[SEARCH], tool_choice=choice))
    assert reply.message.tool_calls[0].name == "search"
    body = sent(gem)[0]["body"]
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["search"]}}
    assert body["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"] == json.loads(SEARCH.parameters_json)


async def test_what_gemini_does_not_carry_is_refused_before_sending(gem: Running) -> None:
    err = await failed(gem, request(user("hi"), end_user="u-1"))
    assert isinstance(err, sc.InvalidInputError)
    assert "does not carry end_user" in err.message
    assert sent(gem) == []


# ---------------------------------------------------------------- failures, each in the taxonomy


async def test_a_429_with_retry_info_waits_its_retry_delay_on_the_fake_clock(gem: Running) -> None:
    delay = [{"@type": RPC + "RetryInfo", "retryDelay": "37s"}]
    script(gem, {"preset": "rate_limit", "extra_error_fields": {"details": delay}}, {"preset": "rate_limit"})
    reply = await gem.client.call_model("gem", [user("hi")])
    assert reply.attempts == 3
    assert waits(gem) == [37.0, 1.0]  # the preset's own RetryInfo says 1s


async def test_a_429_of_a_per_day_quota_is_quota_exhausted_and_never_retried(gem: Running) -> None:
    script(gem, {"preset": "insufficient_quota"})
    err = await failed(gem)
    assert isinstance(err, sc.QuotaExhaustedError)
    assert err.http is not None
    assert err.http.status_code == 429
    assert "PerDay" in err.http.body
    assert len(sent(gem)) == 1
    assert waits(gem) == []


async def test_a_503_overloaded_is_overload_and_a_500_transient(gem: Running) -> None:
    script(gem, *[{"preset": "overloaded"}] * 4)
    err = await failed(gem)
    assert isinstance(err, sc.UpstreamRetriesExhaustedError)
    assert err.detail.last_signal == pb.RETRY_SIGNAL_OVERLOAD
    assert len(sent(gem)) == 4
    script(gem, {"preset": "server_error"})
    assert (await gem.client.call_model("gem", [user("hi")])).attempts == 2


@pytest.mark.parametrize(
    ("step", "error", "status"),
    [
        ({"preset": "context_too_long"}, sc.ContextOverflowError, 400),
        ({"status": 403}, sc.UnauthorizedError, 403),
        ({"preset": "invalid_key"}, sc.UnauthorizedError, 400),
        ({"preset": "model_not_found"}, sc.ModelNotFoundError, 404),
        ({"status": 400}, sc.InvalidInputError, 400),
    ],
)
async def test_each_terminal_answer_fails_at_once_with_its_kind(
    gem: Running, step: dict[str, Any], error: type[sc.SidecarError], status: int
) -> None:
    script(gem, step)
    err = await failed(gem)
    assert isinstance(err, error)
    assert err.http is not None
    assert err.http.status_code == status
    assert len(sent(gem)) == 1
    assert KEY not in err.message
    assert KEY not in err.http.body


@pytest.mark.parametrize(
    ("step", "category"),
    [
        ({"preset": "content_filter", "categories": ["hate"]}, "safety:hate_speech"),
        ({"preset": "content_policy"}, "prohibited_content"),
        ({"preset": "reply", "finish": "content_filter"}, "safety:dangerous_content"),
        ({"preset": "refusal"}, "safety:dangerous_content"),
        ({"stream_fault": "content_filter", "after_deltas": 2}, "safety:dangerous_content"),
    ],
)
async def test_a_block_is_provider_refusal_with_its_category_never_retried(
    gem: Running, step: dict[str, Any], category: str
) -> None:
    script(gem, step)
    if "stream_fault" in step:
        with pytest.raises(sc.ProviderRefusalError) as caught:
            async for _ in gem.client.stream_model("gem", [user(TEXT)]):
                pass
        err: sc.SidecarError = caught.value
    else:
        err = await failed(gem)
    assert isinstance(err, sc.ProviderRefusalError)
    assert err.detail.category == category
    assert len(sent(gem)) == 1


async def test_a_reply_that_finishes_blocked_for_recitation_names_it(gem: Running) -> None:
    body = {"candidates": [{"content": {"role": "model", "parts": [{"text": "It was the best of"}]},
                            "finishReason": "RECITATION", "index": 0}],
            "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 5, "totalTokenCount": 8}}  # fmt: skip
    script(gem, {"status": 200, "body": body})
    err = await failed(gem)
    assert isinstance(err, sc.ProviderRefusalError)
    assert err.detail.category == "recitation"
