"""What the failover tests share (tests/fleet/test_fleet_sentinel.py, test_fleet_cluster.py): a load of calls
round two ``sidecar serve`` replicas, and what their logs and Redis say of the outage.

    Load                        WORKERS tasks sending CallModel (workflow ``WORKFLOW``: a capped one, its spend the
                                key a cluster test kills the primary of) and a run-once ExecuteTool (``note``: a job
                                id and a call id each, POST /notes) round the replicas until told to stop; every
                                answer kept with the replica that gave it, when it started and ended (wall clock)
    note(client, i)             tool call ``i`` (sent again to re-send it: the same call id)
    BEFORE, AFTER               tool calls answered before the kill, and after both replicas are back
    outages(log)                a replica's outages from its log: (the WARNING's, the recovery's) wall-clock
                                seconds
    replication_offset(client)  a Redis's replication offset (a replica caught up: it reached the primary's)
    until_async(check)          polls ``check`` within POLL_S (nothing here is timed)
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import redis
from sidecar_client import AsyncSidecarClient, job, pb, user

WORKERS = 8
BEFORE = 40
"""Tool calls answered before the kill."""
AFTER = 40
"""Tool calls answered after both sidecars are back on the new primary."""
CALL_TIMEOUT_S = 30.0
POLL_S = 45.0
JOB = "failover-job"
WORKFLOW = "wf-tls"
"""The model calls' workflow (test_fleet_tls's config caps it): every call adds to its spend."""


async def until_async(check: Callable[[], bool], what: str) -> None:
    end = time.monotonic() + POLL_S
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"not within {POLL_S:g} s: {what}")
        await asyncio.sleep(0.05)


@dataclass
class Load:
    """Calls round two replicas until told to stop: every answer kept, with when it started and ended."""

    clients: list[AsyncSidecarClient]
    counter: itertools.count[int] = field(default_factory=itertools.count)
    model_failures: list[str] = field(default_factory=list)
    tools: dict[int, tuple[int, pb.ExecuteToolResponse]] = field(default_factory=dict)
    """call number -> (the replica that answered it, its answer)."""
    started: dict[int, float] = field(default_factory=dict)
    ended: dict[int, float] = field(default_factory=dict)
    tool_failures: list[str] = field(default_factory=list)
    stop: bool = False

    async def worker(self) -> None:
        while not self.stop:
            i = next(self.counter)
            which = i % len(self.clients)
            client = self.clients[which]
            try:
                await client.call_model(
                    "gpt", [user(f"hello {i}")], job=job(workflow_id=WORKFLOW), timeout=CALL_TIMEOUT_S
                )
            except Exception as exc:  # a failed call is what the tests count
                self.model_failures.append(f"call {i}: {exc!r}")
            self.started[i] = time.time()  # the wall clock: the sidecars' log lines are read against it
            try:
                answer = await note(client, i)
            except Exception as exc:
                self.tool_failures.append(f"tool call {i}: {exc!r}")
                continue
            self.ended[i] = time.time()
            self.tools[i] = (which, answer)
            if answer.WhichOneof("outcome") != "result":
                self.tool_failures.append(f"tool call {i}: {answer.failure.kind} {answer.failure.message}")


async def note(client: AsyncSidecarClient, i: int) -> pb.ExecuteToolResponse:
    return await client.execute_tool(
        "note", {"text": f"failover-{i}"}, call_id=f"call-{i}", job=job(JOB), timeout=CALL_TIMEOUT_S
    )


def outages(log: str) -> list[tuple[float, float]]:
    """A replica's outages, from its log: (the WARNING's, the recovery's) wall-clock seconds."""
    out: list[tuple[float, float]] = []
    down = 0.0
    for line in log.splitlines():
        if '"sidecar.state"' not in line:
            continue
        record = json.loads(line)
        at = datetime.datetime.fromisoformat(record["time"]).timestamp()
        if "unavailable (" in record["message"]:
            down = at
        elif "available again" in record["message"]:
            out.append((down, at))
    if down and (not out or out[-1][0] != down):
        out.append((down, float("inf")))
    return out


def replication_offset(client: redis.Redis) -> int:
    return int(client.info("replication")["master_repl_offset"])
