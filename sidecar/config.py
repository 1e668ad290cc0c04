"""The configuration: one YAML file, validated at start, secrets only from the environment.

Sections: ``server``, ``http``, ``policy``, ``providers``, ``models``, ``services``, ``mcp_servers``,
``tools``, ``telemetry``, ``state`` (where throttles, pauses, circuits and spend are kept: this
process, or a Redis shared by the fleet; docs/fleet.md).
A ``models`` entry is a deployment (``provider``, ``upstream_model`` ...) or a route over
deployments (``{route: {balance, fallbacks, context_fallback, move_on, circuit}}``, docs/routing.md);
``Config.models`` holds the deployments and ``Config.routes`` the routes. A ``tools`` entry is an
HTTP tool (``kind: search | fetch``) or a tool of an MCP server (``kind: mcp``, docs/mcp.md).
A string may hold ``${NAME}`` (or ``${NAME:-default}``), read from the environment; nothing else
reads secrets. An invalid file raises ``ConfigError`` naming the key, the value and what is wrong.

What the loader refuses before any validation (each a ConfigError, never a traceback)::

    a file larger than MAX_CONFIG_BYTES (1 MiB)           read no further
    bytes that are not UTF-8                              line, column and the key whose value holds them
    mappings or lists nested deeper than MAX_CONFIG_DEPTH the key where it goes too deep (PyYAML recurses)
    more than MAX_CONFIG_NODES nodes, aliases expanded    the key where it went past (a "billion laughs")
    an alias inside the node it names                     the key of the alias (it would never end)
    a value YAML cannot construct (2001-13-45, 5000 digits) its line and column

Every float is finite (no ``.inf``/``.nan``), and the numbers that pace and time calls have
bounds that keep the arithmetic sane (see docs/configuration.md).
URLs of the form ``embedded://provider`` and ``embedded://tools`` name the bundled local provider
and tool backend, which ``sidecar serve`` then starts in-process.
"""

from __future__ import annotations

import os
import re
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from sidecar.core.json_schemas import check_schema
from sidecar.core.kinds import FailureKind
from sidecar.core.patterns import PatternError, compile_pattern
from sidecar.core.redact import mask_keys
from sidecar.core.routing import (
    DEFAULT_MOVE_ON,
    DEPLOYMENT_CIRCUIT,
    MAX_ROUTE_DEPLOYMENTS,
    MAX_ROUTE_WEIGHT,
    MOVABLE_KINDS,
    never_reason,
)
from sidecar.core.settings import (
    MAX_WAIT_S,
    PRESETS,
    CircuitConfig,
    Quirk,
    ServiceConfig,
    Window,
    Windows,
)

__all__ = [
    "DEFAULT_CONFIG",
    "EMBEDDED_PROVIDER",
    "EMBEDDED_TOOLS",
    "PRESETS",
    "CircuitConfig",
    "Config",
    "ConfigError",
    "GuardrailConfig",
    "HttpConfig",
    "McpServerConfig",
    "McpToolConfig",
    "ModelConfig",
    "ProviderConfig",
    "Quirk",
    "RouteConfig",
    "RouteEntry",
    "ServerAuthConfig",
    "ServerConfig",
    "ServiceConfig",
    "StateConfig",
    "TlsConfig",
    "ToolConfig",
    "Window",
    "Windows",
    "load_config",
    "load_default_config",
    "parse_config",
    "workers_refusal",
]

