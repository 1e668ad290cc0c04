"""One provider over HTTP, and one model attempt sent to it: the Sender the retry engine runs.

    attempt -> POST {base_url}{adapter path}, the adapter's body, the attempt's traceparent,
               a read timeout clipped to the caller's deadline
    no response (refused, reset, timeout)   -> Retry(TRANSIENT), no http
    2xx with a reply                        -> the reply, judged by the caller's ``judge`` (Done)
    2xx that is not a reply, or an error    -> providers.errors.classify_response: Retry or Fail
      object (overloaded_error in a 200)

The provider's own retries do not exist here: one attempt is one request, and the engine
decides about the next.

Each attempt's request is made from what the provider's ``httpx.AsyncClient`` merged once (its base
URL with the adapter's path, its default headers with the adapter's), and sent on the client's
transport itself (``ProviderClient.request``, ``AiohttpTransport.send``): the client's per-request layers (the URL
merge, auth, cookies, redirects, event hooks; none of them configured here) cost about a fifth of a
millisecond an attempt, measured, before a stream's first token.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

from sidecar.config import ModelConfig, ProviderConfig
from sidecar.core.kinds import RetrySignal
from sidecar.core.observer import AttemptStart, Target
from sidecar.core.retry import Attempt, Done, Fail, Retry
from sidecar.core.spend import SpendLedger, cost_of
from sidecar.core.taxonomy import SidecarFailure
from sidecar.core.text import endpoint_of
from sidecar.net.backend import AiohttpTransport, fast_transport
from sidecar.net.cookies import NoCookies
from sidecar.net.transport import fault_of, read_capped, text_of
from sidecar.providers.anthropic import AnthropicAdapter
from sidecar.providers.errors import Target as ErrorTarget
from sidecar.providers.errors import classify_response
from sidecar.providers.openai import OpenAIAdapter
from sidecar.providers.wire import Adapter, ChatReply, ChatRequest

__all__ = ["MAX_REPLY_BYTES", "ModelSender", "ProviderClient", "Spent"]

JSON_CONTENT_TYPE = "application/json"
MAX_REPLY_BYTES = 16 * 1024 * 1024
"""A provider answer is read up to this many bytes; a longer one is cut (and will not parse)."""


@dataclass(slots=True)
class ProviderClient:
    """A configured provider: its wire format, its HTTP client, the endpoint as it may be shown, and the
    URL a chat request goes to (the client's base URL and the adapter's path, merged once)."""

    name: str
    config: ProviderConfig
    adapter: Adapter
    client: httpx.AsyncClient
    """Owns the transport (``aclose``); its base URL and headers are merged into ``url`` and ``headers``."""
    transport: AiohttpTransport
    endpoint: str
    url: httpx.URL
    headers: dict[str, str]
    """The client's headers (httpx's defaults, the configured ones, the adapter's), names in lower case."""

    @classmethod
    def build(cls, name: str, cfg: ProviderConfig, embedded: dict[str, str], secrets: Iterable[str]) -> ProviderClient:
        base = cfg.base_url
        if base.startswith("embedded://"):
            rest = base[len("embedded://") :]
            key, _, tail = rest.partition("/")
            base = embedded.get(key, "http://127.0.0.1:9").rstrip("/") + ("/" + tail if tail else "")
        adapter: Adapter = OpenAIAdapter() if cfg.wire_format == "openai" else AnthropicAdapter(cfg.anthropic_version)
        api_key = cfg.api_key.get_secret_value() if cfg.api_key else None
        transport = fast_transport(
            httpx.Limits(max_connections=cfg.max_connections, max_keepalive_connections=cfg.max_keepalive_connections)
        )
        client = httpx.AsyncClient(
            base_url=base,
            headers={**cfg.headers, **adapter.headers(api_key)},
            transport=transport,
            timeout=httpx.Timeout(cfg.timeout_s, connect=cfg.connect_timeout_s),
            cookies=NoCookies(),
            trust_env=False,
        )
        endpoint = endpoint_of(base.rstrip("/") + adapter.path(), secrets)
        url = client.build_request("POST", adapter.path().lstrip("/")).url  # absolute: not merged per request
        headers = {k.lower(): v for k, v in client.headers.items()}
        return cls(name, cfg, adapter, client, transport, endpoint, url, headers)

    def request(self, body: Any, timeout: httpx.Timeout, headers: Mapping[str, str] | None = None) -> httpx.Request:
        """A chat POST of ``body`` as JSON (encoded as httpx encodes ``json=``) with the client's headers,
        and ``headers`` over them."""
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
        merged = {**self.headers, "content-type": JSON_CONTENT_TYPE, **(headers or {})}
        return httpx.Request(
            "POST", self.url, headers=merged, content=content, extensions={"timeout": timeout.as_dict()}
        )

    @property
    def server(self) -> tuple[str, int | None]:
        url = self.client.base_url
        return url.host, url.port

    async def aclose(self) -> None:
        await self.client.aclose()


