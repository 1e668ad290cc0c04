"""The admin state view over a real sidecar: GET /admin/state on the HTTP port, its own tokens.

The state is set through the core objects' public methods (a circuit opened by repeated failures,
a Retry-After pause, spend recorded), then read over real HTTP.
"""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import httpx
import pytest
from rich.console import Console

from sidecar.core.details import Trigger
from sidecar.server.admin import StateView
from sidecar.status import TOKEN_ENV, run_action, run_status
from sidecar.telemetry.testing import install_in_memory
from tests.conftest import Running, Start
from tests.redis_server import RedisServer, free_port, redis_server  # noqa: F401  (the fixture)

pytestmark = pytest.mark.asyncio

ADMIN = "admin-token-0123456789abcdef"
AGENT = "agent-token-0123456789abcdef"
HTTP = {"listen": "127.0.0.1:0"}
SECRET = "sk-test-SECRETKEY1234567890"  # the provider key of tests/conftest.py's base_config


async def _admin_sidecar(start_sidecar: Start) -> Running:
    return await start_sidecar(
        http=HTTP,
        server={"auth": {"tokens": [AGENT]}, "admin": {"tokens": [ADMIN]}},
        policy={"spend_caps": {"wf-1": 2.5}},
    )


def _url(r: Running) -> str:
    assert r.app.http is not None
    return f"http://127.0.0.1:{r.app.http.port}/admin/state"


def _seed(r: Running) -> None:
    assert r.app.guards is not None
    assert r.app.models is not None
    assert r.app.state_view is not None
    guard = r.app.guards.get("flaky")
    for _ in range(20):  # to the maximum throttle, then failures_to_open more
        guard.failure(None, Trigger(503, f"upstream said no (key {SECRET})"), None)
    r.app.models.throttle("gpt").paused_elsewhere(30.0)
    r.app.state_view.ledger.record("wf-1", 1.25)


async def _get(r: Running, token: str | None) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient() as http:
        return await http.get(_url(r), headers=headers)


async def test_the_view_shows_an_open_circuit_a_paused_model_and_spend(start_sidecar: Start) -> None:
    r = await _admin_sidecar(start_sidecar)
    _seed(r)
    answer = await _get(r, ADMIN)
    assert answer.status_code == 200, answer.text
    assert SECRET not in answer.text
    assert ADMIN not in answer.text
    doc: dict[str, Any] = answer.json()
    flaky = next(s for s in doc["services"] if s["name"] == "flaky")
    assert flaky["circuit"] == "open"
    assert "upstream said no" in flaky["opened_by"]
    assert "503" in flaky["opened_by"]
    assert flaky["cooldown_left_s"] > 0
    gpt = next(m for m in doc["models"] if m["model"] == "gpt")
    assert gpt["pause_left_s"] == pytest.approx(30.0)
    r.clock.advance(10.0)
    gpt = next(m for m in (await _get(r, ADMIN)).json()["models"] if m["model"] == "gpt")
    assert gpt["pause_left_s"] == pytest.approx(20.0)
    assert {"workflow": "wf-1", "spent_usd": 1.25, "cap_usd": 2.5} in doc["workflows"]
    assert doc["state"] == {"backend": "memory", "reachable": True, "replicas": 1}


async def test_the_view_needs_an_admin_token_and_refuses_a_callers(start_sidecar: Start) -> None:
    r = await _admin_sidecar(start_sidecar)
    for token in (None, AGENT, "not-a-token-0123456789"):
        answer = await _get(r, token)
        assert answer.status_code == 401, (token, answer.text)
        assert answer.json()["error"]["type"] == "unauthenticated"
        assert AGENT not in answer.text


async def test_without_admin_tokens_the_view_is_off(start_sidecar: Start) -> None:
    r = await start_sidecar(http=HTTP)
    answer = await _get(r, None)
    assert answer.status_code == 403
    assert answer.json()["error"]["type"] == "admin_off"


async def test_sidecar_status_prints_the_view_as_tables(start_sidecar: Start, monkeypatch: pytest.MonkeyPatch) -> None:
    r = await _admin_sidecar(start_sidecar)
    _seed(r)
    monkeypatch.setenv(TOKEN_ENV, ADMIN)
    console = Console(record=True, width=240, file=io.StringIO())
    target = _url(r).removesuffix("/admin/state")
    assert await asyncio.to_thread(run_status, target, None, console) == 0
    text = console.export_text()
    assert "flaky" in text
    assert "open" in text
    assert "upstream said no" in text
    assert "wf-1" in text
    assert SECRET not in text
    monkeypatch.setenv(TOKEN_ENV, AGENT)
    console = Console(record=True, width=240, file=io.StringIO())
    assert await asyncio.to_thread(run_status, target, None, console) == 1
    assert "operator token" in console.export_text()


