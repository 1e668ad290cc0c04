"""Bytes carried inline in a JSON body, for every format: base64 text and ``data:`` URLs.

b64(data)                        the bytes as base64 text (how every format's JSON carries them)
base64_field(text, where)        a caller's base64 text as its bytes; INVALID_INPUT naming ``where``
data_url(media_type, data)       ``data:<media type>;base64,<the bytes>`` (OpenAI's image_url and file_data)
read_data_url(url)               ``(media type, bytes)`` of such a URL; None for another URL or a malformed one
"""

from __future__ import annotations

import base64
import re

from sidecar.core.taxonomy import InvalidInput

__all__ = ["b64", "base64_field", "data_url", "read_data_url"]

_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+);base64,(.*)", re.DOTALL)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def base64_field(text: str, where: str, *, as_sent: bool = False) -> bytes:
    """``text`` decoded; INVALID_INPUT naming ``where`` when it is not base64 (``as_sent``: the
    caller's own path, not to be renamed by the door's parameter names)."""
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:  # binascii.Error is one
        raise InvalidInput(where, text[:40], "must be base64 text", as_sent=as_sent) from None


def data_url(media_type: str, data: bytes) -> str:
    """``data:<media type>;base64,<data>``."""
    return f"data:{media_type};base64,{b64(data)}"


def read_data_url(url: str) -> tuple[str, bytes] | None:
    """The media type and the bytes of a base64 ``data:`` URL; None when it is not one."""
    match = _DATA_URL.fullmatch(url)
    if match is None:
        return None
    try:
        return match[1], base64.b64decode(match[2], validate=True)
    except ValueError:
        return None
