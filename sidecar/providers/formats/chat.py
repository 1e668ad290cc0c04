"""The provider-neutral request and reply every wire format translates to and from.

    ChatRequest   what one attempt asks of a model: the upstream model, the conversation (the
                  call's, with its corrections), tools, the response schema, the output budget
    ChatReply     what one attempt's answer says: text, tool calls, the finish (neutral and as the
                  wire wrote it), a refusal, tokens, the model and the id the provider reported
    message_of    a front's message of parts: plain text when they are one bare text part (``bare_text``)
    StreamFault   a stream event that is not part of a reply (an error event, or garbled data)
    CallPieces    a streamed tool call as read so far: its id, name and arguments' fragments
    event_object  a stream event's data as the JSON object every format's events are, else garbled

A format's upstream half renders a ChatRequest and reads a ChatReply (whole or streamed); its
front half does the inverse: it reads a request into the core's ModelRequest and renders a
ChatReply. JSON text a reader writes (a schema, tool arguments) is ``compact_json``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sidecar.core.conversation import (
    Carried,
    Controls,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCall,
    ToolDefinition,
    Usage,
)
from sidecar.core.json_depth import loads
from sidecar.core.kinds import FinishReason, Role

__all__ = [
    "EMPTY_PARAMETERS",
    "JSON_INSTRUCTION",
    "CallPieces",
    "ChatReply",
    "ChatRequest",
    "StreamFault",
    "bare_text",
    "compact_json",
    "event_object",
    "message_of",
    "split_schema",
    "with_schema",
]

JSON_INSTRUCTION = "Respond with a single JSON object matching this JSON schema:"
"""Before the schema, where a format asks for JSON in words (a system prompt) rather than a field."""
EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}
"""The parameters of a tool that declares none."""


def compact_json(value: Any) -> str:
    """``value`` as JSON text without spaces (the form a schema is rendered in)."""
    return json.dumps(value, separators=(",", ":"))


_SCHEMA_MARK = f"{JSON_INSTRUCTION}\n"


def with_schema(system: str, schema: str) -> str:
    """A system prompt asking for JSON in words: ``schema`` (compact JSON text) after JSON_INSTRUCTION, last."""
    return f"{system}\n\n{_SCHEMA_MARK}{schema}".strip()


def split_schema(system: str) -> tuple[str, str]:
    """The inverse of ``with_schema``: the system prompt and the response schema appended to it ("" when
    it ends with none)."""
    at = system.rfind(_SCHEMA_MARK)
    if at < 0 or (at > 0 and not system[:at].endswith("\n\n")):
        return system, ""
    text = system[at + len(_SCHEMA_MARK) :]
    try:
        schema = json.loads(text)
    except ValueError:
        return system, ""
    if not isinstance(schema, dict) or compact_json(schema) != text:
        return system, ""
    return system[:at].removesuffix("\n\n"), text


def bare_text(parts: Sequence[Part]) -> str | None:
    """The text of parts that are one text part with nothing more (no breakpoint, nothing carried), else None."""
    if len(parts) == 1 and isinstance(parts[0], TextPart) and parts[0].cache is None and parts[0].carried is None:
        return parts[0].text
    return None


def message_of(role: Role, parts: Sequence[Part]) -> Message:
    """A message of ``parts``: its text when they are one bare text part (none: empty text), else the parts."""
    text = bare_text(parts)
    return Message(role, text) if text is not None else Message(role, parts=tuple(parts))


@dataclass(slots=True)
class ChatRequest:
    upstream_model: str
    system: str
    messages: list[Message]
    tools: list[ToolDefinition]
    response_schema: dict[str, Any] | None
    max_tokens: int
    temperature: float | None
    controls: Controls = field(default_factory=Controls)
    carried: Carried | None = None
    """The body's keys the front did not interpret (``ModelRequest.carried``)."""


@dataclass(slots=True)
class ChatReply:
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish: FinishReason = FinishReason.UNSPECIFIED
    raw_finish: str = ""
    refusal: str | None = None
    input_tokens: int = 0
    """All of them, cached ones included (``Usage``)."""
    output_tokens: int = 0
    response_model: str = ""
    response_id: str = ""
    reasoning: list[ReasoningPart] = field(default_factory=list)
    cache_read_input_tokens: int = 0
    cache_write_input_tokens: int = 0
    reasoning_tokens: int = 0
    refusal_category: str = ""
    """A refusal's category when the reply names one (Azure's filtered categories, ``hate,violence``); else the
    call names it from the finish (``ProviderRefusal``)."""

    @property
    def usage(self) -> Usage:
        return Usage(
            self.input_tokens,
            self.output_tokens,
            self.cache_read_input_tokens,
            self.cache_write_input_tokens,
            self.reasoning_tokens,
        )


@dataclass(slots=True)
class CallPieces:
    """A streamed tool call as read so far (a stream decoder's, one per call)."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    """Its arguments' fragments, in order."""

    def call(self) -> ToolCall:
        """The whole call (no arguments: ``{}``)."""
        return ToolCall(self.id, self.name, "".join(self.arguments) or "{}")


class StreamFault(Exception):
    """A stream event that is not part of a reply: an error event, or data the wire never sends."""

    def __init__(self, detail: str, error_body: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.error_body = error_body
        """The error event's data (an error object), to classify as an error answer; None: garbled."""


def event_object(data: str, what: str = "an event") -> dict[str, Any]:
    """A stream event's data as a JSON object; StreamFault (garbled) naming ``what`` when it is not one."""
    try:
        body = loads(data)
    except ValueError:
        raise StreamFault(f"the stream sent {what} that is not JSON") from None
    if not isinstance(body, dict):
        raise StreamFault(f"the stream sent {what} that is not a JSON object")
    return body
