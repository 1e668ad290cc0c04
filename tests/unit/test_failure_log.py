"""core.failure_log: each kind's level says who acts on it; each kind's lines are bounded per window (fake clock)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from sidecar.core.clock import FakeClock
from sidecar.core.details import HttpInfo
from sidecar.core.failure_log import LINES_PER_WINDOW, WHO_ACTS, WINDOW_S, FailureLog, Who, who_acts
from sidecar.core.kinds import FailureKind, RetrySignal
from sidecar.core.taxonomy import (
    ExternalService,
    InvalidInput,
    JobCancelled,
    ModelNotFound,
    QuotaExhausted,
    SidecarFailure,
    SystemFailure,
    Unauthorized,
    UpstreamRetriesExhausted,
)

LOGGER = "sidecar.failures"


def _raised(failure: SidecarFailure) -> SidecarFailure:
    try:
        raise failure
    except SidecarFailure as caught:
        return caught


def _bad_argument() -> SidecarFailure:
    return _raised(InvalidInput("query", "", "must not be empty"))


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def records() -> Iterator[list[logging.LogRecord]]:
    """Every record of the failure log, in order."""
    logger, kept = logging.getLogger(LOGGER), _Kept()
    level = logger.level
    logger.addHandler(kept)
    logger.setLevel(logging.DEBUG)
    yield kept.records
    logger.removeHandler(kept)
    logger.setLevel(level)


def test_every_kind_has_a_row_saying_who_acts_on_it() -> None:
    assert set(WHO_ACTS) == set(FailureKind) - {FailureKind.UNSPECIFIED}


@pytest.mark.parametrize(
    ("failure", "level", "who"),
    [
        (_bad_argument(), logging.WARNING, Who.CALLER),
        (ModelNotFound("no-such-model", ["gpt"]), logging.WARNING, Who.CALLER),
        (ExternalService("docs", "https://docs.example/x", "connection refused"), logging.WARNING, Who.NOBODY),
        (
            UpstreamRetriesExhausted("gpt", 3, RetrySignal.OVERLOAD, "overloaded", http=None, retry_after=None),
            logging.WARNING,
            Who.NOBODY,
        ),
        (JobCancelled("tool fetch"), logging.INFO, Who.NOBODY),
        (QuotaExhausted("openai", "default", "gpt", "out of credit", http=None), logging.ERROR, Who.OPERATOR),
        (Unauthorized("openai", "HTTP 401 invalid_api_key"), logging.ERROR, Who.OPERATOR),
        (
            ModelNotFound.at_provider("openai", "gpt-9", "gpt", "no such model", http=HttpInfo(404, "openai", "/v1")),
            logging.ERROR,
            Who.OPERATOR,
        ),
    ],
    ids=lambda v: v.kind_name if isinstance(v, SidecarFailure) else str(v),
)
def test_the_level_is_who_acts_and_only_a_bug_has_a_stack(
    records: list[logging.LogRecord], failure: SidecarFailure, level: int, who: Who
) -> None:
    FailureLog(FakeClock()).failed(_raised(failure), model="gpt")
    (record,) = records
    assert (record.levelno, record.exc_info) == (level, None)
    assert who_acts(failure) is who
    assert vars(record)["who_acts"] == str(who)
    assert vars(record)["failure_kind"] == failure.kind_name
    assert vars(record)["model"] == "gpt"


def test_a_bug_is_an_error_with_its_traceback(records: list[logging.LogRecord]) -> None:
    FailureLog(FakeClock()).failed(_raised(SystemFailure("the model caller")))
    (record,) = records
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert record.exc_info[0] is SystemFailure


def test_a_kind_writes_its_lines_then_counts_and_says_the_count_when_its_window_ends(
    records: list[logging.LogRecord],
) -> None:
    clock = FakeClock()
    log = FailureLog(clock)
    for _ in range(1000):
        log.failed(_bad_argument(), tool="search_docs")
    assert len(records) == LINES_PER_WINDOW
    clock.advance(WINDOW_S - 0.001)
    assert len(records) == LINES_PER_WINDOW  # the window is still open: the count waits for its end
    clock.advance(0.001)
    summary = records[-1]
    assert len(records) == LINES_PER_WINDOW + 1
    assert summary.levelno == logging.WARNING
    assert summary.getMessage().startswith(
        f"suppressed {1000 - LINES_PER_WINDOW} more INVALID_INPUT warnings in the last 60 s"
    )
    assert vars(summary)["suppressed"] == 1000 - LINES_PER_WINDOW
    assert summary.exc_info is None


def test_after_its_window_a_kind_writes_again(records: list[logging.LogRecord]) -> None:
    clock = FakeClock()
    log = FailureLog(clock)
    for _ in range(LINES_PER_WINDOW + 5):
        log.failed(_bad_argument())
    clock.advance(WINDOW_S)
    log.failed(_bad_argument())
    summary, again = records[-2:]
    assert summary.getMessage() == (
        f"suppressed 5 more INVALID_INPUT warnings in the last 60 s (at most {LINES_PER_WINDOW} per 60 s "
        "are written per kind)"
    )
    assert again.getMessage().startswith("INVALID_INPUT: ")


def test_a_window_with_nothing_suppressed_ends_without_a_line(records: list[logging.LogRecord]) -> None:
    clock = FakeClock()
    log = FailureLog(clock)
    log.failed(_bad_argument())
    clock.advance(WINDOW_S)
    assert len(records) == 1
    assert clock.timers == []


def test_kinds_are_bounded_apart(records: list[logging.LogRecord]) -> None:
    """A flood of one caller's mistakes does not silence another kind, nor the operator's errors."""
    log = FailureLog(FakeClock())
    for _ in range(100):
        log.failed(_bad_argument())
    log.failed(ModelNotFound("no-such-model", ["gpt"]))
    log.failed(QuotaExhausted("openai", "default", "gpt", "out of credit", http=None))
    assert [vars(r)["failure_kind"] for r in records[-2:]] == ["MODEL_NOT_FOUND", "QUOTA_EXHAUSTED"]
    assert records[-1].levelno == logging.ERROR


def test_close_says_each_count_not_yet_said(records: list[logging.LogRecord]) -> None:
    clock = FakeClock()
    log = FailureLog(clock)
    for _ in range(LINES_PER_WINDOW + 3):
        log.failed(Unauthorized("openai", "HTTP 401 invalid_api_key"))
    log.close()
    summary = records[-1]
    assert summary.levelno == logging.ERROR
    assert summary.getMessage().startswith("suppressed 3 more UNAUTHORIZED errors before stopping")
    assert clock.timers == []  # the window's timer is gone with it
    clock.advance(WINDOW_S)
    assert records[-1] is summary
