"""The Prometheus scrape of a running sidecar process: the sidecar's own metrics beside the GenAI
conventions', label sets bounded under 1,000 distinct jobs and workflows, and the Grafana dashboard
(deploy/grafana/) naming only metrics the scrape carries."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
import yaml
from sidecar_client import pb, user
from sidecar_contract.v1 import sidecar_pb2_grpc as pb_grpc

from sidecar.fakes import FakeProvider, FakeToolBackend, ThreadedServer
from tests.conftest import base_config
from tests.redis_server import free_port

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "sidecar.json"
JOBS = 1000
FUNCTIONS = {
    "rate", "irate", "increase", "sum", "max", "min", "avg", "count", "by", "without", "histogram_quantile",
    "le", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "offset", "topk", "bottomk",
    "clamp_min", "clamp_max", "abs", "delta", "deriv", "time", "vector", "scalar", "label_replace",
}  # fmt: skip


class Sidecar:
    def __init__(self, tmp: Path, provider: str, backend: str) -> None:
        self.port, self.prom = free_port(), free_port()
        cfg = base_config(
            provider,
            backend,
            server={"listen": f"127.0.0.1:{self.port}", "grace_period_s": 2},
            policy={"upstream_retries": 3, "tool_retries": 0},
            telemetry={"prometheus_port": self.prom},
        )
        for p in cfg["providers"].values():
            p["api_key"] = "${PROM_TEST_KEY}"  # a file holds no secret
        for m in cfg["models"].values():  # priced, so the spend counter counts
            m.update(input_price_per_mtok=3.0, output_price_per_mtok=15.0)
        path = tmp / "sidecar.yaml"
        path.write_text(yaml.safe_dump(cfg))
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}, "OTEL_TRACES_EXPORTER": "none"}
        env["PROM_TEST_KEY"] = "sk-test-PROMKEY1234567890"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sidecar", "serve", "--config", str(path)],
            stdout=subprocess.PIPE,
            stderr=(tmp / "stderr.log").open("w"),  # read only on failure: a pipe nobody reads would fill
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        self.banner = self.proc.stdout.readline()

    def scrape(self) -> str:
        return httpx.get(f"http://127.0.0.1:{self.prom}/metrics", timeout=5).text

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A sidecar process that served calls (successes, a retry, failures, tools) of 1,000 jobs: its scrapes
    before and after."""
    with ThreadedServer(FakeProvider()) as provider, ThreadedServer(FakeToolBackend()) as backend:
        s = Sidecar(tmp_path_factory.mktemp("prom"), provider.url, backend.url)
        try:
            assert "listening on" in s.banner
            before = asyncio.run(_warm(s, provider.server))
            asyncio.run(_jobs(s))
            yield before, s.scrape()
        finally:
            s.stop()


async def _warm(s: Sidecar, provider: FakeProvider) -> str:
    """One of each kind of call, so that every series exists; the scrape then."""
    provider.script("fake-gpt", [{"status": 429, "headers": {"retry-after": "0.05"}}])
    usage = {"cache_read_input_tokens": 40, "cache_write_input_tokens": 20, "reasoning_tokens": 10}
    provider.script("fake-claude", [{"preset": "reply", "text": "ok", "usage": usage}])
    async with grpc.aio.insecure_channel(f"127.0.0.1:{s.port}") as channel:
        stub = pb_grpc.SidecarStub(channel)
        await stub.CallModel(pb.CallModelRequest(model="gpt", messages=[user("hi")]))
        await stub.CallModel(pb.CallModelRequest(model="claude", messages=[user("hi")]))
        with pytest.raises(grpc.aio.AioRpcError):
            await stub.CallModel(pb.CallModelRequest(model="nope", messages=[user("hi")]))
        await stub.ExecuteTool(pb.ExecuteToolRequest(tool="fetch", arguments_json='{"id": "a"}'))
        await stub.ExecuteTool(pb.ExecuteToolRequest(tool="refused", arguments_json='{"id": "a"}'))
    return s.scrape()


async def _jobs(s: Sidecar) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{s.port}") as channel:
        stub = pb_grpc.SidecarStub(channel)
        for start in range(0, JOBS, 50):
            calls = []
            for i in range(start, start + 50):
                job = pb.Job(job_id=f"job-{i}", workflow_id=f"wf-{i}")
                calls.append(stub.CallModel(pb.CallModelRequest(model="gpt", messages=[user(f"hi {i}")], job=job)))
                args = json.dumps({"id": f"doc-{i}"})
                calls.append(stub.ExecuteTool(pb.ExecuteToolRequest(tool="fetch", arguments_json=args, job=job)))
                report = pb.ClassifyFailureRequest(service=f"their-svc-{i}", endpoint="https://their.example/x")
                report.attempts = 1
                report.response.status_code = 503
                calls.append(stub.ClassifyFailure(report))  # a service named by a caller, in no config
            await asyncio.gather(*calls)


