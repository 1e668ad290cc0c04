"""Every attempt visible, end to end: the served sidecar exports to a real Jaeger, read back by its API.

Jaeger v2 (built by ``make jaeger`` into ``$SIDECAR_JAEGER_BIN``) runs all-in-one on loopback with
memory storage, on free ports from a generated config. The sidecar runs as a real process
(``python -m sidecar serve``) with ``OTEL_EXPORTER_OTLP_ENDPOINT`` pointing at Jaeger (once over OTLP
gRPC, once over OTLP HTTP: ``OTEL_EXPORTER_OTLP_PROTOCOL``) and tiny retry
windows (the only real waits in the suite: a fifth of a second in all). "The agent" is this test: its own
tracer provider exports its span to the same Jaeger, and ``traceparent`` travels in gRPC metadata.

The trace read back from ``/api/traces/{traceID}`` must be exactly this tree, children in order::

    agent.turn                                   (service "agent")
    ├── sidecar.v1.Sidecar/CallModel             server, rpc.grpc.status_code 0
    │   └── chat gpt                             client; gen_ai.*; attempts 4, corrections 1
    │       │                                    events: model throttle 0.5, 2.0, 0.71 (a success);
    │       │                                    correction JSON_PARSE; model throttle 0.2 (a success)
    │       ├── POST   attempt 1                 429  error.type 429, signal rate_limit, wait_s
    │       ├── sidecar.backoff                  rate_limit
    │       ├── POST   attempt 2, resend 1       529  error.type 529, signal overload, wait_s
    │       ├── sidecar.backoff                  overload
    │       ├── POST   attempt 3, resend 2       200  correction.reason JSON_PARSE
    │       └── POST   attempt 4, resend 3       200
    ├── sidecar.v1.Sidecar/ExecuteTool           server, status 0 (a tool's failure is a result)
    │   └── execute_tool fail_fetch              error.type EXTERNAL_SERVICE
    │       │                                    events: service throttle 1.0; circuit opened
    │       ├── GET    attempt 1                 500  signal transient, wait_s
    │       ├── sidecar.backoff                  transient
    │       ├── sidecar.throttle_wait            the service's throttle (1.0) paces the resend
    │       └── GET    attempt 2, resend 1       500
    └── sidecar.v1.Sidecar/ExecuteTool
        └── execute_tool fail_fetch              error.type CIRCUIT_OPEN, no attempt; event: circuit refused

The model has a configured rate far above what the test sends, so its throttle (0.5, then 2.0,
then down again with each success) shows as events but never makes a call wait; the tool service
is paced at one call per 0.1 s, so its throttle makes the resend wait about 0.17 s, in a
``sidecar.throttle_wait`` span. The in-memory tests pin
the model's pacing waits on a fake clock.

Nothing is orphaned: every span but the agent's has its parent in the trace. The provider received
each POST's own span id as the parent in ``traceparent``, and the sidecar's JSON log lines name the
trace and the span they were written in.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from sidecar_contract.v1 import sidecar_pb2 as pb
from sidecar_contract.v1 import sidecar_pb2_grpc as pb_grpc

from sidecar.config import parse_config
from sidecar.fakes import FakeProvider, FakeToolBackend, ThreadedServer

DEFAULT_BINARY = Path.home() / ".cache" / "sidecar" / "jaeger-v1.76.0"
STARTUP_S = 60.0
ARRIVAL_S = 30.0
EXPECTED_SPANS = 17
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"]}  # fmt: skip
TINY = [0.01, 0.02]
KEY = "sk-test-SECRETKEY1234567890"


def _binary() -> Path:
    path = Path(os.environ.get("SIDECAR_JAEGER_BIN") or DEFAULT_BINARY)
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(
            f"the Jaeger binary is missing at {path}: run `make jaeger` to build it "
            "(Jaeger v2 from source, cached in ~/.cache/sidecar; needs go >= 1.24.6), "
            "or point SIDECAR_JAEGER_BIN at one",
            pytrace=False,
        )
    return path


def _free_ports(count: int) -> list[int]:
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def _get(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return json.loads(answer.read().decode())


# ---------------------------------------------------------------- Jaeger


@dataclass
class Jaeger:
    otlp_grpc: int
    otlp_http: int
    query: int
    health: int
    proc: subprocess.Popen[bytes] | None = None
    log: Path | None = None

    def otlp_endpoint(self, protocol: str) -> str:
        return f"http://127.0.0.1:{self.otlp_http if protocol.startswith('http') else self.otlp_grpc}"

    def api(self, path: str) -> Any:
        return _get(f"http://127.0.0.1:{self.query}/api/{path}")

    def log_tail(self) -> str:
        return self.log.read_text()[-3000:] if self.log and self.log.exists() else ""


def _jaeger_config(j: Jaeger, query_grpc: int) -> dict[str, Any]:
    """All-in-one with memory storage, OTLP only, every port chosen (nothing on the defaults)."""
    return {
        "service": {
            "extensions": ["jaeger_storage", "jaeger_query", "healthcheckv2"],
            "pipelines": {
                "traces": {"receivers": ["otlp"], "processors": ["batch"], "exporters": ["jaeger_storage_exporter"]}
            },
            "telemetry": {"metrics": {"level": "none"}, "logs": {"level": "warn"}},
        },
        "extensions": {
            "healthcheckv2": {"use_v2": True, "http": {"endpoint": f"127.0.0.1:{j.health}"}},
            "jaeger_query": {
                "enable_tracing": False,
                "storage": {"traces": "memstore"},
                "http": {"endpoint": f"127.0.0.1:{j.query}"},
                "grpc": {"endpoint": f"127.0.0.1:{query_grpc}"},
            },
            "jaeger_storage": {"backends": {"memstore": {"memory": {"max_traces": 10000}}}},
        },
        "receivers": {
            "otlp": {
                "protocols": {
                    "grpc": {"endpoint": f"127.0.0.1:{j.otlp_grpc}"},
                    "http": {"endpoint": f"127.0.0.1:{j.otlp_http}"},
                }
            }
        },
        "processors": {"batch": {"timeout": "100ms"}},
        "exporters": {"jaeger_storage_exporter": {"trace_storage": "memstore"}},
    }


@pytest.fixture(scope="module")
def jaeger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jaeger]:
    binary = _binary()
    work = tmp_path_factory.mktemp("jaeger")
    otlp_grpc, otlp_http, query, query_grpc, health = _free_ports(5)
    j = Jaeger(otlp_grpc, otlp_http, query, health, log=work / "jaeger.log")
    config = work / "jaeger.yaml"
    config.write_text(yaml.safe_dump(_jaeger_config(j, query_grpc)))
    assert j.log is not None
    with j.log.open("wb") as log:
        j.proc = subprocess.Popen([str(binary), "--config", str(config)], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            if j.proc.poll() is not None:
                pytest.fail(f"Jaeger exited with {j.proc.returncode} at start:\n{j.log_tail()}", pytrace=False)
            try:
                status = _get(f"http://127.0.0.1:{health}/status", timeout=1)
                if status.get("healthy") or status.get("status") == "StatusOK":
                    j.api("services")
                    break
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"Jaeger did not become healthy in {STARTUP_S:.0f} s:\n{j.log_tail()}", pytrace=False)
            time.sleep(0.1)
        yield j
    finally:
        j.proc.terminate()
        try:
            j.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            j.proc.kill()
            j.proc.wait()


# ---------------------------------------------------------------- the sidecar, served


@dataclass
class Served:
    proc: subprocess.Popen[str]
    address: str
    stderr: Path
    banner: list[str] = field(default_factory=list)

    def log_lines(self) -> list[dict[str, Any]]:
        out = []
        for line in self.stderr.read_text().splitlines():
            if line.startswith("{"):
                out.append(json.loads(line))
        return out


def _sidecar_config(provider: str, tools: str, port: int) -> dict[str, Any]:
    fetch_params = {"type": "object", "properties": {"mode": {"type": "string"}}, "required": ["mode"]}
    return {
        "server": {"listen": f"127.0.0.1:{port}", "grace_period_s": 2},
        "policy": {
            "upstream_retries": 3,
            "tool_retries": 1,
            "windows": {"rate_limit": TINY, "overload": TINY, "transient": TINY},
            "tool_window": TINY,
        },
        "providers": {
            "oai": {"wire_format": "openai", "base_url": f"{provider}/v1", "api_key": "${SIDECAR_TEST_OPENAI_KEY}"}
        },
        "models": {
            "gpt": {
                "provider": "oai",
                "upstream_model": "fake-gpt",
                "context_window": 8000,
                "max_output_tokens": 2048,
                "default_output_tokens": 256,
                "requests_per_minute": 60000,
            }
        },
        "services": {"flaky": {"rate": 1, "per_s": 0.1, "circuit": {"failures_to_open": 1, "max_throttle": 1.0}}},
        "tools": {
            "fail_fetch": {
                "description": "A fetch that fails as it is told",
                "kind": "fetch",
                "service": "flaky",
                "url": f"{tools}/fail/{{mode}}",
                "parameters": fetch_params,
                "timeout_s": 5,
            }
        },
        "telemetry": {"log_format": "json", "log_level": "INFO"},
    }


@pytest.fixture(params=["grpc", "http/protobuf"])
def protocol(request: pytest.FixtureRequest) -> str:
    """The OTLP protocol the sidecar exports with (OTEL_EXPORTER_OTLP_PROTOCOL)."""
    return str(request.param)


@pytest.fixture
def served(
    jaeger: Jaeger,
    protocol: str,
    provider: ThreadedServer[FakeProvider],
    backend: ThreadedServer[FakeToolBackend],
    tmp_path: Path,
) -> Iterator[Served]:
    (port,) = _free_ports(1)
    config = tmp_path / "sidecar.yaml"
    config.write_text(yaml.safe_dump(_sidecar_config(provider.url, backend.url, port)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        OTEL_EXPORTER_OTLP_ENDPOINT=jaeger.otlp_endpoint(protocol),
        OTEL_EXPORTER_OTLP_PROTOCOL=protocol,
        OTEL_SERVICE_NAME="sidecar",
        OTEL_METRICS_EXPORTER="none",  # Jaeger takes traces only
        OTEL_BSP_SCHEDULE_DELAY="100",
        SIDECAR_TEST_OPENAI_KEY=KEY,
    )
    stderr = tmp_path / "sidecar.stderr"
    with stderr.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sidecar", "serve", "--config", str(config)],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env,
        )
    assert proc.stdout is not None
    banner = [proc.stdout.readline()]
    if "listening on" not in banner[0]:
        proc.kill()
        pytest.fail(f"the sidecar did not start:\n{stderr.read_text()}", pytrace=False)
    while not banner[-1].startswith("Stop with"):
        banner.append(proc.stdout.readline())
    s = Served(proc, f"127.0.0.1:{port}", stderr, banner)
    try:
        yield s
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()  # here, not when a later test's collection finalizes it


class _Told(SpanExporter):
    """The agent's exporter, keeping what each export answered (a lost agent span is then named)."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.results: list[SpanExportResult] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.inner.export(spans)
        self.results.append(result)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()


