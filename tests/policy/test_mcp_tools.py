"""MCP tool backends: tools of real MCP servers (tests/mcp_server.py), listed and called over real gRPC.

The server speaks streamable HTTP in-process on a free port, or stdio as a subprocess; every
case of the mapping (tools/mcp.py) is called through ExecuteTool and read as an agent reads it.
"""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from opentelemetry import trace
from sidecar_client import pb

from sidecar.config import Config, ConfigError
from sidecar.core.clock import FakeClock
from sidecar.core.conversation import CallOptions, ToolRequest
from sidecar.core.correctability import CORRECTABLE_LINE, UNCORRECTABLE_LINE
from sidecar.server.app import running
from sidecar.telemetry import names as n
from sidecar.telemetry.testing import InMemoryTelemetry, install_in_memory
from sidecar.tools.mcp_sessions import McpUnavailable
from tests.conftest import Running, Start, base_config, until
from tests.mcp_server import REFUSAL, STDIO_COMMAND, STRICT, McpHttpServer
from tests.processes.test_telemetry import attrs, tree

DOCS = ("search", "lookup", "note", "refuse", "strict", "crash", "slow", "badout")
"""The test server's tools served by the sidecar under their own names (service docs-mcp)."""


@pytest_asyncio.fixture
async def mcp_http() -> AsyncIterator[McpHttpServer]:
    server = McpHttpServer()
    await server.start()
    yield server
    await server.stop()


def mcp_sections(url: str, **server: Any) -> dict[str, Any]:
    tools: dict[str, Any] = {name: {"kind": "mcp", "server": "docs-mcp"} for name in DOCS}
    tools["find"] = {"kind": "mcp", "server": "docs-mcp", "tool": "search", "description": "Find documents."}
    return {
        "mcp_servers": {"docs-mcp": {"url": url, "timeout_s": 5, **server}},
        "tools": tools,
    }


async def started(start_sidecar: Start, mcp: McpHttpServer, **server: Any) -> Running:
    return await start_sidecar(**mcp_sections(mcp.url, **server))


def kind(resp: pb.ExecuteToolResponse) -> str:
    return pb.FailureKind.Name(resp.failure.kind).removeprefix("FAILURE_KIND_")


# ---------------------------------------------------------------- ListTools


async def test_list_tools_gives_each_mcp_tool_with_the_servers_schema(
    mcp_http: McpHttpServer, start_sidecar: Start
) -> None:
    sc = await started(start_sidecar, mcp_http)
    listed = {t.definition.name: t for t in await sc.client.list_tools()}
    search, find, note = listed["search"], listed["find"], listed["note"]
    assert json.loads(search.definition.parameters_json) == {
        "type": "object",
        "properties": {"query": {"type": "string", "minLength": 1}},
        "required": ["query"],
        "additionalProperties": False,
    }
    assert search.definition.description == "Search the docs."
    assert find.definition.description == "Find documents."  # the config's own words win
    assert json.loads(find.definition.parameters_json) == json.loads(search.definition.parameters_json)
    assert search.kind == pb.TOOL_KIND_UNSPECIFIED
    assert search.service == "docs-mcp"
    assert search.idempotent  # readOnlyHint
    assert listed["crash"].idempotent  # idempotentHint
    assert not note.idempotent  # no hint: not idempotent
    assert json.loads(search.openai_json)["function"]["parameters"]["required"] == ["query"]
    assert "fetch" in listed  # the HTTP tools are still there, all in the config's order
    assert [t.definition.name for t in await sc.client.list_tools()] == list(sc.app.config.tools)


async def test_a_tool_the_config_says_is_idempotent_is_listed_so(mcp_http: McpHttpServer, start_sidecar: Start) -> None:
    sections = mcp_sections(mcp_http.url)
    sections["tools"]["note"] = {"kind": "mcp", "server": "docs-mcp", "idempotent": True}
    sc = await start_sidecar(**sections)
    listed = {t.definition.name: t for t in await sc.client.list_tools()}
    assert listed["note"].idempotent


# ---------------------------------------------------------------- ExecuteTool: the mapping


