"""The Anthropic Messages vocabulary both halves share: stop reasons, tools, content blocks, keys, errors.

    stop_reason (wire)                      FinishReason (core)    rendered back as
    end_turn, stop_sequence, pause_turn     STOP                   end_turn
    max_tokens,                             LENGTH                 max_tokens
      model_context_window_exceeded
    tool_use                                TOOL_CALLS             tool_use
    refusal                                 CONTENT_FILTER         refusal

A tool_use ``input`` that carries arguments that were not JSON is ``{RAW_ARGUMENTS: text}`` (``formats.arguments``).
The key goes in ``x-api-key``, the API version in ``anthropic-version``.

Content blocks, both ways (``content_block`` renders a part; ``request`` reads them back; their keys are
``shapes``')::

    core                                    block
    TextPart                                text
    ImagePart given as data | by URL        image, source base64 | url (a data: URL: the base64 it holds)
    DocumentPart given as data | by URL     document, source base64 application/pdf | url | text text/plain
      | as text
    CacheBreakpoint(ttl)                    the block's cache_control, ephemeral (its ttl when one is asked)
    ReasoningPart(text, signature)          thinking, as it came
    ReasoningPart(redacted_data)            redacted_thinking, as it came

An image's ``detail`` has no field: Anthropic sees every image at its full detail (the long edge up
to 1,568 px), which is what "", "auto" and "high" ask; "low" is refused before sending
(``rules.check``), and an image is read back with detail "".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sidecar.core.conversation import CacheBreakpoint, DocumentPart, ImagePart, Part, ReasoningPart, TextPart
from sidecar.core.kinds import FinishReason
from sidecar.core.rate_budget import Allowance, Budget
from sidecar.providers.formats.anthropic_messages.shapes import RedactedThinkingBlock, ThinkingBlock
from sidecar.providers.formats.chat import EMPTY_PARAMETERS
from sidecar.providers.formats.inline import b64, read_data_url

__all__ = [
    "API_KEY_HEADER",
    "CACHE_TYPE",
    "DEFAULT_VERSION",
    "EFFORTS",
    "ERROR_TYPES",
    "FINISH",
    "FINISH_NAMES",
    "FORMAT_NAME",
    "MAX_CACHE_BREAKPOINTS",
    "MIN_THINKING_BUDGET",
    "PDF",
    "RATE_LIMIT_HEADERS",
    "REFUSAL_TEXT",
    "TEXT_PLAIN",
    "THINKING_TOP_P",
    "VERSION_HEADER",
    "cache_control",
    "content_block",
    "rate_budget",
    "reasoning_block",
    "render_tool",
]

FORMAT_NAME = "anthropic"
"""The format's name in the configuration (``providers[].wire_format``)."""

API_KEY_HEADER = "x-api-key"
VERSION_HEADER = "anthropic-version"
DEFAULT_VERSION = "2023-06-01"
REFUSAL_TEXT = "the model declined to answer"
"""A refusal's explanation when the model wrote none."""
CACHE_TYPE = "ephemeral"
"""The one kind of ``cache_control`` there is."""
MAX_CACHE_BREAKPOINTS = 4
"""Blocks with ``cache_control`` in one request, at most (system, tools and messages together)."""
MIN_THINKING_BUDGET = 1024
"""``thinking.budget_tokens`` at least (and below ``max_tokens``)."""
THINKING_TOP_P = (0.95, 1.0)
"""The ``top_p`` Anthropic takes with thinking on."""
EFFORTS = ("low", "medium", "high")
"""The core's effort levels Anthropic has (``output_config.effort``; it has no "minimal")."""
PDF = "application/pdf"
TEXT_PLAIN = "text/plain"
RATE_LIMIT_HEADERS = (
    "anthropic-ratelimit-requests-limit",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-requests-reset",
    "anthropic-ratelimit-tokens-limit",
    "anthropic-ratelimit-tokens-remaining",
    "anthropic-ratelimit-tokens-reset",
)
"""The headers an Anthropic answer tells its rate limits by (RFC 3339 times for the resets)."""