# ---------------------------------------------------------------- reading Jaeger's JSON


class JTrace:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.spans: list[dict[str, Any]] = data["spans"]
        self.by_id = {s["spanID"]: s for s in self.spans}
        self.services = {pid: p["serviceName"] for pid, p in data["processes"].items()}

    def parent_id(self, span: dict[str, Any]) -> str | None:
        refs = [r for r in span.get("references") or [] if r["refType"] == "CHILD_OF"]
        return refs[0]["spanID"] if refs else None

    def children(self, span: dict[str, Any]) -> list[dict[str, Any]]:
        kids = [s for s in self.spans if self.parent_id(s) == span["spanID"]]
        return sorted(kids, key=lambda s: s["startTime"])

    def names(self, span: dict[str, Any]) -> list[str]:
        return [s["operationName"] for s in self.children(span)]

    def service(self, span: dict[str, Any]) -> str:
        return self.services[span["processID"]]

    def draw(self) -> str:
        lines: list[str] = []

        def walk(span: dict[str, Any], depth: int) -> None:
            lines.append("  " * depth + f"{span['operationName']} [{self.service(span)}] {tags(span)}")
            for child in self.children(span):
                walk(child, depth + 1)

        for root in [s for s in self.spans if self.parent_id(s) not in self.by_id]:
            walk(root, 0)
        return "\n".join(lines)


