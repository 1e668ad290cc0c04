"""A tool service's throttle and circuit as the retry engine's Pacer.

admit(deadline)   the circuit first: refused at once while open (CIRCUIT_OPEN, quoting what opened
                  it), or this call is the half-open circuit's one probe; then the call's slot in the
                  throttle, after everyone queued: JOB_TIMEOUT at once (nothing booked) when it
                  cannot fit before the deadline
ready()           a probe is claimed fleet-wide first (shared state only: CIRCUIT_OPEN, half-open,
                  when another replica holds it; its slot given back), then the throttle's wait
settle(outcome)   Done -> a success (a probe closes the circuit); a service failure (EXTERNAL_SERVICE,
                  UPSTREAM_THROTTLE, with the outcome's ``trigger``) -> charged, quoting what the service
                  said; a probe the service answered in any other way -> it is up (success); anything
                  else -> charged to no one
release()         cancelled or a bug: charged to no one, a held probe released (lost)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sidecar.core.circuit import Admission, ServiceGuard
from sidecar.core.clock import Clock
from sidecar.core.observer import Target
from sidecar.core.pacer import Overdue, Reservation
from sidecar.core.retry import Done, Fail, Retry
from sidecar.core.taxonomy import JobTimeout
from sidecar.core.tool_failures import is_service_failure

__all__ = ["ServicePacer"]


@dataclass(slots=True)
class _ServiceAdmission:
    guard: ServiceGuard
    admission: Admission
    booking: Reservation
    wait_s: float

    @property
    def throttle(self) -> float:
        return self.guard.throttle

    async def ready(self) -> None:
        try:
            await self.guard.claim(self.admission)  # the fleet's one probe (a no-op for any other call)
        except BaseException:
            self.guard.release(self.booking)
            raise
        await self.guard.pace(self.booking)  # cancelled: the slot is given back

    def settle(self, outcome: Done[Any] | Fail | Retry) -> None:
        if isinstance(outcome, Done):
            self.guard.success(self.admission)
            return
        failure = outcome.failure
        if failure is not None and outcome.trigger is not None and is_service_failure(failure):
            self.guard.failure(self.admission, outcome.trigger, failure.retry_after)
        elif self.admission.probe and isinstance(outcome, Fail) and outcome.answered:
            self.guard.success(self.admission)  # the service answered the probe: it is up
        else:
            self.guard.lost(self.admission)  # the caller's mistake, or the caller's own deadline

    def release(self) -> None:
        self.guard.lost(self.admission)  # a no-op once settled


@dataclass(slots=True)
class ServicePacer:
    """The pacing of one tool call to one service."""

    guard: ServiceGuard
    tool: str
    clock: Clock

    @property
    def target(self) -> Target:
        return Target.SERVICE

    @property
    def name(self) -> str:
        return self.guard.name

    def admit(self, deadline: float | None) -> _ServiceAdmission:
        admission = self.guard.check()
        try:
            booking = self.guard.reserve(deadline)
        except Overdue as late:
            self.guard.lost(admission)
            left = max((deadline or 0.0) - self.clock.time(), 0.0)
            raise JobTimeout(
                f"tool {self.tool}",
                f"the {self.guard.name} service is throttled for {late.wait:.1f} s, but only {left:.1f} s remain",
                retry_after=late.wait,
            ) from None
        return _ServiceAdmission(self.guard, admission, booking, max(booking.at - self.clock.time(), 0.0))
