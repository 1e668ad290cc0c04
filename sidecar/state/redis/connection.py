"""The Redis backend's connection and its health: the client (``dial.client``: one Redis, Sentinel's
primary, or a Redis Cluster from its seed nodes) and the scripts, every operation bounded by ``timeout_ms``,
the outage noticed once (a WARNING, ``StateBackendChanged``), what it holds for the parts above (``calls``,
``writer``, ``sync``, ``backend``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections import deque
from collections.abc import Awaitable
from typing import TypeVar

from redis.asyncio.client import PubSub
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import RedisError

from sidecar.core.clock import Clock
from sidecar.core.observer import NULL_OBSERVER, Observer, StateBackendChanged
from sidecar.core.state import Change, LocalView
from sidecar.state.redis.actions import Action
from sidecar.state.redis.dial import Dial, address, client, hint
from sidecar.state.redis.keys import key
from sidecar.state.redis.scripts import (
    ALIVE,
    CALL_ABANDON,
    CALL_CLAIM,
    CALL_FINISH_KEPT,
    CLAIM,
    CLOSE_OLDER,
    HEARTBEAT,
    LIFT,
    OPEN,
    PAUSE,
    RESET,
    SET_AND_PUBLISH,
    SPEND,
    SPEND_FLOOR,
)

__all__ = [
    "BACKEND",
    "MAX_CONNECTIONS",
    "RECONNECT_MAX_S",
    "RECONNECT_MIN_S",
    "RedisConnection",
    "ms",
]

T = TypeVar("T")
BACKEND = "redis"
RECONNECT_MIN_S = 0.05
RECONNECT_MAX_S = 2.0
MAX_QUEUED = 10_000
"""Changes waiting for the writer; past it the oldest are dropped (the local view still holds them)."""
SHUTDOWN_FLUSH_S = 5.0
"""At shutdown, how long to keep trying to hand Redis the operator actions still queued (state.shutdown_flush_s)."""
MAX_CONNECTIONS = 100
"""The pool's connections (redis-py's default size); a call past them waits for one, within timeout_ms. In
cluster mode the same bound is a semaphore over every operation (redis-py's cluster client has no blocking
pool: its 101st connection to a node raises), and each node's pool holds a few more for the subscriber and
the re-sync's scan (``dial.CLUSTER_SPARE_CONNECTIONS``)."""
_log = logging.getLogger("sidecar.state")


def ms(seconds: float) -> int:
    return max(int(seconds * 1000), 1)


