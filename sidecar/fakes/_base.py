"""What both fakes share: scripts, request records and the ``/_fake/*`` routes."""

from __future__ import annotations

import copy
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ._http import HttpServer, Request, Response
from ._script import ScriptBook, Step, parse_steps

__all__ = ["FakeServer", "Record"]

CONTROL_PREFIX = "/_fake/"


@dataclass
class Record:
    seq: int
    request: Request
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        req = self.request
        out: dict[str, Any] = {
            "seq": self.seq,
            "method": req.method,
            "path": req.path,
            "query": req.query,
            "headers": req.headers,
            "body": req.body_for_record(),
            "received_at": req.received_at,
            "status_sent": req.status_sent,
            "client_disconnected": req.client_disconnected,
            "fault": req.fault,
        }
        if req.chunks_sent is not None:  # a streamed response: how many of its chunks went out
            out["chunks_sent"] = req.chunks_sent
        out.update(self.extra)
        return out


def _matches(record: dict[str, Any], filters: dict[str, str]) -> bool:
    for key, want in filters.items():
        have = record.get(key)
        if isinstance(have, bool):
            have = "true" if have else "false"
        if str(have) != want:
            return False
    return True


class FakeServer(HttpServer):
    """Base of the fakes.  Subclasses implement :meth:`handle_app`.

    Python control methods are thread-safe, so a test thread may call them
    while the server runs in a :class:`ThreadedServer`.
    """

    script_key = "path"  # the field of POST /_fake/script naming the queue
    step_keys: Iterable[str] = ()
    presets: Iterable[str] = ()

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, max_records: int = 10000) -> None:
        super().__init__(host, port)
        self._lock = threading.Lock()
        self._scripts = ScriptBook()
        self._records: deque[Record] = deque(maxlen=max_records)
        self._seq = itertools.count(1)
        self._stamp: Callable[[], float] | None = None

    # ---- Python control API --------------------------------------------------------------

    def script(self, key: str, steps: list[dict[str, Any]], append: bool = False) -> int:
        """Queue ``steps`` for ``key`` (replacing its queue unless ``append``); returns its length."""
        parsed = parse_steps(steps, extra_keys=self.step_keys, presets=self.presets)
        for step, _ in parsed:
            self._validate_step(step)
        with self._lock:
            return self._scripts.set(key, parsed, append)

    def stamp_with(self, now: Callable[[], float] | None) -> None:
        """Record each request's arrival on this clock too (``stamped_at``): a test's injected clock, so
        the gaps between attempts read in the sidecar's own time."""
        with self._lock:
            self._stamp = now

    def requests(self, **filters: str) -> list[dict[str, Any]]:
        """Recorded requests, oldest first; ``filters`` keep records whose field equals the value."""
        return copy.deepcopy(self._snapshot(filters))

    def _snapshot(self, filters: dict[str, str]) -> list[dict[str, Any]]:
        with self._lock:
            records = [r.to_json() for r in self._records]
        return [r for r in records if _matches(r, filters)]

    def reset(self) -> None:
        """Forget scripts and records (subclasses also reset their own state)."""
        with self._lock:
            self._scripts.clear()
            self._records.clear()
            self._reset_locked()

    def wait_for(self, predicate: Callable[[list[dict[str, Any]]], bool], timeout: float = 5.0) -> list[dict[str, Any]]:
        """Poll :meth:`requests` until ``predicate`` holds.  Never call it on the server's own loop."""
        deadline = time.monotonic() + timeout
        while True:
            records = self._snapshot({})
            if predicate(records):
                return copy.deepcopy(records)
            if time.monotonic() >= deadline:
                raise TimeoutError(f"condition not met within {timeout}s; {len(records)} requests recorded")
            time.sleep(0.01)

    # ---- hooks for subclasses ----------------------------------------------------------------

    def _validate_step(self, step: Step) -> None:
        """Raise ``ValueError`` for a step this fake cannot play."""

    def _reset_locked(self) -> None:
        """Reset subclass state; called with the lock held."""

    def _health_locked(self) -> dict[str, Any]:
        return {}

    async def handle_app(self, request: Request) -> Response:
        raise NotImplementedError

    def _control_extra(self, request: Request, name: str) -> Response | None:
        """Extra ``/_fake/<name>`` routes; ``None`` when unknown."""
        return None

    # ---- shared plumbing ----------------------------------------------------------------------

    def _record(self, request: Request, **extra: Any) -> Record:
        with self._lock:
            if self._stamp is not None:
                extra = {**extra, "stamped_at": self._stamp()}
            record = Record(next(self._seq), request, extra)
            self._records.append(record)
        return record

    def _pop_step(self, key: str) -> Step | None:
        with self._lock:
            return self._scripts.pop(key)

    async def handle(self, request: Request) -> Response:
        if request.path.startswith(CONTROL_PREFIX):
            return self._control(request)
        return await self.handle_app(request)

    def _control(self, request: Request) -> Response:
        name = request.path[len(CONTROL_PREFIX) :].strip("/")
        try:
            if name == "health" and request.method == "GET":
                with self._lock:
                    info = {"ok": True, "requests": len(self._records), "pending_steps": self._scripts.pending()}
                    info.update(self._health_locked())
                return Response.json(info)
            if name == "requests" and request.method == "GET":
                return Response.json(self._snapshot(request.query))
            if name == "reset" and request.method == "POST":
                self.reset()
                return Response.json({"ok": True})
            if name == "script" and request.method == "POST":
                return self._control_script(request)
            extra = self._control_extra(request, name)
        except ValueError as exc:
            return Response.json({"error": str(exc)}, status=400)
        if extra is not None:
            return extra
        return Response.json({"error": f"no control route {request.method} {request.path}"}, status=404)

    def _control_script(self, request: Request) -> Response:
        body = request.json()
        if not isinstance(body, dict):
            raise ValueError("script body must be a JSON object")
        key = body.get(self.script_key)
        if not isinstance(key, str) or not key:
            raise ValueError(f"script body needs a non-empty string {self.script_key!r}")
        queued = self.script(key, body.get("steps", []), bool(body.get("append", False)))
        return Response.json({"ok": True, self.script_key: key, "queued": queued})
