"""How the Redis client is built from the config: one URL, or Sentinel's nodes and service; TLS; an ACL user.

``Dial`` is ``state``'s connection settings as plain values (``server/app.py`` makes it from ``StateConfig``:
this package reads no config), and ``client`` the one place the client is built from it::

    Dial(url=...)                      a BlockingConnectionPool from the URL (redis://, rediss://, unix://)
    Dial(url, cluster=(host:port, ...)) redis-py's cluster client from the seed nodes (the URL's host, when
                                       given, and ``cluster``), which follows MOVED and ASK itself and, on a
                                       node that fails, re-reads the cluster's slots on the next operation
    Dial(sentinel=SentinelNodes(...))  redis-py's Sentinel client: ``master_for(service)`` on a blocking
                                       Sentinel pool; each new connection asks the sentinels for the
                                       primary, so a failover is followed on the reconnect after it
    username, password                 the ACL user (AUTH username password); None: the URL's, or none
    tls                                PEM files: a CA to verify the server with (else the system's CAs),
                                       a client certificate and key for mTLS; always verified, host
                                       name included (redis-py's defaults, never turned off here)

Every pool has ``max_connections`` and waits for a free connection within the operation's timeout (more
calls at once than connections is not an outage), with no retries inside redis-py: the backend's own
reconnect with backoff is the only one. Nothing here is ever shown: ``address`` is what the logs say (no
user, no password, no file contents), and a password field is left out of the ``repr``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool
from redis.backoff import NoBackoff

__all__ = [
    "CLUSTER_SPARE_CONNECTIONS",
    "BlockingSentinelPool",
    "Dial",
    "SentinelNodes",
    "Tls",
    "address",
    "client",
    "close",
    "hint",
]


@dataclass(frozen=True)
class Tls:
    """PEM files (``state.tls``): the CA the server's certificate must chain to (None: the system's
    CAs), and this client's certificate and key when the server asks for one (mTLS)."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    def kwargs(self) -> dict[str, Any]:
        """redis-py's SSL settings: verification required and the host name checked (its defaults, named)."""
        out: dict[str, Any] = {"ssl_cert_reqs": "required", "ssl_check_hostname": True}
        if self.ca_file:
            out["ssl_ca_certs"] = self.ca_file
        if self.cert_file:
            out["ssl_certfile"] = self.cert_file
        if self.key_file:
            out["ssl_keyfile"] = self.key_file
        return out


@dataclass(frozen=True)
class SentinelNodes:
    """``state.sentinel``: the sentinels to ask, the service (master name) they watch, their own credentials."""

    nodes: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Dial:
    """Where the fleet's Redis is and how to reach it: ``url`` or ``sentinel`` (one of them); in cluster mode
    ``cluster``, the seed nodes besides the URL's (``state.nodes``, ``host:port`` each; the URL may be None)."""

    url: str | None = None
    sentinel: SentinelNodes | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: Tls | None = None
    cluster: tuple[str, ...] | None = None


def address(dial: Dial | str) -> str:
    """Where Redis is, as the logs and ``repr`` show it: scheme, host, port and database, or the sentinels
    and their service; never a user or a password."""
    if isinstance(dial, str):
        dial = Dial(url=dial)
    if dial.sentinel is not None:
        nodes = ",".join(f"{h}:{p}" for h, p in dial.sentinel.nodes)
        tls = "+tls" if dial.tls is not None else ""
        return f"sentinel{tls}://{nodes}/{dial.sentinel.service}/{dial.sentinel.db}"
    url = dial.url or (f"redis://{dial.cluster[0]}" if dial.cluster else "")
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "redis (an unreadable URL)"
    if parts.scheme == "unix":
        return f"unix:{parts.path}"
    return f"{parts.scheme}://{host}{port}{parts.path}"


class BlockingSentinelPool(SentinelConnectionPool, BlockingConnectionPool):
    """Sentinel's pool (each new connection to the primary the sentinels name now) that waits for a free
    connection like ``BlockingConnectionPool`` instead of raising at ``max_connections``."""


CLUSTER_SPARE_CONNECTIONS = 4
"""A cluster node's connections beyond ``max_connections``: redis-py's cluster client raises at its limit
(no blocking pool), so the operations are bounded by the caller at ``max_connections`` and these spare."""


