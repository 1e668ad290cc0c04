"""The Python client's conformance runner: every case of tests/conformance/cases/.

Under the harness (``tests/conformance/harness.py``) the sidecar and the fakes are given by
SIDECAR_ADDR, FAKE_PROVIDER_URL and TOOL_BACKEND_URL, and each case's result is appended to
CONFORMANCE_REPORT. Run alone (``pytest tests/conformance``, ``make test``) it starts them
itself: the fakes in-process and a real sidecar process.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conformance_cases import Case, check, load_cases, observe_python, prepare_fakes

HERE = Path(__file__).resolve().parent
CASES = load_cases(os.environ.get("CONFORMANCE_CASES") or HERE / "cases")
_GIVEN = ("SIDECAR_ADDR", "FAKE_PROVIDER_URL", "TOOL_BACKEND_URL")


@pytest.fixture(scope="module")
def conformance_env() -> Iterator[dict[str, str]]:
    if all(os.environ.get(k) for k in _GIVEN):
        yield {k: os.environ[k] for k in _GIVEN}
        return
    from harness import environment

    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp, environment(Path(tmp)) as env:
        yield env


def _report(case: Case, problems: list[str], start_ms: int) -> None:
    """One line of CONFORMANCE_REPORT (conformance_report.py), when the harness asks for one."""
    path = os.environ.get("CONFORMANCE_REPORT")
    if path:
        line = {
            "name": case.name,
            "passed": not problems,
            "problems": problems,
            "start_ms": start_ms,
            "end_ms": time.time_ns() // 1_000_000,
        }
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(line, ensure_ascii=False) + "\n")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case(case: Case, conformance_env: dict[str, str]) -> None:
    start_ms = time.time_ns() // 1_000_000
    problems: list[str] = ["the case stopped before its comparison (see the runner's output)"]
    try:
        prepare_fakes(case, conformance_env["FAKE_PROVIDER_URL"], conformance_env["TOOL_BACKEND_URL"])
        observed = observe_python(conformance_env["SIDECAR_ADDR"], case, conformance_env["FAKE_PROVIDER_URL"])
        problems = check(case.expect, observed, conformance_env)
    except Exception as exc:
        problems = [f"{type(exc).__name__}: {exc}"]
        raise
    finally:
        _report(case, problems, start_ms)
    assert not problems, f"{case.path.name}:\n  " + "\n  ".join(problems) + f"\nobserved: {observed}"
