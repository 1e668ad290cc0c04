"""ClassifyFailure runs the very mapping ExecuteTool runs: equal answers give equal Failures."""

from __future__ import annotations

import pytest
from sidecar_client import job, pb

from sidecar.core.circuit import CircuitState
from sidecar.fakes import FakeToolBackend, ThreadedServer
from tests.conftest import Running, Start, silent_tools

# (tool, scripted upstream answer or a fault, the transport fault ClassifyFailure is told)
CASES = [
    ("fetch", {"status": 400, "body": {"error": "bad id"}}, None),
    ("fetch", {"status": 404, "body": {"error": "not found"}}, None),
    ("fetch", {"status": 401, "body": {"error": "bad key"}}, None),
    ("fetch", {"status": 403, "body": {"error": "too many requests, slow down"}}, None),
    ("fetch", {"status": 429, "headers": {"retry-after": "Wed, 21 Oct 2026 07:28:00 GMT"}, "body": "busy"}, None),
    ("fetch", {"status": 500, "body": {"message": "boom", "account_id": "acct_123"}}, None),
    ("fetch", {"status": 503, "headers": {"retry-after": "3"}, "body": ""}, None),
    ("fetch", {"status": 418, "body": "teapot"}, None),
    ("search", {"status": 404, "body": {"error": "no such index"}}, None),
    ("search", {"status": 200, "body": {"results": []}}, None),
    ("fetch", {"fault": "reset"}, pb.TRANSPORT_FAULT_RESET),
]


@pytest.mark.parametrize(("tool", "answer", "fault"), CASES)
async def test_execute_tool_and_classify_failure_agree(
    sidecar: Running, tool: str, answer: dict[str, object], fault: int | None
) -> None:
    path = "/docs/doc-7" if tool == "fetch" else "/search"
    sidecar.backend.script(path, [answer])
    args = {"id": "doc-7"} if tool == "fetch" else {"query": "q"}
    executed = await sidecar.client.execute_tool(tool, args, job=job(upstream_retries=0))
    request = pb.ClassifyFailureRequest(
        service="docs",
        endpoint=sidecar.backend.url + path + ("?q=q" if tool == "search" else ""),
        tool_kind=pb.TOOL_KIND_FETCH if tool == "fetch" else pb.TOOL_KIND_SEARCH,
        parameter="id" if tool == "fetch" else "query",
        value="doc-7" if tool == "fetch" else "q",
        resource_type="document" if tool == "fetch" else "",
        attempts=1,
    )
    if fault is not None:
        request.fault = fault  # type: ignore[assignment]
    else:
        request.response.status_code = int(answer["status"])  # type: ignore[call-overload]
        request.response.headers.update(answer.get("headers", {}))  # type: ignore[arg-type]
        body = answer.get("body", "")
        request.response.body = body if isinstance(body, str) else __import__("json").dumps(body)
    classified = await sidecar.client.classify_failure(request)
    if executed.HasField("result"):
        assert classified == pb.Failure()
    else:
        assert _agree(classified, executed.failure)


@pytest.mark.parametrize(
    ("tool", "args", "service", "endpoint", "observed"),
    [
        ("refused", {"id": "x"}, "down", "http://127.0.0.1:1/x/x", pb.TRANSPORT_FAULT_REFUSED),
        ("dns", {"id": "x"}, "nowhere", "http://nonexistent.invalid/x/x", pb.TRANSPORT_FAULT_DNS),
        ("fail_fetch", {"mode": "hang"}, "flaky", "/fail/hang", pb.TRANSPORT_FAULT_TIMEOUT),
        ("fail_fetch", {"mode": "robot403"}, "flaky", "/fail/robot403", 403),
    ],
)
async def test_faults_and_quirks_classify_the_same_way(
    start_sidecar: Start,
    backend: ThreadedServer[FakeToolBackend],
    tool: str,
    args: dict[str, str],
    service: str,
    endpoint: str,
    observed: int,
) -> None:
    hang = args.get("mode") == "hang"  # only the read timeout ends it: a short one; any answer gets the long one
    sidecar = await start_sidecar(**({"tools": silent_tools(backend.url)} if hang else {}))
    executed = await sidecar.client.execute_tool(tool, args, job=job(upstream_retries=0))
    url = endpoint if endpoint.startswith("http") else sidecar.backend.url + endpoint
    param, value = next(iter(args.items()))
    request = pb.ClassifyFailureRequest(
        service=service, endpoint=url, tool_kind=pb.TOOL_KIND_FETCH, parameter=param, value=value, attempts=1
    )
    if observed < 100:
        request.fault = observed  # type: ignore[assignment]
    else:
        request.response.status_code = observed
        request.response.body = '{"error":"CLIENT.RobotDetected"}'
    assert _agree(await sidecar.client.classify_failure(request), executed.failure)


