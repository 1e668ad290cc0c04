"""Read the provider's streams with a real SSE parser (httpx-sse) and put a reply back together."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import EventSource, ServerSentEvent, connect_sse

from .helpers import ANTHROPIC_PATH, OPENAI_PATH

HEADERS = {
    "openai": {"authorization": "Bearer sk-test-0123456789abcdef"},
    "anthropic": {"x-api-key": "sk-ant-test-0123456789", "anthropic-version": "2023-06-01"},
}


def body_for(wire: str, text: str = "hello", *, model: str = "m", stream: bool = True, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": text}]}
    if wire == "anthropic":
        body["max_tokens"] = 1024
    if stream:
        body["stream"] = True
    body.update(extra)
    return body


@contextmanager
def open_stream(client: httpx.Client, base: str, wire: str, body: dict[str, Any], **kw: Any) -> Iterator[EventSource]:
    path = OPENAI_PATH if wire == "openai" else ANTHROPIC_PATH
    with connect_sse(client, "POST", base + path, json=body, headers=dict(HEADERS[wire]), **kw) as source:
        yield source


def events(client: httpx.Client, base: str, wire: str, body: dict[str, Any]) -> list[ServerSentEvent]:
    with open_stream(client, base, wire, body) as source:
        assert source.response.status_code == 200
        return list(source.iter_sse())


@dataclass
class Assembled:
    """A streamed reply put back together, in the shape both wires share."""

    text: str | None = None
    refusal: str | None = None
    tool_calls: list[dict[str, str]] = field(default_factory=list)  # {id, name, arguments}
    finish: str | None = None
    usage: dict[str, int] | None = None
    deltas: list[str] = field(default_factory=list)  # every text/refusal/arguments fragment, in order
    error: dict[str, Any] | None = None
    done: bool = False  # the wire's end marker ([DONE] / message_stop) arrived
    kinds: list[str] = field(default_factory=list)  # event names (anthropic) / "chunk" | "[DONE]" (openai)


def assemble(wire: str, evs: list[ServerSentEvent]) -> Assembled:
    return _openai(evs) if wire == "openai" else _anthropic(evs)


def _openai(evs: list[ServerSentEvent]) -> Assembled:
    out = Assembled()
    for ev in evs:
        assert ev.event == "message"  # OpenAI streams bare data lines
        if ev.data == "[DONE]":
            out.kinds.append("[DONE]")
            out.done = True
            continue
        out.kinds.append("chunk")
        chunk = ev.json()
        if "error" in chunk:
            out.error = chunk["error"]
            continue
        assert chunk["object"] == "chat.completion.chunk"
        if chunk.get("usage"):
            out.usage = chunk["usage"]
        for choice in chunk["choices"]:
            delta = choice["delta"]
            if delta.get("content") is not None:
                out.text = (out.text or "") + delta["content"]
                if delta["content"]:
                    out.deltas.append(delta["content"])
            if delta.get("refusal") is not None:
                out.refusal = (out.refusal or "") + delta["refusal"]
                out.deltas.append(delta["refusal"])
            for call in delta.get("tool_calls") or []:
                i = call["index"]
                if i == len(out.tool_calls):
                    out.tool_calls.append({"id": call["id"], "name": call["function"]["name"], "arguments": ""})
                fragment = call["function"].get("arguments", "")
                out.tool_calls[i]["arguments"] += fragment
                if fragment:
                    out.deltas.append(fragment)
            if choice["finish_reason"] is not None:
                out.finish = choice["finish_reason"]
    return out


def _anthropic(evs: list[ServerSentEvent]) -> Assembled:
    out = Assembled()
    blocks: list[dict[str, Any]] = []
    usage: dict[str, int] = {}
    for ev in evs:
        out.kinds.append(ev.event)
        data = ev.json()
        assert data["type"] == ev.event  # the data names its own type too
        if ev.event == "message_start":
            usage["input_tokens"] = data["message"]["usage"]["input_tokens"]
        elif ev.event == "content_block_start":
            assert data["index"] == len(blocks)
            blocks.append(dict(data["content_block"], partial=""))
        elif ev.event == "content_block_delta":
            delta, block = data["delta"], blocks[data["index"]]
            piece = delta["text"] if delta["type"] == "text_delta" else delta["partial_json"]
            assert delta["type"] == ("text_delta" if block["type"] == "text" else "input_json_delta")
            block["partial"] += piece
            out.deltas.append(piece)
        elif ev.event == "message_delta":
            out.finish = data["delta"]["stop_reason"]
            usage["output_tokens"] = data["usage"]["output_tokens"]
        elif ev.event == "message_stop":
            out.done = True
        elif ev.event == "error":
            out.error = data["error"]
    for block in blocks:
        if block["type"] == "text":
            out.text = (out.text or "") + block["partial"]
        else:
            out.tool_calls.append({"id": block["id"], "name": block["name"], "arguments": block["partial"]})
    out.usage = usage or None
    return out


def whole(wire: str, body: dict[str, Any]) -> Assembled:
    """The non-streamed body of the same reply, in the same shape (for comparison)."""
    if wire == "openai":
        message, choice = body["choices"][0]["message"], body["choices"][0]
        calls = [
            {"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
            for c in message.get("tool_calls") or []
        ]
        return Assembled(
            text=message["content"],
            refusal=message["refusal"],
            tool_calls=calls,
            finish=choice["finish_reason"],
            usage=body["usage"],
        )
    texts = [b["text"] for b in body["content"] if b["type"] == "text"]
    calls = [
        {
            "id": b["id"],
            "name": b["name"],
            "arguments": b["input"] if isinstance(b["input"], str) else json.dumps(b["input"]),
        }
        for b in body["content"]
        if b["type"] == "tool_use"
    ]
    return Assembled(
        text="".join(texts) if texts else None,
        tool_calls=calls,
        finish=body["stop_reason"],
        usage=body["usage"],
    )
