"""Who may feed a circuit through ClassifyFailure, and how much a caller can make the sidecar keep.

Through the real gRPC server: reports about the sidecar's own services feed nothing unless
``services.NAME.accept_reports``; reported services' guards are bounded in count (an LRU that
never forgets an open circuit) and names in length. ServiceGuards' bound on the fake clock.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from sidecar_client import AsyncSidecarClient, job, pb

from sidecar.config import CircuitConfig, Config
from sidecar.core.circuit import CircuitState
from sidecar.core.clock import FakeClock
from sidecar.core.details import Trigger
from sidecar.core.service_guards import MAX_REPORTED, MAX_SERVICE_NAME_CHARS, ServiceGuards
from sidecar.fakes import FakeProvider, FakeToolBackend, ThreadedServer
from sidecar.server.app import running
from sidecar.server.grpc.spans import ServerSpanInterceptor
from sidecar.telemetry import names as n
from sidecar.telemetry.testing import InMemoryTelemetry, install_in_memory
from tests.conftest import Running, Start, base_config


def report(service: str, status: int = 503, **fields: Any) -> pb.ClassifyFailureRequest:
    request = pb.ClassifyFailureRequest(service=service, endpoint="https://svc.example/x", attempts=1, **fields)
    request.response.status_code = status
    request.response.body = '{"error": "down"}'
    return request


def precheck(service: str) -> pb.ClassifyFailureRequest:
    return pb.ClassifyFailureRequest(service=service)


async def send(client: AsyncSidecarClient, requests: list[pb.ClassifyFailureRequest]) -> list[pb.Failure]:
    out: list[pb.Failure] = []
    for at in range(0, len(requests), 100):  # a hundred in flight at a time
        out += await asyncio.gather(*(client.classify_failure(r) for r in requests[at : at + 100]))
    return out


# ---------------------------------------------------------------- the sidecar's own services


@pytest.mark.parametrize("service", ["flaky", "docs"])  # in services:, and only a tool's service
async def test_fake_reports_never_open_an_own_services_circuit(sidecar: Running, service: str) -> None:
    failures = await send(sidecar.client, [report(service)] * 12)
    assert {f.kind for f in failures} == {pb.FAILURE_KIND_EXTERNAL_SERVICE}  # classified and answered
    guard = sidecar.app.guards.get(service)  # type: ignore[union-attr]
    assert guard.state is CircuitState.CLOSED
    assert guard.throttle == 0
    assert (await sidecar.client.classify_failure(precheck(service))) == pb.Failure()
    tool = "fail_fetch" if service == "flaky" else "fetch"
    args = {"mode": "ok"} if service == "flaky" else {"id": "doc-1"}
    sidecar.backend.script("/fail/ok", [{"status": 200, "body": {"ok": True}}])
    called = await sidecar.client.execute_tool(tool, args)
    assert called.HasField("result")  # the service is still called for everyone


async def test_reports_log_at_info_without_a_stack_so_forged_ones_cannot_flood_the_log(
    sidecar: Running, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="sidecar.failures"):
        failures = await send(sidecar.client, [report("elsewhere", 401)] * 50)  # uncorrectable: not a correction
    assert {f.correctable for f in failures} == {False}
    lines = [r for r in caplog.records if r.name == "sidecar.failures"]
    assert len(lines) == 50
    assert {r.levelno for r in lines} == {logging.INFO}
    assert all(r.exc_info is None for r in lines)
    assert all(getattr(r, "classified", False) for r in lines)


async def test_a_report_is_answered_the_same_whether_accepted_or_not(start_sidecar: Start) -> None:
    closed = await start_sidecar()
    accepting = await start_sidecar(services={"flaky": {"accept_reports": True}})
    for status in (503, 429, 404, 200):
        a = await closed.client.classify_failure(report("flaky", status))
        b = await accepting.client.classify_failure(report("flaky", status))
        assert a == b
    assert closed.app.guards.get("flaky").throttle == 0  # type: ignore[union-attr]
    assert accepting.app.guards.get("flaky").throttle > 0  # type: ignore[union-attr]


async def test_with_accept_reports_reports_open_the_circuit_and_a_precheck_takes_the_probe(
    start_sidecar: Start,
) -> None:
    sidecar = await start_sidecar(services={"flaky": {"accept_reports": True}})
    await send(sidecar.client, [report("flaky")] * 12)
    refused = await sidecar.client.execute_tool("fail_fetch", {"mode": "ok"})
    assert refused.failure.kind == pb.FAILURE_KIND_CIRCUIT_OPEN
    assert "HTTP 503 (down)" in refused.failure.message
    sidecar.clock.advance(30)
    granted = await sidecar.client.classify_failure(precheck("flaky"))
    assert granted.circuit.state == pb.CIRCUIT_STATE_HALF_OPEN
    failed = report("flaky", probe=True)
    await sidecar.client.classify_failure(failed)
    assert sidecar.app.guards.get("flaky").cooldown == 60  # type: ignore[union-attr]


async def test_a_precheck_of_an_own_service_sees_the_circuit_but_never_takes_the_probe(sidecar: Running) -> None:
    for _ in range(4):  # 3 attempts each: the sidecar's own calls open the circuit
        await sidecar.client.execute_tool("fail_fetch", {"mode": "503"})
    seen = await sidecar.client.classify_failure(precheck("flaky"))
    assert seen.kind == pb.FAILURE_KIND_CIRCUIT_OPEN
    assert "HTTP 503 (service unavailable)" in seen.message
    sidecar.clock.advance(30)
    for _ in range(3):
        assert (await sidecar.client.classify_failure(precheck("flaky"))) == pb.Failure()
    guard = sidecar.app.guards.get("flaky")  # type: ignore[union-attr]
    assert guard.state is CircuitState.OPEN  # no probe was taken ...
    await send(sidecar.client, [report("flaky", probe=True)] * 3)  # ... and a "probe" report settles nothing
    assert guard.cooldown == 30
    sidecar.backend.script("/fail/ok", [{"status": 200, "body": {"ok": True}}])
    probe = await sidecar.client.execute_tool("fail_fetch", {"mode": "ok"})  # the sidecar's own call takes it
    assert probe.HasField("result")
    assert guard.state is CircuitState.CLOSED


# ---------------------------------------------------------------- the span says whether a report counted


@pytest_asyncio.fixture
async def traced(
    provider: ThreadedServer[FakeProvider], backend: ThreadedServer[FakeToolBackend], clock: FakeClock
) -> AsyncIterator[tuple[AsyncSidecarClient, InMemoryTelemetry]]:
    otel = install_in_memory()
    otel.clear()
    cfg = Config.model_validate(base_config(provider.url, backend.url))
    ctx = running(cfg, listen="127.0.0.1:0", clock=clock, rng=random.Random(7), interceptors=[ServerSpanInterceptor()])
    app = await ctx.__aenter__()
    client = AsyncSidecarClient(app.address)
    yield client, otel
    await client.close()
    await ctx.__aexit__(None, None, None)


async def test_the_server_span_says_whether_the_report_was_accepted(
    traced: tuple[AsyncSidecarClient, InMemoryTelemetry],
) -> None:
    client, otel = traced
    await client.classify_failure(report("flaky"))
    await client.classify_failure(report("their-api"))
    spans = [s for s in otel.spans() if s.name == "sidecar.v1.Sidecar/ClassifyFailure"]
    assert [(s.attributes or {}).get(n.REPORT_ACCEPTED) for s in spans] == [False, True]


# ---------------------------------------------------------------- bounded: names and guards


async def test_two_thousand_junk_names_stay_within_the_bound_and_an_open_circuit_survives(sidecar: Running) -> None:
    guards = sidecar.app.guards
    assert guards is not None
    await send(sidecar.client, [report("their-api")] * 12)
    assert (await sidecar.client.classify_failure(precheck("their-api"))).kind == pb.FAILURE_KIND_CIRCUIT_OPEN
    answers = await send(sidecar.client, [report(f"junk-{i}") for i in range(2000)])
    assert {a.kind for a in answers} == {pb.FAILURE_KIND_EXTERNAL_SERVICE}
    assert guards.reported == MAX_REPORTED
    assert guards.peek("junk-0") is None  # the least recently used went first
    assert guards.peek("junk-1999") is not None
    assert (await sidecar.client.classify_failure(precheck("their-api"))).kind == pb.FAILURE_KIND_CIRCUIT_OPEN


async def test_successes_and_prechecks_of_new_names_make_no_guard(sidecar: Running) -> None:
    await send(sidecar.client, [report(f"ok-{i}", 200) for i in range(50)] + [precheck(f"pre-{i}") for i in range(50)])
    assert sidecar.app.guards.reported == 0  # type: ignore[union-attr]


async def test_a_service_name_past_the_bound_is_invalid_input_and_kept_nowhere(sidecar: Running) -> None:
    guards = sidecar.app.guards
    assert guards is not None
    names = [chr(ord("a") + i % 26) * (1024 * 1024 - i) for i in range(250)]  # 250 distinct 1 MB names
    for name in names:  # one at a time: each is a 1 MB message (under server.max_message_bytes)
        failure = await sidecar.client.classify_failure(report(name))
        assert failure.kind == pb.FAILURE_KIND_INVALID_INPUT
        assert failure.invalid_input.parameter == "service"
        assert f"at most {MAX_SERVICE_NAME_CHARS} characters" in failure.invalid_input.rule
        assert len(failure.SerializeToString()) < 2000  # the name is not sent back
    longest = "s" * MAX_SERVICE_NAME_CHARS
    assert (await sidecar.client.classify_failure(report(longest))).kind == pb.FAILURE_KIND_EXTERNAL_SERVICE
    assert guards.reported == 1
    assert (await sidecar.client.classify_failure(precheck(longest + "s"))).kind == pb.FAILURE_KIND_INVALID_INPUT


async def test_long_fields_of_a_report_never_make_an_answer_past_the_message_limit(sidecar: Running) -> None:
    megabyte = "e" * (1024 * 1024)
    for field in ("endpoint", "parameter", "resource_type"):
        request = report("their-api")
        setattr(request, field, f"https://x.example/{megabyte}" if field == "endpoint" else megabyte)
        failure = await sidecar.client.classify_failure(request)  # was RESOURCE_EXHAUSTED: "Sent message larger"
        assert failure.kind == pb.FAILURE_KIND_INVALID_INPUT
        assert failure.invalid_input.parameter == field
    long_value = report("their-api", 404, value="v" * (3 * 1024 * 1024))
    found = await sidecar.client.classify_failure(long_value)
    assert found.kind == pb.FAILURE_KIND_RESOURCE_NOT_FOUND
    assert len(found.resource.identifier) <= 1024  # an echoed value is bounded (cut, its length said)
    assert "…" in found.resource.identifier
    long_body = report("their-api", 500)
    long_body.response.body = "b" * (3 * 1024 * 1024)
    assert (await sidecar.client.classify_failure(long_body)).kind == pb.FAILURE_KIND_EXTERNAL_SERVICE


async def test_a_long_retry_after_is_not_kept_whole_by_the_circuit(sidecar: Running) -> None:
    request = report("their-api", 503)
    request.response.headers["retry-after"] = "x" * 100_000
    await send(sidecar.client, [request] * 12)
    guard = sidecar.app.guards.peek("their-api")  # type: ignore[union-attr]
    assert guard is not None
    assert guard.trigger is not None
    assert len(guard.trigger.retry_after_raw or "") <= 100


# ---------------------------------------------------------------- ServiceGuards on the fake clock

T503 = Trigger(503, "down")


def _open(guards: ServiceGuards, name: str) -> None:
    guard = guards.find(name)
    assert guard is not None
    for _ in range(12):
        guard.failure(None, T503, None)
    assert guard.state is CircuitState.OPEN


def test_open_circuits_are_never_forgotten_before_their_cooldown() -> None:
    clock = FakeClock()
    guards = ServiceGuards({}, CircuitConfig(), clock)
    for i in range(MAX_REPORTED):
        _open(guards, f"open-{i}")
    assert guards.find("newcomer") is None  # every place holds a decision: the report feeds nothing
    assert guards.reported == MAX_REPORTED
    clock.advance(29.9)
    assert guards.find("newcomer") is None
    clock.advance(0.1)  # the oldest cooldowns are over: those may go
    assert guards.find("newcomer") is not None
    assert guards.peek("open-0") is None
    assert guards.peek("open-1") is not None
    assert guards.reported == MAX_REPORTED


def test_a_half_open_guard_with_its_probe_out_is_kept_until_the_probe_times_out() -> None:
    clock = FakeClock()
    guards = ServiceGuards({}, CircuitConfig(), clock)
    for i in range(MAX_REPORTED):
        _open(guards, f"s-{i}")
    clock.advance(30)
    for i in range(MAX_REPORTED):
        guard = guards.peek(f"s-{i}")
        assert guard is not None
        assert guard.check().probe  # every guard half-open, its probe out
    assert guards.find("newcomer") is None
    clock.advance(60)  # probe_timeout_s: the probes are lost
    assert guards.find("newcomer") is not None


def test_own_services_are_never_counted_nor_forgotten() -> None:
    clock = FakeClock()
    guards = ServiceGuards({}, CircuitConfig(), clock, tool_services=["docs"])
    own = guards.get("docs")
    for i in range(MAX_REPORTED + 10):
        guards.find(f"r-{i}")
    assert guards.find("docs") is own
    assert guards.is_own("docs")
    assert not guards.is_own("r-0")
    assert guards.reported == MAX_REPORTED


async def test_a_report_past_the_bound_still_gets_its_answer(sidecar: Running) -> None:
    guards = sidecar.app.guards
    assert guards is not None
    for i in range(MAX_REPORTED):
        _open(guards, f"open-{i}")
    answer = await sidecar.client.classify_failure(report("newcomer"))
    assert answer.kind == pb.FAILURE_KIND_EXTERNAL_SERVICE
    assert guards.peek("newcomer") is None
    assert (await sidecar.client.execute_tool("fetch", {"id": "doc-1"}, job=job(upstream_retries=0))).HasField("result")
