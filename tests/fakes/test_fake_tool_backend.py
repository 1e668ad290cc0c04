"""The tool backend: routes, every fail mode, scripting and recording."""

from __future__ import annotations

import time

import httpx
import pytest

from sidecar.fakes import FakeToolBackend, ThreadedServer

from .helpers import script

Srv = ThreadedServer[FakeToolBackend]

STATUS_MODES = {
    "400": 400,
    "401": 401,
    "403": 403,
    "404": 404,
    "413": 413,
    "422": 422,
    "429": 429,
    "500": 500,
    "502": 502,
    "503": 503,
    "418": 418,
    "throttle401": 401,
    "robot403": 403,
}


def test_search_finds_documents(tools: Srv, client: httpx.Client) -> None:
    results = client.get(tools.url + "/search", params={"q": "circuit breaker"}).json()["results"]
    assert results[0]["id"] == "doc-3"
    assert set(results[0]) == {"id", "title", "snippet"}


def test_search_limit_and_no_match(tools: Srv, client: httpx.Client) -> None:
    assert len(client.get(tools.url + "/search", params={"q": "retries", "limit": 1}).json()["results"]) == 1
    empty = client.get(tools.url + "/search", params={"q": "zebra quantum"})
    assert (empty.status_code, empty.json()) == (200, {"results": []})
    assert client.get(tools.url + "/search").status_code == 400
    assert client.get(tools.url + "/search", params={"q": "x", "limit": "many"}).status_code == 400


def test_docs(tools: Srv, client: httpx.Client) -> None:
    for n in range(1, 11):
        doc = client.get(tools.url + f"/docs/doc-{n}").json()
        assert doc["id"] == f"doc-{n}"
        assert doc["title"]
        assert doc["text"]
    missing = client.get(tools.url + "/docs/doc-99")
    assert missing.status_code == 404
    assert missing.json() == {"error": "document not found", "id": "doc-99"}


def test_notes_count_every_request(tools: Srv, client: httpx.Client) -> None:
    first = client.post(tools.url + "/notes", json={"text": "a"})
    assert (first.status_code, first.json()) == (201, {"id": "note-1"})
    assert client.post(tools.url + "/notes", json={"text": "b"}).json() == {"id": "note-2"}
    assert client.post(tools.url + "/notes", json={"nope": 1}).status_code == 400
    script(client, tools.url, [{"fault": "reset"}], path="/notes")
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        client.post(tools.url + "/notes", json={"text": "c"})
    assert tools.server.notes_received == 4
    health = client.get(tools.url + "/_fake/health").json()
    # A fault-only step runs the route first: the note exists, its response was lost.
    assert (health["notes_received"], health["notes_created"]) == (4, 3)
    assert client.get(tools.url + "/notes").json()["received"] == 4


def test_notes_sent_twice_are_counted_by_text(tools: Srv, client: httpx.Client) -> None:
    client.post(tools.url + "/notes", json={"text": "id-1"})
    client.post(tools.url + "/notes", json={"text": "id-2"})
    script(client, tools.url, [{"status": 500}, {"fault": "reset"}], path="/notes")
    client.post(tools.url + "/notes", json={"text": "id-1"})  # answered 500: it arrived all the same
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        client.post(tools.url + "/notes", json={"text": "id-1"})
    client.post(tools.url + "/notes", json={"nope": 1})  # no text: received, not counted by text
    seen = client.get(tools.url + "/_fake/notes").json()
    assert seen == {"received": 5, "created": 3, "texts": 2, "repeated": {"id-1": 3}, "keys": 0, "replayed": 0}
    assert tools.server.notes_repeated() == {"id-1": 3}
    client.post(tools.url + "/_fake/reset")
    after = {"received": 0, "created": 0, "texts": 0, "repeated": {}, "keys": 0, "replayed": 0}
    assert client.get(tools.url + "/_fake/notes").json() == after


@pytest.mark.parametrize("mode", sorted(STATUS_MODES))
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_status_fail_modes(tools: Srv, client: httpx.Client, mode: str, method: str) -> None:
    resp = client.request(method, tools.url + f"/fail/{mode}")
    assert resp.status_code == STATUS_MODES[mode]
    assert resp.json()["error"]


def test_fail_mode_bodies_and_retry_after(tools: Srv, client: httpx.Client) -> None:
    assert client.get(tools.url + "/fail/429").headers["retry-after"] == "7"
    assert client.get(tools.url + "/fail/429", params={"retry_after": "1"}).headers["retry-after"] == "1"
    assert client.get(tools.url + "/fail/503", params={"retry_after": "2"}).headers["retry-after"] == "2"
    assert "retry-after" not in client.get(tools.url + "/fail/503").headers
    assert client.get(tools.url + "/fail/throttle401").json()["error"] == "rate limit exceeded, slow down"
    assert client.get(tools.url + "/fail/robot403").json() == {"error": "CLIENT.RobotDetected"}
    assert client.get(tools.url + "/fail/nope").status_code == 404