def tags(span: dict[str, Any]) -> dict[str, Any]:
    return {t["key"]: t["value"] for t in span.get("tags") or []}


def logs(span: dict[str, Any]) -> list[dict[str, Any]]:
    """The span's events, in time order: {"event": name, attribute: value, ...}."""
    ordered = sorted(span.get("logs") or [], key=lambda entry: entry["timestamp"])
    return [{f["key"]: f["value"] for f in entry["fields"]} for entry in ordered]


def _wait_for_trace(jaeger: Jaeger, served: Served, trace_id: str) -> JTrace:
    deadline = time.monotonic() + ARRIVAL_S
    seen, last = 0, None
    while time.monotonic() < deadline:
        try:
            data = jaeger.api(f"traces/{trace_id}")["data"]
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                raise
            data = []
        if data:
            seen, last = len(data[0]["spans"]), data[0]
            if seen >= EXPECTED_SPANS:
                time.sleep(0.5)  # anything late would show now
                return JTrace(jaeger.api(f"traces/{trace_id}")["data"][0])
        time.sleep(0.2)
    drawn = JTrace(last).draw() if last is not None else "nothing"
    warnings = "\n".join(line for line in served.stderr.read_text().splitlines() if "WARNING" in line)
    pytest.fail(
        f"Jaeger holds {seen} of the {EXPECTED_SPANS} spans of trace {trace_id} after {ARRIVAL_S:.0f} s:\n{drawn}"
        f"\n--- the sidecar's warnings:\n{warnings}\n--- Jaeger's log:\n{jaeger.log_tail()}"
    )


