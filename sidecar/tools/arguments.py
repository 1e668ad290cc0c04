"""Arguments checked before any call: bounded parsing and JSON-schema validation, as INVALID_INPUT.

Each rule is written as the way to get it right, naming the parameter and the value sent.

    arguments_json  -> at most policy.max_argument_bytes, nested at most 64 deep, integers within
                       Python's digit limit (sidecar.core.json_input), a JSON object, valid Unicode
                    -> required strings not blank, the tool's schema (patterns on RE2)
                    -> the tool's guardrails (GUARDRAIL)
    placeholders    -> an argument put into the URL is at most MAX_URL_ARGUMENT_CHARS once quoted

``check_call`` runs all of it under ``policy.check_time_limit_s``; arguments longer than
``INLINE_ARGUMENT_BYTES`` are checked in a worker thread so the event loop keeps answering.
Measured against the default tools, a 1 MiB argument takes tens of milliseconds to check (most of
it RE2 matching the guardrail), more than the event loop may be held; 8 KiB takes well under one.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from sidecar.core.cpu_budget import TooCostly, checks, off_loop
from sidecar.core.json_input import load_json
from sidecar.core.json_schemas import SchemaProblem, additional_properties, first_error, validator_for
from sidecar.core.taxonomy import InvalidInput
from sidecar.tools.guardrails import Guardrails

__all__ = [
    "INLINE_ARGUMENT_BYTES",
    "MAX_URL_ARGUMENT_CHARS",
    "check_arguments",
    "check_call",
    "check_url_arguments",
    "validator_for",
]

INLINE_ARGUMENT_BYTES = 8 * 1024
"""Arguments up to this size are checked on the event loop; longer ones in a worker thread."""
MAX_URL_ARGUMENT_CHARS = 2048
"""An argument put into a tool's URL may be at most this long once URL-quoted (servers commonly
refuse request lines over 8 KiB; a longer argument belongs in a request body)."""
_PLACEHOLDER = re.compile(r"\{([^{}]+)\}")


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
        extra = sorted(additional_properties(instance, sub))
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


def _valid_unicode(arguments: dict[str, Any]) -> bool:
    """No lone surrogate anywhere (one pass in C; the walk that names the parameter runs only when false)."""
    try:
        json.dumps(arguments, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _blank(arguments: dict[str, Any], schema: dict[str, Any]) -> InvalidInput | None:
    """A required string that is only whitespace is blank, whatever the schema forgot to say."""
    for name in schema.get("required", []):
        value = arguments.get(name)
        if isinstance(value, str) and not value.strip():
            return InvalidInput(name, value, "must not be blank")
    return None


def check_arguments(
    arguments_json: str, schema: dict[str, Any], validator: Draft202012Validator, *, max_bytes: int
) -> dict[str, Any]:
    """The arguments as a dict, or InvalidInput raised naming the parameter, the value and the rule."""
    text = arguments_json.strip() or "{}"
    arguments = load_json(text, "arguments", max_bytes=max_bytes, expected="a JSON object of the tool's parameters")
    if not isinstance(arguments, dict):
        raise InvalidInput(
            "arguments",
            arguments_json,
            "must be a JSON object of the tool's parameters, not a " + type(arguments).__name__,
        )
    if not _valid_unicode(arguments):
        for path, value in _strings(arguments, ""):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidInput(path, repr(value)[1:-1], "must be valid Unicode text (no lone surrogates)") from None
    blank = _blank(arguments, schema)
    if blank is not None:
        raise blank
    try:
        err = first_error(validator, arguments)
    except SchemaProblem as exc:  # the tool's own schema cannot be followed (a config mistake)
        raise InvalidInput("arguments", arguments_json, f"could not be checked: the tool's schema must {exc}") from None
    if err is not None:
        parameter, value, rule = _rule(err, schema)
        raise InvalidInput(parameter, value, rule)
    return arguments


async def check_call(
    arguments_json: str,
    schema: dict[str, Any],
    validator: Draft202012Validator,
    guardrails: Guardrails,
    *,
    url: str,
    max_bytes: int,
    limit_s: float,
) -> dict[str, Any]:
    """``check_arguments``, the guardrails and ``check_url_arguments``, within ``limit_s``; off the
    event loop when large.

    Raises InvalidInput (or Guardrail) as they do; a check past its limit is INVALID_INPUT too.
    """

    def run() -> dict[str, Any]:
        arguments = check_arguments(arguments_json, schema, validator, max_bytes=max_bytes)
        guardrails.check(arguments)
        check_url_arguments(url, arguments)
        return arguments

    try:
        if len(arguments_json) <= INLINE_ARGUMENT_BYTES:
            return checks(run, limit_s)
        return await off_loop(run, limit_s)
    except TooCostly as exc:
        raise InvalidInput(
            "arguments", arguments_json, f"must be quicker to check: checking them took longer than {exc.limit_s:g} s"
        ) from None


def check_url_arguments(template: str, arguments: dict[str, Any]) -> None:
    """InvalidInput for an argument too long to put into the URL ``template`` (it names the parameter)."""
    for key in _PLACEHOLDER.findall(template):
        value = arguments.get(key, "")
        text = value if isinstance(value, str) else json.dumps(value)
        if len(text) > MAX_URL_ARGUMENT_CHARS:  # quoting never shortens: no need to quote a megabyte to know
            got = f"{len(text)} characters before encoding"
        else:
            quoted = len(urllib.parse.quote(text, safe=""))
            if quoted <= MAX_URL_ARGUMENT_CHARS:
                continue
            got = f"{quoted} once encoded"
        raise InvalidInput(
            key, text, f"must be at most {MAX_URL_ARGUMENT_CHARS} characters in a URL, once URL-encoded (got {got})"
        )
