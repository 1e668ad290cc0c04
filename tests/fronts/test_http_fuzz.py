"""Fuzzing the HTTP doors with hypothesis, as tests/fronts/test_fuzz.py fuzzes the gRPC port: never a 500.

    door                    what is generated                                          what must hold
    /v1/chat/completions,   bodies of the format's keys with values of every JSON       no 500; every answer JSON (or
    /v1/messages            type, lone surrogate escapes in strings and keys, deep      an event stream for a stream
                            nesting; the envelope's headers with other scripts'         that started), in the door's
                            digits, thousands of digits, huge values; wrong content     error shape when it fails;
                            types                                                       the process lives
    /v1/chat/completions,   a request of every shape the format carries               the same
    /v1/responses,          (tests/unit/shapes.py) with any JSON value at any of its
    /v1/messages            positions (tests/unit/test_front_hostile.py's)
    /mcp                    JSON-RPC requests (tools/call, tools/list) with the same    no 500; a JSON-RPC error or
                            values, any value as the id, method or tool name; deep      result
                            bodies
    GET /admin/state,       no token, a wrong one, an agent's, an operator's (and       the admin door's own status
    POST /admin/actions/*,  odd Authorization values); bodies of every JSON type,       (``ADMIN_STATUSES``) in its
    POST /admin/reload      {"name": ...} with any value, lone surrogates, deep,        JSON shape: 200, or 4xx with
                            not JSON, huge (past the door's 4 KiB: 413); wrong          {"error": {"type", "message"}}
                            content types

One real ``sidecar serve`` process for the module, its gRPC port and ``http.listen`` on loopback,
with the fuzz config of tests/fronts/test_fuzz.py (the project's fakes behind it, quick to fail), an
agent's token (``server.auth``) and an operator's (``server.admin``). After each test its log
tells of no fault (``faults``: a fault answered in a door's shape still logs its traceback).
Derandomized, no database, bounded (``SIDECAR_FUZZ_EXAMPLES`` scales it, as there): a few
hundred requests, seconds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sidecar.fakes import FakeProvider, FakeToolBackend, ThreadedServer
from tests.fronts.test_fuzz import Served, _free_port, fuzz, fuzz_config
from tests.unit.test_front_hostile import positions, with_value

TIMEOUT_S = 10.0
"""Every request's timeout: an answer past it is a hang."""
OPENAI_KEYS = ["model", "messages", "role", "content", "type", "text", "temperature", "tools", "stream", "n",
               "tool_choice", "response_format", "tool_calls", "id", "function", "name", "arguments",
               "max_tokens", "stream_options", "image_url", "url"]  # fmt: skip
ANTHROPIC_KEYS = ["model", "messages", "max_tokens", "system", "role", "content", "type", "text", "tools",
                  "input_schema", "tool_choice", "stream", "thinking", "tool_use", "id", "input"]  # fmt: skip
MODELS = ["local-gpt", "local-claude", "nope"]
LONE = ["\ud800", "\udfff", "a\udc00b", "\ud83d"]
AGENT = "fuzz-agent-token-0123456789abcdef"
ADMIN = "fuzz-admin-token-0123456789abcdef"
TOKEN_ENV = {"FUZZ_AGENT_TOKEN": AGENT, "FUZZ_ADMIN_TOKEN": ADMIN}


def _settings(share: float = 1.0) -> Any:
    """tests/fronts/test_fuzz.py's profile; ``http_served`` is per test, not per example, on purpose: the log read
    after all of a test's examples."""
    profile = fuzz(share)
    checks = [*profile.suppress_health_check, HealthCheck.function_scoped_fixture]
    return settings(profile, suppress_health_check=checks)


# ----------------------------------------------------------------------------- the sidecar under test


@dataclass(frozen=True)
class HttpServed:
    base: str
    """``http://127.0.0.1:PORT``"""
    log: Path


