"""How deep a JSON text nests, read from the text before anything parses it; a ``json.loads`` bounded by it.

    nested_over(text, limit)   whether the text opens arrays and objects more than ``limit`` deep,
                               JSON or not, without recursion (regex passes in C)
    loads(text, limit)         ``json.loads``, but TooDeep (a ValueError) past ``limit``
                               (MAX_BODY_DEPTH unless told), never a RecursionError

``json.loads`` recurses (in C) one level per array or object, on the interpreter's one recursion
budget (about 1,000 levels). Catching its RecursionError is not enough: a parse that climbs to the
limit leaves no room for whatever else runs at that depth meanwhile. A garbage collection that one
of its allocations triggers runs finalisers there (``__del__``, an async generator's close, a gc
callback), each failing with a RecursionError nobody sees but ``sys.unraisablehook``. So the depth
is read from the text first, and deep text never reaches the parser. This module imports nothing
of the sidecar: ``redact`` and ``json_input`` both read with it.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

__all__ = ["MAX_BODY_DEPTH", "MAX_JSON_DEPTH", "TooDeep", "loads", "nested_over"]

MAX_JSON_DEPTH = 64
"""Arrays and objects nested deeper than this are refused (a value at the top level is depth 1)."""
MAX_BODY_DEPTH = 200
"""A body or event read whole (a caller's HTTP body, an upstream's or a tool service's answer, a
stream's event) nested deeper than this is not read: a fifth of the recursion budget."""
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_INNERMOST = re.compile(r"\[\]")
_BRACKETS_ALIKE = str.maketrans("{}", "[]")
_STEP = {"[": 1, "]": -1}


def nested_over(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``text`` opens arrays and objects more than ``limit`` deep, read from the text alone.

    For JSON it is its nesting; for text that is not JSON, an upper bound on how deep ``json.loads``
    climbs before it stops at the first error (up to there the text is JSON, and its brackets are
    read as the parser reads them). So ``json.loads`` never recurses more than ``limit`` levels on
    text this passes. Strings are dropped, then only brackets kept (``{}`` read as ``[]``), then each
    pass removes the innermost pairs (one level): none left after ``limit`` passes is at most
    ``limit`` deep. Otherwise the running count of opened minus closed decides.
    All of it runs in C loops (the regex engine, ``accumulate``), without recursion: a megabyte of
    a million small values costs milliseconds, where walking them costs tenths. Text with no more
    ``[`` and ``{`` than ``limit`` in all (strings included) cannot nest deeper, and is passed on
    two counts alone: a model's reply or a tool's arguments, read on every call, mostly are.
    """
    if text.count("[") + text.count("{") <= limit:
        return False  # no more openings than the limit, in strings or not: it cannot nest deeper (most text)
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text)).translate(_BRACKETS_ALIKE)
    left = brackets
    for _ in range(limit):
        left, removed = _INNERMOST.subn("", left)
        if not left:
            return False
        if not removed:  # no pair left to remove: what is left is unbalanced
            break
    return max(accumulate(map(_STEP.__getitem__, brackets))) > limit


class TooDeep(ValueError):
    """Text nested deeper than the bound it was read with: not given to ``json.loads``."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"nested more than {limit} levels deep")
        self.limit = limit


def loads(text: str | bytes, limit: int = MAX_BODY_DEPTH) -> Any:
    """``json.loads(text)``, but TooDeep (a ValueError) for text nested more than ``limit`` deep, read from
    the text first: never a RecursionError, and never a parse deeper than ``limit`` (the module's docstring).

    Bytes are decoded as ``json.loads`` decodes them (UTF-8, -16 or -32, told apart by the first bytes).
    """
    if isinstance(text, bytes):
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    if nested_over(text, limit):
        raise TooDeep(limit)
    return json.loads(text)
