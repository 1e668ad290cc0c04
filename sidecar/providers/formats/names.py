"""The registry's lines: every wire format by its name in the configuration, and what the configuration knows of it.

A format is registered here, in one line, and nowhere else (docs/architecture.md, "Wire formats")::

    name (providers[].wire_format)   where it is (a package holding FORMAT)   credentials it reads itself
    openai                           formats/openai_chat                      —
    anthropic                        formats/anthropic_messages               —
    gemini                           formats/gemini                           —
    openai_responses                 formats/openai_responses                 —
    bedrock_converse                 formats/bedrock_converse                 AWS_ENVIRONMENT's variables

Everything else is derived from these lines: the names a provider's ``wire_format`` may take and the
secrets found in the environment (``sidecar.config``, which imports this module and no other of
``sidecar.providers``: it imports nothing of the sidecar, so the configuration reads it without loading a
format), the formats themselves (``registry.format_named``, a package loaded when a provider or a door first
needs it), the HTTP doors (each format's ``door``) and the fake provider's wires (each format's ``fakes``).

A format from outside this folder (a plugin, a test's toy format) is registered by ``register`` before the
configuration is read, in the process that reads it (tests/formats/toy_format/ does, then starts the server).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AWS_ENVIRONMENT", "AwsEnvironment", "Registered", "register", "registered"]


@dataclass(frozen=True, slots=True)
class AwsEnvironment:
    """The environment variables a Bedrock provider's credentials come from, each by what it holds.

    The one list: ``formats.bedrock_converse`` reads its credentials from exactly these (botocore's
    ``EnvProvider`` given them as its mapping, the bearer key by name), and the configuration makes the
    value of every one a secret (``Registered.environment``), the access key id included (it is in every
    SigV4 ``Authorization``).
    """

    access_key: str = "AWS_ACCESS_KEY_ID"
    secret_key: str = "AWS_SECRET_ACCESS_KEY"
    tokens: tuple[str, ...] = ("AWS_SECURITY_TOKEN", "AWS_SESSION_TOKEN")
    """A session token: the first set of these (botocore's order; ``AWS_SECURITY_TOKEN`` is the older name)."""
    bearer: str = "AWS_BEARER_TOKEN_BEDROCK"
    """A Bedrock API key, sent as ``Authorization: Bearer`` (the provider's ``api_key`` comes first)."""

    @property
    def names(self) -> tuple[str, ...]:
        """Every variable above: each one's value is a secret."""
        return (self.access_key, self.secret_key, *self.tokens, self.bearer)


AWS_ENVIRONMENT = AwsEnvironment()


@dataclass(frozen=True, slots=True)
class Registered:
    """One format's line: where it is, and what the configuration must know of it before it is loaded."""

    package: str
    """The package whose ``FORMAT`` is the format (``protocol.WireFormat``)."""
    environment: tuple[str, ...] = ()
    """The environment variables the format reads credentials from by itself (not a ``${NAME}`` of the file):
    with a provider of the format configured, the value of each is one of ``Config.secrets``."""


_FORMATS = "sidecar.providers.formats"
_REGISTERED: dict[str, Registered] = {
    "openai": Registered(f"{_FORMATS}.openai_chat"),
    "anthropic": Registered(f"{_FORMATS}.anthropic_messages"),
    "gemini": Registered(f"{_FORMATS}.gemini"),
    "openai_responses": Registered(f"{_FORMATS}.openai_responses"),
    "bedrock_converse": Registered(f"{_FORMATS}.bedrock_converse", AWS_ENVIRONMENT.names),
}


def registered() -> dict[str, Registered]:
    """Every registered format by name, in the order registered (a copy)."""
    return dict(_REGISTERED)


def register(name: str, package: str, environment: tuple[str, ...] = ()) -> None:
    """Register a format kept outside this folder: ``package`` holds its ``FORMAT`` (its ``name`` is ``name``).

    Call it before the configuration is read, in the process that reads it. A name already registered
    to another package is a ValueError (a format is never replaced).
    """
    line = Registered(package, tuple(environment))
    if _REGISTERED.get(name, line) != line:
        raise ValueError(f"wire format {name!r} is already registered ({_REGISTERED[name].package})")
    _REGISTERED[name] = line
