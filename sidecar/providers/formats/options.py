"""``provider_options_json``: per wire format, keys deep-merged into the upstream body as they are.

The text is a JSON object of one object per wire format (``{"openai": {...}, "anthropic": {...}}``);
a format checks its own object (``options_for``), deep-merges it into the body it rendered
(``merge_options``) and leaves the others' to theirs. The merge reaches a nested object: objects merge
key by key, and a list element by element (the option's element i into the body's element i), so
``{"anthropic": {"tools": [{"eager_input_streaming": true}]}}`` sets the key on the body's tools[0].
Refused as INVALID_INPUT naming the field: text that is not such an object, a name that is no
registered wire format (``registry.check_options``: a typo is never dropped), a value the format's
upstream sets itself from the request's own fields (a key of its ``sidecar_keys`` given anything but
objects to merge into, or any value the body already holds that is not an object or a list), a list
longer than the body's, and a key the format refuses for a reason of its own.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from sidecar.core.json_depth import loads
from sidecar.core.taxonomy import InvalidInput

__all__ = ["merge_options", "options_by_format", "options_for"]

FIELD = "provider_options_json"
_SETS_ITSELF = "is a key the sidecar sets itself from the request's own fields: set it there"


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


def _reaches(value: Any) -> bool:
    """The value only reaches into objects the sidecar renders (an object, or a list of objects)."""
    if isinstance(value, list):
        return bool(value) and all(isinstance(item, dict) for item in value)
    return isinstance(value, dict) and bool(value)


def options_for(
    raw: str, format_name: str, sidecar_keys: frozenset[str], refused: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The keys ``format_name``'s object sets, checked (``refused``: a key and why it is refused). A key of
    ``sidecar_keys`` may only reach into what the sidecar renders (``merge_options`` checks the rest)."""
    mine = options_by_format(raw).get(format_name, {})
    for key, value in mine.items():
        if key in sidecar_keys and not _reaches(value):
            raise InvalidInput(f"{FIELD}.{format_name}.{key}", key, _SETS_ITSELF)
        if refused and key in refused:
            raise InvalidInput(f"{FIELD}.{format_name}.{key}", key, refused[key])
    return mine


def merge_options(
    body: dict[str, Any], options: Mapping[str, Any], format_name: str, sidecar_keys: frozenset[str]
) -> dict[str, Any]:
    """``body`` with ``options`` (``options_for``'s) deep-merged into it: a key the body lacks is set (a key of
    ``sidecar_keys`` the body lacks is refused: the request's own field sets it), objects merge key by key, a
    list element by element; a list longer than the body's, or a value the body holds that is not an object
    or a list, is refused naming ``provider_options_json.<format>.<path>`` (the body's path)."""
    at = f"{FIELD}.{format_name}"
    for key in options:
        if key in sidecar_keys and key not in body:
            raise InvalidInput(f"{at}.{key}", key, _SETS_ITSELF)
    _merge_object(body, options, at)
    return body


def _merge_object(into: dict[str, Any], keys: Mapping[str, Any], at: str) -> None:
    for key, value in keys.items():
        if key not in into:
            into[key] = copy.deepcopy(value)
        else:
            into[key] = _merge_value(into[key], value, f"{at}.{key}")


def _merge_value(mine: Any, value: Any, at: str) -> Any:
    if isinstance(mine, dict) and isinstance(value, dict):
        _merge_object(mine, value, at)
        return mine
    if isinstance(mine, list) and isinstance(value, list):
        if len(value) > len(mine):
            rule = (
                f"has {len(value)} elements and the body the sidecar renders has {len(mine)} there: an option's "
                "list merges element by element into the body's (docs/carried.md)"
            )
            raise InvalidInput(at, json.dumps(value)[:80], rule)
        for i, item in enumerate(value):
            mine[i] = _merge_value(mine[i], item, f"{at}[{i}]")
        return mine
    raise InvalidInput(at, json.dumps(value)[:80], _SETS_ITSELF)
