"""Reload without a restart: the config file read again, checked whole, swapped in at once.

    triggers          SIGHUP; ``POST /admin/reload`` (``sidecar admin reload``); the gRPC Admin Reload;
                      ``server.watch_config: true`` (the file's directory watched: a ConfigMap's ..data swap)
    1. load           the file read and validated as ``sidecar check-config`` does (``load_config``): a bad
                      file, or one that serves nothing (no model, no tool: empty, only comments), is
                      refused with check-config's error, logged, counted; nothing changes
    2. keep           a file that keeps none of the running config's models and tools (``config.serving``:
                      every call naming one would answer NOT_FOUND) is refused the same way, unless the
                      operator forces it (``force``: POST /admin/reload?force=true, the Admin Reload's
                      ``force``, ``sidecar admin reload --force``); SIGHUP and watch_config cannot force
    3. restart-only   ``server``, ``http``, ``telemetry``, ``state`` (the listeners, TLS, tokens, workers,
                      the in-flight limit, the backend): a change there is NOT applied; the running values
                      stay until the next restart, and the outcome and the log name the changed keys
    4. build          the next core (``live.build_core``) from the one before: kept names keep their state
    5. swap           ``live.swap``: the next call runs on the new core; calls in flight end on the old one
    6. drain          the old core is closed once its calls are done (at most the grace period), in the
                      background: a removed model's in-flight calls finish, its next call is MODEL_NOT_FOUND

Each attempt is counted in ``sidecar.config.reloads`` (``outcome``: applied | refused). Reloads run
one at a time.

Under a supervisor (``--workers N``) an admin reload is a *round* of the whole fleet, and its answer
carries every worker's outcome (``server.workers``)::

    the worker asked    checks the file (a bad one, or one keeping nothing unforced: refused here; no round)
                        writes {"ask": ROUND, "force": F} on the shared report pipe (REPORT_FD_ENV)
    the supervisor      writes {"reload": ROUND, "force": F} on each live worker's command pipe (COMMAND_FD_ENV)
    each worker         reloads, writes {"worker", "pid", "applied", "error", "round": ROUND} on the report pipe
    the supervisor      waits for every worker's line, at most ``server.reload_wait_s``; a worker silent that
                        long (stopped, wedged, gone) is named: applied false, "did not report ... within N s"
                        writes {"round": ROUND, "workers": [...]} on the asker's command pipe
    the worker asked    answers with that set: applied only when every worker applied

Why pipes: the supervisor already hands each worker file descriptors at spawn, and a pipe needs no
address, no file to clean up, no port to guard: only this worker's parent can write to its command
pipe, and nothing else on the host can reach it (a unix socket or a file would be reachable by any
process of the same user, and would outlive a killed supervisor). The shared report pipe carries
lines shorter than PIPE_BUF, so concurrent writers never interleave; each command pipe has one
writer, the supervisor, so its lines (a round's set may be longer) need no such bound. SIGHUP to the
supervisor runs the same round, unforced, with no one to answer (each outcome logged; a file that
serves nothing is refused by the supervisor itself, before the round); SIGHUP to one worker reloads
that worker alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sidecar.config import Config, ConfigError, load_config, removes_everything
from sidecar.server.live import Core, Live
from sidecar.telemetry.metrics import Metrics

__all__ = [
    "COMMAND_FD_ENV",
    "FORCE_HINT",
    "REPORT_FD_ENV",
    "RESTART_ONLY",
    "Reload",
    "ReloadOutcome",
    "Reloader",
    "WorkerOutcome",
    "restart_needed",
]

_log = logging.getLogger("sidecar.reload")

RESTART_ONLY = ("server", "http", "telemetry", "state")
"""The sections a reload does not apply (the listeners, TLS, tokens, workers, admission, telemetry, the
state backend are set up once, at start): their running values stay until the next restart."""
REPORT_FD_ENV = "SIDECAR_WORKER_REPORT_FD"
"""Set by the supervisor: the pipe a worker writes each reload's outcome to (one JSON line)."""
COMMAND_FD_ENV = "SIDECAR_WORKER_COMMAND_FD"
"""Set by the supervisor for each worker: the pipe it reads the supervisor's commands from (a reload
of a round, a round's outcomes: one JSON line each)."""
ANSWER_MARGIN_S = 5.0
"""How much longer than ``server.reload_wait_s`` the worker asked waits for the supervisor's set."""
PIPE_BUF = 4096
"""A line on the shared report pipe is at most this long: POSIX writes it whole (no interleaving)."""
REPORT_MAX_ERROR = 2000
"""An error is cut to this many characters on the pipe (a line under PIPE_BUF is written whole)."""
WATCH_DEBOUNCE_MS = 300
"""``server.watch_config``: changes within this long are one reload."""
FORCE_HINT = (
    "Refused: the config before keeps serving. To apply it anyway, an operator forces it: "
    "POST /admin/reload?force=true, sidecar.v1.Admin/Reload with force: true, or sidecar admin reload --force "
    "(SIGHUP and server.watch_config cannot force a reload)"
)
"""How a reload refused for keeping nothing (``config.removes_everything``) is applied anyway."""


