"""Log lines: one JSON object each, with the trace and span they were written in; never a secret."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from sidecar_client import user

from sidecar.core.taxonomy import ExternalService, InvalidInput, SidecarFailure, log_failure
from sidecar.telemetry.logs import QUIET_LOGGERS, JsonFormatter, TextFormatter, configure_logging
from sidecar.telemetry.testing import InMemoryTelemetry, install_in_memory
from tests.conftest import Running

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


def test_a_correctable_failure_is_a_warning_without_a_stack(lines: Lines) -> None:
    log_failure(_raised(InvalidInput("query", "", "must not be empty")), tool="search")
    (line,) = lines.json
    assert line["level"] == "WARNING"
    assert line["failure_kind"] == "INVALID_INPUT"
    assert line["correctable"] is True
    assert line["tool"] == "search"
    assert "stack" not in line


def test_an_uncorrectable_failure_is_an_error_with_the_stack(lines: Lines) -> None:
    failure = _raised(ExternalService("docs", "https://docs.example/x", "connection refused"))
    log_failure(failure, tool="fetch")
    (line,) = lines.json
    assert line["level"] == "ERROR"
    assert line["failure_kind"] == "EXTERNAL_SERVICE"
    assert line["correctable"] is False
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
    assert failure["level"] == "ERROR"
    assert failure["tool"] == "fail_fetch"
    assert (failure["trace_id"], failure["span_id"]) == _ids(tool)
