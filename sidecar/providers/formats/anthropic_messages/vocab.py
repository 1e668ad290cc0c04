"""The Anthropic Messages vocabulary both halves share: stop reasons, tools, keys, errors.

    stop_reason (wire)                      FinishReason (core)    rendered back as
    end_turn, stop_sequence, pause_turn     STOP                   end_turn
    max_tokens,                             LENGTH                 max_tokens
      model_context_window_exceeded
    tool_use                                TOOL_CALLS             tool_use
    refusal                                 CONTENT_FILTER         refusal

A tool_use ``input`` that carries arguments that were not JSON is ``{RAW_ARGUMENTS: text}``. The
key goes in ``x-api-key``, the API version in ``anthropic-version``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sidecar.core.kinds import FinishReason
from sidecar.providers.formats.chat import EMPTY_PARAMETERS

__all__ = [
    "API_KEY_HEADER",
    "DEFAULT_VERSION",
    "ERROR_TYPES",
    "FINISH",
    "FINISH_NAMES",
    "FORMAT_NAME",
    "RATE_LIMIT_HEADERS",
    "RAW_ARGUMENTS",
    "REFUSAL_TEXT",
    "VERSION_HEADER",
    "arguments_of",
    "input_of",
    "render_tool",
]

FORMAT_NAME = "anthropic"
"""The format's name in the configuration (``providers[].wire_format``)."""

API_KEY_HEADER = "x-api-key"
VERSION_HEADER = "anthropic-version"
DEFAULT_VERSION = "2023-06-01"
RAW_ARGUMENTS = "_raw"
"""The one key of a tool_use input that carries arguments that were not JSON, as written."""
REFUSAL_TEXT = "the model declined to answer"
"""A refusal's explanation when the model wrote none."""
RATE_LIMIT_HEADERS = (
    "anthropic-ratelimit-requests-limit",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-requests-reset",
    "anthropic-ratelimit-tokens-limit",
    "anthropic-ratelimit-tokens-remaining",
    "anthropic-ratelimit-tokens-reset",
)
"""The headers an Anthropic answer tells its rate limits by (RFC 3339 times for the resets)."""

FINISH: Mapping[str, FinishReason] = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "pause_turn": FinishReason.STOP,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "tool_use": FinishReason.TOOL_CALLS,
    "refusal": FinishReason.CONTENT_FILTER,
}
FINISH_NAMES: Mapping[FinishReason, str] = {
    FinishReason.STOP: "end_turn",
    FinishReason.LENGTH: "max_tokens",
    FinishReason.TOOL_CALLS: "tool_use",
    FinishReason.CONTENT_FILTER: "refusal",
}

ERROR_TYPES: Mapping[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
"""The ``error.type`` Anthropic answers a status with (another 5xx: api_error; 4xx: invalid_request_error)."""


def input_of(arguments_json: str) -> Any:
    """A tool call's arguments as a tool_use ``input``: the JSON, or ``{RAW_ARGUMENTS: text}`` when not JSON."""
    try:  # bounded before: CallChecks refused arguments past the size cap or nested past 64 deep
        return json.loads(arguments_json or "{}")
    except (ValueError, RecursionError):
        return {RAW_ARGUMENTS: arguments_json}


def arguments_of(value: Any) -> str:
    """A tool_use ``input`` as a reply's arguments JSON (the inverse of ``input_of``)."""
    if isinstance(value, dict) and list(value) == [RAW_ARGUMENTS] and isinstance(value[RAW_ARGUMENTS], str):
        return str(value[RAW_ARGUMENTS])
    return json.dumps(value or {})


def render_tool(name: str, description: str, parameters: dict[str, Any] | None) -> dict[str, Any]:
    """A tool definition: ``{"name", "description", "input_schema"}``."""
    schema = parameters if parameters is not None else EMPTY_PARAMETERS
    return {"name": name, "description": description, "input_schema": schema}