@dataclass(frozen=True, slots=True)
class WorkerOutcome:
    """One worker's reload, as its supervisor heard it."""

    worker: int
    pid: int
    applied: bool
    error: str | None = None
    reported: bool = True
    """False: the worker did not report within ``server.reload_wait_s`` (``error`` says so)."""
    force_required: bool = False
    """Refused only because the file keeps none of the models and tools served: a forced reload applies it."""


@dataclass(frozen=True, slots=True)
class ReloadOutcome:
    """What a reload did: applied (the new config serves) or refused (``error``: check-config's text)."""

    applied: bool
    error: str | None = None
    restart_needed: tuple[str, ...] = ()
    """Keys that changed but take effect at the next restart (not applied)."""
    workers: tuple[WorkerOutcome, ...] = ()
    """Under a supervisor: the outcome of each worker, where known."""
    note: str | None = None
    force_required: bool = False
    """Refused only because the file keeps none of the running config's models and tools (``error``
    names them): the same reload with ``force`` applies it."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "applied": self.applied,
            "error": self.error,
            "force_required": self.force_required,
            "restart_needed": list(self.restart_needed),
            "workers": [
                {"worker": w.worker, "pid": w.pid, "applied": w.applied, "error": w.error, "reported": w.reported}
                for w in self.workers
            ],
            "note": self.note,
        }


class Reload(Protocol):
    """A reload as a door calls it: the config file again, validated whole, swapped in when good; what
    happened. ``force``: applied even when it keeps none of the models and tools served (an operator asked)."""

    def __call__(self, *, force: bool = False) -> Awaitable[ReloadOutcome]: ...


def restart_needed(running: Config, loaded: Config) -> tuple[str, ...]:
    """The keys of the restart-only sections whose value differs (``server.listen``, ``http``, ...)."""
    changed: list[str] = []
    for section in RESTART_ONLY:
        before, after = getattr(running, section), getattr(loaded, section)
        if before == after:
            continue
        if before is None or after is None:
            changed.append(section)
            continue
        old, new = before.model_dump(), after.model_dump()
        changed.extend(f"{section}.{key}" for key in sorted({*old, *new}) if old.get(key) != new.get(key))
    return tuple(changed)


def _fleet_outcome(reports: list[dict[str, Any]], parent: int) -> ReloadOutcome:
    """A round's set, as the supervisor sent it, as the answer: applied only when every worker applied."""
    workers: list[WorkerOutcome] = []
    later: list[str] = []
    for r in reports:
        try:
            w = WorkerOutcome(
                int(r["worker"]),
                int(r["pid"]),
                bool(r["applied"]),
                r.get("error") or None,
                bool(r.get("reported", True)),
                r.get("force_required") is True,
            )
        except (KeyError, TypeError, ValueError):
            continue
        workers.append(w)
        later.extend(k for k in r.get("restart_needed") or () if isinstance(k, str) and k not in later)
    workers.sort(key=lambda w: w.worker)
    failed = [w for w in workers if not w.applied]
    applied = bool(workers) and not failed
    error = "; ".join(f"worker {w.worker} (pid {w.pid}): {w.error}" for w in failed) or None
    if not workers:
        error = "the supervisor reported no worker"
    done = sum(w.applied for w in workers)
    note = f"reloaded through the supervisor (pid {parent}): {done} of {len(workers)} workers applied it"
    force_required = bool(failed) and all(w.force_required for w in failed)
    return ReloadOutcome(applied, error, tuple(later), tuple(workers), note, force_required)


