"""Every preset, rendered on both wires."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from sidecar.fakes import FakeProvider, ThreadedServer

from .helpers import WIRES, chat, error_of, finish_of, script, text_of
from .sse import assemble, body_for, events

Srv = ThreadedServer[FakeProvider]

# preset -> wire -> (status, error type, error code or None)
ERRORS: dict[str, dict[str, tuple[int, str, str | None]]] = {
    "rate_limit": {"openai": (429, "requests", "rate_limit_exceeded"), "anthropic": (429, "rate_limit_error", None)},
    "overloaded": {
        "openai": (529, "overloaded_error", "overloaded_error"),
        "anthropic": (529, "overloaded_error", None),
    },
    "server_error": {"openai": (500, "server_error", None), "anthropic": (500, "api_error", None)},
    "insufficient_quota": {
        "openai": (429, "insufficient_quota", "insufficient_quota"),
        "anthropic": (400, "invalid_request_error", None),
    },
    "payment_required": {
        "openai": (402, "payment_required", "payment_required"),
        "anthropic": (402, "billing_error", None),
    },
    "context_too_long": {
        "openai": (400, "invalid_request_error", "context_length_exceeded"),
        "anthropic": (400, "invalid_request_error", None),
    },
    "invalid_key": {
        "openai": (401, "invalid_request_error", "invalid_api_key"),
        "anthropic": (401, "authentication_error", None),
    },
    "model_not_found": {
        "openai": (404, "invalid_request_error", "model_not_found"),
        "anthropic": (404, "not_found_error", None),
    },
}


def _scripted(provider: Srv, client: httpx.Client, wire: str, step: dict[str, Any], **extra: Any) -> httpx.Response:
    script(client, provider.url, [step], model="m")
    return chat(client, provider.url, wire, **extra)


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("preset", sorted(ERRORS))
def test_error_presets(provider: Srv, client: httpx.Client, wire: str, preset: str) -> None:
    status, kind, code = ERRORS[preset][wire]
    resp = _scripted(provider, client, wire, {"preset": preset})
    assert resp.status_code == status
    err = error_of(wire, resp.json())
    assert err["type"] == kind
    assert isinstance(err["message"], str)
    assert err["message"]
    if wire == "openai":
        assert err["code"] == code
        assert set(err) == {"message", "type", "param", "code"}
        assert resp.headers["x-request-id"].startswith("req_")
    else:
        assert resp.headers["request-id"].startswith("req_")


def test_wire_specific_error_details(provider: Srv, client: httpx.Client) -> None:
    script(
        client,
        provider.url,
        [{"preset": p} for p in ("context_too_long", "insufficient_quota", "invalid_key")],
        model="m",
    )
    ctx = chat(client, provider.url, "openai").json()["error"]
    assert ctx["param"] == "messages"
    credit = chat(client, provider.url, "anthropic").json()["error"]
    assert credit["message"].startswith("Your credit balance is too low to access the Anthropic API.")
    key = chat(client, provider.url, "openai").json()["error"]["message"]
    assert "sk-test-0123456789abcdef" not in key
    assert "sk-t" in key
    script(client, provider.url, [{"preset": "context_too_long"}], model="m")
    assert chat(client, provider.url, "anthropic").json()["error"]["message"] == (
        "prompt is too long: 210000 tokens > 200000 maximum"
    )


def test_content_policy_presets_are_openais_and_azures_refusals(provider: Srv, client: httpx.Client) -> None:
    steps = [{"preset": "content_policy"}, {"preset": "content_filter"}, {"preset": "content_filter",
             "categories": ["sexual", "violence"]}]  # fmt: skip
    script(client, provider.url, steps, model="m")
    policy = chat(client, provider.url, "openai")
    assert policy.status_code == 400
    error = policy.json()["error"]
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", "content_policy_violation", None)
    assert error["message"].startswith("Your request was rejected as a result of our safety system.")
    azure = chat(client, provider.url, "openai")
    assert azure.status_code == 400
    error = azure.json()["error"]
    assert (error["type"], error["code"], error["param"], error["status"]) == (None, "content_filter", "prompt", 400)
    assert error["innererror"]["code"] == "ResponsibleAIPolicyViolation"
    result = error["innererror"]["content_filter_result"]
    assert result["hate"] == {"filtered": True, "severity": "high"}
    assert result["violence"] == {"filtered": False, "severity": "safe"}
    assert result["jailbreak"] == {"filtered": False, "detected": False}
    result = chat(client, provider.url, "openai").json()["error"]["innererror"]["content_filter_result"]
    assert [name for name, v in result.items() if v["filtered"]] == ["sexual", "violence"]


@pytest.mark.parametrize("preset", ["content_policy", "content_filter"])
def test_anthropics_content_presets_are_its_content_filter(provider: Srv, client: httpx.Client, preset: str) -> None:
    resp = _scripted(provider, client, "anthropic", {"preset": preset})
    assert resp.status_code == 400
    body = resp.json()
    assert body["error"] == {"type": "invalid_request_error", "message": "Output blocked by content filtering policy"}
    assert body["request_id"].startswith("req_")


def test_a_content_filter_finish_with_categories_carries_azures_filter_results(
    provider: Srv, client: httpx.Client
) -> None:
    step = {"preset": "reply", "text": "It", "finish": "content_filter", "categories": ["self_harm"]}
    choice = _scripted(provider, client, "openai", step).json()["choices"][0]
    assert choice["finish_reason"] == "content_filter"
    assert choice["content_filter_results"]["self_harm"] == {"filtered": True, "severity": "high"}
    assert choice["content_filter_results"]["hate"]["filtered"] is False
    plain = _scripted(provider, client, "openai", {"preset": "reply", "finish": "content_filter"}).json()
    assert "content_filter_results" not in plain["choices"][0]  # OpenAI's own: no categories


def test_categories_must_be_azures(provider: Srv, client: httpx.Client) -> None:
    resp = client.post(
        provider.url + "/_fake/script",
        json={"model": "m", "steps": [{"preset": "content_filter", "categories": ["x"]}]},
    )
    assert resp.status_code == 400
    assert "'categories' must be a list of: hate, jailbreak, self_harm, sexual, violence" in resp.json()["error"]


@pytest.mark.parametrize("wire", WIRES)
def test_rate_limit_headers(provider: Srv, client: httpx.Client, wire: str) -> None:
    resp = _scripted(provider, client, wire, {"preset": "rate_limit", "retry_after": "3", "retry_after_ms": 2500})
    assert resp.headers["retry-after"] == "3"
    assert resp.headers["retry-after-ms"] == "2500"
    remaining = "x-ratelimit-remaining-requests" if wire == "openai" else "anthropic-ratelimit-requests-remaining"
    assert resp.headers[remaining] == "0"


@pytest.mark.parametrize("wire", WIRES)
def test_rate_limit_without_retry_after_sends_none(provider: Srv, client: httpx.Client, wire: str) -> None:
    resp = _scripted(provider, client, wire, {"preset": "rate_limit"})
    assert "retry-after" not in resp.headers


@pytest.mark.parametrize("wire", WIRES)
def test_bad_gateway_is_html(provider: Srv, client: httpx.Client, wire: str) -> None:
    resp = _scripted(provider, client, wire, {"preset": "bad_gateway"})
    assert resp.status_code == 502
    assert resp.headers["content-type"].startswith("text/html")
    assert "502 Bad Gateway" in resp.text


@pytest.mark.parametrize("wire", WIRES)
def test_extra_error_fields_and_message(provider: Srv, client: httpx.Client, wire: str) -> None:
    step = {
        "preset": "server_error",
        "message": "boom",
        "extra_error_fields": {"account_id": "acct-42"},
        "extra_body": {"organization": "org-secret"},
    }
    body = _scripted(provider, client, wire, step).json()
    assert error_of(wire, body)["message"] == "boom"
    assert error_of(wire, body)["account_id"] == "acct-42"
    assert body["organization"] == "org-secret"


@pytest.mark.parametrize("wire", WIRES)
def test_status_overrides_preset(provider: Srv, client: httpx.Client, wire: str) -> None:
    resp = _scripted(provider, client, wire, {"preset": "overloaded", "status": 500})
    assert resp.status_code == 500
    assert error_of(wire, resp.json())["type"] == "overloaded_error"


@pytest.mark.parametrize(
    ("wire", "finish", "expected"),
    [
        ("openai", "stop", "stop"),
        ("openai", "length", "length"),
        ("openai", "content_filter", "content_filter"),
        ("anthropic", "stop", "end_turn"),
        ("anthropic", "length", "max_tokens"),
        ("anthropic", "content_filter", "refusal"),
    ],
)
def test_reply_finish_mapping(provider: Srv, client: httpx.Client, wire: str, finish: str, expected: str) -> None:
    body = _scripted(provider, client, wire, {"preset": "reply", "text": "hi", "finish": finish}).json()
    assert finish_of(wire, body) == expected
    assert text_of(wire, body) == "hi"


@pytest.mark.parametrize("wire", WIRES)
def test_reply_with_tool_calls(provider: Srv, client: httpx.Client, wire: str) -> None:
    step = {
        "preset": "reply",
        "tool_calls": [{"name": "search", "arguments": {"q": "x"}}, {"name": "fetch", "arguments": '{"id": "doc-1"}'}],
    }
    body = _scripted(provider, client, wire, step).json()
    if wire == "openai":
        msg = body["choices"][0]["message"]
        assert body["choices"][0]["finish_reason"] == "tool_calls"
        assert msg["content"] is None
        calls = [(c["type"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in msg["tool_calls"]]
        assert calls == [("function", "search", {"q": "x"}), ("function", "fetch", {"id": "doc-1"})]
        assert len({c["id"] for c in msg["tool_calls"]}) == 2
    else:
        assert body["stop_reason"] == "tool_use"
        uses = [(b["name"], b["input"]) for b in body["content"] if b["type"] == "tool_use"]
        assert uses == [("search", {"q": "x"}), ("fetch", {"id": "doc-1"})]


def test_reply_with_broken_arguments_is_sent_verbatim(provider: Srv, client: httpx.Client) -> None:
    step = {"preset": "reply", "tool_calls": [{"name": "search", "arguments": "{not json"}]}
    body = _scripted(provider, client, "openai", step).json()
    assert body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == "{not json"


@pytest.mark.parametrize("wire", WIRES)
def test_refusal(provider: Srv, client: httpx.Client, wire: str) -> None:
    body = _scripted(provider, client, wire, {"preset": "refusal"}).json()
    if wire == "openai":
        msg = body["choices"][0]["message"]
        assert msg["refusal"] == "I can't help with that."
        assert msg["content"] is None
        assert body["choices"][0]["finish_reason"] == "stop"
    else:
        assert body["stop_reason"] == "refusal"


def test_reply_finish_refusal_is_a_refusal(provider: Srv, client: httpx.Client) -> None:
    body = _scripted(provider, client, "openai", {"preset": "reply", "finish": "refusal", "text": "no"}).json()
    assert body["choices"][0]["message"]["refusal"] == "no"


@pytest.mark.parametrize("wire", WIRES)
def test_truncated(provider: Srv, client: httpx.Client, wire: str) -> None:
    body = _scripted(provider, client, wire, {"preset": "truncated"}, text="a rather long question").json()
    assert finish_of(wire, body) in ("length", "max_tokens")
    text = text_of(wire, body)
    assert text
    assert len(text) < len("You said: a rather long question")


@pytest.mark.parametrize("wire", WIRES)
def test_bad_json(provider: Srv, client: httpx.Client, wire: str) -> None:
    body = _scripted(provider, client, wire, {"preset": "bad_json"}).json()
    text = text_of(wire, body)
    assert text == "Sure! Here is the answer: {name: 'x'"
    with pytest.raises(ValueError, match="Expecting"):
        json.loads(text)


SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "city": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "city", "age"],
}


def test_missing_fields_openai(provider: Srv, client: httpx.Client) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA}}
    body = _scripted(provider, client, "openai", {"preset": "missing_fields"}, response_format=fmt).json()
    assert json.loads(text_of("openai", body) or "") == {"city": ""}


def test_missing_fields_anthropic(provider: Srv, client: httpx.Client) -> None:
    system = "Be brief.\nRespond with a single JSON object matching this JSON schema:\n" + json.dumps(SCHEMA)
    body = _scripted(provider, client, "anthropic", {"preset": "missing_fields"}, system=system).json()
    assert json.loads(text_of("anthropic", body) or "") == {"city": ""}


def test_unknown_preset_is_rejected(provider: Srv, client: httpx.Client) -> None:
    resp = client.post(provider.url + "/_fake/script", json={"model": "m", "steps": [{"preset": "nope"}]})
    assert resp.status_code == 400
    assert "unknown preset" in resp.json()["error"]


@pytest.mark.parametrize("wire", WIRES)
def test_echo_headers_answers_the_request_headers_as_the_reply_whole_or_streamed(
    provider: Srv, client: httpx.Client, wire: str
) -> None:
    script(client, provider.url, [{"echo_headers": True}, {"echo_headers": True, "delta_chars": 5}], model="m")
    whole = chat(client, provider.url, wire)
    said = text_of(wire, whole.json()) or ""
    sent = provider.server.requests()[-1]["headers"]
    assert said == "\n".join(f"{name}: {value}" for name, value in sent.items())
    assert ("authorization: Bearer sk-test-" if wire == "openai" else "x-api-key: sk-ant-test-") in said
    got = assemble(wire, events(client, provider.url, wire, body_for(wire)))
    assert len(got.deltas) > 1
    sent = provider.server.requests()[-1]["headers"]
    assert "".join(got.deltas) == "\n".join(f"{name}: {value}" for name, value in sent.items())


ECHO_REFUSED = [
    {"echo_headers": "yes"},
    {"echo_headers": True, "text": "hi"},
    {"echo_headers": True, "preset": "refusal"},
    {"echo_headers": True, "status": 500},
]


@pytest.mark.parametrize("step", ECHO_REFUSED)
def test_echo_headers_is_a_replys_text_alone(provider: Srv, client: httpx.Client, step: dict[str, Any]) -> None:
    answer = client.post(provider.url + "/_fake/script", json={"model": "m", "steps": [step]})
    assert answer.status_code == 400
    assert "echo_headers" in answer.json()["error"]
