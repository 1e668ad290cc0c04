"""A format's request shape, declared once as types, and the one boundary that reads a body against it.

Each format declares what a caller may send, and what a reply holds, as ``TypedDict``s in its folder's
``shapes.py``, following the types its provider's official SDK publishes (Bedrock's: botocore's service
model), at the version pinned in constraints.txt (``tests/formats/test_<format>_shapes.py`` walks them
beside the SDK's, key by key, at every depth; the sidecar never imports an SDK). A front checks a body
against its shape first, then reads it knowing every declared key has its declared type::

    Shape(RequestType)      the declared shape, compiled once, at its first check (not at import: a
                            format imported for its upstream alone never checks a request, and each
                            shape's build is 5-15 ms)
      .check(body)          nothing, or INVALID_INPUT naming the caller's path of the first wrong value
                            (``messages[2].content[0].text``), its value, and the rule in plain words
    declared(TypedDictType) the keys a shape declares: the ones the front interprets (any other key of
                            that object is not interpreted, and is carried: ``carried.Unknown``)
    by_tag(Union)           ``declared`` of each member of a tagged union, by its tag's value

The check is strict: no value is converted ("5" is not a number, true is not an integer). A key
the shape does not declare is let through, to be carried (a shape closed by ``ConfigDict(extra="forbid")``
or ``TypedDict(..., closed=True)`` refuses it in ``carried.refuse_unknown``'s words, unless it is null);
a null value is absent wherever a shape writes ``X | None``. What the types cannot say (one block after
another, a tool result's call id that names an earlier call) a front checks by hand after this.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Annotated, Any, get_args, get_origin, get_type_hints

from pydantic import TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.formats.carried import UNCARRIED
from sidecar.providers.formats.fields import shown

__all__ = ["Shape", "by_tag", "declared"]

_RULES: Mapping[str, str] = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "dict_type": "a JSON object",
    "typed_dict_type": "a JSON object",
    "model_type": "a JSON object",
    "model_attributes_type": "a JSON object",
    "list_type": "a list",
    "none_required": "null",
}
"""A type error's rule by pydantic's error type: ``must be`` one of these."""


class Shape:
    """A declared request shape (a ``TypedDict``, or any type pydantic reads), checked strictly."""

    __slots__ = ("_adapter", "_shape")

    def __init__(self, shape: Any) -> None:
        self._shape = shape
        self._adapter: TypeAdapter[Any] | None = None

    def check(self, body: Any, *, at: str = "") -> None:
        """Nothing when ``body`` has the shape; else INVALID_INPUT naming the first wrong value (the
        deepest one the shape reached), its caller's path below ``at``."""
        adapter = self._adapter
        if adapter is None:  # the first check builds it (two threads at once: both build it, one is kept)
            adapter = self._adapter = TypeAdapter(self._shape)
        try:
            adapter.validate_python(body, strict=True)
        except ValidationError as failed:
            errors = [
                e for e in failed.errors(include_url=False) if e["type"] != "extra_forbidden" or e["input"] is not None
            ]
            if errors:  # a null key a closed shape does not declare says nothing, as everywhere (refuse_unknown)
                raise _refusal(errors, body, at) from None


@cache
def declared(shape: Any) -> frozenset[str]:
    """The keys a ``TypedDict`` declares, required or not (each set made once)."""
    return frozenset(shape.__required_keys__) | frozenset(shape.__optional_keys__)


def by_tag(union: Any, tag: str = "type") -> dict[str, frozenset[str]]:
    """The keys each member of a tagged union declares, by the value of its tag (``Annotated``: its union)."""
    if get_origin(union) is Annotated:
        union = get_args(union)[0]
    return {get_args(get_type_hints(member)[tag])[0]: declared(member) for member in get_args(union)}


def _refusal(errors: list[ErrorDetails], body: Any, at: str) -> InvalidInput:
    """The deepest error as INVALID_INPUT; a value several members of a union refused: their rules joined."""
    found = [(_path(e["loc"], body, missing=e["type"] == "missing"), e) for e in errors]
    deepest = max(len(steps) for steps, _ in found)
    steps, first = next((s, e) for s, e in found if len(s) == deepest)
    rules = list(dict.fromkeys(_rule(e) for s, e in found if s == steps))
    path = _written(steps, at)
    if first["type"] in ("union_tag_invalid", "union_tag_not_found"):
        key = str(first.get("ctx", {}).get("discriminator", "'type'")).strip("'")
        tag = first["input"].get(key) if isinstance(first["input"], Mapping) else None
        return InvalidInput(f"{path}.{key}" if path else key, shown(tag), rules[0], as_sent=True)
    value = "" if first["type"] == "missing" else shown(first["input"])
    if len(rules) > 1 and all(r.startswith("must be ") for r in rules):
        rules = ["must be " + " or ".join(r.removeprefix("must be ") for r in rules)]
    return InvalidInput(path or "body", value, "; ".join(rules), as_sent=True)


def _path(loc: tuple[int | str, ...], body: Any, *, missing: bool) -> tuple[int | str, ...]:
    """The steps of ``loc`` that are the body's own keys and indices (pydantic adds the names of a union's
    members and a tagged union's tags, which the caller never wrote), and a ``missing`` key last. A tag that
    is also a key of its object (a text block's tag "text") is read both ways: the reading that follows more
    of ``loc`` is the path, and the tag's on a tie (``cache_control`` of a text block, not its ``text``)."""
    if not loc:
        return ()
    step, rest = loc[0], loc[1:]
    keyed = isinstance(body, Mapping) and isinstance(step, str) and step in body
    if keyed or (isinstance(body, list) and isinstance(step, int) and 0 <= step < len(body)):
        taken = (step, *_path(rest, body[step], missing=missing))
        skipped = _path(rest, body, missing=missing) if keyed else ()
        tag = keyed and step in body.values()
        return skipped if len(skipped) > len(taken) or (tag and len(skipped) == len(taken)) else taken
    if missing and isinstance(body, Mapping) and isinstance(step, str) and not rest:
        return (step,)  # a missing key: named, though the body has none
    return _path(rest, body, missing=missing)


def _written(steps: tuple[int | str, ...], at: str) -> str:
    out = at
    for step in steps:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else step)
    return out


def _rule(error: ErrorDetails) -> str:
    kind, ctx = error["type"], error.get("ctx", {})
    if kind in _RULES:
        return f"must be {_RULES[kind]}"
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":  # a key a closed shape (``ConfigDict(extra="forbid")``) does not declare
        return UNCARRIED.format("")
    if kind == "literal_error":
        return f"must be {ctx.get('expected', '')}"
    if kind == "union_tag_invalid":
        return f"must be one of {ctx.get('expected_tags', '')}"
    if kind == "union_tag_not_found":
        return "is required"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        bound = next(iter(ctx.values()), "")
        words = {"greater_than_equal": "at least", "greater_than": "more than", "less_than_equal": "at most"}
        return f"must be {words.get(kind, 'less than')} {bound}"
    if kind == "too_short":
        return f"must have at least {ctx.get('min_length', 1)} items"
    return str(error["msg"]).lower()