def client(dial: Dial, timeout_s: float, max_connections: int) -> Redis | RedisCluster:
    """The client of ``dial``: every socket operation and the wait for a pooled connection within
    ``timeout_s``, no retries inside redis-py, no background health checks."""
    common: dict[str, Any] = {
        "socket_timeout": timeout_s,
        "socket_connect_timeout": timeout_s,
        "retry": Retry(NoBackoff(), 0),
        "health_check_interval": 0,
    }
    auth = {k: v for k, v in (("username", dial.username), ("password", dial.password)) if v}
    tls = dial.tls.kwargs() if dial.tls is not None else {}
    if dial.sentinel is not None:
        s = dial.sentinel
        own = {k: v for k, v in (("username", s.username), ("password", s.password)) if v}
        sentinels = Sentinel(  # type: ignore[no-untyped-call]  # untyped in redis-py
            list(s.nodes),
            sentinel_kwargs={**common, **own, **({"ssl": True, **tls} if dial.tls is not None else {})},
        )
        master: Redis = sentinels.master_for(
            s.service,
            redis_class=Redis,
            connection_pool_class=BlockingSentinelPool,
            max_connections=max_connections,
            timeout=timeout_s,
            db=s.db,
            **common,
            **auth,
            **({"ssl": True, **tls} if dial.tls is not None else {}),
        )
        return master
    if dial.cluster is not None:
        seeds = [ClusterNode(h.strip("[]"), int(p)) for h, _, p in (n.rpartition(":") for n in dial.cluster)]
        kwargs: dict[str, Any] = {
            "startup_nodes": seeds,
            "max_connections": max_connections + CLUSTER_SPARE_CONNECTIONS,
            "require_full_coverage": False,
            **common,
            **auth,
            **tls,
        }
        if dial.url:  # its host a seed too, and its credentials (redis-py reads them as for one Redis)
            return RedisCluster.from_url(dial.url, **kwargs)
        return RedisCluster(**kwargs)
    assert dial.url is not None
    pool = BlockingConnectionPool.from_url(
        dial.url, max_connections=max_connections, timeout=timeout_s, **common, **auth, **tls
    )
    return Redis.from_pool(pool)


async def close(redis_client: Redis | RedisCluster) -> None:
    """Close ``client``'s connections, and with Sentinel the clients that asked the sentinels too (the
    ``Redis`` that ``master_for`` returns owns its pool, not them)."""
    if isinstance(redis_client, RedisCluster):
        await redis_client.aclose()
        return
    pool = redis_client.connection_pool
    await redis_client.aclose()
    if isinstance(pool, SentinelConnectionPool):
        await pool.sentinel_manager.aclose()


_HINTS = (
    (
        ("certificate verify failed", "certificate_verify_failed"),
        "TLS: the server's certificate was not verified: it is not signed by state.tls.ca_file (or, without "
        "one, by a CA this system trusts), or it does not name the host dialed",
    ),
    (
        ("certificate required", "peer did not return a certificate", "alert handshake failure"),
        "TLS: the server wants a client certificate: set state.tls.cert_file and key_file",
    ),
    (
        ("wrong version number", "record layer failure", "unexpected eof while reading"),
        "TLS: the server did not speak TLS where it was dialed (rediss:// or state.tls against a plain port?)",
    ),
    (
        ("wrongpass", "invalid username-password", "invalid password", "authentication required", "noauth"),
        "ACL: the server refused the credentials: check state.username and state.password (or the URL's user)",
    ),
    (
        ("no master found",),
        "Sentinel: the sentinels named no primary for state.sentinel.service (a wrong name, or a failover under way)",
    ),
)


_RESET = (
    "TLS: the server closed the connection: if it wants a client certificate (tls-auth-clients), set "
    "state.tls.cert_file and key_file"
)
"""TLS 1.3 checks a client certificate after the handshake: the refusal comes as an alert or as a reset."""


def hint(error: str, dial: Dial | None = None) -> str:
    """What an operator should check for a failed connection, from redis-py's words and how it dialed ("" when
    nothing to say)."""
    low = error.lower()
    for needles, text in _HINTS:
        if any(n in low for n in needles):
            return text
    tls = dial is not None and (dial.tls is not None or (dial.url or "").startswith("rediss:"))
    if tls and dial is not None and not (dial.tls and dial.tls.cert_file) and "connection reset by peer" in low:
        return _RESET
    return ""
