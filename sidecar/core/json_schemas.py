"""JSON Schema (Draft 2020-12) on RE2: how every schema that is not ours is checked and run.

    keyword or format       jsonschema's own            here (``sidecar.core.patterns``, linear time)
    pattern                 re.search                   RE2 search
    patternProperties       re.search                   RE2 search
    additionalProperties    re.search of the            the same rule, the patternProperties
                            patternProperties           matched on RE2
    format: regex           re.compile                  RE2 compile (a pattern RE2 refuses is invalid)
    unevaluatedProperties   re.search of the            refused beside patternProperties in one
                            patternProperties           schema (``check_schema`` says so)

``check_schema(schema)`` says what is wrong with a schema, or None: nesting deeper than
``MAX_JSON_DEPTH`` (checked first: the metaschema check recurses about a dozen frames a level),
the Draft 2020-12 metaschema with patterns compiled on RE2, every ``$ref`` and ``$dynamicRef``
resolvable, and no reference that loops before reading any of the value.
``errors(validator, instance)`` runs a checked schema; a reference that cannot be resolved or
nests without end while validating raises ``SchemaProblem`` instead of escaping as a crash.
Every keyword passes a ``cpu_budget.checkpoint()`` first, so a check run under
``cpu_budget.checks`` stops at its time limit (TooCostly) however large the schema or value.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Iterator
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker, validators
from jsonschema.exceptions import ValidationError, best_match
from jsonschema.protocols import Validator
from jsonschema_specifications import REGISTRY as SPECIFICATIONS
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from sidecar.core.cpu_budget import checkpoint
from sidecar.core.json_input import MAX_JSON_DEPTH, depth_over
from sidecar.core.patterns import PatternError, compile_pattern, search

__all__ = [
    "FORMAT_CHECKER",
    "SchemaProblem",
    "additional_properties",
    "check_schema",
    "errors",
    "first_error",
    "validator_for",
]

_short = reprlib.Repr()
_short.maxstring = 80
_short.maxother = 80


def _plain(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class SchemaProblem(ValueError):
    """A schema that cannot be run; the message says what is wrong, to be put after "must ..."."""


FORMAT_CHECKER = FormatChecker(formats=())
"""Draft 2020-12's format checks, with ``regex`` compiled on RE2."""
FORMAT_CHECKER.checkers.update(Draft202012Validator.FORMAT_CHECKER.checkers)


@FORMAT_CHECKER.checks("regex", raises=PatternError)
def _is_regex(instance: object) -> bool:
    if isinstance(instance, str):
        compile_pattern(instance)
    return True


def _pattern(validator: Validator, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not search(pattern, instance):
        yield ValidationError(f"{_short.repr(instance)} does not match {pattern!r}")


def _pattern_properties(
    validator: Validator, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            checkpoint()
            if search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)  # type: ignore[attr-defined]


def additional_properties(instance: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """The keys of ``instance`` that neither ``properties`` nor ``patternProperties`` (on RE2) cover."""
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = []
    for key in instance:
        checkpoint()
        if key not in properties and not any(search(p, key) for p in patterns):
            extras.append(key)
    return extras


def _additional_properties(
    validator: Validator, additional: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    extras = additional_properties(instance, schema)
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)  # type: ignore[attr-defined]
    elif additional is False and extras:
        names = ", ".join(_short.repr(e) for e in sorted(extras)[:10]) + (", …" if len(extras) > 10 else "")
        if "patternProperties" in schema:
            patterns = ", ".join(repr(p) for p in sorted(schema["patternProperties"]))
            yield ValidationError(f"{names} {'does' if len(extras) == 1 else 'do'} not match any of: {patterns}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({names} {verb} unexpected)")


_Keyword = Callable[[Validator, Any, Any, dict[str, Any]], Iterator[ValidationError] | None]


def _bounded(keyword: _Keyword) -> _Keyword:
    """The keyword, first passing a checkpoint of the running check's time limit (``cpu_budget``)."""

    def run(validator: Validator, value: Any, instance: Any, schema: dict[str, Any]) -> Any:
        checkpoint()
        return keyword(validator, value, instance, schema)

    return run


_KEYWORDS: dict[str, _Keyword] = {
    **Draft202012Validator.VALIDATORS,
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
}
Re2Validator: type[Draft202012Validator] = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    validators={name: _bounded(keyword) for name, keyword in _KEYWORDS.items()},
    format_checker=FORMAT_CHECKER,
)

_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_SCHEMA_ONE = (
    "additionalProperties",
    "unevaluatedProperties",
    "items",
    "contains",
    "propertyNames",
    "if",
    "then",
    "else",
    "not",
    "unevaluatedItems",
    "contentSchema",
)


def _one_draft(node: Any) -> Any:
    """A copy of the schema without ``$schema`` wherever a schema stands (values under const, enum,
    default are left alone): jsonschema switches to the stock validator class (Python's ``re``, no
    checkpoints) at any subschema that names a draft, so every subschema here is read as 2020-12."""
    if not isinstance(node, dict):
        return node
    out = {k: v for k, v in node.items() if k != "$schema"}
    for key in _SCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {name: _one_draft(sub) for name, sub in out[key].items()}
    for key in _SCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [_one_draft(sub) for sub in out[key]]
    for key in _SCHEMA_ONE:
        if isinstance(out.get(key), dict):
            out[key] = _one_draft(out[key])
    return out


_META_URI = "https://json-schema.org/draft/2020-12/"
_META_REGISTRY: Registry[Any] = Registry().with_resources(
    (uri, DRAFT202012.create_resource(_one_draft(SPECIFICATIONS.contents(uri))))
    for uri in SPECIFICATIONS
    if uri.startswith(_META_URI)
)
_METASCHEMA = Re2Validator(
    _META_REGISTRY.contents(_META_URI + "schema"), registry=_META_REGISTRY, format_checker=FORMAT_CHECKER
)
"""The Draft 2020-12 metaschema, itself run on RE2 with checkpoints (so a huge schema's check stops in time)."""


def validator_for(schema: dict[str, Any]) -> Draft202012Validator:
    """A validator of ``schema`` (already checked) on RE2, checking formats, read as Draft 2020-12."""
    return Re2Validator(_one_draft(schema), format_checker=FORMAT_CHECKER)


_Resolver = Any  # referencing's Resolver (the package does not export its name)


def _subschemas(node: Any, resolver: _Resolver) -> Iterator[tuple[dict[str, Any], _Resolver]]:
    """Every object in the schema, with the resolver of its base URI (``$id`` starts a new one)."""
    stack: list[tuple[Any, _Resolver]] = [(node, resolver)]
    while stack:
        item, res = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("$id"), str) and item is not node:
                res = res.in_subresource(DRAFT202012.create_resource(item))
            yield item, res
            stack.extend((v, res) for v in item.values() if isinstance(v, dict | list))
        elif isinstance(item, list):
            stack.extend((v, res) for v in item if isinstance(v, dict | list))


