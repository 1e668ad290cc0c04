"""The sidecar's metrics, on the OpenTelemetry metrics API (no-op until an SDK is configured).

gen_ai.client.operation.duration   s        histogram   gen_ai.operation.name, gen_ai.request.model, error.type
gen_ai.client.token.usage          {token}  histogram   gen_ai.token.type = input | output
sidecar.retries                    {retry}  counter     sidecar.retry.signal, sidecar.model
sidecar.wait.duration              s        histogram   sidecar.wait.reason (backoff | throttle)
sidecar.failures                   {failure} counter    sidecar.failure.kind, gen_ai.operation.name
sidecar.model.throttle             1        gauge       sidecar.model
sidecar.service.throttle           1        gauge       sidecar.service
sidecar.service.circuit.state      1        gauge       sidecar.service (0 closed, 1 half-open, 2 open)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from sidecar.telemetry import names as n

__all__ = ["Metrics"]


class Metrics:
    def __init__(self) -> None:
        meter = metrics.get_meter(n.TRACER)
        self._duration = meter.create_histogram(
            n.METRIC_DURATION,
            unit="s",
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=list(n.DURATION_BUCKETS),
        )
        self._tokens = meter.create_histogram(
            n.METRIC_TOKENS,
            unit="{token}",
            description="Tokens used",
            explicit_bucket_boundaries_advisory=[float(b) for b in n.TOKEN_BUCKETS],
        )
        self._retries = meter.create_counter(n.METRIC_RETRIES, unit="{retry}", description="Upstream retries by signal")
        self._wait = meter.create_histogram(
            n.METRIC_WAIT,
            unit="s",
            description="Time spent waiting (backoff, throttle)",
            explicit_bucket_boundaries_advisory=list(n.DURATION_BUCKETS),
        )
        self._failures = meter.create_counter(n.METRIC_FAILURES, unit="{failure}", description="Failures by kind")
        self._meter = meter

    def observe_gauges(
        self,
        model_throttles: Callable[[], Iterable[tuple[str, float]]],
        service_states: Callable[[], Iterable[tuple[str, float, int]]],
    ) -> None:
        def models(_: CallbackOptions) -> Iterable[Observation]:
            return [Observation(v, {n.MODEL_ID: m}) for m, v in model_throttles()]

        def services(_: CallbackOptions) -> Iterable[Observation]:
            return [Observation(t, {n.SERVICE: s}) for s, t, _ in service_states()]

        def circuits(_: CallbackOptions) -> Iterable[Observation]:
            return [Observation(c, {n.SERVICE: s}) for s, _, c in service_states()]

        self._meter.create_observable_gauge(n.METRIC_MODEL_THROTTLE, [models], unit="1")
        self._meter.create_observable_gauge(n.METRIC_SERVICE_THROTTLE, [services], unit="1")
        self._meter.create_observable_gauge(n.METRIC_CIRCUIT_STATE, [circuits], unit="1")

    def operation(self, operation: str, target: str, seconds: float, error: str | None) -> None:
        attrs = {n.GEN_AI_OPERATION: operation}
        attrs[n.GEN_AI_REQUEST_MODEL if operation == "chat" else n.GEN_AI_TOOL_NAME] = target
        if error:
            attrs[n.ERROR_TYPE] = error
        self._duration.record(seconds, attrs)

    def tokens(self, model: str, input_tokens: int, output_tokens: int) -> None:
        base = {n.GEN_AI_OPERATION: "chat", n.GEN_AI_REQUEST_MODEL: model}
        self._tokens.record(input_tokens, {**base, n.GEN_AI_TOKEN_TYPE: "input"})
        self._tokens.record(output_tokens, {**base, n.GEN_AI_TOKEN_TYPE: "output"})

    def retry(self, signal: str, target: str) -> None:
        self._retries.add(1, {n.RETRY_SIGNAL: signal, n.MODEL_ID: target})

    def wait(self, reason: str, seconds: float) -> None:
        self._wait.record(seconds, {n.WAIT_REASON: reason})

    def failure(self, kind: str, operation: str) -> None:
        self._failures.add(1, {n.FAILURE_KIND: kind, n.GEN_AI_OPERATION: operation})
