"""The sections about this process: ``server`` (with its TLS, tokens and connection limits), ``http``
(with its connection limits), ``policy``, ``telemetry`` and ``state``."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator

from sidecar.config.bounds import (
    CALLER_NAME,
    DEFAULT_CHECK_TIME_LIMIT_S,
    DEFAULT_GRACE_PERIOD_S,
    DEFAULT_GRPC_AGE_GRACE_S,
    DEFAULT_GRPC_HANDSHAKE_TIMEOUT_S,
    DEFAULT_GRPC_IDLE_TIMEOUT_S,
    DEFAULT_GRPC_KEEPALIVE_TIME_S,
    DEFAULT_GRPC_KEEPALIVE_TIMEOUT_S,
    DEFAULT_GRPC_MAX_AGE_S,
    DEFAULT_GRPC_MIN_PING_INTERVAL_S,
    DEFAULT_HTTP_BODY_TIMEOUT_S,
    DEFAULT_HTTP_HEAD_TIMEOUT_S,
    DEFAULT_HTTP_IDLE_TIMEOUT_S,
    DEFAULT_LISTEN,
    DEFAULT_MAX_ARGUMENT_BYTES,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CORRECTIONS,
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_STATE_PREFIX,
    DEFAULT_STATE_TIMEOUT_MS,
    DEFAULT_TOOL_RETRIES,
    DEFAULT_UPSTREAM_RETRIES,
    MAX_CALLER_RPS,
    MAX_CALLER_TPM,
    MAX_CONNECTION_WAIT_S,
    MAX_CONNECTIONS_LIMIT,
    MAX_IN_FLIGHT_LIMIT,
    MAX_PORT,
    MAX_STATE_TIMEOUT_MS,
    MAX_WORKERS,
    MIN_TOKEN_CHARS,
)
from sidecar.config.fields import HostPort, Listen
from sidecar.config.redis_dial import RedisTlsConfig, SentinelConfig, check_dial
from sidecar.config.tools import DEFAULT_DEDUPE_WINDOW_S, DedupeWindow
from sidecar.core.settings import MAX_WAIT_S, PRESETS, CircuitConfig, Strict, Window, Windows

__all__ = [
    "CallerConfig",
    "GrpcConnectionsConfig",
    "HttpConfig",
    "HttpConnectionsConfig",
    "PolicyConfig",
    "ServerAdminConfig",
    "ServerAuthConfig",
    "ServerConfig",
    "StateConfig",
    "TelemetryConfig",
    "TlsConfig",
]


class TlsConfig(Strict):
    """TLS on the gRPC port. PEM files, read when the server starts; ``client_ca`` set means mTLS."""

    cert: str
    """The server's certificate chain (PEM)."""
    key: str
    """The server's private key (PEM)."""
    client_ca: str | None = None
    """CA certificates (PEM): clients must present a certificate signed by one of them."""


class CallerConfig(Strict):
    """One caller of ``server.auth.tokens``, written as an object: its token and, optionally, its name and
    its limits (the caller's own, at the doors: ``server.callers``, docs/configuration.md)."""

    token: SecretStr
    """From the environment (``${AGENT_A_TOKEN}``), never written in the file."""
    name: Annotated[str, Field(pattern=CALLER_NAME)] | None = None
    """The caller's name in the state view, the metrics' ``sidecar.caller`` label and the spans; never the
    token. Required with a limit; unnamed, a caller is shown as ``tokens[i]``."""
    requests_per_second: Annotated[float, Field(gt=0, le=MAX_CALLER_RPS)] | None = None
    """CallModel, StreamModel and ExecuteTool calls (and the doors' calls: a model front's POST, MCP's
    tools/call) a second; a burst of up to ``max(1, requests_per_second)`` at once. Unset: no limit."""
    tokens_per_minute: Annotated[int, Field(ge=1, le=MAX_CALLER_TPM)] | None = None
    """Model tokens a minute, charged as a call starts: its input estimate plus its output budget. Unset:
    no limit."""

    @model_validator(mode="after")
    def _named(self) -> CallerConfig:
        if self.name is None and (self.requests_per_second is not None or self.tokens_per_minute is not None):
            raise ValueError(
                "name: required with requests_per_second or tokens_per_minute "
                "(the caller's name in the state view, the metrics and the spans; never the token)"
            )
        return self


