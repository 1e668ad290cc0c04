"""The MCP front and the HTTP port: the official MCP client against the sidecar's /mcp.

The sidecar runs with ``http.listen`` on a free loopback port beside its gRPC port; the MCP
client is the official SDK's (``mcp.client.streamable_http``), and what it gets is compared
with what ExecuteTool and ListTools give for the same calls.
"""

from __future__ import annotations

import ast
import asyncio
import json
import signal
import socket
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
import yaml
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from opentelemetry import propagate, trace

from sidecar.cli import main
from sidecar.fakes import FakeToolBackend, ThreadedServer
from sidecar.server.http.access import FORBIDDEN_ORIGIN, MISDIRECTED, UNAUTHENTICATED
from sidecar.telemetry import names as n
from sidecar.telemetry.testing import InMemoryTelemetry, install_in_memory
from tests.conftest import ANSWER_MARGIN_S, ONE_TOOL, Running, Start, silent_tools, tool
from tests.fronts.test_http_openai import holding_the_one_slot
from tests.mcp_server import STDIO_COMMAND
from tests.processes.test_server_process import Proc, _free_port
from tests.processes.test_telemetry import attrs, tree
from tests.processes.test_transport_security import Pki, pki  # noqa: F401  (the module's throwaway CA)
from tests.processes.test_workers import WAIT_S, Supervisor
from tests.redis_server import RedisServer, free_port, redis_server  # noqa: F401  (the fixture)

TOKEN = "agent-token-0123456789abcdef"
HTTP = {"listen": "127.0.0.1:0"}


def url(sc: Running, path: str = "/mcp") -> str:
    assert sc.app.http is not None
    return f"{sc.app.http.scheme}://127.0.0.1:{sc.app.http.port}{path}"


