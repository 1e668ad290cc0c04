"""Log lines: one JSON object each, with the trace and span they were written in; never a secret."""

from __future__ import annotations

import io
import json
import logging
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
import yaml
from sidecar_client import ModelNotFoundError, SidecarClient, pb, user

from sidecar.core.clock import FakeClock
from sidecar.core.failure_log import LINES_PER_WINDOW, WINDOW_S, FailureLog
from sidecar.core.taxonomy import ExternalService, InvalidInput, SidecarFailure, SystemFailure
from sidecar.telemetry.logs import QUIET_LOGGERS, JsonFormatter, TextFormatter, configure_logging
from sidecar.telemetry.testing import InMemoryTelemetry, install_in_memory
from tests.conftest import Running, Start, base_config

KEY = "sk-test-SECRETKEY1234567890"


@pytest.fixture(scope="session")
def otel() -> InMemoryTelemetry:
    return install_in_memory()


@pytest.fixture(autouse=True)
def _fresh(otel: InMemoryTelemetry) -> None:
    otel.clear()


class Lines:
    """Every line written through a formatter while attached to the root logger."""

    def __init__(self, formatter: logging.Formatter) -> None:
        self.stream = io.StringIO()
        self.handler = logging.StreamHandler(self.stream)
        self.handler.setFormatter(formatter)

    @property
    def text(self) -> list[str]:
        return self.stream.getvalue().splitlines()

    @property
    def json(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.text]


@pytest.fixture
def lines() -> Iterator[Lines]:
    captured = Lines(JsonFormatter([KEY]))
    root = logging.getLogger()
    level = root.level
    root.addHandler(captured.handler)
    root.setLevel(logging.DEBUG)
    yield captured
    root.removeHandler(captured.handler)
    root.setLevel(level)


def _ids(span: Any) -> tuple[str, str]:
    """A span's (or a finished span's) ids as the log line writes them."""
    ctx = span.get_span_context()
    return format(ctx.trace_id, "032x"), format(ctx.span_id, "016x")


def test_a_line_is_one_json_object_with_the_span_it_was_written_in(otel: InMemoryTelemetry, lines: Lines) -> None:
    tracer = otel.tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("outer"), tracer.start_as_current_span("inner") as inner:
        logging.getLogger("sidecar.test").info("hello %s", "world")
    (line,) = lines.json
    assert list(line)[:4] == ["time", "level", "logger", "message"]
    assert line["level"] == "INFO"
    assert line["logger"] == "sidecar.test"
    assert line["message"] == "hello world"
    assert line["time"].endswith("+00:00")
    assert (line["trace_id"], line["span_id"]) == _ids(inner)


def test_outside_a_span_a_line_has_no_trace_id(lines: Lines) -> None:
    logging.getLogger("sidecar.test").warning("alone")
    (line,) = lines.json
    assert "trace_id" not in line
    assert "span_id" not in line


def test_extra_fields_are_kept_as_json_values(lines: Lines) -> None:
    logging.getLogger("sidecar.test").info(
        "with extras", extra={"model": "gpt", "attempts": 3, "correctable": False, "tags": ["a"], "obj": object()}
    )
    (line,) = lines.json
    assert line["model"] == "gpt"
    assert line["attempts"] == 3
    assert line["correctable"] is False
    assert line["tags"] == ["a"]
    assert line["obj"].startswith("<object object")


def _raised(failure: SidecarFailure) -> SidecarFailure:
    try:
        raise failure
    except SidecarFailure as caught:
        return caught


def test_a_callers_mistake_is_a_warning_line_without_a_stack(lines: Lines) -> None:
    FailureLog(FakeClock()).failed(_raised(InvalidInput("query", "", "must not be empty")), tool="search")
    (line,) = lines.json
    assert line["level"] == "WARNING"
    assert line["failure_kind"] == "INVALID_INPUT"
    assert line["who_acts"] == "caller"
    assert line["correctable"] is True
    assert line["tool"] == "search"
    assert "stack" not in line


def test_a_services_outage_is_a_warning_line_without_a_stack(lines: Lines) -> None:
    failure = _raised(ExternalService("docs", "https://docs.example/x", "connection refused"))
    FailureLog(FakeClock()).failed(failure, tool="fetch")
    (line,) = lines.json
    assert line["level"] == "WARNING"
    assert line["failure_kind"] == "EXTERNAL_SERVICE"
    assert line["who_acts"] == "nobody"
    assert line["correctable"] is False
    assert "stack" not in line