class ServerAuthConfig(Strict):
    """Per-agent bearer tokens: a call must carry ``authorization: Bearer <one of them>``.

    Each entry is a token (``${AGENT_A_TOKEN}``) or a caller with a name and limits
    (``{token: ${AGENT_A_TOKEN}, name: agent-a, requests_per_second: 5, tokens_per_minute: 20000}``)."""

    tokens: Annotated[list[CallerConfig], Field(min_length=1)]
    """Each from the environment (``${AGENT_A_TOKEN}``), never written in the file."""

    @field_validator("tokens", mode="before")
    @classmethod
    def _plain(cls, value: Any) -> Any:
        """A plain secret is a caller with no name and no limit (the form before limits existed)."""
        if not isinstance(value, list):
            return value
        return [{"token": v} if isinstance(v, str) else v for v in value]

    @model_validator(mode="after")
    def _strong(self) -> ServerAuthConfig:
        values = self.values()
        for i, value in enumerate(values):  # the messages never show a token
            if len(value) < MIN_TOKEN_CHARS:
                raise ValueError(f"tokens[{i}]: must be at least {MIN_TOKEN_CHARS} characters (value not shown)")
            if value in values[:i]:
                raise ValueError(f"tokens[{i}]: the same token as tokens[{values.index(value)}] (value not shown)")
        names = [c.name for c in self.tokens]
        for i, name in enumerate(names):
            if name is not None and name in names[:i]:
                raise ValueError(f"tokens[{i}].name: {name!r} is already tokens[{names.index(name)}]'s")
        return self

    def values(self) -> list[str]:
        """The tokens themselves, in order (the index is the caller's, ``server.callers``)."""
        return [c.token.get_secret_value() for c in self.tokens]


class ServerAdminConfig(Strict):
    """Who may read the admin state view (``GET /admin/state``, ``sidecar.v1.Admin/GetState``) and who may act
    (the operator actions, reload): ``Authorization: Bearer <one of tokens>`` for both; with ``read_on_loopback``,
    a caller on this machine's loopback reads the view without one.

    A caller's token (``server.auth``) is refused there. Unset, the admin view is off (403).
    """

    tokens: list[SecretStr] = []
    """Each from the environment (``${SIDECAR_ADMIN_TOKEN}``), never written in the file. None: no operator
    may act (the actions and reload are refused), and only ``read_on_loopback`` opens the view."""
    read_on_loopback: bool = False
    """The view answers a caller whose address is loopback (127.0.0.0/8, ::1) without a token; actions and
    reload still need one of ``tokens``. The embedded default sets it (``sidecar status`` against ``make run``
    needs no setup). Not where a proxy on this machine forwards other hosts' requests to the port: their
    address would be the proxy's (docs/security.md)."""

    @model_validator(mode="after")
    def _strong(self) -> ServerAdminConfig:
        if not self.tokens and not self.read_on_loopback:
            raise ValueError(
                "give tokens (names of environment variables holding operator tokens) or read_on_loopback: true; "
                "an admin section with neither opens nothing"
            )
        values = [t.get_secret_value() for t in self.tokens]
        for i, value in enumerate(values):  # the messages never show a token
            if len(value) < MIN_TOKEN_CHARS:
                raise ValueError(f"tokens[{i}]: must be at least {MIN_TOKEN_CHARS} characters (value not shown)")
            if value in values[:i]:
                raise ValueError(f"tokens[{i}]: the same token as tokens[{values.index(value)}] (value not shown)")
        return self


Wait = Annotated[float, Field(gt=0, le=MAX_CONNECTION_WAIT_S)]
"""A connection limit in seconds: above 0, at most a day."""
MaxConnections = Annotated[int, Field(ge=1, le=MAX_CONNECTIONS_LIMIT)]


