"""The provider's default behaviour when nothing is scripted."""

from __future__ import annotations

import json
import math
from typing import Any

import httpx
import pytest

from sidecar.fakes import FakeProvider, ThreadedServer

from .helpers import ANTHROPIC_PATH, OPENAI_PATH, WIRES, chat, finish_of, text_of

Srv = ThreadedServer[FakeProvider]

SEARCH_SCHEMA = {
    "type": "object",
    "properties": {
        "q": {"type": "string"},
        "limit": {"type": "integer"},
        "exact": {"type": "boolean"},
        "doc_id": {"type": "string"},
        "mode": {"type": "string", "enum": ["fast", "slow"]},
    },
    "required": ["q", "limit", "exact", "doc_id", "mode"],
}
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "score": {"type": "number", "minimum": 3},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "address": {"$ref": "#/$defs/address"},
        "ok": {"type": "boolean"},
        "nick": {"type": ["string", "null"]},
    },
    "required": ["name", "score", "tags", "address", "ok", "nick"],
    "additionalProperties": False,
    "$defs": {"address": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
}


def _openai_tools() -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": "search", "parameters": SEARCH_SCHEMA}},
        {"type": "function", "function": {"name": "other", "parameters": {"type": "object"}}},
    ]


def _anthropic_tools() -> list[dict[str, Any]]:
    return [{"name": "search", "input_schema": SEARCH_SCHEMA}, {"name": "other", "input_schema": {"type": "object"}}]


@pytest.mark.parametrize("wire", WIRES)
def test_echo(provider: Srv, client: httpx.Client, wire: str) -> None:
    body = chat(client, provider.url, wire, "ping pong").json()
    assert text_of(wire, body) == "You said: ping pong"
    assert finish_of(wire, body) in ("stop", "end_turn")


def test_openai_shape_and_usage(provider: Srv, client: httpx.Client) -> None:
    resp = chat(client, provider.url, "openai", "x" * 40, model="gpt-fake")
    body = resp.json()
    assert body["object"] == "chat.completion"
    assert body["model"] == "gpt-fake"
    assert body["id"].startswith("chatcmpl-")
    assert isinstance(body["created"], int)
    assert body["choices"][0]["message"]["role"] == "assistant"
    usage = body["usage"]
    assert usage["prompt_tokens"] == 10
    assert usage["completion_tokens"] == math.ceil(len("You said: " + "x" * 40) / 4)
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert resp.headers["x-ratelimit-remaining-requests"]


def test_anthropic_shape_and_usage(provider: Srv, client: httpx.Client) -> None:
    resp = chat(client, provider.url, "anthropic", "y" * 8, model="claude-fake")
    body = resp.json()
    assert (body["type"], body["role"], body["model"]) == ("message", "assistant", "claude-fake")
    assert body["id"].startswith("msg_")
    assert body["usage"] == {"input_tokens": 2, "output_tokens": math.ceil(len("You said: yyyyyyyy") / 4)}
    assert resp.headers["anthropic-ratelimit-requests-remaining"]


def test_openai_tool_call_then_summary(provider: Srv, client: httpx.Client) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "find circuit breakers"}]
    first = client.post(
        provider.url + OPENAI_PATH, json={"model": "m", "messages": messages, "tools": _openai_tools()}
    ).json()
    choice = first["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    call = choice["message"]["tool_calls"][0]
    assert call["function"]["name"] == "search"
    assert json.loads(call["function"]["arguments"]) == {
        "q": "find circuit breakers",
        "limit": 1,
        "exact": True,
        "doc_id": "doc-1",
        "mode": "fast",
    }
    messages += [choice["message"], {"role": "tool", "tool_call_id": call["id"], "content": "R" * 300}]
    second = client.post(
        provider.url + OPENAI_PATH, json={"model": "m", "messages": messages, "tools": _openai_tools()}
    ).json()
    assert second["choices"][0]["finish_reason"] == "stop"
    assert second["choices"][0]["message"]["content"] == "Based on the tool result: " + "R" * 200


def test_anthropic_tool_call_then_summary(provider: Srv, client: httpx.Client) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "look it up"}]}]
    req = {"model": "m", "max_tokens": 500, "tools": _anthropic_tools(), "messages": messages}
    first = client.post(provider.url + ANTHROPIC_PATH, json=req).json()
    assert first["stop_reason"] == "tool_use"
    use = first["content"][0]
    assert use["type"] == "tool_use"
    assert use["name"] == "search"
    assert use["input"]["q"] == "look it up"
    messages += [
        {"role": "assistant", "content": first["content"]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": use["id"], "content": [{"type": "text", "text": "doc text"}]}
            ],
        },
    ]
    second = client.post(provider.url + ANTHROPIC_PATH, json=req).json()
    assert second["stop_reason"] == "end_turn"
    assert second["content"] == [{"type": "text", "text": "Based on the tool result: doc text"}]


