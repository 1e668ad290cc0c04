"""Reload without a restart: the config file read again, checked whole, swapped in at once.

    triggers          SIGHUP; ``POST /admin/reload`` (``sidecar admin reload``); the gRPC Admin Reload;
                      ``server.watch_config: true`` (the file's directory watched: a ConfigMap's ..data swap)
    1. load           the file read and validated as ``sidecar check-config`` does (``load_config``): a bad
                      file is refused with check-config's error, logged, counted; nothing changes
    2. restart-only   ``server``, ``http``, ``telemetry``, ``state`` (the listeners, TLS, tokens, workers,
                      the in-flight limit, the backend): a change there is NOT applied; the running values
                      stay until the next restart, and the outcome and the log name the changed keys
    3. build          the next core (``live.build_core``) from the one before: kept names keep their state
    4. swap           ``live.swap``: the next call runs on the new core; calls in flight end on the old one
    5. drain          the old core is closed once its calls are done (at most the grace period), in the
                      background: a removed model's in-flight calls finish, its next call is MODEL_NOT_FOUND

Each attempt is counted in ``sidecar.config.reloads`` (``outcome``: applied | refused). Reloads run
one at a time. Under a supervisor (``--workers N``) each worker reports its outcome to it as one JSON
line on a pipe (``REPORT_FD_ENV``), and an admin reload asks the supervisor (SIGHUP to the parent),
which forwards SIGHUP to every worker: the whole fleet reloads, each worker's outcome in its log.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sidecar.config import Config, ConfigError, load_config
from sidecar.server.live import Core, Live
from sidecar.telemetry.metrics import Metrics

__all__ = [
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
REPORT_MAX_ERROR = 2000
"""An error is cut to this many characters on the pipe (a line under PIPE_BUF is written whole)."""
WATCH_DEBOUNCE_MS = 300
"""``server.watch_config``: changes within this long are one reload."""


@dataclass(frozen=True, slots=True)
class WorkerOutcome:
    """One worker's reload, as its supervisor heard it."""

    worker: int
    pid: int
    applied: bool
    error: str | None = None


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

    def as_dict(self) -> dict[str, Any]:
        return {
            "applied": self.applied,
            "error": self.error,
            "restart_needed": list(self.restart_needed),
            "workers": [
                {"worker": w.worker, "pid": w.pid, "applied": w.applied, "error": w.error} for w in self.workers
            ],
            "note": self.note,
        }


Reload = Callable[[], Awaitable[ReloadOutcome]]
"""A reload as a door calls it: the config file again, validated whole, swapped in when good; what happened."""


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
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _draining: set[asyncio.Task[None]] = field(default_factory=set)
    _waiting: list[asyncio.Future[ReloadOutcome]] = field(default_factory=list)
    _digest: bytes = b""

    async def reload(self, trigger: str = "admin") -> ReloadOutcome:
        """Load, check, build and swap (see the module docstring); the outcome, never raised."""
        async with self._lock:
            outcome = await self._reload(trigger)
        self._report(outcome, trigger)
        waiting, self._waiting = self._waiting, []
        for future in waiting:
            if not future.done():
                future.set_result(outcome)
        return outcome

    async def reload_fleet(self, trigger: str = "admin") -> ReloadOutcome:
        """Every process of this sidecar: this one alone, or, under a supervisor, every worker (the
        file checked here first; then SIGHUP to the supervisor, which forwards it to each worker)."""
        if self.worker is None:
            return await self.reload(trigger)
        index, parent = self.worker
        try:
            self._load()
        except ConfigError:
            return await self.reload(trigger)  # refused here too: logged, counted, the same error
        future: asyncio.Future[ReloadOutcome] = asyncio.get_running_loop().create_future()
        self._waiting.append(future)
        try:
            os.kill(parent, signal.SIGHUP)
        except OSError as exc:
            self._waiting.remove(future)
            _log.warning("reload: cannot signal the supervisor (pid %d): %s; reloading this worker", parent, exc)
            return await self.reload(trigger)
        try:
            mine = await asyncio.wait_for(future, max(self.drain_s, 10.0))
        except TimeoutError:
            return ReloadOutcome(False, "the supervisor's SIGHUP did not reach this worker in time")
        note = (
            f"SIGHUP sent to the supervisor (pid {parent}): every worker reloads; "
            "the supervisor logs each worker's outcome"
        )
        me = WorkerOutcome(index, os.getpid(), mine.applied, mine.error)
        return ReloadOutcome(mine.applied, mine.error, mine.restart_needed, (me,), note)

    def _load(self) -> Config:
        if self.path is None:
            raise ConfigError("no config file to reload: the sidecar serves the embedded default (serve --config FILE)")
        config = load_config(self.path)
        return self.adjust(config) if self.adjust is not None else config

    async def _reload(self, trigger: str) -> ReloadOutcome:
        try:
            loaded = self._load()
        except ConfigError as exc:
            return ReloadOutcome(False, str(exc))
        old = self.live.core
        running = old.config
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
        for task in list(self._draining):
            task.cancel()
        await asyncio.gather(*self._draining, return_exceptions=True)

    def _report(self, outcome: ReloadOutcome, trigger: str) -> None:
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
        fd = os.environ.get(REPORT_FD_ENV)
        if self.worker is not None and fd:
            line = {
                "worker": self.worker[0],
                "pid": os.getpid(),
                "applied": outcome.applied,
                "error": (outcome.error or "")[:REPORT_MAX_ERROR] or None,
                "restart_needed": list(outcome.restart_needed),
            }
            with contextlib.suppress(OSError, ValueError):
                os.write(int(fd), (json.dumps(line) + "\n").encode())

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
