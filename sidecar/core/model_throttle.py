"""The shared model throttle: a rate limit or an overload slows every call to that model, AIMD-like.

Signals raise the throttle ``θ``; the model is paced at ``base / (1 + θ)``::

    429 (rate limit)     θ += 0.5; a Retry-After pauses the model for every caller until it passes
    a budget spent       an answer whose rate-limit headers say the budget is about to run out
                         (``core.rate_budget``) holds the model until the reset, as a pause; θ unchanged
    529 (overload)       θ += 1.5
    transient (5xx ...)  nothing: a stray 500 slows no one
    cap                  9.0 (a tenth of the base rate)
    one rise per epoch   an increase opens a pacing epoch; a signal from a call sent before it
                         reflects the old rate and adds nothing (TCP-like: one reaction per round
                         trip, not one per call in flight); a stronger signal of the same epoch
                         adds only the difference (a 529 after a 429: +1.0)
    each success         1 / (1 + θ) += RECOVERY_PER_ROUND_TRIP / max(1, calls in flight):
                         a round trip of successes gives back a quarter of the base rate
    quiet                after 5 minutes without pressure every success also takes 0.5 off

Why not the runtime's "every third success takes 0.2 off": per call, a constant 20 % of 429s
adds 0.2 x 0.5 = 0.1 and takes 0.8 x 0.2 / 3 ≈ 0.053 off, so one caller pegs the throttle at 9
(a tenth of its rate) however briefly the provider objects; and with many callers its pull grows
with the rate while the epoch's push does not, so the throttle either melts to 0 or collapses to
9. Recovering a fixed share of the base rate per round trip (additive increase of the rate, the
signals' multiplicative decrease) has one stable point whatever the concurrency: under a constant
20 % of 429s, 61-88 % of the unthrottled rate for 1 to 256 callers (tests/policy/test_throttle_dynamics.py),
and once the faults stop it is back within 5 % in under three round trips. The price is paid
under a real limit, around which the rate saws: at half the demand a fifth of the attempts still
meet a 429 (half without the throttle), at a fifth of it over half (four fifths without).

The base rate:

- a configured ``requests_per_minute``: that rate, with a minute's worth of burst;
- none configured: what the model is observed to take, measured afresh at every change of the
  throttle: ``max(recent send rate, (calls in flight + calls queued) / mean latency)`` (latency:
  the smoothed round trip of answered calls, at least ``MIN_LATENCY_S``). The calls *waiting*
  count too, so pacing never lowers its own base, and a cold start measures concurrency at once
  (16 calls in flight, the first 429 after 10 ms: 1,600/s), never a fixed floor. Paced, it is
  sent evenly (a burst of one call).

``tokens_per_minute``, when configured, is a second pacer charged with the estimated tokens of a
call, stretched by the same ``1 + θ``.

Shared by a fleet (``share(state)``, a ``core.state`` backend; the memory default shares nothing)::

    a raise of θ here         published (ModelRaised: the new θ and its step); a replica that
                              receives it takes max(own θ, θ) and opens a pacing epoch, so its own
                              calls already in flight add nothing more for the same pressure
    a Retry-After pause       published (ModelPause: the seconds left); every replica pauses
    a hold for the budget     published the same way (a ModelPause until the reset)
    recovery                  local: each replica's successes bring its own θ down (never published)
    configured rates          split: requests_per_minute and tokens_per_minute are the account's,
                              each of N live replicas paces at rate / N (burst / N too)

A call's life (the public surface)::

    ticket = throttle.reserve(tokens, deadline)   the slot after everyone queued and any pause;
                                                  Overdue at once if it starts after the deadline
    await throttle.wait(ticket)                   until the slot (a pause begun meanwhile is
                                                  re-checked against the deadline); then it is sent
    throttle.success(ticket) | throttle.signal(ticket, signal, retry_after) | throttle.settle(ticket)
                                                  how the send ended (settle: no verdict, e.g.
                                                  cancelled or a correctable failure)
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from sidecar.core.clock import Clock
from sidecar.core.kinds import RetrySignal
from sidecar.core.observer import NULL_OBSERVER, ModelPaused, Observer, Target, ThrottleChanged
from sidecar.core.pacer import EPSILON, Overdue, Pacer, Reservation
from sidecar.core.pressure import FAST_DECAY, Pressure
from sidecar.core.state import MEMORY, ModelPause, ModelRaised, PauseLifted, StateBackend

__all__ = [
    "INCREMENTS",
    "MAX_THROTTLE",
    "MIN_LATENCY_S",
    "RECOVERY_PER_ROUND_TRIP",
    "ModelThrottle",
    "Overdue",
    "ThrottleSnapshot",
    "Ticket",
]

MAX_THROTTLE = 9.0
INCREMENTS: dict[RetrySignal, float] = {
    RetrySignal.RATE_LIMIT: 0.5,
    RetrySignal.OVERLOAD: 1.5,
    RetrySignal.TRANSIENT: 0.0,
}
RECOVERY_PER_ROUND_TRIP = 0.25
"""The share of the base rate a round trip of successes gives back."""
MIN_LATENCY_S = 0.001
"""The shortest round trip the base is computed from (seconds); a fake clock measures 0."""
LATENCY_SMOOTHING = 0.2
"""Each answered call moves the mean latency this share of the way to its own."""
SEND_RATE_WINDOW_S = 1.0
"""The recent send rate decays over this many seconds (an exponentially weighted count)."""
PACED_BURST = 1.0
"""Calls a throttled model with no configured rate may send at once."""
PAUSED = "the model is paused by the provider's Retry-After"
HELD = "the model is held until the provider's rate-limit budget resets"
THROTTLED = "the model is throttled"


class _State(enum.Enum):
    QUEUED = "queued"
    SENT = "sent"
    SETTLED = "settled"


class Ticket:
    """One send: its slot (``at``), then, once sent, its place among the epochs and its latency."""

    __slots__ = ("_bookings", "at", "deadline", "sent_at", "seq", "state", "tokens")

    def __init__(self, tokens: int, deadline: float | None) -> None:
        self.tokens = tokens
        self.deadline = deadline
        self.at = 0.0
        self.sent_at = 0.0
        self.seq = -1
        self.state = _State.QUEUED
        self._bookings: list[tuple[Pacer, Reservation]] = []

    def __repr__(self) -> str:
        return f"<Ticket {self.state.value} at={self.at:.6f} seq={self.seq}>"


@dataclass(frozen=True, slots=True)
class ThrottleSnapshot:
    """What one model's throttle holds now, read-only (the admin state view)."""

    model: str
    throttle: float
    paced_rate: float
    """Calls per second the pacer lets through (``math.inf``: not paced)."""
    pause_left_s: float
    """Seconds the Retry-After pause still holds (0: none)."""
    in_flight: int
    queued: int
    last_signal: str
    """The last retry signal that reached the throttle (``rate_limit``, ``overload``, ...), or ""."""
    last_signal_age_s: float | None
    """Seconds since that signal (on the injected clock), or None."""


