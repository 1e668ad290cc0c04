"""JSON a caller sends, parsed within bounds, so no caller's text can crash or stall what reads it.

    bound               limit                                   the failure (INVALID_INPUT naming the field)
    size                ``policy.max_argument_bytes`` (1 MiB),   must be at most N bytes of JSON (got M)
                        checked before parsing
    syntax              json.loads                              must be <what was expected> (<the parser's reason>)
    depth               ``MAX_JSON_DEPTH`` (64) nested arrays    must be nested at most 64 levels deep
                        and objects, read from the text before
                        json.loads or any (recursive) validator
                        sees it
    integer length      Python's limit (4,300 digits)           must not hold an integer of more than 4300 digits

``json.loads`` recurses (in C) one level per array or object, on the interpreter's one recursion
budget (about 1,000 levels), and the validators after it (jsonschema, protobuf's Struct, the
adapters) recurse in Python. The depth bound is what makes them safe, and it is read from the text
before any of them, json.loads included: a parse that climbs to the recursion limit before failing
leaves no room for whatever runs at that depth meanwhile. A garbage collection that an allocation
of the parse triggers runs finalisers there (``__del__``, an async generator's close, a callback),
each then failing with RecursionError as an unraisable exception that no caller ever sees.
"""

from __future__ import annotations

import json
import re
import sys
from itertools import accumulate
from typing import Any

from sidecar.core.taxonomy import InvalidInput

__all__ = ["MAX_JSON_DEPTH", "depth_over", "json_bytes", "load_json", "nested_over"]

MAX_JSON_DEPTH = 64
"""Arrays and objects nested deeper than this are refused (a value at the top level is depth 1)."""
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_INNERMOST = re.compile(r"\[\]")
_BRACKETS_ALIKE = str.maketrans("{}", "[]")
_STEP = {"[": 1, "]": -1}


def json_bytes(text: str) -> int:
    """The UTF-8 size of ``text`` (lone surrogates counted as they would be escaped, 3 bytes each)."""
    return len(text.encode("utf-8", "surrogatepass"))


def depth_over(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether arrays and objects nest deeper than ``limit`` in ``value`` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        items = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if items is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in items if isinstance(child, dict | list))
    return False


def nested_over(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``text`` opens arrays and objects more than ``limit`` deep, read from the text alone.

    For JSON it is its nesting; for text that is not JSON, an upper bound on how deep ``json.loads``
    climbs before it stops at the first error (up to there the text is JSON, and its brackets are
    read as the parser reads them). So ``json.loads`` never recurses more than ``limit`` levels on
    text this passes. Strings are dropped, then only brackets kept (``{}`` read as ``[]``), then each
    pass removes the innermost pairs (one level): none left after ``limit`` passes is at most
    ``limit`` deep. Otherwise the running count of opened minus closed decides.
    All of it runs in C loops (the regex engine, ``accumulate``), without recursion: a megabyte of
    a million small values costs milliseconds, where walking them costs tenths.
    """
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text)).translate(_BRACKETS_ALIKE)
    left = brackets
    for _ in range(limit):
        left, removed = _INNERMOST.subn("", left)
        if not left:
            return False
        if not removed:  # no pair left to remove: what is left is unbalanced
            break
    return max(accumulate(map(_STEP.__getitem__, brackets))) > limit


def load_json(text: str, field: str, *, max_bytes: int, expected: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``text`` parsed, or InvalidInput naming ``field`` and the bound it broke.

    ``expected`` completes "must be ..." for text that does not parse, e.g. "a JSON schema object".
    """
    size = len(text) if len(text) > max_bytes else json_bytes(text)  # a str is never fewer bytes than characters
    if size > max_bytes:
        raise InvalidInput(field, text, f"must be at most {max_bytes} bytes of JSON (got {size})")
    if nested_over(text, max_depth):  # before json.loads: it would recurse as deep (see the module's docstring)
        raise InvalidInput(field, text, f"must be nested at most {max_depth} levels deep")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(field, text, f"must be {expected} ({exc.msg} at {exc.pos})") from None
    except ValueError:  # the only other refusal of json.loads: an integer past Python's digit limit
        digits = sys.get_int_max_str_digits()
        raise InvalidInput(field, text, f"must not hold an integer of more than {digits} digits") from None
