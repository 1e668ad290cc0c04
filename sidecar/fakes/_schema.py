"""Build values from JSON schemas: example answers and tool-call arguments."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["example_for", "missing_fields_for", "tool_arguments_for"]

_MAX_DEPTH = 8
_FORMATS = {
    "date-time": "2024-01-01T00:00:00Z",
    "date": "2024-01-01",
    "time": "00:00:00Z",
    "email": "user@example.com",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "hostname": "example.com",
    "ipv4": "127.0.0.1",
}

# A leaf filler: (schema, property name) -> value, or None to use the default.
Leaf = Callable[[dict[str, Any], str], Any]


def _resolve(schema: Any, root: dict[str, Any]) -> dict[str, Any]:
    seen = 0
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and seen < _MAX_DEPTH:
        ref: str = schema["$ref"]
        target: Any = root
        if not ref.startswith("#"):
            return {}
        for part in [p for p in ref[1:].split("/") if p]:
            target = target.get(part.replace("~1", "/").replace("~0", "~"), {}) if isinstance(target, dict) else {}
        schema, seen = target, seen + 1
    if not isinstance(schema, dict):
        return {}
    for combo in ("anyOf", "oneOf"):
        options = schema.get(combo)
        if isinstance(options, list) and options:
            non_null = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
            return _resolve((non_null or options)[0], root)
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and all_of:
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        props: dict[str, Any] = dict(merged.get("properties", {}))
        required: list[str] = list(merged.get("required", []))
        for part in all_of:
            sub = _resolve(part, root)
            props.update(sub.get("properties", {}))
            required += [r for r in sub.get("required", []) if r not in required]
            merged.update({k: v for k, v in sub.items() if k not in ("properties", "required")})
        merged["properties"], merged["required"] = props, required
        return merged
    return schema


def _type_of(schema: dict[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if isinstance(kind, str):
        return kind
    if "properties" in schema:
        return "object"
    if "items" in schema:
        return "array"
    return "string"


def _string(schema: dict[str, Any]) -> str:
    fmt = schema.get("format")
    text = _FORMATS.get(fmt, "example") if isinstance(fmt, str) else "example"
    lo, hi = schema.get("minLength"), schema.get("maxLength")
    if isinstance(lo, int) and len(text) < lo:
        text = text + "x" * (lo - len(text))
    if isinstance(hi, int) and len(text) > hi:
        text = text[:hi]
    return text


def _number(schema: dict[str, Any], integer: bool) -> int | float:
    value: float = 1
    lo = schema.get("minimum", schema.get("exclusiveMinimum"))
    hi = schema.get("maximum", schema.get("exclusiveMaximum"))
    if isinstance(lo, (int, float)) and value <= lo:
        value = lo if "minimum" in schema else lo + 1
    if isinstance(hi, (int, float)) and value >= hi:
        value = hi if "maximum" in schema else hi - 1
    return int(value) if integer else value


def _build(schema: Any, root: dict[str, Any], leaf: Leaf | None, name: str, depth: int) -> Any:
    node = _resolve(schema, root)
    if "const" in node:
        return node["const"]
    enum = node.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    kind = _type_of(node)
    if leaf is not None and kind not in ("object", "array"):
        value = leaf(node, name)
        if value is not None:
            return value
    if kind == "object":
        if depth >= _MAX_DEPTH:
            return {}
        props: dict[str, Any] = node.get("properties") or {}
        required = node.get("required")
        names = list(props) if required is None else [n for n in required if isinstance(n, str)]
        return {n: _build(props.get(n, {}), root, leaf, n, depth + 1) for n in names}
    if kind == "array":
        count = node.get("minItems", 0)
        items = node.get("items", {})
        n = count if isinstance(count, int) else 0
        return [_build(items, root, leaf, name, depth + 1) for _ in range(n)]
    if kind == "integer":
        return _number(node, integer=True)
    if kind == "number":
        return _number(node, integer=False)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return _string(node)


def example_for(schema: Any) -> Any:
    """A value satisfying ``schema``: strings "example", numbers 1, booleans true,
    arrays of ``minItems`` items, objects with their required (else all) properties."""
    root = schema if isinstance(schema, dict) else {}
    return _build(schema, root, None, "", 0)


def _looks_like_id(name: str) -> bool:
    low = name.lower()
    return low == "id" or low.endswith("_id") or low.endswith("-id") or name.endswith("Id") or low.endswith("ids")


def tool_arguments_for(schema: Any, user_text: str) -> dict[str, Any]:
    """Arguments for a tool call: id-like strings get "doc-1", other strings the user's text."""

    def leaf(node: dict[str, Any], name: str) -> Any:
        if _type_of(node) != "string":
            return None
        if _looks_like_id(name):
            return "doc-1"
        return user_text or "example"

    root = schema if isinstance(schema, dict) else {}
    value = _build(schema or {"type": "object"}, root, leaf, "", 0)
    return value if isinstance(value, dict) else {}


def missing_fields_for(schema: Any) -> dict[str, Any]:
    """An object that fails ``schema``: the first required field absent, the other
    required string fields ``""``, the other required fields absent."""
    node = _resolve(schema, schema if isinstance(schema, dict) else {})
    props: dict[str, Any] = node.get("properties") or {}
    required = [n for n in (node.get("required") or list(props)) if isinstance(n, str)]
    out: dict[str, Any] = {}
    for name in required[1:]:
        if _type_of(_resolve(props.get(name, {}), node)) == "string":
            out[name] = ""
    return out
