"""What a careless or hostile caller, service or provider sends gets a precise answer, never a crash."""

from __future__ import annotations

import json
from typing import Any

import grpc
import pytest
import sidecar_client as sc
from sidecar_client import job, pb, user

from sidecar.core.circuit import CircuitState
from tests.conftest import Running, tool

PII = [{"name": "pii", "deny_pattern": r"[\w.+-]+@[\w-]+\.\w+", "reason": "must not contain an email address"}]


async def _guarded(start_sidecar: Any) -> Running:
    url = "/docs/{id}"
    r: Running = await start_sidecar()
    cfg = r.app.config.model_dump()
    await r.client.close()
    cfg["tools"]["guarded"] = tool(r.backend.url + url, "fetch", "docs", guardrails=PII)
    cfg["tools"]["optional"] = tool(
        r.backend.url + "/search?q={query}&lang={lang}",
        "search",
        "docs",
        parameters={"type": "object", "properties": {"query": {"type": "string"}, "lang": {"type": "string"}}},
    )
    return await start_sidecar(tools=cfg["tools"])


async def test_a_guardrail_refuses_before_any_call(start_sidecar: Any) -> None:
    r = await _guarded(start_sidecar)
    resp = await r.client.execute_tool("guarded", {"id": "mail bob@example.com"})
    assert resp.failure.kind == pb.FAILURE_KIND_GUARDRAIL
    assert resp.failure.correctable
    assert "The pii guardrail refused the call: 'id' must not contain an email address" in resp.model_text
    assert resp.attempts == 0
    assert r.backend.requests(path="/docs/mail%20bob%40example.com") == []


async def test_an_absent_optional_placeholder_is_left_empty(start_sidecar: Any) -> None:
    r = await _guarded(start_sidecar)
    await r.client.execute_tool("optional", {"query": "retries"})
    assert r.backend.requests(path="/search")[-1]["query"] == {"q": "retries", "lang": ""}


@pytest.mark.parametrize(
    ("arguments", "parameter"),
    [('{"id": "\\ud800"}', "id"), ("[" * 100000, "arguments"), ('{"id": "a", "id2": ' + "[" * 5000 + "]}", None)],
)
async def test_hostile_arguments_are_invalid_input(sidecar: Running, arguments: str, parameter: str | None) -> None:
    resp = await sidecar.client.execute_tool("fetch", arguments)
    assert resp.failure.kind == pb.FAILURE_KIND_INVALID_INPUT
    if parameter:
        assert resp.failure.invalid_input.parameter == parameter


async def test_a_huge_upstream_body_is_read_up_to_a_cap(sidecar: Running) -> None:
    sidecar.backend.script("/docs/doc-1", [{"status": 500, "body": "x" * (5 * 1024 * 1024)}])
    resp = await sidecar.client.execute_tool("fetch", {"id": "doc-1"}, job=job(upstream_retries=0))
    assert resp.failure.kind == pb.FAILURE_KIND_EXTERNAL_SERVICE
    assert len(resp.failure.http.body) == 1024 * 1024


async def test_an_empty_fetch_result_is_not_called_a_search(sidecar: Running) -> None:
    sidecar.backend.script("/docs/doc-1", [{"status": 200, "body": ""}])
    resp = await sidecar.client.execute_tool("fetch", {"id": "doc-1"})
    assert resp.model_text == "The tool returned an empty result."


async def test_a_bad_content_encoding_is_an_external_service_failure(sidecar: Running) -> None:
    sidecar.backend.script("/docs/doc-1", [{"status": 200, "headers": {"content-encoding": "gzip"}, "body": "nope"}])
    resp = await sidecar.client.execute_tool("fetch", {"id": "doc-1"}, job=job(upstream_retries=0))
    assert resp.failure.kind == pb.FAILURE_KIND_EXTERNAL_SERVICE
    assert "could not be decoded" in resp.failure.message


async def test_a_retry_budget_past_the_limit_is_refused(sidecar: Running) -> None:
    resp = await sidecar.client.execute_tool("fetch", {"id": "doc-1"}, job=job(upstream_retries=4_000_000_000))
    assert resp.failure.invalid_input.parameter == "job.upstream_retries"
    with pytest.raises(sc.InvalidInputError) as caught:
        await sidecar.client.call_model("gpt", [user("hi")], job=job(upstream_retries=101))
    assert caught.value.grpc_code == grpc.StatusCode.INVALID_ARGUMENT


async def test_a_huge_retry_after_is_not_waited_by_a_tool(sidecar: Running) -> None:
    sidecar.backend.script("/docs/doc-1", [{"status": 503, "headers": {"retry-after": "2147483647"}, "body": "x"}])
    resp = await sidecar.client.execute_tool("fetch", {"id": "doc-1"})
    assert resp.attempts == 1
    assert sidecar.clock.sleeps == []
    assert resp.failure.http.retry_after_raw == "2147483647"


