"""The Anthropic Messages wire format."""

from __future__ import annotations

import json
from typing import Any

from sidecar_client._proto.sidecar.v1 import sidecar_pb2 as pb

from sidecar.providers.wire import JSON_INSTRUCTION, ChatReply, ChatRequest

__all__ = ["AnthropicAdapter"]

_FINISH = {
    "end_turn": pb.FINISH_REASON_STOP,
    "stop_sequence": pb.FINISH_REASON_STOP,
    "pause_turn": pb.FINISH_REASON_STOP,
    "max_tokens": pb.FINISH_REASON_LENGTH,
    "model_context_window_exceeded": pb.FINISH_REASON_LENGTH,
    "tool_use": pb.FINISH_REASON_TOOL_CALLS,
    "refusal": pb.FINISH_REASON_CONTENT_FILTER,
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
                {
                    "name": t.name,
                    "description": t.description,
                    "input_schema": json.loads(t.parameters_json or '{"type":"object","properties":{}}'),
                }
                for t in request.tools
            ]
        return body

    def parse(self, body: dict[str, Any]) -> ChatReply:
        texts: list[str] = []
        calls: list[pb.ToolCall] = []
        for block in body.get("content") or []:
            if block.get("type") == "text":
                texts.append(str(block.get("text", "")))
            elif block.get("type") == "tool_use":
                calls.append(
                    pb.ToolCall(
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
            finish=_FINISH.get(raw_finish, pb.FINISH_REASON_UNSPECIFIED),
            raw_finish=raw_finish,
            refusal=("".join(texts) or "the model declined to answer") if raw_finish == "refusal" else None,
            input_tokens=int(usage.get("input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
            response_model=str(body.get("model") or ""),
            response_id=str(body.get("id") or ""),
        )


def _message(m: pb.Message) -> tuple[str, list[dict[str, Any]]]:
    if m.role == pb.ROLE_ASSISTANT:
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
