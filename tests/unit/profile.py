"""The hypothesis profile of the unit tests: bounded, derandomized, no example database, no deadline.

Derandomized, so a run is the same run on every machine and in CI (a failure reproduces with the
same command); bounded, so the whole ``tests/unit`` folder stays within seconds. Set
``SIDECAR_UNIT_EXAMPLES`` to search deeper locally (every count scales by it / ``UNIT_EXAMPLES``).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

__all__ = ["PROPERTY", "STATEFUL", "UNIT_EXAMPLES"]

UNIT_EXAMPLES = 200
"""Examples per property test (``SIDECAR_UNIT_EXAMPLES`` overrides)."""
_EXAMPLES = int(os.environ.get("SIDECAR_UNIT_EXAMPLES", str(UNIT_EXAMPLES)))


def _profile(examples: int, **extra: object) -> settings:
    return settings(
        max_examples=max(1, examples),
        deadline=None,
        derandomize=True,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow],
        **extra,  # type: ignore[arg-type]
    )


PROPERTY = _profile(_EXAMPLES)
STATEFUL = _profile(_EXAMPLES // 2, stateful_step_count=50)
"""A state machine: fewer runs, each up to 50 steps."""
