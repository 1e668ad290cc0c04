"""The fleet's policy state in Redis (``state: {backend: redis, url, prefix, timeout_ms}``).

Every replica that names the same Redis and prefix shares the changes of ``core.state``. Each
change is one Lua script (redis-py ``register_script``: atomic, no read-modify-write race) that
updates its key *and* publishes the change on the prefix's channel; every other replica's
subscriber applies it to its local view (``core.fleet_view``). A healthy call awaits none of
this: ``publish`` queues, one writer task sends. Every instant kept in Redis is on Redis's own
clock (``TIME`` inside the script, in ms) less the age the replica sends (how long ago it
happened, on its monotonic clock): what is older than what never depends on a replica's wall
clock. Keys (every one with a TTL)::

    {prefix}:events              the pub/sub channel of every change (JSON, with the origin replica)
    {prefix}:mthrottle:{model}   the last raise of a model's throttle      TTL THROTTLE_TTL_S (60 s)
    {prefix}:mpause:{model}      a Retry-After pause: when it began        TTL = the pause (raised, never shortened)
    {prefix}:sthrottle:{svc}     the last raise of a service's throttle    TTL THROTTLE_TTL_S
    {prefix}:open:{svc}          an open circuit: cooldown, trigger, since, TTL = seconds open + probe_timeout_s
                                 at (when it opened)
    {prefix}:probe:{svc}         the one half-open probe (SET NX)          TTL = probe_timeout_s
    {prefix}:closed:{svc}        when it last closed (read back; a stale    TTL CLOSED_TTL_S (1 h)
                                 re-push loses)
    {prefix}:spend:{workflow}    the workflow's spend, INCRBYFLOAT         TTL SPEND_TTL_S (7 days), renewed per add
    {prefix}:mlift:{model}       when an operator last lifted its pause    TTL ACTION_TTL_S (1 h)
    {prefix}:sreset:{workflow}   when an operator last reset its spend     TTL ACTION_TTL_S
    (an operator's action: lift-pause deletes a pause begun before it, reset-spend takes what the
    operator was shown off the total, close-circuit deletes an opening older than it; each publishes
    with its age, so every replica lifts / forgets / closes what is older; the mlift / sreset /
    closed record is read first on every re-sync, so a replica cut off at the time drops its stale
    pause, spend or opening before pushing it back, and keeps one begun after the action)
    {prefix}:replicas            live replicas (a sorted set of expiries)  TTL HEARTBEAT_TTL_S (3 s), beat every 1 s
    {prefix}:call:{hash}         a tool call's intent, then its outcome    TTL the dedupe window (and the call's
                                 (core.state.CallRecords; tools.once)          longest run, for an intent)

A tool call's record is not a change of the local view: it is read and written by the call that
needs it (``claim_call`` one script: SET NX of the intent, or what is there with whether its
replica is still in the heartbeat set; ``finish_call`` a SET of the outcome; ``abandon_call``
a compare-and-delete of the intent). Its value is ``i`` and the intent's JSON (replica, since), or
``o`` and the outcome as the tools layer encoded it (a result or a failure, secrets masked; never
a request, its headers or its arguments). While Redis is not there, ``claim_call`` says None and
the tools layer keeps the record in the process. The call's answer waits for ``finish_call``: it
is tried up to RECORD_TRIES times whatever the outage flag says (the claim put the intent in
Redis, and only this write replaces it); an outcome none of them got in is kept, and written once
Redis takes it (by the writer, or first thing on the re-sync), over this replica's own intent only
(``_CALL_FINISH_KEPT``): a replica polling that intent gets the outcome, not a wait to its deadline.

Staleness: a change reaches the other replicas in one publish (measured in docs/fleet.md: a
few milliseconds). The replica count lags by at most HEARTBEAT_TTL_S.

When Redis is not there (slower than ``timeout_ms``, down, restarted)::

    every operation         bounded by timeout_ms (socket timeouts and an asyncio timeout; no retries inside
                            redis-py): a call never waits longer, and never fails because of Redis (a
                            tool call's outcome: RECORD_TRIES writes at most, then kept for later)
    a burst of calls        waits for one of the pool's MAX_CONNECTIONS (a blocking pool, within the same
                            timeout_ms): more calls at once than connections is not an outage (redis-py's
                            default pool raised MaxConnectionsError at its 101st, and 220 tool calls at once
                            fell back to local state, each replica deciding alone)
    the first failure       WARNING once for the outage, StateBackendChanged(available=False) to the observer
                            (the ``sidecar.state.available`` gauge, a span event), and again on the first
                            call that decides on local state during it (its span event)
    meanwhile               every decision local; throttle and circuit changes stay in the local view;
                            spend added is kept and sent later (nothing lost); probes are granted locally;
                            an operator action (lift-pause, reset-spend, close-circuit, and a probe's close)
                            is applied here and kept, with its monotonic time, for the fleet
    reconnect               with exponential backoff and jitter (redis-py's), RECONNECT_MIN_S to RECONNECT_MAX_S
    re-sync                 subscribe first; then the actions kept, oldest first, each undoing only what is
                            older than it (a pause set later, an opening since, a cost added elsewhere stay);
                            then the tool call outcomes kept (each over this replica's intent);
                            then read every key of the prefix, and Redis's TIME, into the local view (the
                            mlift / sreset / closed records first, as ages); then push the local view back
                            (raises and pauses merged by max, a pause or an opening with its age and the
                            seconds it has left when sent: not where a later lift or close is recorded,
                            not once run out; spend as a floor), then the
                            spend kept meanwhile. An action is never dropped for a re-sync: it is sent before
                            the fleet's state is read back over it (why: docs/operations.md)
    back                    INFO once, StateBackendChanged(available=True)
    shutdown                actions (and outcomes) still queued tried again for shutdown_flush_s
                            (state.shutdown_flush_s), then each action left named in a WARNING (lost to the
                            fleet), the outcomes counted; never longer
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
import uuid
from collections import deque
from collections.abc import Awaitable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.client import PubSub
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
from redis.exceptions import RedisError

from sidecar.core.clock import Clock
from sidecar.core.details import Trigger
from sidecar.core.observer import NULL_OBSERVER, Observer, StateBackendChanged
from sidecar.core.state import (
    CallClaim,
    Change,
    CircuitClosed,
    CircuitOpened,
    Claimed,
    InProgress,
    LocalView,
    ModelPause,
    ModelRaised,
    PauseLifted,
    ProbeTaken,
    Recorded,
    Replicas,
    ServiceRaised,
    SpendAdded,
    SpendReset,
    SpendTotal,
)

__all__ = ["HEARTBEAT_S", "RedisState", "redacted"]

T = TypeVar("T")
BACKEND = "redis"
THROTTLE_TTL_S = 60.0
"""A raised throttle is kept this long for replicas that (re)join; live ones learn it at once."""
CLOSED_TTL_S = 3600.0
"""How long a close is remembered, so that a replica back from an outage does not re-open it."""
SPEND_TTL_S = 7 * 24 * 3600.0
"""A workflow's fleet spend is forgotten after this long without a new cost (renewed by each add)."""
HEARTBEAT_S = 1.0
"""Each replica says it is alive this often (and so checks Redis while no call does)."""
HEARTBEAT_TTL_S = 3.0
"""A replica not heard of for this long is no longer counted (its share of the rates goes to the rest)."""
RECONNECT_MIN_S = 0.05
RECONNECT_MAX_S = 2.0
MAX_QUEUED = 10_000
"""Changes waiting for the writer; past it the oldest are dropped (the local view still holds them)."""
SCAN_COUNT = 500
ACTION_TTL_S = 3600.0
"""How long an operator's lift or reset is remembered for replicas that re-sync after it (as CLOSED_TTL_S)."""
MAX_ACTIONS = 10_000
"""Operator actions kept while Redis is not there (one per target: a later one on it replaces it)."""
SHUTDOWN_FLUSH_S = 5.0
"""At shutdown, how long to keep trying to hand Redis the operator actions still queued (state.shutdown_flush_s)."""
LISTED = 50
"""Actions named one by one in the shutdown WARNING (the rest counted)."""
MAX_CONNECTIONS = 100
"""The pool's connections (redis-py's default size); a call past them waits for one, within timeout_ms."""
RECORD_TRIES = 3
"""A tool call's outcome is written this many times at most (each within timeout_ms) before its call is
answered without it in Redis (kept, and written once Redis takes it)."""
MAX_KEPT_OUTCOMES = 10_000
"""Outcomes kept for Redis (it did not take them); past it the oldest go (this process still holds them)."""

