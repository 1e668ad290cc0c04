"""The fleet's policy state in Redis (``state: {backend: redis, url | sentinel, prefix, timeout_ms}``, and
``tls``, ``username``, ``password``: ``dial.py``), one Redis, a primary found through Sentinel, or a Redis Cluster
(``mode: cluster``, seeds in ``url`` and ``nodes``: redis-py's cluster client, docs/fleet.md).

Every replica that names the same Redis and prefix shares the changes of ``core.state``. Each
change is one Lua script (redis-py ``register_script``: atomic, no read-modify-write race) that
updates its key *and* publishes the change on the prefix's channel; every other replica's
subscriber applies it to its local view (``core.fleet_view``). A healthy call awaits none of
this: ``publish`` queues, one writer task sends. Every instant kept in Redis is on Redis's own
clock (``TIME`` inside the script, in ms) less the age the replica sends (how long ago it
happened, on its monotonic clock): what is older than what never depends on a replica's wall
clock. Keys (every one with a TTL; ``{m:model}`` and the like are hash tags, ``keys.py``: a script's keys share
a cluster slot)::

    {prefix}:events              the pub/sub channel of every change (JSON, with the origin replica)
    {prefix}:mthrottle:{m:model} the last raise of a model's throttle      TTL THROTTLE_TTL_S (60 s)
    {prefix}:mpause:{m:model}    a Retry-After pause: when it began        TTL = the pause (raised, never shortened)
    {prefix}:sthrottle:{s:svc}   the last raise of a service's throttle    TTL THROTTLE_TTL_S
    {prefix}:open:{s:svc}        an open circuit: cooldown, trigger, since, TTL = seconds open + probe_timeout_s
                                 at (when it opened)
    {prefix}:probe:{s:svc}       the one half-open probe (SET NX)          TTL = probe_timeout_s
    {prefix}:closed:{s:svc}      when it last closed (read back; a stale    TTL CLOSED_TTL_S (1 h)
                                 re-push loses)
    {prefix}:spend:{w:workflow}  the workflow's spend, INCRBYFLOAT         TTL SPEND_TTL_S (7 days), renewed per add
                                 (published per hundredth of its cap and at it: writer.SPEND_STEPS)
    {prefix}:slife:{w:workflow}  the spend key's life: an id, the base a    TTL SPEND_TTL_S from when the key was
                                 restore began from (scripts.SPEND_FLOOR)  made (gone: no life, a floor is a max)
    {prefix}:mlift:{m:model}     when an operator last lifted its pause    TTL ACTION_TTL_S (1 h)
    {prefix}:sreset:{w:workflow} when an operator last reset its spend     TTL ACTION_TTL_S
    (an operator's action: lift-pause deletes a pause begun before it, reset-spend takes what the
    operator was shown off the total, close-circuit deletes an opening older than it; each publishes
    with its age, so every replica lifts / forgets / closes what is older; the mlift / sreset /
    closed record is read first on every re-sync, so a replica cut off at the time drops its stale
    pause, spend or opening before pushing it back, and keeps one begun after the action)
    {prefix}:replicas            live replicas (a sorted set of expiries)  TTL HEARTBEAT_TTL_S (3 s), beat every 1 s
    {prefix}:call:{c:hash}       a tool call's intent, then its outcome    TTL the dedupe window (and the call's
                                 (core.state.CallRecords; tools.once)          longest run, for an intent)
    {prefix}:summary:{k:{hash}}  a compaction's summary of a prefix        TTL SUMMARY_TTL_S (1 day); one GET, one
                                 (core.compaction.cache; summaries.py)     SET; hash-tagged for a cluster

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
(``scripts.CALL_FINISH_KEPT``): a replica polling that intent gets the outcome, not a wait to its deadline.

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
                            not once run out; spend as a floor: the total this replica knew Redis counted,
                            with the life of the key it was counted in, so that into a Redis restarted
                            empty the largest floor is the base and the adds kept go on top), then the
                            spend kept meanwhile. An action is never dropped for a re-sync: it is sent before
                            the fleet's state is read back over it (why: docs/operations.md)
    back                    INFO once, StateBackendChanged(available=True)
    shutdown                actions (and outcomes) still queued tried again for shutdown_flush_s
                            (state.shutdown_flush_s), then each action left named in a WARNING (lost to the
                            fleet), the outcomes counted; never longer

The package, by part (each class the one below it and more; ``RedisState`` is all of them)::

    dial.py         how the client is built from the config: a URL, Sentinel's nodes and service, or a
                    cluster's seed nodes; TLS, the ACL user (one function, ``client``)
    connection.py   RedisConnection: the client, the scripts, every operation bounded, the outage noticed
    calls.py        CallRecords: the record of tool calls
    writer.py       ChangeWriter: publish, the writer, the actions and spend kept, the probe claimed
    sync.py         FleetSync: the re-sync, the keeper, the listener, the heartbeat
    backend.py      RedisState: start and close (the shutdown flush)
    scripts.py      the Lua scripts: each change, action and record one atomic script
    keys.py         every key's name (hash-tagged), and a key read back as its kind and name
    wire.py         the JSON published on the channel, a key read back on re-sync
    actions.py      an operator's action as it goes to Redis
"""

from sidecar.state.redis.backend import RedisState
from sidecar.state.redis.connection import BACKEND
from sidecar.state.redis.sync import HEARTBEAT_S

__all__ = ["BACKEND", "HEARTBEAT_S", "RedisState"]
