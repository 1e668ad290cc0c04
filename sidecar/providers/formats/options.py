"""``provider_options_json``: per wire format, keys merged into the upstream body as they are.

The text is a JSON object of one object per wire format (``{"openai": {...}, "anthropic": {...}}``);
a format merges its own object (``options_for``) and leaves the others' to theirs. Refused as
INVALID_INPUT naming the field: text that is not such an object, a name that is no registered wire
format (``registry.check_options``: a typo is never dropped), and a key the format's upstream sets
itself from the request's own fields (its ``sidecar_keys``), or one it refuses for a reason of its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sidecar.core.json_depth import loads
from sidecar.core.taxonomy import InvalidInput

__all__ = ["options_by_format", "options_for"]

FIELD = "provider_options_json"


def options_by_format(raw: str) -> dict[str, dict[str, Any]]:
    """The options, by format name; InvalidInput when the text is not a JSON object of objects."""
    if not raw:
        return {}
    try:
        options = loads(raw)
    except ValueError:
        options = None
    if not isinstance(options, dict):
        raise InvalidInput(FIELD, raw[:80], 'must be a JSON object of one object per wire format: {"openai": {...}}')
    for name, value in options.items():
        if not isinstance(value, dict):
            raise InvalidInput(f"{FIELD}.{name}", json.dumps(value)[:80], "must be a JSON object")
    return options


def options_for(
    raw: str, format_name: str, sidecar_keys: frozenset[str], refused: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The keys ``format_name``'s object sets, checked (``refused``: a key and why it is refused)."""
    mine = options_by_format(raw).get(format_name, {})
    for key in mine:
        if key in sidecar_keys:
            rule = "is a key the sidecar sets itself from the request's own fields: set it there"
            raise InvalidInput(f"{FIELD}.{format_name}.{key}", key, rule)
        if refused and key in refused:
            raise InvalidInput(f"{FIELD}.{format_name}.{key}", key, refused[key])
    return mine
