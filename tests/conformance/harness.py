"""Run the one conformance suite against every client.

    .venv/bin/python tests/conformance/harness.py                 # every language: go typescript java python
    .venv/bin/python tests/conformance/harness.py --lang go,python
    .venv/bin/python tests/conformance/harness.py env             # start the fakes and a sidecar, print the
                                                                  # variables, wait for Ctrl-C (debug a runner)
    .venv/bin/python tests/conformance/harness.py exec -- CMD...  # run CMD with the variables set (the examples)
    .venv/bin/python tests/conformance/harness.py record          # show what the Python client observes per case
    .venv/bin/python tests/conformance/harness.py record --write  # ...and write the exact explanations,
                                                                  # model_text and compactions into the case files

The fakes (sidecar.fakes) run in this process on loopback; a real sidecar process
(``python -m sidecar serve --config tests/conformance/sidecar.yaml``) is started afresh for each
language, so throttle, circuit and spend state never leak from one client's run into another's.
Each runner gets SIDECAR_ADDR, FAKE_PROVIDER_URL, TOOL_BACKEND_URL, CONFORMANCE_CASES and
CONFORMANCE_REPORT, reads, scripts and judges the cases itself and reports each one
(README.md says how). Every language runs, whatever the others did; each failing case is shown
with the sidecar's log lines written while it ran (conformance_report.py), and a table ends the
run; the exit code is 1 when any case or runner failed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CASES = HERE / "cases"
CONFIG = HERE / "sidecar.yaml"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
MAX_CASE_LOG_LINES = 60
"""A failing case shows at most its last this many log lines (whole)."""
LOG_TAIL_LINES = 30
"""A runner that stopped without reporting every case shows this many last lines of the log."""

sys.path.insert(0, str(HERE))
from conformance_cases import PLACEHOLDERS, Case, check, load_cases, observe_python, prepare_fakes  # noqa: E402
from conformance_report import (  # noqa: E402
    LanguageResult,
    case_log_lines,
    read_report,
    render_log_line,
    summary,
)


@dataclass(frozen=True)
class Runner:
    """One language's conformance runner: a command run in ``cwd`` with the suite's variables."""

    language: str
    command: list[str]
    cwd: Path
    needs: list[Path] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)

    def missing(self) -> str | None:
        for tool in self.tools:
            if shutil.which(tool) is None:
                return f"{tool} is not installed"
        for path in self.needs:
            if not path.exists():
                return f"{path.relative_to(ROOT)} is missing (make clients-deps)"
        return None


RUNNERS = {
    "go": Runner("go", ["go", "test", "-count=1", "-run", "^TestConformance$", "."], ROOT / "clients/go", [], ["go"]),
    "typescript": Runner(
        "typescript",
        ["npm", "run", "--silent", "conformance"],
        ROOT / "clients/typescript",
        [ROOT / "clients/typescript/node_modules"],
        ["node", "npm"],
    ),
    "java": Runner(
        "java",
        ["mvn", "-q", "-B", "-f", "clients/java/pom.xml", "test", "-Dconformance=true"],
        ROOT,
        [ROOT / "clients/java/pom.xml"],
        ["mvn"],
    ),
    "python": Runner(
        "python",
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/conformance/test_conformance.py"],
        ROOT,
    ),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def fakes() -> Iterator[tuple[str, str]]:
    """The fake provider and tool backend on loopback: (provider URL, tool backend URL)."""
    from sidecar.fakes import FakeProvider, FakeToolBackend, ThreadedServer

    with ThreadedServer(FakeProvider()) as provider, ThreadedServer(FakeToolBackend()) as tools:
        yield provider.url, tools.url


@contextlib.contextmanager
def sidecar_process(provider_url: str, tool_url: str, log_path: Path) -> Iterator[str]:
    """A sidecar serving tests/conformance/sidecar.yaml; yields its address."""
    port = free_port()
    address = f"127.0.0.1:{port}"
    env = {**os.environ, "FAKE_PROVIDER_URL": provider_url, "TOOL_BACKEND_URL": tool_url}
    command = [sys.executable, "-m", "sidecar", "serve", "--config", str(CONFIG), "--listen", address]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_listening(proc, port, log_path)
            yield address
        finally:
            _stop(proc)


def _wait_listening(proc: subprocess.Popen[bytes], port: int, log_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the sidecar exited with {proc.returncode}:\n{log_path.read_text()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.1)
    raise RuntimeError(f"the sidecar did not listen on {port} within {START_TIMEOUT_S:g} s:\n{log_path.read_text()}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def environment(log_dir: Path) -> Iterator[dict[str, str]]:
    """Fakes and a sidecar: the variables a runner needs."""
    with fakes() as (provider_url, tool_url), sidecar_process(provider_url, tool_url, log_dir / "sidecar.log") as addr:
        yield {
            "SIDECAR_ADDR": addr,
            "FAKE_PROVIDER_URL": provider_url,
            "TOOL_BACKEND_URL": tool_url,
            "CONFORMANCE_CASES": str(CASES),
        }


def run_languages(languages: list[str]) -> int:
    """Run every language (a failure stops none), show each failing case with its sidecar lines, then the table."""
    expected = [case.name for case in load_cases(CASES)]
    outcomes: list[LanguageResult] = []
    tmp = Path(tempfile.mkdtemp(prefix="conformance-"))
    with fakes() as (provider_url, tool_url):
        for language in languages:
            runner = RUNNERS[language]
            why = runner.missing()
            if why:
                print(f"== {language}: skipped ({why})", flush=True)
                outcomes.append(LanguageResult(language, skipped=why))
                continue
            log, report = tmp / f"sidecar-{language}.log", tmp / f"report-{language}.jsonl"
            print(f"== {language}: {' '.join(runner.command)}", flush=True)
            with sidecar_process(provider_url, tool_url, log) as addr:
                env = {
                    **os.environ,
                    "SIDECAR_ADDR": addr,
                    "FAKE_PROVIDER_URL": provider_url,
                    "TOOL_BACKEND_URL": tool_url,
                    "CONFORMANCE_CASES": str(CASES),
                    "CONFORMANCE_REQUIRED": "1",
                    "CONFORMANCE_REPORT": str(report),
                }
                started = time.monotonic()
                code = subprocess.call(runner.command, cwd=runner.cwd, env=env)
            results, missing = read_report(report, expected)
            took = time.monotonic() - started
            outcome = LanguageResult(language, exit_code=code, seconds=took, results=results, missing=missing)
            outcomes.append(outcome)
            verdict = "passed" if outcome.ok else "FAILED"
            passed = len(outcome.passed)
            print(f"== {language}: {verdict}: {passed} of {len(expected)} cases in {outcome.seconds:.1f} s")
            if not outcome.ok:
                _show_failures(outcome, log)
            print(flush=True)
    print("== conformance summary")
    for row in summary(outcomes):
        print(row)
    ran = [o for o in outcomes if o.skipped is None]
    failed = sum(len(o.failed) + len(o.missing) for o in ran)
    print(f"conformance: {sum(len(o.passed) for o in ran)} passed, {failed} failed", flush=True)
    if all(o.ok for o in outcomes):
        shutil.rmtree(tmp, ignore_errors=True)
        return 0
    print(f"the sidecars' logs and the runners' reports are kept in {tmp}")
    return 1


def _show_failures(outcome: LanguageResult, log: Path) -> None:
    """Each failing case: its problems and the sidecar's log lines written while it ran (whole lines)."""
    text = log.read_text(errors="replace")
    by_case = case_log_lines(text, outcome.results)  # every case bounds its neighbours
    for result in outcome.failed:
        print(f"-- {outcome.language} FAILED: {result.name}")
        for problem in result.problems:
            print(f"     {problem}")
        lines = by_case.get(result.name, [])
        print(f"   the sidecar's log while it ran ({len(lines)} line{'s' * (len(lines) != 1)}):")
        _print_lines(lines)
    if outcome.missing:
        print(f"-- {outcome.language}: no result for {len(outcome.missing)} case(s): {', '.join(outcome.missing)}")
    if outcome.missing or (outcome.exit_code != 0 and not outcome.failed):
        print(f"   the runner exited {outcome.exit_code}; the end of the sidecar's log:")
        _print_lines(text.splitlines()[-LOG_TAIL_LINES:])


