"""A real Redis Cluster for the fleet tests: three primaries and three replicas (``redis-server
--cluster-enabled yes`` x6 on free loopback ports, joined by ``redis-cli --cluster create --cluster-replicas 1``),
started once per run of the suite (once per pytest-xdist worker: the ``redis_cluster`` fixture is
session-scoped), and the one parametrized fixture the fleet tests take, ``redis_target``: a single Redis, or
the cluster, behind one interface.

| what | single | cluster |
|---|---|---|
| ``url``, ``nodes`` | the one server's URL, none | the first node's URL, every node as ``host:port`` |
| ``state(prefix)`` | the ``state`` section of a config | the same, ``mode: cluster`` and the seed nodes |
| ``backend(prefix, timeout_ms)`` | a ``RedisState`` | the same on the cluster client |
| ``client()`` | ``redis.Redis`` | ``redis.RedisCluster`` (follows MOVED/ASK) |
| between tests | a fresh server per test | FLUSHALL on every primary (and a prefix per test where a test names one) |

``kill`` / ``start`` (an outage) are the single Redis's; the cluster's outage is a primary killed with its
replica promoted (``kill_primary``), and a slot migrated while calls run (``migrate_slot``).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.cluster import ClusterNode

from sidecar.state.redis import RedisState
from tests.redis_server import REDIS_SERVER, START_TIMEOUT_S, RedisServer, free_port

REDIS_CLI = shutil.which("redis-cli") or "/usr/bin/redis-cli"
NODE_TIMEOUT_MS = 1000
"""``cluster-node-timeout``: a primary not heard from this long is failed over to its replica (a test waits
about this much, and an election, after a kill)."""
FORM_TIMEOUT_S = 60.0


BUS_OFFSET = 10_000
"""A cluster node also listens on its port + 10000 (the cluster bus): both must be free, and below 65536."""


def cluster_port() -> int:
    """A free loopback port whose bus port (+10000) is free too."""
    while True:
        port = free_port()
        if port + BUS_OFFSET > 65535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + BUS_OFFSET))
            except OSError:
                continue
        return port


class ClusterNodeProcess:
    """One ``redis-server`` in cluster mode; its ``nodes.conf`` in its own folder (it keeps its port)."""

    def __init__(self, folder: Path) -> None:
        self.port = cluster_port()
        self.folder = folder
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        args = [
            REDIS_SERVER,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            str(self.folder / "nodes.conf"),
            "--cluster-node-timeout",
            str(NODE_TIMEOUT_MS),
            "--dir",
            str(self.folder),
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                if self.client().ping():
                    return
            except redis.RedisError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.02)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2)


class Cluster:
    """Six nodes, three primaries with a replica each."""

    def __init__(self, folder: Path) -> None:
        self.nodes = [ClusterNodeProcess(folder / f"node{i}") for i in range(6)]

    @property
    def url(self) -> str:
        return f"redis://{self.nodes[0].address}/0"

    @property
    def addresses(self) -> list[str]:
        return [n.address for n in self.nodes]

    def start(self) -> Cluster:
        if not shutil.which(REDIS_SERVER) or not shutil.which(REDIS_CLI):
            pytest.fail(f"{REDIS_SERVER} / {REDIS_CLI} not installed: `make test` installs them (redis-server)")
        for node in self.nodes:
            node.start()
        create = [REDIS_CLI, "--cluster", "create", *self.addresses, "--cluster-replicas", "1", "--cluster-yes"]
        subprocess.run(create, check=True, capture_output=True, timeout=FORM_TIMEOUT_S)
        self.wait_ok()
        return self

    def live(self) -> list[ClusterNodeProcess]:
        return [n for n in self.nodes if n.proc is not None and n.proc.poll() is None]

    def wait_ok(self, within_s: float = FORM_TIMEOUT_S) -> None:
        """Until every live node says ``cluster_state:ok`` and agrees on three primaries covering all slots."""
        end = time.monotonic() + within_s
        while True:
            try:
                if all(self._ok(n) for n in self.live()):
                    return
            except redis.RedisError:
                pass
            if time.monotonic() > end:
                raise AssertionError(f"the cluster did not settle within {within_s:g} s")
            time.sleep(0.05)

    @staticmethod
    def _ok(node: ClusterNodeProcess) -> bool:
        info = node.client().cluster("info")
        if info.get("cluster_state") != "ok":
            return False
        slots = node.client().cluster("slots")
        return sum(int(end) - int(start) + 1 for start, end, *_ in slots) == 16384

    def client(self) -> redis.RedisCluster:
        seeds = [ClusterNode("127.0.0.1", n.port) for n in self.live()]  # type: ignore[no-untyped-call]
        return redis.RedisCluster(startup_nodes=seeds, socket_timeout=2)

    def primaries(self) -> list[ClusterNodeProcess]:
        """The live nodes that are primaries now (a promoted replica among them after a failover)."""
        by_port = {n.port: n for n in self.live()}
        out = []
        for address, info in self.live()[0].client().cluster("nodes").items():
            port = int(str(address).split("@")[0].rsplit(":", 1)[1])
            flags = str(info.get("flags", ""))
            if "master" in flags and "fail" not in flags and port in by_port:
                out.append(by_port[port])
        return out

    def owner(self, key: str) -> ClusterNodeProcess:
        """The live primary serving ``key``'s slot."""
        slot = int(self.live()[0].client().cluster("keyslot", key))
        for start, end, primary, *_ in self.live()[0].client().cluster("slots"):
            if int(start) <= slot <= int(end):
                port = int(primary[1])
                for node in self.live():
                    if node.port == port:
                        return node
                raise AssertionError(f"slot {slot}'s primary (port {port}) is not running")
        raise AssertionError(f"no primary serves slot {slot}")

    def flush(self) -> None:
        for node in self.primaries():
            node.client().flushall()

    def stop(self) -> None:
        for node in self.nodes:
            node.kill()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path_factory.mktemp("redis-cluster")).start()
    try:
        yield cluster
    finally:
        cluster.stop()


