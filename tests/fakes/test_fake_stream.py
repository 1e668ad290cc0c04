"""Streamed replies on both wires, read with httpx-sse: the same reply as the whole body, event by event."""

from __future__ import annotations

import json
import socket
from typing import Any

import httpx
import pytest

from sidecar.fakes import FakeProvider, ThreadedServer
from sidecar.fakes._sse import split_text

from .helpers import WIRES, chat, script
from .sse import assemble, body_for, events, open_stream, whole

Srv = ThreadedServer[FakeProvider]

SEARCH_OPENAI = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        },
    }
]
SEARCH_ANTHROPIC = [
    {"name": "search", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}
]
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}


def _tools(wire: str) -> dict[str, Any]:
    return {"tools": SEARCH_OPENAI if wire == "openai" else SEARCH_ANTHROPIC}


def _json_mode(wire: str) -> dict[str, Any]:
    if wire == "openai":
        return {"response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": SCHEMA}}}
    return {"output_format": {"type": "json_schema", "schema": SCHEMA}}


# name -> (request extras by wire, preset step or None)
CASES: dict[str, tuple[Any, dict[str, Any] | None]] = {
    "echo": (lambda w: {}, None),
    "tool_call": (_tools, None),
    "json_schema": (_json_mode, None),
    "max_tokens": (lambda w: {"max_tokens": 2}, None),
    "reply_with_tools": (
        lambda w: {},
        {
            "preset": "reply",
            "text": "Let me look.",
            "tool_calls": [{"name": "a", "arguments": {"x": 1}}, {"name": "b"}],
        },
    ),
    "refusal": (lambda w: {}, {"preset": "refusal"}),
    "bad_json": (lambda w: {}, {"preset": "bad_json"}),
    "truncated": (lambda w: {}, {"preset": "truncated"}),
    "content_filter": (lambda w: {}, {"preset": "reply", "finish": "content_filter"}),
}


def _ids_off(a: Any) -> Any:
    a.tool_calls = [{k: v for k, v in c.items() if k != "id"} for c in a.tool_calls]
    a.deltas, a.kinds = [], []
    a.done = False
    return a


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_stream_carries_the_same_reply_as_the_whole_body(
    provider: Srv, client: httpx.Client, wire: str, case: str
) -> None:
    extras, step = CASES[case]
    text = "find the weather in Paris for the next three days"
    if step:
        script(client, provider.url, [step, step], model="m")
    plain = chat(client, provider.url, wire, text, **extras(wire))
    extra = extras(wire) | ({"stream_options": {"include_usage": True}} if wire == "openai" else {})
    streamed = assemble(wire, events(client, provider.url, wire, body_for(wire, text, **extra)))
    assert streamed.done
    assert streamed.error is None
    assert _ids_off(streamed) == _ids_off(whole(wire, plain.json()))


@pytest.mark.parametrize("wire", WIRES)
def test_text_comes_in_several_deltas_that_join_to_the_reply(provider: Srv, client: httpx.Client, wire: str) -> None:
    got = assemble(wire, events(client, provider.url, wire, body_for(wire, "one two three four")))
    assert got.deltas == ["You", " said:", " one", " two", " three", " four"]
    assert got.text == "You said: one two three four"


@pytest.mark.parametrize("wire", WIRES)
def test_tool_calls_stream_as_id_and_name_then_argument_fragments(
    provider: Srv, client: httpx.Client, wire: str
) -> None:
    got = assemble(wire, events(client, provider.url, wire, body_for(wire, "cats and dogs", **_tools(wire))))
    assert [c["name"] for c in got.tool_calls] == ["search"]
    assert json.loads(got.tool_calls[0]["arguments"]) == {"q": "cats and dogs"}
    assert len(got.deltas) > 1
    assert "".join(got.deltas) == got.tool_calls[0]["arguments"]
    prefix = "call_fake" if wire == "openai" else "toolu_fake"
    seq = provider.server.requests()[-1]["seq"]
    assert got.tool_calls[0]["id"] == f"{prefix}{seq:08d}_0"
    assert got.finish == ("tool_calls" if wire == "openai" else "tool_use")


