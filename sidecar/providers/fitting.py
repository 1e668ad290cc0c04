"""A request fitted to the deployment that takes it, before its attempts.

``estimate_tokens`` is the conversation's input estimate (characters / 4, plus a few per message,
plus images and PDFs) the call holds against the model's context window and throttle;
``own_reasoning`` drops the reasoning another wire format made; ``limits`` is the model's bounds on
a request's parts.
"""

from __future__ import annotations

import math
from dataclasses import replace

from sidecar.config import ModelConfig
from sidecar.core.content import Limits, parts_tokens
from sidecar.core.conversation import ModelRequest

__all__ = ["CHARS_PER_TOKEN", "TOKENS_PER_MESSAGE", "estimate_tokens", "limits", "own_reasoning"]

CHARS_PER_TOKEN = 4
"""The estimate: a token per four characters, plus a few per message."""
TOKENS_PER_MESSAGE = 4


def estimate_tokens(req: ModelRequest) -> int:
    """The conversation's input tokens, estimated (characters / 4, plus 4 per message, plus images and PDFs)."""
    chars = len(req.system) + len(req.response_schema_json)
    tokens = 0
    for m in req.messages:
        chars += len(m.text) + sum(len(c.arguments_json) + len(c.name) for c in m.tool_calls)
        chars += sum(len(r.content) for r in m.tool_results)
        chars += sum(len(r.text) + len(r.signature) + len(r.redacted_data) for r in m.reasoning)
        for part_list in (m.parts, *(r.parts for r in m.tool_results)):
            if part_list:
                part_tokens, part_chars = parts_tokens(part_list)
                tokens += part_tokens
                chars += part_chars
    for t in req.tools:
        chars += len(t.name) + len(t.description) + len(t.parameters_json)
    return tokens + math.ceil(chars / CHARS_PER_TOKEN) + TOKENS_PER_MESSAGE * (len(req.messages) + 1)


def own_reasoning(request: ModelRequest, wire_format: str) -> tuple[ModelRequest, str]:
    """The request without the reasoning another wire format made (only its own provider can verify a
    signature or redacted data), and the warning that says so ("" when nothing was dropped)."""
    dropped: dict[str, int] = {}
    messages = list(request.messages)
    for i, m in enumerate(messages):
        own = tuple(r for r in m.reasoning if r.format in ("", wire_format))
        if len(own) != len(m.reasoning):
            for r in m.reasoning:
                if r.format not in ("", wire_format):
                    dropped[r.format] = dropped.get(r.format, 0) + 1
            messages[i] = replace(m, reasoning=own)
    if not dropped:
        return request, ""
    made = ", ".join(f"{n} by the {f} format" for f, n in sorted(dropped.items()))
    warning = (
        f"reasoning dropped: {made}; model {request.model} speaks {wire_format}, and only the provider that "
        "made reasoning can verify it"
    )
    return replace(request, messages=tuple(messages)), warning


def limits(model_id: str, model: ModelConfig) -> Limits:
    p = model.parts
    return Limits(
        model_id, p.max_parts, p.max_image_bytes, p.max_document_bytes, p.image_media_types, p.document_media_types
    )
