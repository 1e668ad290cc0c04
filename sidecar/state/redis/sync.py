"""The fleet's state into this replica: the re-sync on (re)connecting (the actions kept, the outcomes kept,
every key read back, the local view pushed, the spend kept), the keeper that reconnects with backoff, the listener
that applies what the others publish, and the heartbeat that counts the replicas."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError

from sidecar.core.observer import StateBackendChanged
from sidecar.core.state import Change, CircuitClosed, PauseLifted, ProbeTaken, Replicas, SpendReset, SpendTotal
from sidecar.state.redis.actions import Action
from sidecar.state.redis.connection import BACKEND, RECONNECT_MIN_S, ms
from sidecar.state.redis.keys import parse
from sidecar.state.redis.wire import decode, read_key
from sidecar.state.redis.writer import ChangeWriter

__all__ = ["HEARTBEAT_S", "HEARTBEAT_TTL_S", "FleetSync"]

HEARTBEAT_S = 1.0
"""Each replica says it is alive this often (and so checks Redis while no call does)."""
HEARTBEAT_TTL_S = 3.0
"""A replica not heard of for this long is no longer counted (its share of the rates goes to the rest)."""
SCAN_COUNT = 500
_KINDS = frozenset({"mthrottle", "mpause", "sthrottle", "open", "probe", "spend", "mlift", "sreset", "closed", "slife"})
"""The kinds of key read back on re-sync (``replicas`` is counted by beats, ``call`` read by the call; ``slife``,
the life of a spend key, is what a spend read back was counted in)."""
_log = logging.getLogger("sidecar.state")


class FleetSync(ChangeWriter):
    """The re-sync, the keeper and the listener of one Redis."""

    async def _connect(self) -> bool:
        """Subscribe, read the fleet's state, push ours, send the spend kept: True when all of it went."""
        await self._drop_pubsub()
        if isinstance(self._client, RedisCluster):  # the slots first, read again: where to subscribe (a node
            try:  # that failed under the subscriber alone leaves the client's slots as they were)
                async with asyncio.timeout(self.timeout_s * 4):
                    await self._client.initialize()
                    await self._client.nodes_manager.initialize()
            except (RedisError, OSError, TimeoutError) as exc:
                self._failed(exc)
                return False
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
            if isinstance(item, Action):
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
                self.address,
                sent,
                extra={"state_backend": BACKEND},
            )
        return True

    async def _pull(self) -> bool:
        """Every key of the prefix into the local view (opened before probes, so a probe lands half-open)."""
        assert self._view is not None
        keys: list[tuple[bytes, str, str]] = []
        try:
            async with asyncio.timeout(max(self.timeout_s * 10, 1.0)):  # a scan is many round trips
                # (a cluster's scan_iter goes over every primary in turn)
                async for raw in self._client.scan_iter(match=f"{self.prefix}:*", count=SCAN_COUNT):
                    named = parse(self.prefix, raw.decode("utf-8", "replace"))
                    if named is not None and named[0] in _KINDS:  # replicas, calls: not state to read back
                        keys.append((raw, *named))
                clock = await self._client.time()  # Redis's clock: what the instants kept in it are read against
                pipe = self._client.pipeline(transaction=False)
                for raw, _, _ in keys:
                    pipe.get(raw)
                    pipe.pttl(raw)
                values = await pipe.execute() if keys else []
        except (RedisError, OSError, TimeoutError):
            return False
        now_ms = int(clock[0]) * 1000 + int(clock[1]) // 1000
        changes: list[tuple[int, Change]] = []
        lives: dict[str, str] = {}
        for i, (_, kind, name) in enumerate(keys):
            value, ttl = values[2 * i], values[2 * i + 1]
            if value is None or not name or ttl == -2:
                continue
            if kind == "slife":
                lives[name] = value.decode("utf-8", "replace").partition(" ")[0]
                continue
            change = read_key(kind, name, value, ttl / 1000 if ttl > 0 else 0.0, now_ms)
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
            if isinstance(change, SpendReset):
                self._forget_total(change.workflow)
            elif isinstance(change, SpendTotal):
                self._learn_total(change.workflow, change.usd, lives.get(change.workflow, ""))
        return True

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
        beat = self._beat(keys=[self._key("replicas")], args=[self.replica, ms(HEARTBEAT_TTL_S)])
        count = await self._run(beat, quiet=quiet)
        if count is None:
            return False
        self._heard = time.monotonic()
        self._view.apply(Replicas(int(count)))
        return True

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
                    self._failed(exc)  # what the outage's WARNING and the state view say, not an older error
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
                    self.address,
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
        if isinstance(change, SpendTotal):
            life = body.get("l")
            self._learn_total(change.workflow, change.usd, life if isinstance(life, str) else None)
        elif isinstance(change, SpendReset):
            self._forget_total(change.workflow)
        if change is not None:
            self._view.apply(change)
