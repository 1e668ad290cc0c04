"""The sidecar's metrics, on the OpenTelemetry metrics API (no-op until an SDK is configured).

    name                               unit       kind       attributes
    gen_ai.client.operation.duration   s          histogram  gen_ai.operation.name, gen_ai.provider.name,
                                                             gen_ai.request.model | gen_ai.tool.name, error.type
    gen_ai.client.token.usage          {token}    histogram  the same (chat) + gen_ai.token.type = input | output
    gen_ai.client.operation.time_to_first_chunk    s  histogram  gen_ai.operation.name (chat), gen_ai.provider.name,
    gen_ai.client.operation.time_per_output_chunk  s  histogram    gen_ai.request.model; StreamModel attempts only
    sidecar.retries                    {retry}    counter    sidecar.retry.signal, sidecar.model | sidecar.service
    sidecar.attempts                   {attempt}  counter    sidecar.attempt.outcome = ok | failed | transport_fault,
                                                             sidecar.retry.signal (none when it saw none),
                                                             sidecar.attempt.kind = model | service,
                                                             sidecar.model | sidecar.service
    sidecar.wait.duration              s          histogram  sidecar.wait.reason = backoff | throttle,
                                                             sidecar.model | sidecar.service
    sidecar.failures                   {failure}  counter    sidecar.failure.kind, gen_ai.operation.name
    sidecar.model.throttle             1          gauge      sidecar.model
    sidecar.service.throttle           1          gauge      sidecar.service
    sidecar.service.circuit.state      1          gauge      sidecar.service (0 closed, 1 half-open, 2 open)
    sidecar.state.available            1          gauge      sidecar.state.backend (1 reachable, 0 an outage)
    sidecar.tokens                     {token}    counter    gen_ai.request.model, gen_ai.provider.name,
                                                             sidecar.token.type = input | output | cache_read |
                                                             cache_write | reasoning
    sidecar.spend                      USD        counter    gen_ai.request.model, gen_ai.provider.name (no workflow:
                                                             unbounded; a workflow's spend is the admin state's)
    sidecar.in_flight                  {call}     gauge      (none): calls holding an admission slot
    sidecar.admission.rejected         {call}     counter    (none): calls shed past server.max_in_flight
    sidecar.http.connections.closed    {connection} counter  reason = head_timeout | body_timeout | idle_timeout |
                                                             evicted | refused (http.connections)
    sidecar.overhead.duration          s          histogram  gen_ai.operation.name, gen_ai.request.model |
                                                             gen_ai.tool.name, sidecar.door = grpc | http | internal
    sidecar.http.replayed              {request}  counter    http.route (a model front's path), sidecar.failure.kind:
                                                             re-sent failures answered again with no call
    sidecar.caller.calls               {call}     counter    sidecar.caller (a name of server.auth.tokens, else
                                                             tokens[i]), sidecar.caller.outcome = admitted |
                                                             refused, sidecar.caller.limit = none |
                                                             requests_per_second | tokens_per_minute
    sidecar.caller.tokens              {token}    counter    sidecar.caller: model tokens charged as calls start
                                                             (input estimate + output budget; server.callers)

The two GenAI histograms carry the conventions' advised bucket boundaries. A model or tool name
the configuration does not know is recorded as ``_OTHER``, so a caller cannot grow the number of
series without bound. Every label value is otherwise a constant of ours or a name from the
configuration (a provider's wire format, a model, tool or service name), and every one passes
``masking.mask_label`` on its way in: a name read from the environment shows as «redacted».

The instruments are made once per process (a meter refuses a second instrument of the same name);
every ``Metrics`` records through them, and the gauges read every live ``Metrics``' sources.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from sidecar.telemetry import names as n
from sidecar.telemetry.masking import mask_label

__all__ = ["OTHER", "Metrics"]

OTHER = "_OTHER"
"""What an unknown model or tool name is recorded as."""

ModelThrottles = Callable[[], Iterable[tuple[str, float]]]
ServiceStates = Callable[[], Iterable[tuple[str, float, int]]]


class _Instruments:
    """The process's instruments, created on first use from the global meter provider."""

    def __init__(self) -> None:
        meter = metrics.get_meter(n.TRACER)
        self.duration = meter.create_histogram(
            n.METRIC_DURATION,
            unit="s",
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=list(n.DURATION_BUCKETS),
        )
        self.tokens = meter.create_histogram(
            n.METRIC_TOKENS,
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=[float(b) for b in n.TOKEN_BUCKETS],
        )
        self.first_chunk = meter.create_histogram(
            n.METRIC_TIME_TO_FIRST_CHUNK,
            unit="s",
            description="Time to receive the first chunk of a streamed reply, from the attempt's request",
            explicit_bucket_boundaries_advisory=list(n.DURATION_BUCKETS),
        )
        self.per_chunk = meter.create_histogram(
            n.METRIC_TIME_PER_OUTPUT_CHUNK,
            unit="s",
            description="Time from one chunk of a streamed reply to the next, for each chunk after the first",
            explicit_bucket_boundaries_advisory=list(n.DURATION_BUCKETS),
        )
        self.retries = meter.create_counter(
            n.METRIC_RETRIES, unit="{retry}", description="Upstream attempts re-sent, by the signal that caused them"
        )
        self.attempts = meter.create_counter(
            n.METRIC_ATTEMPTS,
            unit="{attempt}",
            description="Upstream attempts, by outcome and the retry signal they saw",
        )
        self.wait = meter.create_histogram(
            n.METRIC_WAIT,
            unit="s",
            description="Time spent waiting before an upstream attempt (backoff after a signal, throttle pacing)",
            explicit_bucket_boundaries_advisory=list(n.WAIT_BUCKETS),
        )
        self.failures = meter.create_counter(
            n.METRIC_FAILURES, unit="{failure}", description="Failed calls, by failure kind"
        )
        self.state = meter.create_gauge(
            n.METRIC_STATE_AVAILABLE,
            unit="1",
            description="Whether the shared state backend is reachable (0: decisions are local)",
        )
        self.overhead = meter.create_histogram(
            n.METRIC_OVERHEAD,
            unit="s",
            description="Time the sidecar itself added to a call (upstream time and deliberate waits excluded)",
            explicit_bucket_boundaries_advisory=list(n.OVERHEAD_BUCKETS),
        )
        self.token_total = meter.create_counter(
            n.METRIC_TOKENS_TOTAL, unit="{token}", description="Tokens spent, cache and reasoning tokens included"
        )
        self.spend = meter.create_counter(n.METRIC_SPEND, unit="USD", description="Spend of model calls, priced")
        self.connections_closed = meter.create_counter(
            n.METRIC_CONNECTIONS_CLOSED,
            unit="{connection}",
            description="HTTP connections closed by the port's limits (a slow or idle client, past the cap)",
        )
        self.replayed = meter.create_counter(
            n.METRIC_REPLAYED,
            unit="{request}",
            description="Re-sent failures an HTTP model front answered again at once, with no upstream call",
        )
        self.caller_calls = meter.create_counter(
            n.METRIC_CALLER_CALLS, unit="{call}", description="A caller's calls at the doors, admitted or refused"
        )
        self.caller_tokens = meter.create_counter(
            n.METRIC_CALLER_TOKENS, unit="{token}", description="Model tokens charged to a caller as its calls start"
        )
        self.reloads = meter.create_counter(
            n.METRIC_RELOADS, unit="{reload}", description="Config reloads tried, by outcome (applied, refused)"
        )
        self.sources: weakref.WeakSet[Metrics] = weakref.WeakSet()
        self.lock = threading.Lock()
        meter.create_observable_gauge(
            n.METRIC_MODEL_THROTTLE, [self._models], unit="1", description="A model's shared throttle (0 to 9)"
        )
        meter.create_observable_gauge(
            n.METRIC_SERVICE_THROTTLE, [self._services], unit="1", description="A tool service's throttle (0 to 9)"
        )
        meter.create_observable_gauge(
            n.METRIC_IN_FLIGHT, [self._in_flight], unit="{call}", description="Calls in flight (the admission limit)"
        )
        meter.create_observable_counter(
            n.METRIC_SHED, [self._shed], unit="{call}", description="Calls refused at once past the in-flight limit"
        )
        meter.create_observable_gauge(
            n.METRIC_CIRCUIT_STATE,
            [self._circuits],
            unit="1",
            description="A tool service's circuit: 0 closed, 1 half-open, 2 open",
        )

    def _live(self) -> list[Metrics]:
        with self.lock:
            return list(self.sources)

    def _in_flight(self, _: CallbackOptions) -> Iterable[Observation]:
        return [Observation(sum(m.admission()[0] for m in self._live() if m.admission is not None))]

    def _shed(self, _: CallbackOptions) -> Iterable[Observation]:
        return [Observation(sum(m.admission()[1] for m in self._live() if m.admission is not None))]

    def _models(self, _: CallbackOptions) -> Iterable[Observation]:
        out: dict[str, float] = {}
        for m in self._live():
            if m.model_throttles is not None:
                out.update(m.model_throttles())
        return [Observation(v, _labels({n.MODEL_ID: k})) for k, v in out.items()]

    def _service_states(self) -> dict[str, tuple[float, int]]:
        out: dict[str, tuple[float, int]] = {}
        for m in self._live():
            if m.service_states is not None:
                out.update({s: (t, c) for s, t, c in m.service_states()})
        return out

    def _services(self, _: CallbackOptions) -> Iterable[Observation]:
        return [Observation(t, _labels({n.SERVICE: s})) for s, (t, _c) in self._service_states().items()]

    def _circuits(self, _: CallbackOptions) -> Iterable[Observation]:
        return [Observation(c, _labels({n.SERVICE: s})) for s, (_t, c) in self._service_states().items()]


