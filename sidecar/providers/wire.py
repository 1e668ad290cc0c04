"""The provider-neutral request and reply every adapter translates to and from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from sidecar.core.conversation import Message, ToolCall, ToolDefinition
from sidecar.core.kinds import FinishReason

__all__ = ["JSON_INSTRUCTION", "Adapter", "ChatReply", "ChatRequest"]

JSON_INSTRUCTION = "Respond with a single JSON object matching this JSON schema:"


@dataclass(slots=True)
class ChatRequest:
    upstream_model: str
    system: str
    messages: list[Message]
    tools: list[ToolDefinition]
    response_schema: dict[str, Any] | None
    max_tokens: int
    temperature: float | None


@dataclass(slots=True)
class ChatReply:
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish: FinishReason = FinishReason.UNSPECIFIED
    raw_finish: str = ""
    refusal: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    response_model: str = ""
    response_id: str = ""


class Adapter(Protocol):
    """One wire format: where to send, what to send, how to read the answer."""

    wire: str

    def path(self) -> str: ...

    def headers(self, api_key: str | None) -> dict[str, str]: ...

    def body(self, request: ChatRequest) -> dict[str, Any]: ...

    def parse(self, body: dict[str, Any]) -> ChatReply: ...
