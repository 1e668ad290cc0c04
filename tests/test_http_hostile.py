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
from tests.test_http_openai import HTTP

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
