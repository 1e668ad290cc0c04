"""How a throttle comes down again: the service throttle's rule, and the quiet both throttles share.

every third success                       takes SLOW_DECAY (0.2) off             (service throttle)
every success after PRESSURE_QUIET_S (5 min) without pressure   takes FAST_DECAY (0.5) off   (both)

The model throttle recovers by its own rule (a share of the rate per round trip, see
sidecar/core/model_throttle.py) and uses only ``quiet`` from here.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FAST_DECAY", "PRESSURE_QUIET_S", "SLOW_DECAY", "SUCCESSES_PER_DECAY", "Pressure"]

PRESSURE_QUIET_S = 300.0
SLOW_DECAY = 0.2
SUCCESSES_PER_DECAY = 3
FAST_DECAY = 0.5


@dataclass(slots=True)
class Pressure:
    """When the last pressure was, and the successes counted since."""

    last: float | None = None
    successes: int = 0

    def pressed(self, now: float) -> None:
        self.last = now
        self.successes = 0

    def quiet(self, now: float) -> bool:
        """No pressure for PRESSURE_QUIET_S (or ever)."""
        return self.last is None or now - self.last >= PRESSURE_QUIET_S

    def relief(self, now: float) -> float:
        """How much one success at ``now`` takes off the throttle."""
        if self.quiet(now):
            return FAST_DECAY
        self.successes += 1
        if self.successes >= SUCCESSES_PER_DECAY:
            self.successes = 0
            return SLOW_DECAY
        return 0.0
