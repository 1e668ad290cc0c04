"""A stream's text on its way out, so that a configured secret split across deltas is masked whole.

Each event of a stream is masked on its own (``server.grpc.masking``, the HTTP fronts); a secret the
model writes across two or more deltas is whole in none of them. ``SplitSecrets`` sits on one
stream of text (a reply's text, or one tool call's argument fragments) and decides, per delta,
what may go out now::

    a secret completed by this delta         its part in this delta is «redacted» (a part that went
                                             out before it is at most HOLD_FROM - 1 characters: the
                                             key's format prefix, "sk-", not the key)
    the text ends with HOLD_FROM or more      those characters wait for the next delta (or the end):
    characters that begin a secret           a secret being written is held until it is whole
    anything else                            goes out as it came

Held text goes out at the end of the stream, before any other event, or is dropped with a Restart
(the caller never had it). Only a secret's verbatim form is followed across deltas; every form is
still masked inside one event. The cost is a scan of each delta for each secret's first character.
"""

from __future__ import annotations

from collections.abc import Iterable

from sidecar.core.redact import MIN_SECRET_CHARS, REDACTED, mask_secrets

__all__ = ["HOLD_FROM", "SplitSecrets"]

HOLD_FROM = 4
"""A delta's tail is held once this many characters of a secret's start have been written (shorter
tails, "s" or "sk", end ordinary words too often to hold them)."""


class SplitSecrets:
    """One stream of text: ``feed`` each delta, send what it returns; ``flush`` at the end."""

    __slots__ = ("_held", "_secrets", "_tail", "_tail_chars")

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets = sorted({s for s in secrets if len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)
        self._tail_chars = max((len(s) for s in self._secrets), default=1) - 1
        self._tail = ""
        """The last characters that went out (a secret completed now may have begun in them)."""
        self._held = ""

    @property
    def active(self) -> bool:
        return bool(self._secrets)

    def feed(self, text: str) -> str:
        """What of ``held + text`` may go out now (masked); the rest is held."""
        if not self._secrets:
            return text
        held = self._masked(self._held + text)
        keep = self._begun(self._tail + held)
        keep = min(keep, len(held)) if keep >= HOLD_FROM else 0
        cut = len(held) - keep
        self._held = held[cut:]
        return self._sent(held[:cut])

    def flush(self) -> str:
        """The held text, to go out now (the stream ends, or another kind of event comes)."""
        out, self._held = self._held, ""
        return self._sent(out)

    def _sent(self, out: str) -> str:
        """``out`` goes out: the last characters sent are kept (a secret may be begun in them)."""
        self._tail = (self._tail + out)[-self._tail_chars :] if self._tail_chars else ""
        return out

    def drop(self) -> None:
        """The caller's text is void (a Restart): nothing held goes out, nothing went out before."""
        self._held = self._tail = ""

    def _masked(self, held: str) -> str:
        """``held`` with every secret whole in it masked, and the part of one begun in ``_tail``."""
        held = mask_secrets(held, self._secrets)
        tail = self._tail
        for secret in self._secrets:
            for cut in range(min(HOLD_FROM - 1, len(tail), len(secret) - 1), 0, -1):
                if tail.endswith(secret[:cut]) and held.startswith(secret[cut:]):
                    held = REDACTED + held[len(secret) - cut :]
                    break
        return held

    def _begun(self, text: str) -> int:
        """The most characters at the end of ``text`` that begin a secret (without completing it)."""
        best = 0
        for secret in self._secrets:
            first = secret[0]
            start = max(len(text) - len(secret) + 1, 0)
            at = text.find(first, start)
            while at != -1:
                if secret.startswith(text[at:]):
                    best = max(best, len(text) - at)
                    break  # the earliest start is the longest
                at = text.find(first, at + 1)
        return best