class GrpcConnectionsConfig(Strict):
    """How long the gRPC port keeps a connection, and how many it holds (gRPC core's channel arguments;
    the defaults and why: ``bounds``, docs/security.md)."""

    max_connections: MaxConnections = DEFAULT_MAX_CONNECTIONS
    """Connections held at once; past it gRPC closes a new one as it is accepted (the client: UNAVAILABLE)."""
    handshake_timeout_s: Wait = DEFAULT_GRPC_HANDSHAKE_TIMEOUT_S
    """TLS and the HTTP/2 preface must be through within this, or the connection is closed."""
    idle_timeout_s: Wait = DEFAULT_GRPC_IDLE_TIMEOUT_S
    """A connection with no call this long is sent GOAWAY and closed."""
    max_age_s: Wait | None = DEFAULT_GRPC_MAX_AGE_S
    """A connection this old takes no new call (GOAWAY); None: no age limit."""
    age_grace_s: Wait = DEFAULT_GRPC_AGE_GRACE_S
    """After an age GOAWAY, how long the calls in flight may still run before they are cut (UNAVAILABLE)."""
    keepalive_time_s: Wait = DEFAULT_GRPC_KEEPALIVE_TIME_S
    """The server pings a connection silent this long, to find a peer that is gone."""
    keepalive_timeout_s: Wait = DEFAULT_GRPC_KEEPALIVE_TIMEOUT_S
    """A ping unanswered this long closes the connection."""
    min_ping_interval_s: Wait = DEFAULT_GRPC_MIN_PING_INTERVAL_S
    """A client pinging more often is sent GOAWAY (too_many_pings)."""


class HttpConnectionsConfig(Strict):
    """How long the HTTP port waits on a client, and how many connections it holds (the defaults and why:
    ``bounds``, docs/security.md). An answer being sent, however long (a stream), is never cut."""

    max_connections: MaxConnections = DEFAULT_MAX_CONNECTIONS
    """Connections held at once; past it the longest idle one is closed, else one still sending its head,
    else the new one (never a request being read or answered)."""
    head_timeout_s: Wait = DEFAULT_HTTP_HEAD_TIMEOUT_S
    """A request head must arrive whole within this from its first byte."""
    body_timeout_s: Wait = DEFAULT_HTTP_BODY_TIMEOUT_S
    """A request body must arrive whole within this from the end of its head."""
    idle_timeout_s: Wait = DEFAULT_HTTP_IDLE_TIMEOUT_S
    """A connection with no request under way (new, or its last answer sent) is closed after this."""


class ServerConfig(Strict):
    listen: Listen = DEFAULT_LISTEN
    """``host:port`` or ``unix:/path/to.sock``."""
    max_message_bytes: Annotated[int, Field(gt=0, le=256 * 1024 * 1024)] = DEFAULT_MAX_MESSAGE_BYTES
    grace_period_s: Annotated[float, Field(ge=0, le=3600)] = DEFAULT_GRACE_PERIOD_S
    reflection: bool = True
    max_in_flight: Annotated[int, Field(ge=1, le=MAX_IN_FLIGHT_LIMIT)] = DEFAULT_MAX_IN_FLIGHT
    """CallModel and ExecuteTool calls served at once; a call past it gets RESOURCE_EXHAUSTED at once."""
    tls: TlsConfig | None = None
    auth: ServerAuthConfig | None = None
    admin: ServerAdminConfig | None = None
    """The operator's tokens for the admin view and actions, and whether loopback reads it without one;
    unset: the admin view is off."""
    allow_insecure: bool = False
    """Serve a non-loopback address with neither ``tls`` nor ``auth`` (only on a private network)."""
    workers: Annotated[int, Field(ge=1, le=MAX_WORKERS)] | Literal["auto"] = 1
    """Processes serving ``listen`` together (SO_REUSEPORT); ``auto``: one per usable core (the CPUs
    it may run on, within its cgroup's quota: server/cores.py). More than one
    needs ``state.backend: redis`` (they share policy through it) and a host:port address."""
    watch_config: bool = False
    """Reload when the config file changes (its folder watched: a ConfigMap's swap is seen; docs/operations.md)."""
    reload_wait_s: Annotated[float, Field(gt=0, le=3600)] = 30.0
    """With ``workers`` > 1: how long the supervisor waits for each worker's reload outcome; a worker
    silent that long is named in the answer as not having reported (docs/operations.md)."""
    connections: GrpcConnectionsConfig = GrpcConnectionsConfig()
    """The gRPC port's connection limits: handshake, idle, age, keepalive, how many."""

    @model_validator(mode="after")
    def _admin_apart(self) -> ServerConfig:
        """An operator's token must not also be an agent's: an agent holding it would be admitted to the
        admin door, and its calls would read as the operator's."""
        if self.admin is None or self.auth is None:
            return self
        agents = self.auth.values()
        for i, token in enumerate(self.admin.tokens):
            value = token.get_secret_value()
            if value in agents:
                raise ValueError(
                    f"admin.tokens[{i}]: the same token as auth.tokens[{agents.index(value)}]; an operator's "
                    "token must not also be an agent's (value not shown)"
                )
        return self


