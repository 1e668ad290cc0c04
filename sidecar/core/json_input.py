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

The depth is read from the text (``json_depth.nested_over``) before json.loads or any of the
(recursive) validators after it (jsonschema, protobuf's Struct, the adapters) see it: json.loads
recurses on the interpreter's one recursion budget too, and a parse climbing to the limit leaves
no room for the finalisers a garbage collection runs meanwhile (``sidecar.core.json_depth``).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from sidecar.core.json_depth import MAX_JSON_DEPTH, nested_over
from sidecar.core.taxonomy import InvalidInput

__all__ = ["MAX_JSON_DEPTH", "depth_over", "json_bytes", "load_json", "nested_over"]


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
