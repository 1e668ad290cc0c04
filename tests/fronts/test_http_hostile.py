"""Hostile bodies and headers on the model fronts: a precise 400 naming what is wrong, never a 5xx.

Whatever a caller sends, the fronts answer before any upstream call with the format's error shape
and an INVALID_INPUT Failure in ``error.sidecar``; nothing reaches the provider.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.conftest import Start
from tests.fronts.test_http_openai import HTTP

DEEP = "[" * 100_000 + "]" * 100_000
USER = [{"role": "user", "content": "hi"}]
OPENAI_BODIES: list[Any] = [
    [],
    "a string",
    None,
    {"messages": USER},
    {"model": "gpt"},
    {"model": "gpt", "messages": "hi"},
    {"model": "gpt", "messages": [7]},
    {"model": "gpt", "messages": [{"role": "user", "content": {"text": "hi"}}]},
    {"model": "gpt", "messages": USER, "max_tokens": "many"},
    {"model": "gpt", "messages": USER, "max_tokens": -1},
    {"model": "gpt", "messages": USER, "max_tokens": 10**30},
    {"model": "gpt", "messages": USER, "temperature": "hot"},
    {"model": "gpt", "messages": USER, "tools": {"name": "x"}},
    {"model": "gpt", "messages": USER, "tools": [{"type": "function", "function": {"name": "x", "parameters": 7}}]},
    {"model": "gpt", "messages": USER, "response_format": {"type": "json_schema", "json_schema": {"schema": 7}}},
    {"model": "gpt", "messages": USER, "response_format": "json"},
    {"model": "gpt", "messages": [{"role": "assistant", "tool_calls": [{"function": 7}]}]},
]
ANTHROPIC_BODIES: list[Any] = [
    {"model": "claude", "max_tokens": 5},
    {"model": "claude", "max_tokens": 5, "messages": [{"role": "user", "content": 7}]},
    {"model": "claude", "max_tokens": 5, "messages": [{"role": "assistant", "content": [{"type": "tool_use"}]}]},
    {"model": "claude", "max_tokens": 5, "messages": USER, "system": [{"type": "image"}]},
    {"model": "claude", "max_tokens": 5, "messages": USER, "output_config": "json"},
    {"model": "claude", "max_tokens": 5, "messages": USER, "tools": [{"input_schema": {}}]},
    {"model": "claude", "max_tokens": 5, "messages": USER, "stream": 1},
    {"model": "claude", "max_tokens": 0, "messages": USER},
    {"model": "claude", "max_tokens": -3, "messages": USER},
]


async def _post(url: str, body: Any, raw: bytes | None = None, **headers: str) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        content = raw if raw is not None else json.dumps(body).encode()
        return await http.post(url, content=content, headers={"content-type": "application/json", **headers})


def _refused(answer: httpx.Response) -> dict[str, Any]:
    assert answer.status_code in (400, 413), answer.text
    error = answer.json()["error"]
    assert error["sidecar"]["kind"] == "INVALID_INPUT"
    assert error["sidecar"]["correctable"] is True
    assert len(answer.text) < 20_000  # what is echoed of the caller is bounded
    return dict(error)


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
async def test_hostile_bodies_are_a_precise_bad_request(start_sidecar: Start, path: str) -> None:
    r = await start_sidecar(http=HTTP)
    assert r.app.http is not None
    url = f"http://127.0.0.1:{r.app.http.port}{path}"
    bodies = OPENAI_BODIES if path.endswith("completions") else ANTHROPIC_BODIES
    for body in bodies:
        _refused(await _post(url, body))
    for raw in (b"", b"\xff\xfe", DEEP.encode(), b'{"model": "gpt", "messages": [', b"1e999999"):
        _refused(await _post(url, None, raw))
    unknown = await _post(url, {"model": "x" * 100_000, "max_tokens": 5, "messages": USER})
    assert unknown.status_code == 404
    assert len(unknown.text) < 20_000  # the id is echoed cut, with its length
    assert r.provider.requests() == []


async def test_other_paths_and_methods_are_the_routers_404_and_405(start_sidecar: Start) -> None:
    r = await start_sidecar(http=HTTP)
    assert r.app.http is not None
    base = f"http://127.0.0.1:{r.app.http.port}"
    async with httpx.AsyncClient() as http:
        assert (await http.get(f"{base}/v1/chat/completions")).status_code == 405
        assert (await http.post(f"{base}/v1/embeddings", json={})).status_code == 404


# ---------------------------------------------------------------- text no encoder writes, digits of other scripts

LONE = "\ud800"
"""A lone surrogate: ``json.dumps`` writes it as the escape ``\\ud800``, which ``json.loads`` reads back
as a one-character string UTF-8 cannot encode."""
CALLED = [
    {"role": "user", "content": "hi"},
    {
        "role": "assistant",
        "tool_calls": [{"id": LONE, "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    },
]
OPENAI_LONE: list[tuple[str, dict[str, Any]]] = [
    ("model", {"model": LONE, "messages": USER}),
    ("messages[0].role", {"model": "gpt", "messages": [{"role": LONE, "content": "hi"}]}),
    ("messages[0].content", {"model": "gpt", "messages": [{"role": "user", "content": LONE}]}),
    ("messages[0].content[0].type", {"model": "gpt", "messages": [{"role": "user", "content": [{"type": LONE}]}]}),
    ("messages[1].tool_calls[0].id", {"model": "gpt", "messages": CALLED}),
    *[(key, {"model": "gpt", "messages": USER, key: LONE}) for key in ("temperature", "tools", "stream", "n")],
    *[(key, {"model": "gpt", "messages": USER, key: LONE}) for key in ("tool_choice", "response_format")],
    (f"a{LONE}", {"model": "gpt", "messages": USER, f"a{LONE}": 1}),
]
ANTHROPIC_LONE: list[tuple[str, dict[str, Any]]] = [
    ("model", {"model": LONE, "max_tokens": 5, "messages": USER}),
    ("messages", {"model": "claude", "max_tokens": 5, "messages": LONE}),
    ("messages[0].content", {"model": "claude", "max_tokens": 5, "messages": [{"role": "user", "content": LONE}]}),
    ("system", {"model": "claude", "max_tokens": 5, "messages": USER, "system": f"be brief {LONE}"}),
]


def _names(error: dict[str, Any], path: str) -> None:
    shown = path.replace(LONE, "\\ud800")
    assert f"'{shown}'" in error["sidecar"]["message"], error
    assert error["sidecar"]["failure"]["invalid_input"]["parameter"] == shown


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
async def test_a_lone_surrogate_anywhere_in_a_body_is_a_bad_request_naming_its_path(
    start_sidecar: Start, path: str
) -> None:
    r = await start_sidecar(http=HTTP)
    assert r.app.http is not None
    url = f"http://127.0.0.1:{r.app.http.port}{path}"
    for where, body in OPENAI_LONE if path.endswith("completions") else ANTHROPIC_LONE:
        answer = await _post(url, body)
        assert answer.headers["content-type"] == "application/json"
        error = _refused(answer)
        _names(error, where)
        if path.endswith("completions"):
            assert error["param"] == where.replace(LONE, "\\ud800")
    assert r.provider.requests() == []


@pytest.mark.parametrize("value", [b"\xb2", b"\xd9\xa3", b"1" * 5_000, b"-1", b"101", b"3.0"])
async def test_a_retry_budget_header_of_other_digits_or_thousands_of_them_is_a_bad_request(
    start_sidecar: Start, value: bytes
) -> None:
    r = await start_sidecar(http=HTTP)
    assert r.app.http is not None
    url = f"http://127.0.0.1:{r.app.http.port}/v1/chat/completions"
    async with httpx.AsyncClient() as http:
        answer = await http.post(
            url, json={"model": "gpt", "messages": USER}, headers={b"x-sidecar-upstream-retries": value}
        )
    error = _refused(answer)
    assert error["param"] == "header x-sidecar-upstream-retries"
    assert r.provider.requests() == []


@pytest.mark.parametrize("value", [b"\xb2", b"\xd9\xa3", b"9" * 5_000, b"nan", b"inf", b"0"])
async def test_a_timeout_header_of_other_digits_is_a_bad_request(start_sidecar: Start, value: bytes) -> None:
    r = await start_sidecar(http=HTTP)
    assert r.app.http is not None
    url = f"http://127.0.0.1:{r.app.http.port}/v1/messages"
    async with httpx.AsyncClient() as http:
        body = {"model": "claude", "max_tokens": 5, "messages": USER}
        answer = await http.post(url, json=body, headers={b"x-sidecar-timeout-s": value})
    _refused(answer)
    assert "x-sidecar-timeout-s" in answer.json()["error"]["message"]


MCP_ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


async def test_the_mcp_front_answers_a_deep_body_and_a_lone_surrogate_as_json_rpc_errors(start_sidecar: Start) -> None:
    r = await start_sidecar(http=HTTP)
    assert r.app.http is not None
    url = f"http://127.0.0.1:{r.app.http.port}/mcp"
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": LONE, "arguments": {}}}
    async with httpx.AsyncClient() as http:
        deep = await http.post(url, content=("[" * 100_000).encode(), headers=MCP_ACCEPT)
        named = await http.post(url, content=json.dumps(call).encode(), headers=MCP_ACCEPT)
        method = await http.post(url, content=json.dumps({**call, "method": LONE}).encode(), headers=MCP_ACCEPT)
    assert deep.status_code == 400
    assert deep.json()["error"]["code"] == -32700
    assert named.status_code == 400
    assert named.json()["id"] == 3
    assert named.json()["error"]["code"] == -32602
    assert "'params.name'" in named.json()["error"]["message"]
    assert method.json()["error"]["code"] == -32600
    assert r.backend.requests() == []


async def test_a_fault_inside_a_door_is_a_system_failure_in_the_doors_shape(
    start_sidecar: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = await start_sidecar(http=HTTP)
    assert r.app.http is not None
    assert r.app.models is not None
    base = f"http://127.0.0.1:{r.app.http.port}"

    async def broken(*_args: Any) -> Any:
        raise RuntimeError("a bug, not the caller's")

    monkeypatch.setattr(r.app.models, "call", broken)
    async with httpx.AsyncClient() as http:
        openai_ = await http.post(f"{base}/v1/chat/completions", json={"model": "gpt", "messages": USER})
        anthropic_ = await http.post(f"{base}/v1/messages", json={"model": "claude", "max_tokens": 5, "messages": USER})
    for answer in (openai_, anthropic_):
        assert answer.status_code == 500
        assert answer.headers["content-type"] == "application/json"
        assert answer.headers["x-should-retry"] == "false"
        assert answer.json()["error"]["sidecar"]["kind"] == "SYSTEM"
        assert "a bug" not in answer.text  # the details are the log's
    assert openai_.json()["error"]["type"] == "server_error"
    assert anthropic_.json()["type"] == "error"
    assert anthropic_.json()["error"]["type"] == "api_error"


# ---------------------------------------------------------------- values of the wrong type: a word looked up, text read

CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
USE = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}
WRONG_TYPED: list[tuple[str, str, dict[str, Any]]] = [
    # a caller's object or list looked up among words: TypeError (unhashable), answered 500 (tests/unit/
    # test_front_hostile.py sweeps every position of every format)
    ("/v1/messages", "tool_choice.type", {"tool_choice": {"type": {}}}),
    ("/v1/messages", "tool_choice.type", {"tool_choice": {"type": []}}),
    ("/v1/messages", "tool_choice.type", {"tool_choice": {"type": ["auto"]}}),
    ("/v1/messages", "tool_choice", {"tool_choice": []}),
    # an empty object read as absent, an object read as its Python repr, a boolean's word read as false
    ("/v1/messages", "messages[0].content[0].cache_control.ttl",
     {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi",
                                                 "cache_control": {"type": "ephemeral", "ttl": {}}}]}]}),
    ("/v1/messages", "messages[1].content[0].id",
     {"messages": [*USER, {"role": "assistant", "content": [{**USE, "id": {"a": 1}}]}]}),
    ("/v1/messages", "messages[2].content[0].tool_use_id",
     {"messages": [*USER, {"role": "assistant", "content": [USE]},
                   {"role": "user", "content": [{**RESULT, "tool_use_id": 7}]}]}),
    ("/v1/messages", "messages[2].content[0].is_error",
     {"messages": [*USER, {"role": "assistant", "content": [USE]},
                   {"role": "user", "content": [{**RESULT, "is_error": "yes"}]}]}),
    ("/v1/messages", "tools[0].description", {"tools": [{"name": "f", "description": 7, "input_schema": {}}]}),
    ("/v1/chat/completions", "messages[1].tool_calls[0].id",
     {"messages": [*USER, {"role": "assistant", "tool_calls": [{**CALL, "id": {}}]}]}),
    ("/v1/chat/completions", "messages[1].tool_calls[0].type",
     {"messages": [*USER, {"role": "assistant", "tool_calls": [{**CALL, "type": "custom"}]}]}),
    ("/v1/chat/completions", "messages[2].tool_call_id",
     {"messages": [*USER, {"role": "assistant", "tool_calls": [CALL]},
                   {"role": "tool", "tool_call_id": ["call_1"], "content": "ok"}]}),
    ("/v1/chat/completions", "tools[0].function.description",
     {"tools": [{"type": "function", "function": {"name": "f", "description": {"a": 1}}}]}),
    ("/v1/chat/completions", "n", {"n": True}),
    ("/v1/chat/completions", "stream_options.include_usage",
     {"stream": True, "stream_options": {"include_usage": "yes"}}),
    ("/v1/responses", "reasoning.summary", {"reasoning": {"effort": "low", "summary": 7}}),
    ("/v1/responses", "tools[0].description", {"tools": [{"type": "function", "name": "f", "description": []}]}),
]  # fmt: skip


@pytest.mark.parametrize(("path", "param", "fields"), WRONG_TYPED, ids=[f"{p} {n}" for p, n, _ in WRONG_TYPED])
async def test_a_value_of_the_wrong_type_is_a_bad_request_naming_it(
    start_sidecar: Start, path: str, param: str, fields: dict[str, Any]
) -> None:
    r = await start_sidecar(http=HTTP)
    assert r.app.http is not None
    url = f"http://127.0.0.1:{r.app.http.port}{path}"
    base: dict[str, Any] = {"model": "claude" if path == "/v1/messages" else "gpt", "messages": USER}
    if path == "/v1/messages":
        base["max_tokens"] = 5
    if path == "/v1/responses":
        base = {"model": "gpt", "input": "hi"}
    answer = await _post(url, {**base, **fields})
    error = _refused(answer)
    assert error["sidecar"]["failure"]["invalid_input"]["parameter"] == param, error
    assert r.provider.requests() == []


@pytest.mark.parametrize("request_id", [{}, [], [1], 2.5, True, None])
async def test_an_mcp_request_whose_id_is_no_string_or_integer_is_an_invalid_request(
    start_sidecar: Start, request_id: Any
) -> None:
    r = await start_sidecar(http=HTTP)
    assert r.app.http is not None
    url = f"http://127.0.0.1:{r.app.http.port}/mcp"
    call = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": "search", "arguments": {}}}
    async with httpx.AsyncClient() as http:
        answer = await http.post(url, content=json.dumps(call).encode(), headers=MCP_ACCEPT)
    assert answer.status_code == 400, answer.text  # was 202 and no body: read as a notification, the call dropped
    assert answer.json()["id"] is None
    assert answer.json()["error"]["code"] == -32600
    assert "'id'" in answer.json()["error"]["message"]
    assert answer.json()["error"]["data"]["parameter"] == "id"
    assert r.backend.requests() == []
