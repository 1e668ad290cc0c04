"""The provider-neutral request and reply every adapter translates to and from.

An adapter also reads its wire's stream: ``stream_decoder()`` gives one ``StreamDecoder`` per
attempt, fed every server-sent event (``event`` name, ``data`` text) in order::

    feed(event, data) -> [Delta, ...]   the deltas the event carries (none: a ping, an unknown event)
                      raises StreamFault  an error event (``error_body``: classify it as an error answer)
                                          or data that is not what the wire sends (garbled)
    complete                            the wire's end marker arrived ([DONE], message_stop)
    reply()                             the reply the events made, or None when no finish was seen
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from sidecar.core.conversation import Message, ToolCall, ToolDefinition
from sidecar.core.kinds import FinishReason
from sidecar.core.stream import Delta

__all__ = ["JSON_INSTRUCTION", "Adapter", "ChatReply", "ChatRequest", "StreamDecoder", "StreamFault"]

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


class StreamFault(Exception):
    """A stream event that is not part of a reply: an error event, or data the wire never sends."""

    def __init__(self, detail: str, error_body: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.error_body = error_body
        """The error event's data (an error object), to classify as an error answer; None: garbled."""


class StreamDecoder(Protocol):
    """One attempt's stream, event by event, turned into deltas and a reply."""

    def feed(self, event: str, data: str) -> list[Delta]: ...

    @property
    def complete(self) -> bool: ...

    def reply(self) -> ChatReply | None: ...


class Adapter(Protocol):
    """One wire format: where to send, what to send, how to read the answer (whole or streamed)."""

    wire: str

    def path(self) -> str: ...

    def headers(self, api_key: str | None) -> dict[str, str]: ...

    def body(self, request: ChatRequest, *, stream: bool = False) -> dict[str, Any]: ...

    def parse(self, body: dict[str, Any]) -> ChatReply: ...

    def stream_decoder(self) -> StreamDecoder: ...
