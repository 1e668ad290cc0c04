"""The configuration: one YAML file, validated at start, secrets only from the environment.

Sections: ``server``, ``policy``, ``providers``, ``models``, ``services``, ``tools``, ``telemetry``.
A string may hold ``${NAME}`` (or ``${NAME:-default}``), read from the environment; nothing else
reads secrets. An invalid file raises ``ConfigError`` naming the key, the value and what is wrong.
URLs of the form ``embedded://provider`` and ``embedded://tools`` name the bundled local provider
and tool backend, which ``sidecar serve`` then starts in-process.
"""

from __future__ import annotations

import os
import re
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
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

from sidecar.core.redact import mask_keys

__all__ = [
    "DEFAULT_CONFIG",
    "EMBEDDED_PROVIDER",
    "EMBEDDED_TOOLS",
    "PRESETS",
    "Config",
    "ConfigError",
    "GuardrailConfig",
    "ModelConfig",
    "ProviderConfig",
    "ServerAuthConfig",
    "ServerConfig",
    "ServiceConfig",
    "TlsConfig",
    "ToolConfig",
    "Window",
    "Windows",
    "load_config",
    "load_default_config",
    "parse_config",
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
"""The highest ``providers.*.max_connections``: httpcore scans its whole pool for every queued request."""
DEFAULT_UPSTREAM_RETRIES = 3
DEFAULT_TOOL_RETRIES = 2
DEFAULT_MAX_CORRECTIONS = 2

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class ConfigError(Exception):
    """The configuration is invalid; the message names key, value and what is wrong."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


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


class Window(_Strict):
    """A wait window in seconds; the wait is uniform in [min_s, max_s) times the attempt factor."""

    min_s: Annotated[float, Field(ge=0)]
    max_s: Annotated[float, Field(ge=0)]

    @model_validator(mode="before")
    @classmethod
    def _pair(cls, v: Any) -> Any:
        if isinstance(v, list | tuple) and len(v) == 2:
            return {"min_s": v[0], "max_s": v[1]}
        return v

    @model_validator(mode="after")
    def _order(self) -> Window:
        if self.max_s < self.min_s:
            raise ValueError(f"max_s ({self.max_s}) must not be below min_s ({self.min_s})")
        return self


class Windows(_Strict):
    """The wait windows of the three upstream signals. See docs/retries.md for choosing them."""

    rate_limit: Window = Window(min_s=5, max_s=30)
    overload: Window = Window(min_s=15, max_s=90)
    transient: Window = Window(min_s=5, max_s=30)
    factor_cap: Annotated[int, Field(ge=1, le=100)] = 10
    """The window is multiplied by min(attempt, factor_cap)."""
    max_wait_s: Annotated[float, Field(ge=0)] = 300.0
    """No single wait is longer than this."""


PRESETS: dict[str, Windows] = {
    # An unattended pipeline: the defaults, waiting minutes rather than failing.
    "batch": Windows(),
    # A person is waiting: short windows, a short cap; failing fast beats a minute of silence.
    "interactive": Windows(
        rate_limit=Window(min_s=0.5, max_s=3),
        overload=Window(min_s=1, max_s=6),
        transient=Window(min_s=0.25, max_s=2),
        factor_cap=4,
        max_wait_s=15,
    ),
}


class CircuitConfig(_Strict):
    """The per-service throttle and circuit (tools). Defaults are the runtime's numbers."""

    failure_step: Annotated[float, Field(gt=0)] = 1.0
    max_throttle: Annotated[float, Field(gt=0)] = 9.0
    failures_to_open: Annotated[int, Field(ge=1)] = 3
    cooldown_s: Annotated[float, Field(gt=0)] = 30.0
    max_cooldown_s: Annotated[float, Field(gt=0)] = 3600.0
    probe_timeout_s: Annotated[float, Field(gt=0)] = 60.0
    """A probe with no verdict after this long is lost: the circuit reopens, cooldown unchanged."""


class PolicyConfig(_Strict):
    upstream_retries: Annotated[int, Field(ge=0, le=100)] = DEFAULT_UPSTREAM_RETRIES
    preset: Literal["batch", "interactive"] = "batch"
    windows: Windows | None = None
    """Overrides the preset's windows."""
    max_corrections: Annotated[int, Field(ge=0, le=10)] = DEFAULT_MAX_CORRECTIONS
    tool_retries: Annotated[int, Field(ge=0, le=100)] = DEFAULT_TOOL_RETRIES
    tool_window: Window = Window(min_s=0.2, max_s=1.0)
    """Tools retry transient faults in this window times min(attempt, 10), capped at tool_max_wait_s."""
    tool_max_wait_s: Annotated[float, Field(ge=0)] = 30.0
    circuit: CircuitConfig = CircuitConfig()
    spend_caps: dict[str, Annotated[float, Field(ge=0)]] = {}
    """Workflow id -> cap in US dollars; ``"*"`` applies to every workflow without its own."""

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
    headers: dict[str, str] = {}
    anthropic_version: str = "2023-06-01"

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


QuirkKind = Literal[
    "INVALID_INPUT", "RESOURCE_NOT_FOUND", "EXTERNAL_SERVICE", "UPSTREAM_THROTTLE", "UNAUTHORIZED", "PERMISSION_DENIED"
]


class Quirk(_Strict):
    """A service's quirk, mapped onto an existing kind (never a new kind for one service)."""

    status: Annotated[int, Field(ge=100, le=599)] | None = None
    body_contains: str | None = None
    header: str | None = None
    """Matches when this response header is present."""
    kind: QuirkKind
    detail: str | None = None
    """What the message says the service meant, e.g. "robot detection"."""

    @model_validator(mode="after")
    def _something(self) -> Quirk:
        if self.status is None and self.body_contains is None and self.header is None:
            raise ValueError("a quirk must match on at least one of status, body_contains, header")
        return self


class ServiceConfig(_Strict):
    rate: Annotated[float, Field(gt=0)] = 100.0
    """Base rate: at most ``rate`` requests per ``per_s`` seconds (aiolimiter's leaky bucket)."""
    per_s: Annotated[float, Field(gt=0)] = 1.0
    quirks: list[Quirk] = []
    circuit: CircuitConfig | None = None


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
            re.compile(v)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None
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
        try:
            Draft202012Validator.check_schema(v)
        except SchemaError as exc:
            raise ValueError(f"not a valid JSON schema: {exc.message}") from None
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


class TelemetryConfig(_Strict):
    record_content: bool = False
    """Record message content on spans (opt-in)."""
    prometheus_port: Annotated[int, Field(ge=0, le=65535)] | None = None
    """Serve a Prometheus scrape endpoint on 127.0.0.1:PORT (0 = off unless set)."""
    log_format: Literal["json", "text"] = "json"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


class Config(_Strict):
    server: ServerConfig = ServerConfig()
    policy: PolicyConfig = PolicyConfig()
    providers: dict[str, ProviderConfig] = {}
    models: dict[str, ModelConfig] = {}
    services: dict[str, ServiceConfig] = {}
    tools: dict[str, ToolConfig] = {}
    telemetry: TelemetryConfig = TelemetryConfig()

    @model_validator(mode="after")
    def _references(self) -> Config:
        for model_id, model in self.models.items():
            if model.provider not in self.providers:
                known = ", ".join(self.providers) or "none"
                raise ValueError(
                    f"models.{model_id}.provider: {model.provider!r} is not a configured provider (known: {known})"
                )
        for name, tool in self.tools.items():
            if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
                raise ValueError(f"tools.{name}: a tool name must be 1-64 letters, digits, '_' or '-'")
            props = tool.parameters.get("properties", {})
            for placeholder in re.findall(r"\{([^}]+)\}", tool.url):
                if placeholder not in props:
                    raise ValueError(
                        f"tools.{name}.url: placeholder {{{placeholder}}} is not a parameter "
                        f"(parameters: {', '.join(props) or 'none'})"
                    )
        return self

    def service(self, name: str) -> ServiceConfig:
        return self.services.get(name) or ServiceConfig()

    def circuit_for(self, service: str) -> CircuitConfig:
        return self.service(service).circuit or self.policy.circuit

    _secrets: list[str] = PrivateAttr(default_factory=list)

    def secrets(self) -> list[str]:
        """Every value read from the environment (``${NAME}``): masked wherever text leaves the sidecar."""
        keys = [p.api_key.get_secret_value() for p in self.providers.values() if p.api_key]
        if self.server.auth is not None:
            keys += [t.get_secret_value() for t in self.server.auth.tokens]
        return sorted({*self._secrets, *(k for k in keys if len(k) >= 4)}, key=len, reverse=True)

    @property
    def embedded(self) -> set[str]:
        urls = [p.base_url for p in self.providers.values()] + [t.url for t in self.tools.values()]
        return {u.split("://", 1)[1].split("/", 1)[0] for u in urls if u.startswith("embedded://")}


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
            found.append(got)
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
        loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-"))
        msg = err["msg"].removeprefix("Value error, ")
        given = err.get("input")
        shown = "" if isinstance(given, dict) else f" (got {given!r})"
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        lines.append(f"{loc or '(top level)'}: {msg}{shown}")
    return mask_keys("\n".join(lines), secrets)


def parse_config(text: str, source: str = "<config>") -> Config:
    """Parse and validate YAML text; raise ConfigError with every problem found."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of sections, got {type(raw).__name__}")
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
    config._secrets = [s for s in found if len(s) >= 4]
    return config


def load_config(path: str | Path) -> Config:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the config file: {exc.strerror}") from None
    return parse_config(text, str(p))


def load_default_config() -> Config:
    """The embedded default: the bundled local provider and tool backend, no keys, no network."""
    return parse_config(resources.files("sidecar").joinpath(DEFAULT_CONFIG).read_text(), "embedded default")
