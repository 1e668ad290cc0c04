"""Request builders shared by the provider tests."""

from __future__ import annotations

from typing import Any

import httpx

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
WIRES = ("openai", "anthropic")


def chat(
    client: httpx.Client,
    base: str,
    wire: str,
    text: str = "hello",
    *,
    model: str = "m",
    **extra: Any,
) -> httpx.Response:
    """One user message on either wire; ``extra`` merges into the body."""
    if wire == "openai":
        body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": text}]}
        headers = {"authorization": "Bearer sk-test-0123456789abcdef"}
        path = OPENAI_PATH
    else:
        body = {"model": model, "max_tokens": 1024, "messages": [{"role": "user", "content": text}]}
        headers = {"x-api-key": "sk-ant-test-0123456789", "anthropic-version": "2023-06-01"}
        path = ANTHROPIC_PATH
    body.update(extra)
    return client.post(base + path, json=body, headers=headers)


def text_of(wire: str, body: dict[str, Any]) -> str | None:
    if wire == "openai":
        content = body["choices"][0]["message"]["content"]
        return content if content is None else str(content)
    texts = [b["text"] for b in body["content"] if b["type"] == "text"]
    return "".join(texts) if texts else None


def finish_of(wire: str, body: dict[str, Any]) -> str:
    if wire == "openai":
        return str(body["choices"][0]["finish_reason"])
    return str(body["stop_reason"])


def error_of(wire: str, body: dict[str, Any]) -> dict[str, Any]:
    if wire == "anthropic":
        assert body["type"] == "error"
    err: dict[str, Any] = body["error"]
    return err


def script(client: httpx.Client, base: str, steps: list[dict[str, Any]], **fields: Any) -> httpx.Response:
    """POST /_fake/script with ``fields`` naming the queue (``model=`` or ``path=``)."""
    resp = client.post(base + "/_fake/script", json={"steps": steps, **fields})
    resp.raise_for_status()
    return resp
