"""The catalog: ``providers`` (where models are served) and ``models`` (deployments, and routes over them)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from sidecar.config.bounds import (
    DEFAULT_STREAM_IDLE_TIMEOUT_S,
    EMBEDDED_PROVIDER,
    INTERACTIVE_FIRST_TOKEN_TIMEOUT_S,
    INTERACTIVE_HEADER_TIMEOUT_S,
    INTERACTIVE_STREAM_IDLE_TIMEOUT_S,
    INTERACTIVE_WHOLE_REPLY_TOKENS_PER_S,
    MAX_PROVIDER_CONNECTIONS,
)
from sidecar.config.fields import check_url
from sidecar.core.hedging import Hedge, percentile_of
from sidecar.core.kinds import FailureKind
from sidecar.core.routing import (
    DEFAULT_MOVE_ON,
    DEPLOYMENT_CIRCUIT,
    MAX_ROUTE_DEPLOYMENTS,
    MAX_ROUTE_WEIGHT,
    MOVABLE_KINDS,
    never_reason,
)
from sidecar.core.settings import MAX_WAIT_S, CircuitConfig, Strict, Windows
from sidecar.providers.formats.names import registered

__all__ = [
    "AZURE_API_VERSION",
    "BATCH",
    "PRESET_TIMEOUTS",
    "AttemptTimeouts",
    "AzureConfig",
    "CompactionConfig",
    "ModelConfig",
    "ProviderConfig",
    "RouteConfig",
    "RouteEntry",
    "accepts_prefill",
]

Seconds = Annotated[float, Field(gt=0, le=MAX_WAIT_S)]


@dataclass(frozen=True, slots=True)
class AttemptTimeouts:
    """How long one model attempt waits for the provider's first signs of life (None: no limit of its own).

    ``header_s``: the response head (status and headers), from the request sent; a whole reply's head
    comes with the whole reply, so for CallModel it bounds the generation too. ``first_token_s``: a
    stream's first content delta (text, reasoning or a tool call; pings and empty chunks are not),
    from the request sent. Past either, the attempt is a transient fault (docs/configuration.md).
    """

    header_s: float | None = None
    first_token_s: float | None = None
    whole_tokens_per_s: float | None = None
    """A whole reply's header wait is at least its output budget at this rate (the preset's; None when
    ``header_s`` was configured): its head comes once the reply is generated."""
    idle_s: float = DEFAULT_STREAM_IDLE_TIMEOUT_S
    """A stream with no byte for this long (the head included) is a stall."""

    def head_wait(self, *, stream: bool, max_tokens: int) -> float | None:
        """How long an attempt waits for the response head."""
        if self.header_s is None or stream or not self.whole_tokens_per_s:
            return self.header_s
        return max(self.header_s, max_tokens / self.whole_tokens_per_s)


PRESET_TIMEOUTS: dict[str, AttemptTimeouts] = {
    "batch": AttemptTimeouts(),
    "interactive": AttemptTimeouts(
        INTERACTIVE_HEADER_TIMEOUT_S,
        INTERACTIVE_FIRST_TOKEN_TIMEOUT_S,
        INTERACTIVE_WHOLE_REPLY_TOKENS_PER_S,
        INTERACTIVE_STREAM_IDLE_TIMEOUT_S,
    ),
}
"""What a model's preset (its own, else ``policy.preset``, else the door's: ``CallOptions.preset``) sets when
neither the model nor its provider does."""
BATCH = "batch"
"""The preset when neither the model, the policy nor the door names one (gRPC's)."""


AZURE_API_VERSION = "2024-10-21"
"""The ``api-version`` of Azure OpenAI's deployment URLs when ``azure.api_version`` is unset (the GA version)."""


class AzureConfig(Strict):
    """Azure OpenAI on an OpenAI wire format (docs/providers.md, "Azure OpenAI"): where a model's requests go and
    how they authenticate. The model's ``upstream_model`` is its deployment's name."""

    path: Literal["deployments", "v1"] = "deployments"
    """``deployments``: ``{base_url}/openai/deployments/{upstream_model}/chat/completions?api-version=``;
    ``v1``: ``{base_url}/openai/v1/chat/completions`` (the deployment in the body's ``model``)."""
    api_version: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9.-]{0,39}$")] | None = None
    """The ``api-version`` query parameter: a deployment URL's always (unset: ``AZURE_API_VERSION``), the v1
    path's only when set (``preview``)."""
    entra_token: SecretStr | None = None
    """An Entra ID bearer token (``${NAME}``), sent as ``Authorization: Bearer`` instead of the provider's
    ``api_key`` in ``api-key``; one of the two."""

    @field_validator("api_version", mode="before")
    @classmethod
    def _version_as_written(cls, v: object) -> object:
        """``api_version: 2024-10-21`` unquoted is a date to YAML: the version as written."""
        return v.isoformat() if isinstance(v, date) else v


