"""``Config``: the whole file, its sections composed, checked across them, its secrets found once."""

from __future__ import annotations

from typing import Any

from pydantic import PrivateAttr, ValidationInfo, model_validator

from sidecar.config.catalog import ModelConfig, ProviderConfig, RouteEntry
from sidecar.config.checks import check_references, check_routes
from sidecar.config.secrets import FROM_ENVIRONMENT, discover
from sidecar.config.sections import HttpConfig, PolicyConfig, ServerConfig, StateConfig, TelemetryConfig
from sidecar.config.tools import AnyToolConfig, McpServerConfig, McpToolConfig, ToolConfig
from sidecar.core.settings import ServiceConfig, Strict

__all__ = ["Config"]


class Config(Strict):
    server: ServerConfig = ServerConfig()
    http: HttpConfig | None = None
    policy: PolicyConfig = PolicyConfig()
    providers: dict[str, ProviderConfig] = {}
    models: dict[str, ModelConfig] = {}
    """The deployments: every catalog model that is not a route."""
    routes: dict[str, RouteEntry] = {}
    """The routes, written as ``models:`` entries (``{id: {route: ...}}``) and moved here on loading."""
    services: dict[str, ServiceConfig] = {}
    mcp_servers: dict[str, McpServerConfig] = {}
    tools: dict[str, AnyToolConfig] = {}
    telemetry: TelemetryConfig = TelemetryConfig()
    state: StateConfig = StateConfig()

    _secrets: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="before")
    @classmethod
    def _split_routes(cls, data: Any) -> Any:
        """A ``models:`` entry holding ``route`` is a route: it moves to ``routes``."""
        if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
            return data
        models = data["models"]
        moved = {k: v for k, v in models.items() if isinstance(v, dict) and "route" in v}
        if not moved:
            return data
        routes = data.get("routes")
        routes = {**routes, **moved} if isinstance(routes, dict) else moved
        return {**data, "models": {k: v for k, v in models.items() if k not in moved}, "routes": routes}

    @model_validator(mode="after")
    def _route_references(self) -> Config:
        check_routes(self)
        return self

    @model_validator(mode="after")
    def _references(self) -> Config:
        self.tools.update(check_references(self))
        return self

    @model_validator(mode="after")
    def _find_secrets(self, info: ValidationInfo) -> Config:
        """Last, once the file is valid: what is masked, found once (``secrets.discover``).

        The values ``${NAME}`` read from the environment come in the validation context
        (``parse_config`` passes them; a config validated without it has only its own).
        """
        context = info.context if isinstance(info.context, dict) else {}
        self._secrets = discover(self, context.get(FROM_ENVIRONMENT, ()))
        return self

    @property
    def secrets(self) -> tuple[str, ...]:
        """What is masked wherever text leaves the sidecar, longest first: found once, at load
        (``sidecar.config.secrets.discover`` says what counts)."""
        return self._secrets

    @property
    def catalog(self) -> list[str]:
        """Every model id a call may name: the deployments and the routes, sorted."""
        return sorted([*self.models, *self.routes])

    @property
    def http_tools(self) -> dict[str, ToolConfig]:
        """The tools the sidecar calls over HTTP itself (``kind: search`` or ``fetch``)."""
        return {k: t for k, t in self.tools.items() if isinstance(t, ToolConfig)}

    @property
    def mcp_tools(self) -> dict[str, McpToolConfig]:
        """The tools of MCP servers (``kind: mcp``), each with its service resolved."""
        return {k: t for k, t in self.tools.items() if isinstance(t, McpToolConfig)}

    def service(self, name: str) -> ServiceConfig:
        return self.services.get(name) or ServiceConfig()

    def model_retries(self, model_id: str, override: int | None = None) -> int:
        """A model call's upstream retry budget: the caller's override, the model's own, the policy's."""
        if override is not None:
            return override
        model = self.models.get(model_id)
        if model is not None and model.upstream_retries is not None:
            return model.upstream_retries
        return self.policy.upstream_retries

    def tool_retries(self, override: int | None = None) -> int:
        """A tool call's retry budget: the caller's override, else the policy's."""
        return self.policy.tool_retries if override is None else override

    @property
    def embedded(self) -> set[str]:
        urls = [p.base_url for p in self.providers.values()] + [t.url for t in self.http_tools.values()]
        return {u.split("://", 1)[1].split("/", 1)[0] for u in urls if u.startswith("embedded://")}
