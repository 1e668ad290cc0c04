"""How many cores this process may use: what ``server.workers: auto`` starts one worker per.

    the CPUs it may run on       os.sched_getaffinity (a cpuset, ``taskset``), else os.cpu_count()
    its cgroup's CPU quota       cgroup v2 ``cpu.max`` ("QUOTA PERIOD"; "max": none), else v1
                                 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (-1: none); a quota
                                 of 1.5 cores is 1 (a second worker would only be throttled)

The smaller of the two, at least 1. ``os.cpu_count()`` alone counts the node's CPUs: a pod limited
to 2 cores on a 64-core node started 64 workers.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Literal

from sidecar.config import MAX_WORKERS

__all__ = ["cgroup_quota", "usable_cores", "worker_count"]

CGROUP = Path("/sys/fs/cgroup")


def cgroup_quota(root: Path = CGROUP) -> float | None:
    """The cgroup's CPU quota in cores, or None when it sets none (or there is no cgroup to read)."""
    try:
        quota, _, period = (root / "cpu.max").read_text().strip().partition(" ")
        if quota == "max":
            return None
        return int(quota) / int(period or "100000")
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota_us <= 0 or period_us <= 0 else quota_us / period_us


def usable_cores(root: Path = CGROUP) -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = cgroup_quota(root)
    if quota is not None:
        cpus = min(cpus, math.floor(quota))
    return max(cpus, 1)


def worker_count(workers: int | Literal["auto"]) -> int:
    """``server.workers`` as a number: ``auto`` is one per usable core (at most MAX_WORKERS)."""
    return min(usable_cores(), MAX_WORKERS) if workers == "auto" else workers