@pytest.fixture(scope="module")
def http_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServed]:
    """One ``sidecar serve`` process with its HTTP port on, an agent's token and an operator's."""
    tmp = tmp_path_factory.mktemp("http-fuzz")
    with (
        ThreadedServer(FakeProvider()) as provider,
        ThreadedServer(FakeToolBackend()) as backend,
        pytest.MonkeyPatch.context() as env,
    ):
        for name, value in TOKEN_ENV.items():
            env.setenv(name, value)  # read by the process at start: tokens come from the environment
        cfg = fuzz_config(provider.url, backend.url)
        cfg["server"] |= {"auth": {"tokens": ["${FUZZ_AGENT_TOKEN}"]}, "admin": {"tokens": ["${FUZZ_ADMIN_TOKEN}"]}}
        port = _free_port()
        cfg["http"] = {"listen": f"127.0.0.1:{port}"}
        config_path = tmp / "http-fuzz.yaml"
        config_path.write_text(yaml.safe_dump(cfg))
        served = Served(config_path, tmp / "sidecar.log")
        served.start()
        try:
            yield HttpServed(f"http://127.0.0.1:{port}", served.log_path)
        finally:
            served.stop()


def faults(logged: str) -> list[str]:
    """The lines of a log that tell of a fault: a SYSTEM failure (``taxonomy.as_failure``'s "unexpected
    error", with its traceback), an ERROR of uvicorn or asyncio (an exception nobody caught), or a
    traceback or error that is not the sidecar's JSON (written past the logging). A failure of the caller's
    request logged with its stack (``log_failure``: MODEL_NOT_FOUND at ERROR) is no fault."""
    out = []
    for line in logged.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            if "Traceback" in line or "Error" in line:
                out.append(line)
            continue
        message, logger = str(record.get("message", "")), str(record.get("logger", ""))
        if (
            message.startswith("unexpected error")
            or record.get("failure_kind") == "SYSTEM"
            or (record.get("level") == "ERROR" and logger.split(".", maxsplit=1)[0] in ("uvicorn", "asyncio"))
        ):
            out.append(line)
    return out


@pytest.fixture
def http_served(http_process: HttpServed) -> Iterator[str]:
    """The process's base URL; after the test, what it logged meanwhile tells of no fault (``faults``)."""
    before = http_process.log.stat().st_size
    yield http_process.base
    with http_process.log.open("rb") as log:
        log.seek(before)
        logged = log.read().decode(errors="replace")
    found = faults(logged)
    assert not found, "\n".join(line[:1500] for line in found[:5])


# ----------------------------------------------------------------------------- inputs

texts = st.one_of(st.text(max_size=20), st.sampled_from(LONE), st.sampled_from([*MODELS, "user", "assistant"]))
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
)


def values(keys: list[str]) -> st.SearchStrategy[Any]:
    key = st.one_of(st.sampled_from(keys), st.sampled_from(LONE), st.text(max_size=5))
    return st.recursive(
        scalars,
        lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(key, inner, max_size=4)),
        max_leaves=12,
    )


@st.composite
def bodies(draw: st.DrawFn, keys: list[str], anthropic: bool) -> bytes:
    """A body close enough to the format to get past its first checks, with hostile values in it."""
    shape = draw(st.sampled_from(["near", "near", "near", "deep", "raw"]))
    if shape == "deep":
        depth = draw(st.integers(900, 120_000))
        opener = draw(st.sampled_from(["[", '{"a":', '{"messages":[']))
        return (opener * depth).encode()
    if shape == "raw":
        return draw(st.binary(max_size=64))
    body: dict[str, Any] = {
        "model": draw(st.sampled_from(MODELS + LONE)),
        "messages": [{"role": "user", "content": "hi"}],
    }
    if anthropic:
        body["max_tokens"] = 16
    for name in draw(st.lists(st.sampled_from(keys), max_size=3)):
        body[name] = draw(values(keys))
    return json.dumps(body).encode()  # ensure_ascii: a lone surrogate is written as its escape