class HttpConfig(Strict):
    """The HTTP port (off unless set): the OpenAI-compatible front at ``/v1/chat/completions``, the
    Anthropic-compatible one at ``/v1/messages``, ``GET /v1/models``, the MCP front at ``/mcp``,
    ``GET /healthz``.

    It shares the gRPC port's transport security: ``server.tls`` (TLS / mTLS), ``server.auth``
    (``Authorization: Bearer <token>``), ``server.allow_insecure``.
    """

    listen: HostPort
    """``host:port`` (port 0 picks a free one)."""
    mcp: bool = True
    """Serve the configured tools as an MCP server (streamable HTTP) at ``/mcp``."""
    openai: bool = True
    """Serve the OpenAI-compatible front: ``POST /v1/chat/completions``, ``GET /v1/models``."""
    anthropic: bool = True
    """Serve the Anthropic-compatible front: ``POST /v1/messages`` (and ``GET /v1/models`` in its shape)."""
    connections: HttpConnectionsConfig = HttpConnectionsConfig()
    """The HTTP port's connection limits: head, body, idle, how many."""


class PolicyConfig(Strict):
    upstream_retries: Annotated[int, Field(ge=0, le=100)] = DEFAULT_UPSTREAM_RETRIES
    preset: Literal["batch", "interactive"] | None = None
    """The windows and attempt timeouts of every model without its own; unset: the door's, ``interactive`` at
    the HTTP fronts (an SDK call someone waits for) and ``batch`` over gRPC (docs/retries.md)."""
    windows: Windows | None = None
    """Overrides the preset's windows."""
    max_corrections: Annotated[int, Field(ge=0, le=10)] = DEFAULT_MAX_CORRECTIONS
    tool_retries: Annotated[int, Field(ge=0, le=100)] = DEFAULT_TOOL_RETRIES
    tool_window: Window = Window(min_s=0.2, max_s=1.0)
    """Tools retry transient faults in this window times min(attempt, 10), capped at tool_max_wait_s."""
    tool_max_wait_s: Annotated[float, Field(ge=0, le=MAX_WAIT_S)] = 30.0
    dedupe_window_s: DedupeWindow = DEFAULT_DEDUPE_WINDOW_S
    """How long a tool call with a job id and a call id is remembered: a re-send gets its outcome
    (or waits for it) instead of being sent again; a tool's own ``dedupe_window_s`` overrides it."""
    circuit: CircuitConfig = CircuitConfig()
    spend_caps: dict[str, Annotated[float, Field(ge=0)]] = {}
    """Workflow id -> cap in US dollars; ``"*"`` applies to every workflow without its own."""
    max_argument_bytes: Annotated[int, Field(ge=1024, le=64 * 1024 * 1024)] = DEFAULT_MAX_ARGUMENT_BYTES
    """ExecuteTool's arguments_json, and CallModel's response_schema_json, tools[].parameters_json and
    messages[].tool_calls[].arguments_json: each is refused (INVALID_INPUT) past this many bytes."""
    check_time_limit_s: Annotated[float, Field(gt=0, le=60)] = DEFAULT_CHECK_TIME_LIMIT_S
    """The CPU time one call's input may take to check (schema, arguments, guardrails, the reply
    against the caller's schema) before it is refused as INVALID_INPUT, counted on the checking thread
    (``core.cpu_budget``: time waiting for a core does not count); large checks run off the event loop."""
    mid_stream: Literal["restart", "fail", "continue"] = "restart"
    """StreamModel, a fault after deltas reached the caller: ``restart`` (a restart event, then the next
    attempt's deltas, within the call's retry budget), ``fail`` (STREAM_INTERRUPTED with the partial
    text) or ``continue`` (the next attempt prefilled with the text the caller holds, on a deployment
    that accepts a prefill; else STREAM_INTERRUPTED). A request's ``mid_stream`` overrides it. The HTTP
    fronts do not read it: they continue unless the caller's ``x-sidecar-mid-stream`` says otherwise."""

    def windows_for(self, preset: str | None, windows: Windows | None, door: str | None = None) -> Windows:
        """A model's windows: its own, its preset's, the policy's, the policy's preset's, the door's preset's."""
        return windows or (PRESETS[preset] if preset else (self.windows or PRESETS[self.preset or door or "batch"]))