async def test_a_result_is_the_servers_text(mcp_http: McpHttpServer, start_sidecar: Start) -> None:
    sc = await started(start_sidecar, mcp_http)
    resp = await sc.client.execute_tool("find", {"query": "retries"}, call_id="c1")
    assert resp.WhichOneof("outcome") == "result"
    assert resp.model_text == "results for retries: doc-1, doc-2"
    assert resp.result.content_type == "text/plain"
    assert resp.attempts == 1
    assert [(c.name, c.arguments) for c in mcp_http.calls] == [("search", {"query": "retries"})]


async def test_structured_content_alone_is_its_json(mcp_http: McpHttpServer, start_sidecar: Start) -> None:
    sc = await started(start_sidecar, mcp_http)
    resp = await sc.client.execute_tool("lookup", {"id": "doc-1"})
    assert json.loads(resp.model_text) == {"id": "doc-1", "title": "Retries"}
    assert resp.result.content_type == "application/json"


async def test_is_error_is_a_correctable_failure_in_the_servers_words(
    mcp_http: McpHttpServer, start_sidecar: Start
) -> None:
    sc = await started(start_sidecar, mcp_http)
    resp = await sc.client.execute_tool("refuse", {"id": "doc-9"})
    said = REFUSAL.format(id="doc-9")
    assert kind(resp) == "INVALID_INPUT"
    assert resp.failure.correctable
    assert resp.failure.message == said
    assert resp.model_text == f"{said}\n{CORRECTABLE_LINE}"
    assert resp.attempts == 1
    assert sc.app.guards is not None
    assert sc.app.guards.get("docs-mcp").throttle == 0  # charged to no one


async def test_invalid_params_is_invalid_input_quoting_the_server(
    mcp_http: McpHttpServer, start_sidecar: Start
) -> None:
    sc = await started(start_sidecar, mcp_http)
    resp = await sc.client.execute_tool("strict", {"id": "nine"})
    assert kind(resp) == "INVALID_INPUT"
    assert resp.failure.correctable
    assert resp.failure.invalid_input.parameter == "arguments"
    assert resp.failure.invalid_input.value == '{"id": "nine"}'
    assert resp.failure.invalid_input.rule == (
        f"the MCP server docs-mcp refused them ({STRICT}); send corrected arguments"
    )
    assert resp.attempts == 1


async def test_arguments_are_checked_against_the_servers_schema_before_any_call(
    mcp_http: McpHttpServer, start_sidecar: Start
) -> None:
    sc = await started(start_sidecar, mcp_http)
    missing = await sc.client.execute_tool("search", {})
    extra = await sc.client.execute_tool("search", {"query": "q", "limit": 3})
    assert kind(missing) == kind(extra) == "INVALID_INPUT"
    assert missing.failure.invalid_input.parameter == "query"
    assert missing.failure.invalid_input.rule == "is required; provide a string"
    assert extra.failure.invalid_input.parameter == "limit"
    assert missing.attempts == extra.attempts == 0
    assert mcp_http.calls == []


async def test_a_guardrail_of_an_mcp_tool_refuses_before_any_call(
    mcp_http: McpHttpServer, start_sidecar: Start
) -> None:
    sections = mcp_sections(mcp_http.url)
    rule = {"name": "pii", "deny_pattern": "[\\w.]+@[\\w]+\\.\\w+", "reason": "must not contain an email address"}
    sections["tools"]["search"]["guardrails"] = [rule]
    sc = await start_sidecar(**sections)
    resp = await sc.client.execute_tool("search", {"query": "mail ann@example.com"})
    assert kind(resp) == "GUARDRAIL"
    assert mcp_http.calls == []


async def test_a_result_that_breaks_the_tools_output_schema_is_external_service(
    mcp_http: McpHttpServer, start_sidecar: Start
) -> None:
    sc = await started(start_sidecar, mcp_http)
    resp = await sc.client.execute_tool("badout", {})
    assert kind(resp) == "EXTERNAL_SERVICE"
    assert resp.failure.message.startswith(
        f"The docs-mcp service failed at {mcp_http.url}: it answered a result that could not be used (Invalid "
        "structured content returned by tool badout"
    )
    assert resp.attempts == 1


