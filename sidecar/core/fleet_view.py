"""One replica's local view of the fleet's policy state: where a backend's changes land.

    change           goes to
    ModelRaised      the model's throttle (raised_elsewhere); a model this replica does not serve: nothing
    ModelPause       the model's throttle (paused_elsewhere)
    ServiceRaised    the service's guard (an own service's, or a reported one's, made within MAX_REPORTED);
                     a name in DEPLOYMENT_NAMESPACE: that route deployment's guard (the same for the next three)
    CircuitOpened    the service's guard (opened_elsewhere)
    ProbeTaken       the service's guard, if it has one (probe_elsewhere)
    CircuitClosed    the service's guard, if it has one (closed_elsewhere)
    SpendTotal       the ledger (total_elsewhere)
    Replicas         every model throttle (split: the configured rates are the fleet's)
    PauseLifted      the model's throttle (lifted_elsewhere): an operator's lift-pause, fleet-wide
    SpendReset       the ledger (reset_elsewhere): an operator's reset-spend, fleet-wide
    SpendAdded       nothing: only a backend adds it up

``snapshot`` is the reverse: what this replica holds, as changes a reconnecting backend pushes
again (raises, pauses with the seconds left and their age, open circuits with theirs, spend
totals), all merged by max on the other side, so pushing twice is harmless. A lift or a close
carries its age: it undoes a pause or an opening that began before it, never a newer one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from sidecar.core.circuit import ServiceGuard
from sidecar.core.model_throttle import ModelThrottle
from sidecar.core.service_guards import ServiceGuards
from sidecar.core.spend import SpendLedger
from sidecar.core.state import (
    DEPLOYMENT_NAMESPACE,
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

__all__ = ["FleetView"]


class FleetView:
    """The throttles, guards and ledger of one replica, fed by its state backend."""

    __slots__ = ("_deployments", "_guards", "_ledger", "_models", "replicas")

    def __init__(
        self,
        models: Mapping[str, ModelThrottle],
        guards: ServiceGuards,
        ledger: SpendLedger,
        deployments: ServiceGuards | None = None,
    ) -> None:
        self._models = models
        self._guards = guards
        self._ledger = ledger
        self._deployments = deployments
        self.replicas = 1

    def rebind(
        self, models: Mapping[str, ModelThrottle], guards: ServiceGuards, deployments: ServiceGuards | None = None
    ) -> None:
        """A reload's new throttles and guards (the ledger is the same): changes land there from now
        on; each throttle paced for the replicas known."""
        self._models, self._guards, self._deployments = models, guards, deployments
        if self.replicas != 1:
            for t in models.values():
                t.split(self.replicas)

    def _guard(self, service: str, *, create: bool) -> ServiceGuard | None:
        """The guard a change about ``service`` is for: a route deployment's (namespaced), or a service's."""
        if service.startswith(DEPLOYMENT_NAMESPACE):
            if self._deployments is None:
                return None
            name = service[len(DEPLOYMENT_NAMESPACE) :]
            return self._deployments.find(name) if create else self._deployments.peek(name)
        return self._guards.find(service) if create else self._guards.peek(service)

    def apply(self, change: Change) -> None:
        match change:
            case ModelRaised(model, throttle, step):
                if (t := self._models.get(model)) is not None:
                    t.raised_elsewhere(throttle, step)
            case ModelPause(model, seconds, age_s):
                if (t := self._models.get(model)) is not None:
                    t.paused_elsewhere(seconds, age_s)
            case ServiceRaised(service, throttle):
                if (g := self._guard(service, create=True)) is not None:
                    g.raised_elsewhere(throttle)
            case CircuitOpened():
                if (g := self._guard(change.service, create=True)) is not None:
                    g.opened_elsewhere(change)
            case ProbeTaken(service, seconds):
                if (g := self._guard(service, create=False)) is not None:
                    g.probe_elsewhere(seconds)
            case CircuitClosed(service, age_s):
                if (g := self._guard(service, create=False)) is not None:
                    g.closed_elsewhere(age_s)
            case SpendTotal(workflow, usd):
                self._ledger.total_elsewhere(workflow, usd)
            case Replicas(count):
                if count != self.replicas:
                    self.replicas = count
                    for t in self._models.values():
                        t.split(count)
            case PauseLifted(model, age_s):
                if (t := self._models.get(model)) is not None:
                    t.lifted_elsewhere(age_s)
            case SpendReset(workflow):
                self._ledger.reset_elsewhere(workflow)
            case SpendAdded():
                pass

    def snapshot(self) -> list[Change]:
        out: list[Change] = []
        for model, t in self._models.items():
            if t.throttle > 0:
                out.append(ModelRaised(model, t.throttle, 0.0))
            if (left := t.pause_left()) > 0:
                out.append(ModelPause(model, left, t.pause_age()))
        for guard in self._guards.all():
            out.extend(guard.shared_state())
        for guard in self._deployments.all() if self._deployments is not None else []:
            out.extend(_namespaced(change) for change in guard.shared_state())
        out.extend(self._ledger.shared_state())
        return out


def _namespaced(change: Change) -> Change:
    if isinstance(change, ServiceRaised | CircuitOpened | ProbeTaken | CircuitClosed):
        return replace(change, service=DEPLOYMENT_NAMESPACE + change.service)
    return change
