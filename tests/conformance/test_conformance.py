"""The Python client's conformance runner: every case of tests/conformance/cases/.

Under the harness (``tests/conformance/harness.py``) the sidecar and the fakes are given by
SIDECAR_ADDR, FAKE_PROVIDER_URL and TOOL_BACKEND_URL. Run alone (``pytest tests/conformance``,
``make test``) it starts them itself: the fakes in-process and a real sidecar process.
"""

from __future__ import annotations

import os
import tempfile
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


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case(case: Case, conformance_env: dict[str, str]) -> None:
    prepare_fakes(case, conformance_env["FAKE_PROVIDER_URL"], conformance_env["TOOL_BACKEND_URL"])
    observed = observe_python(conformance_env["SIDECAR_ADDR"], case)
    problems = check(case.expect, observed, conformance_env)
    assert not problems, f"{case.path.name}:\n  " + "\n  ".join(problems) + f"\nobserved: {observed}"
