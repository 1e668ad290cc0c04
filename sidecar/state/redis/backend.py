"""The Redis backend whole (``RedisState``): started on a local view, closed with what is queued flushed
within ``state.shutdown_flush_s`` and what never reached the fleet named in a WARNING."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from redis.exceptions import RedisError

from sidecar.core.state import LocalView
from sidecar.state.redis.actions import Action, describe
from sidecar.state.redis.connection import BACKEND, RECONNECT_MIN_S
from sidecar.state.redis.dial import close
from sidecar.state.redis.summaries import Summaries
from sidecar.state.redis.sync import FleetSync

__all__ = ["RedisState"]

LISTED = 50
"""Actions named one by one in the shutdown WARNING (the rest counted)."""
_log = logging.getLogger("sidecar.state")


class RedisState(FleetSync, Summaries):
    """A ``core.state.StateBackend`` on one Redis (see the package docstring); compaction's summaries too."""

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
            await close(self._client)

    async def _flush_at_shutdown(self) -> None:
        """The actions still queued (and the spend not counted yet) to Redis within ``shutdown_flush_s``."""
        for item, _ in self._queue:
            if isinstance(item, Action):
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
                self.address,
                queued,
                spent,
                extra={"state_backend": BACKEND},
            )
        if self._pending:
            now = self._mono()
            left = sorted(self._pending.values(), key=lambda a: a.made)
            listed = "; ".join(f"{describe(a)} (made {max(now - a.made, 0.0):.1f} s ago)" for a in left[:LISTED])
            if len(left) > LISTED:
                listed += f"; and {len(left) - LISTED} more"
            _log.warning(
                "state backend %s: %d operator actions never reached the fleet: Redis did not answer within "
                "state.shutdown_flush_s (%.1f s) at shutdown (%s). They took effect on this replica only, "
                "which is stopping: the other replicas still hold what they undid. Repeat them on a running "
                "replica once Redis answers: %s",
                self.address,
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
                self.address,
                len(self._kept_outcomes),
                extra={"state_backend": BACKEND},
            )
        if self._unsent:
            _log.warning(
                "state backend %s: spend recorded here and not counted in Redis was dropped at shutdown: %s",
                self.address,
                ", ".join(f"{w} {usd:.6f} USD" for w, usd in sorted(self._unsent.items())),
                extra={"state_backend": BACKEND},
            )
