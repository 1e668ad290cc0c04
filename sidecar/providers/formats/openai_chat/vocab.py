"""The OpenAI Chat Completions vocabulary both halves share: finishes, markers, tools, keys, errors.

    finish_reason (wire)        FinishReason (core)      rendered back as
    stop                        STOP                     stop
    length                      LENGTH                   length
    tool_calls, function_call   TOOL_CALLS               tool_calls
    content_filter              CONTENT_FILTER           content_filter (a refusal: stop, with message.refusal)

A tool result that is an error has ``TOOL_ERROR_PREFIX`` before its content (the wire has no
is_error flag); a stream ends with ``END_MARKER``. The key goes in ``authorization: Bearer``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sidecar.core.kinds import FinishReason
from sidecar.providers.formats.chat import EMPTY_PARAMETERS

__all__ = [
    "API_KEY_HEADER",
    "END_MARKER",
    "ERROR_TYPES",
    "FINISH",
    "FINISH_NAMES",
    "FORMAT_NAME",
    "RATE_LIMIT_HEADERS",
    "TOOL_ERROR_PREFIX",
    "api_key_of",
    "render_tool",
]

FORMAT_NAME = "openai"
"""The format's name in the configuration (``providers[].wire_format``)."""

TOOL_ERROR_PREFIX = "[tool error] "
"""Before the content of a tool result that is an error: the OpenAI wire has no is_error flag."""
END_MARKER = "[DONE]"
API_KEY_HEADER = "authorization"
RATE_LIMIT_HEADERS = (
    "x-ratelimit-limit-requests",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-requests",
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
)
"""The headers an OpenAI answer tells its rate limits by (a duration like ``6m0s`` for the resets)."""

FINISH: Mapping[str, FinishReason] = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,
    "content_filter": FinishReason.CONTENT_FILTER,
}
FINISH_NAMES: Mapping[FinishReason, str] = {
    FinishReason.STOP: "stop",
    FinishReason.LENGTH: "length",
    FinishReason.TOOL_CALLS: "tool_calls",
    FinishReason.CONTENT_FILTER: "content_filter",
}

ERROR_TYPES: Mapping[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "not_found"),
    409: ("invalid_request_error", "conflict"),
    413: ("invalid_request_error", "request_too_large"),
    422: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
    529: ("overloaded_error", "overloaded_error"),
}
"""The ``error.type`` and ``error.code`` OpenAI answers a status with (5xx not listed: server_error)."""


def api_key_of(headers: Mapping[str, str]) -> str:
    """The key of ``authorization: Bearer KEY`` (the header as sent when it is not a bearer)."""
    auth = headers.get(API_KEY_HEADER, "")
    return auth[7:].strip() if auth.lower().startswith("bearer ") else auth


def render_tool(name: str, description: str, parameters: dict[str, Any] | None) -> dict[str, Any]:
    """A tool definition: ``{"type": "function", "function": {"name", "description", "parameters"}}``."""
    schema = parameters if parameters is not None else EMPTY_PARAMETERS
    return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}