def _print_lines(lines: list[str]) -> None:
    if len(lines) > MAX_CASE_LOG_LINES:
        print(f"     ({len(lines) - MAX_CASE_LOG_LINES} earlier lines left out)")
        lines = lines[-MAX_CASE_LOG_LINES:]
    for line in lines:
        for shown in render_log_line(line):
            print(f"     {shown}")


def record(write: bool) -> int:
    """Run every case through the Python client; print what it saw; optionally write the exact strings."""
    mismatched = 0
    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp, environment(Path(tmp)) as env:
        for case in load_cases(CASES):
            prepare_fakes(case, env["FAKE_PROVIDER_URL"], env["TOOL_BACKEND_URL"])
            observed = observe_python(env["SIDECAR_ADDR"], case, env["FAKE_PROVIDER_URL"])
            problems = check(case.expect, observed, env)
            print(f"--- {case.path.name} ({case.name}): {'ok' if not problems else 'MISMATCH'}")
            print(json.dumps(observed, indent=2, sort_keys=True))
            for problem in problems:
                print(f"    {problem}")
            if write:
                mismatched += _write_strings(case, observed, env)
    return 1 if mismatched else 0


def _write_strings(case: Case, observed: dict[str, Any], env: dict[str, str]) -> int:
    """Fill expect.failure.explanation, expect.failure.http.endpoint (when http is expected),
    expect.failure.stream.reason and expect.restarts[i].reason (when the case lists them),
    expect.compaction's measures (when the case expects one) and expect.model_text from
    ``observed``, the fakes' URLs turned back into placeholders. Refused (1) unless the authored
    grpc_code, outcome, kind, correctable (and each restart's cause and attempt) agree with ``observed``."""
    data = json.loads(case.path.read_text())
    expect = data["expect"]
    authored = {k: v for k, v in expect.items() if k in ("grpc_code", "outcome")}
    if any(observed.get(k) != v for k, v in authored.items()):
        print(f"    not written: grpc_code/outcome differ from the case ({authored})")
        return 1

    def placeholders(text: str) -> str:
        for name in PLACEHOLDERS:
            text = text.replace(env[name], "${" + name + "}")
        return text

    want, failure = expect.get("failure"), observed.get("failure")
    if isinstance(want, dict) and isinstance(failure, dict):
        for key in ("kind", "correctable"):
            if key in want and failure.get(key) != want[key]:
                print(f"    not written: failure.{key} is {failure.get(key)!r}, the case says {want[key]!r}")
                return 1
        if failure["explanation"] and case.cancel_after_events is None:  # a self-cancel is the client's words
            want["explanation"] = placeholders(failure["explanation"])
        if isinstance(want.get("http"), dict) and isinstance(failure.get("http"), dict):
            want["http"]["endpoint"] = placeholders(failure["http"]["endpoint"])
        stream_want, stream_got = want.get("stream"), failure.get("stream")
        if isinstance(stream_want, dict) and "reason" in stream_want and isinstance(stream_got, dict):
            stream_want["reason"] = placeholders(stream_got["reason"])
    if not _write_restart_reasons(expect, observed, placeholders):
        return 1
    if not _write_compaction(expect, observed):
        return 1
    if case.rpc == "ExecuteTool" and observed.get("model_text") is not None:
        expect["model_text"] = placeholders(str(observed["model_text"]))
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if text != case.path.read_text():
        case.path.write_text(text)
        print(f"    wrote {case.path.relative_to(ROOT)}")
    return 0


