"""The changes of the local view to Redis: ``publish`` queues (a healthy call awaits nothing), the writer
sends each as its script; an operator's action made while Redis is not there is kept for the re-sync, the spend
added is counted later; a half-open probe is claimed fleet-wide."""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable
from dataclasses import replace
from typing import Any

from sidecar.core.state import (
    Change,
    CircuitClosed,
    CircuitOpened,
    ModelPause,
    ModelRaised,
    PauseLifted,
    ProbeTaken,
    ServiceRaised,
    SpendAdded,
    SpendReset,
    SpendTotal,
)
from sidecar.state.redis.actions import Action
from sidecar.state.redis.calls import CallRecords
from sidecar.state.redis.connection import ms
from sidecar.state.redis.wire import encode

__all__ = [
    "ACTION_TTL_S",
    "CLOSED_TTL_S",
    "MAX_ACTIONS",
    "SPEND_STEPS",
    "SPEND_TTL_S",
    "THROTTLE_TTL_S",
    "ChangeWriter",
]

THROTTLE_TTL_S = 60.0
"""A raised throttle is kept this long for replicas that (re)join; live ones learn it at once."""
CLOSED_TTL_S = 3600.0
"""How long a close is remembered, so that a replica back from an outage does not re-open it."""
SPEND_TTL_S = 7 * 24 * 3600.0
"""A workflow's fleet spend is forgotten after this long without a new cost (renewed by each add)."""
ACTION_TTL_S = 3600.0
"""How long an operator's lift or reset is remembered for replicas that re-sync after it (as CLOSED_TTL_S)."""
SPEND_STEPS = 100
"""A workflow's fleet total is published when it crosses a hundredth of its cap, and at the cap: not per
capped call (each publish reaches every replica: at 1,000 replicas the fan-out, not the add, is the cost). A
replica's view of the others' spend lags by less than one step below the cap, none at it; so does what it
knows Redis counted, which is why a re-sync's floor carries the key's life (``scripts.SPEND_FLOOR``)."""
MAX_ACTIONS = 10_000
"""Operator actions kept while Redis is not there (one per target: a later one on it replaces it)."""


