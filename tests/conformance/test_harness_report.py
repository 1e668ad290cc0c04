"""The harness's bookkeeping, without a sidecar: the runners' reports, the log lines of each case, the table."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from conformance_report import CaseResult, LanguageResult, case_log_lines, read_report, render_log_line, summary

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z in ms


def _log(at_ms: int, message: str, **extra: object) -> str:
    when = datetime.fromtimestamp(at_ms / 1000, UTC).isoformat(timespec="milliseconds")
    return json.dumps({"time": when, "level": "WARNING", "logger": "sidecar.failures", "message": message, **extra})


def test_a_report_line_cut_short_leaves_its_case_without_a_result(tmp_path: Path) -> None:
    report = tmp_path / "report.jsonl"
    ok = {"name": "one", "passed": True, "problems": [], "start_ms": T0, "end_ms": T0 + 5}
    report.write_text(json.dumps(ok) + "\n" + '{"name": "two", "pass')
    results, missing = read_report(report, ["one", "two", "three"])
    assert results == [CaseResult("one", True, (), T0, T0 + 5)]
    assert missing == ["two", "three"]


def test_each_case_gets_the_whole_lines_written_while_it_ran() -> None:
    traceback = "Traceback (most recent call last):"
    log = "\n".join(
        [
            "sidecar 0.1.0 listening on 127.0.0.1:1",  # start-up: no case
            _log(T0 + 1, "UPSTREAM_RETRIES_EXHAUSTED: first", model="gpt-a"),
            traceback,  # not JSON: goes with the line before
            _log(T0 + 120, "late but before the next case"),  # within end + slack
            _log(T0 + 200, "JSON_PARSE: second"),
            _log(T0 + 900, "after every case"),
        ]
    )
    results = [CaseResult("first", False, (), T0, T0 + 100), CaseResult("second", False, (), T0 + 150, T0 + 300)]
    by_case = case_log_lines(log, results)
    assert by_case["first"] == [log.splitlines()[1], traceback, log.splitlines()[3]]
    assert by_case["second"] == [log.splitlines()[4]]


def test_a_json_line_reads_as_text_with_its_fields_and_stack() -> None:
    line = _log(T0, "SYSTEM: boom", model="gpt-a", stack="Traceback:\n  File x")
    assert render_log_line(line) == [
        '2026-01-01T00:00:00.000+00:00 WARNING sidecar.failures: SYSTEM: boom  model="gpt-a"',
        "    Traceback:",
        "      File x",
    ]
    assert render_log_line("plain words") == ["plain words"]


def test_the_summary_names_every_failing_case_and_each_language() -> None:
    go = LanguageResult("go", results=[CaseResult("a", True), CaseResult("b", False)], missing=["c"], exit_code=1)
    java = LanguageResult("java", skipped="mvn is not installed")
    python = LanguageResult("python", results=[CaseResult("a", True), CaseResult("b", True)])
    assert summary([go, java, python]) == [
        "language  passed  failed  failing cases",
        "go             1       2  b",
        "                          c (no result)",
        "java           -       -  skipped: mvn is not installed",
        "python         2       0  -",
    ]
    assert not go.ok
    assert java.ok
    assert python.ok
