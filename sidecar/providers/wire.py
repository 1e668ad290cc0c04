"""The provider-neutral request and reply every adapter translates to and from.

Each wire format's module (``openai``, ``anthropic``) holds its adapter (``body``: a ChatRequest as
that format's request; ``parse``: its reply) and ``parse_request``, the inverse of ``body`` (that
format's request as the core's ModelRequest, for the HTTP fronts and the round-trip tests). JSON
text a parser writes (a schema, tool arguments) is ``compact_json``: what ``body`` renders it from.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from sidecar.core.conversation import Message, ToolCall, ToolDefinition
from sidecar.core.kinds import FinishReason
from sidecar.core.taxonomy import InvalidInput

__all__ = [
    "JSON_INSTRUCTION",
    "Adapter",
    "ChatReply",
    "ChatRequest",
    "compact_json",
    "number_field",
    "object_list",
    "schema_text",
    "shown",
]

JSON_INSTRUCTION = "Respond with a single JSON object matching this JSON schema:"


def compact_json(value: Any) -> str:
    """``value`` as JSON text without spaces (the form a schema is rendered in)."""
    return json.dumps(value, separators=(",", ":"))


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


def shown(value: Any) -> str:
    """A value a caller sent, as a failure quotes it (the taxonomy caps it)."""
    return value if isinstance(value, str) else json.dumps(value, default=str)[:200]


def number_field(body: Mapping[str, Any], key: str, kind: type[int] | type[float]) -> Any:
    """``body[key]`` as an int or float, None when absent or null; INVALID_INPUT when it is another type."""
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or (kind is int and not isinstance(value, int)):
        raise InvalidInput(key, shown(value), f"must be {'an integer' if kind is int else 'a number'}")
    return kind(value)


def object_list(body: Mapping[str, Any], key: str, *, required: bool = False) -> list[dict[str, Any]]:
    """``body[key]`` as a list of JSON objects (empty when absent and not required)."""
    value = body.get(key)
    if value is None and not required:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise InvalidInput(key, shown(value), "must be a list of JSON objects")
    return value


def schema_text(value: Any, where: str) -> str:
    """A JSON schema object of a request as compact JSON text."""
    if not isinstance(value, dict):
        raise InvalidInput(where, shown(value), "must be a JSON schema object")
    return compact_json(value)
