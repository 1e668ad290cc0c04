"""Compaction's summaries in Redis (``core.compaction.cache.SharedSummaries``): one GET, one SET with a TTL.

The key is ``{prefix}:summary:{k:<hash>}``, named as every key is (``keys``); the hash is the prefix's
(``core.compaction.summary.prefix_key``). Redis not there: no summary
is found, none is stored (the call summarizes, and keeps it in the process).
"""

from __future__ import annotations

from sidecar.state.redis.connection import RedisConnection, ms

__all__ = ["Summaries"]


class Summaries(RedisConnection):
    """The fleet's summaries, by prefix hash."""

    def _summary_key(self, key: str) -> str:
        return self._key("summary", key)

    async def get_summary(self, key: str) -> str | None:
        if not self._available:
            return None
        raw = await self._run(self._client.get(self._summary_key(key)), quiet=True)
        if raw is None:
            return None
        return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)

    async def put_summary(self, key: str, text: str, ttl_s: float) -> None:
        if self._available:
            await self._run(self._client.set(self._summary_key(key), text, px=ms(ttl_s)), quiet=True)
