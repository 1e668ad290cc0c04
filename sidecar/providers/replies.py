"""Checks of a model's reply against the JSON asked for: JSON_PARSE and RESPONSE_VALIDATION.

The schema is the caller's, so it runs as every caller's schema does (``sidecar.core.json_schemas``:
patterns on RE2, a checkpoint of the call's time limit at every keyword); the reply is the model's,
so what it gets wrong is told to the model (JSON_PARSE): nesting past ``MAX_JSON_DEPTH``, an integer
past Python's digit limit, not an object. ``sidecar.providers.schemas`` runs both off the event loop.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from jsonschema import Draft202012Validator

from sidecar.core.cpu_budget import checkpoint
from sidecar.core.json_input import MAX_JSON_DEPTH, nested_over
from sidecar.core.json_schemas import errors, validator_for
from sidecar.core.taxonomy import JsonParse, ResponseValidation

__all__ = ["parse_reply", "shape_of", "validate_reply"]

_TOO_DEEP = f"the reply nested arrays and objects deeper than {MAX_JSON_DEPTH} levels"
_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*)\n\s*```\s*$", re.S)


def shape_of(schema: dict[str, Any]) -> str:
    """A short picture of the object asked for, e.g. {"name": string, "tags": array}."""
    props = schema.get("properties") or {}
    if not props:
        return "a JSON object"
    parts = []
    for name, sub in props.items():
        t = sub.get("type", "any") if isinstance(sub, dict) else "any"
        parts.append(f'"{name}": {"|".join(t) if isinstance(t, list) else t}')
    required = schema.get("required") or []
    req = f" (required: {', '.join(required)})" if required else ""
    return "{" + ", ".join(parts) + "}" + req


def parse_reply(text: str, schema: dict[str, Any], model: str) -> dict[str, Any]:
    """The reply as a JSON object, or JsonParse with the parser's reason and the shape missed."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body:
        raise JsonParse("the reply was empty", shape_of(schema), model=model)
    if nested_over(body, MAX_JSON_DEPTH):  # before json.loads, which would recurse as deep (core.json_input)
        raise JsonParse(_TOO_DEEP, shape_of(schema), model=model)
    try:
        parsed = json.loads(body)
    except json.JSONDecodeError as exc:
        raise JsonParse(f"{exc.msg} at line {exc.lineno} column {exc.colno}", shape_of(schema), model=model) from None
    except ValueError:  # json.loads' only other refusal: an integer past Python's digit limit
        reason = f"the reply held an integer of more than {sys.get_int_max_str_digits()} digits"
        raise JsonParse(reason, shape_of(schema), model=model) from None
    if not isinstance(parsed, dict):
        raise JsonParse(f"the reply was a JSON {type(parsed).__name__}, not an object", shape_of(schema), model=model)
    return parsed


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip()) or value in ([], {})


def validate_reply(
    obj: dict[str, Any], schema: dict[str, Any], model: str, validator: Draft202012Validator | None = None
) -> ResponseValidation | None:
    """Every required field left empty, and every schema violation, one per line; None when all is well.

    Raises ``json_schemas.SchemaProblem`` when the schema itself cannot be followed on this reply.
    """
    problems: list[tuple[str, str]] = []

    def walk(node: Any, sub: dict[str, Any], path: str) -> None:
        checkpoint()
        if not isinstance(node, dict) or not isinstance(sub, dict):
            return
        for name in sub.get("required") or []:
            where = f"{path}.{name}" if path else name
            if name not in node:
                problems.append((where, "is required but missing"))
            elif _empty(node[name]):
                problems.append((where, "is required but empty"))
        for name, child in (sub.get("properties") or {}).items():
            if isinstance(node.get(name), dict):
                walk(node[name], child, f"{path}.{name}" if path else name)

    walk(obj, schema, "")
    seen = {p for p, _ in problems}
    for err in errors(validator or validator_for(schema), obj):
        if err.validator == "required":
            continue
        where = ".".join(str(p) for p in err.absolute_path) or "(the object)"
        if where not in seen:
            seen.add(where)
            problems.append((where, err.message))
    return ResponseValidation(problems, model=model) if problems else None