class ProviderConfig(Strict):
    wire_format: str
    """A registered wire format's name (``providers.formats.names``: the registry's lines)."""
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
    region: str = ""
    """bedrock_converse: the AWS region SigV4 signs for; unset: the base URL's, else AWS_REGION."""
    stream_idle_timeout_s: Annotated[float, Field(gt=0, le=MAX_WAIT_S)] | None = None
    """StreamModel: no byte from this provider for this long is a stall (a mid-stream fault); unset: the
    model's preset says (``batch`` 30 s, ``interactive`` 15 s)."""
    prefill: bool | None = None
    """Whether the provider continues a conversation's last assistant message (a prefill), which
    ``mid_stream: continue`` needs; unset: ``anthropic`` yes, OpenAI's own API (and Azure's) no, any other
    tried, and a 400 to the prefilled request remembered as no (``providers.streaming.prefills``). A model
    may override it."""
    header_timeout_s: Seconds | None = None
    """No response head this long after the request went out: a header timeout (``AttemptTimeouts``);
    unset: the model's preset says (``PRESET_TIMEOUTS``). At most ``timeout_s``, which bounds the head too."""
    first_token_timeout_s: Seconds | None = None
    """StreamModel: no content delta this long after the request went out: a first-token timeout;
    unset: the model's preset says."""
    azure: AzureConfig | None = None
    """Azure OpenAI's URLs and keys on an OpenAI wire format (``AzureConfig``)."""

    @field_validator("wire_format")
    @classmethod
    def _registered(cls, v: str) -> str:
        known = registered()
        if v not in known:
            names = [repr(name) for name in known]
            listed = " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
            raise ValueError(f"must be a wire format: {listed}")
        return v

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        return check_url(v, EMBEDDED_PROVIDER)

    @model_validator(mode="after")
    def _header_within_read(self) -> ProviderConfig:
        if self.header_timeout_s is not None and self.header_timeout_s > self.timeout_s:
            raise ValueError(
                f"header_timeout_s ({self.header_timeout_s:g}) must not exceed timeout_s ({self.timeout_s:g}), "
                "which bounds the wait for the response head as well"
            )
        return self

    @model_validator(mode="after")
    def _azure(self) -> ProviderConfig:
        if self.azure is None:
            return self
        if not self.wire_format.startswith("openai"):
            raise ValueError(f"azure: Azure OpenAI speaks an OpenAI wire format, not {self.wire_format}")
        if self.wire_format == "openai_responses" and self.azure.path == "deployments":
            raise ValueError("azure.path: Azure serves the Responses API at /openai/v1/responses only: set path: v1")
        if self.azure.entra_token is not None and self.api_key is not None:
            raise ValueError("azure.entra_token and api_key: set one (the token as a bearer, or the key in api-key)")
        return self


class PartLimits(Strict):
    """What one model call's content parts may hold (the provider's own limits by default)."""

    max_parts: Annotated[int, Field(gt=0, le=10_000)] = 100
    """Image and document parts in the whole conversation (Anthropic takes at most 100 images)."""
    max_image_bytes: Annotated[int, Field(gt=0)] = 5 * 1024 * 1024
    """One inline image's bytes (Anthropic: 5 MB; OpenAI: 20 MB)."""
    max_document_bytes: Annotated[int, Field(gt=0)] = 32 * 1024 * 1024
    """One inline document's bytes (Anthropic and OpenAI: 32 MB)."""
    image_media_types: tuple[str, ...] = ("image/png", "image/jpeg", "image/gif", "image/webp")
    document_media_types: tuple[str, ...] = ("application/pdf", "text/plain")