class TelemetryConfig(Strict):
    record_content: bool = False
    """Record message content on spans (opt-in)."""
    prometheus_port: Annotated[int, Field(ge=0, le=MAX_PORT)] | None = None
    """Serve a Prometheus scrape endpoint on 127.0.0.1:PORT (0 = off unless set)."""
    log_format: Literal["json", "text"] = "json"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


class StateConfig(Strict):
    """Where throttles, pauses, circuits and spend live: this process (``memory``), or a Redis every
    replica naming the same ``url`` (or ``sentinel``) and ``prefix`` shares (docs/fleet.md)."""

    backend: Literal["memory", "redis"] = "memory"
    url: str | None = None
    """``redis://[user:password@]host:port/db``, ``rediss://`` (TLS) or ``unix:///path``; from the
    environment (``${REDIS_URL}``): its password is a secret, masked wherever text leaves."""
    sentinel: SentinelConfig | None = None
    """Instead of ``url``: the sentinels to ask for the primary, and its service name (config/redis_dial.py)."""
    username: SecretStr | None = None
    """The ACL user (``${REDIS_USERNAME}``); with ``password``, for the URL's server or Sentinel's primary."""
    password: SecretStr | None = None
    """Its password (``${REDIS_PASSWORD}``: a secret, never written in the file)."""
    tls: RedisTlsConfig | None = None
    """TLS's files: the CA, and a client certificate and key for mTLS (with a ``rediss://`` URL, or Sentinel)."""
    prefix: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")] = DEFAULT_STATE_PREFIX
    """Every key and the change channel start with it: replicas with the same prefix share state."""
    timeout_ms: Annotated[int, Field(ge=1, le=MAX_STATE_TIMEOUT_MS)] = DEFAULT_STATE_TIMEOUT_MS
    """A Redis operation slower than this is given up; the call goes on under local state."""
    shutdown_flush_s: Annotated[float, Field(ge=0, le=60)] = 5.0
    """At shutdown, how long operator actions still queued (Redis not reachable) are tried again
    before they are given up, each named in a WARNING (0: not tried)."""
    mode: Literal["single", "cluster"] = "single"
    """``single``: one Redis (with replicas behind it, or not); ``cluster``: a Redis Cluster, through redis-py's
    cluster client, from the seed nodes ``url`` and ``nodes`` name (docs/fleet.md#redis-cluster)."""
    nodes: list[str] = []
    """Cluster mode: seed nodes, ``host:port`` each (the cluster's other nodes are found from them)."""

    @model_validator(mode="after")
    def _url(self) -> StateConfig:
        if self.backend != "redis":
            return self
        user, has_password = self.username is not None, self.password is not None
        if self.mode == "cluster":
            if self.sentinel is not None:
                raise ValueError("state.sentinel is not for state.mode: cluster (a cluster names its own primaries)")
            self._cluster()
            if self.url:
                check_dial(self.url, None, self.tls, user, has_password)
            elif self.tls is not None:
                raise ValueError("state.tls in cluster mode needs a rediss:// seed in state.url (value not shown)")
            elif user and not has_password:
                raise ValueError("state.username needs state.password (an ACL user logs in with both)")
            return self
        if self.nodes:
            raise ValueError("state.nodes is for state.mode: cluster (one Redis is named by state.url)")
        check_dial(self.url, self.sentinel, self.tls, user, has_password)
        return self

    def _cluster(self) -> None:
        """Cluster mode's seeds: ``url`` (redis:// or rediss://, database 0) and ``nodes`` (host:port each)."""
        if not self.url and not self.nodes:
            raise ValueError("state.mode: cluster needs seed nodes: state.nodes: [host:port, ...] or state.url")
        if self.url:
            parts = urlsplit(self.url)
            if parts.scheme not in ("redis", "rediss"):
                raise ValueError("state.url in cluster mode must be a redis:// or rediss:// URL (value not shown)")
            if parts.path.strip("/") not in ("", "0"):
                raise ValueError("state.url in cluster mode names database 0 or none (a cluster has only 0)")
        for i, node in enumerate(self.nodes):
            host, _, port = node.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"state.nodes[{i}] must be host:port, e.g. 10.0.0.5:6379 (got {node!r})")
