"""The OpenAI Chat Completions wire format (also vLLM, Ollama and the compatible servers)."""

from __future__ import annotations

import json
from typing import Any

from sidecar.core.conversation import Message, ToolCall
from sidecar.core.kinds import FinishReason, Role
from sidecar.providers.tool_shapes import render_tool
from sidecar.providers.wire import ChatReply, ChatRequest

__all__ = ["OpenAIAdapter"]

_FINISH = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,
    "content_filter": FinishReason.CONTENT_FILTER,
}


class OpenAIAdapter:
    wire = "openai"

    def path(self) -> str:
        return "/chat/completions"

    def headers(self, api_key: str | None) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    def body(self, request: ChatRequest) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        for m in request.messages:
            messages.extend(_message(m))
        body: dict[str, Any] = {
            "model": request.upstream_model,
            "messages": messages,
            "max_tokens": request.max_tokens,
        }
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.tools:
            body["tools"] = [
                render_tool(
                    "openai", t.name, t.description, json.loads(t.parameters_json) if t.parameters_json else None
                )
                for t in request.tools
            ]
        if request.response_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": request.response_schema, "strict": False},
            }
        return body

    def parse(self, body: dict[str, Any]) -> ChatReply:
        choice = (body.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        raw_finish = str(choice.get("finish_reason") or "")
        calls = [
            ToolCall(
                id=str(c.get("id", "")),
                name=str((c.get("function") or {}).get("name", "")),
                arguments_json=str((c.get("function") or {}).get("arguments") or "{}"),
            )
            for c in message.get("tool_calls") or []
        ]
        usage = body.get("usage") or {}
        content = message.get("content") or ""
        if not isinstance(content, str):
            raise ValueError("the reply's content is not text")
        return ChatReply(
            text=content,
            tool_calls=calls,
            finish=_FINISH.get(raw_finish, FinishReason.UNSPECIFIED),
            raw_finish=raw_finish,
            refusal=message.get("refusal") or None,
            input_tokens=int(usage.get("prompt_tokens") or 0),
            output_tokens=int(usage.get("completion_tokens") or 0),
            response_model=str(body.get("model") or ""),
            response_id=str(body.get("id") or ""),
        )


def _message(m: Message) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if m.role == Role.ASSISTANT:
        msg: dict[str, Any] = {"role": "assistant", "content": m.text or None}
        if m.tool_calls:
            msg["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json or "{}"}}
                for c in m.tool_calls
            ]
        return [msg]
    for r in m.tool_results:
        out.append({"role": "tool", "tool_call_id": r.call_id, "content": r.content})
    if m.text or not m.tool_results:
        out.append({"role": "user", "content": m.text})
    return out
