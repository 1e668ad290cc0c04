"""The services a call runs on, swapped whole by a reload.

Every door (the gRPC servicer, the HTTP fronts, the MCP front, the admin view) holds the one
``Live`` and reads ``live.core`` once, when a call starts: the call then runs on that ``Core`` to
its end, under the config it started with. A reload builds the next ``Core`` completely
(``build_core``, its state carried over from the one before), then replaces ``live.core`` in one
assignment (``Live.swap``): no call ever sees half of each.

    kept across cores     the spend ledger (the same object, its caps replaced at the swap), the admission limit,
                          the state backend, the metrics; a kept model's throttle, a kept service's or
                          route deployment's guard, the record of tool calls, the failure logs (``carry=``
                          of each service)
    new with each core    the config, the provider and tool clients, MCP sessions, the observer (its
                          secrets: every one any config named), ClassifyFailure's reports
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from sidecar.config import Config
from sidecar.core.clock import Clock
from sidecar.core.observer import Observer
from sidecar.core.service_guards import ServiceGuards
from sidecar.core.spend import SpendLedger
from sidecar.core.state import StateBackend
from sidecar.providers.service import ModelService
from sidecar.tools.reports import Reports
from sidecar.tools.service import ToolService

__all__ = ["Core", "Live", "build_core"]


@dataclass(frozen=True, slots=True)
class Core:
    """One config's services."""

    config: Config
    tools: ToolService
    models: ModelService
    guards: ServiceGuards
    reports: Reports
    ledger: SpendLedger
    observer: Observer

    def in_flight(self) -> int:
        """The model and tool calls running on these services."""
        return len(self.models.calls) + len(self.tools.calls)

    async def drained(self) -> None:
        """Until no call runs on these services."""
        await self.models.calls.drained()
        await self.tools.calls.drained()

    def settle(self) -> None:
        """These services serve from now on (``Live.swap``, in the same step): what a reload staged on the
        objects handed over is applied now, never while the core before still serves alone (kept guards'
        settings, the ledger's caps, the record of tool calls)."""
        self.guards.settle()
        self.models.routes.guards.settle()
        self.ledger.recap(dict(self.config.policy.spend_caps))
        self.tools.settle()

    def close_logs(self) -> None:
        """The failure logs' counts not yet written are written (the sidecar is stopping; a reload hands
        the logs on to the next core instead)."""
        self.tools.failures.close()
        self.models.failures.close()

    async def aclose(self) -> None:
        await self.tools.aclose()
        await self.models.aclose()


async def build_core(
    config: Config,
    *,
    clock: Clock,
    observer: Observer,
    state: StateBackend,
    embedded: dict[str, str],
    rng: random.Random,
    carry: Core | None = None,
) -> Core:
    """Every service of ``config``, started (MCP servers opened and listed); from ``carry`` (the core
    before, on a reload) its state. Nothing of ``carry`` changes: what the new core changes on the
    objects handed over (guards' settings, the ledger's caps, the record of tool calls) is staged and
    applied by ``Core.settle`` when it serves, so a build that fails part way leaves the old core whole."""
    tool_services = {t.service for t in config.tools.values()}
    guards = ServiceGuards(config.services, config.policy.circuit, clock, tool_services, observer=observer, state=state)
    tools = ToolService(
        config,
        clock,
        guards,
        observer,
        embedded=embedded,
        rng=rng,
        state=state,
        carry=carry.tools if carry is not None else None,
    )
    try:
        await tools.start()  # MCP servers opened and listed: ListTools and the MCP front list their tools
    except BaseException:
        await tools.aclose()
        raise
    if carry is not None:
        guards.carry(carry.guards)
        ledger = carry.ledger  # its caps replaced at Core.settle
    else:
        ledger = SpendLedger(dict(config.policy.spend_caps), state=state)
    models = ModelService(
        config,
        clock,
        ledger,
        observer,
        embedded=embedded,
        rng=rng,
        state=state,
        carry=carry.models if carry is not None else None,
    )
    for model_id in config.models:
        models.throttle(model_id).share(state)
    reports = Reports(config, clock, guards, observer)
    return Core(config, tools, models, guards, reports, ledger, observer)


class Live:
    """The core the next call runs on, and every secret any core's config named (masked everywhere)."""

    __slots__ = ("core", "secrets", "swaps")

    def __init__(self, core: Core) -> None:
        self.core = core
        self.secrets: tuple[str, ...] = core.config.secrets
        self.swaps = 0
        """How many reloads were applied: what an answer was judged under (``http.resends`` keeps no
        failure past the config it was answered by)."""

    def swap(self, core: Core) -> Core:
        """``core`` serves the next call; the one before (its calls still finishing on it, on the guards
        and ledger they share, which take ``core``'s settings now: ``Core.settle``)."""
        core.settle()
        old, self.core = self.core, core
        self.swaps += 1
        self.secrets = tuple(sorted({*self.secrets, *core.config.secrets}, key=lambda s: (-len(s), s)))
        return old