header_values = st.one_of(
    st.sampled_from(["\xb2", "\xb9", "1" * 5_000, "9" * 5_000, "nan", "-1", "1e309", "0x10", "3", "0.5"]),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=40),
    st.integers(100, 12_000).map(lambda n: "7" * n),
)


@st.composite
def headers(draw: st.DrawFn) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {
        b"content-type": draw(
            st.sampled_from([b"application/json", b"text/plain", b"application/x-www-form-urlencoded", b"\xb2", b""])
        ),
        b"accept": b"application/json, text/event-stream",
    }
    for name in draw(st.lists(st.sampled_from(
        ["x-sidecar-upstream-retries", "x-sidecar-timeout-s", "x-sidecar-mid-stream", "x-sidecar-job-id",
         "traceparent", "anthropic-version"]), max_size=3)):  # fmt: skip
        out[name.encode()] = draw(header_values).encode("latin-1")
    return out


# ----------------------------------------------------------------------------- judging an answer


def _judge(answer: httpx.Response, door: str) -> None:
    """Never a 500 for what a caller sent; every answer the door's own (JSON), never a bare text/plain."""
    where = f"{door}: {answer.status_code} {answer.headers.get('content-type')} {answer.text[:300]!r}"
    assert answer.status_code != 500, where
    ctype = answer.headers.get("content-type", "")
    if answer.status_code == 200 and ctype.startswith("text/event-stream"):
        return
    if answer.status_code in (400, 431) and ctype.startswith("text/plain") and "kind" not in answer.text:
        return  # the HTTP parser's own refusal of a header past its limit: before any door
    assert ctype.startswith("application/json"), where
    body = answer.json()
    if door == "/mcp":
        assert body is None or "jsonrpc" in body or "error" in body, where
    elif answer.status_code >= 400:
        assert "error" in body, where


def _post(base: str, door: str, body: bytes, sent: dict[bytes, bytes]) -> None:
    sent = {b"authorization": f"Bearer {AGENT}".encode(), **sent}
    try:
        with httpx.Client(timeout=TIMEOUT_S) as http:  # a fresh connection for each
            answer = http.post(base + door, content=body, headers=list(sent.items()))
    except httpx.LocalProtocolError:
        return  # a header httpx itself will not send: nothing reached the door
    _judge(answer, door)


# ----------------------------------------------------------------------------- the tests


@_settings(0.6)
@given(body=bodies(OPENAI_KEYS, anthropic=False), sent=headers())
def test_the_openai_front_answers_every_body_and_header_precisely(
    http_served: str, body: bytes, sent: dict[bytes, bytes]
) -> None:
    _post(http_served, "/v1/chat/completions", body, sent)


@_settings(0.6)
@given(body=bodies(ANTHROPIC_KEYS, anthropic=True), sent=headers())
@example(  # issue 36: an object in tool_choice.type was looked up among the words (unhashable): a 500
    body=json.dumps({"model": "local-claude", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}],
                     "tool_choice": {"type": {}}}).encode(),
    sent={b"content-type": b"application/json"},
)  # fmt: skip
def test_the_anthropic_front_answers_every_body_and_header_precisely(
    http_served: str, body: bytes, sent: dict[bytes, bytes]
) -> None:
    _post(http_served, "/v1/messages", body, sent)


DOORS = {"openai": ("/v1/chat/completions", "local-gpt"), "openai_responses": ("/v1/responses", "local-gpt"),
         "anthropic": ("/v1/messages", "local-claude")}  # fmt: skip


@st.composite
def changed_requests(draw: st.DrawFn) -> tuple[str, bytes]:
    """A door, and a request of one of its format's shapes with any JSON value at one of its positions."""
    name = draw(st.sampled_from(sorted(DOORS)))
    door, model = DOORS[name]
    body, path, _ = draw(st.sampled_from(positions(name)))
    changed = with_value({**body, "model": model}, path, draw(values(OPENAI_KEYS + ANTHROPIC_KEYS)))
    return door, json.dumps(changed).encode()