EMBEDDED_PROVIDER = "embedded://provider"
EMBEDDED_TOOLS = "embedded://tools"
DEFAULT_CONFIG = "default_config.yaml"
DEFAULT_LISTEN = "127.0.0.1:50051"
DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024
DEFAULT_GRACE_PERIOD_S = 10.0
DEFAULT_MAX_IN_FLIGHT = 256
"""CallModel + ExecuteTool calls at once; past it a call is shed (RESOURCE_EXHAUSTED). Measured with
bench/overload.py (docs/configuration.md): above the default provider pool (200) by little, and low
enough that one event loop still picks every call of a 5,000-call burst up and answers it."""
MAX_IN_FLIGHT_LIMIT = 8192
"""The highest ``server.max_in_flight`` accepted: one event loop cannot serve more at once usefully."""
MIN_TOKEN_CHARS = 16
"""A bearer token shorter than this is refused (``openssl rand -hex 32`` gives 64)."""
MAX_PROVIDER_CONNECTIONS = 1024
"""The highest ``providers.*.max_connections`` (a pool that large served nothing faster, measured with
httpcore's pool; the bound stays as a guard against a typo's ten thousand sockets)."""
DEFAULT_STATE_PREFIX = "sidecar"
DEFAULT_STATE_TIMEOUT_MS = 50
"""A state backend operation (Redis) slower than this is given up: the call decides on local state."""
MAX_STATE_TIMEOUT_MS = 10_000
MAX_WORKERS = 256
"""The most worker processes ``server.workers`` may ask for."""
DEFAULT_UPSTREAM_RETRIES = 3
DEFAULT_TOOL_RETRIES = 2
DEFAULT_MAX_CORRECTIONS = 2
MAX_CONFIG_BYTES = 1024 * 1024
"""A config file larger than this is refused unread (a real one is a few KiB)."""
MAX_CONFIG_DEPTH = 64
"""Mappings and lists nested deeper than this are refused: PyYAML and the JSON-schema check recurse."""
MAX_CONFIG_NODES = 100_000
"""Scalars, mappings and lists of the document with every alias expanded: the rest is refused."""
DEFAULT_MAX_ARGUMENT_BYTES = 1024 * 1024
"""A caller's JSON text (tool arguments, a schema, a history tool call) is refused past this size."""
DEFAULT_CHECK_TIME_LIMIT_S = 2.0
"""Checking one call's input (arguments, guardrails, schemas, the reply against the schema) stops here."""
DEFAULT_STREAM_IDLE_TIMEOUT_S = 30.0
"""A StreamModel attempt that receives no byte for this many seconds (the response head included) is
a stall: a mid-stream fault after the first delta, a transient fault before it. Per provider
(``providers.*.stream_idle_timeout_s``): raise it for a server that thinks long before its first byte."""
DEFAULT_MCP_TIMEOUT_S = 30.0
"""One call of an MCP server's tool (an attempt) waits this long for its answer."""
DEFAULT_MCP_CONNECT_TIMEOUT_S = 10.0
"""Opening a session with an MCP server (connect or spawn, initialize, list its tools) takes at most this."""

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_URL = re.compile(r"^https?://[^\s]+$")
_ORIGIN = re.compile(r"^[^:/?#]*://[^/?#]*")
"""A URL's scheme and authority (host, port, credentials): what a tool's arguments may never fill."""
"""A value read from the environment that is a whole URL: an address to show, save for its password."""
_CREDENTIAL_HEADER = re.compile(r"(?i)auth|token|secret|key|cookie|password")
"""A header whose name matches carries a credential: its value is one of ``Config.secrets()``."""


class ConfigError(Exception):
    """The configuration is invalid; the message names key, value and what is wrong."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class TlsConfig(_Strict):
    """TLS on the gRPC port. PEM files, read when the server starts; ``client_ca`` set means mTLS."""

    cert: str
    """The server's certificate chain (PEM)."""
    key: str
    """The server's private key (PEM)."""
    client_ca: str | None = None
    """CA certificates (PEM): clients must present a certificate signed by one of them."""


class ServerAuthConfig(_Strict):
    """Per-agent bearer tokens: a call must carry ``authorization: Bearer <one of them>``."""

    tokens: Annotated[list[SecretStr], Field(min_length=1)]
    """Each from the environment (``${AGENT_A_TOKEN}``), never written in the file."""

    @model_validator(mode="after")
    def _strong(self) -> ServerAuthConfig:
        values = [t.get_secret_value() for t in self.tokens]
        for i, value in enumerate(values):  # the messages never show a token
            if len(value) < MIN_TOKEN_CHARS:
                raise ValueError(f"tokens[{i}]: must be at least {MIN_TOKEN_CHARS} characters (value not shown)")
            if value in values[:i]:
                raise ValueError(f"tokens[{i}]: the same token as tokens[{values.index(value)}] (value not shown)")
        return self


class ServerConfig(_Strict):
    listen: str = DEFAULT_LISTEN
    """``host:port`` or ``unix:/path/to.sock``."""
    max_message_bytes: Annotated[int, Field(gt=0, le=256 * 1024 * 1024)] = DEFAULT_MAX_MESSAGE_BYTES
    grace_period_s: Annotated[float, Field(ge=0, le=3600)] = DEFAULT_GRACE_PERIOD_S
    reflection: bool = True
    max_in_flight: Annotated[int, Field(ge=1, le=MAX_IN_FLIGHT_LIMIT)] = DEFAULT_MAX_IN_FLIGHT
    """CallModel and ExecuteTool calls served at once; a call past it gets RESOURCE_EXHAUSTED at once."""
    tls: TlsConfig | None = None
    auth: ServerAuthConfig | None = None
    allow_insecure: bool = False
    """Serve a non-loopback address with neither ``tls`` nor ``auth`` (only on a private network)."""
    workers: Annotated[int, Field(ge=1, le=MAX_WORKERS)] | Literal["auto"] = 1
    """Processes serving ``listen`` together (SO_REUSEPORT); ``auto``: one per usable core (the CPUs
    it may run on, within its cgroup's quota: server/cores.py). More than one
    needs ``state.backend: redis`` (they share policy through it) and a host:port address."""

    @field_validator("listen")
    @classmethod
    def _listen(cls, v: str) -> str:
        if v.startswith("unix:"):
            if len(v) <= len("unix:"):
                raise ValueError("a unix socket needs a path, e.g. unix:/tmp/sidecar.sock")
            return v
        host, sep, port = v.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError("must be host:port (port 0-65535) or unix:/path")
        return v