class CompactionConfig(Strict):
    """How a model's conversation is compacted under ``on_overflow: compact`` (docs/reliability.md#compaction)."""

    strategies: list[Literal["tool_results", "reasoning", "summarize"]] | None = None
    """In the order tried; unset: tool_results, reasoning, then summarize when a summarizer is named."""
    keep_tool_results: Annotated[int, Field(ge=0, le=1000)] = 2
    """The newest tool results kept whole by tool_results."""
    summarizer: str | None = None
    """The catalog model that writes summaries (a cheaper one); summarize needs it."""
    summary_max_tokens: Annotated[int, Field(gt=0, le=100_000)] = 1024
    """The cap on a summary's tokens (the summarizer's max_output_tokens)."""

    @field_validator("strategies")
    @classmethod
    def _once_each(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and (not v or len(set(v)) != len(v)):
            raise ValueError("name each strategy once, at least one")
        return v

    @model_validator(mode="after")
    def _summarizer_named(self) -> CompactionConfig:
        if self.strategies and "summarize" in self.strategies and self.summarizer is None:
            raise ValueError("summarize needs a summarizer (a catalog model id)")
        return self

    @property
    def order(self) -> tuple[str, ...]:
        """The strategies in the order tried."""
        if self.strategies is not None:
            return tuple(self.strategies)
        return ("tool_results", "reasoning", *(("summarize",) if self.summarizer else ()))


class ModelConfig(Strict):
    provider: str
    upstream_model: str
    context_window: Annotated[int, Field(gt=0)]
    max_output_tokens: Annotated[int, Field(gt=0)]
    default_output_tokens: Annotated[int, Field(gt=0)] | None = None
    input_price_per_mtok: Annotated[float, Field(ge=0)] = 0.0
    output_price_per_mtok: Annotated[float, Field(ge=0)] = 0.0
    cache_read_price_per_mtok: Annotated[float, Field(ge=0)] | None = None
    """Input tokens read from the prompt cache; unset: the input price (no discount assumed)."""
    cache_write_price_per_mtok: Annotated[float, Field(ge=0)] | None = None
    """Input tokens written to the prompt cache; unset: the input price."""
    parts: PartLimits = PartLimits()
    requests_per_minute: Annotated[int, Field(ge=0)] = 0
    tokens_per_minute: Annotated[int, Field(ge=0)] = 0
    upstream_retries: Annotated[int, Field(ge=0, le=100)] | None = None
    preset: Literal["batch", "interactive"] | None = None
    windows: Windows | None = None
    max_corrections: Annotated[int, Field(ge=0, le=10)] | None = None
    prefill: bool | None = None
    """Whether this model continues a last assistant message; unset: its provider's ``prefill``."""
    header_timeout_s: Seconds | None = None
    """Overrides the provider's ``header_timeout_s`` for this model (one that thinks long before a whole
    reply); at most the provider's ``timeout_s`` (config checks)."""
    first_token_timeout_s: Seconds | None = None
    """Overrides the provider's ``first_token_timeout_s`` for this model."""
    on_overflow: Literal["fail", "compact"] = "fail"
    """A conversation that does not fit: fail (CONTEXT_OVERFLOW / TOKEN_ESTIMATE_EXCEEDS_LIMIT), or compact it."""
    compaction: CompactionConfig = CompactionConfig()

    def timeouts(self, provider: ProviderConfig, policy_preset: str | None) -> AttemptTimeouts:
        """This model's attempt timeouts: its own, else its provider's, else its preset's (``PRESET_TIMEOUTS``:
        the model's, else ``policy_preset``, the policy's or the door's, else batch); a header wait at most the
        provider's ``timeout_s`` (set it to ``timeout_s`` for no shorter limit)."""
        preset = PRESET_TIMEOUTS[self.preset or policy_preset or BATCH]
        configured = self.header_timeout_s or provider.header_timeout_s
        header = configured or preset.header_s
        first = self.first_token_timeout_s or provider.first_token_timeout_s or preset.first_token_s
        rate = None if configured else preset.whole_tokens_per_s
        idle = provider.stream_idle_timeout_s or preset.idle_s
        return AttemptTimeouts(None if header is None else min(header, provider.timeout_s), first, rate, idle)

    @model_validator(mode="after")
    def _budget(self) -> ModelConfig:
        if self.default_output_tokens and self.default_output_tokens > self.max_output_tokens:
            raise ValueError("default_output_tokens must not exceed max_output_tokens")
        return self

    @property
    def output_budget(self) -> int:
        return self.default_output_tokens or min(self.max_output_tokens, 1024)


def accepts_prefill(model: ModelConfig, provider: ProviderConfig) -> bool | None:
    """Whether a deployment continues a last assistant message: the model's ``prefill``, else its
    provider's, else yes for ``anthropic``; None: not declared (``providers.streaming.prefills`` tries it)."""
    if model.prefill is not None:
        return model.prefill
    if provider.prefill is not None:
        return provider.prefill
    return True if provider.wire_format == "anthropic" else None


class RouteConfig(Strict):
    """A route: a model id whose calls go to its deployments (catalog models), docs/routing.md.

    Hops: ``balance`` (a weighted draw), then ``fallbacks`` in order; ``context_fallback`` takes a
    conversation that does not fit. ``move_on`` lists the failure kinds that go on to the next hop
    (default ``core.routing.DEFAULT_MOVE_ON``); ``circuit`` is the circuit of each of its
    deployments: a key it leaves out takes ``core.routing.DEPLOYMENT_CIRCUIT``'s value (not the tool
    services' defaults; ``max_cooldown_s`` left out is at least the ``cooldown_s`` given).
    ``hedge_after_s`` (seconds) or ``hedge_after`` (``p50`` .. ``p99.9`` of the deployment's observed
    times to first token, ``core.hedging``): a hop with no first token by then is raced by the next
    deployment of the order (docs/routing.md#hedging); one of them at most, on a route of two or more.
    """

    balance: dict[str, Annotated[float, Field(gt=0, le=MAX_ROUTE_WEIGHT)]] = {}
    fallbacks: list[str] = []
    context_fallback: str | None = None
    move_on: list[str] | None = None
    circuit: CircuitConfig | None = None
    hedge_after_s: Annotated[float, Field(gt=0, le=MAX_WAIT_S)] | None = None
    hedge_after: str | None = None

    @field_validator("hedge_after")
    @classmethod
    def _percentile(cls, v: str | None) -> str | None:
        if v is not None and percentile_of(v) is None:
            raise ValueError(
                f"{v!r} is not a percentile of the times to first token: write p50 .. p99.9 (e.g. p95), "
                "or give hedge_after_s in seconds instead"
            )
        return v

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

    @field_validator("circuit", mode="before")
    @classmethod
    def _deployment_defaults(cls, v: object) -> object:
        """A mapping's keys over DEPLOYMENT_CIRCUIT's values, so that what it leaves out is the deployments'."""
        if not isinstance(v, dict):
            return v
        merged = {**DEPLOYMENT_CIRCUIT.model_dump(), **v}
        cooldown = v.get("cooldown_s")
        if "max_cooldown_s" not in v and isinstance(cooldown, int | float) and not isinstance(cooldown, bool):
            merged["max_cooldown_s"] = max(DEPLOYMENT_CIRCUIT.max_cooldown_s, cooldown)
        return merged

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
        if self.hedge_after_s is not None and self.hedge_after is not None:
            raise ValueError("hedge_after_s and hedge_after: give one of them (seconds, or a percentile such as p95)")
        if self.hedge is not None and len(named) < 2:
            key = "hedge_after_s" if self.hedge_after_s is not None else "hedge_after"
            raise ValueError(f"{key}: hedging races a deployment with the next one; this route has only one")
        return self

    @property
    def hedge(self) -> Hedge | None:
        """The route's hedge, or None (``hedge_after_s`` / ``hedge_after`` not set)."""
        if self.hedge_after_s is not None:
            return Hedge(after_s=self.hedge_after_s)
        if self.hedge_after is not None:
            return Hedge(percentile=percentile_of(self.hedge_after))
        return None

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


class RouteEntry(Strict):
    """A ``models:`` entry that is a route: ``{route: {...}}`` and nothing else."""

    route: RouteConfig
