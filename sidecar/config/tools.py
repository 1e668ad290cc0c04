"""The tools: ``tools`` (an HTTP tool, or a tool of an MCP server) and ``mcp_servers``, with their guardrails."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from sidecar.config.bounds import DEFAULT_MCP_CONNECT_TIMEOUT_S, DEFAULT_MCP_TIMEOUT_S, EMBEDDED_TOOLS
from sidecar.config.fields import check_http_url, check_url
from sidecar.core.json_schemas import check_schema
from sidecar.core.patterns import PatternError, compile_pattern
from sidecar.core.settings import Strict

__all__ = [
    "DEFAULT_DEDUPE_WINDOW_S",
    "MAX_DEDUPE_WINDOW_S",
    "TOOL_TAGS",
    "AnyToolConfig",
    "DedupeWindow",
    "GuardrailConfig",
    "McpServerConfig",
    "McpToolConfig",
    "ToolConfig",
]

DEFAULT_DEDUPE_WINDOW_S = 600.0
"""How long a tool call (its job id and call id) is remembered by default (``policy.dedupe_window_s``):
longer than any call takes with the default timeouts and retries, and than a sidecar takes to restart."""
MAX_DEDUPE_WINDOW_S = 86_400.0
DedupeWindow = Annotated[float, Field(ge=0, le=MAX_DEDUPE_WINDOW_S, allow_inf_nan=False)]
"""Seconds a call is remembered (0: never)."""
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")
"""An HTTP header name (RFC 9110 token), at most 64 characters."""
_SET_BY_THE_SIDECAR = frozenset(
    {"host", "content-length", "content-type", "transfer-encoding", "connection", "traceparent", "tracestate"}
)


class GuardrailConfig(Strict):
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


class ToolConfig(Strict):
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
    """Default: true for GET and HEAD and for a tool with an ``idempotency_header``, false otherwise.
    A non-idempotent tool is re-sent only when the request certainly never reached the service."""
    idempotency_header: str | None = None
    """A header the service reads as an idempotency key, e.g. ``Idempotency-Key``: every attempt of a
    call carries one stable key (from its job id, call id, tool and arguments), so the tool is retried
    like an idempotent one."""
    dedupe_window_s: DedupeWindow | None = None
    """How long a call with a job id and a call id is remembered (its outcome replayed to a re-send);
    default ``policy.dedupe_window_s``, 0: never."""
    resource_type: str = "resource"
    id_parameter: str | None = None
    """The parameter that names the resource of a fetch (default: the first required one)."""
    guardrails: list[GuardrailConfig] = []

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        return check_url(v, EMBEDDED_TOOLS)

    @field_validator("parameters")
    @classmethod
    def _schema(cls, v: dict[str, Any]) -> dict[str, Any]:
        problem = check_schema(v)  # depth first, then the metaschema, patterns on RE2, every $ref
        if problem is not None:
            raise ValueError(f"not a valid JSON schema: it must {problem}")
        if v.get("type") != "object":
            raise ValueError('tool parameters must be a JSON schema with "type": "object"')
        return v

    @field_validator("idempotency_header")
    @classmethod
    def _header(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if not _TOKEN.match(v):
            raise ValueError("must be an HTTP header name (letters, digits and !#$%&'*+.^_`|~-), at most 64 long")
        if v.lower() in _SET_BY_THE_SIDECAR:
            raise ValueError(f"{v} is a header the sidecar sets itself; name the service's idempotency header")
        return v

    @model_validator(mode="after")
    def _key_not_in_headers(self) -> ToolConfig:
        name = self.idempotency_header
        if name is not None and any(h.lower() == name.lower() for h in self.headers):
            raise ValueError(f"idempotency_header {name} is also in headers: the sidecar sets it, one key per call")
        return self

    @property
    def is_idempotent(self) -> bool:
        if self.idempotent is not None:
            return self.idempotent
        return self.method in ("GET", "HEAD") or self.idempotency_header is not None

    @property
    def identifier_parameter(self) -> str | None:
        required = self.parameters.get("required") or []
        return self.id_parameter or (required[0] if required else None)


class McpServerConfig(Strict):
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
        return v if v is None else check_http_url(v)

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


class McpToolConfig(Strict):
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
    dedupe_window_s: DedupeWindow | None = None
    """As for an HTTP tool (an MCP tool takes no ``idempotency_header``: MCP has no such header)."""
    guardrails: list[GuardrailConfig] = []


AnyToolConfig = Annotated[ToolConfig | McpToolConfig, Field(discriminator="kind")]
TOOL_TAGS = frozenset({"search", "fetch", "mcp"})
"""The values of a tool's ``kind``: pydantic puts the one it chose into an error's location."""