_KINDS = frozenset({"mthrottle", "mpause", "sthrottle", "open", "probe", "spend", "mlift", "sreset", "closed"})
"""The kinds of key read back on re-sync (``replicas`` is counted by beats, ``call`` read by the call)."""
_log = logging.getLogger("sidecar.state")

_SET_AND_PUBLISH = """
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
"""
_NOW = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
"""
"""Lua: Redis's own clock, in ms (every instant kept in Redis is on it: no replica's wall clock)."""
_PAUSE = (
    _NOW
    + """
local at = now - tonumber(ARGV[2])
if tonumber(redis.call('GET', KEYS[2]) or '-1') >= at then return 0 end
if redis.call('PTTL', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], tostring(at), 'PX', ARGV[1])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
"""
)
"""A pause (KEYS: mpause, mlift; ARGV: ms left, its age in ms, channel, payload): one begun before the
last lift is not written again (a re-push does not resurrect it); a longer one in Redis stays."""
_OPEN = (
    _NOW
    + """
local at = now - tonumber(ARGV[3])
if ARGV[6] == '0' then
  if tonumber(redis.call('GET', KEYS[2]) or '-1') >= at then return 0 end
  if redis.call('PTTL', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
else
  redis.call('DEL', KEYS[3])
end
local data = cjson.decode(ARGV[1])
data['at'] = at
redis.call('SET', KEYS[1], cjson.encode(data), 'PX', ARGV[2])
redis.call('PUBLISH', ARGV[4], ARGV[5])
return 1
"""
)
"""An opening (KEYS: open, closed, probe; ARGV: its JSON, ms, its age in ms, channel, payload, live): kept
with ``at``, when it opened; a re-push ('0') of one older than the last close is not written again."""
_LIFT = (
    _NOW
    + """
local at = now - tonumber(ARGV[1])
if tonumber(redis.call('GET', KEYS[2]) or '-1') < at then redis.call('SET', KEYS[2], tostring(at), 'PX', ARGV[2]) end
local set = tonumber(redis.call('GET', KEYS[1]) or 'x')
if set ~= nil and set > at then return 0 end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
"""
)
"""An operator's lift (KEYS: mpause, mlift; ARGV: its age in ms, the record's ttl, channel, payload)."""
_RESET = (
    _NOW
    + """
local at = now - tonumber(ARGV[1])
if tonumber(redis.call('GET', KEYS[2]) or '-1') < at then redis.call('SET', KEYS[2], tostring(at), 'PX', ARGV[2]) end
local left = tonumber(redis.call('GET', KEYS[1]) or '0') - tonumber(ARGV[3])
redis.call('PUBLISH', ARGV[5], ARGV[6])
if left <= 1e-9 then
  redis.call('DEL', KEYS[1])
  return '0'