def test_tool_choice_none_and_forced(provider: Srv, client: httpx.Client) -> None:
    body = chat(client, provider.url, "openai", "hi", tools=_openai_tools(), tool_choice="none").json()
    assert body["choices"][0]["message"]["content"] == "You said: hi"
    forced = {"type": "function", "function": {"name": "other"}}
    body = chat(client, provider.url, "openai", "hi", tools=_openai_tools(), tool_choice=forced).json()
    assert body["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "other"
    body = chat(
        client, provider.url, "anthropic", "hi", tools=_anthropic_tools(), tool_choice={"type": "tool", "name": "other"}
    ).json()
    assert body["content"][0]["name"] == "other"


def _check_person(value: dict[str, Any]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(value, PERSON)
    assert value["name"] == "example"
    assert value["score"] == 3
    assert value["ok"] is True


def test_openai_json_schema(provider: Srv, client: httpx.Client) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "strict": True, "schema": PERSON}}
    body = chat(client, provider.url, "openai", "who?", response_format=fmt).json()
    _check_person(json.loads(body["choices"][0]["message"]["content"]))


def test_openai_json_object(provider: Srv, client: httpx.Client) -> None:
    body = chat(client, provider.url, "openai", "who?", response_format={"type": "json_object"}).json()
    assert isinstance(json.loads(body["choices"][0]["message"]["content"]), dict)


def test_anthropic_json_via_system_prompt(provider: Srv, client: httpx.Client) -> None:
    system = [
        {
            "type": "text",
            "text": "You extract people.\nRespond with a single JSON object matching this "
            "JSON schema:\n" + json.dumps(PERSON, indent=2) + "\nNo prose.",
        }
    ]
    body = chat(client, provider.url, "anthropic", "who?", system=system).json()
    _check_person(json.loads(body["content"][0]["text"]))


def test_json_after_tool_result_wins_over_summary(provider: Srv, client: httpx.Client) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}}
    messages = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "result"},
    ]
    body = client.post(
        provider.url + OPENAI_PATH,
        json={"model": "m", "messages": messages, "tools": _openai_tools(), "response_format": fmt},
    ).json()
    _check_person(json.loads(body["choices"][0]["message"]["content"]))


@pytest.mark.parametrize(("wire", "finish"), [("openai", "length"), ("anthropic", "max_tokens")])
def test_max_tokens_cuts_reply(provider: Srv, client: httpx.Client, wire: str, finish: str) -> None:
    limit: dict[str, Any] = {"max_tokens": 3} if wire == "anthropic" else {"max_completion_tokens": 3}
    body = chat(client, provider.url, wire, "a long message that will not fit", **limit).json()
    assert finish_of(wire, body) == finish
    assert text_of(wire, body) == "You said: a "


@pytest.mark.parametrize("wire", WIRES)
def test_max_tokens_large_enough_is_untouched(provider: Srv, client: httpx.Client, wire: str) -> None:
    body = chat(client, provider.url, wire, "short", max_tokens=100).json()
    assert finish_of(wire, body) in ("stop", "end_turn")


def test_chat_completions_without_v1_prefix(provider: Srv, client: httpx.Client) -> None:
    resp = client.post(
        provider.url + "/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "parts"}]}]},
    )
    assert resp.json()["choices"][0]["message"]["content"] == "You said: parts"


def test_unknown_route_and_invalid_body(provider: Srv, client: httpx.Client) -> None:
    assert client.get(provider.url + "/v1/models").status_code == 404
    bad = client.post(provider.url + ANTHROPIC_PATH, content=b"{nope", headers={"content-type": "application/json"})
    assert bad.status_code == 400
    assert bad.json()["error"]["type"] == "invalid_request_error"