async def _act(r: Running, action: str, name: str, token: str | None = ADMIN) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    url = _url(r).replace("/admin/state", f"/admin/actions/{action}")
    async with httpx.AsyncClient() as http:
        return await http.post(url, json={"name": name}, headers=headers)


async def test_operator_actions_close_lift_and_reset_and_are_logged(
    start_sidecar: Start, caplog: pytest.LogCaptureFixture
) -> None:
    r = await _admin_sidecar(start_sidecar)
    _seed(r)
    assert (await _act(r, "close-circuit", "flaky", AGENT)).status_code == 401
    with caplog.at_level("WARNING", logger="sidecar.admin"):
        closed = await _act(r, "close-circuit", "flaky")
        lifted = await _act(r, "lift-pause", "gpt")
        reset = await _act(r, "reset-spend", "wf-1")
    assert closed.json()["changed"] is True
    assert lifted.json()["changed"] is True
    assert reset.json()["was_usd"] == 1.25
    doc = (await _get(r, ADMIN)).json()
    assert next(s for s in doc["services"] if s["name"] == "flaky")["circuit"] == "closed"
    assert next(m for m in doc["models"] if m["model"] == "gpt")["pause_left_s"] == 0
    assert {"workflow": "wf-1", "spent_usd": 0.0, "cap_usd": 2.5} in doc["workflows"]
    logged = [rec.getMessage() for rec in caplog.records if rec.name == "sidecar.admin"]
    assert any("closed the circuit of flaky" in line for line in logged)
    assert any("lifted the pause of model gpt" in line for line in logged)
    assert any("reset the spend of workflow wf-1" in line for line in logged)
    assert (await _act(r, "lift-pause", "no-such-model")).status_code == 404
    never = await _act(r, "reset-spend", "wf-never-seen")  # a workflow is any id: nothing held here
    assert never.status_code == 200
    assert never.json()["was_usd"] == 0
    assert (await _act(r, "explode", "gpt")).status_code in (401, 404)  # not an admin path: the caller check


async def test_sidecar_admin_closes_a_circuit(start_sidecar: Start, monkeypatch: pytest.MonkeyPatch) -> None:
    r = await _admin_sidecar(start_sidecar)
    _seed(r)
    monkeypatch.setenv(TOKEN_ENV, ADMIN)
    console = Console(record=True, width=240, file=io.StringIO())
    target = _url(r).removesuffix("/admin/state")
    assert await asyncio.to_thread(run_action, target, "close-circuit", "flaky", console) == 0
    assert "changed=True" in console.export_text()
    assert r.app.guards is not None
    assert r.app.guards.get("flaky").snapshot().state.name == "CLOSED"


async def _until(check: Any, what: str) -> None:
    for _ in range(200):  # real time: a publish crossing Redis
        if await check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


