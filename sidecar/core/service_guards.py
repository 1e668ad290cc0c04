"""Every service's guard (a ``core.circuit.ServiceGuard``), kept for the calls and reports that name it.

Guards (``ServiceGuards``)::

    own services (in ``services:``, or a tool's)   one guard each, created on first use, kept
    reported (named only in ClassifyFailure)        at most MAX_REPORTED guards; a new one takes the place of
                                                    the least recently used that holds no circuit decision
                                                    (closed, or past its cooldown / probe timeout); when
                                                    none can go, a report about a new name feeds no guard
    a reload (``carry``)                            the new config's guards take over the old ones: a service
                                                    kept keeps its guard (throttle, circuit, probe, trigger),
                                                    its rate and circuit settings the new config's from then on;
                                                    a removed service's guard is left behind
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from sidecar.core.circuit import ServiceGuard
from sidecar.core.clock import Clock
from sidecar.core.observer import NULL_OBSERVER, Observer
from sidecar.core.settings import CircuitConfig, ServiceConfig
from sidecar.core.state import MEMORY, StateBackend

__all__ = ["MAX_REPORTED", "MAX_SERVICE_NAME_CHARS", "ServiceGuards"]

MAX_REPORTED = 1000
"""At most this many guards of services named only in ClassifyFailure reports (about 1.6 KiB each)."""
MAX_SERVICE_NAME_CHARS = 128
"""A longer service name in a ClassifyFailure request is INVALID_INPUT (and never kept)."""


class ServiceGuards:
    """Every service's guard, shared by all calls to that service (see the module docstring)."""

    __slots__ = ("_clock", "_config", "_default", "_guards", "_observer", "_own", "_pending", "_reported", "_state")

    def __init__(
        self,
        services: dict[str, ServiceConfig],
        default_circuit: CircuitConfig,
        clock: Clock,
        tool_services: Iterable[str] = (),
        *,
        observer: Observer = NULL_OBSERVER,
        state: StateBackend = MEMORY,
    ) -> None:
        self._config = services
        self._clock = clock
        self._observer = observer
        self._state = state
        self._own = frozenset(services) | frozenset(tool_services)
        self._guards: dict[str, ServiceGuard] = {}
        self._reported: OrderedDict[str, ServiceGuard] = OrderedDict()
        self._default = default_circuit
        self._pending: list[tuple[ServiceGuard, ServiceConfig, CircuitConfig]] = []
        """A reload's settings for the guards taken over, applied when this config serves (``settle``)."""

    def is_own(self, name: str) -> bool:
        """A service the sidecar configures or calls itself (not one only named in reports)."""
        return name in self._own or name in self._guards

    def get(self, name: str) -> ServiceGuard:
        """The guard of a service the sidecar calls itself: created on first use, never forgotten."""
        guard = self._guards.get(name)
        if guard is None:
            service = self._config.get(name) or ServiceConfig()
            circuit = service.circuit or self._default
            guard = ServiceGuard(name, service, circuit, self._clock, observer=self._observer, state=self._state)
            self._guards[name] = guard
        return guard

    def find(self, name: str, *, create: bool = True) -> ServiceGuard | None:
        """The guard a ClassifyFailure request about ``name`` reads or feeds.

        An own service's guard; else the reported one, created (when ``create``) in the place of
        the least recently used guard that holds no circuit decision; None when there is none.
        """
        if self.is_own(name):
            return self.get(name)
        guard = self._reported.get(name)
        if guard is not None:
            self._reported.move_to_end(name)
            return guard
        if not create or (len(self._reported) >= MAX_REPORTED and not self._forget_one()):
            return None
        guard = ServiceGuard(
            name, ServiceConfig(), self._default, self._clock, observer=self._observer, state=self._state
        )
        self._reported[name] = guard
        return guard

    def carry(self, old: ServiceGuards) -> list[str]:
        """A reload: take over ``old``'s guards (made for the config before this one).

        A service this config still has (in ``services:`` or a tool's) keeps its guard, with this
        config's settings (``ServiceGuard.reconfigure``) once it serves (``settle``: until then the
        guard serves the config before as it was, and a reload refused later leaves it untouched); a
        reported service's guard is kept while this config does not name it (named now: it becomes the
        service's own guard). A service the config dropped loses its guard. The names whose guard was
        kept, in ``old``'s order.
        """
        kept: list[str] = []
        for name, guard in [*old._guards.items(), *old._reported.items()]:
            if name in self._own:
                service = self._config.get(name) or ServiceConfig()
                self._pending.append((guard, service, service.circuit or self._default))
                self._guards[name] = guard
            elif name in old._reported:
                self._reported[name] = guard
            else:
                continue
            kept.append(name)
        return kept

    def settle(self) -> None:
        """This config serves from now on: the guards taken over get its settings (``carry``)."""
        pending, self._pending = self._pending, []
        for guard, service, circuit in pending:
            guard.reconfigure(service, circuit)

    def peek(self, name: str) -> ServiceGuard | None:
        """The guard of ``name`` if there is one, created for nothing and used for nothing."""
        return self._guards.get(name) or self._reported.get(name)

    def _forget_one(self) -> bool:
        for name, guard in self._reported.items():  # least recently used first
            if not guard.holds_decision():
                del self._reported[name]
                return True
        return False

    @property
    def reported(self) -> int:
        """How many guards of reported services are kept."""
        return len(self._reported)

    def all(self) -> list[ServiceGuard]:
        return [*self._guards.values(), *self._reported.values()]