@dataclass(slots=True)
class Spent:
    """Tokens and dollars of every attempt of one call."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


Judge = Callable[[ChatReply, Attempt], Awaitable[Any]]
"""What a reply means to the call (run while its attempt's span is open): the value of Done."""


class ModelSender:
    """One attempt of a chat request to one model of one provider."""

    __slots__ = (
        "_chat",
        "_judge",
        "_ledger",
        "_model",
        "_model_id",
        "_now",
        "_provider",
        "_secrets",
        "_spent",
        "_workflow",
    )

    def __init__(
        self,
        provider: ProviderClient,
        model_id: str,
        model: ModelConfig,
        chat: ChatRequest,
        *,
        judge: Judge,
        spent: Spent,
        ledger: SpendLedger,
        workflow: str,
        secrets: Iterable[str],
        now: Callable[[], datetime],
    ) -> None:
        self._provider = provider
        self._model_id = model_id
        self._model = model
        self._chat = chat
        self._judge = judge
        self._spent = spent
        self._ledger = ledger
        self._workflow = workflow
        self._secrets = secrets
        self._now = now

    def describe(self, number: int) -> AttemptStart:
        host, port = self._provider.server
        return AttemptStart(
            Target.MODEL,
            self._model_id,
            number,
            "POST",
            self._provider.endpoint,
            host=host,
            port=port,
            output_budget=self._chat.max_tokens,
        )

    async def send(self, attempt: Attempt) -> Done[Any] | Fail | Retry:
        provider = self._provider
        timeout = attempt.timeout(provider.config.timeout_s)
        request = provider.request(
            provider.adapter.body(self._chat),
            httpx.Timeout(timeout, connect=min(provider.config.connect_timeout_s, timeout)),
            attempt.record.trace_headers(),
        )
        try:
            response = await provider.transport.send(request)
            try:
                raw = await read_capped(response, MAX_REPLY_BYTES)
            finally:
                await response.aclose()
        except httpx.HTTPError as exc:
            fault = fault_of(exc)
            attempt.record.transport_fault("timeout" if "time" in fault.detail else type(exc).__name__, fault.detail)
            return Retry(RetrySignal.TRANSIENT, fault.detail)
        status = response.status_code
        attempt.record.answered(status)
        outcome = self._read(status, response.headers, text_of(response, raw))
        if isinstance(outcome, Retry):
            attempt.record.failed(str(status))
            return outcome
        if isinstance(outcome, SidecarFailure):
            attempt.record.failed(outcome.kind_name)
            return Fail(outcome)
        self._account(outcome, attempt)
        return Done(await self._judge(outcome, attempt))

    def _account(self, reply: ChatReply, attempt: Attempt) -> None:
        spent = self._spent
        spent.input_tokens += reply.input_tokens
        spent.output_tokens += reply.output_tokens
        usd = cost_of(self._model, reply.input_tokens, reply.output_tokens)
        spent.cost_usd += usd
        self._ledger.record(self._workflow, usd)
        attempt.record.usage(reply.input_tokens, reply.output_tokens, reply.raw_finish, reply.response_model)

    def _read(self, status: int, headers: Mapping[str, str], text: str) -> ChatReply | Retry | SidecarFailure:
        provider = self._provider
        if 200 <= status < 300:
            try:
                parsed = json.loads(text)
            except (ValueError, RecursionError):
                return Retry(RetrySignal.TRANSIENT, "the provider's reply was not JSON")
            if not isinstance(parsed, dict):
                return Retry(RetrySignal.TRANSIENT, "the provider's reply was not a JSON object")
            if parsed.get("type") != "error" and "error" not in parsed:
                try:
                    return provider.adapter.parse(parsed)
                except (TypeError, KeyError, ValueError, AttributeError, IndexError):
                    return Retry(RetrySignal.TRANSIENT, "the provider's reply had an unexpected shape")
            status = 500  # an error delivered with a success status (e.g. overloaded_error mid-stream)
        target = ErrorTarget(
            provider.name, provider.config.account, self._model_id, self._model.upstream_model, provider.endpoint
        )
        return classify_response(status, dict(headers), text, target, self._secrets, self._now())
