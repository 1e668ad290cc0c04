"""``sidecar.v1.Admin`` over real gRPC: the state view and the operator actions, behind the admin tokens.

The state is set through the core objects' public methods (as tests/fronts/test_admin.py does), then read
and changed over the gRPC port, and compared with ``GET /admin/state`` on the HTTP port.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import pytest_asyncio
import sidecar_client as sc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
from rich.console import Console
from sidecar_client import user
from sidecar_contract.v1 import admin_pb2 as apb
from sidecar_contract.v1 import admin_pb2_grpc as apb_grpc
from sidecar_contract.v1 import sidecar_pb2 as pb

from sidecar.cli import main
from sidecar.config import Config
from sidecar.core.clock import FakeClock
from sidecar.fakes import FakeProvider, FakeToolBackend
from sidecar.server.app import SidecarApp, running
from sidecar.server.reload import ReloadOutcome, WorkerOutcome
from sidecar.status import TOKEN_ENV, document, run_action, run_reload, run_status
from tests.conftest import Running, Start, ThreadedServer, base_config
from tests.fronts.test_admin import ADMIN, AGENT, HTTP, SECRET, _admin_sidecar, _get, _seed, _url
from tests.redis_server import RedisServer, free_port, redis_server  # noqa: F401  (the fixture)

pytestmark = pytest.mark.asyncio

ADMIN_MD = (("authorization", f"Bearer {ADMIN}"),)
DEFAULT_GRPCURL = Path.home() / ".cache" / "sidecar" / "grpcurl-v1.9.3"
AGENT_MD = (("authorization", f"Bearer {AGENT}"),)


@pytest_asyncio.fixture
async def channel(start_sidecar: Start) -> AsyncIterator[tuple[Running, apb_grpc.AdminStub]]:
    r = await _admin_sidecar(start_sidecar)
    async with grpc.aio.insecure_channel(r.app.address) as ch:
        yield r, apb_grpc.AdminStub(ch)


def _status(err: grpc.aio.AioRpcError) -> status_pb2.Status:
    return status_pb2.Status.FromString(dict(err.trailing_metadata() or ())["grpc-status-details-bin"])


def _reason(err: grpc.aio.AioRpcError) -> str:
    info = error_details_pb2.ErrorInfo()
    details: list[any_pb2.Any] = list(_status(err).details)
    assert next(d for d in details if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR)).Unpack(info)
    assert info.domain == "sidecar"
    return info.reason


async def test_reflection_lists_the_admin_service(start_sidecar: Start) -> None:
    r = await start_sidecar(server={"admin": {"tokens": [ADMIN]}})

    def services() -> list[str]:
        with grpc.insecure_channel(r.app.address) as ch:
            db = ProtoReflectionDescriptorDatabase(ch)
            names = list(db.get_services())
            assert db.FindFileContainingSymbol("sidecar.v1.Admin").name == "sidecar/v1/admin.proto"
            return names

    names = await asyncio.to_thread(services)
    assert "sidecar.v1.Admin" in names
    assert "sidecar.v1.Sidecar" in names


def _grpcurl() -> Path:
    path = Path(os.environ.get("SIDECAR_GRPCURL_BIN") or DEFAULT_GRPCURL)
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(
            f"grpcurl is missing at {path}: run `make grpcurl` to build it (from source, cached in "
            "~/.cache/sidecar), or point SIDECAR_GRPCURL_BIN at one",
            pytrace=False,
        )
    return path


async def _run(*argv: str) -> str:
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_grpcurl_lists_the_admin_service_and_reads_the_state(start_sidecar: Start) -> None:
    r = await start_sidecar(server={"admin": {"tokens": [ADMIN]}}, policy={"spend_caps": {"wf-1": 2.5}})
    _seed(r)
    grpcurl = str(_grpcurl())
    assert "sidecar.v1.Admin" in (await _run(grpcurl, "-plaintext", r.app.address, "list")).split()
    methods = (await _run(grpcurl, "-plaintext", r.app.address, "list", "sidecar.v1.Admin")).split()
    assert {f"sidecar.v1.Admin.{m}" for m in ("GetState", "CloseCircuit", "LiftPause", "ResetSpend", "Reload")} <= set(
        methods
    )
    auth = f"authorization: Bearer {ADMIN}"
    state = json.loads(await _run(grpcurl, "-plaintext", "-H", auth, r.app.address, "sidecar.v1.Admin/GetState"))
    flaky = next(s for s in state["services"] if s["name"] == "flaky")
    assert flaky["circuit"] == "CIRCUIT_STATE_OPEN"
    assert SECRET not in json.dumps(state)


async def test_get_state_is_the_http_document_typed(channel: tuple[Running, apb_grpc.AdminStub]) -> None:
    r, stub = channel
    _seed(r)
    state = await stub.GetState(apb.GetStateRequest(), metadata=ADMIN_MD)
    flaky = next(s for s in state.services if s.name == "flaky")
    assert flaky.circuit == pb.CIRCUIT_STATE_OPEN
    assert "upstream said no" in flaky.opened_by
    assert flaky.HasField("opened_at")
    assert flaky.cooldown_left_s > 0
    gpt = next(m for m in state.models if m.model == "gpt")
    assert gpt.pause_left_s == pytest.approx(30.0)
    assert not gpt.HasField("paced_per_s") or gpt.paced_per_s > 0
    wf = next(w for w in state.workflows if w.workflow == "wf-1")
    assert (wf.spent_usd, wf.cap_usd) == (1.25, 2.5)
    assert (state.state.backend, state.state.reachable, state.state.replicas) == ("memory", True, 1)
    assert [(c.name, c.HasField("requests_per_second"), c.admitted) for c in state.callers] == [("tokens[0]", False, 0)]
    answer = await _get(r, ADMIN)
    assert document(state) == answer.json()  # the same view, field for field (the fake clock stood still)


LIMITED = "limited-token-0123456789abcdef"


async def test_get_state_carries_each_caller_as_the_http_document_does(
    start_sidecar: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GetState's callers: a named caller with both limits, one call admitted and one refused at its
    requests_per_second, and an unnamed caller with none (its limits unset, not 0); the HTTP view's list, field
    for field, and ``sidecar status`` draws the same callers table from either port."""
    limited = {"token": LIMITED, "name": "limited", "requests_per_second": 0.1, "tokens_per_minute": 20000}
    server = {"auth": {"tokens": [limited, AGENT]}, "admin": {"tokens": [ADMIN]}}
    r = await start_sidecar(http=HTTP, server=server)
    async with sc.AsyncSidecarClient(r.app.address, token=LIMITED) as caller:
        await caller.call_model("gpt", [user("first")])
        with pytest.raises(sc.UpstreamThrottleError):  # one call per 10 s: the second is refused at once
            await caller.call_model("gpt", [user("second")])
    async with grpc.aio.insecure_channel(r.app.address) as ch:
        state = await apb_grpc.AdminStub(ch).GetState(apb.GetStateRequest(), metadata=ADMIN_MD)
    named, unnamed = state.callers
    assert (named.name, named.requests_per_second, named.tokens_per_minute) == ("limited", 0.1, 20000)
    assert (named.admitted, named.refused, named.tokens_charged) == (1, 1, 266)  # 10 tokens estimated + 256 budget
    assert unnamed.name == "tokens[1]"
    assert not unnamed.HasField("requests_per_second")
    assert not unnamed.HasField("tokens_per_minute")
    assert (unnamed.admitted, unnamed.refused, unnamed.tokens_charged) == (0, 0, 0)
    wire = state.SerializeToString()
    assert LIMITED.encode() not in wire
    assert AGENT.encode() not in wire
    http_doc = (await _get(r, ADMIN)).json()
    assert document(state)["callers"] == http_doc["callers"]
    assert document(state) == http_doc

    monkeypatch.setenv(TOKEN_ENV, ADMIN)
    tables = []
    for target in (r.app.address, _url(r).removesuffix("/admin/state")):
        console = Console(record=True, width=240, file=io.StringIO())
        assert await asyncio.to_thread(run_status, target, None, console) == 0
        tables.append(console.export_text())
    over_grpc, over_http = tables
    assert over_grpc == over_http
    rows = [[c.strip() for c in line.strip("│ ").split("│")] for line in over_grpc.splitlines() if "│ limited" in line]
    assert rows == [["limited", "0.1", "20000", "1", "1", "266"]]