_instruments: _Instruments | None = None
_instruments_lock = threading.Lock()


def _get_instruments() -> _Instruments:
    global _instruments
    if _instruments is None:
        with _instruments_lock:
            if _instruments is None:
                _instruments = _Instruments()
    return _instruments


class Metrics:
    """One sidecar's handle on the process's instruments."""

    __slots__ = ("__weakref__", "_i", "admission", "model_throttles", "service_states")

    def __init__(self) -> None:
        self._i = _get_instruments()
        self.model_throttles: ModelThrottles | None = None
        self.service_states: ServiceStates | None = None
        self.admission: Callable[[], tuple[int, int]] | None = None
        """Calls in flight and calls shed since the start (``server.admission``)."""

    def observe_gauges(self, model_throttles: ModelThrottles, service_states: ServiceStates) -> None:
        """Report these models' throttles and these services' throttles and circuit states."""
        self.model_throttles = model_throttles
        self.service_states = service_states
        with self._i.lock:
            self._i.sources.add(self)

    def close(self) -> None:
        """Stop reporting this sidecar's gauges."""
        with self._i.lock:
            self._i.sources.discard(self)

    def operation(
        self, operation: str, target: str, seconds: float, error: str | None, provider: str | None = None
    ) -> None:
        """One CallModel (``chat``, target = model) or ExecuteTool (``execute_tool``, target = tool)."""
        attrs: dict[str, Any] = {n.GEN_AI_OPERATION: operation}
        if provider:
            attrs[n.GEN_AI_PROVIDER] = provider
        attrs[n.GEN_AI_REQUEST_MODEL if operation == n.OP_CHAT else n.GEN_AI_TOOL_NAME] = target
        if error:
            attrs[n.ERROR_TYPE] = error
        self._i.duration.record(seconds, _labels(attrs))

    def tokens(self, model: str, input_tokens: int, output_tokens: int, provider: str | None = None) -> None:
        base: dict[str, Any] = {n.GEN_AI_OPERATION: n.OP_CHAT, n.GEN_AI_REQUEST_MODEL: model}
        if provider:
            base[n.GEN_AI_PROVIDER] = provider
        base = _labels(base)
        self._i.tokens.record(input_tokens, {**base, n.GEN_AI_TOKEN_TYPE: "input"})
        self._i.tokens.record(output_tokens, {**base, n.GEN_AI_TOKEN_TYPE: "output"})

    def token_counts(self, model: str, provider: str, counts: Iterable[tuple[str, int]]) -> None:
        """Tokens spent by type (input, output, cache_read, cache_write, reasoning); zeros are not added."""
        base = _labels({n.GEN_AI_REQUEST_MODEL: model, n.GEN_AI_PROVIDER: provider or "unknown"})
        for kind, value in counts:
            if value:
                self._i.token_total.add(value, {**base, n.TOKEN_TYPE: kind})

    def spent(self, model: str, provider: str, usd: float) -> None:
        if usd > 0:
            self._i.spend.add(usd, _labels({n.GEN_AI_REQUEST_MODEL: model, n.GEN_AI_PROVIDER: provider or "unknown"}))

    def reloaded(self, outcome: str) -> None:
        """One config reload: ``applied`` or ``refused``."""
        self._i.reloads.add(1, {n.RELOAD_OUTCOME: outcome})

    def caller(self, name: str, outcome: str, limit: str, tokens: int) -> None:
        """One call of a caller at the doors (``server.callers``): ``admitted`` or ``refused`` by ``limit``
        (``none`` when admitted); ``tokens`` charged (0 for a refused call: it charges nothing)."""
        labels = _labels({n.CALLER: name, n.CALLER_OUTCOME: outcome, n.CALLER_LIMIT: limit})
        self._i.caller_calls.add(1, labels)
        if tokens:
            self._i.caller_tokens.add(tokens, _labels({n.CALLER: name}))

    def connection_closed(self, reason: str) -> None:
        """An HTTP connection the port's limits closed: ``reason`` is one of ``connections.REASONS``."""
        self._i.connections_closed.add(1, {n.CLOSE_REASON: reason})

    def replayed(self, route: str, kind: str) -> None:
        """A re-sent failure answered again with no call: the front's ``route`` (its path), the failure's ``kind``."""
        self._i.replayed.add(1, _labels({n.HTTP_ROUTE: route, n.FAILURE_KIND: kind}))

    def chunk_labels(self, model: str, provider: str) -> dict[str, Any]:
        """The label set of a model's stream timings, built once per attempt."""
        attrs: dict[str, Any] = {n.GEN_AI_OPERATION: n.OP_CHAT, n.GEN_AI_REQUEST_MODEL: model}
        if provider:
            attrs[n.GEN_AI_PROVIDER] = provider
        return _labels(attrs)

    def first_chunk(self, seconds: float, labels: dict[str, Any]) -> None:
        """A streamed attempt's first delta, ``seconds`` after its request."""
        self._i.first_chunk.record(seconds, labels)

    def next_chunk(self, seconds: float, labels: dict[str, Any]) -> None:
        """A later delta of a streamed attempt, ``seconds`` after the one before."""
        self._i.per_chunk.record(seconds, labels)

    def retry(self, signal: str, *, model: str | None = None, service: str | None = None) -> None:
        """An attempt about to be re-sent because of ``signal`` (rate_limit | overload | transient)."""
        self._i.retries.add(1, _target({n.RETRY_SIGNAL: signal}, model, service))

    def attempt(self, outcome: str, signal: str, *, model: str | None = None, service: str | None = None) -> None:
        """One upstream attempt ended: ``outcome`` (ok | failed | transport_fault), the retry ``signal`` it saw."""
        kind = "model" if model is not None else "service"
        attrs = {n.ATTEMPT_OUTCOME: outcome, n.RETRY_SIGNAL: signal or "none", n.ATTEMPT_KIND: kind}
        self._i.attempts.add(1, _target(attrs, model, service))

    def wait(self, reason: str, seconds: float, *, model: str | None = None, service: str | None = None) -> None:
        """A wait before an attempt: ``backoff`` after a signal, ``throttle`` in the pacing."""
        self._i.wait.record(seconds, _target({n.WAIT_REASON: reason}, model, service))

    def overhead(self, operation: str, target: str, door: str, seconds: float) -> None:
        """A call's own time: ``chat`` (target = model) or ``execute_tool`` (target = tool), by its door."""
        key = n.GEN_AI_REQUEST_MODEL if operation == n.OP_CHAT else n.GEN_AI_TOOL_NAME
        attrs = {n.GEN_AI_OPERATION: operation, key: target, n.DOOR: door or "internal"}
        self._i.overhead.record(seconds, _labels(attrs))

    def state_available(self, backend: str, available: bool) -> None:
        """The shared state backend is reachable (1) or not (0)."""
        self._i.state.set(1 if available else 0, {n.STATE_BACKEND: backend})

    def failure(self, kind: str, operation: str) -> None:
        self._i.failures.add(1, _labels({n.FAILURE_KIND: kind, n.GEN_AI_OPERATION: operation}))


def _target(attrs: dict[str, Any], model: str | None, service: str | None) -> dict[str, Any]:
    if model is not None:
        attrs[n.MODEL_ID] = model
    if service is not None:
        attrs[n.SERVICE] = service
    return _labels(attrs)


def _labels(attrs: dict[str, Any]) -> dict[str, Any]:
    """The label set with every string value masked (``masking.mask_label``, cached per value)."""
    return {k: mask_label(v) if isinstance(v, str) else v for k, v in attrs.items()}
