"""A failed call's log line: its level says who must act on it, and each kind's lines are bounded.

ERROR is kept for what an operator must act on; a caller's mistake is the caller's to fix (it
reads the failure in its answer) and is a WARNING, never with a stack; a failure nobody can act on
(a provider's outage the retries and circuits already handle) is a WARNING too. Only SYSTEM, a
bug, carries the traceback.

    kind                           who acts                                  level     stack
    INVALID_INPUT                  the caller: its arguments                  WARNING   -
    RESOURCE_NOT_FOUND             the caller: what it asked for              WARNING   -
    GUARDRAIL                      the caller: what it sent                   WARNING   -
    JSON_PARSE                     the caller: its prompt or schema           WARNING   -
    RESPONSE_VALIDATION            the caller: its prompt or schema           WARNING   -
    PERMISSION_DENIED              the caller: the person it works for        WARNING   -
    SPEND_CAP_EXCEEDED             the caller: its workflow's cap             WARNING   -
    MODEL_NOT_FOUND                the caller: an id not in the catalog       WARNING   -
                                   the operator: the provider does not        ERROR     -
                                   serve the catalog's model (its HTTP 404)
    PROVIDER_REFUSAL               the caller: its content                    WARNING   -
    TOKEN_ESTIMATE_EXCEEDS_LIMIT   the caller: a shorter conversation         WARNING   -
    CONTEXT_OVERFLOW               the caller: a shorter conversation         WARNING   -
    OUTPUT_TRUNCATED               the caller: ask for less                   WARNING   -
    JOB_TIMEOUT                    the caller: its deadline                   WARNING   -
    JOB_CANCELLED                  nobody: the caller (or a shutdown) chose   INFO      -
    EXTERNAL_SERVICE               nobody: a service's outage, retried        WARNING   -
    UPSTREAM_THROTTLE              nobody: the upstream's limit, retried      WARNING   -
    UPSTREAM_RETRIES_EXHAUSTED     nobody: a provider's outage, retried       WARNING   -
    CIRCUIT_OPEN                   nobody: the circuit already acts           WARNING   -
    STREAM_INTERRUPTED             nobody: a provider's outage                WARNING   -
    UNAUTHORIZED                   the operator: the sidecar's credentials    ERROR     -
    QUOTA_EXHAUSTED                the operator: the provider account         ERROR     -
    SYSTEM                         the operator: a bug to report              ERROR     the traceback

A caller can fail as often as it calls, so each (kind, who) writes at most ``LINES_PER_WINDOW``
lines per ``WINDOW_S`` seconds of the injected clock: the window opens at its first line; the
lines past the budget are counted, and one line says how many when the window closes ("suppressed
K more INVALID_INPUT warnings in the last 60 s"), or at ``close()``. A flood of bad calls is then
at most ``LINES_PER_WINDOW + 1`` lines a minute per kind, however many calls it is.

A ClassifyFailure answer is not a failed call: ``log_classified`` writes its line at INFO, no stack.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from sidecar.core.clock import Clock
from sidecar.core.kinds import FailureKind
from sidecar.core.taxonomy import ModelNotFound, SidecarFailure

__all__ = ["LINES_PER_WINDOW", "WHO_ACTS", "WINDOW_S", "FailureLog", "Who", "log_classified", "who_acts"]

LINES_PER_WINDOW = 10
"""How many lines one (kind, who) writes per window; the rest are counted."""
WINDOW_S = 60.0
"""The window, in seconds of the injected clock, that ``LINES_PER_WINDOW`` counts in."""

_log = logging.getLogger("sidecar.failures")


class Who(StrEnum):
    """Who must act on a failure: the line's ``who_acts`` field."""

    CALLER = "caller"
    OPERATOR = "operator"
    NOBODY = "nobody"


WHO_ACTS: dict[FailureKind, Who] = {
    FailureKind.INVALID_INPUT: Who.CALLER,
    FailureKind.RESOURCE_NOT_FOUND: Who.CALLER,
    FailureKind.GUARDRAIL: Who.CALLER,
    FailureKind.JSON_PARSE: Who.CALLER,
    FailureKind.RESPONSE_VALIDATION: Who.CALLER,
    FailureKind.PERMISSION_DENIED: Who.CALLER,
    FailureKind.SPEND_CAP_EXCEEDED: Who.CALLER,
    FailureKind.MODEL_NOT_FOUND: Who.CALLER,  # the operator's when the provider said it (who_acts)
    FailureKind.PROVIDER_REFUSAL: Who.CALLER,
    FailureKind.TOKEN_ESTIMATE_EXCEEDS_LIMIT: Who.CALLER,
    FailureKind.CONTEXT_OVERFLOW: Who.CALLER,
    FailureKind.OUTPUT_TRUNCATED: Who.CALLER,
    FailureKind.JOB_TIMEOUT: Who.CALLER,
    FailureKind.JOB_CANCELLED: Who.NOBODY,
    FailureKind.EXTERNAL_SERVICE: Who.NOBODY,
    FailureKind.UPSTREAM_THROTTLE: Who.NOBODY,
    FailureKind.UPSTREAM_RETRIES_EXHAUSTED: Who.NOBODY,
    FailureKind.CIRCUIT_OPEN: Who.NOBODY,
    FailureKind.STREAM_INTERRUPTED: Who.NOBODY,
    FailureKind.UNAUTHORIZED: Who.OPERATOR,
    FailureKind.QUOTA_EXHAUSTED: Who.OPERATOR,
    FailureKind.SYSTEM: Who.OPERATOR,
}
"""Who acts on each kind (the module's table); a kind not named here is the operator's."""

