"""ExecuteTool through the running sidecar against a real HTTP tool backend: every row of the mapping."""

from __future__ import annotations

import json

import pytest
from sidecar_client import job, pb

from sidecar.core.correctability import CORRECTABLE_LINE, UNCORRECTABLE_LINE
from sidecar.fakes import FakeToolBackend, ThreadedServer
from tests.conftest import Running, Start, silent_tools, tool

C, U = True, False

# (mode, tool, kind, correctable, http status or None, attempts with the default budget of 2 retries)
ROWS = [
    ("400", "fail_fetch", "INVALID_INPUT", C, 400, 1),
    ("413", "fail_fetch", "INVALID_INPUT", C, 413, 1),
    ("422", "fail_fetch", "INVALID_INPUT", C, 422, 1),
    ("401", "fail_fetch", "UNAUTHORIZED", U, 401, 1),
    ("403", "fail_fetch", "UNAUTHORIZED", U, 403, 1),
    ("throttle401", "fail_fetch", "UPSTREAM_THROTTLE", U, 401, 3),
    ("robot403", "fail_fetch", "UPSTREAM_THROTTLE", U, 403, 3),
    ("404", "fail_fetch", "RESOURCE_NOT_FOUND", C, 404, 1),
    ("429", "fail_fetch", "UPSTREAM_THROTTLE", U, 429, 3),
    ("500", "fail_fetch", "EXTERNAL_SERVICE", U, 500, 3),
    ("502", "fail_fetch", "EXTERNAL_SERVICE", U, 502, 3),
    ("503", "fail_fetch", "EXTERNAL_SERVICE", U, 503, 3),
    ("418", "fail_fetch", "EXTERNAL_SERVICE", U, 418, 1),
    ("reset", "fail_fetch", "EXTERNAL_SERVICE", U, None, 3),
]


def kind(resp: pb.ExecuteToolResponse) -> str:
    return pb.FailureKind.Name(resp.failure.kind).removeprefix("FAILURE_KIND_")


@pytest.mark.parametrize(("mode", "tool", "expected", "correctable", "status", "attempts"), ROWS)
async def test_mapping_row(
    sidecar: Running, mode: str, tool: str, expected: str, correctable: bool, status: int | None, attempts: int
) -> None:
    resp = await sidecar.client.execute_tool(tool, {"mode": mode}, call_id="call-1")
    assert resp.WhichOneof("outcome") == "failure", resp
    f = resp.failure
    assert kind(resp) == expected
    assert f.correctable is correctable
    assert f.explanation == f.message + "\n" + (CORRECTABLE_LINE if correctable else UNCORRECTABLE_LINE)
    assert resp.model_text == f.explanation
    assert resp.call_id == "call-1"
    assert resp.attempts == attempts == f.attempts
    assert f.HasField("http") is (status is not None)
    if status is not None:
        assert f.http.status_code == status
        assert f.http.service == "flaky"
        assert f.http.endpoint == f"{sidecar.backend.url}/fail/{mode}"
        assert "flaky" in f.message
        assert f"/fail/{mode}" in f.message or expected in ("INVALID_INPUT", "RESOURCE_NOT_FOUND")


async def test_429_keeps_the_raw_retry_after_and_waits_it(sidecar: Running) -> None:
    resp = await sidecar.client.execute_tool("fail_fetch", {"mode": "429"})
    assert resp.failure.http.retry_after_raw == "7"
    assert resp.failure.retry_after.seconds == 7
    assert "retry after 7" in resp.failure.message
    assert sidecar.clock.sleeps == [7.0, 7.0]  # Retry-After honoured on each of the two retries


async def test_retry_waits_grow_with_the_attempt(sidecar: Running) -> None:
    resp = await sidecar.client.execute_tool("fail_fetch", {"mode": "503"})
    assert resp.attempts == 3
    first, second = sidecar.clock.sleeps
    assert 0.2 <= first < 1.0  # tool window x 1
    assert 0.4 <= second < 2.0  # tool window x 2