def test_a_bug_is_an_error_line_with_the_stack(lines: Lines) -> None:
    failure = _raised(SystemFailure("the model caller"))
    FailureLog(FakeClock()).failed(failure, model="gpt")
    (line,) = lines.json
    assert line["level"] == "ERROR"
    assert line["failure_kind"] == "SYSTEM"
    assert line["who_acts"] == "operator"
    assert line["stack"].startswith("Traceback (most recent call last):")
    assert "in _raised" in line["stack"]
    assert line["stack"].rstrip().endswith(failure.message)


def test_a_secret_is_masked_in_the_message_the_fields_and_the_stack(lines: Lines) -> None:
    log = logging.getLogger("sidecar.test")
    try:
        raise RuntimeError(f"the provider said: bad key {KEY}")
    except RuntimeError:
        log.exception("call failed with %s", KEY, extra={"header": f"Bearer {KEY}"})
    (text,) = lines.text
    assert "SECRETKEY" not in text
    line = json.loads(text)
    assert "«redacted»" in line["message"]
    assert "«redacted»" in line["header"]
    assert "«redacted»" in line["stack"]


ODD_KEY = 'Zq9Odd"k\\ey/%41 x'
"""A key JSON escapes (``"`` and ``\\``) and URLs encode: it must be masked in every form."""


def test_a_secret_json_would_escape_is_masked_before_and_after_escaping() -> None:
    from urllib.parse import quote

    log = logging.getLogger("sidecar.test")
    captured = Lines(JsonFormatter([ODD_KEY]))
    log.addHandler(captured.handler)
    try:
        try:
            raise RuntimeError(f"echoed {ODD_KEY!r} and {quote(ODD_KEY)}")
        except RuntimeError:
            log.error("said %s / %s", ODD_KEY, json.dumps({"key": ODD_KEY}), exc_info=True, extra={"k": [ODD_KEY]})
    finally:
        log.removeHandler(captured.handler)
    (text,) = captured.text
    assert "Zq9" not in text
    line = json.loads(text)
    assert line["message"] == 'said «redacted» / {"key": "«redacted»"}'
    assert line["k"] == ["«redacted»"]
    assert "echoed '«redacted»' and «redacted»" in line["stack"]


def test_a_secret_the_process_registered_is_masked_without_being_passed() -> None:
    from sidecar.telemetry import masking

    masking.register(["Zq9Registered-secret"])
    record = logging.makeLogRecord({"msg": "using Zq9Registered-secret", "levelname": "INFO"})
    assert json.loads(JsonFormatter().format(record))["message"] == "using «redacted»"
    assert "Zq9" not in TextFormatter().format(record)


def test_an_unconfigured_secret_is_still_masked_by_its_shape() -> None:
    record = logging.makeLogRecord({"msg": "key sk-proj-abcdefghijklmnop1234 leaked", "levelname": "INFO"})
    assert "abcdefghijklmnop1234" not in JsonFormatter().format(record)


def test_the_text_format_masks_and_names_the_trace(otel: InMemoryTelemetry) -> None:
    formatter = TextFormatter([KEY])
    with otel.tracer_provider.get_tracer("test").start_as_current_span("s") as span:
        record = logging.makeLogRecord({"msg": f"using {KEY}", "levelname": "INFO", "levelno": 20, "name": "x"})
        text = formatter.format(record)
    trace_id, span_id = _ids(span)
    assert "SECRETKEY" not in text
    assert f"trace_id={trace_id} span_id={span_id}" in text


def test_configure_logging_writes_json_lines_and_quiets_the_libraries() -> None:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, {name: logging.getLogger(name).level for name in QUIET_LOGGERS})
    stream = io.StringIO()
    try:
        configure_logging("INFO", "json", [KEY], stream=stream)
        logging.getLogger("sidecar.test").info("configured %s", KEY)
        logging.getLogger("httpx").info("a request line nobody needs")
        logging.getLogger("sidecar.test").debug("below the level")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        for name, level in saved[2].items():
            logging.getLogger(name).setLevel(level)
    (line,) = [json.loads(t) for t in stream.getvalue().splitlines()]
    assert line["message"] == "configured «redacted»"


async def test_the_sidecars_failure_lines_lead_to_their_spans(
    sidecar: Running, otel: InMemoryTelemetry, lines: Lines
) -> None:
    sidecar.provider.script("fake-gpt", [{"preset": "bad_json"}])
    await sidecar.client.call_model("gpt", [user("hi")], response_schema={"type": "object"})
    await sidecar.client.execute_tool("fail_fetch", {"mode": "500"})
    spans = {s.name: s for s in otel.spans()}
    by_kind = {line.get("failure_kind"): line for line in lines.json}
    chat, tool = spans["chat gpt"], spans["execute_tool fail_fetch"]
    correction = by_kind["JSON_PARSE"]
    assert correction["level"] == "WARNING"
    assert (correction["trace_id"], correction["span_id"]) == _ids(chat)
    failure = by_kind["EXTERNAL_SERVICE"]
    assert failure["level"] == "WARNING"  # the service's outage, retried: nobody's to act on
    assert "stack" not in failure
    assert failure["tool"] == "fail_fetch"
    assert (failure["trace_id"], failure["span_id"]) == _ids(tool)