class HttpConfig(_Strict):
    """The HTTP port (off unless set): the OpenAI-compatible front at ``/v1/chat/completions``, the
    Anthropic-compatible one at ``/v1/messages``, ``GET /v1/models``, the MCP front at ``/mcp``,
    ``GET /healthz``.

    It shares the gRPC port's transport security: ``server.tls`` (TLS / mTLS), ``server.auth``
    (``Authorization: Bearer <token>``), ``server.allow_insecure``.
    """

    listen: str
    """``host:port`` (port 0 picks a free one)."""
    mcp: bool = True
    """Serve the configured tools as an MCP server (streamable HTTP) at ``/mcp``."""
    openai: bool = True
    """Serve the OpenAI-compatible front: ``POST /v1/chat/completions``, ``GET /v1/models``."""
    anthropic: bool = True
    """Serve the Anthropic-compatible front: ``POST /v1/messages`` (and ``GET /v1/models`` in its shape)."""

    @field_validator("listen")
    @classmethod
    def _listen(cls, v: str) -> str:
        host, sep, port = v.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError("must be host:port (port 0-65535)")
        return v


class PolicyConfig(_Strict):
    upstream_retries: Annotated[int, Field(ge=0, le=100)] = DEFAULT_UPSTREAM_RETRIES
    preset: Literal["batch", "interactive"] = "batch"
    windows: Windows | None = None
    """Overrides the preset's windows."""
    max_corrections: Annotated[int, Field(ge=0, le=10)] = DEFAULT_MAX_CORRECTIONS
    tool_retries: Annotated[int, Field(ge=0, le=100)] = DEFAULT_TOOL_RETRIES
    tool_window: Window = Window(min_s=0.2, max_s=1.0)
    """Tools retry transient faults in this window times min(attempt, 10), capped at tool_max_wait_s."""
    tool_max_wait_s: Annotated[float, Field(ge=0, le=MAX_WAIT_S)] = 30.0
    circuit: CircuitConfig = CircuitConfig()
    spend_caps: dict[str, Annotated[float, Field(ge=0)]] = {}
    """Workflow id -> cap in US dollars; ``"*"`` applies to every workflow without its own."""
    max_argument_bytes: Annotated[int, Field(ge=1024, le=64 * 1024 * 1024)] = DEFAULT_MAX_ARGUMENT_BYTES
    """ExecuteTool's arguments_json, and CallModel's response_schema_json, tools[].parameters_json and
    messages[].tool_calls[].arguments_json: each is refused (INVALID_INPUT) past this many bytes."""
    check_time_limit_s: Annotated[float, Field(gt=0, le=60)] = DEFAULT_CHECK_TIME_LIMIT_S
    """The time one call's input may take to check (schema, arguments, guardrails, the reply
    against the caller's schema) before it is refused as INVALID_INPUT; large checks run off the event loop."""
    mid_stream: Literal["restart", "fail"] = "restart"
    """StreamModel, a fault after deltas reached the caller: ``restart`` (a restart event, then the next
    attempt's deltas, within the call's retry budget) or ``fail`` (STREAM_INTERRUPTED with the partial
    text). A request's ``mid_stream`` overrides it."""

    def windows_for(self, preset: str | None, windows: Windows | None) -> Windows:
        return windows or (PRESETS[preset] if preset else (self.windows or PRESETS[self.preset]))


class ProviderConfig(_Strict):
    wire_format: Literal["openai", "anthropic"]
    base_url: str
    api_key: SecretStr | None = None
    account: str = ""
    """A name for the account, shown in quota messages (never an identifier the provider sent)."""
    timeout_s: Annotated[float, Field(gt=0)] = 120.0
    connect_timeout_s: Annotated[float, Field(gt=0)] = 5.0
    max_connections: Annotated[int, Field(ge=1, le=MAX_PROVIDER_CONNECTIONS)] = 200
    max_keepalive_connections: Annotated[int, Field(ge=0)] = 50
    """Accepted and ignored since the transport is aiohttp's (net/backend.py): its pool keeps every idle
    connection up to ``max_connections`` (for ``keepalive_expiry``, 5 s) and has no separate cap."""
    headers: dict[str, str] = {}
    anthropic_version: str = "2023-06-01"
    stream_idle_timeout_s: Annotated[float, Field(gt=0, le=MAX_WAIT_S)] = DEFAULT_STREAM_IDLE_TIMEOUT_S
    """StreamModel: no byte from this provider for this long is a stall (a mid-stream fault)."""

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        return _check_url(v, EMBEDDED_PROVIDER)


