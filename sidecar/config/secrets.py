"""Secrets come only from the environment: ``${NAME}`` expanded, a secret written in the file refused,
and what is masked wherever text leaves the sidecar, found once when the file is loaded
(``Config.secrets``)."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

from sidecar.config.errors import ConfigError
from sidecar.core.redact import MIN_SECRET_CHARS
from sidecar.providers.formats.names import AWS_ENVIRONMENT, AwsEnvironment, registered

if TYPE_CHECKING:
    from collections.abc import Iterable

    from sidecar.config.document import Config

__all__ = [
    "AWS_ENVIRONMENT",
    "CREDENTIAL_HEADER",
    "ENV",
    "FROM_ENVIRONMENT",
    "AwsEnvironment",
    "discover",
    "expand",
    "literal_secrets",
    "password",
    "url_secrets",
]

ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
"""``${NAME}`` or ``${NAME:-default}``: a value read from the environment."""
_URL = re.compile(r"^https?://[^\s]+$")
"""A value read from the environment that is a whole URL: an address to show, save for its credentials
(``url_secrets``)."""
CREDENTIAL_HEADER = re.compile(r"(?i)auth|token|secret|key|cookie|password")
"""A header whose name matches carries a credential: its value is one of ``Config.secrets``."""


FROM_ENVIRONMENT = "secrets_from_environment"
"""The validation context's key for the values ``expand`` read from the environment."""


def password(url: str) -> str:
    """The password in ``scheme://user:password@host``, or ""."""
    try:
        return urlsplit(url).password or ""
    except ValueError:  # not a URL urlsplit can read (a bracket left open): no password to find
        return ""


def url_secrets(url: str) -> list[str]:
    """The credentials a URL carries: its ``user:password@`` password, and the value of every query
    parameter named like a credential (``?key=``, ``?api_key=``, redis-py's ``?password=``) but a
    ``{param}`` a tool call fills in."""
    try:
        query = parse_qsl(urlsplit(url).query)
    except ValueError:  # not a URL urlsplit can read: nothing to find
        return []
    named = [v for k, v in query if CREDENTIAL_HEADER.search(k) and "{" not in v]
    return [password(url), *named]


def expand(value: Any, path: str, found: list[str]) -> Any:
    """``value`` with every ``${NAME}`` replaced from the environment; ``found`` collects what came in."""
    if isinstance(value, dict):
        return {k: expand(v, f"{path}.{k}" if path else str(k), found) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v, f"{path}[{i}]", found) for i, v in enumerate(value)]
    if isinstance(value, str):

        def sub(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            got = os.environ.get(name)
            if got is None:
                if default is not None:
                    return default
                raise ConfigError(f"{path}: environment variable {name} is not set (the value is ${{{name}}})")
            found.extend(url_secrets(got) if _URL.match(got) else [got])  # a URL is an address, not a secret
            return got

        return ENV.sub(sub, value)
    return value


def literal_secrets(raw: dict[str, Any]) -> list[str]:
    """Keys of provider API keys (and Azure Entra tokens), server tokens and the state backend's passwords
    written in the file instead of read from the environment."""
    bad = _literal_tokens(raw) + _literal_state(raw)
    providers = raw.get("providers")
    if not isinstance(providers, dict):
        return bad
    for name, provider in providers.items():
        key = provider.get("api_key") if isinstance(provider, dict) else None
        if isinstance(key, str) and key and not ENV.fullmatch(key.strip()):
            bad.append(f"providers.{name}.api_key")
        azure = provider.get("azure") if isinstance(provider, dict) else None
        token = azure.get("entra_token") if isinstance(azure, dict) else None
        if isinstance(token, str) and token and not ENV.fullmatch(token.strip()):
            bad.append(f"providers.{name}.azure.entra_token")
    return bad


def _literal_tokens(raw: dict[str, Any]) -> list[str]:
    server = raw.get("server")
    bad: list[str] = []
    for section in ("auth", "admin"):
        part = server.get(section) if isinstance(server, dict) else None
        tokens = part.get("tokens") if isinstance(part, dict) else None
        if not isinstance(tokens, list):
            continue
        for i, entry in enumerate(tokens):
            where = f"server.{section}.tokens[{i}]"
            token = entry.get("token") if isinstance(entry, dict) else entry  # a caller as an object: its token
            if isinstance(entry, dict):
                where += ".token"
            if isinstance(token, str) and token and not ENV.fullmatch(token.strip()):
                bad.append(where)
    return bad


def _literal_state(raw: dict[str, Any]) -> list[str]:
    state = raw.get("state")
    sentinel = state.get("sentinel") if isinstance(state, dict) else None
    places = (("state.password", state), ("state.sentinel.password", sentinel))
    return [
        where
        for where, part in places
        if isinstance(part, dict)
        and isinstance(value := part.get("password"), str)
        and value
        and not ENV.fullmatch(value.strip())
    ]


def discover(config: Config, from_environment: Iterable[str] = ()) -> tuple[str, ...]:
    """What is masked wherever text leaves the sidecar, longest first.

    Every value read from the environment (``${NAME}``, ``from_environment``) but a whole ``http(s)://``
    URL, which is an address (only its ``user:password@`` password is a secret); each provider's API key
    and Azure Entra token; the agents' and the operators' tokens; for each wire format configured, the
    value of every variable it reads credentials from itself (its registry line's ``environment``: a
    Bedrock provider's ``AWS_ENVIRONMENT``, the access key id, the secret key, the session token, the
    bearer key); the value of every provider, tool or MCP server header and MCP
    server ``env`` variable named like a credential (``CREDENTIAL_HEADER``), and the part after its
    scheme word (``Bearer <token>``); the credentials of every URL configured (``url_secrets``: the
    providers', tools', MCP servers' and the state backend's, and one in a header or ``env`` value); the
    state backend's password and the sentinels' own (its ACL user is not a secret, but masked like every
    value read from the environment).
    """
    found = [*from_environment]
    found += [p.api_key.get_secret_value() for p in config.providers.values() if p.api_key]
    found += [t.get_secret_value() for p in config.providers.values() if p.azure and (t := p.azure.entra_token)]
    http_tools = config.http_tools.values()
    headers = [p.headers for p in config.providers.values()] + [t.headers for t in http_tools]
    headers += [m.headers for m in config.mcp_servers.values()] + [m.env for m in config.mcp_servers.values()]
    urls = [p.base_url for p in config.providers.values()] + [t.url for t in http_tools]
    urls += [m.url for m in config.mcp_servers.values() if m.url] + [config.state.url or ""]
    for name, value in ((k, v.strip()) for h in headers for k, v in h.items()):
        if CREDENTIAL_HEADER.search(name):
            found += [value, value.partition(" ")[2].strip()]
        urls.append(value)  # a URL in any header or env value (DATABASE_URL=postgres://u:p@h): its credentials
    for url in urls:
        found += url_secrets(url)
    state = config.state
    sentinel = state.sentinel
    for secret in (state.password, sentinel and sentinel.password):
        if secret:
            found.append(secret.get_secret_value())
    if config.server.auth is not None:
        found += config.server.auth.values()
    if config.server.admin is not None:
        found += [t.get_secret_value() for t in config.server.admin.tokens]
    formats = registered()
    for wire_format in {p.wire_format for p in config.providers.values()}:  # read by the format, not ${NAME}
        found += [os.environ.get(name, "") for name in formats[wire_format].environment]
    return tuple(sorted({k for k in found if len(k) >= MIN_SECRET_CHARS}, key=len, reverse=True))
