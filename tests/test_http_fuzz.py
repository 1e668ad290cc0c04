"""Fuzzing the HTTP doors with hypothesis, as tests/test_fuzz.py fuzzes the gRPC port: never a 500.

    door                    what is generated                                          what must hold
    /v1/chat/completions,   bodies of the format's keys with values of every JSON       no 500; every answer JSON (or
    /v1/messages            type, lone surrogate escapes in strings and keys, deep      an event stream for a stream
                            nesting; the envelope's headers with other scripts'         that started), in the door's
                            digits, thousands of digits, huge values; wrong content     error shape when it fails;
                            types                                                       the process lives
    /mcp                    JSON-RPC requests (tools/call, tools/list) with the same    no 500; a JSON-RPC error or
                            values; deep bodies                                         result

One real ``sidecar serve`` process for the module, its gRPC port and ``http.listen`` on loopback,
with the fuzz config of tests/test_fuzz.py (the project's fakes behind it, quick to fail).
Derandomized, no database, bounded (``SIDECAR_FUZZ_EXAMPLES`` scales it, as there): a few
hundred requests, seconds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from sidecar.fakes import FakeProvider, FakeToolBackend, ThreadedServer
from tests.test_fuzz import Served, _free_port, fuzz, fuzz_config

TIMEOUT_S = 10.0
"""Every request's timeout: an answer past it is a hang."""
OPENAI_KEYS = ["model", "messages", "role", "content", "type", "text", "temperature", "tools", "stream", "n",
               "tool_choice", "response_format", "tool_calls", "id", "function", "name", "arguments",
               "max_tokens", "stream_options", "image_url", "url"]  # fmt: skip
ANTHROPIC_KEYS = ["model", "messages", "max_tokens", "system", "role", "content", "type", "text", "tools",
                  "input_schema", "tool_choice", "stream", "thinking", "tool_use", "id", "input"]  # fmt: skip
MODELS = ["local-gpt", "local-claude", "nope"]
LONE = ["\ud800", "\udfff", "a\udc00b", "\ud83d"]


def _settings(share: float = 1.0) -> Any:
    return fuzz(share)


# ----------------------------------------------------------------------------- the sidecar under test


@pytest.fixture(scope="module")
def http_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of one ``sidecar serve`` process with its HTTP port on."""
    tmp = tmp_path_factory.mktemp("http-fuzz")
    with ThreadedServer(FakeProvider()) as provider, ThreadedServer(FakeToolBackend()) as backend:
        cfg = fuzz_config(provider.url, backend.url)
        port = _free_port()
        cfg["http"] = {"listen": f"127.0.0.1:{port}"}
        config_path = tmp / "http-fuzz.yaml"
        config_path.write_text(yaml.safe_dump(cfg))
        served = Served(config_path, tmp / "sidecar.log")
        served.start()
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            served.stop()


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
def test_the_anthropic_front_answers_every_body_and_header_precisely(
    http_served: str, body: bytes, sent: dict[bytes, bytes]
) -> None:
    _post(http_served, "/v1/messages", body, sent)


@st.composite
def rpc_bodies(draw: st.DrawFn) -> bytes:
    if draw(st.integers(0, 4)) == 0:
        return ("[" * draw(st.integers(900, 120_000))).encode()
    params = {"name": draw(st.one_of(st.sampled_from(["fetch", "search", *LONE]), texts)),
              "arguments": draw(values(["id", "query", "q"]))}  # fmt: skip
    method = draw(st.sampled_from(["tools/call", "tools/call", "tools/list", *LONE]))
    message = {"jsonrpc": "2.0", "id": draw(st.one_of(st.integers(0, 99), texts)), "method": method, "params": params}
    return json.dumps(message).encode()


@_settings(0.4)
@given(body=rpc_bodies(), sent=headers())
def test_the_mcp_front_answers_every_request_as_json_rpc(
    http_served: str, body: bytes, sent: dict[bytes, bytes]
) -> None:
    sent[b"content-type"] = b"application/json"
    _post(http_served, "/mcp", body, sent)
