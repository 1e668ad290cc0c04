"""server.workers: auto counts the cores the process may use: its CPUs within its cgroup's quota."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sidecar.server.cores import cgroup_quota, usable_cores, worker_count


def cgroup(tmp_path: Path, v2: str | None = None, v1: tuple[str, str] | None = None) -> Path:
    if v2 is not None:
        (tmp_path / "cpu.max").write_text(v2 + "\n")
    if v1 is not None:
        (tmp_path / "cpu").mkdir()
        (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text(v1[0] + "\n")
        (tmp_path / "cpu" / "cpu.cfs_period_us").write_text(v1[1] + "\n")
    return tmp_path


@pytest.mark.parametrize(
    ("v2", "v1", "cores"),
    [
        ("200000 100000", None, 2.0),
        ("150000 100000", None, 1.5),
        ("max 100000", None, None),
        (None, ("300000", "100000"), 3.0),
        (None, ("-1", "100000"), None),
        (None, None, None),
        ("garbage", None, None),
    ],
)
def test_the_quota_from_cgroup_v2_or_v1(
    tmp_path: Path, v2: str | None, v1: tuple[str, str] | None, cores: float | None
) -> None:
    assert cgroup_quota(cgroup(tmp_path, v2, v1)) == cores


@pytest.mark.parametrize(("cpu_max", "expected"), [(None, "cpus"), ("100000 100000", 1), ("50000 100000", 1),
                                                ("6400000 100000", "cpus")])  # fmt: skip
def test_usable_cores_are_the_cpus_within_the_quota(tmp_path: Path, cpu_max: str | None, expected: object) -> None:
    cpus = len(os.sched_getaffinity(0))
    assert usable_cores(cgroup(tmp_path, cpu_max)) == (cpus if expected == "cpus" else expected)


def test_a_number_of_workers_stays_as_given() -> None:
    assert worker_count(3) == 3
    assert worker_count("auto") >= 1