async def _eventually(check: Any, what: str, timeout_s: float = 15.0) -> None:
    """Real time: a replica noticing Redis go away takes a heartbeat (a second) and a timeout."""
    end = asyncio.get_running_loop().time() + timeout_s
    while not await check():
        if asyncio.get_running_loop().time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def _same_view(grpc_doc: dict[str, Any], http_doc: dict[str, Any]) -> float | None:
    """The two documents equal, but for the staleness (real time: the HTTP read came later); the gRPC one's."""
    grpc_stale = grpc_doc["state"].pop("staleness_s")
    http_stale = http_doc["state"].pop("staleness_s")
    assert grpc_doc == http_doc
    assert (grpc_stale is None) == (http_stale is None)
    if grpc_stale is not None:
        assert 0 <= grpc_stale <= http_stale < grpc_stale + 5
    return None if grpc_stale is None else float(grpc_stale)


async def test_get_state_with_redis_stopped_carries_staleness_the_error_and_the_queued_actions(
    start_sidecar: Start,
    redis_server: RedisServer,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The backend section of GET /admin/state, field for field over gRPC, from a real Redis stopped
    under the sidecar: staleness_s (seconds since Redis last answered), last_error (what its last
    operation raised) and pending_actions (two operator actions queued for the fleet)."""
    state = {"backend": "redis", "url": redis_server.url, "prefix": "admin-grpc", "timeout_ms": 200}
    r = await start_sidecar(
        http=HTTP,
        server={"auth": {"tokens": [AGENT]}, "admin": {"tokens": [ADMIN]}},
        policy={"spend_caps": {"wf-1": 2.5}},
        state=state,
    )
    async with grpc.aio.insecure_channel(r.app.address) as ch:
        stub = apb_grpc.AdminStub(ch)

        async def backend() -> apb.BackendState:
            answer: apb.GetStateResponse = await stub.GetState(apb.GetStateRequest(), metadata=ADMIN_MD)
            return answer.state

        async def reachable() -> bool:
            return (await backend()).reachable

        async def unreachable() -> bool:
            return not (await backend()).reachable

        await _eventually(reachable, "the sidecar to reach Redis")
        up = await backend()
        assert (up.backend, up.HasField("staleness_s"), up.HasField("last_error")) == ("redis", True, False)
        assert (up.HasField("pending_actions"), up.pending_actions) == (True, 0)
        _seed(r)
        redis_server.kill()
        await _eventually(unreachable, "the sidecar to notice Redis stopped")
        lifted = await stub.LiftPause(apb.LiftPauseRequest(model="gpt"), metadata=ADMIN_MD)
        reset = await stub.ResetSpend(apb.ResetSpendRequest(workflow="wf-1"), metadata=ADMIN_MD)
        assert (lifted.changed, lifted.reach, reset.was_usd, reset.reach) == (True, "queued", 1.25, "queued")

        answer = await stub.GetState(apb.GetStateRequest(), metadata=ADMIN_MD)
        http_doc = (await _get(r, ADMIN)).json()
    down = answer.state
    assert (down.backend, down.reachable, down.replicas) == ("redis", False, http_doc["state"]["replicas"])
    assert down.HasField("staleness_s")
    assert down.HasField("last_error")
    assert down.last_error == http_doc["state"]["last_error"] != ""
    assert down.pending_actions == http_doc["state"]["pending_actions"] == 2
    grpc_doc = document(answer)
    keys = {"backend", "reachable", "replicas", "staleness_s", "last_error", "pending_actions"}
    assert set(grpc_doc["state"]) == set(http_doc["state"]) == keys
    stale = _same_view(grpc_doc, http_doc)  # every section, the backend's new fields with real values
    assert stale is not None

    monkeypatch.setenv(TOKEN_ENV, ADMIN)  # sidecar status over gRPC shows what the HTTP form shows
    consoles = []
    for target in (r.app.address, _url(r).removesuffix("/admin/state")):
        console = Console(record=True, width=240, file=io.StringIO())
        assert await asyncio.to_thread(run_status, target, None, console) == 0
        consoles.append(console.export_text())
    over_grpc, over_http = consoles
    cells = _backend_row(over_grpc)
    assert cells[:3] == ["redis", "False", str(down.replicas)]
    assert float(cells[3]) >= stale  # the staleness, read a little later
    assert cells[4] == "2"  # the actions queued
    assert cells[5].startswith(down.last_error[:30])
    http_cells = _backend_row(over_http)
    assert cells[:3] + cells[4:] == http_cells[:3] + http_cells[4:]
    assert _other_lines(over_grpc) == _other_lines(over_http)  # every other table the same


def _backend_row(text: str) -> list[str]:
    row = next(line for line in text.splitlines() if line.startswith("│ redis"))
    return [cell.strip() for cell in row.strip("│ ").split("│")]


def _other_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith("│ redis")]


async def test_get_state_of_a_redis_never_reached_is_the_http_document(
    start_sidecar: Start,
) -> None:
    state = {"backend": "redis", "url": f"redis://127.0.0.1:{free_port()}/0", "prefix": "admin-bad", "timeout_ms": 50}
    r = await start_sidecar(http=HTTP, server={"admin": {"tokens": [ADMIN]}}, state=state)
    async with grpc.aio.insecure_channel(r.app.address) as ch:
        answer = await apb_grpc.AdminStub(ch).GetState(apb.GetStateRequest(), metadata=ADMIN_MD)
    http_doc = (await _get(r, ADMIN)).json()
    assert not answer.state.HasField("staleness_s")  # never heard from: None in the JSON, unset here
    assert answer.state.last_error
    assert document(answer) == http_doc
    assert document(answer)["state"]["staleness_s"] is None


async def test_a_secret_in_an_opening_response_never_leaves(channel: tuple[Running, apb_grpc.AdminStub]) -> None:
    r, stub = channel
    _seed(r)  # the opening response quotes the provider key
    state = await stub.GetState(apb.GetStateRequest(), metadata=ADMIN_MD)
    wire = state.SerializeToString()
    assert SECRET.encode() not in wire
    assert ADMIN.encode() not in wire
    assert "upstream said no" in next(s for s in state.services if s.name == "flaky").opened_by


async def test_each_action_works_and_is_logged(
    channel: tuple[Running, apb_grpc.AdminStub], caplog: pytest.LogCaptureFixture
) -> None:
    r, stub = channel
    _seed(r)
    with caplog.at_level("WARNING", logger="sidecar.admin"):
        closed = await stub.CloseCircuit(apb.CloseCircuitRequest(name="flaky"), metadata=ADMIN_MD)
        lifted = await stub.LiftPause(apb.LiftPauseRequest(model="gpt"), metadata=ADMIN_MD)
        reset = await stub.ResetSpend(apb.ResetSpendRequest(workflow="wf-1"), metadata=ADMIN_MD)
    assert (closed.changed, lifted.changed, reset.was_usd) == (True, True, 1.25)
    state = await stub.GetState(apb.GetStateRequest(), metadata=ADMIN_MD)
    assert next(s for s in state.services if s.name == "flaky").circuit == pb.CIRCUIT_STATE_CLOSED
    assert next(m for m in state.models if m.model == "gpt").pause_left_s == 0
    assert next(w for w in state.workflows if w.workflow == "wf-1").spent_usd == 0
    logged = [rec.getMessage() for rec in caplog.records if rec.name == "sidecar.admin"]
    assert any("closed the circuit of flaky" in line and "(gRPC)" in line for line in logged)
    assert all(line.startswith("admin: server.admin.tokens[0] from ") for line in logged)  # named, never shown
    assert not any(ADMIN in line for line in logged)
    assert any("lifted the pause of model gpt" in line for line in logged)
    assert any("reset the spend of workflow wf-1" in line for line in logged)
    again = await stub.CloseCircuit(apb.CloseCircuitRequest(name="flaky"), metadata=ADMIN_MD)
    assert again.changed is False


CALLS: list[tuple[str, Any]] = [
    ("GetState", apb.GetStateRequest()),
    ("CloseCircuit", apb.CloseCircuitRequest(name="flaky")),
    ("LiftPause", apb.LiftPauseRequest(model="gpt")),
    ("ResetSpend", apb.ResetSpendRequest(workflow="wf-1")),
    ("Reload", apb.ReloadRequest()),
]


@pytest.mark.parametrize(("method", "request_msg"), CALLS)
async def test_a_callers_token_and_no_token_are_refused(
    channel: tuple[Running, apb_grpc.AdminStub], method: str, request_msg: Any
) -> None:
    r, stub = channel
    _seed(r)
    for md in (AGENT_MD, (), (("authorization", "Bearer not-a-token-0123456789"),)):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await getattr(stub, method)(request_msg, metadata=md)
        err = caught.value
        assert err.code() == grpc.StatusCode.UNAUTHENTICATED, (method, md)
        assert "operator token" in (err.details() or "")
        assert _reason(err) == "UNAUTHORIZED"
        failure = pb.Failure()
        assert _status(err).details[0].Unpack(failure)
        assert failure.kind == pb.FAILURE_KIND_UNAUTHORIZED
        assert AGENT not in str(err)
    assert r.app.guards is not None
    assert r.app.guards.get("flaky").snapshot().state.name == "OPEN"  # nothing changed


@pytest.mark.parametrize(("method", "request_msg"), CALLS)
async def test_without_admin_tokens_the_service_is_off(start_sidecar: Start, method: str, request_msg: Any) -> None:
    r = await start_sidecar()
    async with grpc.aio.insecure_channel(r.app.address) as ch:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await getattr(apb_grpc.AdminStub(ch), method)(request_msg, metadata=ADMIN_MD)
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "server.admin.tokens" in (caught.value.details() or "")
    assert _reason(caught.value) == "PERMISSION_DENIED"


async def test_an_unknown_target_is_not_found_naming_it(channel: tuple[Running, apb_grpc.AdminStub]) -> None:
    _, stub = channel
    for call, request_msg, name in (
        (stub.CloseCircuit, apb.CloseCircuitRequest(name="no-such-service"), "no-such-service"),
        (stub.LiftPause, apb.LiftPauseRequest(model="no-such-model"), "no-such-model"),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(request_msg, metadata=ADMIN_MD)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        assert name in (caught.value.details() or "")
        assert _reason(caught.value) == "RESOURCE_NOT_FOUND"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.LiftPause(apb.LiftPauseRequest(), metadata=ADMIN_MD)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "'model'" in (caught.value.details() or "")


async def test_reload_without_a_config_file_is_refused_and_says_why(
    channel: tuple[Running, apb_grpc.AdminStub], caplog: pytest.LogCaptureFixture
) -> None:
    r, stub = channel  # this sidecar was given a Config, no file: there is nothing to read again
    with caplog.at_level("WARNING", logger="sidecar.admin"):
        answer = await stub.Reload(apb.ReloadRequest(), metadata=ADMIN_MD)
        async with httpx.AsyncClient() as http:  # the HTTP door's reload, the same entry
            url = _url(r).replace("/admin/state", "/admin/reload")
            refused = await http.post(url, headers={"authorization": f"Bearer {ADMIN}"})
    assert not answer.applied
    assert answer.error.startswith("no config file to reload")
    assert refused.status_code == 422
    assert refused.json()["error"].startswith("no config file to reload")
    asked = [rec.getMessage() for rec in caplog.records if "asked for a reload" in rec.getMessage()]
    assert len(asked) == 2
    assert all(line.startswith("admin: server.admin.tokens[0] from ") for line in asked)  # who, never the token
    assert not any(ADMIN in line for line in asked)


@pytest_asyncio.fixture
async def reloading(
    provider: ThreadedServer[FakeProvider], backend: ThreadedServer[FakeToolBackend], clock: FakeClock
) -> AsyncIterator[tuple[SidecarApp, list[ReloadOutcome]]]:
    """A sidecar whose Reload answers the outcomes queued in the list, one per call."""
    outcomes: list[ReloadOutcome] = []

    async def reload(*, force: bool = False) -> ReloadOutcome:
        return outcomes.pop(0)

    cfg = Config.model_validate(
        base_config(provider.url, backend.url, server={"auth": {"tokens": [AGENT]}, "admin": {"tokens": [ADMIN]}})
    )
    async with running(cfg, listen="127.0.0.1:0", clock=clock, rng=random.Random(7), admin_reload=reload) as app:
        yield app, outcomes


async def test_reload_answers_the_outcome_of_each_worker(
    reloading: tuple[SidecarApp, list[ReloadOutcome]], monkeypatch: pytest.MonkeyPatch
) -> None:
    app, outcomes = reloading
    refusal = "config.yaml: models.gpt.provider: no provider 'nope'"
    outcomes += [
        ReloadOutcome(
            applied=True,
            workers=(WorkerOutcome(0, 4240, True), WorkerOutcome(1, 4241, True)),
            restart_needed=("server.listen",),
            note="every worker reloads",
        ),
        ReloadOutcome(applied=False, error=refusal),
    ]
    async with grpc.aio.insecure_channel(app.address) as ch:
        stub = apb_grpc.AdminStub(ch)
        good = await stub.Reload(apb.ReloadRequest(), metadata=ADMIN_MD)
        bad = await stub.Reload(apb.ReloadRequest(), metadata=ADMIN_MD)
    assert good.applied is True
    assert good.error == ""
    assert [(w.index, w.pid, w.applied, w.reported) for w in good.workers] == [
        (0, 4240, True, True),
        (1, 4241, True, True),
    ]
    assert (list(good.restart_needed), good.note) == (["server.listen"], "every worker reloads")
    assert (bad.applied, bad.error, list(bad.workers)) == (False, refusal, [])
    outcomes += [
        ReloadOutcome(applied=True, workers=(WorkerOutcome(0, 4240, True),)),
        ReloadOutcome(applied=False, error=refusal, workers=(WorkerOutcome(0, 4240, False, refusal),)),
    ]
    monkeypatch.setenv(TOKEN_ENV, ADMIN)
    console = Console(record=True, width=240, file=io.StringIO())
    assert await asyncio.to_thread(run_reload, app.address, console) == 0
    assert "reload applied" in console.export_text()
    assert await asyncio.to_thread(main, ["admin", "reload", "--target", app.address]) == 1
    monkeypatch.setenv(TOKEN_ENV, AGENT)
    console = Console(record=True, width=240, file=io.StringIO())
    assert await asyncio.to_thread(run_reload, app.address, console) == 1
    assert "operator token" in console.export_text()
    assert outcomes == []  # the refused call ran no reload


async def test_sidecar_status_and_admin_over_grpc(start_sidecar: Start, monkeypatch: pytest.MonkeyPatch) -> None:
    r = await _admin_sidecar(start_sidecar)
    _seed(r)
    monkeypatch.setenv(TOKEN_ENV, ADMIN)
    console = Console(record=True, width=240, file=io.StringIO())
    assert await asyncio.to_thread(run_status, r.app.address, None, console) == 0
    text = console.export_text()
    assert "flaky" in text
    assert "open" in text
    assert "upstream said no" in text
    assert "wf-1" in text
    assert SECRET not in text
    console = Console(record=True, width=240, file=io.StringIO())
    assert await asyncio.to_thread(run_action, r.app.address, "close-circuit", "flaky", console) == 0
    assert "changed=True" in console.export_text()
    assert r.app.guards is not None
    assert r.app.guards.get("flaky").snapshot().state.name == "CLOSED"
    console = Console(record=True, width=240, file=io.StringIO())
    assert await asyncio.to_thread(run_action, r.app.address, "lift-pause", "no-such-model", console) == 1
    assert "no-such-model" in console.export_text()
    monkeypatch.setenv(TOKEN_ENV, AGENT)
    console = Console(record=True, width=240, file=io.StringIO())
    assert await asyncio.to_thread(run_status, r.app.address, None, console) == 1
    assert "operator token" in console.export_text()


async def test_admin_reload_and_the_actions_check_their_arguments() -> None:
    for argv in (["admin", "reload", "extra"], ["admin", "close-circuit"]):
        with pytest.raises(SystemExit) as caught:
            main(argv)
        assert caught.value.code == 2
    console = Console(record=True, width=240, file=io.StringIO())
    assert run_reload("http://127.0.0.1:9", console) == 1  # an http:// target is the HTTP door's POST /admin/reload
    assert "sidecar admin" in console.export_text()