async def test_a_huge_retry_after_does_not_pause_the_model_past_its_longest_wait(sidecar: Running) -> None:
    sidecar.provider.script("fake-gpt", [{"preset": "rate_limit", "retry_after": "2147483647"}])
    with pytest.raises(sc.UpstreamRetriesExhaustedError) as caught:
        await sidecar.client.call_model("gpt", [user("hi")])
    assert "was told to wait 2147483647 s, past the 300 s a wait may last" in caught.value.message
    assert "budget is 3 upstream retries" in caught.value.message
    await sidecar.client.call_model("gpt", [user("again")])
    assert max(sidecar.clock.sleeps) <= 300


async def test_the_callers_own_deadline_is_not_charged_to_a_healthy_service(sidecar: Running) -> None:
    sidecar.backend.script("/docs/doc-1", [{"delay_ms": 30_000, "repeat": 20}])  # far past the caller's 0.2 s
    for _ in range(12):
        try:  # the server may answer JOB_TIMEOUT just before the caller's own deadline fires
            resp = await sidecar.client.execute_tool("fetch", {"id": "doc-1"}, timeout=0.2)
            kind = pb.FailureKind.Name(resp.failure.kind)
        except grpc.aio.AioRpcError as exc:
            kind = exc.code().name
        assert kind in ("FAILURE_KIND_JOB_TIMEOUT", "DEADLINE_EXCEEDED")
    guard = sidecar.app.guards.get("docs")  # type: ignore[union-attr]
    assert guard.throttle == 0
    assert guard.state is CircuitState.CLOSED


async def test_a_probe_answered_with_a_correctable_failure_closes_the_circuit(sidecar: Running) -> None:
    guard = sidecar.app.guards.get("docs")  # type: ignore[union-attr]
    from tests.policy.test_circuit import fail

    fail(guard, 12)
    sidecar.clock.advance(30)
    resp = await sidecar.client.execute_tool("fetch", {"id": "doc-404"})
    assert resp.failure.kind == pb.FAILURE_KIND_RESOURCE_NOT_FOUND
    assert guard.state is CircuitState.CLOSED


@pytest.mark.parametrize("model", ["gpt", "claude"])
async def test_a_reply_that_mentions_overloaded_error_is_a_reply(sidecar: Running, model: str) -> None:
    text = "Anthropic returns overloaded_error on 529 and insufficient_quota wording."
    sidecar.provider.script({"gpt": "fake-gpt", "claude": "fake-claude"}[model], [{"preset": "reply", "text": text}])
    reply = await sidecar.client.call_model(model, [user("hi")])
    assert reply.message.text == text
    assert reply.attempts == 1


@pytest.mark.parametrize(
    "body",
    [{"choices": ["x"]}, {"choices": [{"message": {"content": ["x"]}}]}, {"usage": {"prompt_tokens": "many"}}, ["x"]],
)
async def test_a_malformed_success_from_the_provider_is_transient(sidecar: Running, body: Any) -> None:
    sidecar.provider.script("fake-gpt", [{"status": 200, "body": json.dumps(body)}])
    reply = await sidecar.client.call_model("gpt", [user("hi")])
    assert reply.attempts == 2


@pytest.mark.parametrize("model", ["gpt", "claude"])
async def test_a_tool_call_reply_is_not_corrected_as_json(sidecar: Running, model: str) -> None:
    upstream = {"gpt": "fake-gpt", "claude": "fake-claude"}[model]
    call = [{"name": "search", "arguments": {"query": "x"}}]
    sidecar.provider.script(upstream, [{"preset": "reply", "text": "", "tool_calls": call}])
    tools = [t for t in await sidecar.client.list_tools() if t.definition.name == "search"]
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    reply = await sidecar.client.call_model(model, [user("hi")], tools=tools, response_schema=schema)
    assert reply.corrections == 0
    assert reply.message.tool_calls[0].name == "search"


async def test_an_unresolvable_ref_in_the_schema_is_invalid_argument(sidecar: Running) -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "#/defs/nope"}}}
    with pytest.raises(sc.InvalidInputError) as caught:
        await sidecar.client.call_model("gpt", [user("hi")], response_schema=schema)
    assert "cannot resolve #/defs/nope" in caught.value.message


async def test_a_huge_error_body_keeps_its_typed_status(sidecar: Running) -> None:
    sidecar.provider.script("fake-gpt", [{"status": 502, "body": "<html>" + "x" * 40000 + "</html>"}])
    with pytest.raises(sc.UpstreamRetriesExhaustedError) as caught:
        await sidecar.client.call_model("gpt", [user("hi")], job=job(upstream_retries=0))
    assert caught.value.grpc_code == grpc.StatusCode.UNAVAILABLE
    assert caught.value.http is not None
    assert len(caught.value.http.body) == 4096
