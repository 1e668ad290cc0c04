"""The names of the keys the Redis backend writes, in one place: each hash-tagged, so that every key one Lua
script touches lands in one slot of a Redis Cluster (and a single Redis reads them the same).

| kind | its tag | the keys one script touches together |
|---|---|---|
| ``mthrottle``, ``mpause``, ``mlift`` | ``{m:<model>}`` | ``PAUSE``, ``LIFT``: mpause, mlift |
| ``sthrottle``, ``open``, ``closed``, ``probe`` | ``{s:<service>}`` | ``OPEN``, ``CLOSE_OLDER``: open, closed, probe |
| ``spend``, ``sreset``, ``slife`` | ``{w:<workflow>}`` | ``RESET``: spend, sreset; ``SPEND*``: spend, slife |
| ``call`` | ``{c:<hash>}`` | one key a script (``CALL_*``); in cluster mode a claim's liveness check is ``ALIVE`` |
| ``summary`` | ``{k:<hash>}`` | none: compaction's summary of a prefix, a plain GET / SET (``summaries``) |
| ``replicas`` | none (one key) | ``HEARTBEAT``, ``ALIVE`` |

A key is ``<prefix>:<kind>:{<group>:<name>}``: the tag is the first ``{`` after the prefix (the prefix holds no
brace: ``state.prefix``'s pattern) to the first ``}`` after it, the same text for every key of one name, whatever
the name holds. One model, one service, one workflow, one tool call per slot: a cluster spreads them over its
shards. The channel (``<prefix>:events``) is not a key: plain PUBLISH, which a cluster sends to every node.

``parse`` reads a key back, and reads the untagged form the backend wrote before (``<prefix>:<kind>:<name>``), so a
replica re-syncing after an upgrade still reads what an older replica kept (the spend, above all) and pushes it
back under the tagged name.
"""

from __future__ import annotations

__all__ = ["GROUPS", "key", "parse"]

GROUPS: dict[str, str] = {
    "mthrottle": "m",
    "mpause": "m",
    "mlift": "m",
    "sthrottle": "s",
    "open": "s",
    "closed": "s",
    "probe": "s",
    "spend": "w",
    "sreset": "w",
    "slife": "w",
    "call": "c",
    "summary": "k",
}
"""Each kind of key with a name, and the group its tag names (the keys of one group and name share a slot)."""


def key(prefix: str, kind: str, name: str = "") -> str:
    """The key of ``kind`` for ``name`` (``name`` empty: the prefix's one key of that kind, e.g. ``replicas``)."""
    if not name:
        return f"{prefix}:{kind}"
    return f"{prefix}:{kind}:{{{GROUPS[kind]}:{name}}}"


def parse(prefix: str, raw: str) -> tuple[str, str] | None:
    """A key of the prefix as (kind, name), tagged or in the untagged form of before; None: not one of ours."""
    head = f"{prefix}:"
    if not raw.startswith(head):
        return None
    kind, _, rest = raw[len(head) :].partition(":")
    group = GROUPS.get(kind)
    if group is None or not rest:
        return None
    tag = f"{{{group}:"
    if rest.startswith(tag) and rest.endswith("}") and len(rest) > len(tag) + 1:
        return kind, rest[len(tag) : -1]
    return kind, rest