async def test_the_servers_headers_are_sent_and_their_token_never_shown(
    mcp_http: McpHttpServer, start_sidecar: Start, otel: InMemoryTelemetry
) -> None:
    mcp_http.token = "mcp-token-0123456789abcdef"
    sc = await started(start_sidecar, mcp_http, headers={"Authorization": f"Bearer {mcp_http.token}"})
    assert (await sc.client.execute_tool("search", {"query": "q"})).model_text.startswith("results for q")
    assert mcp_http.token in sc.app.config.secrets  # a credential header: masked wherever text leaves
    assert all(mcp_http.token not in str(s.to_json()) for s in otel.spans())


async def test_a_server_that_refuses_the_sidecar_fails_the_start_with_its_status(mcp_http: McpHttpServer) -> None:
    mcp_http.token = "mcp-token-0123456789abcdef"
    cfg = Config.model_validate(base_config("http://127.0.0.1:1", "http://127.0.0.1:1", **mcp_sections(mcp_http.url)))
    with pytest.raises(McpUnavailable, match=r"^the MCP server docs-mcp \(.*\) cannot be used: HTTP 401$"):
        async with running(cfg, listen="127.0.0.1:0", clock=FakeClock()):
            pass


async def test_an_internal_error_of_an_idempotent_tool_is_retried_then_external_service(
    mcp_http: McpHttpServer, start_sidecar: Start
) -> None:
    sc = await started(start_sidecar, mcp_http)
    resp = await sc.client.execute_tool("crash", {})
    assert kind(resp) == "EXTERNAL_SERVICE"
    assert not resp.failure.correctable
    assert resp.failure.message == (
        f"The docs-mcp service failed at {mcp_http.url}: it answered JSON-RPC error -32603: the index is corrupt."
    )
    assert resp.model_text.endswith(UNCORRECTABLE_LINE)
    assert resp.attempts == 3  # policy.tool_retries 2
    assert [c.name for c in mcp_http.calls] == ["crash"] * 3
    assert len(sc.clock.sleeps) == 2  # two backoffs, on the fake clock


async def test_a_json_rpc_error_of_a_tool_that_is_not_idempotent_is_not_resent(
    mcp_http: McpHttpServer, start_sidecar: Start
) -> None:
    sections = mcp_sections(mcp_http.url)
    sections["tools"]["crash"] = {"kind": "mcp", "server": "docs-mcp", "idempotent": False}
    sc = await start_sidecar(**sections)
    resp = await sc.client.execute_tool("crash", {})
    assert kind(resp) == "EXTERNAL_SERVICE"
    assert resp.attempts == 1


async def test_a_tool_that_does_not_answer_in_time_is_external_service(
    mcp_http: McpHttpServer, start_sidecar: Start
) -> None:
    sections = mcp_sections(mcp_http.url)
    sections["tools"]["slow"] = {"kind": "mcp", "server": "docs-mcp", "timeout_s": 0.2, "idempotent": False}
    sc = await start_sidecar(**sections)
    resp = await sc.client.execute_tool("slow", {})
    assert kind(resp) == "EXTERNAL_SERVICE"
    assert resp.failure.message == (
        f"The docs-mcp service failed at {mcp_http.url}: no response came in time after the request was sent, "
        "so it may have been delivered; the outcome is unknown — check before repeating this call (it is not "
        "idempotent)."
    )
    assert resp.failure.service.fault == pb.TRANSPORT_FAULT_TIMEOUT
    assert resp.attempts == 1
    after = await sc.client.execute_tool("search", {"query": "q"})  # the session is still good
    assert after.model_text.startswith("results for q")


async def test_a_call_given_up_for_time_is_cancelled_on_the_server(
    mcp_http: McpHttpServer, start_sidecar: Start
) -> None:
    # the SDK 2.x sends notifications/cancelled for a request its caller abandons (1.x sent nothing)
    sections = mcp_sections(mcp_http.url)
    sections["tools"]["slow"] = {"kind": "mcp", "server": "docs-mcp", "timeout_s": 0.2, "idempotent": False}
    sc = await start_sidecar(**sections)
    resp = await sc.client.execute_tool("slow", {})
    assert kind(resp) == "EXTERNAL_SERVICE"
    await until(lambda: mcp_http.tools.cancelled == ["slow"], "the server saw the call cancelled")


