"""``sidecar serve --workers N``: one supervisor and N worker processes serving one address.

    supervisor (the process started)              each worker (``sidecar serve``, a process of its own)
    checks the config (workers > 1: redis state,  the same config file, ``--listen host:port``
      a host:port address) and the exposure       binds it with SO_REUSEPORT: the kernel spreads
    resolves N (``auto``: server.cores) and       connections across the workers
      port 0 (a free port, so all bind the same)  shares throttles, circuits and spend with the
    starts the embedded fakes once: every           others (and the fleet) through state.backend
      worker uses them (SIDECAR_WORKER_EMBEDDED)  prometheus on telemetry.prometheus_port + its index
    starts the N workers (SIDECAR_WORKER=i/N)     leaves when the supervisor is gone (checked
    restarts a worker that dies: after              every PARENT_CHECK_S)
      RESTART_MIN_S, doubling to RESTART_MAX_S
      while it keeps dying within STABLE_S
    SIGHUP: forwarded to every worker; each       SIGHUP: the config file reloaded (server.reload);
      worker's reload outcome read from the pipe    its outcome written to the supervisor's pipe
      (REPORT_FD_ENV) and logged                    (an admin reload: SIGHUP to the supervisor)
    SIGTERM / SIGINT: forwarded to every worker,  SIGTERM: health NOT_SERVING, new calls refused,
      waits for each to drain (grace period +       the calls in flight finish within the grace
      STOP_MARGIN_S, then SIGKILL); exit 0          period; exit 0

Why processes and not threads: one event loop serves one core; N loops in N processes serve N.
Why a unix socket cannot: SO_REUSEPORT is for TCP ports; a second bind of a socket path replaces
the file, so only the last worker would get connections (``config.workers_refusal``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
from dataclasses import dataclass, field
from typing import Any, Literal

from sidecar.config import Config
from sidecar.server.cores import worker_count
from sidecar.server.reload import REPORT_FD_ENV

__all__ = [
    "EMBEDDED_ENV",
    "RESTART_MAX_S",
    "RESTART_MIN_S",
    "WORKER_ENV",
    "WorkerRole",
    "supervise",
    "worker_role",
]

WORKER_ENV = "SIDECAR_WORKER"
"""Set by the supervisor for each worker: ``index/count`` (``0/4``)."""
EMBEDDED_ENV = "SIDECAR_WORKER_EMBEDDED"
"""Set by the supervisor: the embedded fakes' URLs (JSON), started once for every worker."""
RESTART_MIN_S = 0.5
RESTART_MAX_S = 30.0
STABLE_S = 60.0
"""A worker that lived this long before dying is restarted after RESTART_MIN_S again."""
STOP_MARGIN_S = 5.0
"""After the grace period, this long more before a worker that has not exited is killed."""
PARENT_CHECK_S = 1.0

_log = logging.getLogger("sidecar.workers")


@dataclass(frozen=True, slots=True)
class WorkerRole:
    """What a worker process was told by its supervisor."""

    index: int
    count: int
    embedded: dict[str, str]
    parent: int


def worker_role() -> WorkerRole | None:
    """This process's role when a supervisor started it, else None."""
    raw = os.environ.get(WORKER_ENV)
    if not raw:
        return None
    index, _, count = raw.partition("/")
    try:
        embedded = json.loads(os.environ.get(EMBEDDED_ENV) or "{}")
        return WorkerRole(int(index), int(count), {str(k): str(v) for k, v in embedded.items()}, os.getppid())
    except (ValueError, AttributeError):
        return None


async def watch_parent(role: WorkerRole, stop: asyncio.Future[str]) -> None:
    """Set ``stop`` when the supervisor is gone (the worker was handed to another parent)."""
    while not stop.done():
        if os.getppid() != role.parent:
            stop.set_result("supervisor gone")
            return
        await asyncio.sleep(PARENT_CHECK_S)


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host.strip("[]"), 0))
        return int(s.getsockname()[1])


@dataclass
class _Worker:
    index: int
    proc: asyncio.subprocess.Process | None = None
    started: float = 0.0
    delay: float = RESTART_MIN_S
    restarts: int = 0
    waiter: asyncio.Task[int] | None = field(default=None, repr=False)