async def test_with_redis_two_sidecars_see_one_close(
    start_sidecar: Start,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    state = {"backend": "redis", "url": redis_server.url, "prefix": "admin-test"}
    sections: dict[str, Any] = {
        "http": HTTP,
        "server": {"auth": {"tokens": [AGENT]}, "admin": {"tokens": [ADMIN]}},
        "state": state,
    }
    a, b = await start_sidecar(**sections), await start_sidecar(**sections)

    async def circuit(r: Running) -> str:
        doc = (await _get(r, ADMIN)).json()
        assert doc["state"]["backend"] == "redis"
        return str(next((s["circuit"] for s in doc["services"] if s["name"] == "flaky"), "closed"))

    async def b_open() -> bool:
        return await circuit(b) == "open"

    async def b_closed() -> bool:
        return await circuit(b) == "closed"

    _seed(a)
    await _until(b_open, "the other replica to see the circuit open")
    assert (await _act(a, "close-circuit", "flaky")).json()["changed"] is True
    await _until(b_closed, "the other replica to see the operator's close")


async def test_each_action_is_a_span_event_naming_who_never_the_token(start_sidecar: Start) -> None:
    otel = install_in_memory()
    otel.clear()
    r = await _admin_sidecar(start_sidecar)
    _seed(r)
    await _act(r, "close-circuit", "flaky")
    await _act(r, "lift-pause", "gpt")
    await _act(r, "reset-spend", "wf-1")
    await _act(r, "lift-pause", "no-such-model")
    spans = {s.name: s for s in otel.spans() if s.name.startswith("admin ")}
    assert set(spans) == {"admin close-circuit", "admin lift-pause", "admin reset-spend"}
    events = [e for s in otel.spans() if s.name.startswith("admin ") for e in s.events]
    assert "sidecar.circuit.closed" in {e.name for e in events}  # the guard's own event, on the action's span
    events = [e for e in events if e.name == "sidecar.admin.action"]
    assert len(events) == 4
    by = {(e.attributes or {}).get("sidecar.admin.target"): dict(e.attributes or {}) for e in events}
    assert by["flaky"]["sidecar.admin.action"] == "close-circuit"
    assert by["flaky"]["sidecar.admin.outcome"] == "changed"
    assert by["gpt"]["sidecar.admin.outcome"] == "changed"
    assert by["wf-1"]["sidecar.admin.was_usd"] == 1.25
    assert by["no-such-model"]["sidecar.admin.outcome"] == "not_found"
    for attrs in by.values():
        assert str(attrs["sidecar.admin.who"]).startswith("server.admin.tokens[0] from 127.0.0.1")
        assert ADMIN not in str(attrs)


async def test_a_redis_never_reached_is_unreachable_with_its_error(
    start_sidecar: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = {"backend": "redis", "url": f"redis://127.0.0.1:{free_port()}/0", "prefix": "admin-bad", "timeout_ms": 50}
    state["shutdown_flush_s"] = 0.2  # the lift below stays queued: its shutdown retry, kept short
    r = await start_sidecar(http=HTTP, server={"admin": {"tokens": [ADMIN]}}, state=state)
    doc = (await _get(r, ADMIN)).json()["state"]
    assert doc["backend"] == "redis"
    assert doc["reachable"] is False
    assert doc["staleness_s"] is None  # never heard from
    assert "Error" in doc["last_error"]
    monkeypatch.setenv(TOKEN_ENV, ADMIN)
    console = Console(record=True, width=240, file=io.StringIO())
    assert await asyncio.to_thread(run_status, _url(r).removesuffix("/admin/state"), None, console) == 0
    text = console.export_text()
    assert "staleness s" in text
    assert "last error" in text
    assert doc["last_error"][:30] in text
    lifted = (await _act(r, "lift-pause", "gpt")).json()
    assert lifted["reach"] == "queued"  # applied here, kept for the fleet: said, not silent
    assert "state.shutdown_flush_s (0.2 s) more, then logs the action as not delivered" in lifted["note"]
    assert (await _get(r, ADMIN)).json()["state"]["pending_actions"] == 1
    console = Console(record=True, width=240, file=io.StringIO())
    assert await asyncio.to_thread(run_status, _url(r).removesuffix("/admin/state"), None, console) == 0
    assert "actions queued" in console.export_text()


async def test_the_status_tables_print_bracketed_text_as_it_is() -> None:
    from rich.console import Console

    from sidecar.status import render

    quoted = "HTTP 503 [/internal] busy [red]hot[/red]"
    doc = {
        "models": [],
        "services": [
            {
                "name": "svc[x]",
                "circuit": "open",
                "throttle": 1.0,
                "cooldown_left_s": 3.0,
                "probe_holder": None,
                "opened_by": quoted,
            }
        ],
        "deployments": [],
        "workflows": [],
        "state": {"backend": "redis", "reachable": False, "last_error": "ConnectionError [Errno 111]"},
    }
    console = Console(width=400, record=True, color_system=None)
    console.print(render(doc))  # markup would raise MarkupError on "[/internal]"
    text = console.export_text()
    assert quoted in text
    assert "svc[x]" in text
    assert "ConnectionError [Errno 111]" in text


# ---------------------------------------------------------------- hostile bodies at the admin door

LONE = "\ud800"
"""A lone surrogate: ``json.dumps`` writes its escape, which ``json.loads`` reads back as text no encoder writes."""


async def _post_raw(r: Running, path: str, content: bytes, token: str | None = ADMIN) -> httpx.Response:
    headers = {"content-type": "application/json", **({"authorization": f"Bearer {token}"} if token else {})}
    async with httpx.AsyncClient() as http:
        return await http.post(_url(r).replace("/admin/state", path), content=content, headers=headers)


@pytest.mark.parametrize("action", ["close-circuit", "lift-pause", "reset-spend"])
async def test_a_name_holding_a_lone_surrogate_is_a_bad_request_naming_it(
    start_sidecar: Start, action: str, caplog: pytest.LogCaptureFixture
) -> None:
    r = await _admin_sidecar(start_sidecar)
    _seed(r)
    with caplog.at_level("WARNING", logger="sidecar.admin"):
        answer = await _post_raw(r, f"/admin/actions/{action}", json.dumps({"name": f"wf-1{LONE}"}).encode())
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["type"] == "invalid_request"
    assert "'name'" in error["message"]
    assert "surrogate" in error["message"]
    assert not [rec for rec in caplog.records if rec.name == "sidecar.admin"]  # refused before any action
    assert next(w for w in (await _get(r, ADMIN)).json()["workflows"] if w["workflow"] == "wf-1")["spent_usd"] == 1.25


HOSTILE_ACTION_BODIES = [
    b"",
    b"not json",
    b"\xff\xfe",
    b"[" * 4000,  # deeper than json.loads recurses, well inside the size limit
    b'{"name": ' * 400,
    b"[]",
    b'"gpt"',
    b"null",
    b'{"name": 7}',
    b'{"name": ""}',
    b'{"name": {}}',
    b'{"name": ["gpt"]}',
    b'{"Name": "gpt"}',
]


async def test_every_hostile_action_body_is_a_precise_bad_request(start_sidecar: Start) -> None:
    r = await _admin_sidecar(start_sidecar)
    for content in HOSTILE_ACTION_BODIES:
        answer = await _post_raw(r, "/admin/actions/lift-pause", content)
        assert answer.status_code == 400, (content[:20], answer.status_code, answer.text)
        assert answer.headers["content-type"] == "application/json"
        assert answer.json()["error"]["type"] == "invalid_request"
        assert "'name'" in answer.json()["error"]["message"] or "the body" in answer.json()["error"]["message"]


async def _declared_but_not_sent(r: Running, path: str, declared: int) -> bytes:
    """The answer's head to a POST declaring ``declared`` bytes of body and sending 1 KiB of it, the
    connection then held open: only a door that answers from the declared length answers at all."""
    assert r.app.http is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", r.app.http.port)
    try:
        head = (
            f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {ADMIN}\r\n"
            f"content-type: application/json\r\ncontent-length: {declared}\r\n\r\n"
        )
        writer.write(head.encode() + b" " * 1024)
        await writer.drain()
        async with asyncio.timeout(20):  # real time: a door reading the whole body waits for ever
            return await reader.readuntil(b"\r\n\r\n")
    finally:
        writer.close()


@pytest.mark.parametrize("path", ["/admin/actions/reset-spend", "/admin/reload"])
async def test_a_body_declared_past_the_limit_is_413_before_a_byte_is_read(start_sidecar: Start, path: str) -> None:
    r = await _admin_sidecar(start_sidecar)
    head = await _declared_but_not_sent(r, path, 10_000_000)
    assert head.startswith(b"HTTP/1.1 413 "), head


async def test_a_chunked_body_past_the_limit_is_413_and_refused_like_the_fronts(start_sidecar: Start) -> None:
    r = await _admin_sidecar(start_sidecar)
    _seed(r)

    async def chunks() -> Any:  # no content-length: the door counts what comes
        yield b'{"name": "wf-1", "pad": "'
        for _ in range(16):
            yield b"x" * 4096
        yield b'"}'

    headers = {"authorization": f"Bearer {ADMIN}", "content-type": "application/json"}
    async with httpx.AsyncClient() as http:
        url = _url(r).replace("/admin/state", "/admin/actions/reset-spend")
        answer = await http.post(url, content=chunks(), headers=headers)
    assert answer.status_code == 413, answer.text
    assert answer.json()["error"]["type"] == "too_large"
    assert "4096 bytes" in answer.json()["error"]["message"]
    assert next(w for w in (await _get(r, ADMIN)).json()["workflows"] if w["workflow"] == "wf-1")["spent_usd"] == 1.25


async def test_a_fault_inside_the_admin_door_is_answered_in_its_own_shape(
    start_sidecar: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = await _admin_sidecar(start_sidecar)
    assert r.app.state_view is not None

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("a bug, not the operator's")

    monkeypatch.setattr(StateView, "reset_spend", broken)  # a frozen view: its class's method
    answer = await _act(r, "reset-spend", "wf-1")
    assert answer.status_code == 500
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["error"]["type"] == "internal_error"
    assert "a bug" not in answer.text  # the details are the log's
