"""One provider over HTTP, and one model attempt sent to it: the Sender the retry engine runs.

    attempt -> POST {base_url}{upstream path}, the upstream's body, the attempt's traceparent,
               a read timeout clipped to the caller's deadline
    no response head within header_s        -> Retry(TRANSIENT), error.type header_timeout (on the injected
      (the scope's AttemptTimeouts)             clock; none when the deadline comes first); on a route's hop
                                                that moves on from a timeout: the hop ends at once,
                                                Fail(EXTERNAL_SERVICE) standing in for that Retry
    no response (refused, reset, timeout)   -> Retry(TRANSIENT), no http
    2xx with a reply                        -> the reply, judged by the caller's ``judge`` (Done)
    2xx that is not a reply, or an error    -> the upstream's ``classify`` (``providers.errors``): Retry or Fail
      object (overloaded_error in a 200)
    every answer, a success's too           -> its rate-limit headers read (``Upstream.budget``) and heard by
                                               the model's pacer (``CallScope.heard``: ``core.rate_budget``)

The provider's own retries do not exist here: one attempt is one request, and the engine
decides about the next.

Each attempt's request is made from what the provider's ``httpx.AsyncClient`` merged once (its base
URL with the upstream's path, its default headers with the upstream's), and sent on the client's
transport itself (``ProviderClient.request``, ``AiohttpTransport.send``): the client's per-request layers (the URL
merge, auth, cookies, redirects, event hooks; none of them configured here) cost about a fifth of a
millisecond an attempt, measured, before a stream's first token.

What every attempt of one call shares (the provider, the model, the judge, the tally of what was
spent, the ledger, the secrets, the clock) is one frozen ``CallScope``, built once per call; a
sender is that scope and the attempt's ``ChatRequest``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from sidecar.config import ModelConfig, ProviderConfig
from sidecar.config.catalog import AttemptTimeouts
from sidecar.core.clock import Clock
from sidecar.core.conversation import Usage
from sidecar.core.json_depth import loads
from sidecar.core.kinds import RetrySignal, TransportFault
from sidecar.core.observer import AttemptStart, Target
from sidecar.core.rate_budget import Budget
from sidecar.core.retry import Attempt, Done, Fail, Retry
from sidecar.core.spend import SpendLedger, cost_of
from sidecar.core.taxonomy import ExternalService, SidecarFailure
from sidecar.core.text import endpoint_of
from sidecar.net.backend import AiohttpTransport, fast_transport
from sidecar.net.cookies import NoCookies
from sidecar.net.transport import fault_of, read_capped, text_of
from sidecar.providers.errors import Target as ErrorTarget
from sidecar.providers.formats.chat import ChatReply, ChatRequest
from sidecar.providers.formats.protocol import Upstream
from sidecar.providers.formats.registry import format_named

__all__ = [
    "HEADER_TIMEOUT",
    "MAX_REPLY_BYTES",
    "CallScope",
    "ModelSender",
    "ProviderClient",
    "Route",
    "Spent",
    "TimedOut",
    "Timer",
]

JSON_CONTENT_TYPE = "application/json"
MAX_REPLY_BYTES = 16 * 1024 * 1024
"""A provider answer is read up to this many bytes; a longer one is cut (and will not parse)."""
NO_TIMEOUTS = AttemptTimeouts()
HEADER_TIMEOUT = "header_timeout"
"""error.type of an attempt that had no response head within its header timeout."""


@dataclass(frozen=True, slots=True)
class Route:
    """Where one model's chat requests go: the absolute URL, and the endpoint as it may be shown."""

    url: httpx.URL
    endpoint: str


