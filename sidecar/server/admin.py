"""The admin state view: the live policy state of this replica, in one JSON-ready document.

    models      each model's throttle, pace, Retry-After pause left, in flight and queued, its last signal
    services    each tool service's circuit: state, the quoted opening response, cooldown left, probe holder
    deployments each route deployment's circuit, the same
    workflows   each workflow's spend against its cap
    callers     with server.auth, each caller of its tokens (by name, never its token): its limits, the
                calls admitted and refused at them, the tokens charged (``server.callers``; this
                process's); ``sidecar.v1.Admin/GetState``'s ``callers``, a ``CallerState`` each
    state       the state backend: memory or redis, reachable or not, live replicas; with redis,
                pending_actions (operator actions applied here that Redis has not taken yet),
                staleness_s (seconds since Redis last answered this replica: a heartbeat every
                second, a published change, a re-sync; None: never reached) and, while it is
                not reachable, last_error (what the last Redis operation raised)

Beside the document (a header of ``GET /admin/state``, trailing metadata of ``GetState``), a process
that runs the embedded fakes tells their URLs: ``x-sidecar-embedded-provider``, ``x-sidecar-embedded-tools``
(``sidecar demo`` scripts the provider of the very sidecar it plays against). Only the admin view
tells them: no agent's door does, and a config naming no ``embedded://`` URL has none to tell.

Read from the core objects' public ``snapshot`` methods only (nothing changes, no event is
reported). Every string is masked against the configured secrets before it leaves (``mask``);
the quoted opening response was already redacted where it entered the circuit.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from sidecar.core.circuit import GuardSnapshot
from sidecar.core.fleet_view import FleetView
from sidecar.core.redact import mask_secrets
from sidecar.core.service_guards import ServiceGuards
from sidecar.core.spend import SpendLedger
from sidecar.core.state import StateBackend
from sidecar.providers.service import ModelService
from sidecar.server.callers import Callers
from sidecar.server.live import Live
from sidecar.telemetry import names as n

__all__ = ["EMBEDDED_HEADER", "StateView", "UnknownTarget"]

_log = logging.getLogger("sidecar.admin")
_tracer = trace.get_tracer(n.TRACER)
EMBEDDED_HEADER = "x-sidecar-embedded-{name}"
"""The header (HTTP) and trailing metadata key (gRPC) of the view's answer telling an embedded fake's URL."""


class UnknownTarget(LookupError):
    """An operator action named a model, service, deployment or workflow this process does not hold."""


@contextmanager
def _action_span(action: str, target: str, who: str) -> Iterator[dict[str, Any]]:
    """The span of one operator action; the body fills in the outcome (an UnknownTarget: ``not_found``)."""
    attrs: dict[str, Any] = {n.ADMIN_ACTION: action, n.ADMIN_TARGET: target, n.ADMIN_WHO: who}
    with _tracer.start_as_current_span(n.SPAN_ADMIN.format(action=action), attributes=attrs) as span:
        outcome: dict[str, Any] = {}
        try:
            yield outcome
        except UnknownTarget:
            outcome[n.ADMIN_OUTCOME] = "not_found"
            raise
        finally:
            span.add_event(n.EVENT_ADMIN_ACTION, {**attrs, **outcome})
            if n.ADMIN_OUTCOME in outcome:
                span.set_attribute(n.ADMIN_OUTCOME, outcome[n.ADMIN_OUTCOME])


def _guard(g: GuardSnapshot) -> dict[str, Any]:
    return {
        "name": g.name,
        "circuit": g.state.name.lower(),
        "throttle": g.throttle,
        "opened_by": g.trigger,
        "opened_at": g.opened_at.isoformat() if g.opened_at is not None else None,
        "cooldown_s": g.cooldown_s,
        "cooldown_left_s": round(g.cooldown_left_s, 3),
        "probe_holder": g.probe_holder,
    }


@dataclass(frozen=True, slots=True)
class StateView:
    """What the view is read from: the live core of this process (``live.core``: a reload swaps it)."""

    live: Live
    state: StateBackend
    fleet: FleetView
    embedded: dict[str, str] = field(default_factory=dict)
    """The embedded fakes this process runs, by name (``provider``, ``tools``): their URLs."""
    callers: Callers = field(default_factory=Callers)
    """The callers of ``server.auth.tokens`` and their use (none without it)."""

    def told(self) -> list[tuple[str, str]]:
        """The embedded fakes' URLs, as the header or metadata each answer of the view carries."""
        return [(EMBEDDED_HEADER.format(name=name), url) for name, url in sorted(self.embedded.items())]

    @property
    def models(self) -> ModelService:
        return self.live.core.models

    @property
    def model_ids(self) -> tuple[str, ...]:
        return tuple(self.live.core.config.models)

    @property
    def guards(self) -> ServiceGuards:
        return self.live.core.guards

    @property
    def ledger(self) -> SpendLedger:
        return self.live.core.ledger

    @property
    def secrets(self) -> tuple[str, ...]:
        return self.live.secrets

    def read(self) -> dict[str, Any]:
        """The document ``GET /admin/state`` answers (masked)."""
        models = []
        for mid in self.model_ids:
            t = self.models.throttle(mid).snapshot()
            models.append(
                {
                    "model": t.model,
                    "throttle": t.throttle,
                    "paced_per_s": None if math.isinf(t.paced_rate) else round(t.paced_rate, 6),
                    "pause_left_s": round(t.pause_left_s, 3),
                    "in_flight": t.in_flight,
                    "queued": t.queued,
                    "last_signal": t.last_signal,
                    "last_signal_age_s": None if t.last_signal_age_s is None else round(t.last_signal_age_s, 3),
                }
            )
        doc: dict[str, Any] = {
            "models": models,
            "services": [_guard(g.snapshot()) for g in self.guards.all()],
            "deployments": [_guard(g.snapshot()) for g in self.models.routes.guards.all()],
            "workflows": [
                {"workflow": s.workflow, "spent_usd": s.spent_usd, "cap_usd": s.cap_usd} for s in self.ledger.snapshot()
            ],
            "state": self._backend(),
        }
        if len(self.callers):  # server.auth set (GetState: its callers field, empty without)
            doc["callers"] = self.callers.snapshot()
        masked: dict[str, Any] = self._masked(doc)
        return masked

    # ------------------------------------------------------------------ operator actions (this replica)

    # Each is logged on ``sidecar.admin`` and traced: a span ``admin {action}`` with one event
    # (EVENT_ADMIN_ACTION) naming the action, the target, who, and the outcome. ``who`` names the
    # token (``server.admin.tokens[i]``) and the peer, never the token.

    def close_circuit(self, name: str, *, who: str) -> bool:
        """Close a tool service's (else a route deployment's) circuit; published fleet-wide as a probe's close."""
        with _action_span("close-circuit", name, who) as outcome:
            guard = self.guards.peek(name) or self.models.routes.guards.peek(name)
            if guard is None:
                raise UnknownTarget(f"no circuit named {name!r}")
            changed = guard.close()
            outcome[n.ADMIN_OUTCOME] = "changed" if changed else "unchanged"
        _log.warning(
            "admin: %s closed the circuit of %s (was %s; %s)",
            who,
            name,
            "open" if changed else "closed",
            self.reach()[0],
        )
        return changed

    def lift_pause(self, model: str, *, who: str) -> bool:
        """Lift a model's Retry-After pause (published: with Redis, every replica lifts it); whether one held here."""
        with _action_span("lift-pause", model, who) as outcome:
            if model not in self.model_ids:
                raise UnknownTarget(f"no model named {model!r}")
            held = self.models.throttle(model).lift_pause()
            outcome[n.ADMIN_OUTCOME] = "changed" if held else "unchanged"
        _log.warning(
            "admin: %s lifted the pause of model %s (%s; %s)",
            who,
            model,
            "held" if held else "none held",
            self.reach()[0],
        )
        return held

    def reset_spend(self, workflow: str, *, who: str) -> float:
        """Reset a workflow's spend (published: with Redis, the fleet's total and every replica's); what it was here."""
        with _action_span("reset-spend", workflow, who) as outcome:
            was = self.ledger.reset(workflow)
            outcome[n.ADMIN_OUTCOME] = "changed" if was else "unchanged"
            outcome[n.ADMIN_WAS_USD] = was
        _log.warning("admin: %s reset the spend of workflow %s (was %.6f USD; %s)", who, workflow, was, self.reach()[0])
        return was

    def reach(self) -> tuple[str, str]:
        """How far the action just taken reached, and that in words (read right after it: one event loop,
        nothing changes in between): ``fleet``, ``queued`` (Redis not there) or ``local`` (memory)."""
        if not self.state.shared:
            return "local", "applied (state.backend memory: this process is the whole sidecar)"
        if getattr(self.state, "available", False):
            return "fleet", "applied here and published to every replica through Redis"
        flush = getattr(self.state, "shutdown_flush_s", 0.0)
        return "queued", (
            "applied on this replica only for now: Redis is not reachable; queued, and published to the fleet "
            "when Redis answers again, before the re-sync reads the fleet's state back (a pause set, an opening, "
            "or a cost added elsewhere after this action stays). If this replica stops first, it tries for "
            f"state.shutdown_flush_s ({flush:g} s) more, then logs the action as not delivered: repeat it then"
        )

    def _backend(self) -> dict[str, Any]:
        if not self.state.shared:
            return {"backend": "memory", "reachable": True, "replicas": 1}
        available = getattr(self.state, "available", None)  # RedisState's public properties
        heard = getattr(self.state, "heard_s", None)
        doc: dict[str, Any] = {
            "backend": "redis",
            "reachable": bool(available),
            "replicas": self.fleet.replicas,
            "staleness_s": None if heard is None else round(heard, 3),
        }
        if not available:
            doc["last_error"] = getattr(self.state, "last_error", "") or "not reached yet"
        doc["pending_actions"] = int(getattr(self.state, "pending_actions", 0))
        return doc

    def _masked(self, value: Any) -> Any:
        mask: Callable[[str], str] = lambda text: mask_secrets(text, self.secrets)  # noqa: E731
        if isinstance(value, str):
            return mask(value)
        if isinstance(value, dict):
            return {mask(k): self._masked(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._masked(v) for v in value]
        return value
