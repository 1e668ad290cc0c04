"""One streamed attempt's deltas so far, each forwarded to the Outlet as it is read."""

from __future__ import annotations

from dataclasses import dataclass

from sidecar.core.retry import Attempt
from sidecar.core.stream import Delta, TextDelta
from sidecar.providers.streaming.continuation import past_seam
from sidecar.providers.streaming.outlet import Outlet
from sidecar.providers.streaming.watch import Watch

__all__ = ["Progress"]


@dataclass(slots=True)
class Progress:
    """One attempt's deltas so far (a continuation's: after the text the caller held, ``prefix``)."""

    attempt: Attempt
    outlet: Outlet
    watch: Watch
    forwarded: int = 0
    chars: int = 0
    """Characters of text forwarded."""
    skipped: int = 0
    """Unreadable events skipped."""
    prefix: str | None = None
    """A continuation: the text the caller held when it began (None: a fresh attempt)."""
    seam: str = ""
    """The held text's trailing whitespace, not in the prefill: dropped from the continuation's start."""
    model: str = ""
    """The model the provider says writes this attempt, as far as read."""

    async def forward(self, delta: Delta) -> None:
        if isinstance(delta, TextDelta) and self.seam:
            text, self.seam = past_seam(self.seam, delta.text)
            if not text:
                return
            delta = TextDelta(text)
        record = self.attempt.record
        serving = ""
        if self.forwarded == 0:
            record.first_token()
            serving = self.model
        else:
            record.chunk()
        self.forwarded += 1
        if isinstance(delta, TextDelta):
            self.chars += len(delta.text)
        self.watch.pause()  # a caller that does not read makes the provider wait: that silence is not a stall
        try:
            await self.outlet.send(delta, self.attempt.number, serving)
        finally:
            self.watch.resume()
