"""No caller can crash or freeze the sidecar: every hostile input gets a precise failure, on real gRPC.

Issue 10, item 3 (patterns on RE2, size caps, checks off the event loop) and item 6 (INTERNAL from
bad input): each bullet has its test here, asserting the kind and the field named.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import grpc
import pytest
import sidecar_client as sc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sidecar_client import pb, user
from sidecar_contract.v1 import sidecar_pb2_grpc as pb_grpc

from sidecar.core import cpu_budget
from tests.conftest import Running, Start, tool
from tests.gc_room import collections_with_room

PII = [{"name": "pii", "deny_pattern": r"[\w.+-]+@[\w-]+\.\w+", "reason": "must not contain an email address"}]
NOTE = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
UPSTREAM = {"gpt": "fake-gpt", "claude": "fake-claude"}


def _nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def _nested_schema(levels: int) -> str:
    return '{"type": "object", "properties": {"a": ' * levels + '{"type": "string"}' + "}}" * levels


def _kind(resp: pb.ExecuteToolResponse) -> str:
    return pb.FailureKind.Name(resp.failure.kind).removeprefix("FAILURE_KIND_")


async def _raw_call(r: Running, req: pb.CallModelRequest) -> sc.SidecarError:
    """A CallModel the client helpers cannot build (raw JSON text); the failure it ends with."""
    async with grpc.aio.insecure_channel(r.app.address) as channel:
        try:
            await pb_grpc.SidecarStub(channel).CallModel(req)
        except grpc.aio.AioRpcError as exc:
            return sc.errors.from_rpc_error(exc)
    raise AssertionError("the call succeeded")


# ---------------------------------------------------------------- item 6: precise failures, never INTERNAL


async def test_tool_arguments_nested_500_deep_are_invalid_input(sidecar: Running) -> None:
    resp = await sidecar.client.execute_tool("note", '{"text": "t", "more": ' + _nested(500) + "}")
    assert _kind(resp) == "INVALID_INPUT"
    assert resp.failure.invalid_input.parameter == "arguments"
    assert "must be nested at most 64 levels deep" in resp.failure.invalid_input.rule
    assert sidecar.backend.requests(path="/notes") == []


@pytest.mark.parametrize("field", ["response_schema_json", "tools[0].parameters_json"])
async def test_a_schema_nested_300_deep_is_invalid_input(sidecar: Running, field: str) -> None:
    req = pb.CallModelRequest(model="gpt", messages=[user("hi")])
    if field == "response_schema_json":
        req.response_schema_json = _nested_schema(300)
    else:
        req.tools.append(pb.ToolDefinition(name="deep", parameters_json=_nested_schema(300)))
    err = await _raw_call(sidecar, req)
    assert isinstance(err, sc.InvalidInputError)
    assert err.grpc_code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.detail.parameter == field
    assert "nested at most 64 levels deep" in err.detail.rule
    assert sidecar.provider.requests(model="fake-gpt") == []


@pytest.mark.parametrize("model", ["claude", "gpt"])
async def test_a_history_tool_call_nested_1000_deep_is_invalid_input(sidecar: Running, model: str) -> None:
    call = pb.ToolCall(id="c1", name="search", arguments_json='{"query": ' + _nested(1000) + "}")
    result = pb.ToolCallResult(call_id="c1", name="search", content="found")
    history = [
        user("find it"),
        pb.Message(role=pb.ROLE_ASSISTANT, tool_calls=[call]),
        pb.Message(role=pb.ROLE_TOOL, tool_results=[result]),
    ]
    # Every garbage collection meanwhile finds room to run finalisers: json.loads, given the 1,000
    # levels, climbed to the recursion limit, and a finaliser a collection ran there failed (CI).
    with collections_with_room() as short, pytest.raises(sc.InvalidInputError) as caught:
        await sidecar.client.call_model(model, history)
    assert short == []
    assert caught.value.detail.parameter == "messages[1].tool_calls[0].arguments_json"
    assert "nested at most 64 levels deep" in caught.value.detail.rule
    assert sidecar.provider.requests(model=UPSTREAM[model]) == []


async def test_an_integer_over_4300_digits_in_tool_arguments_is_invalid_input(sidecar: Running) -> None:
    resp = await sidecar.client.execute_tool("fetch", '{"id": "doc-1", "n": ' + "7" * 5000 + "}")
    assert _kind(resp) == "INVALID_INPUT"
    assert resp.failure.invalid_input.parameter == "arguments"
    assert "must not hold an integer of more than 4300 digits" in resp.failure.invalid_input.rule


async def test_an_integer_over_4300_digits_in_a_schema_is_invalid_input(sidecar: Running) -> None:
    req = pb.CallModelRequest(model="gpt", messages=[user("hi")])
    req.response_schema_json = '{"type": "object", "maxProperties": ' + "7" * 5000 + "}"
    err = await _raw_call(sidecar, req)
    assert isinstance(err, sc.InvalidInputError)
    assert err.detail.parameter == "response_schema_json"
    assert "more than 4300 digits" in err.detail.rule


async def test_a_reply_with_an_integer_over_4300_digits_is_corrected(sidecar: Running) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    steps = [{"preset": "reply", "text": '{"n": ' + "7" * 5000 + "}"}, {"preset": "reply", "text": '{"n": 7}'}]
    sidecar.provider.script("fake-gpt", steps)
    reply = await sidecar.client.call_model("gpt", [user("a number")], response_schema=schema)
    assert reply.corrections == 1
    assert reply.json["n"] == 7


async def test_a_dynamic_ref_to_a_missing_anchor_is_invalid_input(sidecar: Running) -> None:
    schema = {"type": "object", "properties": {"a": {"$dynamicRef": "#nope"}}}
    with pytest.raises(sc.InvalidInputError) as caught:
        await sidecar.client.call_model("gpt", [user("hi")], response_schema=schema)
    assert caught.value.detail.parameter == "response_schema_json"
    assert "cannot resolve #nope" in caught.value.detail.rule


async def test_a_100_kb_url_argument_is_invalid_input_before_any_call(sidecar: Running) -> None:
    resp = await sidecar.client.execute_tool("fetch", {"id": "x" * 100_000})
    assert _kind(resp) == "INVALID_INPUT"
    assert resp.failure.invalid_input.parameter == "id"
    assert "must be at most 2048 characters in a URL" in resp.failure.invalid_input.rule
    assert resp.failure.invalid_input.value.endswith("… (100000 characters)")
    assert sidecar.backend.requests(path="/docs/" + "x" * 10) == []


@pytest.mark.parametrize("char", ["m", "😀"])
async def test_a_5000_character_model_name_keeps_its_details(sidecar: Running, char: str) -> None:
    with pytest.raises(sc.ModelNotFoundError) as caught:
        await sidecar.client.call_model(char * 5000, [user("hi")])
    err = caught.value
    assert err.grpc_code == grpc.StatusCode.NOT_FOUND
    assert err.detail.identifier == char * 200 + "… (5000 characters)"
    assert list(err.detail.available) == ["claude", "gpt"]
    assert "Models that exist: claude, gpt" in err.message


# ---------------------------------------------------------------- item 3: patterns, caps, the event loop


async def _guarded_note(start_sidecar: Start, **policy: Any) -> Running:
    r = await start_sidecar()
    tools = r.app.config.model_dump()["tools"]
    tools["guarded_note"] = tool(r.backend.url + "/notes", "fetch", "notes", "POST", body="arguments")
    tools["guarded_note"].update(parameters=NOTE, guardrails=PII)
    return await start_sidecar(tools=tools, policy=policy)


async def test_the_pii_guardrail_reads_a_megabyte_argument(start_sidecar: Start) -> None:
    r = await _guarded_note(start_sidecar)
    text = "x" * (1024 * 1024 - 64)  # Python's re: about 23 minutes of a blocked server; RE2: milliseconds
    resp = await r.client.execute_tool("guarded_note", {"text": text})
    assert resp.attempts == 1
    assert len(r.backend.requests(path="/notes")) == 1
    refused = await r.client.execute_tool("guarded_note", {"text": text[:-20] + " bob@example.com"})
    assert _kind(refused) == "GUARDRAIL"
    assert len(r.backend.requests(path="/notes")) == 1


async def test_arguments_past_the_size_cap_are_invalid_input(start_sidecar: Start) -> None:
    r = await _guarded_note(start_sidecar, max_argument_bytes=4096)
    resp = await r.client.execute_tool("guarded_note", {"text": "y" * 5000})
    assert _kind(resp) == "INVALID_INPUT"
    assert resp.failure.invalid_input.parameter == "arguments"
    assert "must be at most 4096 bytes of JSON" in resp.failure.invalid_input.rule


async def test_a_catastrophic_pattern_in_a_response_schema_is_matched_at_once(sidecar: Running) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a+)+$"}}, "required": ["a"]}
    steps = [
        {"preset": "reply", "text": json.dumps({"a": "a" * 50_000 + "b"})},
        {"preset": "reply", "text": '{"a": "aa"}'},
    ]
    sidecar.provider.script("fake-gpt", steps)
    reply = await sidecar.client.call_model("gpt", [user("hi")], response_schema=schema)
    assert reply.corrections == 1
    assert reply.json["a"] == "aa"


async def test_a_backreference_in_a_callers_schema_is_refused_in_words(sidecar: Running) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": r"(a)\1"}}}
    with pytest.raises(sc.InvalidInputError) as caught:
        await sidecar.client.call_model("gpt", [user("hi")], response_schema=schema)
    assert caught.value.detail.parameter == "response_schema_json"
    assert "backreferences" in caught.value.detail.rule


def _hostile_schema() -> dict[str, Any]:
    """Just under 1 MiB of subschemas, each with a pattern: seconds to check in full, off the event loop."""
    props = {f"p{i}": {"type": "string", "pattern": f"^x{i}$"} for i in range(20_000)}
    return {"type": "object", "properties": props}


class _HeldClock:
    """The clock of one check: it starts at 0, holds the check at its first checkpoint until released,
    then reads far past any limit. The check is certainly still running while the test looks
    around, and certainly over its limit after, however fast the machine."""

    def __init__(self) -> None:
        self.started = False
        self.held = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> float:
        if not self.started:  # the check's start: its deadline is set from here
            self.started = True
            return 0.0
        self.held.set()
        self.release.wait(timeout=60)
        return 3600.0


async def test_lists_and_health_answer_while_a_hostile_schema_is_checked(start_sidecar: Start) -> None:
    r = await start_sidecar(policy={"check_time_limit_s": 5})
    clock = _HeldClock()
    with cpu_budget.timed_by(clock):
        hostile = asyncio.create_task(r.client.call_model("gpt", [user("hi")], response_schema=_hostile_schema()))
        try:
            while not clock.held.is_set():  # the check has reached a checkpoint in its worker thread
                assert not hostile.done(), hostile
                await asyncio.sleep(0.005)
            assert cpu_budget.running() >= 1  # (a check an earlier test left may still be ending)
            models = await r.client.list_models()
            async with grpc.aio.insecure_channel(r.app.address) as channel:
                health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""))
            assert not hostile.done()  # both answered while the hostile call was still being checked
        finally:
            clock.release.set()
        assert [m.id for m in models] == ["gpt", "claude"]
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(sc.InvalidInputError) as caught:
            await hostile
    assert caught.value.detail.parameter == "response_schema_json"
    assert "must be quicker to check: checking it took longer than 5 s" in caught.value.detail.rule
    assert r.provider.requests(model="fake-gpt") == []