async def test_a_reload_keeps_each_kinds_budget_of_lines(
    start_sidecar: Start, lines: Lines, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failure log is handed to the next core: a reload in the middle of a flood opens no new budget."""
    r = await start_sidecar()
    monkeypatch.setenv("SIDECAR_TEST_KEY", KEY)
    cfg = base_config(r.provider.url, r.backend.url)
    for provider in cfg["providers"].values():
        provider["api_key"] = "${SIDECAR_TEST_KEY}"  # a config file names its secrets, never holds them
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert r.app.reloader is not None
    r.app.reloader.path = str(path)
    for _ in range(LINES_PER_WINDOW):
        with pytest.raises(ModelNotFoundError):
            await r.client.call_model("no-such-model", [user("hi")])
    outcome = await r.app.reload()
    assert outcome.applied, outcome.error
    for _ in range(5):
        with pytest.raises(ModelNotFoundError):
            await r.client.call_model("no-such-model", [user("hi")])
    unknown = [line for line in lines.json if line.get("failure_kind") == "MODEL_NOT_FOUND"]
    assert len(unknown) == LINES_PER_WINDOW
    r.clock.advance(WINDOW_S)
    summary = lines.json[-1]
    assert (summary["failure_kind"], summary["suppressed"]) == ("MODEL_NOT_FOUND", 5)


# ---------------------------------------------------------------- a real `sidecar serve`: caller mistakes, a flood

FLOOD = 1000
"""Bad calls in the flood: far past a window's budget of lines."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve_logged(err: IO[str]) -> tuple[subprocess.Popen[str], str]:
    """``sidecar serve`` (the embedded default) with its log on ``err`` (a file: a pipe the test does not
    read would fill and stall the process's logging), once it listens."""
    addr = f"127.0.0.1:{_free_port()}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "sidecar", "serve", "--listen", addr], stdout=subprocess.PIPE, stderr=err, text=True
    )
    assert proc.stdout is not None
    assert f"listening on {addr}" in proc.stdout.readline()
    return proc, addr


def test_a_real_sidecar_logs_callers_mistakes_as_warnings_and_a_flood_in_bounded_lines(tmp_path: Path) -> None:
    log = tmp_path / "sidecar.log"
    with log.open("w") as err:
        proc, addr = _serve_logged(err)
    try:
        with SidecarClient(addr) as client:
            with pytest.raises(ModelNotFoundError):
                client.call_model("no-such-model", [user("hi")])
            bad = client.execute_tool("search_docs", {"query": 7}, call_id="c1")
            assert bad.failure.kind == pb.FAILURE_KIND_INVALID_INPUT
            started = time.monotonic()
            for _ in range(FLOOD):
                with pytest.raises(ModelNotFoundError):
                    client.call_model("no-such-model", [user("hi")])
            took = time.monotonic() - started
    finally:
        proc.send_signal(signal.SIGTERM)  # stopping says the count of the window still open
        proc.communicate(timeout=30)
    assert proc.returncode == 0
    lines = [json.loads(text) for text in log.read_text().splitlines() if text.startswith("{")]
    failures = [line for line in lines if line["logger"] == "sidecar.failures"]
    assert [line for line in lines if line["level"] == "ERROR"] == []  # nothing an operator must act on
    unknown = [line for line in failures if line["failure_kind"] == "MODEL_NOT_FOUND"]
    first = unknown[0]
    assert (first["level"], first["who_acts"], first["model"]) == ("WARNING", "caller", "no-such-model")
    assert "stack" not in first
    (argument,) = [line for line in failures if line["failure_kind"] == "INVALID_INPUT"]
    assert (argument["level"], argument["who_acts"], argument["tool"]) == ("WARNING", "caller", "search_docs")
    assert "stack" not in argument
    # Bounded: at most the budget and one count per window the calls spanned (one, on any machine that
    # makes 1,000 local calls in a minute), and every call is a line or in a count.
    windows = 1 + int(took // WINDOW_S) + 1
    assert len(unknown) <= windows * (LINES_PER_WINDOW + 1)
    counted = [line["suppressed"] for line in unknown if "suppressed" in line]
    assert counted
    assert len(unknown) - len(counted) + sum(counted) == 1 + FLOOD
    assert all("stack" not in line and line["level"] == "WARNING" for line in unknown)
