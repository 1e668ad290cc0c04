"""The configuration: one YAML file, validated at start, secrets only from the environment.

Sections: ``server``, ``http``, ``policy``, ``providers``, ``models``, ``services``, ``mcp_servers``,
``tools``, ``telemetry``, ``state`` (where throttles, pauses, circuits and spend are kept: this
process, or a Redis shared by the fleet; docs/fleet.md).
A ``models`` entry is a deployment (``provider``, ``upstream_model`` ...) or a route over
deployments (``{route: {balance, fallbacks, context_fallback, move_on, circuit}}``, docs/routing.md);
``Config.models`` holds the deployments and ``Config.routes`` the routes. A ``tools`` entry is an
HTTP tool (``kind: search | fetch``) or a tool of an MCP server (``kind: mcp``, docs/mcp.md).
A string may hold ``${NAME}`` (or ``${NAME:-default}``), read from the environment; nothing else
reads secrets. An invalid file raises ``ConfigError`` naming the key, the value and what is wrong;
the loader's own refusals (size, encoding, depth, aliases) are listed in ``loading``.

Every float is finite (no ``.inf``/``.nan``), and the numbers that pace and time calls have
bounds that keep the arithmetic sane (see docs/configuration.md).
URLs of the form ``embedded://provider`` and ``embedded://tools`` name the bundled local provider
and tool backend, which ``sidecar serve`` then starts in-process.

One module per concern; import from the package (``from sidecar.config import Config``)::

    errors     ConfigError
    bounds     the defaults and the bounds of the values, the embedded URLs
    fields     the checks several sections share: a listen address, an http(s) URL
    sections   server (TLS, tokens, connection limits), http (connection limits), policy, telemetry, state
    catalog    providers (a wire_format of the formats' registry lines), models: deployments and routes
    tools      tools (HTTP or MCP), mcp_servers, guardrails
    secrets    ${NAME} from the environment, secrets written in the file refused, what is masked
    checks     the references across sections (routes, providers, tools, MCP servers, workers)
    document   Config: the whole file, its secrets found once (``Config.secrets``)
    serving    what a config serves (its models and tools): one serving nothing refused, a reload
               removing all of it detected
    loading    the hardened YAML loader: parse_config, load_config (a file: it must serve something),
               load_default_config
"""

from __future__ import annotations

from sidecar.config.bounds import (
    DEFAULT_CHECK_TIME_LIMIT_S,
    DEFAULT_CONFIG,
    DEFAULT_GRACE_PERIOD_S,
    DEFAULT_LISTEN,
    DEFAULT_MAX_ARGUMENT_BYTES,
    DEFAULT_MAX_CORRECTIONS,
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MCP_CONNECT_TIMEOUT_S,
    DEFAULT_MCP_TIMEOUT_S,
    DEFAULT_STATE_PREFIX,
    DEFAULT_STATE_TIMEOUT_MS,
    DEFAULT_STREAM_IDLE_TIMEOUT_S,
    DEFAULT_TOOL_RETRIES,
    DEFAULT_UPSTREAM_RETRIES,
    EMBEDDED_PROVIDER,
    EMBEDDED_TOOLS,
    MAX_CONFIG_BYTES,
    MAX_CONFIG_DEPTH,
    MAX_CONFIG_NODES,
    MAX_IN_FLIGHT_LIMIT,
    MAX_PORT,
    MAX_PROVIDER_CONNECTIONS,
    MAX_STATE_TIMEOUT_MS,
    MAX_WORKERS,
    MIN_TOKEN_CHARS,
)
from sidecar.config.catalog import ModelConfig, ProviderConfig, RouteConfig, RouteEntry
from sidecar.config.checks import workers_refusal
from sidecar.config.document import Config
from sidecar.config.errors import ConfigError
from sidecar.config.loading import load_config, load_default_config, parse_config
from sidecar.config.secrets import AWS_ENVIRONMENT, AwsEnvironment
from sidecar.config.sections import (
    CallerConfig,
    GrpcConnectionsConfig,
    HttpConfig,
    HttpConnectionsConfig,
    PolicyConfig,
    ServerAuthConfig,
    ServerConfig,
    StateConfig,
    TelemetryConfig,
    TlsConfig,
)
from sidecar.config.serving import removes_everything, served
from sidecar.config.tools import AnyToolConfig, GuardrailConfig, McpServerConfig, McpToolConfig, ToolConfig
from sidecar.core.settings import PRESETS, CircuitConfig, Quirk, ServiceConfig, Window, Windows

__all__ = [
    "AWS_ENVIRONMENT",
    "DEFAULT_CHECK_TIME_LIMIT_S",
    "DEFAULT_CONFIG",
    "DEFAULT_GRACE_PERIOD_S",
    "DEFAULT_LISTEN",
    "DEFAULT_MAX_ARGUMENT_BYTES",
    "DEFAULT_MAX_CORRECTIONS",
    "DEFAULT_MAX_IN_FLIGHT",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_MCP_CONNECT_TIMEOUT_S",
    "DEFAULT_MCP_TIMEOUT_S",
    "DEFAULT_STATE_PREFIX",
    "DEFAULT_STATE_TIMEOUT_MS",
    "DEFAULT_STREAM_IDLE_TIMEOUT_S",
    "DEFAULT_TOOL_RETRIES",
    "DEFAULT_UPSTREAM_RETRIES",
    "EMBEDDED_PROVIDER",
    "EMBEDDED_TOOLS",
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_DEPTH",
    "MAX_CONFIG_NODES",
    "MAX_IN_FLIGHT_LIMIT",
    "MAX_PORT",
    "MAX_PROVIDER_CONNECTIONS",
    "MAX_STATE_TIMEOUT_MS",
    "MAX_WORKERS",
    "MIN_TOKEN_CHARS",
    "PRESETS",
    "AnyToolConfig",
    "AwsEnvironment",
    "CallerConfig",
    "CircuitConfig",
    "Config",
    "ConfigError",
    "GrpcConnectionsConfig",
    "GuardrailConfig",
    "HttpConfig",
    "HttpConnectionsConfig",
    "McpServerConfig",
    "McpToolConfig",
    "ModelConfig",
    "PolicyConfig",
    "ProviderConfig",
    "Quirk",
    "RouteConfig",
    "RouteEntry",
    "ServerAuthConfig",
    "ServerConfig",
    "ServiceConfig",
    "StateConfig",
    "TelemetryConfig",
    "TlsConfig",
    "ToolConfig",
    "Window",
    "Windows",
    "load_config",
    "load_default_config",
    "parse_config",
    "removes_everything",
    "served",
    "workers_refusal",
]