def _references(schema: dict[str, Any]) -> str | None:
    """What is wrong with the schema's references and patterns that the metaschema does not see."""
    resolver = Registry().with_resource("", DRAFT202012.create_resource(schema)).resolver()
    has_patterns = has_unevaluated = False
    for node, res in _subschemas(schema, resolver):
        has_patterns = has_patterns or isinstance(node.get("patternProperties"), dict)
        has_unevaluated = has_unevaluated or "unevaluatedProperties" in node
        for keyword in ("$ref", "$dynamicRef"):
            ref = node.get(keyword)
            if not isinstance(ref, str):
                continue
            try:
                res.lookup(ref)
            except Unresolvable:
                return f"resolve every {keyword} (cannot resolve {_plain(ref)})"
    if has_patterns and has_unevaluated:
        return (
            "not combine patternProperties with unevaluatedProperties (the validator would run those "
            "patterns on a backtracking engine); use additionalProperties beside patternProperties"
        )
    return None


_PROBES: tuple[Any, ...] = (None, {}, [], "", 0)
"""Values every schema is tried on once: a reference that loops in place shows itself on one of them."""


def check_schema(schema: Any) -> str | None:
    """What is wrong with ``schema`` as a rule "must ...", or None when it can be run."""
    if not isinstance(schema, dict):
        return "be a JSON schema object"
    if depth_over(schema, MAX_JSON_DEPTH):
        return f"be nested at most {MAX_JSON_DEPTH} levels deep"
    try:
        error = best_match(_METASCHEMA.iter_errors(schema))
    except RecursionError:
        return f"be nested at most {MAX_JSON_DEPTH} levels deep"
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path)
        said = error.message
        if isinstance(error.cause, PatternError):
            said = f"{_short.repr(error.instance)} is not a pattern RE2 can run: {error.cause}"
        return f"be a valid JSON schema ({where + ': ' if where else ''}{said})"
    problem = _references(schema)
    if problem is not None:
        return problem
    validator = validator_for(schema)
    try:
        for probe in _PROBES:
            errors(validator, probe)
    except SchemaProblem as exc:
        return str(exc)
    return None


def errors(validator: Draft202012Validator, instance: Any) -> list[ValidationError]:
    """Every violation of ``instance``; SchemaProblem when the schema itself cannot be followed."""
    try:
        return list(validator.iter_errors(instance))
    except Unresolvable as exc:
        raise SchemaProblem(f"resolve every reference (cannot resolve {_plain(exc.ref)})") from None
    except RecursionError:
        raise SchemaProblem(
            "not refer to itself without end (its references nest too deeply to check a value against)"
        ) from None


def first_error(validator: Draft202012Validator, instance: Any) -> ValidationError | None:
    """The most relevant violation (jsonschema's ``best_match``), or None; SchemaProblem as ``errors``."""
    best: ValidationError | None = best_match(errors(validator, instance))
    return best