@_settings(0.6)
@given(request=changed_requests())
@example(  # issue 36: a list in tool_choice.type, as an object there (unhashable): a 500
    request=("/v1/messages", json.dumps({"model": "local-claude", "max_tokens": 5, "tool_choice": {"type": []},
                                         "messages": [{"role": "user", "content": "hi"}]}).encode()),
)  # fmt: skip
def test_every_front_answers_any_value_at_any_position_of_its_requests(
    http_served: str, request: tuple[str, bytes]
) -> None:
    door, body = request
    _post(http_served, door, body, {b"content-type": b"application/json"})


@st.composite
def rpc_bodies(draw: st.DrawFn) -> bytes:
    if draw(st.integers(0, 4)) == 0:
        return ("[" * draw(st.integers(900, 120_000))).encode()
    params = {"name": draw(st.one_of(st.sampled_from(["fetch", "search", *LONE]), texts, values(["name"]))),
              "arguments": draw(values(["id", "query", "q"]))}  # fmt: skip
    method = draw(st.one_of(st.sampled_from(["tools/call", "tools/call", "tools/list", *LONE]), values(["method"])))
    request_id = draw(st.one_of(st.integers(0, 99), texts, values(["id"])))  # any JSON value: the SDK's to refuse
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return json.dumps(message).encode()


@_settings(0.4)
@given(body=rpc_bodies(), sent=headers())
def test_the_mcp_front_answers_every_request_as_json_rpc(
    http_served: str, body: bytes, sent: dict[bytes, bytes]
) -> None:
    sent[b"content-type"] = b"application/json"
    _post(http_served, "/mcp", body, sent)


# ----------------------------------------------------------------------------- the admin door

ACTIONS = ["close-circuit", "lift-pause", "reset-spend"]
ADMIN_LIMIT = 4096
"""The admin door's body limit (``admin_front.MAX_BODY_BYTES``)."""
ADMIN_STATUSES = {
    "GET /admin/state": {200},
    "POST /admin/actions": {200, 400, 404, 413},
    "POST /admin/reload": {200, 400, 413, 422},
}
"""What an operator's token is answered, by door (with any other token: 401)."""

authorizations = st.one_of(
    st.sampled_from([None, f"Bearer {ADMIN}", f"Bearer {ADMIN}", f"Bearer {AGENT}", "Bearer not-a-token-0123456789",
                     f"bearer  {ADMIN} ", f"Basic {ADMIN}", "Bearer", "Bearer \xb2", f"Bearer {ADMIN}\xff"]),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=40),
)  # fmt: skip
names = st.one_of(values(["name", "type"]), st.sampled_from(["gpt", "local-gpt", "docs", "wf-1", *LONE]), texts)


class Body(bytes):
    """A body whose repr (in a failing example's report) is its size and its first bytes, not megabytes."""

    def __repr__(self) -> str:
        return f"Body({len(self)} bytes: {bytes(self[:60])!r})"


def huge(size: int) -> Body:
    return Body(b'{"name": "' + b"x" * size + b'"}')


@st.composite
def admin_bodies(draw: st.DrawFn) -> Body:
    """An admin POST's body: well-formed or not, small or past the door's limit."""
    shape = draw(st.sampled_from(["name", "name", "name", "any", "deep", "raw", "huge", "empty"]))
    if shape == "name":
        body: dict[str, Any] = {"name": draw(names)}
        for key in draw(st.lists(st.sampled_from(["name", "force", "Name", *LONE]), max_size=2)):
            body[key] = draw(values(["name"]))
        return Body(json.dumps(body).encode())  # ensure_ascii: a lone surrogate is written as its escape
    if shape == "any":
        return Body(json.dumps(draw(values(["name"]))).encode())
    if shape == "deep":
        return Body((draw(st.sampled_from(["[", '{"name":'])) * draw(st.integers(300, 4000))).encode())
    if shape == "raw":
        return Body(draw(st.binary(max_size=64)))
    if shape == "huge":
        return huge(draw(st.integers(ADMIN_LIMIT, 2_000_000)))
    return Body(b"")


