"""The services a call runs on, swapped whole by a reload.

Every door (the gRPC servicer, the HTTP fronts, the MCP front) holds the one ``Live`` and reads
``live.core`` once, when a call starts: the call then runs on that ``Core`` to its end, under the
config it started with. A reload builds the next ``Core`` completely (its state carried over from
the one before), then replaces ``live.core`` in one assignment: no call ever sees half of each.
"""

from __future__ import annotations

from dataclasses import dataclass

from sidecar.config import Config
from sidecar.core.circuit import ServiceGuards
from sidecar.providers.service import ModelService
from sidecar.tools.reports import Reports
from sidecar.tools.service import ToolService

__all__ = ["Core", "Live"]


@dataclass(frozen=True, slots=True)
class Core:
    """One config's services."""

    config: Config
    tools: ToolService
    models: ModelService
    guards: ServiceGuards
    reports: Reports

    def in_flight(self) -> int:
        """The model and tool calls running on these services."""
        return len(self.models.calls) + len(self.tools.calls)

    async def drained(self) -> None:
        """Until no call runs on these services."""
        await self.models.calls.drained()
        await self.tools.calls.drained()

    async def aclose(self) -> None:
        await self.tools.aclose()
        await self.models.aclose()


class Live:
    """The core the next call runs on."""

    __slots__ = ("core",)

    def __init__(self, core: Core) -> None:
        self.core = core
