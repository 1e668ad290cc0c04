"""The shared model throttle: a rate limit or an overload slows every call to that model.

    429 (rate limit)     throttle += 0.5; a Retry-After pauses the model for every caller until it passes
    529 (overload)       throttle += 1.5
    transient (5xx ...)  nothing: a stray 500 slows no one
    every third success  throttle -= 0.2;  after 5 minutes without pressure, every success -= 0.5
    cap                  9.0; the refill window stretches to (1 + throttle) x the base window

The base window is the model's configured requests per minute (``requests_per_minute``). A model
with none is paced, while a throttle is in force, from the rate it was actually being called at
when the pressure began (measured over the last seconds; at least ``MIN_BASE_RPS``): the provider
said "too fast" at that rate, so the throttle takes it down from there. Tokens per minute, when
configured, are a second leaky bucket charged with the estimated tokens of a call.
"""

from __future__ import annotations

from sidecar.core.clock import Clock
from sidecar.core.kinds import RetrySignal
from sidecar.core.limiter import StretchLimiter
from sidecar.core.observer import NULL_OBSERVER, ModelPaused, Observer, Target, ThrottleChanged
from sidecar.core.pressure import Pressure

__all__ = ["INCREMENTS", "MAX_THROTTLE", "MIN_BASE_RPS", "ModelThrottle"]

MAX_THROTTLE = 9.0
INCREMENTS: dict[RetrySignal, float] = {
    RetrySignal.RATE_LIMIT: 0.5,
    RetrySignal.OVERLOAD: 1.5,
    RetrySignal.TRANSIENT: 0.0,
}
MIN_BASE_RPS = 1.0
"""The slowest base a throttled model with no configured rate is paced from (requests per second)."""
RATE_BUCKET_S = 1.0
"""The request rate is measured in buckets this long, smoothed half-and-half."""


class ModelThrottle:
    """One model's throttle, pause, and request/token buckets."""

    __slots__ = (
        "_bucket_count",
        "_bucket_start",
        "_clock",
        "_fixed_rate",
        "_observer",
        "_pressure",
        "_rate",
        "_requests",
        "_tokens",
        "model",
        "paused_until",
        "throttle",
    )

    def __init__(
        self,
        model: str,
        clock: Clock,
        requests_per_minute: int = 0,
        tokens_per_minute: int = 0,
        *,
        observer: Observer = NULL_OBSERVER,
    ) -> None:
        self.model = model
        self._clock = clock
        self._observer = observer
        self.throttle = 0.0
        self.paused_until = 0.0
        self._pressure = Pressure()
        self._rate = 0.0
        self._bucket_start: float | None = None
        self._bucket_count = 0
        self._requests = StretchLimiter(requests_per_minute or 60, 60.0, clock)  # re-based when throttled
        self._fixed_rate = bool(requests_per_minute)
        self._tokens = StretchLimiter(tokens_per_minute, 60.0, clock) if tokens_per_minute else None

    def __repr__(self) -> str:
        return f"<ModelThrottle {self.model} throttle={self.throttle:.2f} paused_until={self.paused_until}>"

    def wait_time(self, tokens: int = 0) -> float:
        """How long a call would wait before sending, right now."""
        now = self._clock.time()
        wait = max(self.paused_until - now, 0.0)
        if self._paced():
            wait = max(wait, self._requests.wait_time())
        if self._tokens is not None and tokens:
            wait = max(wait, self._tokens.wait_time(min(tokens, self._tokens.max_rate)))
        return wait

    async def acquire(self, tokens: int = 0) -> None:
        """Wait out any pause, then the request and token buckets."""
        while (remaining := self.paused_until - self._clock.time()) > 0:
            await self._clock.sleep(remaining)
        if self._paced():
            await self._requests.take()
        if self._tokens is not None and tokens:
            await self._tokens.take(min(tokens, self._tokens.max_rate))
        self._count_request()

    @property
    def recent_rate(self) -> float:
        """Requests per second recently sent to this model (smoothed)."""
        return self._rate

    def _count_request(self) -> None:
        now = self._clock.time()
        if self._bucket_start is None:
            self._bucket_start = now
        elapsed = now - self._bucket_start
        if elapsed >= RATE_BUCKET_S:
            measured = self._bucket_count / elapsed
            self._rate = measured if self._rate == 0 else (self._rate + measured) / 2
            self._bucket_start, self._bucket_count = now, 0
        self._bucket_count += 1

    def _rebase(self) -> None:
        """Pressure began on a model with no configured rate: pace it from the rate it was called at."""
        elapsed = self._clock.time() - (self._bucket_start or self._clock.time())
        current = self._bucket_count / elapsed if elapsed >= 0.1 else 0.0
        rate = max(self._rate, current, MIN_BASE_RPS)
        burst = max(1.0, rate / 10)  # a tenth of a second's worth of calls
        self._requests = StretchLimiter(burst, burst / rate, self._clock)

    def signal(self, signal: RetrySignal, retry_after: float | None) -> None:
        step = INCREMENTS.get(signal, 0.0)
        if step == 0.0:
            return
        self._pressure.pressed(self._clock.time())
        self._set(self.throttle + step)
        if signal is RetrySignal.RATE_LIMIT and retry_after:
            until = self._clock.time() + retry_after
            if until > self.paused_until:
                self.paused_until = until
                self._observer.event(ModelPaused(self.model, retry_after))

    def success(self) -> None:
        if self.throttle > 0 and (relief := self._pressure.relief(self._clock.time())):
            self._set(self.throttle - relief)

    @property
    def window_factor(self) -> float:
        return 1.0 + self.throttle

    def _paced(self) -> bool:
        return self._fixed_rate or self.throttle > 0

    def _set(self, value: float) -> None:
        value = round(min(max(value, 0.0), MAX_THROTTLE), 6)
        if value == self.throttle:
            return
        if self.throttle == 0 and not self._fixed_rate:
            self._rebase()
        self.throttle = value
        self._requests.stretch(self.window_factor)
        if self._tokens is not None:
            self._tokens.stretch(self.window_factor)
        self._observer.event(ThrottleChanged(Target.MODEL, self.model, value))