def _agree(reported: pb.Failure, executed: pb.Failure) -> bool:
    """Equal Failures, but for a fault after the request went out: a report does not know whether the
    call is idempotent (ExecuteTool's GET is, and says it plainly), so its words are the careful ones."""
    if executed.service.fault not in (pb.TRANSPORT_FAULT_RESET, pb.TRANSPORT_FAULT_TIMEOUT):
        return reported == executed
    assert "it did not answer" in executed.message
    assert "may have been delivered; the outcome is unknown" in reported.message
    assert reported.message.endswith("check before repeating this call unless it is idempotent.")
    same = pb.Failure()
    same.CopyFrom(reported)
    same.message, same.explanation = executed.message, executed.explanation
    return same == executed


async def test_reports_feed_the_service_circuit_and_a_precheck_sees_it(sidecar: Running) -> None:
    report = pb.ClassifyFailureRequest(service="their-api", endpoint="https://api.example/x?key=1", attempts=1)
    report.response.status_code = 503
    report.response.body = '{"error": "down"}'
    for _ in range(12):
        failure = await sidecar.client.classify_failure(report)
        assert failure.kind == pb.FAILURE_KIND_EXTERNAL_SERVICE
    assert failure.http.endpoint == "https://api.example/x"
    precheck = await sidecar.client.classify_failure(pb.ClassifyFailureRequest(service="their-api"))
    assert precheck.kind == pb.FAILURE_KIND_CIRCUIT_OPEN
    assert "HTTP 503 (down)" in precheck.message
    sidecar.clock.advance(30)
    granted = await sidecar.client.classify_failure(pb.ClassifyFailureRequest(service="their-api"))
    assert granted.kind == pb.FAILURE_KIND_UNSPECIFIED
    assert granted.circuit.state == pb.CIRCUIT_STATE_HALF_OPEN  # this caller holds the probe
    others = await sidecar.client.classify_failure(pb.ClassifyFailureRequest(service="their-api"))
    assert others.kind == pb.FAILURE_KIND_CIRCUIT_OPEN
    stray = pb.ClassifyFailureRequest(service="their-api")  # another agent's late report settles nothing
    stray.response.status_code = 200
    await sidecar.client.classify_failure(stray)
    assert sidecar.app.guards.peek("their-api").state is CircuitState.HALF_OPEN  # type: ignore[union-attr]
    ok = pb.ClassifyFailureRequest(service="their-api", probe=True)
    ok.response.status_code = 200
    assert (await sidecar.client.classify_failure(ok)).kind == pb.FAILURE_KIND_UNSPECIFIED
    assert sidecar.app.guards.peek("their-api").state is CircuitState.CLOSED  # type: ignore[union-attr]


@pytest.mark.parametrize("status", [0, -5, 99, 600, 99999])
async def test_a_status_that_is_not_http_is_invalid_input(sidecar: Running, status: int) -> None:
    report = pb.ClassifyFailureRequest(service="their-api")
    report.response.status_code = status
    failure = await sidecar.client.classify_failure(report)
    assert failure.kind == pb.FAILURE_KIND_INVALID_INPUT
    assert failure.invalid_input.parameter == "response.status_code"
    assert sidecar.app.guards.peek("their-api") is None  # type: ignore[union-attr]


async def test_reports_without_a_service_name_read_well_and_feed_nothing(sidecar: Running) -> None:
    report = pb.ClassifyFailureRequest(endpoint="https://api.example/x")
    report.response.status_code = 500
    failure = await sidecar.client.classify_failure(report)
    assert failure.message.startswith("The upstream service failed at https://api.example/x")


