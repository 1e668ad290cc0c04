"""Scripted mid-stream faults, read with httpx-sse: each goes wrong where and how the step says."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from httpx_sse import ServerSentEvent

from sidecar.fakes import FakeProvider, ThreadedServer
from sidecar.fakes._brain import Reply
from sidecar.fakes._conversation import Conversation
from sidecar.fakes._http import StreamEnd
from sidecar.fakes._stream import render_stream
from sidecar.fakes._wire import Exchange
from sidecar.providers.formats.anthropic_messages.fake import ANTHROPIC
from sidecar.providers.formats.openai_chat.fake import OPENAI

from .helpers import WIRES, chat, script, text_of
from .sse import assemble, body_for, events, open_stream

Srv = ThreadedServer[FakeProvider]
TEXT = "one two three four five six"  # the brain says "You said: one two three four five six": 8 deltas
DELTAS = ["You", " said:", " one", " two", " three", " four", " five", " six"]


def _read(provider: Srv, client: httpx.Client, wire: str, step: dict[str, Any], **extra: Any) -> list[ServerSentEvent]:
    script(client, provider.url, [step], model="m")
    return events(client, provider.url, wire, body_for(wire, TEXT, **extra))


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("after", [0, 3, 8, 20])
def test_overloaded_after_n_deltas(provider: Srv, client: httpx.Client, wire: str, after: int) -> None:
    evs = _read(provider, client, wire, {"stream_fault": "overloaded", "after_deltas": after})
    got = assemble(wire, evs)
    assert got.deltas == DELTAS[:after]
    assert (got.finish, got.done) == (None, False)
    last = evs[-1]
    if wire == "anthropic":
        assert last.event == "error"
        assert last.json() == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    else:
        assert last.event == "message"
        assert last.json()["error"]["type"] == "overloaded_error"
    assert provider.server.requests()[-1]["stream_fault"] == "overloaded"


@pytest.mark.parametrize("wire", WIRES)
def test_server_error_event_with_a_chosen_message(provider: Srv, client: httpx.Client, wire: str) -> None:
    step = {"stream_fault": "server_error", "after_deltas": 1, "message": "boom", "extra_error_fields": {"x": 1}}
    got = assemble(wire, _read(provider, client, wire, step))
    assert got.error is not None
    assert got.error["type"] == ("api_error" if wire == "anthropic" else "server_error")
    assert (got.error["message"], got.error["x"]) == ("boom", 1)


@pytest.mark.parametrize("wire", WIRES)
def test_overload_then_a_normal_stream_for_the_restart(provider: Srv, client: httpx.Client, wire: str) -> None:
    script(client, provider.url, [{"stream_fault": "overloaded", "after_deltas": 3}, {}], model="m")
    first = assemble(wire, events(client, provider.url, wire, body_for(wire, TEXT)))
    second = assemble(wire, events(client, provider.url, wire, body_for(wire, TEXT)))
    assert (first.deltas, first.error is not None) == (DELTAS[:3], True)
    assert (second.deltas, second.error, second.done) == (DELTAS, None, True)
    assert [r["source"] for r in provider.server.requests()] == ["script", "script"]


@pytest.mark.parametrize("wire", WIRES)
def test_drop_after_n_deltas(provider: Srv, client: httpx.Client, wire: str) -> None:
    script(client, provider.url, [{"stream_fault": "drop", "after_deltas": 2}], model="m")
    seen: list[ServerSentEvent] = []
    with (
        open_stream(client, provider.url, wire, body_for(wire, TEXT)) as source,
        pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"),
    ):
        seen.extend(source.iter_sse())
    assert assemble(wire, seen).deltas == DELTAS[:2]
    record = provider.server.requests()[-1]
    assert (record["status_sent"], record["stream_fault"]) == (200, "drop")


@pytest.mark.parametrize("wire", WIRES)
def test_reset_after_n_deltas(provider: Srv, client: httpx.Client, wire: str) -> None:
    script(client, provider.url, [{"stream_fault": "reset", "after_deltas": 4}], model="m")
    seen: list[ServerSentEvent] = []
    with (
        open_stream(client, provider.url, wire, body_for(wire, TEXT)) as source,
        pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)),
    ):
        seen.extend(source.iter_sse())
    got = assemble(wire, seen).deltas  # an RST may discard what the client had not read yet
    assert got == DELTAS[: len(got)]
    assert len(got) <= 4
    assert provider.server.requests()[-1]["stream_fault"] == "reset"


@pytest.mark.parametrize("wire", WIRES)
def test_stall_for_a_while_then_the_rest(provider: Srv, client: httpx.Client, wire: str) -> None:
    got = assemble(wire, _read(provider, client, wire, {"stream_fault": "stall", "after_deltas": 5, "stall_ms": 30}))
    assert (got.deltas, got.done) == (DELTAS, True)


@pytest.mark.parametrize("wire", WIRES)
def test_stall_for_good_until_the_client_leaves(provider: Srv, client: httpx.Client, wire: str) -> None:
    script(client, provider.url, [{"stream_fault": "stall", "after_deltas": 1}], model="m")
    seen: list[ServerSentEvent] = []
    timeout = httpx.Timeout(5.0, read=0.3)
    with (
        open_stream(client, provider.url, wire, body_for(wire, TEXT), timeout=timeout) as source,
        pytest.raises(httpx.ReadTimeout),
    ):
        seen.extend(source.iter_sse())
    assert assemble(wire, seen).deltas == DELTAS[:1]
    records = provider.server.wait_for(lambda rs: rs[-1]["client_disconnected"], timeout=5)
    assert records[-1]["chunks_sent"] == len(seen)


@pytest.mark.parametrize("wire", WIRES)
def test_end_early_closes_the_body_cleanly_without_the_end(provider: Srv, client: httpx.Client, wire: str) -> None:
    got = assemble(wire, _read(provider, client, wire, {"stream_fault": "end_early", "after_deltas": 3}))
    assert got.deltas == DELTAS[:3]
    assert (got.finish, got.done, got.error) == (None, False, None)


@pytest.mark.parametrize("wire", WIRES)
def test_truncated_stream_finishes_with_length(provider: Srv, client: httpx.Client, wire: str) -> None:
    extra = {"stream_options": {"include_usage": True}} if wire == "openai" else {}
    got = assemble(wire, _read(provider, client, wire, {"stream_fault": "truncated", "after_deltas": 2}, **extra))
    assert (got.deltas, got.done) == (DELTAS[:2], True)
    assert got.finish == ("length" if wire == "openai" else "max_tokens")
    assert got.usage is not None
    assert got.usage["completion_tokens" if wire == "openai" else "output_tokens"] == 3  # "You said:" ≈ 9/4


@pytest.mark.parametrize("wire", WIRES)
def test_garbled_event_is_not_json_and_the_rest_follows(provider: Srv, client: httpx.Client, wire: str) -> None:
    evs = _read(provider, client, wire, {"stream_fault": "garbled", "after_deltas": 2})
    bad = [i for i, e in enumerate(evs) if e.data != "[DONE]" and not _is_json(e.data)]
    assert len(bad) == 1
    good = evs[: bad[0]] + evs[bad[0] + 1 :]
    got = assemble(wire, good)
    assert got.deltas == DELTAS[:2] + DELTAS[3:]  # the third delta is the one that came garbled
    assert got.done


@pytest.mark.parametrize("wire", WIRES)
def test_unknown_event_in_the_middle(provider: Srv, client: httpx.Client, wire: str) -> None:
    evs = _read(provider, client, wire, {"stream_fault": "unknown_event", "after_deltas": 2})
    if wire == "anthropic":
        assert "fake_future_event" in [e.event for e in evs]
    else:
        odd = [e.json() for e in evs if e.data != "[DONE]" and "fake_future_field" in e.json()]
        assert len(odd) == 1
        assert odd[0]["choices"] == []
    got = assemble(wire, evs)
    assert (got.deltas, got.done) == (DELTAS, True)


def test_openai_unknown_event_includes_an_sse_comment(provider: Srv, client: httpx.Client) -> None:
    script(client, provider.url, [{"stream_fault": "unknown_event", "after_deltas": 1}], model="m")
    resp = client.post(provider.url + "/v1/chat/completions", json=body_for("openai", TEXT))
    assert "\n\n: keep-alive\n\n" in resp.text


@pytest.mark.parametrize("wire", WIRES)
def test_non_json_reply_streamed_for_schema_correction(provider: Srv, client: httpx.Client, wire: str) -> None:
    script(client, provider.url, [{"preset": "bad_json"}], model="m")
    got = assemble(wire, events(client, provider.url, wire, body_for(wire, TEXT)))
    assert got.text == "Sure! Here is the answer: {name: 'x'"
    assert got.done
    assert len(got.deltas) > 1


@pytest.mark.parametrize("wire", WIRES)
def test_delta_chars_and_default_after_deltas(provider: Srv, client: httpx.Client, wire: str) -> None:
    got = assemble(wire, _read(provider, client, wire, {"stream_fault": "end_early", "delta_chars": 4}))
    full = "You said: " + TEXT
    pieces = [full[i : i + 4] for i in range(0, len(full), 4)]
    assert got.deltas == pieces[: len(pieces) // 2]  # no after_deltas: half of them


@pytest.mark.parametrize("wire", WIRES)
def test_client_leaving_during_a_delta_delay_is_recorded(provider: Srv, client: httpx.Client, wire: str) -> None:
    script(client, provider.url, [{"delta_delay_ms": 10000}], model="m")
    with (
        open_stream(client, provider.url, wire, body_for(wire, TEXT), timeout=httpx.Timeout(5.0, read=0.2)) as source,
        pytest.raises(httpx.ReadTimeout),
    ):
        list(source.iter_sse())
    record = provider.server.wait_for(lambda rs: rs[-1]["client_disconnected"], timeout=5)[-1]
    assert record["status_sent"] == 200
    assert record["chunks_sent"] >= 1


def test_delta_delay_is_put_before_every_delta_only() -> None:
    ex = Exchange(1, "m", "", Conversation(stream=True))
    openai = render_stream(Reply(text="a b c"), OPENAI, ex, {"delta_delay_ms": 25})
    anthropic = render_stream(Reply(text="a b c"), ANTHROPIC, ex, {"delta_delay_ms": 25})
    assert openai.stream is not None
    assert anthropic.stream is not None
    assert [c.delay_ms for c in openai.stream] == [0, 25, 25, 25, 0, 0]  # role, a, b, c, finish, [DONE]
    # message_start, block start, ping, a, b, c, block stop, message_delta, message_stop
    assert [c.delay_ms for c in anthropic.stream] == [0, 0, 0, 25, 25, 25, 0, 0, 0]


def test_stall_ms_delays_the_event_after_the_cut() -> None:
    ex = Exchange(1, "m", "", Conversation(stream=True))
    resp = render_stream(Reply(text="a b c"), OPENAI, ex, {"stream_fault": "stall", "after_deltas": 1, "stall_ms": 500})
    assert resp.stream is not None
    assert resp.stream_end is StreamEnd.COMPLETE
    assert [c.delay_ms for c in resp.stream] == [0, 0, 500, 0, 0, 0]  # role, "a", then " b" waits


@pytest.mark.parametrize("wire", WIRES)
def test_error_presets_answer_json_even_to_a_stream_request(provider: Srv, client: httpx.Client, wire: str) -> None:
    script(client, provider.url, [{"preset": "rate_limit", "retry_after": "0"}], model="m")
    with open_stream(client, provider.url, wire, body_for(wire)) as source:
        resp = source.response
        resp.read()
    assert resp.status_code == 429
    assert resp.headers["content-type"] == "application/json"
    assert resp.headers["retry-after"] == "0"
    record = provider.server.requests()[-1]
    assert (record["stream"], record["preset"]) == (True, "rate_limit")
    assert "chunks_sent" not in record


@pytest.mark.parametrize("wire", WIRES)
def test_drop_mid_body_fault_on_a_stream(provider: Srv, client: httpx.Client, wire: str) -> None:
    script(client, provider.url, [{"fault": "drop_mid_body"}], model="m")
    with (
        open_stream(client, provider.url, wire, body_for(wire, TEXT)) as source,
        pytest.raises(httpx.RemoteProtocolError),
    ):
        list(source.iter_sse())


@pytest.mark.parametrize("wire", WIRES)
def test_a_request_without_stream_ignores_the_stream_fields(provider: Srv, client: httpx.Client, wire: str) -> None:
    script(client, provider.url, [{"stream_fault": "drop", "after_deltas": 1, "delta_delay_ms": 1}], model="m")
    resp = chat(client, provider.url, wire, TEXT)
    assert resp.status_code == 200
    assert text_of(wire, resp.json()) == "You said: " + TEXT
    record = provider.server.requests()[-1]
    assert "stream" not in record
    assert "chunks_sent" not in record


@pytest.mark.parametrize(
    "step",
    [
        {"stream_fault": "explode"},
        {"after_deltas": 2},
        {"stream_fault": "drop", "after_deltas": -1},
        {"stream_fault": "drop", "after_deltas": "2"},
        {"stream_fault": "overloaded", "stall_ms": 5},
        {"stream_fault": "stall", "stall_ms": -5},
        {"delta_delay_ms": True},
        {"delta_chars": 0},
        {"stream_fault": "drop", "preset": "rate_limit"},
        {"stream_fault": "drop", "status": 500},
        {"stream_fault": "drop", "body": {"x": 1}},
        {"stream_fault": "drop", "fault": "reset"},
    ],
)
def test_bad_stream_steps_are_rejected(provider: Srv, client: httpx.Client, step: dict[str, Any]) -> None:
    resp = client.post(provider.url + "/_fake/script", json={"model": "m", "steps": [step]})
    assert resp.status_code == 400
    assert resp.json()["error"]


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
