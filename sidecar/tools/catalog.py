"""The tool catalog: every configured tool as one entry, whatever calls it, for every door to list.

    kind      where its definition comes from                  ListTools' kind   MCP front
    search    the config (description, parameters)             SEARCH            a tool
    fetch     the config                                       FETCH             a tool
    mcp       its MCP server's ``tools/list`` at start (the    UNSPECIFIED       a tool
              config may override the description)

ListTools (``server.convert.tool_list``) and the MCP front (``tools/list``) both list
``ToolService.catalog()``: the same names, descriptions and JSON schemas, in the config's order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ToolEntry"]


@dataclass(frozen=True, slots=True)
class ToolEntry:
    """One tool as a model is shown it, and what the sidecar knows of how it is called."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    """The JSON schema (``"type": "object"``) its arguments are checked against."""
    kind: str
    """``search``, ``fetch`` (an HTTP tool) or ``mcp`` (a tool of an MCP server)."""
    service: str
    """The service whose throttle and circuit it shares."""
    idempotent: bool
    """Whether a transient failure may be re-sent."""