_COUNT = re.compile(r"[0-9]{1,18}")
_TOKEN_BUDGETS = ("tokens", "input-tokens", "output-tokens")
"""The token budgets an answer may tell, in the order read: the first one told is the tokens' budget."""


def _reset_in(text: str | None, now: datetime) -> float | None:
    """Seconds from ``now`` to an RFC 3339 time (``2026-01-01T00:01:00Z``); None when it is not one."""
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return max((when - now).total_seconds(), 0.0)


def _allowance(headers: Mapping[str, str], name: str, now: datetime) -> Allowance | None:
    left = headers.get(f"anthropic-ratelimit-{name}-remaining")
    if left is None or not _COUNT.fullmatch(left.strip()):
        return None
    return Allowance(int(left.strip()), _reset_in(headers.get(f"anthropic-ratelimit-{name}-reset"), now))


def rate_budget(headers: Mapping[str, str], now: datetime) -> Budget:
    """What an answer's rate-limit headers say is left::

    anthropic-ratelimit-requests-remaining: 4        Budget.requests  Allowance(4, seconds to the reset)
    anthropic-ratelimit-requests-reset: <RFC 3339>
    anthropic-ratelimit-tokens-remaining (else       Budget.tokens    the same
      input-tokens-, else output-tokens-), -reset
    a count that is not digits, a reset that is      that budget not told (a reset not read: None)
      not an RFC 3339 time with its zone
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    tokens = (_allowance(lowered, name, now) for name in _TOKEN_BUDGETS)
    return Budget(_allowance(lowered, "requests", now), next((t for t in tokens if t is not None), None))


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


def render_tool(
    name: str,
    description: str,
    parameters: dict[str, Any] | None,
    cache: CacheBreakpoint | None = None,
    strict: bool | None = None,
) -> dict[str, Any]:
    """A tool definition: ``{"name", "description", "input_schema", "cache_control"?, "strict"?}`` (``strict``
    only when the definition sets it)."""
    schema = parameters if parameters is not None else EMPTY_PARAMETERS
    tool: dict[str, Any] = {"name": name, "description": description, "input_schema": schema}
    if cache is not None:
        tool["cache_control"] = cache_control(cache)
    if strict is not None:
        tool["strict"] = strict
    return tool


def cache_control(bp: CacheBreakpoint) -> dict[str, str]:
    """A breakpoint as ``cache_control`` (its ttl only when one is asked)."""
    return {"type": CACHE_TYPE, "ttl": bp.ttl} if bp.ttl else {"type": CACHE_TYPE}


def _image_source(image: ImagePart) -> dict[str, str]:
    inline = read_data_url(image.url) if image.url else (image.media_type, image.data)
    if inline is None:
        return {"type": "url", "url": image.url}
    media_type, data = inline
    return {"type": "base64", "media_type": media_type, "data": b64(data)}


def _document_source(doc: DocumentPart) -> dict[str, str]:
    if doc.text is not None:
        return {"type": "text", "media_type": TEXT_PLAIN, "data": doc.text}
    if doc.url:
        return {"type": "url", "url": doc.url}
    return {"type": "base64", "media_type": doc.media_type or PDF, "data": b64(doc.data)}


def content_block(part: Part) -> dict[str, Any]:
    """A part as a content block (the module's table)."""
    block: dict[str, Any]
    match part:
        case TextPart():
            block = {"type": "text", "text": part.text}
        case ImagePart():
            block = {"type": "image", "source": _image_source(part)}
        case DocumentPart():
            block = {"type": "document", "source": _document_source(part)}
            if part.title:
                block["title"] = part.title
    if part.cache is not None:
        block["cache_control"] = cache_control(part.cache)
    return block


def reasoning_block(r: ReasoningPart) -> ThinkingBlock | RedactedThinkingBlock:
    """A reasoning part as a thinking block (or a redacted_thinking one), its text and signature as they are."""
    if r.redacted_data:
        return {"type": "redacted_thinking", "data": r.redacted_data}
    return {"type": "thinking", "thinking": r.text, "signature": r.signature}