# ---------------------------------------------------------------- the tests


def test_the_jaeger_binary_is_built() -> None:
    """Never skipped: without Jaeger this fails and says how to build it."""
    assert _binary().is_file()


def test_every_attempt_is_visible_in_jaeger(
    jaeger: Jaeger, served: Served, provider: ThreadedServer[FakeProvider], protocol: str
) -> None:
    expected = f"traces over OTLP {protocol} to {jaeger.otlp_endpoint(protocol)}"
    assert any(expected in line for line in served.banner), served.banner
    agent_provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    agent_exporter = _Told(OTLPSpanExporter(endpoint=f"127.0.0.1:{jaeger.otlp_grpc}", insecure=True))
    agent_provider.add_span_processor(SimpleSpanProcessor(agent_exporter))
    tracer = agent_provider.get_tracer("agent")
    propagator = TraceContextTextMapPropagator()
    provider.server.script("fake-gpt", [{"preset": "rate_limit"}, {"preset": "overloaded"}, {"preset": "bad_json"}])
    try:
        with grpc.insecure_channel(served.address) as channel:
            stub = pb_grpc.SidecarStub(channel)
            with tracer.start_as_current_span("agent.turn") as turn:
                carrier: dict[str, str] = {}
                propagator.inject(carrier)
                metadata = list(carrier.items())
                reply = stub.CallModel(
                    pb.CallModelRequest(
                        model="gpt",
                        messages=[pb.Message(role=pb.ROLE_USER, text="Who is it? Answer as JSON.")],
                        response_schema_json=json.dumps(SCHEMA),
                    ),
                    metadata=metadata,
                    timeout=60,
                )
                tool_call = pb.ExecuteToolRequest(tool="fail_fetch", arguments_json='{"mode": "500"}', call_id="c1")
                failed = stub.ExecuteTool(tool_call, metadata=metadata, timeout=60)
                tool_call.call_id = "c2"
                refused = stub.ExecuteTool(tool_call, metadata=metadata, timeout=60)
            trace_id = format(turn.get_span_context().trace_id, "032x")
    finally:
        agent_provider.shutdown()
    assert agent_exporter.results == [SpanExportResult.SUCCESS], "the agent's own span was not exported"
    assert (reply.attempts, reply.corrections) == (4, 1), reply
    assert (pb.FailureKind.Name(failed.failure.kind), failed.attempts) == ("FAILURE_KIND_EXTERNAL_SERVICE", 2), failed
    assert (pb.FailureKind.Name(refused.failure.kind), refused.attempts) == ("FAILURE_KIND_CIRCUIT_OPEN", 0), refused

    t = _wait_for_trace(jaeger, served, trace_id)
    drawn = t.draw()
    assert len(t.spans) == EXPECTED_SPANS, drawn

    # ---- one root, the agent's; nothing orphaned
    roots = [s for s in t.spans if t.parent_id(s) is None]
    assert [r["operationName"] for r in roots] == ["agent.turn"], drawn
    (root,) = roots
    assert t.service(root) == "agent"
    for span in t.spans:
        assert span["traceID"] == trace_id
        if span is not root:
            assert t.parent_id(span) in t.by_id, f"orphan {span['operationName']}\n{drawn}"
            assert t.service(span) == "sidecar"

    # ---- the three RPCs, each one SERVER span, in the order they were made
    assert t.names(root) == [
        "sidecar.v1.Sidecar/CallModel",
        "sidecar.v1.Sidecar/ExecuteTool",
        "sidecar.v1.Sidecar/ExecuteTool",
    ], drawn
    call_server, tool_server, refused_server = t.children(root)
    for server, method in ((call_server, "CallModel"), (tool_server, "ExecuteTool"), (refused_server, "ExecuteTool")):
        st = tags(server)
        assert st["span.kind"] == "server"
        assert (st["rpc.system"], st["rpc.service"], st["rpc.method"]) == ("grpc", "sidecar.v1.Sidecar", method)
        assert st["rpc.grpc.status_code"] == 0
        assert "error" not in st

    # ---- CallModel: chat gpt, and every attempt under it
    assert t.names(call_server) == ["chat gpt"], drawn
    (chat,) = t.children(call_server)
    ct = tags(chat)
    assert ct["span.kind"] == "client"
    assert ct["gen_ai.operation.name"] == "chat"
    assert ct["gen_ai.provider.name"] == "openai"
    assert ct["gen_ai.request.model"] == "gpt"
    assert ct["gen_ai.response.model"] == "fake-gpt"
    assert ct["gen_ai.request.max_tokens"] == 256
    assert ct["gen_ai.usage.input_tokens"] > 0
    assert ct["gen_ai.usage.output_tokens"] > 0
    assert ct["server.address"] == "127.0.0.1"
    assert ct["server.port"] == provider.port
    assert (ct["sidecar.attempts"], ct["sidecar.corrections"]) == (4, 1)
    assert "error.type" not in ct
    assert [e["event"] for e in logs(chat)] == [
        "sidecar.model.throttle_changed",  # the 429: 0.5
        "sidecar.model.throttle_changed",  # the 529: 2.0
        "sidecar.model.throttle_changed",  # the third attempt's success, alone in flight
        "sidecar.correction",
        "sidecar.model.throttle_changed",  # the fourth's
    ]
    relieved = round(1 / (1 / 3 + 0.25) - 1, 6)
    assert [e.get("sidecar.throttle") for e in logs(chat) if "sidecar.throttle" in e] == [0.5, 2.0, relieved, 0.2]
    assert logs(chat)[3]["sidecar.correction.reason"] == "JSON_PARSE"

    assert t.names(chat) == [
        "POST",
        "sidecar.backoff",
        "POST",
        "sidecar.backoff",
        "POST",
        "POST",
    ], drawn
    p1, b1, p2, b2, p3, p4 = t.children(chat)
    attempts = [tags(p) for p in (p1, p2, p3, p4)]
    assert [a["span.kind"] for a in attempts] == ["client"] * 4
    assert [a["sidecar.attempt"] for a in attempts] == [1, 2, 3, 4]
    assert [a.get("http.request.resend_count") for a in attempts] == [None, 1, 2, 3]
    assert [a["http.response.status_code"] for a in attempts] == [429, 529, 200, 200]
    assert [a.get("error.type") for a in attempts] == ["429", "529", None, None]
    assert [a.get("otel.status_code") for a in attempts] == ["ERROR", "ERROR", None, None]
    assert [a.get("sidecar.retry.signal") for a in attempts] == ["rate_limit", "overload", None, None]
    assert [a.get("sidecar.correction.reason") for a in attempts] == [None, None, "JSON_PARSE", None]
    assert [a["sidecar.output_budget"] for a in attempts] == [256] * 4
    assert all(a["url.full"] == f"{provider.url}/v1/chat/completions" for a in attempts)
    for attempt, backoff, sig, window in ((p1, b1, "rate_limit", 1), (p2, b2, "overload", 2)):
        wait = tags(attempt)["sidecar.retry.wait_s"]
        assert TINY[0] * window <= wait < TINY[1] * window
        assert tags(backoff)["sidecar.wait_s"] == wait
        assert tags(backoff)["sidecar.retry.signal"] == sig
        assert backoff["duration"] >= wait * 1e6 * 0.9  # a real wait, as long as it said (µs)
    ordered = t.children(chat)
    for before, after in itertools.pairwise(ordered):
        assert before["startTime"] + before["duration"] <= after["startTime"] + 1, drawn  # no overlap (µs)

    # each attempt's traceparent reached the provider with the attempt as the parent
    sent = [r["headers"].get("traceparent", "") for r in provider.server.requests(model="fake-gpt")]
    assert [h.split("-")[1:3] for h in sent] == [[trace_id, p["spanID"]] for p in (p1, p2, p3, p4)]

    # ---- ExecuteTool that failed: two attempts, a backoff, the circuit opening
    assert t.names(tool_server) == ["execute_tool fail_fetch"], drawn
    (tool,) = t.children(tool_server)
    tt = tags(tool)
    assert tt["span.kind"] == "internal"
    assert (tt["gen_ai.operation.name"], tt["gen_ai.tool.name"]) == ("execute_tool", "fail_fetch")
    assert tt["gen_ai.tool.call.id"] == "c1"
    assert tt["gen_ai.tool.description"] == "A fetch that fails as it is told"
    assert tt["error.type"] == "EXTERNAL_SERVICE"
    assert tt["otel.status_code"] == "ERROR"
    assert tt["sidecar.attempts"] == 2
    assert [e["event"] for e in logs(tool)] == ["sidecar.service.throttle_changed", "sidecar.circuit.opened"]
    assert logs(tool)[1]["sidecar.service"] == "flaky"
    assert t.names(tool) == ["GET", "sidecar.backoff", "sidecar.throttle_wait", "GET"], drawn
    g1, tb, tw, g2 = t.children(tool)
    assert tags(tw)["sidecar.service"] == "flaky"
    assert tags(tw)["sidecar.throttle"] == 1.0
    assert 0 < tags(tw)["sidecar.wait_s"] <= 0.2
    assert tw["duration"] >= tags(tw)["sidecar.wait_s"] * 1e6 * 0.9
    assert [tags(g).get("http.request.resend_count") for g in (g1, g2)] == [None, 1]
    assert [tags(g)["http.response.status_code"] for g in (g1, g2)] == [500, 500]
    assert [tags(g)["error.type"] for g in (g1, g2)] == ["500", "500"]
    assert tags(g1)["sidecar.retry.wait_s"] == tags(tb)["sidecar.wait_s"]
    assert tags(tb)["sidecar.retry.signal"] == "transient"

    # ---- ExecuteTool refused by the open circuit: no attempt at all
    assert t.names(refused_server) == ["execute_tool fail_fetch"], drawn
    (refusal,) = t.children(refused_server)
    assert tags(refusal)["error.type"] == "CIRCUIT_OPEN"
    assert tags(refusal)["gen_ai.tool.call.id"] == "c2"
    assert tags(refusal)["sidecar.attempts"] == 0
    assert [e["event"] for e in logs(refusal)] == ["sidecar.circuit.refused"]
    assert t.children(refusal) == []

    # ---- the sidecar's JSON log lines lead to the same trace and spans; no secret in them
    lines = served.log_lines()
    assert "SECRETKEY" not in served.stderr.read_text()
    by_kind = {line.get("failure_kind"): line for line in lines if line.get("trace_id") == trace_id}
    assert by_kind["JSON_PARSE"]["level"] == "WARNING"
    assert by_kind["JSON_PARSE"]["span_id"] == chat["spanID"]
    assert by_kind["EXTERNAL_SERVICE"]["level"] == "WARNING"  # an outage the retries handle: nobody's to act on
    assert by_kind["EXTERNAL_SERVICE"]["span_id"] == tool["spanID"]
    assert by_kind["CIRCUIT_OPEN"]["span_id"] == refusal["spanID"]
    assert "stack" not in by_kind["CIRCUIT_OPEN"]  # only a bug's line carries one