def _series(text: str) -> set[str]:
    return {line.rsplit(" ", 1)[0] for line in text.splitlines() if line and not line.startswith("#")}


def _names(text: str) -> set[str]:
    return {re.split(r"[{ ]", line, maxsplit=1)[0] for line in text.splitlines() if line and not line.startswith("#")}


def test_the_scrape_carries_the_sidecars_own_metrics(served: tuple[str, str]) -> None:
    names = _names(served[1])
    for name in (
        "gen_ai_client_operation_duration_seconds_bucket",
        "gen_ai_client_token_usage_bucket",
        "sidecar_overhead_duration_seconds_bucket",
        "sidecar_retries_total",
        "sidecar_attempts_total",
        "sidecar_wait_duration_seconds_sum",
        "sidecar_failures_total",
        "sidecar_model_throttle",
        "sidecar_service_circuit_state",
        "sidecar_in_flight",
        "sidecar_admission_rejected_total",
        "sidecar_tokens_total",
    ):
        assert name in names, name
    assert 'sidecar_door="grpc"' in served[1]
    attempts = [line for line in served[1].splitlines() if line.startswith("sidecar_attempts_total{")]
    assert any('sidecar_attempt_outcome="ok"' in a and 'sidecar_retry_signal="none"' in a for a in attempts)
    assert any('sidecar_retry_signal="rate_limit"' in a for a in attempts)  # the scripted 429
    assert any('sidecar_attempt_kind="service"' in a for a in attempts)
    tokens = [line for line in served[1].splitlines() if line.startswith("sidecar_tokens_total{")]
    for kind in ("input", "output", "cache_read", "cache_write", "reasoning"):
        counted = [t for t in tokens if f'sidecar_token_type="{kind}"' in t]
        assert counted, (kind, tokens)
        assert any(float(t.rsplit(" ", 1)[1]) > 0 for t in counted), (kind, counted)
    spend = [line for line in served[1].splitlines() if line.startswith("sidecar_spend_USD_total{")]
    assert any('gen_ai_request_model="claude"' in s and float(s.rsplit(" ", 1)[1]) > 0 for s in spend), spend


def test_the_attempts_counter_is_bounded_under_a_thousand_jobs(served: tuple[str, str]) -> None:
    def attempts(text: str) -> set[str]:
        return {s for s in _series(text) if s.startswith("sidecar_attempts_total")}

    before, after = attempts(served[0]), attempts(served[1])
    assert before
    assert len(after) < 20, sorted(after)
    assert len(after - before) <= 2, sorted(after - before)  # 1,000 jobs later: a new outcome at most, never a job
    assert not any(marker in s for s in after for marker in ("job-", "wf-", "doc-", "hi "))
    allowed = {"sidecar_attempt_outcome", "sidecar_retry_signal", "sidecar_attempt_kind", "sidecar_model"}
    allowed |= {"sidecar_service", "job", "instance", "otel_scope_name", "otel_scope_version", "otel_scope_schema_url"}
    for series in after:
        labels = set(re.findall(r"([a-zA-Z_]+)=", series))
        assert labels <= allowed, series


def test_a_thousand_jobs_and_workflows_add_no_series(served: tuple[str, str]) -> None:
    before, after = _series(served[0]), _series(served[1])
    added = after - before
    assert len(added) < 200, sorted(added)[:20]  # new label combinations of our own values, never one per job
    assert "job-1" not in served[1]
    assert "wf-1" not in served[1]


def test_services_named_only_in_reports_are_one_other_series(served: tuple[str, str]) -> None:
    """1,000 services named by callers in ClassifyFailure reports: their guards exist (the admin view
    lists them), but the service gauges carry them as one ``_OTHER`` series beside the configured ones."""
    assert "their-svc-" not in served[1]
    circuits = {s for s in _series(served[1]) if s.startswith("sidecar_service_circuit_state{")}
    services = {m for s in circuits for m in re.findall(r'sidecar_service="([^"]*)"', s)}
    assert "_OTHER" in services
    assert "docs" in services  # a configured tool's service, under its own name
    assert len(services) < 10, sorted(services)


def _exprs(dashboard: dict[str, object]) -> list[str]:
    out: list[str] = []
    for panel in dashboard["panels"]:  # type: ignore[attr-defined]
        for target in panel.get("targets", []):
            out.append(target["expr"])
    return out


def test_every_dashboard_query_names_a_metric_of_the_scrape(served: tuple[str, str]) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    scraped = _names(served[1])
    exprs = _exprs(dashboard)
    assert len(exprs) >= 10
    for expr in exprs:
        bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]|\"[^\"]*\"", "", expr)  # selectors, ranges, strings out
        bare = re.sub(r"\b(by|without)\s*\([^)]*\)", "", bare)  # grouping labels out
        metrics = {w for w in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", bare) if w not in FUNCTIONS}
        assert metrics, expr
        for name in metrics:
            assert name in scraped, f"{name} (in {expr!r}) is not in the scrape"
