"""Text helpers shared by every message the sidecar writes."""

from __future__ import annotations

import re
from collections.abc import Iterable

from sidecar.core.redact import REDACTED, mask_keys

MESSAGE_CAP = 200
"""What a service or provider said is quoted in a message up to this many characters."""

ELLIPSIS = "…"

ECHO_CHARS = 200
"""A value a caller sent (a parameter's value, a model id, an identifier) is echoed up to this many
characters, then "…" and its full length: a failure must fit gRPC's trailers whatever was sent."""


def cap(text: str, limit: int = MESSAGE_CAP) -> str:
    """``text`` on one line, cut to ``limit`` characters with ``…`` when longer."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[: limit - 1].rstrip() + ELLIPSIS


def clause(text: str, limit: int = MESSAGE_CAP) -> str:
    """``cap(text)`` without a closing period, for quoting inside a sentence of our own."""
    return cap(text, limit).rstrip(" .")


def echo(value: str, limit: int = ECHO_CHARS) -> str:
    """``value`` as sent when short; else its first ``limit`` characters, "…" and its length."""
    if len(value) <= limit:
        return value
    return f"{value[:limit]}… ({len(value)} characters)"


_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*+://)[^/?#]*@")


def endpoint_of(url: str, secrets: Iterable[str] = ()) -> str:
    """The endpoint as it may be shown: secrets masked, credentials, query string and fragment cut.

    Every configured secret (in any form, ``redact.secret_forms``) and anything key-shaped is
    masked in the whole URL first, so a secret in the path (``https://host/<key>/v1``) or one
    holding a ``?`` leaves nothing of itself; ``user:password@`` becomes ``«redacted»@``; then
    the query string (which may carry keys) and the fragment are cut.
    """
    masked = _USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", mask_keys(url, secrets))
    return masked.split("?", 1)[0].split("#", 1)[0]