@dataclass
class Reloader:
    """Reloads ``path`` into ``live``: ``await reloader.reload()`` is the one entry of every trigger."""

    path: str | None
    live: Live
    build: Callable[[Config, Core], Awaitable[Core]]
    """The next core from a config and the core before (``SidecarApp.next_core``)."""
    metrics: Metrics | None = None
    adjust: Callable[[Config], Config] | None = None
    """What the command line overrides in every config it loads (``serve --http``)."""
    drain_s: float = 30.0
    """How long an old core's calls may run before it is closed anyway."""
    worker: tuple[int, int] | None = None
    """(index, supervisor pid) when a supervisor started this process."""
    wait_s: float = 30.0
    """``server.reload_wait_s``: how long the supervisor waits for each worker in a round."""
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _draining: set[asyncio.Task[None]] = field(default_factory=set)
    _rounds: dict[str, asyncio.Future[list[dict[str, Any]]]] = field(default_factory=dict)
    _tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    _digest: bytes = b""

    async def reload(
        self, trigger: str = "admin", round_id: str | None = None, *, force: bool = False
    ) -> ReloadOutcome:
        """Load, check, build and swap (see the module docstring); the outcome, never raised. ``force``:
        applied even when the file keeps none of the models and tools served (an operator asked)."""
        async with self._lock:
            outcome = await self._reload(trigger, force)
        self._report(outcome, trigger, round_id)
        return outcome

    async def reload_fleet(self, trigger: str = "admin", *, force: bool = False) -> ReloadOutcome:
        """Every process of this sidecar: this one alone, or, under a supervisor, every worker in one
        round (the file checked here first), answered with each worker's outcome."""
        fd = os.environ.get(COMMAND_FD_ENV)
        if self.worker is None or not fd or not os.environ.get(REPORT_FD_ENV):
            return await self.reload(trigger, force=force)
        index, parent = self.worker
        if self._refusal(force) is not None:
            outcome = await self.reload(trigger, force=force)  # refused here too: logged, counted, the same error
            note = "refused by this worker before asking the others (they read the same file)"
            me = WorkerOutcome(index, os.getpid(), False, outcome.error, force_required=outcome.force_required)
            return ReloadOutcome(False, outcome.error, (), (me,), note, outcome.force_required)
        round_id = uuid.uuid4().hex
        future: asyncio.Future[list[dict[str, Any]]] = asyncio.get_running_loop().create_future()
        self._rounds[round_id] = future
        try:
            if not self._write({"ask": round_id, "worker": index, "pid": os.getpid(), "force": force}):
                _log.warning("reload: cannot reach the supervisor (pid %d); reloading this worker alone", parent)
                alone = await self.reload(trigger, force=force)
                me = WorkerOutcome(index, os.getpid(), alone.applied, alone.error, force_required=alone.force_required)
                note = f"the supervisor (pid {parent}) could not be asked: this worker alone reloaded"
                return ReloadOutcome(
                    alone.applied, alone.error, alone.restart_needed, (me,), note, alone.force_required
                )
            try:
                reports = await asyncio.wait_for(asyncio.shield(future), self.wait_s + ANSWER_MARGIN_S)
            except TimeoutError:
                error = f"the supervisor (pid {parent}) did not answer within {self.wait_s + ANSWER_MARGIN_S:g} s"
                return ReloadOutcome(False, error, (), (), "each worker's outcome is in the supervisor's log")
        finally:
            self._rounds.pop(round_id, None)
        return _fleet_outcome(reports, parent)

    async def serve_supervisor(self) -> None:
        """Read the supervisor's commands (``COMMAND_FD_ENV``) until the pipe closes: a round's reload,
        a round's outcomes for the reload this worker asked."""
        fd = os.environ.get(COMMAND_FD_ENV)
        if self.worker is None or not fd:
            return
        loop = asyncio.get_running_loop()
        lines = asyncio.StreamReader(limit=1 << 22)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(lines), os.fdopen(int(fd), "rb", buffering=0)
        )
        try:
            while line := await lines.readline():
                try:
                    command = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(command, dict):
                    continue
                if isinstance(command.get("reload"), str):
                    force = command.get("force") is True  # an operator's forced reload, relayed
                    task = loop.create_task(self.reload("supervisor", command["reload"], force=force))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
                elif isinstance(command.get("round"), str) and isinstance(command.get("workers"), list):
                    future = self._rounds.get(command["round"])
                    if future is not None and not future.done():
                        future.set_result([w for w in command["workers"] if isinstance(w, dict)])
        finally:
            transport.close()

    def _write(self, line: dict[str, Any]) -> bool:
        """One JSON line (under PIPE_BUF: written whole) on the supervisor's report pipe."""
        fd = os.environ.get(REPORT_FD_ENV)
        if not fd:
            return False
        data = (json.dumps(line) + "\n").encode()
        while len(data) > PIPE_BUF and line.get("error"):  # an escaped error may be longer than its text
            line = {**line, "error": str(line["error"])[: len(str(line["error"])) // 2] + "..."}
            data = (json.dumps(line) + "\n").encode()
        try:
            os.write(int(fd), data)
        except (OSError, ValueError):
            return False
        return True

    def _load(self) -> Config:
        if self.path is None:
            raise ConfigError("no config file to reload: the sidecar serves the embedded default (serve --config FILE)")
        config = load_config(self.path)
        return self.adjust(config) if self.adjust is not None else config

    def _refusal(self, force: bool) -> str | None:
        """Why a reload of the file now would be refused before its build (a bad file, one serving nothing,
        one keeping nothing served unforced), or None."""
        try:
            loaded = self._load()
        except ConfigError as exc:
            return str(exc)
        return None if force else removes_everything(self.live.core.config, loaded)

    async def _reload(self, trigger: str, force: bool) -> ReloadOutcome:
        try:
            loaded = self._load()
        except ConfigError as exc:
            return ReloadOutcome(False, str(exc))
        old = self.live.core
        running = old.config
        removed = removes_everything(running, loaded)
        if removed is not None and not force:
            return ReloadOutcome(False, f"{removed}. {FORCE_HINT}", force_required=True)
        later = restart_needed(running, loaded)
        missing = loaded.embedded - running.embedded
        if missing:
            return ReloadOutcome(
                False, f"embedded://{', embedded://'.join(sorted(missing))} was not started: it needs a restart"
            )
        applied = loaded.model_copy(update={s: getattr(running, s) for s in RESTART_ONLY})
        try:
            core = await self.build(applied, old)
        except Exception as exc:  # an MCP server that cannot be opened: the old core keeps serving
            return ReloadOutcome(False, f"the new config could not be started: {exc}")
        self.live.swap(core)
        task = asyncio.get_running_loop().create_task(self._retire(old))
        self._draining.add(task)
        task.add_done_callback(self._draining.discard)
        if removed is not None:
            _log.warning("reload (%s) forced by the operator: %s", trigger, removed)
            return ReloadOutcome(True, None, later, note=f"forced: {removed}")
        return ReloadOutcome(True, None, later)

    async def _retire(self, old: Core) -> None:
        """Close ``old`` once its calls are done, or after ``drain_s`` whatever is left."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(old.drained(), self.drain_s)
        if (left := old.in_flight()) > 0:
            _log.warning("reload: %d calls still ran on the config before after %.0f s; closed it", left, self.drain_s)
        await old.aclose()

    async def aclose(self) -> None:
        """Every old core closed (the process is stopping)."""
        for task in [*self._draining, *self._tasks]:
            task.cancel()
        await asyncio.gather(*self._draining, *self._tasks, return_exceptions=True)

    def _report(self, outcome: ReloadOutcome, trigger: str, round_id: str | None) -> None:
        if self.metrics is not None:
            self.metrics.reloaded("applied" if outcome.applied else "refused")
        extra = {"reload_trigger": trigger, "reload_applied": outcome.applied}
        if outcome.applied:
            _log.info("reload (%s): the new config serves the next call", trigger, extra=extra)
            if outcome.restart_needed:
                _log.warning(
                    "reload (%s): not applied, needs a restart: %s (the running values stay)",
                    trigger,
                    ", ".join(outcome.restart_needed),
                    extra=extra,
                )
        else:
            _log.error("reload (%s) refused, the config before keeps serving: %s", trigger, outcome.error, extra=extra)
        if self.worker is not None:
            line: dict[str, Any] = {
                "worker": self.worker[0],
                "pid": os.getpid(),
                "applied": outcome.applied,
                "error": (outcome.error or "")[:REPORT_MAX_ERROR] or None,
                "restart_needed": list(outcome.restart_needed)[:20],
                "force_required": outcome.force_required,
            }
            if round_id is not None:
                line["round"] = round_id
            self._write(line)

    # ------------------------------------------------------------------ server.watch_config

    def _read_digest(self) -> bytes:
        try:
            return hashlib.sha256(Path(self.path or "").read_bytes()).digest()
        except OSError:
            return b""

    def _folder(self) -> Path:
        return Path(self.path or ".").absolute().parent  # not resolved: the symlink's folder is the one swapped

    async def watch(self, stop: asyncio.Event) -> None:
        """Reload whenever the file's bytes change: its directory watched (a Kubernetes ConfigMap
        swaps the ``..data`` symlink, never the file), changes debounced, until ``stop`` is set."""
        from watchfiles import awatch

        if self.path is None:
            return
        folder = self._folder()
        self._digest = self._read_digest()
        async for _changes in awatch(folder, stop_event=stop, debounce=WATCH_DEBOUNCE_MS, step=50):
            digest = self._read_digest()
            if digest == self._digest:
                continue
            self._digest = digest
            await self.reload("watch_config")