_LEVELS = {Who.CALLER: logging.WARNING, Who.NOBODY: logging.WARNING, Who.OPERATOR: logging.ERROR}
_LEVEL_WORDS = {logging.INFO: "lines", logging.WARNING: "warnings", logging.ERROR: "errors"}


def who_acts(failure: SidecarFailure) -> Who:
    """The table's row, and the one kind with two: a MODEL_NOT_FOUND the provider answered (an HTTP
    404 for a model the catalog holds) is the operator's catalog entry, not the caller's id."""
    if isinstance(failure, ModelNotFound) and failure.http is not None:
        return Who.OPERATOR
    return WHO_ACTS.get(failure.kind, Who.OPERATOR)


def _level_of(failure: SidecarFailure, who: Who) -> int:
    """ERROR for the operator, INFO for a cancellation (nothing failed), WARNING for the rest."""
    if failure.kind is FailureKind.JOB_CANCELLED:
        return logging.INFO
    return _LEVELS[who]


@dataclass(slots=True)
class _Window:
    """One (kind, who)'s lines in the window open now."""

    level: int
    written: int = 0
    suppressed: int = 0
    cancel: Callable[[], None] = field(default=lambda: None)


class FailureLog:
    """The ``sidecar.failures`` lines of failed calls, leveled by who acts, bounded per kind (module doc)."""

    __slots__ = ("_clock", "_lines", "_window_s", "_windows")

    def __init__(self, clock: Clock, *, lines: int = LINES_PER_WINDOW, window_s: float = WINDOW_S) -> None:
        self._clock = clock
        self._lines = lines
        self._window_s = window_s
        self._windows: dict[tuple[FailureKind, Who], _Window] = {}

    def __repr__(self) -> str:
        open_ = {f"{k.name}/{w}": (v.written, v.suppressed) for (k, w), v in self._windows.items()}
        return f"FailureLog(lines={self._lines}, window_s={self._window_s:g}, open={open_})"

    def failed(self, failure: SidecarFailure, *, cause: BaseException | None = None, **context: object) -> None:
        """One failed call's line (``context``: its fields, e.g. ``model=`` or ``tool=``), unless its
        kind has written its lines for this window (then counted, and said at the window's end)."""
        who = who_acts(failure)
        key = (failure.kind, who)
        window = self._windows.get(key)
        if window is None:
            window = self._windows[key] = _Window(_level_of(failure, who))
            window.cancel = self._clock.call_at(
                self._clock.time() + self._window_s, lambda: self._close(key, f"in the last {self._window_s:g} s")
            )
        if window.written >= self._lines:
            window.suppressed += 1
            return
        window.written += 1
        extra = {"failure_kind": failure.kind_name, "correctable": failure.correctable, "who_acts": str(who)}
        extra.update(context)
        if failure.kind is FailureKind.SYSTEM:  # a bug: the stack is what the report needs
            exc = cause or failure
            _log.log(
                window.level,
                "%s: %s",
                failure.kind_name,
                failure.message,
                extra=extra,
                exc_info=(type(exc), exc, exc.__traceback__),
            )
        else:
            _log.log(window.level, "%s: %s", failure.kind_name, failure.message, extra=extra)

    def close(self) -> None:
        """Every window closed now (the sidecar is stopping): each count not yet said is said."""
        for key in list(self._windows):
            self._windows[key].cancel()
            self._close(key, "before stopping")

    def _close(self, key: tuple[FailureKind, Who], when: str) -> None:
        window = self._windows.pop(key, None)
        if window is None or not window.suppressed:
            return
        kind, who = key
        _log.log(
            window.level,
            "suppressed %d more %s %s %s (at most %d per %g s are written per kind)",
            window.suppressed,
            kind.name,
            _LEVEL_WORDS[window.level],
            when,
            self._lines,
            self._window_s,
            extra={"failure_kind": kind.name, "who_acts": str(who), "suppressed": window.suppressed},
        )


def log_classified(failure: SidecarFailure, **context: object) -> None:
    """A ClassifyFailure answer: INFO, no stack. Nothing failed in the sidecar (an agent asked what its
    own tool's failure was), and any caller can send reports: at ERROR with a stack each, forged
    reports flooded the log with one traceback per request."""
    extra = {"failure_kind": failure.kind_name, "correctable": failure.correctable, **context}
    _log.info("%s: %s", failure.kind_name, failure.message, extra=extra)
