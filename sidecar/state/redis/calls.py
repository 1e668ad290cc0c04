"""The record of tool calls in Redis (``core.state.CallRecords``, for ``tools.once``): a call's intent
claimed before it is sent (on the call's path), its outcome written after its answer has left (``tools.once``
holds it meanwhile), an outcome Redis did not take kept and written later."""

from __future__ import annotations

import json

from sidecar.core.state import CallClaim, Claimed, InProgress, Recorded
from sidecar.state.redis.connection import RedisConnection, ms

__all__ = ["MAX_KEPT_OUTCOMES", "RECORD_TRIES", "CallRecords"]

RECORD_TRIES = 3
"""A tool call's outcome is written this many times at most (each within timeout_ms) before its call is
answered without it in Redis (kept, and written once Redis takes it)."""
MAX_KEPT_OUTCOMES = 10_000
"""Outcomes kept for Redis (it did not take them); past it the oldest go (this process still holds them)."""


class CallRecords(RedisConnection):
    """The tool calls' record on one Redis (``claim_call``, ``finish_call``, ``abandon_call``)."""

    @property
    def owner(self) -> str:
        return self.replica

    async def claim_call(self, key: str, ttl_s: float, since: float) -> CallClaim | None:
        if not self._available:
            self._note_in_call()
            return None
        intent = "i" + json.dumps({"r": self.replica, "w": since})
        call = self._key("call", key)
        # One Redis: the claim reads the heartbeat set in the same script. A cluster: the set is in another slot,
        # so the script is given an empty set of the call's own slot (never written) and an intent it finds is
        # asked about apart (ALIVE): one more round trip, only when another replica holds the call.
        replicas = f"{call}:replicas" if self.cluster else self._key("replicas")
        got = await self._run(self._call_claim(keys=[call, replicas], args=[intent, ms(ttl_s)]))
        if not isinstance(got, list) or not got:
            return None
        if int(got[0]) == 1:
            return Claimed(intent)
        held = got[1].decode("utf-8", "replace") if isinstance(got[1], bytes) else str(got[1])
        if held.startswith("o"):
            return Recorded(held[1:])
        try:
            data = json.loads(held[1:])
            owner, since_s, alive = str(data["r"]), float(data["w"]), int(got[2]) == 1
        except (KeyError, TypeError, ValueError):
            return InProgress("", 0.0, alive=False)  # unreadable: no one can say it was not sent
        if self.cluster:
            beating = await self._run(self._alive(keys=[self._key("replicas")], args=[owner]))
            alive = beating is None or int(beating) == 1  # not known: taken as alive (waited for, never re-sent)
        return InProgress(owner, since_s, alive=alive)

    async def finish_call(self, key: str, outcome: str, ttl_s: float) -> bool:
        # Tried whatever the outage flag says: the call's intent is in Redis (its claim was), and only
        # this write replaces it with what a re-send must get (the answer has left: tools.once holds it meanwhile).
        for _ in range(RECORD_TRIES):
            if await self._run(self._client.set(self._key("call", key), "o" + outcome, px=ms(ttl_s))):
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
                write = self._call_kept(keys=[self._key("call", key)], args=[value, ms(left), self.replica])
                if await self._run(write, quiet=quiet) is None:
                    return False
            self._kept_outcomes.pop(key, None)
        return True
