"""A tool call's arguments on a wire that carries them as a JSON value (Anthropic's tool_use ``input``,
Gemini's functionCall ``args``, Bedrock's toolUse ``input``), for every such format.

The core holds a call's arguments as JSON text (``ToolCall.arguments_json``). A model may write text that
is not JSON: such a wire carries it as ``{RAW_ARGUMENTS: text}``, read back as the text as written::

    arguments_value(text)       the text's JSON, else {RAW_ARGUMENTS: text}            (any JSON: Anthropic's)
    arguments_object(text)      the text's JSON object, else {RAW_ARGUMENTS: text}     (Gemini's, Bedrock's)
    arguments_text(value)       the inverse: {RAW_ARGUMENTS: text} -> the text; any other value as compact
                                JSON (null: ``{}``; ``dumps``: a format that renders it otherwise)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from sidecar.providers.formats.chat import compact_json

__all__ = ["RAW_ARGUMENTS", "arguments_object", "arguments_text", "arguments_value"]

RAW_ARGUMENTS = "_raw"
"""The one key of a call's arguments value that carries arguments that were not JSON, as written."""


def arguments_value(arguments_json: str) -> Any:
    """A call's arguments as a JSON value: the JSON, or ``{RAW_ARGUMENTS: text}`` when not JSON."""
    try:  # bounded before: CallChecks refused arguments past the size cap or nested past 64 deep
        return json.loads(arguments_json or "{}")
    except (ValueError, RecursionError):
        return {RAW_ARGUMENTS: arguments_json}


def arguments_object(arguments_json: str) -> dict[str, Any]:
    """A call's arguments as a JSON object: the JSON object, else ``{RAW_ARGUMENTS: text}``."""
    value = arguments_value(arguments_json)
    return value if isinstance(value, dict) else {RAW_ARGUMENTS: arguments_json}


def arguments_text(value: Any, dumps: Callable[[Any], str] = compact_json) -> str:
    """A call's arguments value as arguments JSON (the inverse of ``arguments_value``)."""
    if isinstance(value, dict) and list(value) == [RAW_ARGUMENTS] and isinstance(value[RAW_ARGUMENTS], str):
        return str(value[RAW_ARGUMENTS])
    return dumps(value if value is not None else {})
