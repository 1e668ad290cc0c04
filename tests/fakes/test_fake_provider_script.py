"""Scripting, recording, reset and chaos on the provider."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from sidecar.fakes import FakeProvider, ThreadedServer

from .helpers import chat, script, text_of

Srv = ThreadedServer[FakeProvider]


def _statuses(client: httpx.Client, base: str, n: int, wire: str = "openai", model: str = "m") -> list[int]:
    return [chat(client, base, wire, model=model).status_code for _ in range(n)]


def test_fifo_repeat_then_default(provider: Srv, client: httpx.Client) -> None:
    steps: list[dict[str, Any]] = [{"preset": "rate_limit", "repeat": 2}, {"preset": "server_error"}, {"status": 503}]
    queued = script(client, provider.url, steps, model="m").json()["queued"]
    assert queued == 4
    assert _statuses(client, provider.url, 5) == [429, 429, 500, 503, 200]
    assert provider.server.requests()[-1]["source"] == "default"


def test_scripts_are_per_model_with_wildcards(provider: Srv, client: httpx.Client) -> None:
    script(client, provider.url, [{"status": 500}], model="a")
    script(client, provider.url, [{"status": 502}], model="gpt-*")
    script(client, provider.url, [{"status": 503}], model="*")
    assert _statuses(client, provider.url, 1, model="b") == [503]
    assert _statuses(client, provider.url, 1, model="gpt-x") == [502]
    assert _statuses(client, provider.url, 2, model="a") == [500, 200]
    assert _statuses(client, provider.url, 1, model="gpt-x") == [200]


def test_script_replaces_unless_append(provider: Srv, client: httpx.Client) -> None:
    script(client, provider.url, [{"status": 500}], model="m")
    script(client, provider.url, [{"status": 502}], model="m")
    script(client, provider.url, [{"status": 503}], model="m", append=True)
    assert _statuses(client, provider.url, 3) == [502, 503, 200]


def test_empty_steps_clears_a_queue(provider: Srv, client: httpx.Client) -> None:
    script(client, provider.url, [{"status": 500}], model="m")
    script(client, provider.url, [], model="m")
    assert _statuses(client, provider.url, 1) == [200]


def test_raw_body_status_headers(provider: Srv, client: httpx.Client) -> None:
    script(
        client,
        provider.url,
        [
            {"status": 200, "body": {"anything": True}, "headers": {"X-Should-Retry": "false"}},
            {"status": 200, "body": "{not json"},
        ],
        model="m",
    )
    first = chat(client, provider.url, "openai")
    assert first.json() == {"anything": True}
    assert first.headers["x-should-retry"] == "false"
    second = chat(client, provider.url, "anthropic")
    assert second.text == "{not json"
    assert second.headers["content-type"] == "application/json"


def test_delay_only_step_answers_normally(provider: Srv, client: httpx.Client) -> None:
    script(client, provider.url, [{"delay_ms": 50}], model="m")
    assert text_of("openai", chat(client, provider.url, "openai", "slow").json()) == "You said: slow"


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_fault_steps(provider: Srv, client: httpx.Client, wire: str) -> None:
    script(client, provider.url, [{"fault": "reset"}, {"fault": "drop_mid_body"}, {"fault": "hang"}], model="m")
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        chat(client, provider.url, wire)
    with pytest.raises(httpx.RemoteProtocolError):
        chat(client, provider.url, wire)
    with pytest.raises(httpx.ReadTimeout):
        client.post(provider.url + "/v1/messages", json={"model": "m", "messages": []}, timeout=0.1)
    records = provider.server.wait_for(lambda rs: rs[-1]["client_disconnected"], timeout=2)
    assert [r["fault"] for r in records] == ["reset", "drop_mid_body", "hang"]
    assert [r["status_sent"] for r in records] == [None, 200, None]


def test_client_disconnect_during_delay_is_recorded(provider: Srv, client: httpx.Client) -> None:
    script(client, provider.url, [{"preset": "reply", "text": "late", "delay_ms": 10000}], model="m")
    with pytest.raises(httpx.ReadTimeout):
        client.post(provider.url + "/v1/chat/completions", json={"model": "m", "messages": []}, timeout=0.1)
    provider.server.wait_for(lambda rs: rs[-1]["client_disconnected"], timeout=2)
    recorded = client.get(provider.url + "/_fake/requests").json()
    assert recorded[-1]["client_disconnected"] is True
    assert recorded[-1]["status_sent"] is None


def test_requests_are_recorded(provider: Srv, client: httpx.Client) -> None:
    script(client, provider.url, [{"preset": "overloaded"}], model="claude")
    chat(client, provider.url, "anthropic", "first", model="claude")
    chat(client, provider.url, "openai", "second", model="gpt")
    records = client.get(provider.url + "/_fake/requests").json()
    assert len(records) == 2
    first, second = records
    assert first["path"] == "/v1/messages"
    assert first["wire"] == "anthropic"
    assert first["model"] == "claude"
    assert first["headers"]["x-api-key"] == "sk-ant-test-0123456789"
    assert first["headers"]["anthropic-version"] == "2023-06-01"
    assert first["body"]["messages"][0]["content"] == "first"
    assert (first["status_sent"], first["preset"], first["source"]) == (529, "overloaded", "script")
    assert first["client_disconnected"] is False
    assert isinstance(first["received_at"], float)
    assert (second["status_sent"], second["preset"], second["source"]) == (200, None, "default")
    only_gpt = client.get(provider.url + "/_fake/requests", params={"model": "gpt"}).json()
    assert [r["model"] for r in only_gpt] == ["gpt"]


def test_control_requests_are_not_recorded(provider: Srv, client: httpx.Client) -> None:
    client.get(provider.url + "/_fake/health")
    assert client.get(provider.url + "/_fake/requests").json() == []


def test_reset_clears_scripts_records_and_chaos(provider: Srv, client: httpx.Client) -> None:
    script(client, provider.url, [{"status": 500}], model="m")
    client.post(provider.url + "/_fake/chaos", json={"rate_limit": 1.0}).raise_for_status()
    chat(client, provider.url, "openai", model="other")
    assert client.post(provider.url + "/_fake/reset").json() == {"ok": True}
    assert client.get(provider.url + "/_fake/requests").json() == []
    health = client.get(provider.url + "/_fake/health").json()
    assert health["ok"] is True
    assert health["pending_steps"] == {}
    assert health["chaos"]["rate_limit"] == 0
    assert _statuses(client, provider.url, 2) == [200, 200]


def test_invalid_scripts_are_rejected(provider: Srv, client: httpx.Client) -> None:
    bad = [
        {"model": "m", "steps": [{"fault": "explode"}]},
        {"model": "m", "steps": [{"delay": 5}]},
        {"model": "m", "steps": [{"repeat": 0}]},
        {"model": "m", "steps": [{"preset": "reply", "finish": "weird"}]},
        {"steps": []},
        {"model": "m", "steps": "nope"},
    ]
    for body in bad:
        resp = client.post(provider.url + "/_fake/script", json=body)
        assert resp.status_code == 400, body
        assert resp.json()["error"]
    assert client.post(provider.url + "/_fake/script", content=b"{").status_code == 400
    assert client.get(provider.url + "/_fake/nothing").status_code == 404


def _chaos_run(provider: Srv, client: httpx.Client, n: int = 40) -> list[int]:
    client.post(
        provider.url + "/_fake/chaos",
        json={
            "rate_limit": 0.3,
            "overload": 0.1,
            "server_error": 0.1,
            "retry_after": "0",
            "seed": 7,
        },
    ).raise_for_status()
    return _statuses(client, provider.url, n)


def test_chaos_with_a_seed_is_deterministic(provider: Srv, client: httpx.Client) -> None:
    first = _chaos_run(provider, client)
    second = _chaos_run(provider, client)
    assert first == second
    assert {429, 529, 500, 200} <= set(first)
    limited = [r for r in provider.server.requests() if r["status_sent"] == 429]
    assert limited
    assert all(r["source"] == "chaos" and r["preset"] == "rate_limit" for r in limited)


def test_chaos_sends_retry_after_and_yields_to_scripts(provider: Srv, client: httpx.Client) -> None:
    provider.server.set_chaos(rate_limit=1.0, retry_after="0")
    script(client, provider.url, [{"preset": "reply", "text": "scripted"}], model="m")
    assert text_of("openai", chat(client, provider.url, "openai").json()) == "scripted"
    limited = chat(client, provider.url, "openai")
    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "0"


def test_chaos_reset_fault(provider: Srv, client: httpx.Client) -> None:
    provider.server.set_chaos(reset=1.0)
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        chat(client, provider.url, "openai")
    assert provider.server.requests()[-1]["preset"] == "reset"


def test_chaos_from_constructor_and_validation(client: httpx.Client) -> None:
    with ThreadedServer(FakeProvider(chaos={"server_error": 1.0})) as srv:
        assert chat(client, srv.url, "anthropic").status_code == 500
        assert client.get(srv.url + "/_fake/chaos").json()["chaos"]["server_error"] == 1.0
        assert client.post(srv.url + "/_fake/chaos", json={"rate_limit": 2}).status_code == 400
        assert client.post(srv.url + "/_fake/chaos", json={"bogus": 0.1}).status_code == 400
    with pytest.raises(ValueError, match="more than 1"):
        FakeProvider(chaos={"rate_limit": 0.6, "reset": 0.6})


def test_python_control_api(provider: Srv, client: httpx.Client) -> None:
    srv = provider.server
    assert srv.script("m", [{"preset": "rate_limit", "repeat": 3}]) == 3
    assert _statuses(client, provider.url, 1) == [429]
    assert srv.requests(model="m")[0]["status_sent"] == 429
    srv.reset()
    assert srv.requests() == []
    with pytest.raises(ValueError, match="unknown step field"):
        srv.script("m", [{"presett": "x"}])