async def test_the_callers_deadline_cut_short_is_job_timeout(mcp_http: McpHttpServer) -> None:
    clock = FakeClock()
    cfg = Config.model_validate(base_config("http://127.0.0.1:1", "http://127.0.0.1:1", **mcp_sections(mcp_http.url)))
    async with running(cfg, listen="127.0.0.1:0", clock=clock, rng=random.Random(7)) as app:
        assert app.tools is not None
        options = CallOptions(deadline=clock.time() + 0.2)
        outcome = await app.tools.execute(ToolRequest("slow", "{}"), options)
    assert outcome.failure is not None
    assert outcome.failure.kind_name == "JOB_TIMEOUT"
    assert outcome.attempts == 1


async def test_an_http_error_status_of_the_endpoint_is_retried_for_an_idempotent_tool(
    mcp_http: McpHttpServer, start_sidecar: Start
) -> None:
    sc = await started(start_sidecar, mcp_http)
    mcp_http.fail_posts = 1
    resp = await sc.client.execute_tool("search", {"query": "q"})
    assert resp.model_text.startswith("results for q")
    assert resp.attempts == 2  # the 503 broke the session; the next attempt opened another


async def test_an_http_error_status_of_a_tool_that_is_not_idempotent_is_not_resent(
    mcp_http: McpHttpServer, start_sidecar: Start
) -> None:
    sc = await started(start_sidecar, mcp_http)
    mcp_http.fail_posts = 1
    resp = await sc.client.execute_tool("note", {"text": "hello"})
    assert kind(resp) == "EXTERNAL_SERVICE"
    assert resp.failure.message == f"The docs-mcp service failed at {mcp_http.url}: it answered HTTP 503."
    assert resp.failure.http.status_code == 503
    assert resp.attempts == 1
    again = await sc.client.execute_tool("note", {"text": "hello"})
    assert again.model_text == "noted: hello"


# ---------------------------------------------------------------- transport faults, reconnecting


async def test_a_server_gone_is_external_service_and_the_session_comes_back_with_it(
    mcp_http: McpHttpServer, start_sidecar: Start
) -> None:
    sc = await started(start_sidecar, mcp_http)
    assert (await sc.client.execute_tool("note", {"text": "one"})).model_text == "noted: one"
    await mcp_http.stop()
    down = await sc.client.execute_tool("note", {"text": "two"})
    assert kind(down) == "EXTERNAL_SERVICE"
    assert down.failure.message == f"The docs-mcp service failed at {mcp_http.url}: it could not be reached " \
        "(connection refused)."  # fmt: skip
    assert down.failure.service.fault == pb.TRANSPORT_FAULT_REFUSED
    assert down.attempts == 3  # never reached: re-sent although the tool is not idempotent
    await mcp_http.start()  # the same port
    back = await sc.client.execute_tool("note", {"text": "three"})
    assert back.model_text == "noted: three"
    assert [c.arguments["text"] for c in mcp_http.calls] == ["one", "three"]


async def test_repeated_transport_faults_open_the_services_circuit(
    mcp_http: McpHttpServer, start_sidecar: Start
) -> None:
    sc = await started(start_sidecar, mcp_http)
    await mcp_http.stop()
    kinds = [kind(await sc.client.execute_tool("search", {"query": "q"})) for _ in range(5)]
    assert kinds == ["EXTERNAL_SERVICE"] * 4 + ["CIRCUIT_OPEN"]  # 12 failures: nine raise the throttle, 3 open
    refused = await sc.client.execute_tool("note", {"text": "x"})  # every tool of the service
    assert kind(refused) == "CIRCUIT_OPEN"
    assert refused.attempts == 0
    assert refused.failure.message.endswith("It was switched off by: no response (connection refused).")
    await mcp_http.start()
    sc.clock.advance(30)  # the cooldown
    probe = await sc.client.execute_tool("search", {"query": "q"})
    assert probe.model_text.startswith("results for q")
    assert sc.app.guards is not None
    assert sc.app.guards.get("docs-mcp").state.name == "CLOSED"


