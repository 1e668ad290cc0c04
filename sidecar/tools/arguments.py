"""Arguments checked before any call: JSON-schema validation turned into INVALID_INPUT.

Each rule is written as the way to get it right, naming the parameter and the value sent.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from sidecar.core.taxonomy import InvalidInput

__all__ = ["check_arguments", "validator_for"]


def validator_for(schema: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _type_words(schema: Any) -> str:
    t = schema.get("type", "value") if isinstance(schema, dict) else "value"
    return " or ".join(t) if isinstance(t, list) else str(t)


def _rule(err: ValidationError, schema: dict[str, Any]) -> tuple[str, str, str]:
    """(parameter, value, rule) of one schema violation."""
    instance: Any = err.instance
    validator_value: Any = err.validator_value
    sub: Any = err.schema
    path = "/".join(str(p) for p in err.absolute_path)
    v = err.validator
    props = schema.get("properties", {})
    if v == "required":
        missing = next((name for name in validator_value if name not in instance), "?")
        where = f"{path}/{missing}" if path else missing
        sub = (props.get(missing) if not path else None) or {}
        hint = f": {sub['description']}" if isinstance(sub, dict) and sub.get("description") else ""
        return where, "", f"is required; provide a {_type_words(sub)}{hint}"
    if v == "additionalProperties":
        extra = sorted(set(instance) - set(sub.get("properties", {})))
        allowed = ", ".join(sub.get("properties", {})) or "none"
        name = extra[0] if extra else "?"
        return (
            name,
            _show(instance.get(name, "")),
            f"is not a parameter of this tool; its parameters are: {allowed}",
        )
    value = _show(instance)
    rules = {
        "type": lambda: f"must be a {_type_words(sub)}",
        "minLength": lambda: (
            "must not be blank" if validator_value == 1 else f"must be at least {validator_value} characters long"
        ),
        "maxLength": lambda: f"must be at most {validator_value} characters long",
        "pattern": lambda: (
            f"must match the pattern {validator_value}" + (f" ({sub['description']})" if sub.get("description") else "")
        ),
        "enum": lambda: "must be one of: " + ", ".join(_show(x) for x in validator_value),
        "const": lambda: f"must be {_show(validator_value)}",
        "minimum": lambda: f"must be at least {validator_value}",
        "maximum": lambda: f"must be at most {validator_value}",
        "exclusiveMinimum": lambda: f"must be greater than {validator_value}",
        "exclusiveMaximum": lambda: f"must be less than {validator_value}",
        "format": lambda: f"must be a valid {validator_value}",
        "minItems": lambda: f"must hold at least {validator_value} items",
        "maxItems": lambda: f"must hold at most {validator_value} items",
    }
    make = rules.get(str(v))
    rule = make() if make else err.message
    return path or "arguments", value, rule


def _strings(value: Any, path: str) -> list[tuple[str, str]]:
    if isinstance(value, str):
        return [(path or "arguments", value)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings(v, f"{path}/{k}" if path else str(k))]
    if isinstance(value, list):
        return [s for i, v in enumerate(value) for s in _strings(v, f"{path}/{i}")]
    return []


def _blank(arguments: dict[str, Any], schema: dict[str, Any]) -> InvalidInput | None:
    """A required string that is only whitespace is blank, whatever the schema forgot to say."""
    for name in schema.get("required", []):
        value = arguments.get(name)
        if isinstance(value, str) and not value.strip():
            return InvalidInput(name, value, "must not be blank")
    return None


def check_arguments(arguments_json: str, schema: dict[str, Any], validator: Draft202012Validator) -> dict[str, Any]:
    """The arguments as a dict, or InvalidInput raised naming the parameter, the value and the rule."""
    text = arguments_json.strip() or "{}"
    try:
        arguments = json.loads(text)
    except RecursionError:
        raise InvalidInput("arguments", arguments_json[:80], "must be a JSON object nested less deeply") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            "arguments", arguments_json, f"must be a JSON object of the tool's parameters ({exc.msg} at {exc.pos})"
        ) from None
    if not isinstance(arguments, dict):
        raise InvalidInput(
            "arguments",
            arguments_json,
            "must be a JSON object of the tool's parameters, not a " + type(arguments).__name__,
        )
    for path, value in _strings(arguments, ""):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput(path, repr(value)[1:-1], "must be valid Unicode text (no lone surrogates)") from None
    blank = _blank(arguments, schema)
    if blank is not None:
        raise blank
    err = best_match(validator.iter_errors(arguments))
    if err is not None:
        parameter, value, rule = _rule(err, schema)
        raise InvalidInput(parameter, value, rule)
    return arguments