async def test_401_body_is_blanked_and_a_throttle_body_is_not_unauthorized(sidecar: Running) -> None:
    plain = await sidecar.client.execute_tool("fail_fetch", {"mode": "401"})
    assert plain.failure.http.body == ""
    assert "credentials" in plain.failure.message
    throttled = await sidecar.client.execute_tool("fail_fetch", {"mode": "throttle401"})
    assert "rate limit exceeded, slow down" in throttled.failure.message


async def test_service_quirk_maps_onto_an_existing_kind(sidecar: Running) -> None:
    resp = await sidecar.client.execute_tool("fail_fetch", {"mode": "robot403"}, job=job(upstream_retries=0))
    assert kind(resp) == "UPSTREAM_THROTTLE"
    assert "robot detection" in resp.failure.message


async def test_404_on_a_search_is_an_empty_result(sidecar: Running) -> None:
    resp = await sidecar.client.execute_tool("fail_search", {"mode": "404"})
    assert resp.WhichOneof("outcome") == "result"
    assert resp.result.empty
    assert resp.model_text == "The search found no results."
    assert resp.attempts == 1


async def test_search_with_nothing_found_is_a_valid_empty_result(sidecar: Running) -> None:
    resp = await sidecar.client.execute_tool("search", {"query": "zebra-quantum-nothing"})
    assert resp.WhichOneof("outcome") == "result"
    assert resp.result.empty
    empty = await sidecar.client.execute_tool("fail_search", {"mode": "empty200"})
    assert empty.result.empty
    assert empty.model_text == "The search found no results."


async def test_search_and_fetch_succeed(sidecar: Running) -> None:
    found = await sidecar.client.execute_tool("search", {"query": "retries"})
    assert found.WhichOneof("outcome") == "result"
    assert not found.result.empty
    assert json.loads(found.model_text)["results"]
    doc = await sidecar.client.execute_tool("fetch", {"id": "doc-1"})
    assert doc.result.status_code == 200
    assert json.loads(doc.model_text)["id"] == "doc-1"


async def test_404_on_a_fetch_names_the_resource(sidecar: Running) -> None:
    resp = await sidecar.client.execute_tool("fetch", {"id": "doc-404"})
    assert kind(resp) == "RESOURCE_NOT_FOUND"
    assert resp.failure.resource.identifier == "doc-404"
    assert resp.failure.resource.resource_type == "document"
    assert "No document 'doc-404' exists" in resp.failure.message


async def test_refused_connection_has_no_http(sidecar: Running) -> None:
    resp = await sidecar.client.execute_tool("refused", {"id": "x"})
    assert kind(resp) == "EXTERNAL_SERVICE"
    assert not resp.failure.HasField("http")
    assert resp.failure.service.fault == pb.TRANSPORT_FAULT_REFUSED
    assert resp.model_text == (
        "The down service failed at http://127.0.0.1:1/x/x: it could not be reached (connection refused).\n"
        + UNCORRECTABLE_LINE
    )
    assert resp.attempts == 3


async def test_dns_failure_has_no_http(sidecar: Running) -> None:
    resp = await sidecar.client.execute_tool("dns", {"id": "x"}, job=job(upstream_retries=0))
    assert kind(resp) == "EXTERNAL_SERVICE"
    assert not resp.failure.correctable
    assert not resp.failure.HasField("http")
    assert resp.failure.service.fault == pb.TRANSPORT_FAULT_DNS
    assert resp.model_text == (
        "The nowhere service failed at http://nonexistent.invalid/x/x: it could not be reached "
        "(the host name did not resolve).\n" + UNCORRECTABLE_LINE
    )


async def test_timeout_has_no_http(start_sidecar: Start, backend: ThreadedServer[FakeToolBackend]) -> None:
    sidecar = await start_sidecar(tools=silent_tools(backend.url))  # a hang: only the read timeout ends it
    resp = await sidecar.client.execute_tool("fail_fetch", {"mode": "hang"}, job=job(upstream_retries=0))
    assert kind(resp) == "EXTERNAL_SERVICE"
    assert not resp.failure.HasField("http")
    assert resp.failure.service.fault == pb.TRANSPORT_FAULT_TIMEOUT
    assert not resp.failure.correctable
    assert resp.model_text.endswith("it did not answer (no response in time).\n" + UNCORRECTABLE_LINE)
    assert resp.attempts == 1