class ModelConfig(_Strict):
    provider: str
    upstream_model: str
    context_window: Annotated[int, Field(gt=0)]
    max_output_tokens: Annotated[int, Field(gt=0)]
    default_output_tokens: Annotated[int, Field(gt=0)] | None = None
    input_price_per_mtok: Annotated[float, Field(ge=0)] = 0.0
    output_price_per_mtok: Annotated[float, Field(ge=0)] = 0.0
    requests_per_minute: Annotated[int, Field(ge=0)] = 0
    tokens_per_minute: Annotated[int, Field(ge=0)] = 0
    upstream_retries: Annotated[int, Field(ge=0, le=100)] | None = None
    preset: Literal["batch", "interactive"] | None = None
    windows: Windows | None = None
    max_corrections: Annotated[int, Field(ge=0, le=10)] | None = None

    @model_validator(mode="after")
    def _budget(self) -> ModelConfig:
        if self.default_output_tokens and self.default_output_tokens > self.max_output_tokens:
            raise ValueError("default_output_tokens must not exceed max_output_tokens")
        return self

    @property
    def output_budget(self) -> int:
        return self.default_output_tokens or min(self.max_output_tokens, 1024)


class RouteConfig(_Strict):
    """A route: a model id whose calls go to its deployments (catalog models), docs/routing.md.

    Hops: ``balance`` (a weighted draw), then ``fallbacks`` in order; ``context_fallback`` takes a
    conversation that does not fit. ``move_on`` lists the failure kinds that go on to the next hop
    (default ``core.routing.DEFAULT_MOVE_ON``); ``circuit`` is the circuit of each of its
    deployments (default ``core.routing.DEPLOYMENT_CIRCUIT``).
    """

    balance: dict[str, Annotated[float, Field(gt=0, le=MAX_ROUTE_WEIGHT)]] = {}
    fallbacks: list[str] = []
    context_fallback: str | None = None
    move_on: list[str] | None = None
    circuit: CircuitConfig | None = None

    @field_validator("move_on")
    @classmethod
    def _kinds(cls, v: list[str] | None) -> list[str] | None:
        for i, name in enumerate(v or []):
            kind = FailureKind.__members__.get(name)
            if kind is None:
                movable = ", ".join(sorted(k.name for k in MOVABLE_KINDS))
                raise ValueError(f"[{i}]: {name!r} is not a failure kind (a route may move on from: {movable})")
            why = never_reason(kind)
            if why is not None:
                raise ValueError(f"[{i}]: {name} never moves on to another deployment: {why}")
            if kind not in MOVABLE_KINDS:
                raise ValueError(f"[{i}]: {name} is not a kind a model call ends with")
        return v

    @model_validator(mode="after")
    def _deployments(self) -> RouteConfig:
        if not self.balance and not self.fallbacks:
            raise ValueError("a route needs at least one deployment in balance or fallbacks")
        named = [*self.balance, *self.fallbacks]
        twice = sorted({d for d in named if named.count(d) > 1})
        if twice:
            raise ValueError(f"{', '.join(twice)}: a deployment is named once, in balance or in fallbacks")
        count = len(set(named) | ({self.context_fallback} if self.context_fallback else set()))
        if count > MAX_ROUTE_DEPLOYMENTS:
            raise ValueError(f"a route names at most {MAX_ROUTE_DEPLOYMENTS} deployments (got {count})")
        return self

    @property
    def move_on_kinds(self) -> frozenset[FailureKind]:
        if self.move_on is None:
            return DEFAULT_MOVE_ON
        return frozenset(FailureKind[name] for name in self.move_on)

    @property
    def deployment_circuit(self) -> CircuitConfig:
        return self.circuit or DEPLOYMENT_CIRCUIT

    def named(self) -> list[tuple[str, str]]:
        """Each deployment with the key that names it, as the file spells it."""
        out = [(d, f"balance.{d}") for d in self.balance]
        out += [(d, f"fallbacks[{i}]") for i, d in enumerate(self.fallbacks)]
        if self.context_fallback is not None:
            out.append((self.context_fallback, "context_fallback"))
        return out


class RouteEntry(_Strict):
    """A ``models:`` entry that is a route: ``{route: {...}}`` and nothing else."""

    route: RouteConfig


class GuardrailConfig(_Strict):
    """A rule the arguments must pass before a tool is called; a match is GUARDRAIL (correctable)."""

    name: str
    deny_pattern: str
    reason: str
    """Written as the way to get it right, e.g. "must not contain an email address"."""
    parameter: str | None = None
    """Only this argument; every string argument (nested too) when absent."""

    @field_validator("deny_pattern")
    @classmethod
    def _regex(cls, v: str) -> str:
        try:
            compile_pattern(v)  # RE2: linear-time matching, so no argument can stall the server
        except PatternError as exc:
            raise ValueError(f"not a regular expression RE2 can run: {exc}") from None
        return v