def _admin(base: str, method: str, path: str, body: bytes, authorization: str | None, ctype: bytes) -> None:
    sent: dict[bytes, bytes] = {b"content-type": ctype}
    if authorization is not None:
        sent[b"authorization"] = authorization.encode("latin-1")
    try:
        with httpx.Client(timeout=TIMEOUT_S) as http:  # a fresh connection for each
            answer = http.request(method, base + path, content=body or None, headers=list(sent.items()))
    except httpx.LocalProtocolError:
        return  # a header httpx itself will not send: nothing reached the door
    door = f"{method} {path}" if not path.startswith("/admin/actions/") else "POST /admin/actions"
    where = f"{door} {authorization!r} {body[:60]!r}: {answer.status_code} {answer.text[:300]!r}"
    assert answer.headers.get("content-type", "").startswith("application/json"), where
    document = answer.json()
    scheme, _, token = (authorization or "").strip().partition(" ")
    admitted = scheme.lower() == "bearer" and token.strip() == ADMIN  # as auth.bearer_token reads it
    if not admitted:
        assert answer.status_code == 401, where
    elif path.startswith("/admin/actions/") and path.rpartition("/")[2] not in ACTIONS:
        assert answer.status_code in (401, 404), where  # no admin path: the caller-token check, or no such action
    else:
        assert answer.status_code in ADMIN_STATUSES[door], where
        if len(body) > ADMIN_LIMIT and method == "POST":  # GET /admin/state reads no body
            assert answer.status_code == 413, where
        elif door == "POST /admin/reload":  # it takes no body: one sent (force in it?) is refused, not dropped
            assert (answer.status_code == 400) is (body.strip() not in (b"", b"{}")), where
    if answer.status_code == 422:  # a reload refused: its outcome (operations.md), not a refusal of the request
        assert document["applied"] is False, where
        assert document["error_type"] in ("config_refused", "workers_not_reported"), where
    elif answer.status_code >= 400:
        error = document["error"]
        assert set(error) == {"type", "message"}, where
        assert isinstance(error["type"], str)
        assert isinstance(error["message"], str)
    if answer.status_code == 401:
        assert document["error"]["type"] == "unauthenticated", where
    if answer.status_code == 200 and door == "POST /admin/actions":
        assert isinstance(document["name"], str), where
        assert document["name"], where


content_types = st.sampled_from([b"application/json", b"text/plain", b"application/x-www-form-urlencoded", b""])


@_settings(0.6)
@given(action=st.sampled_from([*ACTIONS, "explode", "%ED%A0%80", "%FF"]), body=admin_bodies(),
       authorization=authorizations, ctype=content_types)  # fmt: skip
@example(action="reset-spend", body=b'{"name": "\\ud800"}', authorization=f"Bearer {ADMIN}", ctype=b"application/json")
@example(action="lift-pause", body=b"[" * 4000, authorization=f"Bearer {ADMIN}", ctype=b"application/json")
@example(action="reset-spend", body=huge(10_000_000), authorization=f"Bearer {ADMIN}", ctype=b"application/json")
@example(action="close-circuit", body=b'{"name": "docs"}', authorization=f"Bearer {AGENT}", ctype=b"application/json")
def test_the_admin_actions_answer_every_token_and_body_in_their_shape(
    http_served: str, action: str, body: bytes, authorization: str | None, ctype: bytes
) -> None:
    _admin(http_served, "POST", f"/admin/actions/{action}", body, authorization, ctype)


@_settings(0.3)
@given(body=admin_bodies(), authorization=authorizations, ctype=content_types)
@example(body=huge(10_000_000), authorization=f"Bearer {ADMIN}", ctype=b"application/json")
def test_the_admin_reload_and_state_answer_every_token_and_body_in_their_shape(
    http_served: str, body: bytes, authorization: str | None, ctype: bytes
) -> None:
    _admin(http_served, "GET", "/admin/state", body, authorization, ctype)
    _admin(http_served, "POST", "/admin/reload", body, authorization, ctype)
