"""The Anthropic Messages wire format."""

from __future__ import annotations

import json
from typing import Any

from sidecar.core.conversation import Message, ToolCall
from sidecar.core.kinds import FinishReason, Role
from sidecar.providers.tool_shapes import render_tool
from sidecar.providers.wire import JSON_INSTRUCTION, ChatReply, ChatRequest

__all__ = ["AnthropicAdapter"]

_FINISH = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "pause_turn": FinishReason.STOP,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "tool_use": FinishReason.TOOL_CALLS,
    "refusal": FinishReason.CONTENT_FILTER,
}


class AnthropicAdapter:
    wire = "anthropic"

    def __init__(self, version: str = "2023-06-01") -> None:
        self._version = version

    def path(self) -> str:
        return "/v1/messages"

    def headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": self._version}
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def body(self, request: ChatRequest) -> dict[str, Any]:
        system = request.system
        if request.response_schema is not None:
            schema = json.dumps(request.response_schema, separators=(",", ":"))
            system = f"{system}\n\n{JSON_INSTRUCTION}\n{schema}".strip()
        messages: list[dict[str, Any]] = []
        for m in request.messages:
            role, blocks = _message(m)
            if messages and messages[-1]["role"] == role:
                messages[-1]["content"].extend(blocks)  # the API wants roles to alternate
            else:
                messages.append({"role": role, "content": blocks})
        body: dict[str, Any] = {
            "model": request.upstream_model,
            "max_tokens": request.max_tokens,
            "messages": messages,
        }
        if system:
            body["system"] = system
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.tools:
            body["tools"] = [
                render_tool(
                    "anthropic", t.name, t.description, json.loads(t.parameters_json) if t.parameters_json else None
                )
                for t in request.tools
            ]
        return body

    def parse(self, body: dict[str, Any]) -> ChatReply:
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in body.get("content") or []:
            if block.get("type") == "text":
                texts.append(str(block.get("text", "")))
            elif block.get("type") == "tool_use":
                calls.append(
                    ToolCall(
                        id=str(block.get("id", "")),
                        name=str(block.get("name", "")),
                        arguments_json=json.dumps(block.get("input") or {}),
                    )
                )
        raw_finish = str(body.get("stop_reason") or "")
        usage = body.get("usage") or {}
        return ChatReply(
            text="".join(texts),
            tool_calls=calls,
            finish=_FINISH.get(raw_finish, FinishReason.UNSPECIFIED),
            raw_finish=raw_finish,
            refusal=("".join(texts) or "the model declined to answer") if raw_finish == "refusal" else None,
            input_tokens=int(usage.get("input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
            response_model=str(body.get("model") or ""),
            response_id=str(body.get("id") or ""),
        )


def _message(m: Message) -> tuple[str, list[dict[str, Any]]]:
    if m.role == Role.ASSISTANT:
        blocks: list[dict[str, Any]] = []
        if m.text:
            blocks.append({"type": "text", "text": m.text})
        for c in m.tool_calls:
            try:  # bounded before: CallChecks refused arguments past the size cap or nested past 64 deep
                args = json.loads(c.arguments_json or "{}")
            except (ValueError, RecursionError):
                args = {"_raw": c.arguments_json}
            blocks.append({"type": "tool_use", "id": c.id, "name": c.name, "input": args})
        return "assistant", blocks
    blocks = [
        {"type": "tool_result", "tool_use_id": r.call_id, "content": r.content, "is_error": r.is_error}
        for r in m.tool_results
    ]
    if m.text or not blocks:
        blocks.append({"type": "text", "text": m.text})
    return "user", blocks
