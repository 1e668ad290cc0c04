"""What a provider wire format must render; shared by the OpenAI and Anthropic wires."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from ._brain import Reply
from ._conversation import Conversation
from ._sse import Plan, SseEvent

__all__ = ["BAD_GATEWAY_HTML", "ErrorSpec", "Exchange", "Wire", "mask_key"]

BAD_GATEWAY_HTML = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>cloudflare</center>\r\n"
    "</body>\r\n</html>\r\n"
)


@dataclass(frozen=True)
class ErrorSpec:
    status: int
    type: str
    message: str
    code: str | None = None
    param: str | None = None


@dataclass(frozen=True)
class Exchange:
    """Facts about the request being answered that renderers need."""

    n: int  # sequence number, for deterministic ids
    model: str
    api_key: str
    conversation: Conversation


def mask_key(key: str) -> str:
    """Mask an API key the way OpenAI echoes it back: ``sk-a***********wxyz``."""
    if len(key) <= 8:
        return "***"
    return key[:4] + "*" * (len(key) - 8) + key[-4:]


class Wire(ABC):
    name: str
    stream_error_event: str | None  # the SSE event name of an error in a stream (None: a bare data line)

    @abstractmethod
    def parse(self, body: dict[str, Any]) -> Conversation: ...

    @abstractmethod
    def api_key(self, headers: dict[str, str]) -> str: ...

    @abstractmethod
    def reply_body(self, reply: Reply, ex: Exchange) -> dict[str, Any]: ...

    @abstractmethod
    def error_body(self, spec: ErrorSpec, ex: Exchange) -> dict[str, Any]: ...

    @abstractmethod
    def preset_error(self, preset: str, ex: Exchange) -> ErrorSpec | None:
        """The error a preset stands for on this wire; ``None`` if not an error preset."""

    @abstractmethod
    def status_error(self, status: int) -> ErrorSpec:
        """A plausible error for a bare status code."""

    @abstractmethod
    def headers(self, ex: Exchange, status: int) -> dict[str, str]:
        """Request-id and rate-limit headers for a response with ``status``."""

    @abstractmethod
    def error_fields(self, body: dict[str, Any]) -> dict[str, Any]:
        """The object inside ``body`` where extra error fields are merged."""

    @abstractmethod
    def stream_events(self, plan: Plan, ex: Exchange) -> list[SseEvent]:
        """The whole reply as server-sent events, tagged with their part (see :mod:`._sse`)."""

    @abstractmethod
    def stream_error_body(self, spec: ErrorSpec, ex: Exchange) -> dict[str, Any]:
        """The data of an error event sent after the stream began (with HTTP 200)."""

    @abstractmethod
    def unknown_events(self, ex: Exchange) -> list[SseEvent]:
        """Events of a kind a client must skip: what a newer API version might add."""