async def test_a_reported_reset_says_the_request_may_have_been_delivered(sidecar: Running) -> None:
    report = pb.ClassifyFailureRequest(
        service="their-notes", endpoint="https://notes.example/notes?token=x", fault=pb.TRANSPORT_FAULT_RESET
    )
    failure = await sidecar.client.classify_failure(report)
    assert failure.kind == pb.FAILURE_KIND_EXTERNAL_SERVICE
    assert failure.service.fault == pb.TRANSPORT_FAULT_RESET
    assert failure.message == (
        "The their-notes service failed at https://notes.example/notes: the connection was reset after the "
        "request was sent, so it may have been delivered; the outcome is unknown — check before repeating this "
        "call unless it is idempotent."
    )
    refused = await sidecar.client.classify_failure(
        pb.ClassifyFailureRequest(
            service="their-notes", endpoint="https://notes.example/notes", fault=pb.TRANSPORT_FAULT_REFUSED
        )
    )
    assert refused.message.endswith("it could not be reached (connection refused).")


async def test_dns_fault_is_external_service_without_http(sidecar: Running) -> None:
    failure = await sidecar.client.classify_failure(
        pb.ClassifyFailureRequest(service="x", endpoint="https://nowhere.invalid/a", fault=pb.TRANSPORT_FAULT_DNS)
    )
    assert failure.kind == pb.FAILURE_KIND_EXTERNAL_SERVICE
    assert not failure.HasField("http")
    assert "did not resolve" in failure.message


def _probe_report(service: str, job_id: str, status: int) -> pb.ClassifyFailureRequest:
    report = pb.ClassifyFailureRequest(service=service, probe=True, job=pb.Job(job_id=job_id))
    report.response.status_code = status
    return report


async def test_two_agents_probes_are_each_settled_by_their_own_report(sidecar: Running) -> None:
    """The guard holds the probe and who it was granted to: a report settles only its own agent's probe."""
    down = pb.ClassifyFailureRequest(service="their-api", attempts=1)
    down.response.status_code = 503
    for _ in range(12):
        await sidecar.client.classify_failure(down)
    sidecar.clock.advance(30)
    agent_a = pb.ClassifyFailureRequest(service="their-api", job=pb.Job(job_id="agent-a"))
    agent_b = pb.ClassifyFailureRequest(service="their-api", job=pb.Job(job_id="agent-b"))
    assert (await sidecar.client.classify_failure(agent_a)).circuit.state == pb.CIRCUIT_STATE_HALF_OPEN
    assert (await sidecar.client.classify_failure(agent_b)).kind == pb.FAILURE_KIND_CIRCUIT_OPEN
    sidecar.clock.advance(60)  # agent A's probe times out unreported: lost, the circuit reopens
    assert (await sidecar.client.classify_failure(agent_b)).kind == pb.FAILURE_KIND_CIRCUIT_OPEN
    sidecar.clock.advance(30)
    assert (await sidecar.client.classify_failure(agent_b)).circuit.state == pb.CIRCUIT_STATE_HALF_OPEN
    guard = sidecar.app.guards.peek("their-api")
    assert guard is not None
    await sidecar.client.classify_failure(_probe_report("their-api", "agent-a", 200))  # A's, far too late
    assert guard.state is CircuitState.HALF_OPEN  # B's probe is still out: A's report settled nothing of it
    await sidecar.client.classify_failure(_probe_report("their-api", "agent-b", 200))
    assert guard.state is CircuitState.CLOSED


async def test_a_failed_probe_report_reopens_with_the_cooldown_doubled(sidecar: Running) -> None:
    down = pb.ClassifyFailureRequest(service="their-api", attempts=1)
    down.response.status_code = 503
    for _ in range(12):
        await sidecar.client.classify_failure(down)
    sidecar.clock.advance(30)
    agent = pb.ClassifyFailureRequest(service="their-api", job=pb.Job(job_id="agent-a"))
    assert (await sidecar.client.classify_failure(agent)).circuit.state == pb.CIRCUIT_STATE_HALF_OPEN
    await sidecar.client.classify_failure(_probe_report("their-api", "agent-a", 503))
    guard = sidecar.app.guards.peek("their-api")
    assert guard is not None
    assert guard.state is CircuitState.OPEN
    assert guard.cooldown == 60
