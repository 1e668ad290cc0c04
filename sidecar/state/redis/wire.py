"""The fleet's changes as Redis carries them: the JSON published on the channel (``encode``, ``decode``)
and a key of the prefix read back on re-sync (``read_key``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sidecar.core.details import Trigger
from sidecar.core.state import (
    Change,
    CircuitClosed,
    CircuitOpened,
    ModelPause,
    ModelRaised,
    PauseLifted,
    ProbeTaken,
    Replicas,
    ServiceRaised,
    SpendAdded,
    SpendReset,
    SpendTotal,
)

__all__ = ["decode", "encode", "read_key"]


def _trigger(data: Any) -> Trigger | None:
    if not isinstance(data, dict):
        return None
    status = data.get("status")
    raw = data.get("retry_after")
    return Trigger(
        status if isinstance(status, int) else None, str(data.get("detail", "")), raw if isinstance(raw, str) else None
    )


def _since(value: Any) -> datetime:
    try:
        return datetime.fromtimestamp(float(value), UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        return datetime.now(UTC)


def _age(data: dict[str, Any]) -> float:
    """A change's age in seconds, as published (0: an older replica's change, or none given)."""
    try:
        return max(float(data.get("age", 0.0)), 0.0)
    except (TypeError, ValueError):
        return 0.0


def encode(change: Change, origin: str) -> dict[str, Any]:
    """A change as the JSON object published on the channel."""
    out: dict[str, Any] = {"o": origin}
    match change:
        case ModelRaised(model, throttle, step):
            out.update(k="mraise", n=model, v=throttle, step=step)
        case ModelPause(model, seconds, age):
            out.update(k="mpause", n=model, s=seconds, age=age)
        case ServiceRaised(service, throttle):
            out.update(k="sraise", n=service, v=throttle)
        case CircuitOpened():
            t = change.trigger
            out.update(
                k="open",
                n=change.service,
                s=change.seconds,
                cooldown=change.cooldown_s,
                since=change.since.timestamp(),
                reason=change.reason,
                probe=change.probe_timeout_s,
                age=change.age_s,
                trigger=None
                if t is None
                else {"status": t.status_code, "detail": t.detail, "retry_after": t.retry_after_raw},
            )
        case ProbeTaken(service, seconds):
            out.update(k="probe", n=service, s=seconds)
        case CircuitClosed(service, age):
            out.update(k="closed", n=service, age=age)
        case SpendAdded(workflow, usd) | SpendTotal(workflow, usd):
            out.update(k="spend", n=workflow, usd=usd)
        case Replicas(count):
            out.update(k="replicas", v=count)
        case PauseLifted(model, age):
            out.update(k="mlift", n=model, age=age)
        case SpendReset(workflow):
            out.update(k="sreset", n=workflow)
    return out


def decode(data: Any) -> Change | None:
    """The change a published JSON object describes (None: not one this version knows)."""
    if not isinstance(data, dict) or not isinstance(data.get("n"), str):
        return None
    name: str = data["n"]
    try:
        match data.get("k"):
            case "mraise":
                return ModelRaised(name, float(data["v"]), float(data.get("step", 0.0)))
            case "mpause":
                return ModelPause(name, float(data["s"]), _age(data))
            case "sraise":
                return ServiceRaised(name, float(data["v"]))
            case "open":
                return CircuitOpened(
                    name,
                    float(data["s"]),
                    float(data["cooldown"]),
                    _trigger(data.get("trigger")),
                    _since(data.get("since")),
                    str(data.get("reason", "")),
                    float(data.get("probe", 60.0)),
                    _age(data),
                )
            case "probe":
                return ProbeTaken(name, float(data["s"]))
            case "closed":
                return CircuitClosed(name, _age(data))
            case "spend":
                return SpendTotal(name, float(data["usd"]))
            case "mlift":
                return PauseLifted(name, _age(data))
            case "sreset":
                return SpendReset(name)
    except (KeyError, TypeError, ValueError):
        return None
    return None


def read_key(kind: str, name: str, value: bytes, left: float, now_ms: int) -> Change | None:
    """A key read back (``now_ms``: Redis's TIME, against which its instants become ages)."""

    def age(stamp: Any) -> float:
        try:
            return max(now_ms - float(stamp), 0.0) / 1000
        except (TypeError, ValueError):
            return 0.0

    try:
        match kind:
            case "mthrottle":
                return ModelRaised(name, float(value), 0.0)
            case "mpause":
                return ModelPause(name, left, age(value)) if left > 0 else None
            case "sthrottle":
                return ServiceRaised(name, float(value))
            case "open":
                data = json.loads(value)
                probe = float(data.get("probe", 60.0))
                s = max(left - probe, 0.0)
                return decode({**data, "n": name, "k": "open", "s": s, "age": age(data.get("at", 0))})
            case "closed":
                return CircuitClosed(name, age(value))
            case "probe":
                return ProbeTaken(name, left) if left > 0 else None
            case "spend":
                return SpendTotal(name, float(value))
            case "mlift":
                return PauseLifted(name, age(value))
            case "sreset":
                return SpendReset(name)
    except (TypeError, ValueError):
        return None
    return None