class Target:
    """A single Redis or the cluster, as the fleet tests use either."""

    def __init__(self, server: RedisServer | None, cluster: Cluster | None) -> None:
        self.server = server
        self.cluster = cluster

    @property
    def mode(self) -> str:
        return "cluster" if self.cluster is not None else "single"

    @property
    def url(self) -> str:
        return self.cluster.url if self.cluster is not None else self._server.url

    @property
    def nodes(self) -> list[str]:
        return self.cluster.addresses if self.cluster is not None else []

    @property
    def _server(self) -> RedisServer:
        assert self.server is not None, "a single Redis's own (kill, start, proc)"
        return self.server

    def state(self, prefix: str, timeout_ms: int | None = None) -> dict[str, Any]:
        """The ``state`` section of a sidecar's config (``timeout_ms`` None: the default)."""
        section: dict[str, Any] = {"backend": "redis", "url": self.url, "prefix": prefix}
        if timeout_ms is not None:
            section["timeout_ms"] = timeout_ms
        if self.cluster is not None:
            section.update(mode="cluster", nodes=self.nodes[1:])
        return section

    def backend(self, prefix: str, timeout_ms: int, **kwargs: Any) -> RedisState:
        if self.cluster is not None:
            return RedisState(self.url, prefix, timeout_ms, cluster=self.nodes[1:], **kwargs)
        return RedisState(self.url, prefix, timeout_ms, **kwargs)

    def client(self) -> redis.Redis | redis.RedisCluster:
        return self.cluster.client() if self.cluster is not None else self._server.client()


@contextlib.contextmanager
def target(mode: str, request: pytest.FixtureRequest) -> Iterator[Target]:
    """A fresh single Redis (``single``), or the session's cluster flushed (``cluster``), for one test."""
    if mode == "cluster":
        cluster: Cluster = request.getfixturevalue("redis_cluster")
        cluster.wait_ok()
        cluster.flush()
        yield Target(None, cluster)
        return
    server = RedisServer().start()
    try:
        yield Target(server, None)
    finally:
        server.kill()


@pytest.fixture(params=["single", "cluster"])
def redis_target(request: pytest.FixtureRequest) -> Iterator[Target]:
    """Each fleet test once on a fresh single Redis and once on the shared cluster (flushed before the test)."""
    with target(request.param, request) as chosen:
        yield chosen