class ModelThrottle:
    """One model's throttle, pause and pacers (requests, and tokens when configured)."""

    __slots__ = (
        "_clock",
        "_epoch",
        "_epoch_step",
        "_fixed_rate",
        "_in_flight",
        "_last_send",
        "_last_signal",
        "_latency",
        "_observer",
        "_pause_cause",
        "_paused_at",
        "_pressure",
        "_queued",
        "_requests",
        "_rpm",
        "_send_count",
        "_sends",
        "_state",
        "_tokens",
        "_tpm",
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
        self._paused_at = 0.0
        """When (this clock) the pause that holds began: a lift made before it leaves it."""
        self._pause_cause = PAUSED
        self._pressure = Pressure()
        self._state: StateBackend = MEMORY
        self._rpm, self._tpm = requests_per_minute, tokens_per_minute
        self._fixed_rate = bool(requests_per_minute)
        if requests_per_minute:
            self._requests = Pacer(requests_per_minute, 60.0, clock)
        else:
            self._requests = Pacer(math.inf, 1.0, clock, burst=PACED_BURST)  # paced only while throttled
        self._tokens = Pacer(tokens_per_minute, 60.0, clock) if tokens_per_minute else None
        self._epoch = 0
        self._epoch_step = 0.0
        self._sends = 0
        self._in_flight = 0
        self._queued = 0
        self._latency: float | None = None
        self._send_count = 0.0
        self._last_send = 0.0
        self._last_signal: tuple[str, float] | None = None

    def __repr__(self) -> str:
        return (
            f"<ModelThrottle {self.model} throttle={self.throttle:.3f} paced={self.paced_rate:.4g}/s "
            f"in_flight={self._in_flight} queued={self._queued} paused_until={self.paused_until:.3f}>"
        )

    @property
    def paced_rate(self) -> float:
        """Calls per second the pacer lets through now (``math.inf``: not paced)."""
        return self._requests.rate

    # ------------------------------------------------------------------ the fleet

    def share(self, state: StateBackend) -> None:
        """Publish this model's raises and pauses to ``state`` from now on."""
        self._state = state

    def raised_elsewhere(self, throttle: float, step: float) -> None:
        """Another replica raised the throttle to ``throttle``: take it if higher, as a new epoch."""
        if throttle <= self.throttle:
            return
        self._pressure.pressed(self._clock.time())
        self._epoch, self._epoch_step = self._sends, step
        self._set(throttle)

    def paused_elsewhere(self, seconds: float, age_s: float = 0.0) -> None:
        """Another replica was told Retry-After ``age_s`` ago: pause for the ``seconds`` left, from now."""
        now = self._clock.time()
        until = now + seconds
        if until > self.paused_until + EPSILON:
            self.paused_until, self._pause_cause = until, PAUSED
            self._paused_at = now - max(age_s, 0.0)
            self._observer.event(ModelPaused(self.model, seconds))

    def split(self, replicas: int) -> None:
        """The configured rates are the fleet's: pace at ``1 / replicas`` of each (burst too)."""
        n = max(replicas, 1)
        if self._rpm:
            self._requests.rebase(self._rpm / n, 60.0, burst=self._rpm / n)
        if self._tokens is not None:
            self._tokens.rebase(self._tpm / n, 60.0, burst=self._tpm / n)

    def snapshot(self) -> ThrottleSnapshot:
        """The throttle's state now, for the admin view (nothing changes)."""
        last = self._last_signal
        return ThrottleSnapshot(
            self.model,
            self.throttle,
            self.paced_rate,
            self.pause_left(),
            self._in_flight,
            self._queued,
            last[0] if last else "",
            None if last is None else max(self._clock.time() - last[1], 0.0),
        )

    def lift_pause(self) -> bool:
        """An operator lifted the Retry-After pause: calls are booked from now; whether one held here.

        Published (PauseLifted) whether or not one held here: another replica may hold it."""
        held = self.pause_left() > 0
        self.paused_until = 0.0
        self._state.publish(PauseLifted(self.model))
        return held

    def lifted_elsewhere(self, age_s: float = 0.0) -> None:
        """An operator lifted the pause on another replica ``age_s`` ago: lift it here too, unless the
        pause that holds here began after the lift (a fresh Retry-After stands)."""
        if self._paused_at <= self._clock.time() - max(age_s, 0.0) + EPSILON:
            self.paused_until = 0.0

    def pause_age(self) -> float:
        """Seconds since the pause that holds began (0: none holds)."""
        return max(self._clock.time() - self._paused_at, 0.0) if self.pause_left() > 0 else 0.0

    def pause_left(self) -> float:
        """Seconds the Retry-After pause still holds (0: none)."""
        return max(self.paused_until - self._clock.time(), 0.0)

    # ------------------------------------------------------------------ a call's life

    def reserve(self, tokens: int = 0, deadline: float | None = None) -> Ticket:
        """Book the call's slot; ``Overdue`` at once (nothing booked) when it starts after ``deadline``."""
        ticket = Ticket(tokens, deadline)
        self._book(ticket)
        self._queued += 1
        return ticket

    async def wait(self, ticket: Ticket) -> None:
        """Wait until the ticket's slot, then count it sent. Cancelled or refused: its slot is given back."""
        if ticket.state is not _State.QUEUED:
            raise RuntimeError(f"{ticket!r} was already sent or settled")
        try:
            while True:
                if self.paused_until > ticket.at + EPSILON:  # a Retry-After arrived after it was booked
                    self._unbook(ticket)
                    self._book(ticket)
                left = ticket.at - self._clock.time()
                if left <= EPSILON:
                    break
                await self._clock.sleep(left)
        except BaseException:
            self.settle(ticket)
            raise
        self._send(ticket)

    def success(self, ticket: Ticket) -> None:
        """The call was answered: one success's share of the recovery."""
        if ticket.state is not _State.SENT:
            self.settle(ticket)
            return
        self._sample(ticket)
        in_flight = max(self._in_flight, 1)
        self.settle(ticket)
        if self.throttle <= 0:
            return
        share = 1.0 / (1.0 + self.throttle) + RECOVERY_PER_ROUND_TRIP / in_flight
        value = max(1.0 / share - 1.0, 0.0)
        if self._pressure.quiet(self._clock.time()):
            value = min(value, self.throttle - FAST_DECAY)
        self._set(value)

    def signal(self, ticket: Ticket, signal: RetrySignal, retry_after: float | None) -> None:
        """The call came back with a retry signal (and maybe a Retry-After, already capped by the caller)."""
        if ticket.state is not _State.SENT:
            self.settle(ticket)
            return
        self._sample(ticket)
        self._last_signal = (signal.name.lower(), self._clock.time())
        step = INCREMENTS.get(signal, 0.0)
        if step > 0:
            now = self._clock.time()
            self._pressure.pressed(now)
            before = self.throttle
            if ticket.seq >= self._epoch:  # sent at the current rate: a new epoch
                self._epoch, self._epoch_step = self._sends, step
                self._set(self.throttle + step)
            elif step > self._epoch_step:  # the same epoch, a stronger signal: only the difference
                self._set(self.throttle + step - self._epoch_step)
                self._epoch_step = step
            if signal is RetrySignal.RATE_LIMIT and retry_after:
                self._pause(retry_after, PAUSED)
            if self.throttle > before:  # after the pause: a replica that sees the raise has the pause too
                self._state.publish(ModelRaised(self.model, self.throttle, self._epoch_step))
        self.settle(ticket)

    def hold(self, seconds: float) -> None:
        """An answer said the provider's rate-limit budget is about to run out (``core.rate_budget``): hold every
        call for ``seconds``, until its reset, here and across the fleet (the throttle itself unchanged)."""
        if seconds > 0:
            self._pause(seconds, HELD)

    @property
    def in_flight(self) -> int:
        """Calls sent to the model and not yet answered."""
        return self._in_flight

    def settle(self, ticket: Ticket) -> None:
        """The ticket is done (idempotent): a slot not yet used is given back."""
        if ticket.state is _State.QUEUED:
            self._unbook(ticket)
            self._queued -= 1
        elif ticket.state is _State.SENT:
            self._in_flight -= 1
        ticket.state = _State.SETTLED

    # ------------------------------------------------------------------ internals

    def _book(self, ticket: Ticket) -> None:
        now = self._clock.time()
        pause = self.paused_until if self.paused_until > now else 0.0
        at = self._requests.slot(1, pause)
        cost = 0.0
        if self._tokens is not None and ticket.tokens:
            cost = min(float(ticket.tokens), self._tokens.burst)
            at = max(at, self._tokens.slot(cost, pause))
        if ticket.deadline is not None and at > ticket.deadline + EPSILON:
            raise Overdue(at - now, self._pause_cause if pause and pause >= at - EPSILON else THROTTLED)
        ticket.at = at
        ticket._bookings = [(self._requests, self._requests.reserve(1, not_before=at))]
        if self._tokens is not None and cost:
            ticket._bookings.append((self._tokens, self._tokens.reserve(cost, not_before=at)))

    def _pause(self, seconds: float, cause: str) -> None:
        until = self._clock.time() + seconds
        if until > self.paused_until + EPSILON:
            self.paused_until, self._pause_cause = until, cause
            self._paused_at = self._clock.time()
            self._observer.event(ModelPaused(self.model, seconds, cause))
            self._state.publish(ModelPause(self.model, seconds))

    def _unbook(self, ticket: Ticket) -> None:
        for pacer, booking in reversed(ticket._bookings):
            pacer.release(booking)
        ticket._bookings = []

    def _send(self, ticket: Ticket) -> None:
        now = self._clock.time()
        ticket.state, ticket.sent_at, ticket.seq = _State.SENT, now, self._sends
        ticket._bookings = []
        self._sends += 1
        self._queued -= 1
        self._in_flight += 1
        self._send_count = self._send_count * math.exp((self._last_send - now) / SEND_RATE_WINDOW_S) + 1
        self._last_send = now

    def _sample(self, ticket: Ticket) -> None:
        latency = self._clock.time() - ticket.sent_at
        previous = self._latency
        self._latency = latency if previous is None else previous + LATENCY_SMOOTHING * (latency - previous)

    def _base(self) -> float:
        """Calls per second the model is observed to take (no configured rate)."""
        now = self._clock.time()
        send_rate = self._send_count * math.exp((self._last_send - now) / SEND_RATE_WINDOW_S) / SEND_RATE_WINDOW_S
        latency = max(self._latency or 0.0, MIN_LATENCY_S)
        return max(send_rate, max(self._in_flight + self._queued, 1) / latency)

    def _set(self, value: float) -> None:
        value = round(min(max(value, 0.0), MAX_THROTTLE), 6)
        if value == self.throttle:
            return
        self.throttle = value
        factor = 1.0 + value
        if not self._fixed_rate:
            self._requests.rebase(self._base() if value > 0 else math.inf)
        self._requests.stretch(factor)
        if self._tokens is not None:
            self._tokens.stretch(factor)
        self._observer.event(ThrottleChanged(Target.MODEL, self.model, value))