async def test_a_stdio_server_that_exits_is_external_service_and_is_started_again(start_sidecar: Start) -> None:
    sc = await start_sidecar(
        mcp_servers={"local": {"command": STDIO_COMMAND, "service": "local-docs", "connect_timeout_s": 60}},
        tools={
            "exit": {"kind": "mcp", "server": "local"},
            "lsearch": {"kind": "mcp", "server": "local", "tool": "search"},
        },
    )
    first = await sc.client.execute_tool("lsearch", {"query": "a"})
    assert first.model_text == "results for a: doc-1, doc-2"
    gone = await sc.client.execute_tool("exit", {})
    assert kind(gone) == "EXTERNAL_SERVICE"
    assert gone.failure.message == (
        f"The local-docs service failed at stdio:{' '.join(STDIO_COMMAND)}: the call failed (the server process "
        "exited) after the request was sent, so it may have been delivered; the outcome is unknown — check before "
        "repeating this call (it is not idempotent)."
    )
    assert gone.failure.service.fault == pb.TRANSPORT_FAULT_RESET
    assert gone.attempts == 1  # not idempotent, and it may have run
    again = await sc.client.execute_tool("lsearch", {"query": "b"})  # a new process
    assert again.model_text == "results for b: doc-1, doc-2"


# ---------------------------------------------------------------- per-attempt spans


@pytest.fixture
def otel() -> InMemoryTelemetry:
    telemetry = install_in_memory()
    telemetry.clear()
    return telemetry


async def test_each_attempt_is_a_span_and_carries_the_trace_to_the_server(
    mcp_http: McpHttpServer, start_sidecar: Start, otel: InMemoryTelemetry
) -> None:
    sc = await started(start_sidecar, mcp_http)
    mcp_http.fail_posts = 1
    with otel.tracer_provider.get_tracer("agent").start_as_current_span("agent.turn"):
        resp = await sc.app.tools.execute(ToolRequest("search", '{"query": "q"}'), CallOptions())  # type: ignore[union-attr]
    assert resp.attempts == 2
    t = tree(otel)
    call = t.one("execute_tool search")
    assert attrs(call)[n.SERVICE] == "docs-mcp"
    assert t.names(call) == ["tools/call search", n.SPAN_BACKOFF, "tools/call search"]
    first, _backoff, second = t.children(call)
    assert all(s.kind is trace.SpanKind.CLIENT for s in (first, second))
    assert attrs(first)[n.MCP_METHOD_NAME] == "tools/call"
    assert attrs(first)[n.GEN_AI_TOOL_NAME] == "search"  # the server's name for it
    assert n.HTTP_METHOD not in attrs(first)  # not an HTTP verb
    assert attrs(first)[n.URL_FULL] == mcp_http.url
    assert attrs(first)[n.SERVER_PORT] == mcp_http.port
    assert [attrs(s)[n.ATTEMPT] for s in (first, second)] == [1, 2]
    assert attrs(first)[n.HTTP_STATUS] == 503
    assert attrs(first)[n.FAILURE_KIND] == "EXTERNAL_SERVICE"
    assert attrs(first)[n.RETRY_SIGNAL] == "transient"
    assert n.FAILURE_KIND not in attrs(second)
    (reached,) = mcp_http.calls  # the 503 never reached the tool; the second attempt did
    ctx = second.context
    assert reached.meta["traceparent"].split("-")[1:3] == [f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"]


# ---------------------------------------------------------------- start


async def test_an_mcp_server_unreachable_at_start_fails_the_start_naming_it() -> None:
    sections = mcp_sections("http://127.0.0.1:1/mcp", connect_timeout_s=5)
    cfg = Config.model_validate(base_config("http://127.0.0.1:1", "http://127.0.0.1:1", **sections))
    with pytest.raises(McpUnavailable) as caught:
        async with running(cfg, listen="127.0.0.1:0", clock=FakeClock()):
            pass
    assert str(caught.value) == ("the MCP server docs-mcp (http://127.0.0.1:1/mcp) cannot be used: connection refused")


async def test_a_tool_the_server_does_not_list_fails_the_start_naming_what_it_lists(mcp_http: McpHttpServer) -> None:
    sections = mcp_sections(mcp_http.url)
    sections["tools"]["find"] = {"kind": "mcp", "server": "docs-mcp", "tool": "grep"}
    cfg = Config.model_validate(base_config("http://127.0.0.1:1", "http://127.0.0.1:1", **sections))
    with pytest.raises(ConfigError) as caught:
        async with running(cfg, listen="127.0.0.1:0", clock=FakeClock()):
            pass
    assert str(caught.value) == (
        "tools.find.tool: the MCP server docs-mcp lists no tool 'grep' "
        "(it lists: badout, crash, exit, lookup, note, refuse, search, slow, strict)"
    )
