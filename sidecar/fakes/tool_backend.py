"""FakeToolBackend: sample HTTP tools (search, fetch, a non-idempotent create, failures).

Run it: ``python -m sidecar.fakes.tool_backend --port 8788`` (prints its URL).
See :mod:`sidecar.fakes` for the routes and the scripting API.
"""

from __future__ import annotations

import argparse
import http
from collections import Counter
from collections.abc import Sequence
from typing import Any

from ._base import FakeServer
from ._cli import serve_forever
from ._corpus import DOCS, search
from ._http import Fault, Request, Response
from ._script import Step

__all__ = ["FAIL_MODES", "IDEMPOTENCY_HEADER", "FakeToolBackend", "main"]

SLOW_MS = 2000.0
IDEMPOTENCY_HEADER = "idempotency-key"
"""``POST /notes`` honours it: a key seen before answers the note it created, creating none."""

_FAIL_BODIES: dict[str, tuple[int, dict[str, Any]]] = {
    "400": (400, {"error": "bad request", "detail": "the request was malformed"}),
    "401": (401, {"error": "unauthorized", "detail": "missing or invalid credentials"}),
    "403": (403, {"error": "forbidden", "detail": "you may not access this resource"}),
    "404": (404, {"error": "not found"}),
    "413": (413, {"error": "payload too large"}),
    "422": (422, {"error": "unprocessable entity", "fields": {"q": "must not be empty"}}),
    "429": (429, {"error": "too many requests"}),
    "500": (500, {"error": "internal server error"}),
    "502": (502, {"error": "bad gateway"}),
    "503": (503, {"error": "service unavailable"}),
    "418": (418, {"error": "I'm a teapot"}),
    "throttle401": (401, {"error": "rate limit exceeded, slow down"}),
    "robot403": (403, {"error": "CLIENT.RobotDetected"}),
}
FAIL_MODES = (*_FAIL_BODIES, "reset", "hang", "slow", "empty200")


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase.lower()
    except ValueError:
        return f"http {status}"


def _fail(mode: str, request: Request) -> Response:
    if mode in _FAIL_BODIES:
        status, body = _FAIL_BODIES[mode]
        resp = Response.json(body, status=status)
        if mode == "429":
            resp.headers["retry-after"] = "7"
        if mode == "401":
            resp.headers["www-authenticate"] = 'Bearer realm="fake"'
    elif mode == "reset":
        resp = Response(fault=Fault.RESET)
    elif mode == "hang":
        resp = Response(fault=Fault.HANG)
    elif mode == "slow":
        resp = Response.json({"ok": True, "mode": "slow"})
        resp.delay_ms = _float(request.query.get("delay_ms"), SLOW_MS)
    elif mode == "empty200":
        resp = Response(status=200)
    else:
        return Response.json({"error": "unknown fail mode", "mode": mode, "modes": list(FAIL_MODES)}, status=404)
    if "retry_after" in request.query:
        resp.headers["retry-after"] = request.query["retry_after"]
    return resp


def _float(text: str | None, default: float) -> float:
    try:
        return float(text) if text is not None else default
    except ValueError:
        return default


