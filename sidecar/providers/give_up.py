"""What stopping means for a model call, the GiveUp the retry engine asks when no attempt is left.

A call gives up with UPSTREAM_RETRIES_EXHAUSTED, or JOB_TIMEOUT at the deadline (``GiveUp``); a
stream, with STREAM_INTERRUPTED (the partial text) when a mid-stream fault voided what the caller
holds and no restart is left (``StreamGiveUp``).
"""

from __future__ import annotations

from dataclasses import dataclass

from sidecar.core.retry import Retry, Tally
from sidecar.core.taxonomy import JobTimeout, SidecarFailure, StreamInterrupted, UpstreamRetriesExhausted
from sidecar.providers.streaming.outlet import Outlet

__all__ = ["GiveUp", "StreamGiveUp"]


@dataclass(frozen=True, slots=True)
class GiveUp:
    """What stopping means for a model call: UPSTREAM_RETRIES_EXHAUSTED, or JOB_TIMEOUT at the deadline."""

    model_id: str
    provider: str
    tally: Tally
    probe: bool = False
    """The call is a half-open circuit's probe (one attempt): its give-up says so, not the budget."""

    def exhausted(self, retry: Retry, tally: Tally) -> SidecarFailure:
        return UpstreamRetriesExhausted(
            f"Model {self.model_id} ({self.provider})",
            tally.budget,
            retry.signal,
            retry.detail,
            http=retry.http,
            retry_after=retry.retry_after,
            probe=self.probe,
        )

    def too_long(self, retry: Retry, max_wait_s: float) -> SidecarFailure:
        return UpstreamRetriesExhausted(
            f"Model {self.model_id} ({self.provider})",
            self.tally.budget,
            retry.signal,
            retry.detail,
            http=retry.http,
            retry_after=retry.retry_after,
            asked_too_long=max_wait_s,
        )

    def past_deadline(self, retry: Retry, wait_s: float, left_s: float) -> SidecarFailure:
        return JobTimeout(
            f"model {self.model_id}",
            f"the next retry would wait {wait_s:.1f} s after a {retry.signal.words} ({retry.detail}), "
            f"but only {left_s:.1f} s remain",
            signal=retry.signal,
            http=retry.http,
            retry_after=wait_s,
            budget=self.tally.budget,
        )


@dataclass(frozen=True, slots=True)
class StreamGiveUp:
    """A stream's give-up: a model call's, but STREAM_INTERRUPTED when a mid-stream fault voided what
    the caller holds and no restart is left (the deadline stays JOB_TIMEOUT)."""

    call: GiveUp
    outlet: Outlet

    def _interrupted(self, retry: Retry, why: str) -> SidecarFailure | None:
        fault = self.outlet.interrupted()
        if fault is None:
            return None
        outlet = self.outlet
        reason = f"{fault.reason}; {why}"
        return StreamInterrupted(self.call.model_id, reason, outlet.partial_text, outlet.deltas, http=retry.http)

    def exhausted(self, retry: Retry, tally: Tally) -> SidecarFailure:
        why = f"no restart is left (the retry budget of {tally.budget} is spent)"
        return self._interrupted(retry, why) or self.call.exhausted(retry, tally)

    def too_long(self, retry: Retry, max_wait_s: float) -> SidecarFailure:
        why = f"no restart: the provider asked for a wait longer than {max_wait_s:g} s"
        return self._interrupted(retry, why) or self.call.too_long(retry, max_wait_s)

    def past_deadline(self, retry: Retry, wait_s: float, left_s: float) -> SidecarFailure:
        return self.call.past_deadline(retry, wait_s, left_s)