async def supervise(
    config: Config, config_path: str | None, listen: str, workers: int | Literal["auto"], http: str | None = None
) -> int:
    """Run ``workers`` worker processes on ``listen`` until SIGTERM/SIGINT; 0 once all have drained.
    SIGHUP reloads every worker; each one's outcome is logged as it reports it."""
    count = worker_count(workers)
    host, _, port = listen.rpartition(":")
    if port == "0":
        listen = f"{host}:{_free_port(host)}"
    loop = asyncio.get_running_loop()
    stop: asyncio.Future[str] = loop.create_future()

    def received(name: str) -> None:
        if not stop.done():
            stop.set_result(name)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, received, sig.name)
    pool = [_Worker(i) for i in range(count)]
    loop.add_signal_handler(signal.SIGHUP, _forward_reload, pool)
    reports, report_fd = os.pipe()  # every worker writes its reload outcomes here, one JSON line each
    reader = asyncio.create_task(_read_reports(reports))
    fakes, embedded = await _start_fakes(config)
    env = {**os.environ, EMBEDDED_ENV: json.dumps(embedded), REPORT_FD_ENV: str(report_fd)}
    base = [sys.executable, "-m", "sidecar", "serve", "--listen", listen, "--workers", "1"]
    if config_path is not None:
        base += ["--config", config_path]
    if http is not None:
        base += ["--http", http]

    async def start(worker: _Worker) -> None:
        worker.proc = await asyncio.create_subprocess_exec(
            *base,
            env={**env, WORKER_ENV: f"{worker.index}/{count}"},
            stdin=asyncio.subprocess.DEVNULL,
            pass_fds=(report_fd,),
        )
        worker.started = loop.time()
        worker.waiter = asyncio.create_task(worker.proc.wait())

    print(f"sidecar supervisor (pid {os.getpid()}): {count} workers on {listen}", flush=True)
    for worker in pool:
        await start(worker)
    try:
        while not stop.done():
            waiters: dict[asyncio.Future[Any], _Worker] = {w.waiter: w for w in pool if w.waiter is not None}
            done, _ = await asyncio.wait([stop, *waiters], return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task is stop or stop.done():
                    continue
                await _restart(waiters[task], task.result(), loop.time(), stop, start)
    finally:
        why = stop.result() if stop.done() else "shutdown"
        print(f"sidecar supervisor: {why}; draining {count} workers", file=sys.stderr, flush=True)
        await _stop_all(pool, config.server.grace_period_s + STOP_MARGIN_S)
        reader.cancel()
        os.close(report_fd)
        for fake in reversed(fakes):
            await fake.stop()
    print("sidecar supervisor: every worker stopped", file=sys.stderr, flush=True)
    return 0


def _forward_reload(pool: list[_Worker]) -> None:
    """SIGHUP: to every live worker (each reloads its config and reports on the pipe)."""
    live = [w for w in pool if w.proc is not None and w.proc.returncode is None]
    _log.info("reload: SIGHUP forwarded to %d workers", len(live), extra={"workers": len(live)})
    for worker in live:
        assert worker.proc is not None
        with contextlib.suppress(ProcessLookupError):
            worker.proc.send_signal(signal.SIGHUP)


async def _read_reports(fd: int) -> None:
    """Log each worker's reload outcome, as it writes it (``server.reload``: one JSON line)."""
    loop = asyncio.get_running_loop()
    lines = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(lines), os.fdopen(fd, "rb", buffering=0)
    )
    try:
        while line := await lines.readline():
            try:
                report = json.loads(line)
                index, pid, applied = int(report["worker"]), int(report["pid"]), bool(report["applied"])
            except (ValueError, KeyError, TypeError):
                continue
            extra = {"worker": index, "worker_pid": pid, "reload_applied": applied}
            if applied:
                later = ", ".join(report.get("restart_needed") or ()) or "nothing"
                _log.info("worker %d (pid %d): reload applied (needs a restart: %s)", index, pid, later, extra=extra)
            else:
                _log.error("worker %d (pid %d): reload refused: %s", index, pid, report.get("error"), extra=extra)
    finally:
        transport.close()


async def _restart(worker: _Worker, code: int, now: float, stop: asyncio.Future[str], start: Any) -> None:
    """A worker died on its own: log it, wait its backoff (cut short by a stop), start it again."""
    lived = now - worker.started
    worker.delay = RESTART_MIN_S if lived >= STABLE_S else worker.delay
    _log.warning(
        "worker %d (pid %s) exited with code %s after %.1f s; restarting it in %.1f s",
        worker.index,
        worker.proc.pid if worker.proc else "?",
        code,
        lived,
        worker.delay,
        extra={"worker": worker.index, "exit_code": code},
    )
    worker.waiter = None
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(stop), worker.delay)
    if stop.done():
        return
    worker.restarts += 1
    worker.delay = min(worker.delay * 2, RESTART_MAX_S)
    await start(worker)


async def _stop_all(pool: list[_Worker], patience: float) -> None:
    """SIGTERM to every live worker, then wait (``patience`` seconds, then SIGKILL)."""
    live = [w.proc for w in pool if w.proc is not None and w.proc.returncode is None]
    for proc in live:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
    for proc in live:
        try:
            await asyncio.wait_for(proc.wait(), patience)
        except TimeoutError:
            _log.warning("worker pid %d did not stop within %.0f s: killed", proc.pid, patience)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()


async def _start_fakes(config: Config) -> tuple[list[Any], dict[str, str]]:
    """The embedded fakes the config names, started once here for every worker."""
    if not config.embedded:
        return [], {}
    from sidecar.server.app import start_embedded

    return await start_embedded(config.embedded)