class RedisConnection:
    """One Redis: the connection, its scripts and its health, and the state every part of the backend keeps."""

    def __init__(
        self,
        target: str | Dial,
        prefix: str,
        timeout_ms: int,
        *,
        observer: Observer = NULL_OBSERVER,
        replica: str | None = None,
        clock: Clock | None = None,
        shutdown_flush_s: float = SHUTDOWN_FLUSH_S,
    ) -> None:
        self.dial = target if isinstance(target, Dial) else Dial(url=target)
        """Where Redis is and how to reach it (a URL, or Sentinel's nodes; TLS; the ACL user): ``dial.py``."""
        self.address = address(self.dial)
        """Where Redis is, as the logs show it (no user, no password)."""
        self.cluster = self.dial.cluster is not None
        """Cluster mode (``dial.cluster``): redis-py's cluster client, keys named by ``keys`` to share slots."""
        self.prefix = prefix
        self.timeout_s = timeout_ms / 1000
        self.replica = replica or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.channel = f"{prefix}:events"
        self._observer = observer
        self._clock = clock
        """The monotonic clock an action's and a change's age is read on (None: the system's; a test's
        fake one): the same clock as the local view's, whose pauses and openings carry their age."""
        self.shutdown_flush_s = shutdown_flush_s
        self._client = client(self.dial, self.timeout_s, MAX_CONNECTIONS)
        self._slots = asyncio.Semaphore(MAX_CONNECTIONS) if self.cluster else None
        """Cluster mode: the operations at once, as the single Redis's blocking pool bounds them."""
        scripts = (SET_AND_PUBLISH, PAUSE, OPEN, CLAIM, SPEND, SPEND_FLOOR, HEARTBEAT)
        self._set, self._pause, self._open, self._claim, self._spend, self._floor, self._beat = (
            self._client.register_script(s) for s in scripts
        )
        self._call_claim = self._client.register_script(CALL_CLAIM)
        self._call_abandon = self._client.register_script(CALL_ABANDON)
        self._call_kept = self._client.register_script(CALL_FINISH_KEPT)
        self._alive = self._client.register_script(ALIVE)
        self._lift = self._client.register_script(LIFT)
        self._reset = self._client.register_script(RESET)
        self._close_older = self._client.register_script(CLOSE_OLDER)
        self._backoff = ExponentialWithJitterBackoff(cap=RECONNECT_MAX_S, base=RECONNECT_MIN_S)
        self._view: LocalView | None = None
        self._queue: deque[tuple[Change | Action, float]] = deque(maxlen=MAX_QUEUED)
        """What ``publish`` queued for the writer, with when (``_mono``): its age grows while it waits."""
        self._pending: dict[tuple[str, str], Action] = {}
        """Operator actions Redis has not taken yet (made while it was not there): sent first on re-sync."""
        self._unsent: dict[str, float] = {}
        """Spend added here that Redis has not counted yet (sent on the next wake, or after an outage)."""
        self._caps: dict[str, float] = {}
        """Each workflow's cap as its last cost here carried it (writer.SPEND_STEPS: when its total is published)."""
        self._counted: dict[str, float] = {}
        """Each workflow's total as Redis counted it, the most this replica was told (replies, publishes, a re-sync's
        read): its floor on re-sync. Not the view's spend, which holds the adds not counted yet too."""
        self._lives: dict[str, str] = {}
        """The life of the spend key each ``_counted`` total was counted in (``slife``; "" when none was kept)."""
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
        mode = " cluster" if self.cluster else ""
        return f"<RedisState{mode} {self.address} prefix={self.prefix!r} {state} replica={self.replica}>"

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

    def _mono(self) -> float:
        """Monotonic seconds on this replica: how old an action or a change is when Redis gets it."""
        return self._clock.time() if self._clock is not None else time.monotonic()

    def _key(self, kind: str, name: str = "") -> str:
        return key(self.prefix, kind, name)

    async def _run(self, op: Awaitable[T], *, quiet: bool = False) -> T | None:
        """One Redis operation within the timeout; None when it fails (the outage begun, unless ``quiet``)."""
        try:
            async with asyncio.timeout(self.timeout_s):
                if self._slots is None:
                    return await op
                async with self._slots:
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
        error = self._last_error
        said = error if error.startswith(reason) else f"{reason}: {error}" if error else reason
        check = hint(self._last_error, self.dial)
        _log.warning(
            "state backend %s unavailable (%s): calls go on under local state; reconnecting with backoff%s",
            self.address,
            said,
            f". {check}" if check else "",
            extra={"state_backend": BACKEND},
        )
        self._observer.event(StateBackendChanged(BACKEND, False, reason))
        self._wake.set()  # the keeper notices at once

    def _note_in_call(self) -> None:
        """Once per outage, on the span of the first call that decides on local state."""
        if not self._noted_in_call and self._outages:
            self._noted_in_call = True
            self._observer.event(StateBackendChanged(BACKEND, False, "this call decided on local state"))

    async def _drop_pubsub(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            with contextlib.suppress(RedisError, OSError, TimeoutError):
                async with asyncio.timeout(self.timeout_s):  # a cluster's pubsub closing on a node that died
                    await pubsub.aclose()  # type: ignore[no-untyped-call]  # untyped in redis-py