class ToolConfig(_Strict):
    description: str
    kind: Literal["search", "fetch"]
    service: str
    method: Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"] = "GET"
    url: str
    """A template: ``{param}`` is replaced by the argument, URL-quoted."""
    parameters: dict[str, Any] = {"type": "object", "properties": {}}
    headers: dict[str, str] = {}
    body: Literal["none", "arguments"] | dict[str, Any] = "none"
    """``arguments``: the arguments object as JSON; a mapping: JSON with ``"{param}"`` values replaced."""
    timeout_s: Annotated[float, Field(gt=0)] = 10.0
    connect_timeout_s: Annotated[float, Field(gt=0)] = 3.0
    idempotent: bool | None = None
    """Default: true for GET and HEAD, false otherwise. A non-idempotent tool is never re-sent."""
    resource_type: str = "resource"
    id_parameter: str | None = None
    """The parameter that names the resource of a fetch (default: the first required one)."""
    guardrails: list[GuardrailConfig] = []

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        return _check_url(v, EMBEDDED_TOOLS)

    @field_validator("parameters")
    @classmethod
    def _schema(cls, v: dict[str, Any]) -> dict[str, Any]:
        problem = check_schema(v)  # depth first, then the metaschema, patterns on RE2, every $ref
        if problem is not None:
            raise ValueError(f"not a valid JSON schema: it must {problem}")
        if v.get("type") != "object":
            raise ValueError('tool parameters must be a JSON schema with "type": "object"')
        return v

    @property
    def is_idempotent(self) -> bool:
        return self.idempotent if self.idempotent is not None else self.method in ("GET", "HEAD")

    @property
    def identifier_parameter(self) -> str | None:
        required = self.parameters.get("required") or []
        return self.id_parameter or (required[0] if required else None)


class McpServerConfig(_Strict):
    """An MCP server whose tools ``tools:`` entries of ``kind: mcp`` name: exactly one of ``url``
    (streamable HTTP) and ``command`` (stdio: the sidecar starts it and speaks on its stdin/stdout)."""

    url: str | None = None
    """The streamable HTTP endpoint, e.g. ``https://docs.example.com/mcp``."""
    headers: dict[str, str] = {}
    """Sent with every HTTP request (``Authorization: Bearer ${DOCS_MCP_TOKEN}``); a URL server's only."""
    command: Annotated[list[str], Field(min_length=1)] | None = None
    """The program and its arguments, e.g. ``[python, -m, docs_mcp]``."""
    env: dict[str, str] = {}
    """The stdio server's environment, on top of a minimal one (HOME, PATH, ...): the sidecar's own
    environment, its keys included, is not passed on."""
    cwd: str | None = None
    service: str | None = None
    """The service whose throttle and circuit its tools share (default: the server's name)."""
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = DEFAULT_MCP_TIMEOUT_S
    connect_timeout_s: Annotated[float, Field(gt=0, le=600)] = DEFAULT_MCP_CONNECT_TIMEOUT_S

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^https?://[^/\s]+", v):
            raise ValueError("must be an http:// or https:// URL")
        return v

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.url is None) == (self.command is None):
            raise ValueError("exactly one of url (streamable HTTP) and command (stdio) must be set")
        if self.url is not None and (self.env or self.cwd is not None):
            raise ValueError("env and cwd are for a command (stdio) server; a url server takes headers")
        if self.command is not None and self.headers:
            raise ValueError("headers are for a url (streamable HTTP) server; a command server takes env")
        return self

    @property
    def transport(self) -> Literal["http", "stdio"]:
        return "http" if self.url is not None else "stdio"


class McpToolConfig(_Strict):
    """A tool of an MCP server: its schema, description and annotations come from the server at start."""

    kind: Literal["mcp"]
    server: str
    """A key of ``mcp_servers``."""
    tool: str | None = None
    """The server's name for the tool (default: this entry's name)."""
    description: str | None = None
    """Overrides the server's description."""
    service: str = ""
    """The service whose throttle and circuit it shares (default: its server's service)."""
    idempotent: bool | None = None
    """Default: the server's ``annotations`` (``readOnlyHint`` or ``idempotentHint``), else false."""
    timeout_s: Annotated[float, Field(gt=0, le=3600)] | None = None
    """Overrides the server's ``timeout_s`` for this tool."""
    guardrails: list[GuardrailConfig] = []


AnyToolConfig = Annotated[ToolConfig | McpToolConfig, Field(discriminator="kind")]
_TOOL_TAGS = frozenset({"search", "fetch", "mcp"})
"""The values of a tool's ``kind``: pydantic puts the one it chose into an error's location."""


class TelemetryConfig(_Strict):
    record_content: bool = False
    """Record message content on spans (opt-in)."""
    prometheus_port: Annotated[int, Field(ge=0, le=65535)] | None = None
    """Serve a Prometheus scrape endpoint on 127.0.0.1:PORT (0 = off unless set)."""
    log_format: Literal["json", "text"] = "json"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


