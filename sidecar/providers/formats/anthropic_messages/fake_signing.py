"""The fake Anthropic's thinking signatures: HMACs under its own key, so only it can verify them.

A thinking block's signature is an HMAC of its text (``sign_thinking``); a redacted_thinking block's
data is a nonce and its HMAC (``redacted_data``, checked by ``redacted_ok``). Any byte changed is refused,
as the API refuses a block it did not make.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

__all__ = ["redacted_data", "redacted_ok", "sign_thinking"]

_KEY = b"sidecar-fake-anthropic-thinking-key"
"""The fake's own signing key: signatures verify against this fake only, as the API's against the API."""


def _mac(kind: bytes, data: bytes) -> bytes:
    return hmac.new(_KEY, kind + b"\0" + data, hashlib.sha256).digest()


def sign_thinking(text: str) -> str:
    """The signature the fake gives (and wants back with) a thinking block's text."""
    return base64.b64encode(_mac(b"thinking", text.encode())).decode("ascii")


def redacted_data(seed: str) -> str:
    """Opaque redacted thinking the fake can verify: a nonce and its MAC."""
    nonce = hashlib.sha256(seed.encode()).digest()[:12]
    return base64.b64encode(nonce + _mac(b"redacted", nonce)).decode("ascii")


def redacted_ok(data: str) -> bool:
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return False
    return len(raw) > 12 and hmac.compare_digest(raw[12:], _mac(b"redacted", raw[:12]))
