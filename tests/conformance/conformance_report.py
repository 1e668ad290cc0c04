"""What the runners report per case, the sidecar's log lines of each case, and the summary table.

Under the harness every runner appends one JSON line per case to ``$CONFORMANCE_REPORT``::

    {"name": "...", "passed": false, "problems": ["failure.kind: want ..."],
     "start_ms": 1767225600000, "end_ms": 1767225600042}

``start_ms`` is taken before the case resets the fakes, ``end_ms`` after its comparison, both
wall-clock milliseconds since the epoch. The sidecar (``telemetry.log_format: json``) writes one
JSON object per line with its ``time``; a line belongs to the case that was running::

    start_ms <= time < min(end_ms + LOG_SLACK_MS, the next case's start_ms)
    a line that is not JSON (a traceback written by hand)   goes with the line before it
    a line before the first case                             belongs to no case (start-up)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = [
    "LOG_SLACK_MS",
    "CaseResult",
    "LanguageResult",
    "case_log_lines",
    "read_report",
    "render_log_line",
    "summary",
]

LOG_SLACK_MS = 50
"""A line written this long after a case's end (and before the next case starts) is still the case's."""
MAX_FAILING_NAMES = 10
"""The summary names at most this many failing cases of one language (the rest are counted)."""


@dataclass(frozen=True)
class CaseResult:
    """One line of a runner's report."""

    name: str
    passed: bool
    problems: tuple[str, ...] = ()
    start_ms: int = 0
    end_ms: int = 0


@dataclass
class LanguageResult:
    """What one language's run came to: its runner's exit code and the cases it reported."""

    language: str
    skipped: str | None = None
    exit_code: int = 0
    seconds: float = 0.0
    results: list[CaseResult] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    """Cases the runner never reported (it stopped, or it skipped them)."""

    @property
    def passed(self) -> list[CaseResult]:
        return [r for r in self.results if r.passed]

    @property
    def failed(self) -> list[CaseResult]:
        return [r for r in self.results if not r.passed]

    @property
    def ok(self) -> bool:
        return self.skipped is not None or (self.exit_code == 0 and not self.failed and not self.missing)

    @property
    def failing_names(self) -> list[str]:
        return [r.name for r in self.failed] + [f"{name} (no result)" for name in self.missing]


def read_report(path: Path, expected: Sequence[str]) -> tuple[list[CaseResult], list[str]]:
    """The runner's results in the order it ran them, and the expected cases it never reported.

    A line that does not parse (a runner killed mid-write) is left out: its case counts as missing.
    """
    results: list[CaseResult] = []
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            try:
                data = json.loads(line)
                results.append(
                    CaseResult(
                        name=str(data["name"]),
                        passed=bool(data["passed"]),
                        problems=tuple(str(p) for p in data.get("problems") or ()),
                        start_ms=int(data.get("start_ms") or 0),
                        end_ms=int(data.get("end_ms") or 0),
                    )
                )
            except (ValueError, KeyError, TypeError):
                continue
    reported = {r.name for r in results}
    return results, [name for name in expected if name not in reported]


def _line_time_ms(line: str) -> int | None:
    try:
        data = json.loads(line)
        return int(datetime.fromisoformat(data["time"]).timestamp() * 1000)
    except (ValueError, KeyError, TypeError):
        return None


def case_log_lines(log_text: str, results: Iterable[CaseResult]) -> dict[str, list[str]]:
    """Each case's whole log lines (by name), by the time each line was written; see the module."""
    ordered = sorted((r for r in results if r.start_ms), key=lambda r: r.start_ms)
    windows = []
    for i, r in enumerate(ordered):
        end = max(r.end_ms, r.start_ms) + LOG_SLACK_MS
        if i + 1 < len(ordered):
            end = min(end, ordered[i + 1].start_ms)
        windows.append((r.start_ms, end, r.name))
    out: dict[str, list[str]] = {r.name: [] for r in ordered}
    owner: str | None = None
    for line in log_text.splitlines():
        if not line.strip():
            continue
        at = _line_time_ms(line)
        if at is not None:
            owner = next((name for start, end, name in windows if start <= at < end), None)
        if owner is not None:
            out[owner].append(line)
    return out


def render_log_line(line: str) -> list[str]:
    """A JSON log line as a person reads it (time level logger: message, its fields, its stack); else as is."""
    try:
        data: Any = json.loads(line)
    except ValueError:
        return [line]
    if not isinstance(data, dict):
        return [line]
    head = f"{data.pop('time', '')} {data.pop('level', '')} {data.pop('logger', '')}: {data.pop('message', '')}"
    stack = data.pop("stack", None)
    fields = " ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in data.items())
    out = [head + (f"  {fields}" if fields else "")]
    if stack:
        out.extend("    " + s for s in str(stack).splitlines())
    return out


def summary(languages: Sequence[LanguageResult]) -> list[str]:
    """The table printed at the end: one row per language, its failing cases named."""
    width = max([len("language"), *(len(lang.language) for lang in languages)])
    rows = [f"{'language':<{width}}  {'passed':>6}  {'failed':>6}  failing cases"]
    for lang in languages:
        if lang.skipped is not None:
            rows.append(f"{lang.language:<{width}}  {'-':>6}  {'-':>6}  skipped: {lang.skipped}")
            continue
        names = lang.failing_names
        if lang.exit_code != 0 and not names:
            names = [f"(the runner exited {lang.exit_code} after its cases passed: see its output)"]
        if len(names) > MAX_FAILING_NAMES:
            names = [*names[:MAX_FAILING_NAMES], f"... and {len(names) - MAX_FAILING_NAMES} more"]
        failed = len(lang.failed) + len(lang.missing)
        first, *rest = names or ["-"]
        rows.append(f"{lang.language:<{width}}  {len(lang.passed):>6}  {failed:>6}  {first}")
        rows.extend(f"{'':<{width}}  {'':>6}  {'':>6}  {name}" for name in rest)
    return rows
