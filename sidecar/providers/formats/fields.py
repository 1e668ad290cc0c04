"""Reading the fields of a JSON body, for every format: what a front refuses, and what a reader tolerates.

a front reads a caller's request (strict: a field of the wrong type is INVALID_INPUT naming its JSON path,
``at`` the path of the object it is read from, when that is not the body)
    shown(value)                    a value as a failure quotes it
    number_field(body, key, kind)   an int or float, None when absent
    bool_field(body, key)           true or false, False when absent
    text_field(obj, key, where)     a string, "" (or a default) when absent or null
    one_of(value, words, where)     one of a set of words: a caller's object or list is never looked up
    object_list(body, key)          a list of JSON objects
    schema_text(value, where)       a JSON schema object as compact JSON text
    positive_budget(request, key)   an output budget below 1 refused
an upstream reads a provider's answer (tolerant: what is not what the wire sends is skipped)
    text_or_empty(value)            a string, "" for anything else
    count(value)                    a token count: a non-negative int, 0 for anything else
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from sidecar.core.conversation import ModelRequest
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.formats.chat import compact_json

__all__ = [
    "bool_field",
    "count",
    "number_field",
    "object_list",
    "one_of",
    "positive_budget",
    "schema_text",
    "shown",
    "text_field",
    "text_or_empty",
]


def shown(value: Any) -> str:
    """A value a caller sent, as a failure quotes it (the taxonomy caps it)."""
    return value if isinstance(value, str) else json.dumps(value, default=str)[:200]


def _path(at: str, key: str) -> str:
    return f"{at}.{key}" if at else key


def number_field(body: Mapping[str, Any], key: str, kind: type[int] | type[float], *, at: str = "") -> Any:
    """``body[key]`` as an int or float, None when absent or null; INVALID_INPUT when it is another type."""
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or (kind is int and not isinstance(value, int)):
        raise InvalidInput(_path(at, key), shown(value), f"must be {'an integer' if kind is int else 'a number'}")
    return kind(value)


def bool_field(body: Mapping[str, Any], key: str) -> bool:
    """``body[key]`` as true or false (absent or null: false); INVALID_INPUT when it is another type."""
    value = body.get(key, False)
    if not isinstance(value, bool) and value is not None:
        raise InvalidInput(key, shown(value), "must be true or false")
    return bool(value)


def text_field(obj: Mapping[str, Any], key: str, where: str, default: str = "") -> str:
    """``obj[key]`` as a string, ``default`` when absent or null; INVALID_INPUT naming ``where`` (its JSON
    path) for any other type: an object, a list, a number or a boolean is never read as text, nor as absent."""
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise InvalidInput(where, shown(value), "must be a string")
    return value


def one_of(value: Any, words: Collection[str], where: str, rule: str) -> str:
    """``value`` when it is one of ``words``; INVALID_INPUT naming ``where`` with ``rule`` otherwise. Its type
    is checked first: a caller's object or list looked up in a dict of words is a TypeError (unhashable)."""
    if not isinstance(value, str) or value not in words:
        raise InvalidInput(where, shown(value), rule)
    return value


def optional_bool(body: Mapping[str, Any], key: str, where: str) -> bool | None:
    """``body[key]`` as true or false, None when absent or null (unset differs from false); INVALID_INPUT
    naming ``where`` when it is another type."""
    value = body.get(key)
    if value is not None and not isinstance(value, bool):
        raise InvalidInput(where, shown(value), "must be true or false")
    return value


def object_list(body: Mapping[str, Any], key: str, *, required: bool = False, at: str = "") -> list[dict[str, Any]]:
    """``body[key]`` as a list of JSON objects (empty when absent and not required)."""
    value = body.get(key)
    if value is None and not required:
        return []
    if not isinstance(value, list):
        raise InvalidInput(_path(at, key), shown(value), "must be a list of JSON objects")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise InvalidInput(f"{_path(at, key)}[{i}]", shown(item), "must be a JSON object")
    return value


def schema_text(value: Any, where: str) -> str:
    """A JSON schema object of a request as compact JSON text."""
    if not isinstance(value, dict):
        raise InvalidInput(where, shown(value), "must be a JSON schema object")
    return compact_json(value)


def positive_budget(request: ModelRequest, key: str) -> None:
    """INVALID_INPUT naming ``key`` when the output budget asked for is below 1 (the core's own check
    is of the catalog's maximum; a gRPC caller cannot send a negative one)."""
    if request.max_output_tokens is not None and request.max_output_tokens < 1:
        raise InvalidInput(key, str(request.max_output_tokens), "must be at least 1")


def text_or_empty(value: Any) -> str:
    return value if isinstance(value, str) else ""


def count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