async def test_per_call_budget_override(sidecar: Running) -> None:
    resp = await sidecar.client.execute_tool("fail_fetch", {"mode": "500"}, job=job(upstream_retries=4))
    assert resp.attempts == 5
    none = await sidecar.client.execute_tool("fail_fetch", {"mode": "500"}, job=job(upstream_retries=0))
    assert none.attempts == 1


async def test_a_wait_past_the_deadline_is_not_started(sidecar: Running) -> None:
    resp = await sidecar.client.execute_tool("fail_fetch", {"mode": "429"}, timeout=5)
    assert resp.attempts == 1
    assert sidecar.clock.sleeps == []  # Retry-After 7 s would end past the 5 s deadline


async def test_non_idempotent_tool_is_never_sent_twice(sidecar: Running) -> None:
    sidecar.backend.script("/notes", [{"fault": "reset"}])
    reset = await sidecar.client.execute_tool("note", {"text": "remember"})
    assert kind(reset) == "EXTERNAL_SERVICE"
    assert reset.attempts == 1
    sidecar.backend.script("/notes", [{"status": 503}])
    unavailable = await sidecar.client.execute_tool("note", {"text": "remember"})
    assert unavailable.attempts == 1
    assert len(sidecar.backend.requests(path="/notes")) == 2


async def test_a_reset_after_a_post_arrived_says_it_may_have_been_delivered(sidecar: Running) -> None:
    sidecar.backend.script("/notes", [{"fault": "reset"}])  # the backend read the whole POST, then reset
    resp = await sidecar.client.execute_tool("note", {"text": "remember"})
    assert sidecar.backend.notes_received == 1
    f = resp.failure
    assert kind(resp) == "EXTERNAL_SERVICE"
    assert f.service.fault == pb.TRANSPORT_FAULT_RESET
    assert not f.HasField("http")
    assert f.message == (
        f"The notes service failed at {sidecar.backend.url}/notes: the connection was reset after the request "
        "was sent, so it may have been delivered; the outcome is unknown — check before repeating this call "
        "(it is not idempotent)."
    )
    assert "could not be reached" not in resp.model_text
    assert resp.attempts == 1


async def test_a_reset_of_an_idempotent_call_reads_as_transient(sidecar: Running) -> None:
    sidecar.backend.script("/docs/doc-1", [{"fault": "reset", "repeat": 3}])
    resp = await sidecar.client.execute_tool("fetch", {"id": "doc-1"})
    assert resp.attempts == 3  # re-sent: repeating it is safe
    assert (
        resp.failure.message
        == f"The docs service failed at {sidecar.backend.url}/docs/doc-1: it did not answer (connection reset)."
    )


async def test_a_non_idempotent_call_that_never_connected_is_re_sent_and_says_so(start_sidecar: Start) -> None:
    post = tool("http://127.0.0.1:1/x", "fetch", "down", "POST", body="arguments", parameters={"type": "object"})
    running = await start_sidecar(tools={"post_down": post})
    resp = await running.client.execute_tool("post_down", {})
    assert resp.attempts == 3  # refused: it certainly never arrived, so re-sending is safe
    assert resp.failure.message.endswith("it could not be reached (connection refused).")


async def test_query_string_is_cut_from_endpoint_and_message(sidecar: Running) -> None:
    resp = await sidecar.client.execute_tool("fail_search", {"mode": "500"}, job=job(upstream_retries=0))
    assert "?" not in resp.failure.http.endpoint
    sidecar.backend.script("/search", [{"status": 500, "body": {"error": "boom " + "x" * 400}}])
    long = await sidecar.client.execute_tool("search", {"query": "key=SECRET"}, job=job(upstream_retries=0))
    assert "SECRET" not in long.failure.message
    assert "?" not in long.failure.http.endpoint
    said = long.failure.service.detail
    assert len(said) == 200
    assert said.endswith("…")
    assert "x" * 400 in long.failure.http.body  # the body is redacted, not capped