end
redis.call('SET', KEYS[1], tostring(left), 'PX', ARGV[4])
redis.call('PUBLISH', ARGV[5], cjson.encode({o = ARGV[7], k = 'spend', n = ARGV[8], usd = left}))
return tostring(left)
"""
)
_CLOSE_OLDER = (
    _NOW
    + """
local at = now - tonumber(ARGV[1])
if tonumber(redis.call('GET', KEYS[2]) or '-1') < at then redis.call('SET', KEYS[2], tostring(at), 'PX', ARGV[2]) end
local raw = redis.call('GET', KEYS[1])
if raw then
  local ok, data = pcall(cjson.decode, raw)
  if ok and type(data) == 'table' and tonumber(data['at'] or 0) > at then return 0 end
end
redis.call('DEL', KEYS[1], KEYS[3])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
"""
)
"""A close, an operator's or a probe's (KEYS: open, closed, probe; ARGV: its age in ms, ttl, channel,
payload): the ``closed`` record keeps when; an opening made after it stays."""
_CLAIM = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  redis.call('PUBLISH', ARGV[3], ARGV[4])
  return 1
end
return 0
"""
_SPEND = """
local total = redis.call('INCRBYFLOAT', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PUBLISH', ARGV[3], cjson.encode({o = ARGV[4], k = 'spend', n = ARGV[5], usd = tonumber(total)}))
return total
"""
_SPEND_FLOOR = """
local total = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > total then
  total = tonumber(ARGV[1])
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  redis.call('PUBLISH', ARGV[3], cjson.encode({o = ARGV[4], k = 'spend', n = ARGV[5], usd = total}))
end
return tostring(total)
"""
_CALL_CLAIM = """
local held = redis.call('GET', KEYS[1])
if not held then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1}
end
local alive = 0
if string.sub(held, 1, 1) == 'i' then
  local ok, intent = pcall(cjson.decode, string.sub(held, 2))
  if ok and type(intent) == 'table' and intent['r'] then
    local expiry = redis.call('ZSCORE', KEYS[2], intent['r'])
    local now = redis.call('TIME')
    local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
    if expiry and tonumber(expiry) > ms then alive = 1 end
  end
end
return {0, held, alive}
"""
_CALL_ABANDON = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
"""
_CALL_FINISH_KEPT = """
local held = redis.call('GET', KEYS[1])
if not held or string.sub(held, 1, 1) ~= 'i' then return 0 end
local ok, intent = pcall(cjson.decode, string.sub(held, 2))
if not ok or type(intent) ~= 'table' or intent['r'] ~= ARGV[3] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""
"""An outcome Redis did not take when its call ended, written on re-sync (KEYS: the call; ARGV: the
outcome, ms left, this replica): only over this replica's own intent (a later outcome or claim stands)."""
_HEARTBEAT = """
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZADD', KEYS[1], ms + tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return redis.call('ZCARD', KEYS[1])
"""


def redacted(url: str) -> str:
    """The URL as an address to show: scheme, host, port and database, never a user or password."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "redis (an unreadable URL)"
    if parts.scheme == "unix":
        return f"unix:{parts.path}"
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _ms(seconds: float) -> int:
    return max(int(seconds * 1000), 1)


def _trigger(data: Any) -> Trigger | None:
    if not isinstance(data, dict):
        return None
    status = data.get("status")
    raw = data.get("retry_after")
    return Trigger(
        status if isinstance(status, int) else None, str(data.get("detail", "")), raw if isinstance(raw, str) else None
    )


def _since(value: Any) -> datetime:
    try:
        return datetime.fromtimestamp(float(value), UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        return datetime.now(UTC)


def _age(data: dict[str, Any]) -> float:
    """A change's age in seconds, as published (0: an older replica's change, or none given)."""
    try:
        return max(float(data.get("age", 0.0)), 0.0)
    except (TypeError, ValueError):
        return 0.0


def _describe(action: _Action) -> str:
    """An action as the operator typed it: ``lift-pause gpt``."""
    match action.change:
        case PauseLifted(model):
            return f"lift-pause {model}"
        case SpendReset(workflow):
            return f"reset-spend {workflow} ({action.forgiven:.6f} USD)"
        case CircuitClosed(service):
            return f"close-circuit {service}"


def encode(change: Change, origin: str) -> dict[str, Any]:
    """A change as the JSON object published on the channel."""
    out: dict[str, Any] = {"o": origin}
    match change:
        case ModelRaised(model, throttle, step):
            out.update(k="mraise", n=model, v=throttle, step=step)
        case ModelPause(model, seconds, age):
            out.update(k="mpause", n=model, s=seconds, age=age)
        case ServiceRaised(service, throttle):
            out.update(k="sraise", n=service, v=throttle)
        case CircuitOpened():
            t = change.trigger
            out.update(
                k="open",
                n=change.service,
                s=change.seconds,
                cooldown=change.cooldown_s,
                since=change.since.timestamp(),
                reason=change.reason,
                probe=change.probe_timeout_s,
                age=change.age_s,
                trigger=None
                if t is None
                else {"status": t.status_code, "detail": t.detail, "retry_after": t.retry_after_raw},
            )
        case ProbeTaken(service, seconds):
            out.update(k="probe", n=service, s=seconds)
        case CircuitClosed(service, age):
            out.update(k="closed", n=service, age=age)
        case SpendAdded(workflow, usd) | SpendTotal(workflow, usd):
            out.update(k="spend", n=workflow, usd=usd)
        case Replicas(count):
            out.update(k="replicas", v=count)
        case PauseLifted(model, age):
            out.update(k="mlift", n=model, age=age)
        case SpendReset(workflow):
            out.update(k="sreset", n=workflow)
    return out


def decode(data: Any) -> Change | None:
    """The change a published JSON object describes (None: not one this version knows)."""
    if not isinstance(data, dict) or not isinstance(data.get("n"), str):
        return None
    name: str = data["n"]
    try:
        match data.get("k"):
            case "mraise":
                return ModelRaised(name, float(data["v"]), float(data.get("step", 0.0)))
            case "mpause":
                return ModelPause(name, float(data["s"]), _age(data))
            case "sraise":
                return ServiceRaised(name, float(data["v"]))
            case "open":
                return CircuitOpened(
                    name,
                    float(data["s"]),
                    float(data["cooldown"]),
                    _trigger(data.get("trigger")),
                    _since(data.get("since")),
                    str(data.get("reason", "")),
                    float(data.get("probe", 60.0)),
                    _age(data),
                )
            case "probe":
                return ProbeTaken(name, float(data["s"]))
            case "closed":
                return CircuitClosed(name, _age(data))
            case "spend":
                return SpendTotal(name, float(data["usd"]))
            case "mlift":
                return PauseLifted(name, _age(data))
            case "sreset":
                return SpendReset(name)
    except (KeyError, TypeError, ValueError):
        return None
    return None


@dataclass(frozen=True, slots=True)
class _Action:
    """An operator's action (or a probe's close) as it goes to Redis: the change, when it was made on
    this replica's monotonic clock (sent as its age: Redis's TIME less it is the action's instant, and
    it undoes only what is older), and for a reset what is taken off the fleet's total."""

    change: PauseLifted | SpendReset | CircuitClosed
    made: float
    forgiven: float = 0.0

    @property
    def target(self) -> tuple[str, str]:
        match self.change:
            case PauseLifted(model):
                return ("mlift", model)
            case SpendReset(workflow):
                return ("sreset", workflow)
            case CircuitClosed(service):
                return ("closed", service)