class StateConfig(_Strict):
    """Where throttles, pauses, circuits and spend live: this process (``memory``), or a Redis every
    replica naming the same ``url`` and ``prefix`` shares (docs/fleet.md)."""

    backend: Literal["memory", "redis"] = "memory"
    url: str | None = None
    """``redis://[user:password@]host:port/db``, ``rediss://`` (TLS) or ``unix:///path``; from the
    environment (``${REDIS_URL}``): its password is a secret, masked wherever text leaves."""
    prefix: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")] = DEFAULT_STATE_PREFIX
    """Every key and the change channel start with it: replicas with the same prefix share state."""
    timeout_ms: Annotated[int, Field(ge=1, le=MAX_STATE_TIMEOUT_MS)] = DEFAULT_STATE_TIMEOUT_MS
    """A Redis operation slower than this is given up; the call goes on under local state."""

    @model_validator(mode="after")
    def _url(self) -> StateConfig:
        if self.backend == "redis":
            if not self.url:
                raise ValueError("the redis backend needs state.url, e.g. url: ${REDIS_URL}")
            if urlsplit(self.url).scheme not in ("redis", "rediss", "unix"):
                raise ValueError("state.url must be a redis://, rediss:// or unix:// URL (value not shown)")
        return self


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


class Config(_Strict):
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
        circuits: dict[str, tuple[str, CircuitConfig]] = {}
        for route_id, entry in self.routes.items():
            if route_id in self.models:
                raise ValueError(f"models.{route_id}: both a deployment and a route")
            for deployment, key in entry.route.named():
                where = f"models.{route_id}.route.{key}"
                if deployment in self.routes:
                    raise ValueError(f"{where}: {deployment!r} is a route; a route's deployments are catalog models")
                if deployment not in self.models:
                    known = ", ".join(self.models) or "none"
                    raise ValueError(f"{where}: {deployment!r} is not a catalog model (deployments: {known})")
                circuit = entry.route.deployment_circuit
                first = circuits.setdefault(deployment, (route_id, circuit))
                if first[1] != circuit:
                    raise ValueError(
                        f"models.{route_id}.route.circuit: {deployment} has one circuit, but route {first[0]} "
                        "gives it another; give both routes the same circuit"
                    )
        return self

    @property
    def catalog(self) -> list[str]:
        """Every model id a call may name: the deployments and the routes, sorted."""
        return sorted([*self.models, *self.routes])

    @model_validator(mode="after")
    def _references(self) -> Config:
        refusal = workers_refusal(self.server.workers, self.server.listen, self.state.backend)
        if refusal is not None:
            raise ValueError(refusal)
        for model_id, model in self.models.items():
            if model.provider not in self.providers:
                known = ", ".join(self.providers) or "none"
                raise ValueError(
                    f"models.{model_id}.provider: {model.provider!r} is not a configured provider (known: {known})"
                )
        for name, tool in self.tools.items():
            if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
                raise ValueError(f"tools.{name}: a tool name must be 1-64 letters, digits, '_' or '-'")
            if isinstance(tool, McpToolConfig):
                self.tools[name] = self._mcp_tool(name, tool)
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
        return self

    def _mcp_tool(self, name: str, tool: McpToolConfig) -> McpToolConfig:
        """``tool`` with its service resolved (its own, else its server's, else the server's name)."""
        server = self.mcp_servers.get(tool.server)
        if server is None:
            known = ", ".join(self.mcp_servers) or "none"
            raise ValueError(f"tools.{name}.server: {tool.server!r} is not a configured MCP server (known: {known})")
        return tool if tool.service else tool.model_copy(update={"service": server.service or tool.server})

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

    _secrets: list[str] = PrivateAttr(default_factory=list)

    def secrets(self) -> list[str]:
        """What is masked wherever text leaves the sidecar, longest first.

        Every value read from the environment (``${NAME}``) but a whole ``http(s)://`` URL, which
        is an address (only its ``user:password@`` password is a secret); each provider's API key; the value of
        every provider or tool header named like a credential (``_CREDENTIAL_HEADER``), and the part
        after its scheme word (``Bearer <token>``); a password written in a URL (``user:pass@``).
        """
        found = [p.api_key.get_secret_value() for p in self.providers.values() if p.api_key]
        headers = [p.headers for p in self.providers.values()] + [t.headers for t in self.http_tools.values()]
        headers += [m.headers for m in self.mcp_servers.values()] + [m.env for m in self.mcp_servers.values()]
        for name, value in ((k, v.strip()) for h in headers for k, v in h.items()):
            if _CREDENTIAL_HEADER.search(name):
                found += [value, value.partition(" ")[2].strip()]
        urls = [p.base_url for p in self.providers.values()] + [t.url for t in self.http_tools.values()]
        for url in urls + [m.url for m in self.mcp_servers.values() if m.url]:
            found.append(_password(url))
        if self.server.auth is not None:
            found += [t.get_secret_value() for t in self.server.auth.tokens]
        if self.state.url:
            found.append(_password(self.state.url))
        return sorted({*self._secrets, *(k for k in found if len(k) >= 4)}, key=len, reverse=True)

    @property
    def embedded(self) -> set[str]:
        urls = [p.base_url for p in self.providers.values()] + [t.url for t in self.http_tools.values()]
        return {u.split("://", 1)[1].split("/", 1)[0] for u in urls if u.startswith("embedded://")}


