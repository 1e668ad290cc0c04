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
    SIGHUP (the file checked first: a bad one,    {"reload": ROUND} on its command pipe: the config
      or one serving nothing, refused here), or     file reloaded (server.reload); its outcome written
      a worker's {"ask"} (an admin reload, maybe    to the report pipe (REPORT_FD_ENV) with the round
      forced): a round, {"reload": ROUND, "force"}
      on each worker's command pipe (COMMAND_FD_ENV);
      every outcome read from the report pipe,      an admin reload: {"ask"} on the report pipe, then
      logged, at most server.reload_wait_s; the     the round's set from its command pipe: every
      whole set to the worker that asked            worker's outcome in the answer (server.reload)
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
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal, TextIO

from sidecar.config import Config, ConfigError, load_config
from sidecar.server.cores import worker_count
from sidecar.server.reload import COMMAND_FD_ENV, REPORT_FD_ENV

__all__ = [
    "EMBEDDED_ENV",
    "RESTART_MAX_S",
    "RESTART_MIN_S",
    "WORKER_ENV",
    "WorkerRole",
    "say",
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


def say(line: str, stream: TextIO | None = None) -> None:
    """``line`` and its newline in one write, flushed (stdout by default). The supervisor and its workers share
    stdout and stderr: ``print`` under PYTHONUNBUFFERED (the image sets it) writes the text and the newline
    apart, so two workers starting at once could write ``banner banner\n\n`` and a reader of lines would miss
    the second banner. One write of a line under PIPE_BUF is never split by another process's."""
    out = sys.stdout if stream is None else stream
    out.write(line + "\n")
    out.flush()


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
    commands: asyncio.WriteTransport | None = field(default=None, repr=False)
    """The write end of this worker's command pipe (a new pipe for each start)."""

    @property
    def live(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def send(self, command: dict[str, Any]) -> bool:
        """One JSON line on the worker's command pipe; False when it is gone."""
        if self.commands is None or self.commands.is_closing() or not self.live:
            return False
        self.commands.write((json.dumps(command) + "\n").encode())
        return True

    def close_commands(self) -> None:
        if self.commands is not None:
            self.commands.close()
            self.commands = None


@dataclass
class _Round:
    """One reload of every worker: who was asked (index: pid), what each reported."""

    asker: tuple[int, int] | None
    expected: dict[int, int]
    reports: dict[int, dict[str, Any]] = field(default_factory=dict)
    complete: asyncio.Event = field(default_factory=asyncio.Event)


class _Rounds:
    """The supervisor's reload rounds (``server.reload``'s docstring): each live worker told to reload,
    every outcome collected within ``wait_s``, the complete set to the worker that asked."""

    def __init__(self, pool: list[_Worker], wait_s: float) -> None:
        self.pool = pool
        self.wait_s = wait_s
        self.rounds: dict[str, _Round] = {}
        self.tasks: set[asyncio.Task[None]] = set()

    def start(self, round_id: str, asker: tuple[int, int] | None, *, force: bool = False) -> None:
        """A round; ``force``: an operator forced the reload (each worker applies a file keeping nothing served)."""
        task = asyncio.get_running_loop().create_task(self._run(round_id, asker, force))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def report(self, report: dict[str, Any]) -> None:
        """A worker's outcome line: to its round (a late one, for a round already answered, only logged)."""
        held = self.rounds.get(str(report.get("round")))
        if held is None:
            return
        index = int(report["worker"])
        if held.expected.get(index) == int(report["pid"]):
            held.reports[index] = report
            if len(held.reports) == len(held.expected):
                held.complete.set()

    async def _run(self, round_id: str, asker: tuple[int, int] | None, force: bool) -> None:
        held = _Round(asker, {})
        self.rounds[round_id] = held
        absent: list[dict[str, Any]] = []
        for w in self.pool:
            if w.proc is not None and w.send({"reload": round_id, "force": force}):
                held.expected[w.index] = w.proc.pid
            else:
                pid = w.proc.pid if w.proc is not None else 0
                absent.append(_silent(w.index, pid, "was not running (restarting after an exit)"))
        _log.info(
            "reload: %d workers told to reload (round %s)",
            len(held.expected),
            round_id[:8],
            extra={"workers": len(held.expected)},
        )
        if held.expected:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(held.complete.wait(), self.wait_s)
        del self.rounds[round_id]
        outcomes = [*held.reports.values(), *absent]
        for index, pid in held.expected.items():
            if index in held.reports:
                continue
            worker = self.pool[index]
            gone = worker.proc is None or worker.proc.pid != pid or worker.proc.returncode is not None
            why = (
                "exited before it reported its reload"
                if gone
                else f"did not report its reload within {self.wait_s:g} s"
            )
            _log.error("worker %d (pid %d): %s", index, pid, why, extra={"worker": index, "worker_pid": pid})
            outcomes.append(_silent(index, pid, why))
        outcomes.sort(key=lambda r: int(r["worker"]))
        done = sum(bool(r.get("applied")) for r in outcomes)
        _log.info("reload: %d of %d workers applied it (round %s)", done, len(outcomes), round_id[:8])
        if asker is None:
            return
        index, pid = asker
        them = self.pool[index] if 0 <= index < len(self.pool) else None
        if (
            them is None
            or them.proc is None
            or them.proc.pid != pid
            or not them.send({"round": round_id, "workers": outcomes})
        ):
            _log.warning("reload: worker %d (pid %d) asked for the reload but is gone; its answer dropped", index, pid)

    async def aclose(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


def _silent(index: int, pid: int, why: str) -> dict[str, Any]:
    return {"worker": index, "pid": pid, "applied": False, "error": why, "reported": False, "restart_needed": []}


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
    rounds = _Rounds(pool, config.server.reload_wait_s)

    def sighup() -> None:
        """A round of every worker, once the file is one they could apply (check-config's check)."""
        if config_path is not None:
            try:
                load_config(config_path)
            except ConfigError as exc:
                _log.error(
                    "reload (SIGHUP) refused by the supervisor, no worker told; the config before keeps serving: %s",
                    exc,
                )
                return
        rounds.start(uuid.uuid4().hex, None)

    loop.add_signal_handler(signal.SIGHUP, sighup)
    reports, report_fd = os.pipe()  # every worker writes its reload outcomes here, one JSON line each
    reader = asyncio.create_task(_read_reports(reports, rounds))
    fakes, embedded = await _start_fakes(config)
    env = {**os.environ, EMBEDDED_ENV: json.dumps(embedded), REPORT_FD_ENV: str(report_fd)}
    base = [sys.executable, "-m", "sidecar", "serve", "--listen", listen, "--workers", "1"]
    if config_path is not None:
        base += ["--config", config_path]
    if http is not None:
        base += ["--http", http]

    async def start(worker: _Worker) -> None:
        worker.close_commands()
        theirs, mine = os.pipe()  # this worker's command pipe: it reads, the supervisor writes
        try:
            worker.proc = await asyncio.create_subprocess_exec(
                *base,
                env={**env, WORKER_ENV: f"{worker.index}/{count}", COMMAND_FD_ENV: str(theirs)},
                stdin=asyncio.subprocess.DEVNULL,
                pass_fds=(report_fd, theirs),
            )
        finally:
            os.close(theirs)
        worker.commands, _ = await loop.connect_write_pipe(asyncio.BaseProtocol, os.fdopen(mine, "wb", buffering=0))
        worker.started = loop.time()
        worker.waiter = asyncio.create_task(worker.proc.wait())

    say(f"sidecar supervisor (pid {os.getpid()}): {count} workers on {listen}")
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
        say(f"sidecar supervisor: {why}; draining {count} workers", sys.stderr)
        await rounds.aclose()
        await _stop_all(pool, config.server.grace_period_s + STOP_MARGIN_S)
        for worker in pool:
            worker.close_commands()
        reader.cancel()
        os.close(report_fd)
        for fake in reversed(fakes):
            await fake.stop()
    say("sidecar supervisor: every worker stopped", sys.stderr)
    return 0


async def _read_reports(fd: int, rounds: _Rounds) -> None:
    """Each worker's line on the report pipe (``server.reload``): an admin reload's ask starts a round;
    a reload outcome is logged, and counted in its round."""
    loop = asyncio.get_running_loop()
    lines = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(lines), os.fdopen(fd, "rb", buffering=0)
    )
    try:
        while line := await lines.readline():
            try:
                report = json.loads(line)
                if isinstance(report.get("ask"), str):
                    force = report.get("force") is True
                    asker = (int(report["worker"]), int(report["pid"]))
                    what = "a forced reload" if force else "a reload"
                    _log.info("reload: worker %d (pid %d) asked for %s of every worker", *asker, what)
                    rounds.start(report["ask"], asker, force=force)
                    continue
                index, pid, applied = int(report["worker"]), int(report["pid"]), bool(report["applied"])
                rounds.report(report)
            except (ValueError, KeyError, TypeError, AttributeError):
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