class ChangeWriter(CallRecords):
    """What this replica changes, to Redis and the fleet (``publish``, ``claim_probe``, the writer's flush)."""

    @property
    def pending_actions(self) -> int:
        """Operator actions applied here that the fleet has not had yet (Redis not there): sent on re-sync."""
        return len(self._pending) + sum(isinstance(c, Action) for c, _ in self._queue)

    def publish(self, change: Change) -> None:
        item: Change | Action = change
        now = self._mono()
        if isinstance(change, SpendReset):  # what was added here before the reset is not in Redis: not taken off
            self._forget_total(change.workflow)
            unsent = self._unsent.pop(change.workflow, 0.0)
            item = Action(change, now, max(change.usd - unsent, 0.0))
        elif isinstance(change, PauseLifted | CircuitClosed):
            item = Action(change, now - change.age_s)
        if isinstance(change, SpendAdded):
            self._unsent[change.workflow] = self._unsent.get(change.workflow, 0.0) + change.usd
            self._caps[change.workflow] = change.cap_usd
        elif self._available:
            self._queue.append((item, now))
        elif isinstance(item, Action):
            self._keep_action(item)
        if self._available:
            self._wake.set()
        else:
            self._note_in_call()

    def _learn_total(self, workflow: str, usd: float, life: str | None) -> None:
        """A total Redis counted (a reply, a publish, a key read back) in the spend key's ``life`` (None: not
        said, an older replica's publish; "": none kept, its record expired: the life known here). A total of
        another life than the one known here is left for the re-sync's floor to settle: the total known here
        was counted before the key was lost, and is that floor."""
        held = self._counted.get(workflow, 0.0)
        known = self._lives.get(workflow, "")
        life = life or known
        if held <= 0 or life == known:
            self._counted[workflow] = max(held, usd)
            self._lives[workflow] = life

    def _forget_total(self, workflow: str) -> None:
        """An operator's reset: what was counted before it is no floor any more."""
        self._counted.pop(workflow, None)

    def _keep_action(self, action: Action) -> None:
        """An action for the next re-sync; a later one on the same target replaces it (a reset adds up)."""
        held = self._pending.pop(action.target, None)
        if held is not None and isinstance(action.change, SpendReset):
            action = Action(action.change, action.made, action.forgiven + held.forgiven)
        if len(self._pending) >= MAX_ACTIONS:
            self._pending.pop(next(iter(self._pending)))
        self._pending[action.target] = action

    async def claim_probe(self, service: str, seconds: float) -> bool:
        if not self._available:
            self._note_in_call()
            return True  # the local circuit alone decides: at worst one probe per replica
        payload = json.dumps(encode(ProbeTaken(service, seconds), self.replica))
        key = self._key("probe", service)
        won = await self._run(self._claim(keys=[key], args=[self.replica, ms(seconds), self.channel, payload]))
        return True if won is None else bool(won)

    async def _send(self, item: Change | Action, made: float, *, resync: bool = False) -> bool:
        """One change's script (``made``: when, on ``_mono``, it was published or snapshotted: a pause's
        seconds left shrink and its age grows by the wait); False when Redis did not take it."""
        if isinstance(item, Action):
            return await self._send_action(item, resync=resync)
        change = item
        waited = max(self._mono() - made, 0.0)
        op: Awaitable[Any]
        match change:
            case ModelRaised(model, throttle, _):
                payload = json.dumps(encode(change, self.replica))
                op = self._set(
                    keys=[self._key("mthrottle", model)], args=[throttle, ms(THROTTLE_TTL_S), self.channel, payload]
                )
            case ModelPause(model, seconds, age):  # kept: when it began on Redis's clock (TIME less its age)
                left, age = seconds - waited, age + waited
                if left <= 0:
                    return True  # ran out on the way: not written again
                payload = json.dumps(encode(ModelPause(model, left, age), self.replica))
                keys = [self._key("mpause", model), self._key("mlift", model)]
                op = self._pause(keys=keys, args=[ms(left), int(age * 1000), self.channel, payload])
            case ServiceRaised(service, throttle):
                payload = json.dumps(encode(change, self.replica))
                op = self._set(
                    keys=[self._key("sthrottle", service)], args=[throttle, ms(THROTTLE_TTL_S), self.channel, payload]
                )
            case CircuitOpened():
                left = change.seconds - waited
                aged = replace(change, seconds=max(left, 0.0), age_s=change.age_s + waited)
                payload = json.dumps(encode(aged, self.replica))
                stored = json.dumps(
                    {k: v for k, v in encode(aged, self.replica).items() if k not in ("o", "n", "k", "s", "age")}
                )
                keys = [
                    self._key("open", change.service),
                    self._key("closed", change.service),
                    self._key("probe", change.service),
                ]
                ttl = ms(left + change.probe_timeout_s)
                if left + change.probe_timeout_s <= 0:
                    return True
                age_ms = int(aged.age_s * 1000)
                op = self._open(keys=keys, args=[stored, ttl, age_ms, self.channel, payload, "0" if resync else "1"])
            case CircuitClosed():  # not from publish (an Action): a push of the view, if ever
                return await self._send_action(Action(change, made - change.age_s), resync=resync)
            case SpendTotal(workflow, _):  # a re-sync: the total Redis counted as known here (not the view's)
                return await self._send_floor(workflow, quiet=resync)
            case _:
                return True
        return await self._run(op, quiet=resync) is not None

    async def _send_floor(self, workflow: str, *, quiet: bool) -> bool:
        """The total this replica knew Redis counted, with the key's life it was counted in (``SPEND_FLOOR``):
        into a Redis restarted empty, the largest such floor is the base, the adds kept since go on top. Sent
        for a workflow with spend kept here too (a floor of 0): a key it makes begins a life."""
        floor = self._counted.get(workflow, 0.0)
        if floor <= 0 and self._unsent.get(workflow, 0.0) <= 0:
            return True
        keys = [self._key("spend", workflow), self._key("slife", workflow)]
        life = self._lives.get(workflow, "")
        args: list[str | int] = [repr(floor), ms(SPEND_TTL_S), self.channel, self.replica, workflow, life, _new_life()]
        reply = await self._run(self._floor(keys=keys, args=args), quiet=quiet)
        if reply is None:
            return False
        total, life = _total_and_life(reply)
        self._counted[workflow], self._lives[workflow] = total, life  # the key's life from now on
        if self._view is not None:
            self._view.apply(SpendTotal(workflow, total))
        return True

    async def _send_action(self, action: Action, *, resync: bool) -> bool:
        """An operator action's script (``LIFT``, ``RESET``, ``CLOSE_OLDER``): sent with its age, so its
        instant is on Redis's clock (TIME less the age), and it undoes only what began before it."""
        age = max(self._mono() - action.made, 0.0)
        age_ms = int(age * 1000)
        op: Awaitable[Any]
        match action.change:
            case PauseLifted(model):
                payload = json.dumps(encode(PauseLifted(model, age), self.replica))
                keys = [self._key("mpause", model), self._key("mlift", model)]
                op = self._lift(keys=keys, args=[age_ms, ms(ACTION_TTL_S), self.channel, payload])
            case SpendReset(workflow):
                payload = json.dumps(encode(action.change, self.replica))
                keys = [self._key("spend", workflow), self._key("sreset", workflow)]
                args: list[str | int] = [age_ms, ms(ACTION_TTL_S), repr(action.forgiven), ms(SPEND_TTL_S)]
                op = self._reset(keys=keys, args=[*args, self.channel, payload, self.replica, workflow])
            case CircuitClosed(service):
                payload = json.dumps(encode(CircuitClosed(service, age), self.replica))
                keys = [self._key("open", service), self._key("closed", service), self._key("probe", service)]
                op = self._close_older(keys=keys, args=[age_ms, ms(CLOSED_TTL_S), self.channel, payload])
        return await self._run(op, quiet=resync) is not None

    async def _flush(self) -> bool:
        """Everything queued, then the outcomes and the spend kept, in order; False at the first failure."""
        while self._queue and self._available:
            change, made = self._queue.popleft()
            if not await self._send(change, made):
                if isinstance(change, Action):  # Redis went away under it: sent on the re-sync
                    self._keep_action(change)
                return False
        return await self._finish_kept(quiet=False) and await self._flush_spend()

    async def _flush_spend(self, *, quiet: bool = False) -> bool:
        """The spend added here and not yet counted, one INCRBYFLOAT per workflow; kept again on failure."""
        for workflow in list(self._unsent):
            usd = self._unsent.pop(workflow, 0.0)
            if usd <= 0:
                continue
            key = self._key("spend", workflow)
            cap = self._caps.get(workflow, 0.0)
            step = repr(cap / SPEND_STEPS)
            args: list[str | int] = [repr(usd), ms(SPEND_TTL_S), self.channel, self.replica, workflow, step, repr(cap)]
            args.append(_new_life())
            reply = await self._run(self._spend(keys=[key, self._key("slife", workflow)], args=args), quiet=quiet)
            if reply is None:
                self._unsent[workflow] = self._unsent.get(workflow, 0.0) + usd
                return False
            total, life = _total_and_life(reply)
            self._learn_total(workflow, total, life)
            if self._view is not None:
                self._view.apply(SpendTotal(workflow, total))
        return True

    async def _write(self) -> None:
        """The writer: sends what ``publish`` queued, while Redis is there."""
        while not self._closing:
            await self._wake.wait()
            self._wake.clear()
            if self._available:
                await self._flush()


def _new_life() -> str:
    """An id for the life a script may begin (a spend key made anew): used only if it does."""
    return uuid.uuid4().hex[:16]


def _total_and_life(reply: Any) -> tuple[float, str]:
    """``SPEND``'s and ``SPEND_FLOOR``'s reply: the total and the key's life."""
    total, life = reply
    return float(total), life.decode() if isinstance(life, bytes) else str(life)
