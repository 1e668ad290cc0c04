"""The doors of the HTTP port, built from the same core services as the gRPC port's servicer.

    door          path     config          serves
    MCP front     /mcp     http.mcp        the configured tools as an MCP server (mcp_front.py)

A new door (an OpenAI- or Anthropic-compatible front) is one more entry of ``build_doors``: its
routes and lifespan (``hosting.Door``), built from ``DoorParts``, calling ``ModelService`` /
``ToolService`` like every other door.
"""

from __future__ import annotations

from dataclasses import dataclass

from sidecar.config import Config
from sidecar.core.clock import Clock
from sidecar.providers.service import ModelService
from sidecar.server.admission import Admission
from sidecar.server.http.hosting import Door
from sidecar.server.http.mcp_front import mcp_door
from sidecar.tools.service import ToolService

__all__ = ["DoorParts", "build_doors"]


@dataclass(frozen=True, slots=True)
class DoorParts:
    """What a door is built from: the sidecar's one core, shared with the gRPC port."""

    config: Config
    clock: Clock
    tools: ToolService
    models: ModelService
    admission: Admission
    """``server.max_in_flight``: one limit for the calls of every door."""


def build_doors(parts: DoorParts) -> list[Door]:
    """The doors ``parts.config.http`` asks for (nothing when the HTTP port is off)."""
    http = parts.config.http
    if http is None:
        return []
    doors: list[Door] = []
    if http.mcp:
        secrets = parts.config.secrets()
        doors.append(mcp_door(parts.tools, parts.admission, secrets, parts.config.server.max_message_bytes))
    return doors