# ---------------------------------------------------------------- docker-compose.yml (no Docker here: read it)

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"


@pytest.mark.parametrize("replica", ["sidecar-a", "sidecar-b"])
def test_the_compose_file_runs_the_sidecar_beside_jaeger_and_the_fakes(
    replica: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = COMPOSE.read_text()
    assert not re.search(r"\$(?!\$)", text.replace("$$", "")), "compose interpolates a lone $: write $$"
    compose = yaml.safe_load(text)
    services = compose["services"]
    assert services["jaeger"]["image"] == "jaegertracing/jaeger:2.13.0"
    for name in (replica, "fake-provider", "tool-backend"):
        assert services[name]["build"] == {"context": ".", "dockerfile": "Dockerfile"}
    assert services["fake-provider"]["command"] == ["fake-provider", "--host", "0.0.0.0", "--port", "8787"]
    assert services["tool-backend"]["command"] == ["tool-backend", "--host", "0.0.0.0", "--port", "8788"]
    sidecar = services[replica]
    (mount,) = sidecar["configs"]
    assert sidecar["command"] == ["serve", "--config", mount["target"]]
    env = sidecar["environment"]
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://jaeger:4317"
    assert env["OTEL_METRICS_EXPORTER"] != "otlp"  # Jaeger refuses OTLP metrics
    assert set(sidecar["depends_on"]) == {"jaeger", "fake-provider", "tool-backend", "redis"}
    monkeypatch.setenv("REDIS_URL", env["REDIS_URL"])  # state.url reads it
    config = parse_config(compose["configs"][mount["source"]]["content"].replace("$$", "$"), "compose")
    assert config.server.listen == "0.0.0.0:50051"
    assert {p.base_url.split("/")[2] for p in config.providers.values()} == {"fake-provider:8787"}
    assert {t.url.split("/")[2] for t in config.tools.values()} == {"tool-backend:8788"}
    assert config.tools["fetch_doc"].parameters["properties"]["doc_id"]["pattern"] == "^doc-[0-9]+$"
