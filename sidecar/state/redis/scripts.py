"""The Lua scripts of the Redis backend: each change, action and tool call record one atomic script
(redis-py ``register_script``), most of them publishing the change on the prefix's channel as they write it."""

from __future__ import annotations

__all__ = [
    "ALIVE",
    "CALL_ABANDON",
    "CALL_CLAIM",
    "CALL_FINISH_KEPT",
    "CLAIM",
    "CLOSE_OLDER",
    "HEARTBEAT",
    "LIFT",
    "OPEN",
    "PAUSE",
    "RESET",
    "SET_AND_PUBLISH",
    "SPEND",
    "SPEND_FLOOR",
]

SET_AND_PUBLISH = """
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
"""
_NOW = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
"""
"""Lua: Redis's own clock, in ms (every instant kept in Redis is on it: no replica's wall clock)."""
PAUSE = (
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
OPEN = (
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
LIFT = (
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
RESET = (
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
CLOSE_OLDER = (
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
CLAIM = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  redis.call('PUBLISH', ARGV[3], ARGV[4])
  return 1
end
return 0
"""
_LIFE = """
local mark = redis.call('GET', KEYS[2])
local life = mark and string.match(mark, '^%S+') or ''
"""
"""Lua: the life of a workflow's spend key (``slife``: its id and base; '' when none is kept)."""
SPEND = (
    """
local total = redis.call('INCRBYFLOAT', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local now, step, cap = tonumber(total), tonumber(ARGV[6]), tonumber(ARGV[7])
local was = now - tonumber(ARGV[1])
"""
    + _LIFE
    + """
if life == '' and was <= 0 then
  life = ARGV[8]
  redis.call('SET', KEYS[2], life .. ' 0', 'PX', ARGV[2])
end
if step <= 0 or now >= cap or math.floor(now / step) ~= math.floor(was / step) then
  redis.call('PUBLISH', ARGV[3], cjson.encode({o = ARGV[4], k = 'spend', n = ARGV[5], usd = now, l = life}))
end
return {total, life}
"""
)
"""A replica's spend added (KEYS: spend, slife; ARGV: usd, ttl ms, channel, replica, workflow, step, cap, an
id for a new life): the total published only when it crosses a multiple of ``step`` or is at the cap (step 0:
always); the replica that added reads the total, and the key's life, in the reply. An add that makes the key
begins its life (``ARGV[8]``, base 0): every total a replica learns comes with the life it was counted in."""
SPEND_FLOOR = (
    _LIFE
    + """
local raw = redis.call('GET', KEYS[1])
local floor, shown, raised = tonumber(ARGV[1]), raw, false
if not raw then
  life, shown, raised = ARGV[7], ARGV[1], floor > 0
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  redis.call('SET', KEYS[2], life .. ' ' .. ARGV[1], 'PX', ARGV[2])
elseif mark and life ~= ARGV[6] then
  local base = tonumber(string.match(mark, '%S+$')) or 0
  if floor > base then
    shown, raised = redis.call('INCRBYFLOAT', KEYS[1], string.format('%.17g', floor - base)), true
    redis.call('SET', KEYS[2], life .. ' ' .. ARGV[1], 'KEEPTTL')
  end
elseif floor > tonumber(raw) then
  shown, raised = ARGV[1], true
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
if raised then
  redis.call('PUBLISH', ARGV[3], cjson.encode({o = ARGV[4], k = 'spend', n = ARGV[5], usd = tonumber(shown), l = life}))
end
return {shown, life}
"""
)
"""A re-sync's floor (KEYS: spend, slife; ARGV: the total counted as known here, ttl ms, channel, replica,
workflow, the life it was counted in, an id for a new life); the total and the key's life in the reply::

    the key                           the floor
    gone (Redis restarted empty,      makes it anew: a new life, its base this floor
      a failover lost it)
    of another life than the floor's  counted before the key was lost: the base becomes the largest such
                                      floor, the total rises by as much (the adds since the loss stay on top)
    of the floor's life, or none kept total = max(total, floor)

Before the lives, a floor was a max against the total: a replica that re-synced first pushed what it knew
(short of the total by the adds it had not been told of: steps) and its own adds since; a later floor that
knew more was compared to that sum, and lost the difference."""
CALL_CLAIM = """
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
CALL_ABANDON = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
"""
CALL_FINISH_KEPT = """
local held = redis.call('GET', KEYS[1])
if not held or string.sub(held, 1, 1) ~= 'i' then return 0 end
local ok, intent = pcall(cjson.decode, string.sub(held, 2))
if not ok or type(intent) ~= 'table' or intent['r'] ~= ARGV[3] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""
"""An outcome Redis did not take when its call ended, written on re-sync (KEYS: the call; ARGV: the
outcome, ms left, this replica): only over this replica's own intent (a later outcome or claim stands)."""
HEARTBEAT = """
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZADD', KEYS[1], ms + tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return redis.call('ZCARD', KEYS[1])
"""
ALIVE = """
local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expiry then return 0 end
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
if tonumber(expiry) > ms then return 1 end
return 0
"""
"""Cluster mode: whether a replica is in the heartbeat set (KEYS: replicas; ARGV: the replica), for a claim that
found another's intent (``CALL_CLAIM`` reads it in the same script on one Redis; a call's key and the set are
in different slots of a cluster)."""