def test_empty200(tools: Srv, client: httpx.Client) -> None:
    resp = client.get(tools.url + "/fail/empty200")
    assert (resp.status_code, resp.content) == (200, b"")


def test_reset_mode(tools: Srv, client: httpx.Client) -> None:
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        client.post(tools.url + "/fail/reset")


def test_hang_mode_records_disconnect(tools: Srv, client: httpx.Client) -> None:
    with pytest.raises(httpx.ReadTimeout):
        client.get(tools.url + "/fail/hang", timeout=0.1)
    records = tools.server.wait_for(lambda rs: rs[-1]["client_disconnected"], timeout=2)
    assert records[-1]["status_sent"] is None


def test_slow_mode(tools: Srv, client: httpx.Client) -> None:
    with pytest.raises(httpx.ReadTimeout):
        client.get(tools.url + "/fail/slow", timeout=0.1)  # 2 s by default
    tools.server.wait_for(lambda rs: rs[-1]["client_disconnected"], timeout=2)
    start = time.monotonic()
    resp = client.get(tools.url + "/fail/slow", params={"delay_ms": "50"})
    assert resp.status_code == 200
    assert time.monotonic() - start >= 0.045


def test_script_exact_and_prefix_paths(tools: Srv, client: httpx.Client) -> None:
    script(client, tools.url, [{"status": 503, "repeat": 2}], path="/docs/doc-1")
    script(
        client, tools.url, [{"status": 200, "body": {"scripted": True}, "headers": {"x-extra": "1"}}], path="/docs/*"
    )
    assert client.get(tools.url + "/docs/doc-2").json() == {"scripted": True}
    assert client.get(tools.url + "/docs/doc-1").status_code == 503
    assert client.get(tools.url + "/docs/doc-1").status_code == 503
    assert client.get(tools.url + "/docs/doc-1").json()["id"] == "doc-1"
    assert client.get(tools.url + "/docs/doc-2").json()["id"] == "doc-2"


def test_script_text_body_delay_and_fault(tools: Srv, client: httpx.Client) -> None:
    script(
        client,
        tools.url,
        [{"body": "plain", "delay_ms": 20}, {"fault": "drop_mid_body"}, {"delay_ms": 10}],
        path="/search",
    )
    first = client.get(tools.url + "/search", params={"q": "grpc"})
    assert (first.text, first.headers["content-type"]) == ("plain", "text/plain; charset=utf-8")
    with pytest.raises(httpx.RemoteProtocolError):
        client.get(tools.url + "/search", params={"q": "grpc"})
    assert client.get(tools.url + "/search", params={"q": "grpc"}).json()["results"][0]["id"] == "doc-1"


def test_requests_and_reset(tools: Srv, client: httpx.Client) -> None:
    script(client, tools.url, [{"status": 500}], path="*")
    client.post(tools.url + "/notes?x=1", json={"text": "hi"}, headers={"Idempotency-Key": "k1"})
    client.get(tools.url + "/docs/doc-3")
    records = client.get(tools.url + "/_fake/requests").json()
    assert [(r["method"], r["path"], r["status_sent"], r["source"]) for r in records] == [
        ("POST", "/notes", 500, "script"),
        ("GET", "/docs/doc-3", 200, "default"),
    ]
    assert records[0]["query"] == {"x": "1"}
    assert records[0]["body"] == {"text": "hi"}
    assert records[0]["headers"]["idempotency-key"] == "k1"
    assert records[0]["client_disconnected"] is False
    assert len(client.get(tools.url + "/_fake/requests", params={"method": "GET"}).json()) == 1
    client.post(tools.url + "/_fake/reset").raise_for_status()
    assert client.get(tools.url + "/_fake/requests").json() == []
    assert client.get(tools.url + "/_fake/health").json()["notes_received"] == 0


def test_unknown_routes_and_methods(tools: Srv, client: httpx.Client) -> None:
    assert client.get(tools.url + "/nowhere").status_code == 404
    assert client.delete(tools.url + "/docs/doc-1").status_code == 405
    assert client.put(tools.url + "/fail/500").status_code == 405
    resp = client.post(tools.url + "/_fake/script", json={"model": "m", "steps": []})
    assert resp.status_code == 400  # the tool backend keys scripts by path
    resp = client.post(tools.url + "/_fake/script", json={"path": "/x", "steps": [{"preset": "rate_limit"}]})
    assert resp.status_code == 400
    resp = client.post(tools.url + "/_fake/script", json={"path": "docs/*", "steps": []})
    assert resp.status_code == 400
