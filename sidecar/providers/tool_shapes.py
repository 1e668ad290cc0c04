"""A tool definition in each provider's wire shape: the one place it is rendered.

    openai      {"type": "function", "function": {"name", "description", "parameters"}}
    anthropic   {"name", "description", "input_schema"}

Both the request bodies sent upstream and ListTools' ready-to-use JSON come from here.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["EMPTY_PARAMETERS", "Wire", "render_tool"]

Wire = Literal["openai", "anthropic"]
EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}
"""The parameters of a tool that declares none."""


def render_tool(wire: Wire, name: str, description: str, parameters: dict[str, Any] | None) -> dict[str, Any]:
    schema = parameters if parameters is not None else EMPTY_PARAMETERS
    if wire == "anthropic":
        return {"name": name, "description": description, "input_schema": schema}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}