def _password(url: str) -> str:
    """The password in ``scheme://user:password@host``, or ""."""
    try:
        return urlsplit(url).password or ""
    except ValueError:  # not a URL urlsplit can read (a bracket left open): no password to find
        return ""


def _check_url(v: str, embedded: str) -> str:
    if v.startswith("embedded://"):
        if not v.startswith(embedded):
            raise ValueError(f"the only embedded URL here is {embedded}")
        return v
    if not re.match(r"^https?://[^/\s]+", v):
        raise ValueError("must be an http:// or https:// URL")
    return v


def _expand(value: Any, path: str, found: list[str]) -> Any:
    """``value`` with every ``${NAME}`` replaced from the environment; ``found`` collects what came in."""
    if isinstance(value, dict):
        return {k: _expand(v, f"{path}.{k}" if path else str(k), found) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, f"{path}[{i}]", found) for i, v in enumerate(value)]
    if isinstance(value, str):

        def sub(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            got = os.environ.get(name)
            if got is None:
                if default is not None:
                    return default
                raise ConfigError(f"{path}: environment variable {name} is not set (the value is ${{{name}}})")
            found.append(_password(got) if _URL.match(got) else got)  # a URL is an address, not a secret
            return got

        return _ENV.sub(sub, value)
    return value


def _literal_secrets(raw: dict[str, Any]) -> list[str]:
    """Keys of provider API keys and server tokens written in the file instead of read from the environment."""
    bad = _literal_tokens(raw)
    providers = raw.get("providers")
    if not isinstance(providers, dict):
        return bad
    for name, provider in providers.items():
        key = provider.get("api_key") if isinstance(provider, dict) else None
        if isinstance(key, str) and key and not _ENV.fullmatch(key.strip()):
            bad.append(f"providers.{name}.api_key")
    return bad


def _literal_tokens(raw: dict[str, Any]) -> list[str]:
    server = raw.get("server")
    auth = server.get("auth") if isinstance(server, dict) else None
    tokens = auth.get("tokens") if isinstance(auth, dict) else None
    if not isinstance(tokens, list):
        return []
    return [
        f"server.auth.tokens[{i}]"
        for i, token in enumerate(tokens)
        if isinstance(token, str) and token and not _ENV.fullmatch(token.strip())
    ]


def _describe(exc: ValidationError, secrets: list[str]) -> str:
    lines = []
    for err in exc.errors():
        parts = [str(p) for p in err["loc"] if not str(p).startswith("function-")]
        if parts[:1] == ["routes"]:  # a route is written as a models: entry (a file has no routes: section)
            parts[0] = "models"
        tool = parts[:1] == ["tools"]
        if tool and len(parts) > 2 and parts[2] in _TOOL_TAGS:
            del parts[2]  # the kind pydantic chose to validate the tool as: the file has no such key
        loc = ".".join(parts)
        msg = err["msg"].removeprefix("Value error, ")
        if tool and err["type"] in ("union_tag_invalid", "union_tag_not_found"):
            msg = "kind must be search, fetch or mcp"
        given = err.get("input")
        shown = "" if isinstance(given, dict) else f" (got {_shown(given)})"
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        lines.append(f"{loc or '(top level)'}: {msg}{shown}")
    return mask_keys("\n".join(lines), secrets)


LOG10_2 = 0.30103
"""Decimal digits per bit."""
SHOWN_VALUE_CHARS = 200
"""A wrong value is quoted in a ConfigError up to this many characters."""


def _shown(value: object) -> str:
    """``repr(value)`` cut to SHOWN_VALUE_CHARS; an integer too long to print is described instead."""
    try:
        text = repr(value)
    except ValueError:  # an int past Python's 4,300-digit printing limit
        if isinstance(value, int):
            return f"an integer of about {round(value.bit_length() * LOG10_2)} digits"
        return "a value that cannot be shown"
    return text if len(text) <= SHOWN_VALUE_CHARS else text[: SHOWN_VALUE_CHARS - 1] + "…"


def _label(index: object) -> str:
    """A node's place in its parent: the key of a mapping value, ``[i]`` of a list item."""
    if isinstance(index, yaml.ScalarNode):
        return str(index.value)
    if isinstance(index, int):
        return f"[{index}]"
    return ""


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader, refusing what would exhaust the stack or the memory (see the module docstring).

    It counts on PyYAML's composer: ``compose_node`` is called once per node (an alias included),
    with the key node (or list index) it is the value of, and ``anchors`` holds every anchored node
    from the moment its composition starts.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._path: list[str] = []
        self._nodes = 0
        self._sizes: dict[str, int] = {}
        """Anchor -> the nodes its node stands for, aliases inside it expanded."""

    def _where(self) -> str:
        parts = [p for p in self._path if p]
        shown = parts[:8]
        text = "".join(p if p.startswith("[") else f".{p}" for p in shown).lstrip(".")
        return (text + (".…" if len(parts) > len(shown) else "")) or "(top level)"

    def _count(self, nodes: int) -> None:
        self._nodes += nodes
        if self._nodes > MAX_CONFIG_NODES:
            raise ConfigError(
                f"{self._where()}: the document has more than {MAX_CONFIG_NODES} values with its aliases "
                "expanded (a config needs a few hundred); use fewer aliases"
            )

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self._path.append(_label(index))
        try:
            event: yaml.NodeEvent = self.peek_event()  # type: ignore[no-untyped-call]  # untyped in the stubs
            if isinstance(event, yaml.AliasEvent):
                size = self._sizes.get(str(event.anchor))
                if size is None and event.anchor in self.anchors:
                    raise ConfigError(f"{self._where()}: the alias *{event.anchor} is inside the node it names")
                node = super().compose_node(parent, index)  # an undefined alias is PyYAML's ComposerError
                self._count(size or 0)
                return node
            if isinstance(event, yaml.CollectionStartEvent) and len(self._path) > MAX_CONFIG_DEPTH:
                raise ConfigError(
                    f"{self._where()}: nested more than {MAX_CONFIG_DEPTH} levels deep (a config needs about 10)"
                )
            before = self._nodes
            self._count(1)
            node = super().compose_node(parent, index)
            if event.anchor is not None:
                self._sizes[str(event.anchor)] = self._nodes - before
            return node
        finally:
            self._path.pop()

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as exc:  # e.g. the date 2001-13-45, an int of 5000 digits
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read this value: {exc}", node.start_mark
            ) from None


