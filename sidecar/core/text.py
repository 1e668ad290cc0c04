"""Text helpers shared by every message the sidecar writes."""

from __future__ import annotations

MESSAGE_CAP = 200
"""What a service or provider said is quoted in a message up to this many characters."""

ELLIPSIS = "…"


def cap(text: str, limit: int = MESSAGE_CAP) -> str:
    """``text`` on one line, cut to ``limit`` characters with ``…`` when longer."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[: limit - 1].rstrip() + ELLIPSIS


def clause(text: str, limit: int = MESSAGE_CAP) -> str:
    """``cap(text)`` without a closing period, for quoting inside a sentence of our own."""
    return cap(text, limit).rstrip(" .")


def endpoint_of(url: str) -> str:
    """The endpoint as it may be shown: the query string (which may carry keys) and fragment cut."""
    return url.split("?", 1)[0].split("#", 1)[0]
