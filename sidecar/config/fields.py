"""The field checks more than one section uses: a listen address, an http(s) URL, an embedded URL."""

from __future__ import annotations

import re
from functools import partial
from typing import Annotated

from pydantic import AfterValidator

from sidecar.config.bounds import MAX_PORT

__all__ = ["HostPort", "Listen", "check_http_url", "check_url"]

_HTTP_URL = re.compile(r"^https?://[^/\s]+")


def _listen(value: str, *, unix: bool) -> str:
    """``value`` if it is ``host:port`` (port 0-65535), or with ``unix`` also ``unix:/path``."""
    if unix and value.startswith("unix:"):
        if len(value) <= len("unix:"):
            raise ValueError("a unix socket needs a path, e.g. unix:/tmp/sidecar.sock")
        return value
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= MAX_PORT:
        raise ValueError(f"must be host:port (port 0-{MAX_PORT})" + (" or unix:/path" if unix else ""))
    return value


HostPort = Annotated[str, AfterValidator(partial(_listen, unix=False))]
"""``host:port`` (port 0 picks a free one)."""
Listen = Annotated[str, AfterValidator(partial(_listen, unix=True))]
"""``host:port`` or ``unix:/path/to.sock``."""


def check_http_url(v: str) -> str:
    if not _HTTP_URL.match(v):
        raise ValueError("must be an http:// or https:// URL")
    return v


def check_url(v: str, embedded: str) -> str:
    """An http(s) URL, or ``embedded``: the one embedded URL this field may name."""
    if v.startswith("embedded://"):
        if not v.startswith(embedded):
            raise ValueError(f"the only embedded URL here is {embedded}")
        return v
    return check_http_url(v)