def _decode(data: bytes, source: str) -> str:
    """The file's bytes as text: UTF-8 (a BOM allowed), at most MAX_CONFIG_BYTES."""
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{source}: the file is larger than {MAX_CONFIG_BYTES} bytes (a config is a few KiB)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        start = data.rfind(b"\n", 0, exc.start) + 1
        line = data.count(b"\n", 0, exc.start) + 1
        before = data[start : exc.start].decode("utf-8", errors="replace")
        key, colon, _ = before.partition(":")
        where = f"in the value of {key.strip().lstrip('- ')!r}" if colon and key.strip() else "in a key"
        raise ConfigError(
            f"{source}: line {line}, column {len(before) + 1} ({where}): byte 0x{data[exc.start]:02x} "
            f"at offset {exc.start} is not UTF-8; the config must be UTF-8 text"
        ) from None


def parse_config(text: str, source: str = "<config>") -> Config:
    """Parse and validate YAML text; raise ConfigError with every problem found."""
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{source}: the text is longer than {MAX_CONFIG_BYTES} characters (a config is a few KiB)")
    try:
        loader = _BoundedLoader(text)  # the reader checks every character here
        try:
            raw = loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from None
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    except Exception as exc:  # only reading and building YAML values runs in this block
        # PyYAML's own constructors raise plain Python errors on a tagged value they cannot build
        # (``!!float ''``, ``!!bool ''``, an empty ``!!timestamp``): the file is at fault.
        raise ConfigError(f"{source}: not valid YAML: a value cannot be built as its tag says ({exc!r})") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of sections, got {type(raw).__name__}")
    if "routes" in raw:
        raise ConfigError(
            f"{source}: routes: unknown key; a route is an entry of models: "
            "({ID: {route: {...}}}, docs/routing.md)"
        )
    literal = _literal_secrets(raw)
    if literal:
        where = ", ".join(literal)
        raise ConfigError(
            f"{source}: {where}: secrets come only from the environment; write ${{NAME}} (value not shown)"
        )
    found: list[str] = []
    try:
        config = Config.model_validate(_expand(raw, "", found))
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    except ValidationError as exc:
        raise ConfigError(f"{source}: invalid configuration:\n{_describe(exc, found)}") from None
    except RecursionError:  # the depth bound keeps this from happening; never a traceback if it does
        raise ConfigError(f"{source}: a value is nested too deeply to validate (e.g. a tool's JSON schema)") from None
    config._secrets = [s for s in found if len(s) >= 4]
    return config


def load_config(path: str | Path) -> Config:
    p = Path(path)
    try:
        with p.open("rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the config file: {exc.strerror}") from None
    return parse_config(_decode(data, str(p)), str(p))


def load_default_config() -> Config:
    """The embedded default: the bundled local provider and tool backend, no keys, no network."""
    return parse_config(resources.files("sidecar").joinpath(DEFAULT_CONFIG).read_text(), "embedded default")
