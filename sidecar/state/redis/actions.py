"""An operator's action (lift-pause, reset-spend, close-circuit, or a probe's close) as it goes to Redis."""

from __future__ import annotations

from dataclasses import dataclass

from sidecar.core.state import CircuitClosed, PauseLifted, SpendReset

__all__ = ["Action", "describe"]


@dataclass(frozen=True, slots=True)
class Action:
    """An operator's action (or a probe's close) as it goes to Redis: the change, when it was made on
    this replica's monotonic clock (sent as its age: Redis's TIME less it is the action's instant, and
    it undoes only what is older), and for a reset what is taken off the fleet's total."""

    change: PauseLifted | SpendReset | CircuitClosed
    made: float
    forgiven: float = 0.0

    @property
    def target(self) -> tuple[str, str]:
        match self.change:
            case PauseLifted(model):
                return ("mlift", model)
            case SpendReset(workflow):
                return ("sreset", workflow)
            case CircuitClosed(service):
                return ("closed", service)


def describe(action: Action) -> str:
    """An action as the operator typed it: ``lift-pause gpt``."""
    match action.change:
        case PauseLifted(model):
            return f"lift-pause {model}"
        case SpendReset(workflow):
            return f"reset-spend {workflow} ({action.forgiven:.6f} USD)"
        case CircuitClosed(service):
            return f"close-circuit {service}"
