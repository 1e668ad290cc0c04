"""The policy settings the core reads: wait windows, the per-service throttle and circuit, quirks.

They are pydantic models (validated, frozen, finite numbers only) so that ``sidecar.config``
composes them into the configuration file's schema; the core reads them and never imports the
configuration itself.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "MAX_COOLDOWN_S",
    "MAX_SERVICE_RATE",
    "MAX_THROTTLE_STEP",
    "MAX_WAIT_S",
    "MIN_PERIOD_S",
    "PRESETS",
    "CircuitConfig",
    "Quirk",
    "QuirkKind",
    "ServiceConfig",
    "Strict",
    "Window",
    "Windows",
]

MAX_WAIT_S = 3600.0
"""No configured wait, window or timeout may be longer than an hour."""
MAX_COOLDOWN_S = 86_400.0
"""A circuit's cooldown (and its probe timeout) is at most a day."""
MIN_PERIOD_S = 0.001
"""The shortest configured period or cooldown: a millisecond."""
MAX_SERVICE_RATE = 1_000_000.0
"""A service's ``rate`` (requests per ``per_s``) is at most this."""
MAX_THROTTLE_STEP = 100.0
"""A circuit's ``failure_step`` and ``max_throttle`` are at most this (the window stretches to 1 + throttle)."""


class Strict(BaseModel):
    """Unknown keys are refused; numbers must be finite; values are frozen once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Window(Strict):
    """A wait window in seconds; the wait is uniform in [min_s, max_s) times the attempt factor."""

    min_s: Annotated[float, Field(ge=0, le=MAX_WAIT_S)]
    max_s: Annotated[float, Field(ge=0, le=MAX_WAIT_S)]

    @model_validator(mode="before")
    @classmethod
    def _pair(cls, v: Any) -> Any:
        if isinstance(v, list | tuple) and len(v) == 2:
            return {"min_s": v[0], "max_s": v[1]}
        return v

    @model_validator(mode="after")
    def _order(self) -> Window:
        if self.max_s < self.min_s:
            raise ValueError(f"max_s ({self.max_s}) must not be below min_s ({self.min_s})")
        return self


class Windows(Strict):
    """The wait windows of the three upstream signals. See docs/retries.md for choosing them."""

    rate_limit: Window = Window(min_s=5, max_s=30)
    overload: Window = Window(min_s=15, max_s=90)
    transient: Window = Window(min_s=5, max_s=30)
    factor_cap: Annotated[int, Field(ge=1, le=100)] = 10
    """The window is multiplied by min(attempt, factor_cap)."""
    max_wait_s: Annotated[float, Field(ge=0, le=MAX_WAIT_S)] = 300.0
    """No single wait is longer than this."""


PRESETS: dict[str, Windows] = {
    # An unattended pipeline: the defaults, waiting minutes rather than failing.
    "batch": Windows(),
    # A person is waiting: short windows, a short cap; failing fast beats a minute of silence.
    "interactive": Windows(
        rate_limit=Window(min_s=0.5, max_s=3),
        overload=Window(min_s=1, max_s=6),
        transient=Window(min_s=0.25, max_s=2),
        factor_cap=4,
        max_wait_s=15,
    ),
}


class CircuitConfig(Strict):
    """The per-service throttle and circuit (tools). Defaults are the runtime's numbers."""

    failure_step: Annotated[float, Field(gt=0, le=MAX_THROTTLE_STEP)] = 1.0
    max_throttle: Annotated[float, Field(gt=0, le=MAX_THROTTLE_STEP)] = 9.0
    failures_to_open: Annotated[int, Field(ge=1)] = 3
    cooldown_s: Annotated[float, Field(ge=MIN_PERIOD_S, le=MAX_COOLDOWN_S)] = 30.0
    max_cooldown_s: Annotated[float, Field(ge=MIN_PERIOD_S, le=MAX_COOLDOWN_S)] = 3600.0
    probe_timeout_s: Annotated[float, Field(ge=MIN_PERIOD_S, le=MAX_COOLDOWN_S)] = 60.0
    """A probe with no verdict after this long is lost: the circuit reopens, cooldown unchanged."""

    @model_validator(mode="after")
    def _cooldowns(self) -> CircuitConfig:
        if self.max_cooldown_s < self.cooldown_s:
            raise ValueError(f"max_cooldown_s ({self.max_cooldown_s}) must not be below cooldown_s ({self.cooldown_s})")
        return self


QuirkKind = Literal[
    "INVALID_INPUT", "RESOURCE_NOT_FOUND", "EXTERNAL_SERVICE", "UPSTREAM_THROTTLE", "UNAUTHORIZED", "PERMISSION_DENIED"
]


class Quirk(Strict):
    """A service's quirk, mapped onto an existing kind (never a new kind for one service)."""

    status: Annotated[int, Field(ge=100, le=599)] | None = None
    body_contains: str | None = None
    header: str | None = None
    """Matches when this response header is present."""
    kind: QuirkKind
    detail: str | None = None
    """What the message says the service meant, e.g. "robot detection"."""

    @model_validator(mode="after")
    def _something(self) -> Quirk:
        if self.status is None and self.body_contains is None and self.header is None:
            raise ValueError("a quirk must match on at least one of status, body_contains, header")
        return self


class ServiceConfig(Strict):
    rate: Annotated[float, Field(ge=1, le=MAX_SERVICE_RATE)] = 100.0
    """Base rate: at most ``rate`` requests per ``per_s`` seconds (a leaky bucket, sidecar/core/pacer.py).

    The bucket holds ``rate`` requests, so it is at least 1: a slower pace is a longer ``per_s``
    (``rate: 1, per_s: 60`` is one a minute)."""
    per_s: Annotated[float, Field(ge=MIN_PERIOD_S, le=MAX_COOLDOWN_S)] = 1.0
    quirks: list[Quirk] = []
    circuit: CircuitConfig | None = None
    accept_reports: bool = False
    """Whether ClassifyFailure reports about this service feed its throttle and circuit (and its
    pre-checks may take the half-open probe). Off: a report is classified and answered, and
    charges nothing. See docs/trust.md."""