def _write_restart_reasons(expect: dict[str, Any], observed: dict[str, Any], placeholders: Any) -> bool:
    """Fill each expect.restarts[i].reason the case lists from ``observed``; False (not written) when the
    count of restarts or an authored cause or attempt disagrees."""
    want, got = expect.get("restarts"), observed.get("restarts")
    if not isinstance(want, list) or not isinstance(got, list):
        return True
    if len(want) != len(got):
        print(f"    not written: {len(got)} restarts observed, the case lists {len(want)}")
        return False
    for i, (w, g) in enumerate(zip(want, got, strict=True)):
        for key in ("cause", "attempt"):
            if key in w and g.get(key) != w[key]:
                print(f"    not written: restarts[{i}].{key} is {g.get(key)!r}, the case says {w[key]!r}")
                return False
        if "reason" in w:
            w["reason"] = placeholders(g["reason"])
    return True


def _write_compaction(expect: dict[str, Any], observed: dict[str, Any]) -> bool:
    """Fill expect.compaction's measures from ``observed`` when the case expects one: tokens_before,
    tokens_after, messages, and each step's turns and tokens (every step, when the case lists none).
    False (not written) when the authored trigger, summarizer_calls or steps' strategies disagree."""
    want, got = expect.get("compaction"), observed.get("compaction")
    if not isinstance(want, dict):
        return True
    if not isinstance(got, dict):
        print("    not written: the case expects a compaction, none was observed")
        return False
    for key in ("trigger", "summarizer_calls"):
        if key in want and got[key] != want[key]:
            print(f"    not written: compaction.{key} is {got[key]!r}, the case says {want[key]!r}")
            return False
    authored = [step.get("strategy") for step in (want["steps"] if "steps" in want else got["steps"])]
    if authored != [step["strategy"] for step in got["steps"]]:
        print(f"    not written: compaction.steps are {got['steps']!r}, the case says {want['steps']!r}")
        return False
    for key in ("tokens_before", "tokens_after", "steps", "messages"):
        want[key] = got[key]
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", default="run", choices=["run", "env", "exec", "record"])
    parser.add_argument("argv", nargs="*", help="exec: the command to run (after --)")
    parser.add_argument("--lang", default=",".join(RUNNERS), help="comma-separated: " + ", ".join(RUNNERS))
    parser.add_argument("--write", action="store_true", help="record: write the observed strings")
    args = parser.parse_args()
    load_cases(CASES)  # a malformed case fails here, before anything starts
    if args.command == "record":
        return record(args.write)
    if args.command == "exec":
        if not args.argv:
            parser.error("exec needs a command: harness.py exec -- CMD...")
        with tempfile.TemporaryDirectory(prefix="conformance-") as tmp, environment(Path(tmp)) as env:
            code = subprocess.call(args.argv, env={**os.environ, **env})
            if code != 0:
                print(f"-- {args.argv[0]} exited {code}; the end of the sidecar's log:")
                _print_lines((Path(tmp) / "sidecar.log").read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:])
            return code
    if args.command == "env":
        with tempfile.TemporaryDirectory(prefix="conformance-") as tmp, environment(Path(tmp)) as env:
            for key, value in env.items():
                print(f"export {key}={value}")
            print(f"# sidecar log: {tmp}/sidecar.log; Ctrl-C to stop", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                signal.pause()
        return 0
    languages = [lang.strip() for lang in args.lang.split(",") if lang.strip()]
    unknown = [lang for lang in languages if lang not in RUNNERS]
    if unknown:
        parser.error(f"unknown language(s) {unknown}; known: {', '.join(RUNNERS)}")
    return run_languages(languages)


if __name__ == "__main__":
    sys.exit(main())