class FakeToolBackend(FakeServer):
    """Sample tools over HTTP.  Scripts queue per request path (exact, or a ``prefix*``)."""

    script_key = "path"

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, max_records: int = 10000) -> None:
        super().__init__(host, port, max_records=max_records)
        self._notes: list[dict[str, str]] = []
        self._notes_received = 0
        self._note_texts: Counter[str] = Counter()
        self._note_keys: Counter[str] = Counter()
        self._note_by_key: dict[str, dict[str, str]] = {}
        self._notes_replayed = 0

    def script(self, key: str, steps: list[dict[str, Any]], append: bool = False) -> int:
        if key != "*" and not key.startswith("/"):
            raise ValueError(f"script path must start with '/' (or be '*'), got {key!r}")
        return super().script(key, steps, append)

    @property
    def notes_received(self) -> int:
        """Every ``POST /notes`` that arrived, whatever happened to it."""
        with self._lock:
            return self._notes_received

    def notes_repeated(self) -> dict[str, int]:
        """Each ``text`` that arrived in more than one ``POST /notes``, with how many times."""
        with self._lock:
            return {text: count for text, count in self._note_texts.items() if count > 1}

    def note_keys(self) -> dict[str, int]:
        """Each ``Idempotency-Key`` that came with a ``POST /notes``, with how many times."""
        with self._lock:
            return dict(self._note_keys)

    @property
    def notes_created(self) -> int:
        """Notes created (a POST whose key was seen before creates none)."""
        with self._lock:
            return len(self._notes)

    def _reset_locked(self) -> None:
        self._notes.clear()
        self._notes_received = 0
        self._note_texts.clear()
        self._note_keys.clear()
        self._note_by_key.clear()
        self._notes_replayed = 0

    def _health_locked(self) -> dict[str, Any]:
        return {"notes_received": self._notes_received, "notes_created": len(self._notes)}

    def _control_extra(self, request: Request, name: str) -> Response | None:
        if name != "notes" or request.method != "GET":
            return None
        repeated = self.notes_repeated()
        with self._lock:
            counts = {
                "received": self._notes_received,
                "created": len(self._notes),
                "texts": len(self._note_texts),
                "keys": len(self._note_keys),
                "replayed": self._notes_replayed,
            }
        return Response.json({**counts, "repeated": repeated})

    async def handle_app(self, request: Request) -> Response:
        with self._lock:
            if request.path == "/notes" and request.method == "POST":
                self._notes_received += 1
                body = request.json_or_none()
                if isinstance(body, dict) and isinstance(body.get("text"), str):
                    self._note_texts[body["text"]] += 1
                key = request.headers.get(IDEMPOTENCY_HEADER)
                if key is not None:
                    self._note_keys[key] += 1
            step = self._scripts.pop(request.path)
        self._record(request, source="script" if step else "default")
        if step is None:
            return self._route(request)
        return self._scripted(step, request)

    def _scripted(self, step: Step, request: Request) -> Response:
        if step.has_body:
            body = step.body
            if isinstance(body, str):
                resp = Response.text(body, status=step.status or 200)
            else:
                resp = Response.json(body, status=step.status or 200)
        elif step.status and step.status >= 400:
            resp = Response.json({"error": _phrase(step.status), "status": step.status}, status=step.status)
        else:
            resp = self._route(request)
            resp.status = step.status or resp.status
        resp.headers.update(step.headers)
        resp.delay_ms = step.delay_ms or resp.delay_ms
        resp.fault = step.fault or resp.fault
        return resp

    def _route(self, request: Request) -> Response:
        path, method = request.path, request.method
        if path.startswith("/fail/"):
            if method not in ("GET", "POST"):
                return Response.json({"error": "method not allowed"}, status=405, headers={"allow": "GET, POST"})
            return _fail(path[len("/fail/") :], request)
        if path == "/search":
            return self._search(request) if method == "GET" else _not_allowed("GET")
        if path.startswith("/docs/"):
            return self._doc(path[len("/docs/") :]) if method == "GET" else _not_allowed("GET")
        if path == "/notes":
            if method == "POST":
                return self._create_note(request)
            if method == "GET":
                with self._lock:
                    return Response.json({"notes": list(self._notes), "received": self._notes_received})
            return _not_allowed("GET, POST")
        return Response.json({"error": "no such route", "path": path}, status=404)

    def _search(self, request: Request) -> Response:
        query = request.query.get("q")
        if query is None:
            return Response.json({"error": "missing query parameter 'q'"}, status=400)
        try:
            limit = int(request.query.get("limit", "5"))
        except ValueError:
            return Response.json({"error": "'limit' must be an integer"}, status=400)
        return Response.json({"results": search(query, limit)})

    @staticmethod
    def _doc(doc_id: str) -> Response:
        doc = DOCS.get(doc_id)
        if doc is None:
            return Response.json({"error": "document not found", "id": doc_id}, status=404)
        return Response.json(doc)

    def _create_note(self, request: Request) -> Response:
        body = request.json_or_none()
        if not isinstance(body, dict) or not isinstance(body.get("text"), str):
            return Response.json({"error": "body must be a JSON object with a string 'text'"}, status=400)
        key = request.headers.get(IDEMPOTENCY_HEADER)
        replayed = {"idempotent-replayed": "true"}
        with self._lock:
            note = self._note_by_key.get(key) if key is not None else None
            if note is not None:  # the key was seen: the note it created, no other
                self._notes_replayed += 1
            else:
                note = {"id": f"note-{len(self._notes) + 1}", "text": body["text"]}
                self._notes.append(note)
                replayed = {}
                if key is not None:
                    self._note_by_key[key] = note
        headers = {"location": f"/notes/{note['id']}", **replayed}
        return Response.json({"id": note["id"]}, status=201, headers=headers)


def _not_allowed(allow: str) -> Response:
    return Response.json({"error": "method not allowed"}, status=405, headers={"allow": allow})


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="sidecar fake-tools", description=(__doc__ or "").splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8788, help="0 picks a free port")
    args = p.parse_args(argv)
    return serve_forever(FakeToolBackend(args.host, args.port))


if __name__ == "__main__":
    raise SystemExit(main())
