"""A model of the OpenAI Responses wire format (``wire_format: openai_responses``) through the running sidecar.

gRPC in, the fake provider's Responses wire out (``sidecar/providers/formats/openai_responses/fake.py``), on loopback: a
whole reply and a streamed one, always stateless (``store: false``, the reasoning's encrypted
content included, never a ``previous_response_id``), a tool loop, a reasoning item passed back
byte-identical (the fake verifies its encrypted content, and refuses one without it, as the API
does with ``store: false``), structured output, truncation re-run once, and every failure the API
answers with, each in the one taxonomy: 429 retried after its Retry-After on the fake clock,
``insufficient_quota`` never retried, 400 ``context_length_exceeded`` context overflow, a
content-policy 400 (or a stream's error event) PROVIDER_REFUSAL, a response that ``failed`` with
``server_error`` transient; a mid-stream cut restarted, or continued from the text held.
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

KEY = "sk-resp-test-SECRETKEY1234567890"
UPSTREAM = "fake-resp"
RESP = {
    "provider": "resp",
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
THINK = pb.Reasoning(effort=pb.REASONING_EFFORT_LOW)
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"]}  # fmt: skip
TEXT = "one two three four five six"
DELTAS = ["You", " said:", " one", " two", " three", " four", " five", " six"]


@pytest.fixture
async def resp(start_sidecar: Start, provider: ThreadedServer[FakeProvider]) -> Running:
    return await start_sidecar(
        providers={"resp": {"wire_format": "openai_responses", "base_url": provider.url + "/v1", "api_key": KEY}},
        models={"resp": RESP, "resp-pf": {**RESP, "prefill": True}, "resp-np": {**RESP, "prefill": False}},
    )


def script(r: Running, *steps: dict[str, Any]) -> None:
    r.provider.script(UPSTREAM, list(steps))


def sent(r: Running) -> list[dict[str, Any]]:
    return r.provider.requests(model=UPSTREAM)


def request(*messages: pb.Message, **fields: Any) -> pb.CallModelRequest:
    return pb.CallModelRequest(model="resp", messages=list(messages), **fields)


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


def result(reply: pb.CallModelResponse, text: str, *, error: bool = False) -> pb.Message:
    (c,) = reply.message.tool_calls
    done = pb.ToolCallResult(call_id=c.id, content=text, name=c.name, is_error=error)
    return pb.Message(role=pb.ROLE_TOOL, tool_results=[done])


def waits(r: Running) -> list[float]:
    return [w for w in r.clock.sleeps if w >= 1]  # throttle pacing waits are sub-second


# ---------------------------------------------------------------- replies


async def test_a_whole_reply_goes_to_responses_stateless_with_the_key_as_a_bearer(resp: Running) -> None:
    reply = await resp.client.call_model("resp", [user("hello there")], system="Be brief.", temperature=0.5)
    assert reply.message.text == "You said: hello there"
    assert reply.finish_reason == pb.FINISH_REASON_STOP
    assert reply.usage.input_tokens > 0
    assert reply.usage.output_tokens > 0
    assert (reply.attempts, reply.provider, reply.response_model) == (1, "resp", UPSTREAM)
    (record,) = sent(resp)
    assert record["path"] == "/v1/responses"
    assert record["headers"]["authorization"] == f"Bearer {KEY}"
    body = record["body"]
    assert body == {
        "model": UPSTREAM,
        "input": [{"type": "message", "role": "user", "content": "hello there"}],
        "instructions": "Be brief.",
        "max_output_tokens": 256,
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "temperature": 0.5,
    }
    assert KEY not in reply.SerializeToString().decode("utf-8", "replace")


async def test_a_stream_is_named_events_its_deltas_and_the_same_reply(resp: Running) -> None:
    call_ = resp.client.stream_model("resp", [user(TEXT)])
    events = [e async for e in call_]
    assert [e.WhichOneof("event") for e in events] == ["text"] * len(DELTAS) + ["final"]
    assert [e.text.text for e in events[:-1]] == DELTAS
    final = events[-1].final
    assert final.message.text == call_.text == "You said: " + TEXT
    (record,) = sent(resp)
    assert record["body"]["stream"] is True
    assert record["stream"] is True
    whole = await resp.client.call_model("resp", [user(TEXT)])
    assert (final.message, final.usage, final.finish_reason) == (whole.message, whole.usage, whole.finish_reason)


async def test_usage_reports_cached_and_reasoning_tokens(resp: Running) -> None:
    script(resp, {"usage": {"cache_read_input_tokens": 5, "reasoning_tokens": 7}})
    reply = await resp.client.call_model("resp", [user("hi")])
    assert reply.usage.cache_read_input_tokens == 5
    assert reply.usage.reasoning_tokens == 7


async def test_structured_output_is_text_format_json_schema_and_corrects_a_missing_field(resp: Running) -> None:
    script(resp, {"preset": "missing_fields"})
    reply = await resp.client.call_model("resp", [user("who?")], response_schema=SCHEMA)
    assert reply.corrections == 1
    assert set(json.loads(reply.message.text)) >= {"name", "age"}
    fmt = sent(resp)[0]["body"]["text"]["format"]
    assert fmt == {"type": "json_schema", "name": "response", "schema": SCHEMA, "strict": False}


async def test_incomplete_at_max_output_tokens_is_truncation_raised_once_then_output_truncated(resp: Running) -> None:
    script(resp, {"preset": "truncated"}, {"preset": "truncated"})
    err = await failed(resp)
    assert isinstance(err, sc.OutputTruncatedError)
    assert [r["body"]["max_output_tokens"] for r in sent(resp)] == [256, 2048]


async def test_a_truncated_reply_re_run_with_the_larger_budget_is_the_answer(resp: Running) -> None:
    script(resp, {"preset": "truncated"})
    reply = await resp.client.call_model("resp", [user("hello")])
    assert reply.output_budget_raised
    assert reply.message.text == "You said: hello"


# ---------------------------------------------------------------- a tool loop, reasoning on


async def test_a_tool_loop_sends_function_calls_and_their_outputs(resp: Running) -> None:
    script(resp, {"preset": "reply", "tool_calls": [{"name": "search", "arguments": {"query": "retries"}}]})
    asked = user("find retries")
    first = await call(resp, request(asked, tools=[SEARCH]))
    assert first.finish_reason == pb.FINISH_REASON_TOOL_CALLS
    (c,) = first.message.tool_calls
    assert (c.id, c.name, json.loads(c.arguments_json)) == ("call_fake00000001_0", "search", {"query": "retries"})
    second = await call(resp, request(asked, assistant(first), result(first, "3 retries"), tools=[SEARCH]))
    assert second.message.text == "Based on the tool result: 3 retries"
    bodies = [r["body"] for r in sent(resp)]
    assert bodies[0]["tools"] == [{"type": "function", "name": "search", "description": "Search the docs.",
                                   "parameters": json.loads(SEARCH.parameters_json), "strict": False}]  # fmt: skip
    assert bodies[1]["input"][1:] == [
        {"type": "function_call", "call_id": c.id, "name": "search", "arguments": c.arguments_json},
        {"type": "function_call_output", "call_id": c.id, "output": "3 retries"},
    ]


async def test_a_tool_error_goes_back_marked_and_the_model_reads_it(resp: Running) -> None:
    script(resp, {"preset": "reply", "tool_calls": [{"name": "search", "arguments": {"query": "x"}}]})
    first = await call(resp, request(user("find"), tools=[SEARCH]))
    await call(resp, request(user("find"), assistant(first), result(first, "no such index", error=True),
                             tools=[SEARCH]))  # fmt: skip
    output = sent(resp)[1]["body"]["input"][-1]
    assert output["output"] == "[tool error] no such index"


async def test_a_reasoning_item_goes_back_byte_identical_with_its_encrypted_content(resp: Running) -> None:
    script(resp, {"preset": "reply", "tool_calls": [{"name": "search", "arguments": {"query": "retries"}}]})
    asked = user("find retries")
    first = await call(resp, request(asked, tools=[SEARCH], reasoning=THINK))
    (thought,) = first.message.reasoning
    assert thought.text.startswith("**Reading the question**")
    item_id, encrypted = thought.signature.split(" ")
    assert item_id == "rs_fake00000001"
    assert encrypted
    assert thought.format == "openai_responses"
    assert first.usage.reasoning_tokens > 0
    second = await call(resp, request(asked, assistant(first), result(first, "3 retries"), tools=[SEARCH],
                                      reasoning=THINK))  # fmt: skip
    assert second.message.text == "Based on the tool result: 3 retries"
    bodies = [r["body"] for r in sent(resp)]
    assert bodies[0]["reasoning"] == {"effort": "low", "summary": "auto"}
    assert "previous_response_id" not in bodies[1]
    assert bodies[1]["store"] is False
    reasoning = bodies[1]["input"][1]
    assert reasoning == {"type": "reasoning", "id": item_id, "summary": [{"type": "summary_text",
                         "text": thought.text}], "encrypted_content": encrypted}  # fmt: skip
    assert [i["type"] for i in bodies[1]["input"]] == ["message", "reasoning", "function_call", "function_call_output"]


async def test_an_altered_encrypted_content_is_the_providers_400_classified(resp: Running) -> None:
    script(resp, {"preset": "reply", "tool_calls": [{"name": "search", "arguments": {"query": "x"}}]})
    first = await call(resp, request(user("find"), tools=[SEARCH], reasoning=THINK))
    turn = assistant(first)
    turn.reasoning[0].signature = turn.reasoning[0].signature[:-4] + "AAA="
    err = await failed(resp, request(user("find"), turn, result(first, "x"), tools=[SEARCH], reasoning=THINK))
    assert isinstance(err, sc.InvalidInputError)
    assert err.attempts == 1
    assert err.http is not None
    assert err.http.status_code == 400
    assert "could not be verified" in err.http.body


async def test_tool_choice_names_a_flat_function(resp: Running) -> None:
    choice = pb.ToolChoice(mode=pb.TOOL_CHOICE_MODE_TOOL, name="search")
    reply = await call(resp, request(user("anything"), tools=[SEARCH], tool_choice=choice, parallel_tool_calls=False))
    assert reply.message.tool_calls[0].name == "search"
    body = sent(resp)[0]["body"]
    assert body["tool_choice"] == {"type": "function", "name": "search"}
    assert body["parallel_tool_calls"] is False


async def test_what_the_responses_api_does_not_carry_is_refused_before_sending(resp: Running) -> None:
    err = await failed(resp, request(user("hi"), stop=["END"]))
    assert isinstance(err, sc.InvalidInputError)
    assert "does not carry stop" in err.message
    options = json.dumps({"openai_responses": {"previous_response_id": "resp_1"}})
    err = await failed(resp, request(user("hi"), provider_options_json=options))
    assert isinstance(err, sc.InvalidInputError)
    assert "previous_response_id" in err.message
    assert sent(resp) == []


# ---------------------------------------------------------------- mid-stream faults


async def test_a_mid_stream_error_event_restarts_under_the_policy(resp: Running) -> None:
    script(resp, {"stream_fault": "overloaded", "after_deltas": 3}, {})
    events = [e async for e in resp.client.stream_model("resp", [user(TEXT)])]
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds == ["text"] * 3 + ["restart"] + ["text"] * len(DELTAS) + ["final"]
    (restart,) = [e.restart for e in events if e.WhichOneof("event") == "restart"]
    assert restart.reason.startswith("overload after 3 deltas: ")
    assert events[-1].final.attempts == 2


@pytest.mark.parametrize("fault", ["drop", "end_early", "no_end_marker"])
async def test_a_cut_stream_is_a_transient_fault_restarted(resp: Running, fault: str) -> None:
    script(resp, {"stream_fault": fault, "after_deltas": 2}, {})
    events = [e async for e in resp.client.stream_model("resp", [user(TEXT)])]
    assert events[-1].final.message.text == "You said: " + TEXT
    assert events[-1].final.attempts == 2


async def test_a_cut_stream_is_continued_from_the_text_held_where_the_model_takes_a_prefill(resp: Running) -> None:
    resp.provider.script(UPSTREAM, [{"stream_fault": "drop", "after_deltas": 3}, {}])
    call_ = resp.client.stream_model("resp-pf", [user(TEXT)], mid_stream=pb.MID_STREAM_POLICY_CONTINUE)
    events = [e async for e in call_]
    kinds = [e.WhichOneof("event") for e in events]
    assert "restart" not in kinds
    assert "continued" in kinds
    assert events[-1].final.message.text == "You said: " + TEXT
    second = sent(resp)[1]["body"]["input"]
    assert second[-1] == {"type": "message", "role": "assistant", "content": "".join(DELTAS[:3])}


async def test_a_cut_stream_of_a_model_without_prefill_ends_interrupted_under_continue(resp: Running) -> None:
    script(resp, {"stream_fault": "drop", "after_deltas": 3})
    with pytest.raises(sc.StreamInterruptedError) as caught:
        async for _ in resp.client.stream_model("resp-np", [user(TEXT)], mid_stream=pb.MID_STREAM_POLICY_CONTINUE):
            pass
    assert caught.value.detail.partial_text == "".join(DELTAS[:3])


# ---------------------------------------------------------------- failures, each in the taxonomy


async def test_a_429_is_a_rate_limit_retried_after_its_retry_after(resp: Running) -> None:
    script(resp, {"preset": "rate_limit", "retry_after": 7}, {})
    reply = await resp.client.call_model("resp", [user("hi")])
    assert reply.attempts == 2
    assert waits(resp) == [7.0]


async def test_insufficient_quota_is_quota_exhausted_never_retried(resp: Running) -> None:
    script(resp, {"preset": "insufficient_quota"})
    err = await failed(resp)
    assert isinstance(err, sc.QuotaExhaustedError)
    assert len(sent(resp)) == 1


async def test_overload_and_server_errors_are_retried_until_the_budget_is_spent(resp: Running) -> None:
    script(resp, *[{"preset": "overloaded"}] * 4)
    err = await failed(resp)
    assert isinstance(err, sc.UpstreamRetriesExhaustedError)
    assert err.detail.last_signal == pb.RETRY_SIGNAL_OVERLOAD
    assert len(sent(resp)) == 4
    script(resp, {"preset": "server_error"})
    assert (await resp.client.call_model("resp", [user("hi")])).attempts == 2


async def test_a_response_that_failed_in_a_200_is_classified_by_its_error_code(resp: Running) -> None:
    failed_body = {"id": "resp_x", "object": "response", "status": "failed", "output": [], "model": UPSTREAM,
                   "error": {"code": "server_error", "message": "The model had an error."}}  # fmt: skip
    script(resp, {"status": 200, "body": failed_body}, {})
    reply = await resp.client.call_model("resp", [user("hi")])
    assert reply.attempts == 2
    limited = {**failed_body, "error": {"code": "rate_limit_exceeded", "message": "Slow down."}}
    script(resp, {"status": 200, "body": limited}, {})
    assert (await resp.client.call_model("resp", [user("hi")])).attempts == 2


@pytest.mark.parametrize(
    ("step", "error", "status"),
    [
        ({"preset": "context_too_long"}, sc.ContextOverflowError, 400),
        ({"preset": "invalid_key"}, sc.UnauthorizedError, 401),
        ({"preset": "model_not_found"}, sc.ModelNotFoundError, 404),
        ({"status": 400}, sc.InvalidInputError, 400),
    ],
)
async def test_each_terminal_answer_fails_at_once_with_its_kind(
    resp: Running, step: dict[str, Any], error: type[sc.SidecarError], status: int
) -> None:
    script(resp, step)
    err = await failed(resp)
    assert isinstance(err, error)
    assert err.http is not None
    assert err.http.status_code == status
    assert len(sent(resp)) == 1
    assert KEY not in err.message
    assert KEY not in err.http.body


@pytest.mark.parametrize(
    ("step", "category"),
    [
        ({"preset": "content_policy"}, "content_policy_violation"),
        ({"preset": "content_filter", "categories": ["hate"]}, "hate"),
        ({"preset": "refusal"}, "refusal"),
        ({"stream_fault": "content_policy", "after_deltas": 2}, "content_policy_violation"),
    ],
)
async def test_a_content_policy_answer_is_provider_refusal_never_retried(
    resp: Running, step: dict[str, Any], category: str
) -> None:
    script(resp, step)
    if "stream_fault" in step:
        with pytest.raises(sc.ProviderRefusalError) as caught:
            async for _ in resp.client.stream_model("resp", [user(TEXT)]):
                pass
        err: sc.SidecarError = caught.value
    else:
        err = await failed(resp)
    assert isinstance(err, sc.ProviderRefusalError)
    assert err.detail.category == category
    assert len(sent(resp)) == 1
