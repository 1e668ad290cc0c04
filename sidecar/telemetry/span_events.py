"""The span event of each event the core reports (``telemetry.observer`` adds it to the span current then)."""

from __future__ import annotations

from typing import Any

from sidecar.core.observer import (
    CircuitChanged,
    CircuitEvent,
    Correction,
    Event,
    ModelPaused,
    OutputBudgetRaised,
    ReportAccepted,
    StateBackendChanged,
    StreamContinued,
    StreamEventSkipped,
    StreamRestarted,
    Target,
    ThrottleChanged,
)
from sidecar.telemetry import names as n

__all__ = ["span_event", "target_attr"]

_CIRCUIT_EVENTS = {
    CircuitEvent.OPENED: n.EVENT_CIRCUIT_OPENED,
    CircuitEvent.REOPENED: n.EVENT_CIRCUIT_REOPENED,
    CircuitEvent.HALF_OPEN: n.EVENT_CIRCUIT_HALF_OPEN,
    CircuitEvent.CLOSED: n.EVENT_CIRCUIT_CLOSED,
    CircuitEvent.PROBE_LOST: n.EVENT_CIRCUIT_PROBE_LOST,
    CircuitEvent.REFUSED: n.EVENT_CIRCUIT_REFUSED,
}


def target_attr(target: Target) -> str:
    return n.MODEL_ID if target is Target.MODEL else n.SERVICE


def span_event(event: Event) -> tuple[str, dict[str, Any]]:
    """The span event of a core event: its name and attributes."""
    match event:
        case ThrottleChanged():
            name = n.EVENT_MODEL_THROTTLE if event.target is Target.MODEL else n.EVENT_SERVICE_THROTTLE
            return name, {target_attr(event.target): event.name, n.THROTTLE: event.throttle}
        case ModelPaused():
            paused: dict[str, Any] = {n.MODEL_ID: event.model, "sidecar.pause_s": event.seconds}
            if event.reason:
                paused["sidecar.reason"] = event.reason
            return n.EVENT_MODEL_PAUSED, paused
        case CircuitChanged():
            attrs: dict[str, Any] = {n.SERVICE: event.service}
            if event.reason:
                attrs["sidecar.reason"] = event.reason
            if event.cooldown_s is not None:
                attrs["sidecar.cooldown_s"] = event.cooldown_s
            if event.trigger is not None:
                attrs["sidecar.trigger"] = event.trigger
            if event.state:
                attrs["sidecar.state"] = event.state
            if event.remaining_s is not None:
                attrs["sidecar.remaining_s"] = event.remaining_s
            return _CIRCUIT_EVENTS[event.what], attrs
        case Correction():
            return n.EVENT_CORRECTION, {n.CORRECTION_REASON: event.reason, n.CORRECTIONS: event.number}
        case OutputBudgetRaised():
            return n.EVENT_OUTPUT_BUDGET_RAISED, {n.OUTPUT_BUDGET: event.budget}
        case StreamRestarted():
            attrs = {n.RESTART_REASON: event.reason, n.ATTEMPT: event.attempt}
            if event.cause:
                attrs[n.RESTART_CAUSE] = event.cause
            return n.EVENT_STREAM_RESTART, attrs
        case StreamContinued():
            attrs = {n.RESTART_REASON: event.reason, n.ATTEMPT: event.attempt, n.CONTINUED_CHARS: event.chars}
            if event.cause:
                attrs[n.RESTART_CAUSE] = event.cause
            return n.EVENT_STREAM_CONTINUED, attrs
        case StreamEventSkipped():
            return n.EVENT_STREAM_EVENT_SKIPPED, {"sidecar.reason": event.detail, n.ATTEMPT: event.attempt}
        case StateBackendChanged():
            name = n.EVENT_STATE_AVAILABLE if event.available else n.EVENT_STATE_UNAVAILABLE
            return name, {n.STATE_BACKEND: event.backend, "sidecar.reason": event.reason}
        case ReportAccepted():  # pragma: no cover - an attribute, set by event()
            pass
    raise TypeError(f"no span event for {type(event).__name__}")  # pragma: no cover - exhaustive above