class RedisState:
    """A ``core.state.StateBackend`` on one Redis (see the module docstring)."""

    def __init__(
        self,
        url: str,
        prefix: str,
        timeout_ms: int,
        *,
        observer: Observer = NULL_OBSERVER,
        replica: str | None = None,
        clock: Clock | None = None,
        shutdown_flush_s: float = SHUTDOWN_FLUSH_S,
    ) -> None:
        self.url = url
        self.prefix = prefix
        self.timeout_s = timeout_ms / 1000
        self.replica = replica or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.channel = f"{prefix}:events"
        self._observer = observer
        self._clock = clock
        """The monotonic clock an action's and a change's age is read on (None: the system's; a test's
        fake one): the same clock as the local view's, whose pauses and openings carry their age."""
        self.shutdown_flush_s = shutdown_flush_s
        pool = BlockingConnectionPool.from_url(
            url,
            max_connections=MAX_CONNECTIONS,
            timeout=self.timeout_s,
            socket_timeout=self.timeout_s,
            socket_connect_timeout=self.timeout_s,
            retry=Retry(NoBackoff(), 0),
            health_check_interval=0,
        )
        self._client = Redis.from_pool(pool)
        scripts = (_SET_AND_PUBLISH, _PAUSE, _OPEN, _CLAIM, _SPEND, _SPEND_FLOOR, _HEARTBEAT)
        self._set, self._pause, self._open, self._claim, self._spend, self._floor, self._beat = (
            self._client.register_script(s) for s in scripts
        )
        self._call_claim = self._client.register_script(_CALL_CLAIM)
        self._call_abandon = self._client.register_script(_CALL_ABANDON)
        self._call_kept = self._client.register_script(_CALL_FINISH_KEPT)
        self._lift = self._client.register_script(_LIFT)
        self._reset = self._client.register_script(_RESET)
        self._close_older = self._client.register_script(_CLOSE_OLDER)
        self._backoff = ExponentialWithJitterBackoff(cap=RECONNECT_MAX_S, base=RECONNECT_MIN_S)
        self._view: LocalView | None = None
        self._queue: deque[tuple[Change | _Action, float]] = deque(maxlen=MAX_QUEUED)
        """What ``publish`` queued for the writer, with when (``_mono``): its age grows while it waits."""
        self._pending: dict[tuple[str, str], _Action] = {}
        """Operator actions Redis has not taken yet (made while it was not there): sent first on re-sync."""
        self._unsent: dict[str, float] = {}
        """Spend added here that Redis has not counted yet (sent on the next wake, or after an outage)."""
        self._kept_outcomes: dict[str, tuple[str, float]] = {}
        """Tool calls' outcomes Redis did not take (the value, until when on ``_mono``): written on re-sync."""
        self._wake = asyncio.Event()
        self._available = False
        self._noted_in_call = False
        self._outage_since = 0.0
        self._outages = 0
        self._heard: float | None = None
        """time.monotonic() when Redis last answered (a beat, a message, a sync); None: never."""
        self._last_error = ""
        self._pubsub: PubSub | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False

    def __repr__(self) -> str:
        state = "available" if self._available else "unavailable"
        return f"<RedisState {redacted(self.url)} prefix={self.prefix!r} {state} replica={self.replica}>"

    # ------------------------------------------------------------------ the StateBackend protocol

    @property
    def shared(self) -> bool:
        return True

    @property
    def available(self) -> bool:
        return self._available

    @property
    def outages(self) -> int:
        """Outages seen since start (the first connection failing counts as one)."""
        return self._outages

    @property
    def heard_s(self) -> float | None:
        """Seconds since Redis last answered this replica (a heartbeat every HEARTBEAT_S, a message, a
        re-sync): how stale this replica's view of the fleet may be. None: never reached."""
        return None if self._heard is None else max(time.monotonic() - self._heard, 0.0)

    @property
    def last_error(self) -> str:
        """What the last failed Redis operation raised (its type and message; "" when none failed)."""
        return self._last_error

    @property
    def pending_actions(self) -> int:
        """Operator actions applied here that the fleet has not had yet (Redis not there): sent on re-sync."""
        return len(self._pending) + sum(isinstance(c, _Action) for c, _ in self._queue)

    def publish(self, change: Change) -> None:
        item: Change | _Action = change
        now = self._mono()
        if isinstance(change, SpendReset):  # what was added here before the reset is not in Redis: not taken off
            unsent = self._unsent.pop(change.workflow, 0.0)
            item = _Action(change, now, max(change.usd - unsent, 0.0))
        elif isinstance(change, PauseLifted | CircuitClosed):
            item = _Action(change, now - change.age_s)
        if isinstance(change, SpendAdded):
            self._unsent[change.workflow] = self._unsent.get(change.workflow, 0.0) + change.usd
        elif self._available:
            self._queue.append((item, now))
        elif isinstance(item, _Action):
            self._keep_action(item)
        if self._available:
            self._wake.set()
        else:
            self._note_in_call()

    def _mono(self) -> float:
        """Monotonic seconds on this replica: how old an action or a change is when Redis gets it."""
        return self._clock.time() if self._clock is not None else time.monotonic()

    def _keep_action(self, action: _Action) -> None:
        """An action for the next re-sync; a later one on the same target replaces it (a reset adds up)."""
        held = self._pending.pop(action.target, None)
        if held is not None and isinstance(action.change, SpendReset):
            action = _Action(action.change, action.made, action.forgiven + held.forgiven)
        if len(self._pending) >= MAX_ACTIONS:
            self._pending.pop(next(iter(self._pending)))
        self._pending[action.target] = action

    async def claim_probe(self, service: str, seconds: float) -> bool:
        if not self._available:
            self._note_in_call()
            return True  # the local circuit alone decides: at worst one probe per replica
        payload = json.dumps(encode(ProbeTaken(service, seconds), self.replica))
        key = self._key("probe", service)
        won = await self._run(self._claim(keys=[key], args=[self.replica, _ms(seconds), self.channel, payload]))
        return True if won is None else bool(won)

    # ------------------------------------------------------------------ the record of tool calls

    @property
    def owner(self) -> str:
        return self.replica

    async def claim_call(self, key: str, ttl_s: float, since: float) -> CallClaim | None:
        if not self._available:
            self._note_in_call()
            return None
        intent = "i" + json.dumps({"r": self.replica, "w": since})
        keys = [self._key("call", key), self._key("replicas")]
        got = await self._run(self._call_claim(keys=keys, args=[intent, _ms(ttl_s)]))
        if not isinstance(got, list) or not got:
            return None
        if int(got[0]) == 1:
            return Claimed(intent)
        held = got[1].decode("utf-8", "replace") if isinstance(got[1], bytes) else str(got[1])
        if held.startswith("o"):
            return Recorded(held[1:])
        try:
            data = json.loads(held[1:])
            return InProgress(str(data["r"]), float(data["w"]), alive=int(got[2]) == 1)
        except (KeyError, TypeError, ValueError):
            return InProgress("", 0.0, alive=False)  # unreadable: no one can say it was not sent

    async def finish_call(self, key: str, outcome: str, ttl_s: float) -> bool:
        # Tried whatever the outage flag says: the call's intent is in Redis (its claim was), and only
        # this write replaces it with what a re-send must get; the call's answer waits for it.
        for _ in range(RECORD_TRIES):
            if await self._run(self._client.set(self._key("call", key), "o" + outcome, px=_ms(ttl_s))):
                return True
        if len(self._kept_outcomes) >= MAX_KEPT_OUTCOMES:
            self._kept_outcomes.pop(next(iter(self._kept_outcomes)))
        self._kept_outcomes[key] = ("o" + outcome, self._mono() + ttl_s)
        self._wake.set()  # the writer, or the re-sync once Redis is back, writes it
        return False

    async def abandon_call(self, key: str, token: str) -> None:
        if self._available:
            await self._run(self._call_abandon(keys=[self._key("call", key)], args=[token]))

    async def _finish_kept(self, *, quiet: bool = True) -> bool:
        """The outcomes Redis did not take, over this replica's intents; False, the rest kept, at a failure."""
        for key, (value, until) in list(self._kept_outcomes.items()):
            left = until - self._mono()
            if left > 0:
                write = self._call_kept(keys=[self._key("call", key)], args=[value, _ms(left), self.replica])
                if await self._run(write, quiet=quiet) is None:
                    return False
            self._kept_outcomes.pop(key, None)
        return True

    # ------------------------------------------------------------------ life

    async def start(self, view: LocalView) -> None:
        """Connect (within the timeout: a Redis that is not there starts the outage, not a failure) and run."""
        self._view = view
        if not await self._connect():
            self._down("not reachable at start")
        self._tasks = [
            asyncio.create_task(self._keep(), name="state-keeper"),
            asyncio.create_task(self._write(), name="state-writer"),
        ]

    async def close(self) -> None:
        """Send what is queued (within the timeout), leave the replica count, disconnect.

        Operator actions still queued (Redis not there) get ``shutdown_flush_s`` more: tried again,
        with backoff, until Redis takes them or the time is up (never longer: shutdown does not hang
        on Redis); what is left is named in a WARNING, one line per action, as lost to the fleet."""
        self._closing = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._available:
            await self._flush()
        if self.pending_actions or self._unsent or self._kept_outcomes:
            await self._flush_at_shutdown()
        if self._available:
            await self._run(self._client.zrem(self._key("replicas"), self.replica), quiet=True)
        await self._drop_pubsub()
        with contextlib.suppress(RedisError, OSError):
            await self._client.aclose()

    async def _flush_at_shutdown(self) -> None:
        """The actions still queued (and the spend not counted yet) to Redis within ``shutdown_flush_s``."""
        for item, _ in self._queue:
            if isinstance(item, _Action):
                self._keep_action(item)
        self._queue.clear()
        queued = len(self._pending)
        loop = asyncio.get_running_loop()
        start = loop.time()
        failures = 0
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.shutdown_flush_s):
                while True:
                    if await self._replay() and await self._finish_kept() and await self._flush_spend(quiet=True):
                        break
                    await asyncio.sleep(max(self._backoff.compute(failures), RECONNECT_MIN_S))
                    failures += 1
        spent = loop.time() - start
        if queued and not self._pending:
            _log.info(
                "state backend %s: the %d operator actions still queued were sent to the fleet at shutdown (%.1f s)",
                redacted(self.url),
                queued,
                spent,
                extra={"state_backend": BACKEND},
            )
        if self._pending:
            now = self._mono()
            left = sorted(self._pending.values(), key=lambda a: a.made)
            listed = "; ".join(f"{_describe(a)} (made {max(now - a.made, 0.0):.1f} s ago)" for a in left[:LISTED])
            if len(left) > LISTED:
                listed += f"; and {len(left) - LISTED} more"
            _log.warning(
                "state backend %s: %d operator actions never reached the fleet: Redis did not answer within "
                "state.shutdown_flush_s (%.1f s) at shutdown (%s). They took effect on this replica only, "
                "which is stopping: the other replicas still hold what they undid. Repeat them on a running "
                "replica once Redis answers: %s",
                redacted(self.url),
                len(self._pending),
                self.shutdown_flush_s,
                self._last_error or "not reachable",
                listed,
                extra={"state_backend": BACKEND, "lost_actions": len(self._pending)},
            )
        if self._kept_outcomes:
            _log.warning(
                "state backend %s: %d tool call outcomes answered here never reached Redis (shutdown): a re-send "
                "of one is answered 'outcome unknown', not sent again",
                redacted(self.url),
                len(self._kept_outcomes),
                extra={"state_backend": BACKEND},
            )
        if self._unsent:
            _log.warning(
                "state backend %s: spend recorded here and not counted in Redis was dropped at shutdown: %s",
                redacted(self.url),
                ", ".join(f"{w} {usd:.6f} USD" for w, usd in sorted(self._unsent.items())),
                extra={"state_backend": BACKEND},
            )

    # ------------------------------------------------------------------ internals

    def _key(self, kind: str, name: str = "") -> str:
        return f"{self.prefix}:{kind}:{name}" if name else f"{self.prefix}:{kind}"

    async def _run(self, op: Awaitable[T], *, quiet: bool = False) -> T | None:
        """One Redis operation within the timeout; None when it fails (the outage begun, unless ``quiet``)."""
        try:
            async with asyncio.timeout(self.timeout_s):
                return await op
        except (RedisError, OSError, TimeoutError) as exc:
            self._failed(exc)
            if not quiet:
                self._down(type(exc).__name__)
            return None

    def _failed(self, exc: BaseException) -> None:
        detail = str(exc)[:200]
        self._last_error = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__

    def _down(self, reason: str) -> None:
        if not self._available and self._outages:
            return  # the same outage
        self._available = False
        self._noted_in_call = False
        self._outages += 1
        self._outage_since = asyncio.get_running_loop().time()
        _log.warning(
            "state backend %s unavailable (%s): calls go on under local state; reconnecting with backoff",
            redacted(self.url),
            reason,
            extra={"state_backend": BACKEND},
        )
        self._observer.event(StateBackendChanged(BACKEND, False, reason))
        self._wake.set()  # the keeper notices at once

    def _note_in_call(self) -> None:
        """Once per outage, on the span of the first call that decides on local state."""
        if not self._noted_in_call and self._outages:
            self._noted_in_call = True
            self._observer.event(StateBackendChanged(BACKEND, False, "this call decided on local state"))

    async def _connect(self) -> bool:
        """Subscribe, read the fleet's state, push ours, send the spend kept: True when all of it went."""
        await self._drop_pubsub()
        pubsub = self._client.pubsub(ignore_subscribe_messages=True)
        try:
            async with asyncio.timeout(self.timeout_s * 4):  # connect, subscribe: a few round trips
                await pubsub.subscribe(self.channel)
        except (RedisError, OSError, TimeoutError) as exc:
            self._failed(exc)
            with contextlib.suppress(RedisError, OSError):
                await pubsub.aclose()  # type: ignore[no-untyped-call]  # untyped in redis-py
            return False
        self._pubsub = pubsub
        for item, _ in self._queue:  # an action is an absence the local view cannot push again: kept
            if isinstance(item, _Action):
                self._keep_action(item)
        self._queue.clear()  # the rest is in the local view: the push sends it
        synced = (
            await self._replay()
            and await self._finish_kept()
            and await self._pull()
            and await self._push()
            and await self._heartbeat(quiet=True)
        )
        if not synced or not await self._flush_spend(quiet=True):
            await self._drop_pubsub()
            return False
        self._available = True
        return True

    async def _drop_pubsub(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            with contextlib.suppress(RedisError, OSError):
                await pubsub.aclose()  # type: ignore[no-untyped-call]  # untyped in redis-py

    async def _replay(self) -> bool:
        """The operator actions kept while Redis was not there, oldest first, before the fleet's state is
        read back (each undoes only what is older than it); False, the rest kept, at the first failure."""
        sent = 0
        for target, action in sorted(self._pending.items(), key=lambda item: item[1].made):
            if not await self._send(action, action.made, resync=True):
                return False
            self._pending.pop(target, None)
            sent += 1
        if sent:
            _log.info(
                "state backend %s: %d operator actions made while it was not reachable sent to the fleet",
                redacted(self.url),
                sent,
                extra={"state_backend": BACKEND},
            )
        return True

    async def _pull(self) -> bool:
        """Every key of the prefix into the local view (opened before probes, so a probe lands half-open)."""
        assert self._view is not None
        keys: list[bytes] = []
        try:
            async with asyncio.timeout(max(self.timeout_s * 10, 1.0)):  # a scan is many round trips
                async for key in self._client.scan_iter(match=f"{self.prefix}:*", count=SCAN_COUNT):
                    kind = key.decode("utf-8", "replace")[len(self.prefix) + 1 :].partition(":")[0]
                    if kind in _KINDS:  # the replicas' sorted set is not state to read back
                        keys.append(key)
                pipe = self._client.pipeline(transaction=False)
                pipe.time()  # Redis's clock: what the instants kept in it are read against (their age)
                for key in keys:
                    pipe.get(key)
                    pipe.pttl(key)
                clock, *values = await pipe.execute()
        except (RedisError, OSError, TimeoutError):
            return False
        now_ms = int(clock[0]) * 1000 + int(clock[1]) // 1000
        changes: list[tuple[int, Change]] = []
        head = f"{self.prefix}:"
        for i, raw in enumerate(keys):
            key = raw.decode("utf-8", "replace")
            kind, _, name = key[len(head) :].partition(":")
            value, ttl = values[2 * i], values[2 * i + 1]
            if value is None or not name or ttl == -2:
                continue
            change = self._read(kind, name, value, ttl / 1000 if ttl > 0 else 0.0, now_ms)
            if change is not None:  # a lift, reset or close first: each undoes only what is older than it
                order = (
                    0
                    if isinstance(change, PauseLifted | SpendReset | CircuitClosed)
                    else 2
                    if isinstance(change, ProbeTaken)
                    else 1
                )
                changes.append((order, change))
        for _, change in sorted(changes, key=lambda c: c[0]):
            self._view.apply(change)
        return True

    @staticmethod
    def _read(kind: str, name: str, value: bytes, left: float, now_ms: int) -> Change | None:
        """A key read back (``now_ms``: Redis's TIME, against which its instants become ages)."""

        def age(stamp: Any) -> float:
            try:
                return max(now_ms - float(stamp), 0.0) / 1000
            except (TypeError, ValueError):
                return 0.0

        try:
            match kind:
                case "mthrottle":
                    return ModelRaised(name, float(value), 0.0)
                case "mpause":
                    return ModelPause(name, left, age(value)) if left > 0 else None
                case "sthrottle":
                    return ServiceRaised(name, float(value))
                case "open":
                    data = json.loads(value)
                    probe = float(data.get("probe", 60.0))
                    s = max(left - probe, 0.0)
                    return decode({**data, "n": name, "k": "open", "s": s, "age": age(data.get("at", 0))})
                case "closed":
                    return CircuitClosed(name, age(value))
                case "probe":
                    return ProbeTaken(name, left) if left > 0 else None
                case "spend":
                    return SpendTotal(name, float(value))
                case "mlift":
                    return PauseLifted(name, age(value))
                case "sreset":
                    return SpendReset(name)
        except (TypeError, ValueError):
            return None
        return None

    async def _push(self) -> bool:
        """The local view back to Redis and the fleet, each change merged by max on the other side (a
        pause and an opening with their age: one older than a lift or a close recorded is not pushed)."""
        assert self._view is not None
        taken = self._mono()
        for change in self._view.snapshot():
            if not await self._send(change, taken, resync=True):
                return False
        return True

    async def _heartbeat(self, *, quiet: bool = False) -> bool:
        assert self._view is not None
        beat = self._beat(keys=[self._key("replicas")], args=[self.replica, _ms(HEARTBEAT_TTL_S)])
        count = await self._run(beat, quiet=quiet)
        if count is None:
            return False
        self._heard = time.monotonic()
        self._view.apply(Replicas(int(count)))
        return True

    async def _send(self, item: Change | _Action, made: float, *, resync: bool = False) -> bool:
        """One change's script (``made``: when, on ``_mono``, it was published or snapshotted: a pause's
        seconds left shrink and its age grows by the wait); False when Redis did not take it."""
        if isinstance(item, _Action):
            return await self._send_action(item, resync=resync)
        change = item
        waited = max(self._mono() - made, 0.0)
        op: Awaitable[Any]
        match change:
            case ModelRaised(model, throttle, _):
                payload = json.dumps(encode(change, self.replica))
                op = self._set(
                    keys=[self._key("mthrottle", model)], args=[throttle, _ms(THROTTLE_TTL_S), self.channel, payload]
                )
            case ModelPause(model, seconds, age):  # kept: when it began on Redis's clock (TIME less its age)
                left, age = seconds - waited, age + waited
                if left <= 0:
                    return True  # ran out on the way: not written again
                payload = json.dumps(encode(ModelPause(model, left, age), self.replica))
                keys = [self._key("mpause", model), self._key("mlift", model)]
                op = self._pause(keys=keys, args=[_ms(left), int(age * 1000), self.channel, payload])
            case ServiceRaised(service, throttle):
                payload = json.dumps(encode(change, self.replica))
                op = self._set(
                    keys=[self._key("sthrottle", service)], args=[throttle, _ms(THROTTLE_TTL_S), self.channel, payload]
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
                ttl = _ms(left + change.probe_timeout_s)
                if left + change.probe_timeout_s <= 0:
                    return True
                age_ms = int(aged.age_s * 1000)
                op = self._open(keys=keys, args=[stored, ttl, age_ms, self.channel, payload, "0" if resync else "1"])
            case CircuitClosed():  # not from publish (an _Action): a push of the view, if ever
                return await self._send_action(_Action(change, made - change.age_s), resync=resync)
            case SpendTotal(workflow, usd):  # a re-sync: the total known here, less what Redis has not counted yet
                floor = usd - self._unsent.get(workflow, 0.0)
                if floor <= 0:
                    return True
                key = self._key("spend", workflow)
                op = self._floor(keys=[key], args=[repr(floor), _ms(SPEND_TTL_S), self.channel, self.replica, workflow])
            case _:
                return True
        return await self._run(op, quiet=resync) is not None

    async def _send_action(self, action: _Action, *, resync: bool) -> bool:
        """An operator action's script (``_LIFT``, ``_RESET``, ``_CLOSE_OLDER``): sent with its age, so its
        instant is on Redis's clock (TIME less the age), and it undoes only what began before it."""
        age = max(self._mono() - action.made, 0.0)
        age_ms = int(age * 1000)
        op: Awaitable[Any]
        match action.change:
            case PauseLifted(model):
                payload = json.dumps(encode(PauseLifted(model, age), self.replica))
                keys = [self._key("mpause", model), self._key("mlift", model)]
                op = self._lift(keys=keys, args=[age_ms, _ms(ACTION_TTL_S), self.channel, payload])
            case SpendReset(workflow):
                payload = json.dumps(encode(action.change, self.replica))
                keys = [self._key("spend", workflow), self._key("sreset", workflow)]
                args: list[str | int] = [age_ms, _ms(ACTION_TTL_S), repr(action.forgiven), _ms(SPEND_TTL_S)]
                op = self._reset(keys=keys, args=[*args, self.channel, payload, self.replica, workflow])
            case CircuitClosed(service):
                payload = json.dumps(encode(CircuitClosed(service, age), self.replica))
                keys = [self._key("open", service), self._key("closed", service), self._key("probe", service)]
                op = self._close_older(keys=keys, args=[age_ms, _ms(CLOSED_TTL_S), self.channel, payload])
        return await self._run(op, quiet=resync) is not None

    async def _flush(self) -> bool:
        """Everything queued, then the outcomes and the spend kept, in order; False at the first failure."""
        while self._queue and self._available:
            change, made = self._queue.popleft()
            if not await self._send(change, made):
                if isinstance(change, _Action):  # Redis went away under it: sent on the re-sync
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
            add = self._spend(keys=[key], args=[repr(usd), _ms(SPEND_TTL_S), self.channel, self.replica, workflow])
            total = await self._run(add, quiet=quiet)
            if total is None:
                self._unsent[workflow] = self._unsent.get(workflow, 0.0) + usd
                return False
            if self._view is not None:
                self._view.apply(SpendTotal(workflow, float(total)))
        return True

    async def _write(self) -> None:
        """The writer: sends what ``publish`` queued, while Redis is there."""
        while not self._closing:
            await self._wake.wait()
            self._wake.clear()
            if self._available:
                await self._flush()

    async def _keep(self) -> None:
        """Listens while connected (beating every HEARTBEAT_S); reconnects with backoff while not."""
        failures = 0
        while not self._closing:
            if self._available:
                failures = 0
                try:
                    await self._listen()
                except Exception as exc:  # never let the keeper die: a bug here is an outage, logged
                    _log.exception("state backend listener failed")
                    self._down(type(exc).__name__)
                continue
            await asyncio.sleep(max(self._backoff.compute(failures), RECONNECT_MIN_S))
            failures += 1
            try:
                connected = await self._connect()
            except Exception:  # never let the keeper die: a bug here leaves the outage on, logged
                _log.exception("state backend re-sync failed")
                connected = False
            if connected:
                outage = asyncio.get_running_loop().time() - self._outage_since
                _log.info(
                    "state backend %s available again after %.1f s; re-synced",
                    redacted(self.url),
                    outage,
                    extra={"state_backend": BACKEND},
                )
                self._observer.event(StateBackendChanged(BACKEND, True, f"back after {outage:.1f} s"))
                self._wake.set()  # what calls published while it came back

    async def _listen(self) -> None:
        """Apply what the others publish until the connection fails; beat on the way."""
        assert self._view is not None
        pubsub = self._pubsub
        loop = asyncio.get_running_loop()
        next_beat = loop.time() + HEARTBEAT_S
        while self._available and pubsub is not None and not self._closing:
            try:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=HEARTBEAT_S / 4)
            except (RedisError, OSError) as exc:
                self._failed(exc)
                self._down(type(exc).__name__)
                return
            if message is not None and message.get("type") == "message":
                self._heard = time.monotonic()
                self._receive(message.get("data"))
            if loop.time() >= next_beat:
                next_beat = loop.time() + HEARTBEAT_S
                if not await self._heartbeat():
                    return

    def _receive(self, data: Any) -> None:
        assert self._view is not None
        try:
            body = json.loads(data)
        except (TypeError, ValueError):
            return
        if not isinstance(body, dict) or body.get("o") == self.replica:
            return
        change = decode(body)
        if change is not None:
            self._view.apply(change)
