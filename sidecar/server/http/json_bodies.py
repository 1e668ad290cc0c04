"""The JSON a door reads and writes, whatever the format.

json_object      the request body: a JSON object (``json_depth.loads``: nesting bounded), every string
                 Unicode text                                             INVALID_INPUT naming ``body``
check_unicode    a lone surrogate escape refused where a door decodes JSON, naming its JSON path
too_large        the body past server.max_message_bytes                   INVALID_INPUT, answered 413
json_text        JSON text UTF-8 can always write (escaped only when a string holds a lone surrogate)
json_bytes       the same, as UTF-8
mask_tree        a JSON value with the configured secrets masked in every string
"""

from __future__ import annotations

import json
import re
from typing import Any

from sidecar.core.details import InvalidInputDetail
from sidecar.core.json_depth import loads
from sidecar.core.redact import mask_secrets
from sidecar.core.taxonomy import InvalidInput, SidecarFailure

__all__ = ["UNICODE_RULE", "check_unicode", "json_bytes", "json_object", "json_text", "mask_tree", "too_large"]


def too_large(limit: int) -> SidecarFailure:
    rule = f"must be at most {limit} bytes (server.max_message_bytes)"
    return InvalidInput.worded(
        f"The request body is too large; it {rule}.",
        detail=InvalidInputDetail(parameter="body", value=f"more than {limit} bytes", rule=rule),
    )


def json_object(raw: bytes) -> dict[str, Any]:
    try:
        body = loads(raw)
    except ValueError:
        raise InvalidInput("body", f"{len(raw)} bytes", "must be a JSON object (the request's JSON body)") from None
    if not isinstance(body, dict):
        raise InvalidInput("body", type(body).__name__, "must be a JSON object (the request's JSON body)")
    check_unicode(body)
    return body


_SURROGATE = re.compile("[\ud800-\udfff]")
UNICODE_RULE = "must be Unicode text: a lone surrogate escape (\\ud800-\\udfff unpaired) is no character"


def check_unicode(value: Any, path: str = "") -> None:
    """INVALID_INPUT naming the JSON path of the first string (or key) holding a lone surrogate.

    ``json.loads`` reads ``"\\ud800"`` as a one-character string no encoder can write (UTF-8 refuses
    it): refused here, once, where a door decodes JSON, so that no text a caller sent reaches an
    encoder (an answer, a log line, a span, the upstream's body) unable to write it. The walk is
    iterative: a body nested as deep as ``json.loads`` reads costs no recursion.
    """
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                raise InvalidInput(where or "body", ascii(item)[1:-1], UNICODE_RULE)
        elif isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                named = f"{where}.{key}" if where else str(key)
                if _SURROGATE.search(key):
                    raise InvalidInput(ascii(named)[1:-1], ascii(key)[1:-1], UNICODE_RULE)
                stack.append((named, child))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", child) for i, child in reversed(list(enumerate(item))))


def json_text(value: Any, *, compact: bool = True) -> str:
    """``value`` as JSON text that UTF-8 can always write: non-ASCII as it is, unless some string holds a
    lone surrogate (an upstream's reply may), when every non-ASCII character is escaped instead."""
    separators = (",", ":") if compact else None
    text = json.dumps(value, ensure_ascii=False, separators=separators)
    if _SURROGATE.search(text):
        return json.dumps(value, ensure_ascii=True, separators=separators)
    return text


def json_bytes(value: Any) -> bytes:
    """``json_text`` as UTF-8."""
    return json_text(value).encode()


def mask_tree(value: Any, secrets: tuple[str, ...]) -> Any:
    """``value`` (JSON: dicts, lists, strings ...) with the configured secrets masked in every string."""
    if isinstance(value, str):
        return mask_secrets(value, secrets)
    if isinstance(value, dict):
        return {k: mask_tree(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_tree(v, secrets) for v in value]
    return value