def test_openai_shape_role_chunk_finish_usage_and_done(provider: Srv, client: httpx.Client) -> None:
    body = body_for("openai", "hi", stream_options={"include_usage": True})
    chunks = [e.json() for e in events(client, provider.url, "openai", body) if e.data != "[DONE]"]
    first, finish, usage = chunks[0], chunks[-2], chunks[-1]
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": "", "refusal": None}
    assert finish["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}
    assert usage["choices"] == []
    assert set(usage["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details",
                                   "completion_tokens_details"}  # fmt: skip
    assert all(c["usage"] is None for c in chunks[:-1])  # every chunk but the last says "usage": null
    assert len({c["id"] for c in chunks}) == 1
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "m" for c in chunks)


def test_openai_without_include_usage_sends_no_usage(provider: Srv, client: httpx.Client) -> None:
    evs = events(client, provider.url, "openai", body_for("openai", "hi"))
    assert evs[-1].data == "[DONE]"
    chunks = [e.json() for e in evs[:-1]]
    assert all("usage" not in c for c in chunks)
    assert all(c["choices"] for c in chunks)


def test_anthropic_event_sequence(provider: Srv, client: httpx.Client) -> None:
    body = body_for("anthropic", "hi", tools=SEARCH_ANTHROPIC)
    script(
        client, provider.url, [{"preset": "reply", "text": "Looking.", "tool_calls": [{"name": "search"}]}], model="m"
    )
    evs = events(client, provider.url, "anthropic", body)
    names = [e.event for e in evs]
    assert names == [
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    start = evs[0].json()["message"]
    assert (start["role"], start["content"], start["stop_reason"]) == ("assistant", [], None)
    assert start["usage"]["output_tokens"] == 1
    tool = evs[5].json()["content_block"]
    assert (tool["type"], tool["name"], tool["input"]) == ("tool_use", "search", {})
    final = evs[-2].json()
    assert final["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert final["usage"]["output_tokens"] >= 1


@pytest.mark.parametrize("wire", WIRES)
def test_stream_response_head(provider: Srv, client: httpx.Client, wire: str) -> None:
    with open_stream(client, provider.url, wire, body_for(wire)) as source:
        resp = source.response
        assert resp.status_code == 200
        assert resp.headers["content-type"] == "text/event-stream; charset=utf-8"
        assert resp.headers["transfer-encoding"] == "chunked"
        assert "content-length" not in resp.headers
        assert ("x-request-id" if wire == "openai" else "request-id") in resp.headers
        list(source.iter_sse())
    record = provider.server.requests()[-1]
    assert (record["stream"], record["stream_fault"], record["status_sent"]) == (True, None, 200)
    assert record["chunks_sent"] >= 5


@pytest.mark.parametrize("wire", WIRES)
def test_events_are_sent_as_they_come_not_at_the_end(provider: Srv, client: httpx.Client, wire: str) -> None:
    # The stream stalls for good after two deltas: a client only sees those if each event was flushed.
    script(client, provider.url, [{"stream_fault": "stall", "after_deltas": 2}], model="m")
    seen = []
    timeout = httpx.Timeout(5.0, read=0.5)
    with (
        open_stream(client, provider.url, wire, body_for(wire, "a b c d"), timeout=timeout) as source,
        pytest.raises(httpx.ReadTimeout),
    ):
        seen.extend(source.iter_sse())
    got = assemble(wire, seen)
    assert got.deltas == ["You", " said:"]
    assert (got.finish, got.done) == (None, False)
    provider.server.wait_for(lambda rs: rs[-1]["client_disconnected"], timeout=5)


@pytest.mark.parametrize("wire", WIRES)
def test_keep_alive_after_a_complete_stream(provider: Srv, client: httpx.Client, wire: str) -> None:
    before = provider.server.connections_accepted
    for _ in range(3):
        assert assemble(wire, events(client, provider.url, wire, body_for(wire))).done
    assert chat(client, provider.url, wire).status_code == 200
    assert provider.server.connections_accepted - before <= 1


def test_http10_client_gets_a_close_delimited_stream(provider: Srv) -> None:
    payload = json.dumps(body_for("openai", "hi")).encode()
    head = (
        "POST /v1/chat/completions HTTP/1.0\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", provider.port), timeout=5) as sock:
        sock.sendall(head.encode() + payload)
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    head_bytes, _, body = raw.partition(b"\r\n\r\n")
    assert head_bytes.startswith(b"HTTP/1.1 200")
    assert b"transfer-encoding" not in head_bytes.lower()
    assert body.endswith(b"data: [DONE]\n\n")


@pytest.mark.parametrize(
    "text", ["", "one", "You said:  two  spaces", "a\nnew line\n", "averyveryverylongwordindeed ok", " lead", "trail  "]
)
def test_split_text_joins_back(text: str) -> None:
    assert "".join(split_text(text)) == text
    assert all(p.strip() for p in split_text(text.strip()))
    assert "".join(split_text(text, 3)) == text
    assert all(len(p) <= 3 for p in split_text(text, 3))