@pytest.mark.parametrize(
    ("arguments", "parameter", "rule"),
    [
        ("{}", "id", "is required"),
        ('{"id": ""}', "id", "must not be blank"),
        ('{"id": "   "}', "id", "must not be blank"),
        ('{"id": 5}', "id", "must be a string"),
        ("[1, 2]", "arguments", "must be a JSON object"),
        ("{not json", "arguments", "must be a JSON object"),
        ('{"id": "a", "extra": 1}', "extra", "is not a parameter"),
    ],
)
async def test_bad_arguments_are_invalid_input_before_any_call(
    sidecar: Running, arguments: str, parameter: str, rule: str
) -> None:
    resp = await sidecar.client.execute_tool("fetch", arguments)
    assert kind(resp) == "INVALID_INPUT"
    assert resp.failure.invalid_input.parameter == parameter
    assert rule in resp.failure.invalid_input.rule
    assert f"'{parameter}'" in resp.failure.message
    assert resp.attempts == 0
    assert sidecar.backend.requests(path="/docs/") == []


async def test_unknown_tool_lists_the_tools_that_exist(sidecar: Running) -> None:
    resp = await sidecar.client.execute_tool("serch", "{}")
    assert kind(resp) == "INVALID_INPUT"
    assert resp.failure.correctable
    for name in ("search", "fetch", "note"):
        assert name in resp.failure.message


def _item_tools(url: str) -> dict[str, object]:
    return {
        "item": tool(url + "/items/{id}", "fetch", "items", resource_type="item"),
        "pair": tool(
            url + "/items/{a}{b}",
            "fetch",
            "items",
            parameters={"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
        ),
    }


@pytest.mark.parametrize(
    ("tool_name", "arguments", "parameter"),
    [("item", {"id": ".."}, "id"), ("item", {"id": "."}, "id"), ("pair", {"a": ".", "b": "."}, "arguments")],
)
async def test_a_path_argument_that_is_a_dot_segment_is_refused_before_sending(
    start_sidecar: Start,
    backend: ThreadedServer[FakeToolBackend],
    tool_name: str,
    arguments: dict[str, str],
    parameter: str,
) -> None:
    running = await start_sidecar(tools=_item_tools(backend.url))
    resp = await running.client.execute_tool(tool_name, arguments)
    assert kind(resp) == "INVALID_INPUT"
    assert resp.failure.correctable
    assert resp.failure.invalid_input.parameter == parameter
    assert "must not be '.' or '..'" in resp.failure.invalid_input.rule
    assert resp.attempts == 0
    assert running.backend.requests() == []  # not /items/.., and never /


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ("%2E%2E", "/items/%2E%2E"),  # sent as %252E%252E: the value itself, not a dot segment
        ("../docs/doc-1", "/items/../docs/doc-1"),  # sent as ..%2Fdocs%2Fdoc-1: one segment
        ("...", "/items/..."),
        ("a..b", "/items/a..b"),
    ],
)
async def test_a_path_argument_stays_inside_its_segment(
    start_sidecar: Start, backend: ThreadedServer[FakeToolBackend], value: str, path: str
) -> None:
    running = await start_sidecar(tools=_item_tools(backend.url))
    resp = await running.client.execute_tool("item", {"id": value})
    assert kind(resp) == "RESOURCE_NOT_FOUND"  # the fake has no /items route: it answered 404 at that path
    (sent,) = running.backend.requests()
    assert sent["path"] == path


async def test_dots_in_the_query_string_are_sent_as_they_are(sidecar: Running) -> None:
    await sidecar.client.execute_tool("search", {"query": ".."})
    (sent,) = sidecar.backend.requests(path="/search")
    assert sent["query"]["q"] == ".."