@asynccontextmanager
async def mcp_client(address: str, **client: Any) -> AsyncIterator[ClientSession]:
    """The official MCP client, initialized, over an httpx2 client of the test's (headers, TLS)."""
    async with (
        httpx2.AsyncClient(timeout=30, **client) as http,
        streamable_http_client(address, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def until(condition: Callable[[], bool], what: str, within_s: float = 60.0) -> None:
    """Poll ``condition`` (real time: the calls cross real sockets); fail naming ``what`` if it never holds."""
    end = asyncio.get_running_loop().time() + within_s
    while not condition():
        if asyncio.get_running_loop().time() > end:
            raise AssertionError(f"not within {within_s:g} s: {what}")
        await asyncio.sleep(0.005)


def text(result: types.CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return block.text


# ---------------------------------------------------------------- tools/list, tools/call


async def test_an_mcp_client_lists_the_tools_list_tools_lists(start_sidecar: Start) -> None:
    sc = await start_sidecar(http=HTTP)
    grpc_listed = await sc.client.list_tools()
    async with mcp_client(url(sc)) as mcp:
        listed = await mcp.list_tools()
        assert mcp.server_capabilities is not None
    assert [t.name for t in listed.tools] == [t.definition.name for t in grpc_listed]
    for mine, theirs in zip(listed.tools, grpc_listed, strict=True):
        assert mine.description == theirs.definition.description
        assert mine.input_schema == json.loads(theirs.definition.parameters_json)
        assert mine.annotations is not None
        assert mine.annotations.idempotent_hint is theirs.idempotent


async def test_a_call_that_succeeds_answers_what_execute_tool_answers(start_sidecar: Start) -> None:
    sc = await start_sidecar(http=HTTP)
    over_grpc = await sc.client.execute_tool("fetch", {"id": "doc-1"})
    async with mcp_client(url(sc)) as mcp:
        result = await mcp.call_tool("fetch", {"id": "doc-1"})
    assert not result.is_error
    assert text(result) == over_grpc.model_text
    assert result.meta == {"sidecar/attempts": 1}


async def test_a_call_that_fails_is_is_error_with_the_model_text(start_sidecar: Start) -> None:
    sc = await start_sidecar(http=HTTP)
    over_grpc = await sc.client.execute_tool("fetch", {"id": "doc-404"})
    async with mcp_client(url(sc)) as mcp:
        missing = await mcp.call_tool("fetch", {"id": "doc-404"})
        invalid = await mcp.call_tool("fetch", {"id": ""})
        unknown = await mcp.call_tool("nope", {})
    assert missing.is_error
    assert text(missing) == over_grpc.model_text
    assert missing.meta == {"sidecar/attempts": 1, "sidecar/kind": "RESOURCE_NOT_FOUND", "sidecar/correctable": True}
    assert invalid.is_error
    assert text(invalid).startswith("Invalid value for parameter 'id' (got \"\")")
    assert invalid.meta is not None
    assert invalid.meta["sidecar/kind"] == "INVALID_INPUT"
    assert unknown.is_error
    assert text(unknown).startswith("Invalid value for parameter 'tool' (got nope): must name a tool that exists")


async def test_a_client_of_the_2026_revision_is_served_without_initialize(start_sidecar: Start) -> None:
    # new with the SDK 2.x: the 2026-07-28 revision (server/discover, the version on every request) beside
    # the initialize handshake, the same tools and the same answers
    sc = await start_sidecar(http=HTTP)
    over_grpc = await sc.client.execute_tool("fetch", {"id": "doc-404"})
    async with (
        httpx2.AsyncClient(timeout=30) as http,
        streamable_http_client(url(sc), http_client=http) as (read, write),
        ClientSession(read, write) as mcp,
    ):
        await mcp.discover()
        listed = await mcp.list_tools()
        missing = await mcp.call_tool("fetch", {"id": "doc-404"})
    assert mcp.protocol_version == "2026-07-28"
    assert mcp.server_info is not None
    assert mcp.server_info.name == "sidecar"
    assert [t.name for t in listed.tools] == [d.definition.name for d in await sc.client.list_tools()]
    assert missing.is_error
    assert text(missing) == over_grpc.model_text
    assert missing.meta is not None
    assert missing.meta["sidecar/kind"] == "RESOURCE_NOT_FOUND"


async def test_the_front_keeps_no_session_a_restart_would_lose(start_sidecar: Start) -> None:
    sc = await start_sidecar(http=HTTP)
    params = {"name": "fetch", "arguments": {"id": "doc-1"}}
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    accept = {"accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient() as http:
        answered = await http.post(url(sc), json=call, headers=accept)  # no initialize, no Mcp-Session-Id
        stream = await http.get(url(sc), headers=accept)
    assert answered.status_code == 200
    assert "mcp-session-id" not in answered.headers
    reply = answered.json()
    assert reply["id"] == 7
    assert reply["result"]["isError"] is False
    assert stream.status_code == 405  # no event stream: the front never speaks first


async def test_a_service_failure_through_the_front_feeds_the_same_circuit(start_sidecar: Start) -> None:
    circuit = {"flaky": {"circuit": {"failures_to_open": 1, "max_throttle": 1.0}}}
    sc = await start_sidecar(http=HTTP, services=circuit, policy={"tool_retries": 0})
    async with mcp_client(url(sc)) as mcp:
        failed = await mcp.call_tool("fail_fetch", {"mode": "500"})
        await mcp.call_tool("fail_fetch", {"mode": "500"})
    assert failed.meta is not None
    assert failed.meta["sidecar/kind"] == "EXTERNAL_SERVICE"
    refused = await sc.client.execute_tool("fail_fetch", {"mode": "500"})  # the gRPC port sees it open
    assert refused.failure.circuit.service == "flaky"


async def test_the_in_flight_limit_counts_the_calls_of_both_ports(start_sidecar: Start) -> None:
    sc = await start_sidecar(http=HTTP, server={"max_in_flight": 1})
    slow = await holding_the_one_slot(sc)  # a gRPC call, until it is cancelled
    admission = sc.app.admission
    assert admission is not None
    assert admission.in_flight == 1
    async with mcp_client(url(sc)) as mcp:
        shed = await mcp.call_tool("fetch", {"id": "doc-1"})
    slow.cancel()
    await asyncio.gather(slow, return_exceptions=True)
    for _ in range(2000):  # the server sees the cancellation a moment after the client
        if admission.in_flight == 0:
            break
        await asyncio.sleep(0.01)
    assert shed.is_error
    assert text(shed).startswith("The sidecar is serving its limit of 1 calls at once (server.max_in_flight)")
    assert shed.meta is not None
    assert shed.meta["sidecar/kind"] == "UPSTREAM_THROTTLE"
    assert admission.shed == 1
    assert admission.in_flight == 0


# ---------------------------------------------------------------- the trace


@pytest.fixture
def otel() -> InMemoryTelemetry:
    telemetry = install_in_memory()
    telemetry.clear()
    return telemetry


async def test_a_call_continues_the_callers_trace_as_execute_tool_does(
    start_sidecar: Start, otel: InMemoryTelemetry
) -> None:
    sc = await start_sidecar(http=HTTP)
    with otel.tracer_provider.get_tracer("agent").start_as_current_span("agent.turn") as agent:
        headers: dict[str, str] = {"x-sidecar-job-id": "job-42", "x-sidecar-workflow-id": "wf-7"}
        propagate.inject(headers)
    async with mcp_client(url(sc), headers=headers) as mcp:
        await mcp.call_tool("fetch", {"id": "doc-1"})
    t = tree(otel)
    server, call, get = t.one("tools/call fetch"), t.one("execute_tool fetch"), t.one("GET")
    assert server.kind is trace.SpanKind.SERVER
    assert server.parent is not None
    assert server.parent.span_id == agent.get_span_context().span_id
    assert {s.context.trace_id for s in (server, call, get)} == {agent.get_span_context().trace_id}
    assert t.parent(call) is server
    assert t.parent(get) is call
    assert attrs(server)[n.MCP_METHOD_NAME] == "tools/call"
    assert attrs(server)[n.GEN_AI_TOOL_NAME] == "fetch"
    assert attrs(call)[n.JOB_ID] == "job-42"
    assert attrs(call)[n.WORKFLOW_ID] == "wf-7"
    assert attrs(call)[n.GEN_AI_TOOL_CALL_ID] == attrs(server)[n.JSONRPC_REQUEST_ID]


async def test_a_failed_call_marks_its_server_span_a_tool_error(start_sidecar: Start, otel: InMemoryTelemetry) -> None:
    sc = await start_sidecar(http=HTTP)
    async with mcp_client(url(sc)) as mcp:
        await mcp.call_tool("fetch", {"id": "doc-404"})
    t = tree(otel)
    assert attrs(t.one("tools/call fetch"))[n.ERROR_TYPE] == n.ERROR_TOOL
    assert attrs(t.one("execute_tool fetch"))[n.ERROR_TYPE] == "RESOURCE_NOT_FOUND"


# ---------------------------------------------------------------- who may call the port


async def test_health_answers_without_a_token(start_sidecar: Start) -> None:
    sc = await start_sidecar(http=HTTP, server={"auth": {"tokens": [TOKEN]}})
    async with httpx.AsyncClient() as http:
        resp = await http.get(url(sc, "/healthz"))
    assert resp.status_code == 200
    assert resp.json() == {"status": "SERVING"}


async def test_the_mcp_front_needs_one_of_the_grpc_ports_tokens(start_sidecar: Start) -> None:
    sc = await start_sidecar(http=HTTP, server={"auth": {"tokens": [TOKEN]}})
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    async with httpx.AsyncClient() as http:
        bare = await http.post(url(sc), json=body)
        wrong = await http.post(url(sc), json=body, headers={"authorization": "Bearer not-the-token-at-all"})
    for refused in (bare, wrong):
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
        assert refused.json() == {"error": {"type": "unauthenticated", "message": UNAUTHENTICATED}}
        assert "not-the-token" not in refused.text
    async with mcp_client(url(sc), headers={"authorization": f"Bearer {TOKEN}"}) as mcp:
        listed = await mcp.list_tools()
    assert listed.tools


async def test_a_web_page_of_another_origin_or_host_is_refused(start_sidecar: Start) -> None:
    sc = await start_sidecar(http=HTTP)
    assert sc.app.http is not None
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    port = sc.app.http.port
    async with httpx.AsyncClient() as http:
        other = await http.post(url(sc), json=body, headers={"origin": "http://evil.example"})
        null = await http.post(url(sc), json=body, headers={"origin": "null"})
        rebound = await http.post(url(sc), json=body, headers={"host": f"evil.example:{port}"})
        own = await http.get(url(sc, "/healthz"), headers={"origin": f"http://127.0.0.1:{port}"})
    assert other.status_code == null.status_code == 403
    assert other.json()["error"] == {"type": "forbidden_origin", "message": FORBIDDEN_ORIGIN}
    assert rebound.status_code == 421
    assert rebound.json()["error"] == {"type": "misdirected", "message": MISDIRECTED}
    assert own.status_code == 200


async def test_the_http_port_serves_tls_with_the_grpc_ports_certificate(start_sidecar: Start, pki: Pki) -> None:  # noqa: F811
    sc = await start_sidecar(http=HTTP, server={"tls": {"cert": str(pki.cert), "key": str(pki.key)}})
    trusted = ssl.create_default_context(cafile=str(pki.ca))
    async with mcp_client(url(sc), verify=trusted) as mcp:
        result = await mcp.call_tool("fetch", {"id": "doc-1"})
    assert not result.is_error
    async with httpx.AsyncClient() as http:
        with pytest.raises(httpx.RemoteProtocolError):
            await http.get(url(sc, "/healthz").replace("https://", "http://"))


def test_serve_refuses_an_http_port_beyond_loopback_without_security(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "sidecar.yaml"
    config.write_text("server: {listen: '127.0.0.1:0'}\nhttp: {listen: '0.0.0.0:0'}\n" + ONE_TOOL)
    assert main(["serve", "--config", str(config)]) == 2
    assert "sidecar: refusing to listen on 0.0.0.0:0 without transport security" in capsys.readouterr().err


# ---------------------------------------------------------------- start and stop


@asynccontextmanager
async def held_service() -> AsyncIterator[tuple[str, asyncio.Event]]:
    """A loopback service that answers every request (``{}``) only once ``release`` is set: a call to it
    stays in flight for as long as the test needs, on any machine."""
    release = asyncio.Event()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            await release.wait()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}")
            await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", release
    finally:
        release.set()
        server.close()
        await server.wait_closed()


async def test_while_draining_health_is_503_and_a_new_call_is_refused_as_is_error(start_sidecar: Start) -> None:
    async with held_service() as (held_url, release):
        held = tool(held_url + "/held/{id}", "fetch", "held", timeout_s=ANSWER_MARGIN_S)
        sc = await start_sidecar(http=HTTP, tools={"held": held})
        admission = sc.app.admission
        assert admission is not None
        async with mcp_client(url(sc)) as mcp, httpx.AsyncClient() as http:
            slow = asyncio.ensure_future(mcp.call_tool("held", {"id": "x"}))  # in flight until released
            await until(lambda: admission.in_flight > 0, "the held call is in flight")
            stopping = asyncio.ensure_future(sc.app.stop(grace=ANSWER_MARGIN_S))  # the drain waits for it
            await until(lambda: admission.draining, "the drain began")
            health = await http.get(url(sc, "/healthz"))
            refused = await mcp.call_tool("fetch", {"id": "doc-1"})
            assert not slow.done()  # still in flight: the drain waits for it
            slow.cancel()  # the client leaves while the held call keeps the port open: none of its requests
            await asyncio.gather(slow, return_exceptions=True)  # meets a port closing under it
        release.set()
        await stopping  # the held call answered: the drain ends
    assert health.status_code == 503
    assert health.json() == {"status": "NOT_SERVING"}
    assert refused.is_error
    assert text(refused).startswith("The sidecar is shutting down: it finishes the calls in flight")
    assert refused.meta is not None
    assert refused.meta["sidecar/kind"] == "UPSTREAM_THROTTLE"


def test_serve_with_workers_refuses_an_http_port_each_would_pick_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "sidecar.yaml"
    config.write_text(
        "server: {listen: '127.0.0.1:0', workers: 2}\nstate: {backend: redis, url: 'redis://127.0.0.1:1/0'}\n"
        "http: {listen: '127.0.0.1:0'}\n" + ONE_TOOL
    )
    assert main(["serve", "--config", str(config)]) == 2
    assert "sidecar: http.listen: 127.0.0.1:0 would give each worker a port of its own" in capsys.readouterr().err


async def test_the_http_port_is_off_unless_configured(start_sidecar: Start) -> None:
    sc = await start_sidecar()
    assert sc.app.http is None


async def test_an_http_address_in_use_fails_the_start_naming_it(start_sidecar: Start) -> None:
    sc = await start_sidecar(http=HTTP)
    assert sc.app.http is not None
    taken = f"127.0.0.1:{sc.app.http.port}"
    with pytest.raises(OSError, match=rf"cannot listen on {taken} \(http.listen\)"):
        await start_sidecar(http={"listen": taken})


async def test_stopping_lets_a_call_in_flight_finish_then_closes_the_port(
    start_sidecar: Start, backend: ThreadedServer[FakeToolBackend]
) -> None:
    sc = await start_sidecar(http=HTTP, tools=silent_tools(backend.url))  # each try ends at its read timeout
    address = url(sc)
    async with mcp_client(address) as mcp:
        slow = asyncio.ensure_future(mcp.call_tool("fail_fetch", {"mode": "hang"}))
        admission = sc.app.admission
        assert admission is not None
        await until(lambda: admission.in_flight > 0, "the call is in flight")
        await sc.app.stop(grace=ANSWER_MARGIN_S)  # far past its tries' timeouts: it finishes, not cut
        result = await slow
    assert result.is_error  # the service never answered: every try timed out
    assert text(result).startswith("The flaky service failed at")
    assert "did not answer" in text(result)
    async with httpx.AsyncClient() as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(address.replace("/mcp", "/healthz"))


async def test_sidecar_serve_with_an_mcp_server_behind_and_in_front_then_sigterm(tmp_path: Path) -> None:
    """The real process: a stdio MCP server behind it, the official client in front, SIGTERM, exit 0."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = tmp_path / "sidecar.yaml"
    config.write_text(
        json.dumps(
            {
                "server": {"listen": "127.0.0.1:0"},
                "http": {"listen": f"127.0.0.1:{port}"},
                "mcp_servers": {"local": {"command": STDIO_COMMAND, "connect_timeout_s": 60}},
                "tools": {"lsearch": {"kind": "mcp", "server": "local", "tool": "search"}},
            }
        )
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sidecar", "serve", "--config", str(config),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        banner = (await asyncio.wait_for(proc.stdout.readline(), 300)).decode()
        assert "listening on 127.0.0.1:" in banner
        async with mcp_client(f"http://127.0.0.1:{port}/mcp") as mcp:
            result = await mcp.call_tool("lsearch", {"query": "retries"})
        assert text(result) == "results for retries: doc-1, doc-2"
        proc.send_signal(signal.SIGTERM)
        _out, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0
    lines = err.decode().splitlines()
    assert lines[-2:] == ["sidecar: SIGTERM received; finishing in-flight calls", "sidecar: stopped"]
    assert not [line for line in lines if "Traceback" in line or "uvicorn" in line.lower()]


@pytest.mark.timeout(3 * WAIT_S)  # as test_workers: a slow start is waited for, a hang shows the stderr
def test_two_workers_share_one_http_port(tmp_path: Path, redis_server: RedisServer) -> None:  # noqa: F811
    """``serve --workers 2``: each worker binds http.listen with SO_REUSEPORT; both come up and serve it."""
    port = free_port()
    path = tmp_path / "workers.yaml"
    path.write_text(
        json.dumps(
            {
                "server": {"listen": f"127.0.0.1:{free_port()}"},
                "state": {"backend": "redis", "url": redis_server.url, "prefix": "mcp-workers"},
                "http": {"listen": f"127.0.0.1:{port}"},
                **yaml.safe_load(ONE_TOOL),
            }
        )
    )
    supervisor = Supervisor(path)
    try:
        assert sorted(i for i, _ in supervisor.banners(2)) == [0, 1]  # the second bind did not fail
        for _ in range(4):  # new connections land on either worker
            with httpx.Client() as http:
                assert http.get(f"http://127.0.0.1:{port}/healthz").json() == {"status": "SERVING"}
    finally:
        supervisor.stop()


# ---------------------------------------------------------------- the documented client

DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"
DOC_ADDRESS = "127.0.0.1:8080"
"""Where the snippet's sidecar listens: the test's own port takes its place, and nothing else changes."""


def doc_snippet() -> str:
    """The Python block of docs/mcp.md that follows "Any MCP client connects to", as written."""
    after = DOC.read_text(encoding="utf-8").split("Any MCP client connects to", 1)[1]
    return after.split("```python\n", 1)[1].split("```", 1)[0]


async def test_the_mcp_client_snippet_of_the_docs_runs_against_a_serving_sidecar(
    capsys: pytest.CaptureFixture[str],
) -> None:
    snippet = doc_snippet()
    assert snippet.count(DOC_ADDRESS) == 1
    http = f"127.0.0.1:{_free_port()}"
    proc = Proc("--listen", f"127.0.0.1:{_free_port()}", "--http", http)  # the embedded default: fetch_doc
    try:
        assert proc.popen.stdout is not None
        banner = [proc.popen.stdout.readline() for _ in range(8)]
        assert any(f"http://{http}/mcp" in line for line in banner), banner
        code = compile(snippet.replace(DOC_ADDRESS, http), str(DOC), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        ran = eval(code, {})  # the snippet's top-level awaits make it a coroutine
        await ran
    finally:
        proc.stop()
    verdict, said = capsys.readouterr().out.split(" ", 1)
    assert verdict == "False"  # result.is_error
    assert json.loads(said)["id"] == "doc-1"  # result.content[0].text: the embedded backend's document
