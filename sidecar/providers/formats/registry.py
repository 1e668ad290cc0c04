"""Every wire format the sidecar speaks, by its name in the configuration (``providers[].wire_format``).

A new format is its folder beside these (``vocab``, ``upstream``, ``front``: ``protocol.WireFormat``)
and one line here; docs/architecture.md says what it implements, and ``tests/unit/test_formats.py``
round-trips a request and a reply through the halves of every format listed.
"""

from __future__ import annotations

from collections.abc import Mapping

from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.formats import anthropic_messages, bedrock_converse, gemini, openai_chat, openai_responses
from sidecar.providers.formats.options import FIELD, options_by_format
from sidecar.providers.formats.protocol import WireFormat

__all__ = ["FORMATS", "check_options", "format_named"]

FORMATS: Mapping[str, WireFormat] = {
    f.name: f
    for f in (
        openai_chat.FORMAT,
        anthropic_messages.FORMAT,
        gemini.FORMAT,
        openai_responses.FORMAT,
        bedrock_converse.FORMAT,
    )
}


def format_named(name: str) -> WireFormat:
    """The format a provider's ``wire_format`` names (the configuration allows only these)."""
    return FORMATS[name]


def check_options(raw: str) -> None:
    """InvalidInput when ``provider_options_json`` names something other than a registered format."""
    for name in options_by_format(raw):
        if name not in FORMATS:
            raise InvalidInput(f"{FIELD}.{name}", name, f"must name a wire format: {', '.join(sorted(FORMATS))}")
