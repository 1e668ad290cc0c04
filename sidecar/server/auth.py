"""Per-agent bearer tokens (``server.auth``), the check both ports make.

    the gRPC port    ``authorization: Bearer <token>`` metadata (``grpc.auth.BearerTokenInterceptor``)
    the HTTP port    ``Authorization: Bearer <token>`` or ``x-api-key`` (``http.access.Access``)

The token is compared in constant time with every configured token: both sides are hashed to
SHA-256 first (so the length does not show), each comparison is ``hmac.compare_digest``, and all
of them run whatever matched, so the time says neither whether nor which token matched.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable

__all__ = ["Tokens", "bearer_token"]

_SCHEME = "bearer"


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


def bearer_token(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    """The token of the first ``authorization: Bearer <token>`` entry, or None."""
    for key, value in metadata or ():
        if key.lower() != "authorization" or not isinstance(value, str):
            continue
        scheme, _, token = value.strip().partition(" ")
        if scheme.lower() == _SCHEME and token.strip():
            return token.strip()
    return None


class Tokens:
    """The configured tokens, compared in constant time (the gRPC port's and the HTTP port's check)."""

    __slots__ = ("_digests",)

    def __init__(self, tokens: Iterable[str]) -> None:
        self._digests = [_digest(t) for t in tokens]
        if not self._digests:
            raise ValueError("Tokens needs at least one token")

    def authorized(self, token: str | None) -> bool:
        """Whether ``token`` is one of the configured tokens (constant time; see the module docstring)."""
        given = _digest(token or "")
        matched = False
        for digest in self._digests:
            matched |= hmac.compare_digest(given, digest)
        return matched and token is not None

    def which(self, token: str | None) -> int | None:
        """The index of ``token`` among the configured tokens (every one compared, constant time); None: none."""
        given = _digest(token or "")
        found: int | None = None
        for i, digest in enumerate(self._digests):
            if hmac.compare_digest(given, digest) and found is None:
                found = i
        return found if token is not None else None
