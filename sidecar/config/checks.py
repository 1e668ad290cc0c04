"""The checks across sections: what one entry names must exist elsewhere, and fit it.

A route's deployments are catalog models and share one circuit; a model's provider is configured;
a tool's URL placeholders are its parameters (and never its scheme, host or port); an MCP tool's
server is configured; more than one worker needs the shared state and a host:port address.
Each raises ``ValueError`` at the first problem, as a validator does.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from sidecar.config.tools import McpServerConfig, McpToolConfig

if TYPE_CHECKING:
    from sidecar.config.document import Config
    from sidecar.core.settings import CircuitConfig

__all__ = ["check_references", "check_routes", "workers_refusal"]

_ORIGIN = re.compile(r"^[^:/?#]*://[^/?#]*")
"""A URL's scheme and authority (host, port, credentials): what a tool's arguments may never fill."""


def workers_refusal(workers: int | Literal["auto"], listen: str, backend: str) -> str | None:
    """Why these workers cannot serve this address with this state backend, or None."""
    if workers == 1:
        return None
    count = "auto (one per core)" if workers == "auto" else str(workers)
    if backend == "memory":
        return (
            f"server.workers: {count} processes would each keep their own throttles, circuits and spend; "
            "set state.backend: redis (with state.url) so that they share them, or server.workers: 1"
        )
    if listen.startswith("unix:"):
        return (
            f"server.workers: {count} processes cannot share the unix socket {listen} (SO_REUSEPORT "
            "is for TCP ports; a second bind would replace the socket file): listen on host:port, or server.workers: 1"
        )
    return None


def check_routes(config: Config) -> None:
    """A route's id is no deployment's; it names catalog models (never a route), each with one circuit."""
    circuits: dict[str, tuple[str, CircuitConfig]] = {}
    for route_id, entry in config.routes.items():
        if route_id in config.models:
            raise ValueError(f"models.{route_id}: both a deployment and a route")
        for deployment, key in entry.route.named():
            where = f"models.{route_id}.route.{key}"
            if deployment in config.routes:
                raise ValueError(f"{where}: {deployment!r} is a route; a route's deployments are catalog models")
            if deployment not in config.models:
                known = ", ".join(config.models) or "none"
                raise ValueError(f"{where}: {deployment!r} is not a catalog model (deployments: {known})")
            circuit = entry.route.deployment_circuit
            first = circuits.setdefault(deployment, (route_id, circuit))
            if first[1] != circuit:
                raise ValueError(
                    f"models.{route_id}.route.circuit: {deployment} has one circuit, but route {first[0]} "
                    "gives it another; give both routes the same circuit"
                )


def check_references(config: Config) -> dict[str, McpToolConfig]:
    """The workers, the models' providers, the tools' names and URLs, the MCP tools' servers.

    Returns the MCP tools with their service resolved (their own, else their server's, else the
    server's name), for the config to hold in their place.
    """
    refusal = workers_refusal(config.server.workers, config.server.listen, config.state.backend)
    if refusal is not None:
        raise ValueError(refusal)
    for model_id, model in config.models.items():
        if model.provider not in config.providers:
            known = ", ".join(config.providers) or "none"
            raise ValueError(
                f"models.{model_id}.provider: {model.provider!r} is not a configured provider (known: {known})"
            )
        read = config.providers[model.provider].timeout_s
        if model.header_timeout_s is not None and model.header_timeout_s > read:
            raise ValueError(
                f"models.{model_id}.header_timeout_s: {model.header_timeout_s:g} exceeds its provider's timeout_s "
                f"({read:g}), which bounds the wait for the response head as well"
            )
        summarizer = model.compaction.summarizer
        if summarizer is not None and summarizer not in config.models:
            known = ", ".join(config.models)
            raise ValueError(
                f"models.{model_id}.compaction.summarizer: {summarizer!r} is not a catalog model (known: {known})"
            )
    resolved: dict[str, McpToolConfig] = {}
    for name, tool in config.tools.items():
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
            raise ValueError(f"tools.{name}: a tool name must be 1-64 letters, digits, '_' or '-'")
        if isinstance(tool, McpToolConfig):
            resolved[name] = _mcp_tool(name, tool, config.mcp_servers)
            continue
        props = tool.parameters.get("properties", {})
        for placeholder in re.findall(r"\{([^}]+)\}", tool.url):
            if placeholder not in props:
                raise ValueError(
                    f"tools.{name}.url: placeholder {{{placeholder}}} is not a parameter "
                    f"(parameters: {', '.join(props) or 'none'})"
                )
        origin = _ORIGIN.match(tool.url)
        if origin is not None and "{" in origin.group(0):
            raise ValueError(
                f"tools.{name}.url: a placeholder in the scheme, host or port would let the model's "
                "arguments choose where the request goes; placeholders belong in the path or the query"
            )
    return resolved


def _mcp_tool(name: str, tool: McpToolConfig, servers: dict[str, McpServerConfig]) -> McpToolConfig:
    """``tool`` with its service resolved (its own, else its server's, else the server's name)."""
    server = servers.get(tool.server)
    if server is None:
        known = ", ".join(servers) or "none"
        raise ValueError(f"tools.{name}.server: {tool.server!r} is not a configured MCP server (known: {known})")
    return tool if tool.service else tool.model_copy(update={"service": server.service or tool.server})