@dataclass(slots=True)
class ProviderClient:
    """A configured provider: its wire format's upstream half, its HTTP client, and the routes its chat
    requests take (the client's base URL and the upstream's path, merged once per model)."""

    name: str
    config: ProviderConfig
    upstream: Upstream
    client: httpx.AsyncClient
    """Owns the transport (``aclose``); its base URL and headers are merged into routes and ``headers``."""
    transport: AiohttpTransport
    base: str
    """The base URL the provider's requests go to (an embedded fake resolved)."""
    secrets: tuple[str, ...]
    headers: dict[str, str]
    """The client's headers (httpx's defaults, the configured ones, the upstream's), names in lower case."""
    _routes: dict[tuple[str, bool], Route] = field(default_factory=dict)

    @classmethod
    def build(cls, name: str, cfg: ProviderConfig, embedded: dict[str, str], secrets: Iterable[str]) -> ProviderClient:
        base = cfg.base_url
        if base.startswith("embedded://"):
            rest = base[len("embedded://") :]
            key, _, tail = rest.partition("/")
            base = embedded.get(key, "http://127.0.0.1:9").rstrip("/") + ("/" + tail if tail else "")
        upstream = format_named(cfg.wire_format).upstream(cfg)
        api_key = cfg.api_key.get_secret_value() if cfg.api_key else None
        transport = fast_transport(
            httpx.Limits(max_connections=cfg.max_connections, max_keepalive_connections=cfg.max_keepalive_connections)
        )
        client = httpx.AsyncClient(
            base_url=base,
            headers={**cfg.headers, **upstream.headers(api_key)},
            transport=transport,
            timeout=httpx.Timeout(cfg.timeout_s, connect=cfg.connect_timeout_s),
            cookies=NoCookies(),
            trust_env=False,
        )
        headers = {k.lower(): v for k, v in client.headers.items()}
        return cls(name, cfg, upstream, client, transport, base, tuple(secrets), headers)

    def route(self, model: str, *, stream: bool = False) -> Route:
        """Where a chat request for the upstream ``model`` goes (merged on first use, then kept)."""
        key = (model, stream)
        found = self._routes.get(key)
        if found is None:
            path = self.upstream.path(model, stream=stream)
            url = self.client.build_request("POST", path.lstrip("/")).url  # absolute: not merged per request
            found = self._routes[key] = Route(url, endpoint_of(self.base.rstrip("/") + path, self.secrets))
        return found

    def request(
        self, route: Route, body: Any, timeout: httpx.Timeout, headers: Mapping[str, str] | None = None
    ) -> httpx.Request:
        """A chat POST of ``body`` as JSON (encoded as httpx encodes ``json=``) with the client's headers,
        and ``headers`` over them, as the upstream signs them (``Upstream.sign``: identity but for a format
        whose requests are signed, Bedrock's SigV4)."""
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
        merged = {**self.headers, "content-type": JSON_CONTENT_TYPE, **(headers or {})}
        merged = self.upstream.sign("POST", str(route.url), merged, content)  # SigV4 covers the URL and body
        return httpx.Request(
            "POST", route.url, headers=merged, content=content, extensions={"timeout": timeout.as_dict()}
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

    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0


Judge = Callable[[ChatReply, Attempt], Awaitable[Any]]
"""What a reply means to the call (run while its attempt's span is open): the value of Done."""
Heard = Callable[[Budget, int], None]
"""Who hears an answer's rate-limit budget, with its status (the model's pacer: ``ModelPacer.heard``)."""


def _deaf(budget: Budget, status: int) -> None:
    """No one paces by the budget (a scope built without a pacer)."""


@dataclass(frozen=True, slots=True)
class CallScope:
    """What every attempt of one model call shares: built once per call (a route's hop: once per hop)."""

    provider: ProviderClient
    model_id: str
    model: ModelConfig
    judge: Judge
    spent: Spent
    """Every attempt's tokens and dollars, added as they come."""
    ledger: SpendLedger
    workflow: str
    secrets: tuple[str, ...]
    clock: Clock
    timeouts: AttemptTimeouts = NO_TIMEOUTS
    """How long an attempt waits for the response head and (a stream) its first content delta."""
    timeouts_move_on: bool = False
    """A route's hop that moves on from a timed-out attempt at once (``CallOptions.timeouts_move_on``)."""
    heard: Heard = _deaf
    """Told every answer's rate-limit budget (``Upstream.budget``) as it arrives."""
    probe: bool = False
    """A route's hop that probes its deployment's half-open circuit (``CallOptions.probe``): its span says so."""

    def timed(self, timeouts: AttemptTimeouts, *, moves_on: bool, probe: bool = False) -> CallScope:
        """This scope with the model's attempt timeouts, whether a timeout ends the call (a hop) at once,
        and whether the hop is a circuit's probe."""
        return replace(self, timeouts=timeouts, timeouts_move_on=moves_on, probe=probe)


class TimedOut(Exception):
    """A ``Timer`` fired."""


class Timer:
    """``asyncio.timeout`` on the injected clock: at ``when`` (None: never) the task that entered the block is
    cancelled and ``TimedOut`` raised from it; a cancellation from anyone else passes through."""

    __slots__ = ("_cancel", "_cancelling", "_clock", "_fired", "_task", "_when")

    def __init__(self, clock: Clock, when: float | None) -> None:
        self._clock = clock
        self._when = when
        self._cancel: Callable[[], None] | None = None
        self._task: asyncio.Task[Any] | None = None
        self._cancelling = 0
        self._fired = False

    async def __aenter__(self) -> Timer:
        if self._when is not None:
            task = asyncio.current_task()
            assert task is not None, "a Timer runs in a task"
            self._task, self._cancelling = task, task.cancelling()
            self._cancel = self._clock.call_at(self._when, self._fire)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if self._cancel is not None:
            self._cancel()
            self._cancel = None
        if not self._fired or self._task is None:
            return
        if self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
            raise TimedOut from None

    def _fire(self) -> None:
        self._cancel = None
        self._fired = True
        assert self._task is not None
        self._task.cancel()


class ModelSender:
    """One attempt of a chat request to one model of one provider."""

    __slots__ = ("_chat", "_route", "_scope")

    def __init__(self, scope: CallScope, chat: ChatRequest, *, stream: bool = False) -> None:
        self._scope = scope
        self._chat = chat
        self._route = scope.provider.route(chat.upstream_model, stream=stream)

    def describe(self, number: int) -> AttemptStart:
        host, port = self._scope.provider.server
        return AttemptStart(
            Target.MODEL,
            self._scope.model_id,
            number,
            "POST",
            self._route.endpoint,
            host=host,
            port=port,
            output_budget=self._chat.max_tokens,
            probe=self._scope.probe,
        )

    async def send(self, attempt: Attempt) -> Done[Any] | Fail | Retry:
        provider = self._scope.provider
        timeout = attempt.timeout(provider.config.timeout_s)
        request = provider.request(
            self._route,
            provider.upstream.body(self._chat),
            httpx.Timeout(timeout, connect=min(provider.config.connect_timeout_s, timeout)),
            attempt.record.trace_headers(),
        )
        header_s = self._scope.timeouts.head_wait(stream=False, max_tokens=self._chat.max_tokens)
        if header_s is not None:
            header_s = min(header_s, provider.config.timeout_s)
        head_due = None if header_s is None or attempt.clipped(header_s) else attempt.clock.time() + header_s
        try:  # the transport excludes the upstream's time from the overhead (net.backend), its own work counted
            try:
                async with Timer(attempt.clock, head_due):
                    response = await provider.transport.send(request)
            except TimedOut:
                assert header_s is not None
                return self._timed_out(attempt, HEADER_TIMEOUT, f"no response headers within {header_s:g} s")
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
        self._heard(status, response.headers)
        outcome = self._read(status, response.headers, text_of(response, raw))
        if isinstance(outcome, Retry):
            attempt.record.failed(str(status))
            return outcome
        if isinstance(outcome, SidecarFailure):
            attempt.record.failed(outcome.kind_name)
            return Fail(outcome)
        self._account(outcome, attempt)
        return Done(await self._scope.judge(outcome, attempt))

    def _heard(self, status: int, headers: Mapping[str, str]) -> None:
        """The answer's rate-limit budget, to the model's pacer (on every answer, before it is read)."""
        scope = self._scope
        scope.heard(scope.provider.upstream.budget(headers, scope.clock.wall()), status)

    def _timed_out(self, attempt: Attempt, error_type: str, detail: str) -> Fail | Retry:
        """A timeout of the attempt's (no head, no first token): a transient fault; on a hop that moves on from
        one, the hop's end at once (EXTERNAL_SERVICE: the deployment did not answer), the pacer still told."""
        attempt.record.transport_fault(error_type, detail)
        retry = Retry(RetrySignal.TRANSIENT, detail)
        scope = self._scope
        if not scope.timeouts_move_on:
            return retry
        silent = ExternalService(
            scope.provider.name, self._route.endpoint, detail, fault=TransportFault.TIMEOUT, sent=True, idempotent=True
        )
        return Fail(silent, instead_of=retry)

    def _account(self, reply: ChatReply, attempt: Attempt) -> None:
        scope = self._scope
        spent = scope.spent
        usage = reply.usage
        spent.usage += usage
        usd = cost_of(scope.model, usage)
        spent.cost_usd += usd
        scope.ledger.record(scope.workflow, usd)
        attempt.record.usage(reply.input_tokens, reply.output_tokens, reply.raw_finish, reply.response_model)

    def _read(self, status: int, headers: Mapping[str, str], text: str) -> ChatReply | Retry | SidecarFailure:
        scope = self._scope
        upstream = scope.provider.upstream
        if 200 <= status < 300:
            try:
                parsed = loads(text)
            except ValueError:
                return Retry(RetrySignal.TRANSIENT, "the provider's reply was not JSON")
            if not isinstance(parsed, dict):
                return Retry(RetrySignal.TRANSIENT, "the provider's reply was not a JSON object")
            if parsed.get("type") != "error" and parsed.get("error") is None:  # a Response sends "error": null
                try:
                    return upstream.parse(parsed)
                except (TypeError, KeyError, ValueError, AttributeError, IndexError):
                    return Retry(RetrySignal.TRANSIENT, "the provider's reply had an unexpected shape")
            status = 500  # an error delivered with a success status (e.g. overloaded_error mid-stream)
        provider, model = scope.provider, scope.model
        target = ErrorTarget(
            provider.name, provider.config.account, scope.model_id, model.upstream_model, self._route.endpoint
        )
        return upstream.classify(status, dict(headers), text, target, scope.secrets, scope.clock.wall())
