"""``sidecar status``: the admin state view (``GET /admin/state``) as tables, with ``rich``.

    sidecar status [--target 127.0.0.1:50051] [--watch [SECONDS]]
    sidecar admin close-circuit|lift-pause|reset-spend NAME [--target ...]
    sidecar admin reload [--target 127.0.0.1:50051] [--force]

A target with a scheme (``http://``, ``https://``) is the HTTP port; ``host:port`` (or ``unix:...``)
is the gRPC port, where the same view and actions are ``sidecar.v1.Admin``.

TLS (a sidecar with ``server.tls``, which both ports share): ``--tls`` for a gRPC target, or an
``https://`` URL for the HTTP port; ``--ca FILE`` trusts that CA instead of the system's roots (and
implies ``--tls``); ``--cert FILE --key FILE`` present a client certificate (mTLS: ``server.tls.client_ca``);
``--server-name NAME`` checks that name in the sidecar's certificate when the target's differs.
The operator token is read from the environment (``SIDECAR_ADMIN_TOKEN``), never from the
command line (where ``ps`` shows it). ``status`` reads the gRPC port by default, the one port every
sidecar serves: against ``make run`` (the embedded default, ``server.admin.read_on_loopback``) it
needs no flag and no token. ``--watch`` redraws in place (``rich.live.Live``) until Ctrl-C.
"""

from __future__ import annotations

import os
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Any

import grpc
import httpx
from google.protobuf.message import Message
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text
from sidecar_contract.v1 import admin_pb2 as apb
from sidecar_contract.v1 import admin_pb2_grpc as apb_grpc
from sidecar_contract.v1 import sidecar_pb2 as pb

__all__ = [
    "TOKEN_ENV",
    "Transport",
    "TransportError",
    "document",
    "is_http",
    "render",
    "run_action",
    "run_reload",
    "run_status",
]

TOKEN_ENV = "SIDECAR_ADMIN_TOKEN"
PATH = "/admin/state"
TIMEOUT_S = 5.0


def is_http(target: str) -> bool:
    """Whether ``target`` is the HTTP port (a URL) rather than the gRPC port (``host:port``)."""
    return target.startswith(("http://", "https://"))


class TransportError(ValueError):
    """The TLS flags cannot be used as given (a file unreadable, a key without its certificate, TLS to http://)."""


@dataclass(frozen=True, slots=True)
class Transport:
    """How the CLI reaches the admin door: plaintext (the default), or TLS / mTLS from PEM files."""

    tls: bool = False
    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    server_name: str | None = None

    @property
    def secure(self) -> bool:
        return self.tls or any(v is not None for v in (self.ca, self.cert, self.key, self.server_name))

    def _check(self) -> None:
        if (self.cert is None) != (self.key is None):
            raise TransportError("--cert and --key go together: a client certificate needs its key")

    def channel(self, target: str) -> grpc.Channel:
        """A gRPC channel to ``target``: plaintext, or TLS with this CA and client certificate."""
        if not self.secure:
            return grpc.insecure_channel(target)
        self._check()
        creds = grpc.ssl_channel_credentials(
            root_certificates=_read("--ca", self.ca),
            private_key=_read("--key", self.key),
            certificate_chain=_read("--cert", self.cert),
        )
        options = [("grpc.ssl_target_name_override", self.server_name)] if self.server_name else []
        return grpc.secure_channel(target, creds, options=options)

    def client(self, target: str, timeout: float) -> httpx.Client:
        """An HTTP client for ``target``: an ``https://`` one verifies the sidecar against ``--ca`` (else the
        system's roots) and presents ``--cert``/``--key``."""
        if not target.startswith("https://"):
            if self.secure:
                raise TransportError(f"{target} is plaintext HTTP: give an https:// URL for TLS")
            return httpx.Client(timeout=timeout)
        self._check()
        try:
            context = ssl.create_default_context(cafile=self.ca)
            if self.cert is not None:
                context.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as exc:
            raise TransportError(f"the TLS files cannot be used: {exc}") from None
        return httpx.Client(timeout=timeout, verify=context)

    def extensions(self) -> dict[str, Any]:
        """Per request: the name to check in the certificate (``--server-name``), for httpx."""
        return {"sni_hostname": self.server_name} if self.server_name else {}


PLAIN = Transport()


def _read(flag: str, path: str | None) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise TransportError(f"{flag} {path}: cannot read: {exc.strerror or exc}") from None


def _metadata() -> tuple[tuple[str, str | bytes], ...]:
    token = os.environ.get(TOKEN_ENV, "")
    return (("authorization", f"Bearer {token}"),) if token else ()


def _optional(msg: Message, name: str) -> Any:
    return getattr(msg, name) if msg.HasField(name) else None


def _guard(g: apb.GuardState) -> dict[str, Any]:
    return {
        "name": g.name,
        "circuit": pb.CircuitState.Name(g.circuit).removeprefix("CIRCUIT_STATE_").lower(),
        "throttle": g.throttle,
        "opened_by": g.opened_by,
        "opened_at": g.opened_at.ToDatetime(UTC).isoformat() if g.HasField("opened_at") else None,
        "cooldown_s": g.cooldown_s,
        "cooldown_left_s": g.cooldown_left_s,
        "probe_holder": g.probe_holder,
    }


def document(state: apb.GetStateResponse) -> dict[str, Any]:
    """GetState's answer as the document ``GET /admin/state`` answers (what ``render`` draws); ``callers`` only
    when it has some (``server.auth`` set), as the HTTP port leaves the key out without."""
    doc: dict[str, Any] = {
        "models": [
            {
                "model": m.model,
                "throttle": m.throttle,
                "paced_per_s": _optional(m, "paced_per_s"),
                "pause_left_s": m.pause_left_s,
                "in_flight": m.in_flight,
                "queued": m.queued,
                "last_signal": m.last_signal,
                "last_signal_age_s": _optional(m, "last_signal_age_s"),
            }
            for m in state.models
        ],
        "services": [_guard(g) for g in state.services],
        "deployments": [_guard(g) for g in state.deployments],
        "workflows": [
            {"workflow": w.workflow, "spent_usd": w.spent_usd, "cap_usd": _optional(w, "cap_usd")}
            for w in state.workflows
        ],
        "state": _backend(state.state),
    }
    if state.callers:
        doc["callers"] = [_caller(c) for c in state.callers]
    return doc


def _caller(c: apb.CallerState) -> dict[str, Any]:
    return {
        "name": c.name,
        "requests_per_second": _optional(c, "requests_per_second"),
        "tokens_per_minute": _optional(c, "tokens_per_minute"),
        "admitted": c.admitted,
        "refused": c.refused,
        "tokens_charged": c.tokens_charged,
    }


def _backend(b: apb.BackendState) -> dict[str, Any]:
    """The backend section as ``GET /admin/state`` has it: a shared backend (``pending_actions`` set) has
    ``staleness_s`` (None: never reached) and ``pending_actions``, and ``last_error`` while unreachable."""
    doc: dict[str, Any] = {"backend": b.backend, "reachable": b.reachable, "replicas": b.replicas}
    if b.HasField("pending_actions"):
        doc["staleness_s"] = _optional(b, "staleness_s")
        doc["pending_actions"] = b.pending_actions
    if b.HasField("last_error"):
        doc["last_error"] = b.last_error
    return doc


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _add(table: Table, *cells: str) -> None:
    """A row of plain text: a quoted upstream answer, a Redis error or a reported name may hold
    ``[...]``, which rich would otherwise read as markup (and raise on, or restyle)."""
    table.add_row(*(Text(cell) for cell in cells))


def render(doc: dict[str, Any]) -> Group:
    """The view's document as four tables, and a fifth of the callers when the document has them
    (``server.auth`` set)."""
    models = Table(title="models", title_justify="left")
    for col in ("model", "throttle", "paced/s", "pause left s", "in flight", "queued", "last signal", "age s"):
        models.add_column(col)
    for m in doc.get("models", []):
        _add(
            models,
            m["model"],
            _num(m["throttle"]),
            _num(m["paced_per_s"]),
            _num(m["pause_left_s"]),
            _num(m["in_flight"]),
            _num(m["queued"]),
            m["last_signal"] or "-",
            _num(m["last_signal_age_s"]),
        )
    circuits = Table(title="circuits", title_justify="left")
    for col in ("kind", "name", "circuit", "throttle", "cooldown left s", "probe", "opened by"):
        circuits.add_column(col)
    for kind in ("services", "deployments"):
        for g in doc.get(kind, []):
            _add(
                circuits,
                kind[:-1],
                g["name"],
                g["circuit"],
                _num(g["throttle"]),
                _num(g["cooldown_left_s"]),
                g["probe_holder"] or "-",
                g["opened_by"] or "-",
            )
    spend = Table(title="workflows", title_justify="left")
    for col in ("workflow", "spent $", "cap $"):
        spend.add_column(col)
    for w in doc.get("workflows", []):
        _add(spend, w["workflow"], _num(w["spent_usd"]), _num(w["cap_usd"]))
    state = doc.get("state", {})
    backend = Table(title="state backend", title_justify="left")
    for col in ("backend", "reachable", "replicas", "staleness s", "actions queued", "last error"):
        backend.add_column(col)
    _add(
        backend,
        str(state.get("backend", "?")),
        str(state.get("reachable", "?")),
        _num(state.get("replicas")),
        _num(state.get("staleness_s")),
        _num(state.get("pending_actions")),
        str(state.get("last_error") or "-"),
    )
    tables: list[Table] = [models, circuits, spend, backend]
    if doc.get("callers"):
        callers = Table(title="callers", title_justify="left")
        for col in ("caller", "requests/s", "tokens/min", "admitted", "refused", "tokens charged"):
            callers.add_column(col)
        for c in doc["callers"]:
            _add(
                callers,
                c["name"],
                _num(c["requests_per_second"]),
                _num(c["tokens_per_minute"]),
                _num(c["admitted"]),
                _num(c["refused"]),
                _num(c["tokens_charged"]),
            )
        tables.insert(3, callers)
    return Group(*tables)


def _fetch(client: httpx.Client, target: str, transport: Transport) -> dict[str, Any]:
    token = os.environ.get(TOKEN_ENV, "")
    headers = {"authorization": f"Bearer {token}"} if token else {}
    answer = client.get(target.rstrip("/") + PATH, headers=headers, extensions=transport.extensions())
    if answer.status_code != 200:
        try:
            message = answer.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = f"HTTP {answer.status_code}"
        raise RuntimeError(message)
    doc: dict[str, Any] = answer.json()
    return doc


def _fetcher(target: str, transport: Transport) -> tuple[Callable[[], dict[str, Any]], Callable[[], None]]:
    """How to read the view at ``target`` (the HTTP port or the gRPC port), and how to close the connection."""
    if is_http(target):
        client = transport.client(target, TIMEOUT_S)
        return (lambda: _fetch(client, target, transport)), client.close
    channel = transport.channel(target)
    stub = apb_grpc.AdminStub(channel)

    def fetch() -> dict[str, Any]:
        try:
            state = stub.GetState(apb.GetStateRequest(), metadata=_metadata(), timeout=TIMEOUT_S)
        except grpc.RpcError as exc:
            raise RuntimeError(_rpc_message(exc)) from None
        return document(state)

    return fetch, channel.close


def _rpc_message(exc: grpc.RpcError) -> str:
    details = exc.details() if isinstance(exc, grpc.Call) else None
    code = exc.code() if isinstance(exc, grpc.Call) else None
    return str(details or code or exc)


def run_status(
    target: str, watch: float | None, console: Console | None = None, *, transport: Transport = PLAIN
) -> int:
    console = console or Console()
    try:
        fetch, close = _fetcher(target, transport)
    except TransportError as exc:
        console.print(f"sidecar status: {exc}", style="red", markup=False, soft_wrap=True)
        return 2
    try:
        if watch is None:
            console.print(render(fetch()))
            return 0
        with Live(render(fetch()), console=console, auto_refresh=False) as live:
            while True:
                time.sleep(watch)
                live.update(render(fetch()), refresh=True)
    except (RuntimeError, httpx.HTTPError) as exc:
        console.print(f"sidecar status: {exc}", style="red")
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        close()


def run_action(
    target: str, action: str, name: str, console: Console | None = None, *, transport: Transport = PLAIN
) -> int:
    """``sidecar admin ACTION NAME``: one operator action (``POST /admin/actions/ACTION``, or its Admin RPC)."""
    console = console or Console()
    try:
        if not is_http(target):
            return _grpc_action(target, action, name, console, transport)
        posted = _post(target, f"/admin/actions/{action}", {"name": name}, 5.0, console, transport)
    except TransportError as exc:
        console.print(f"sidecar admin: {exc}", style="red", markup=False, soft_wrap=True)
        return 2
    if posted is None:
        return 1
    answer, body = posted
    if answer.status_code != 200:
        message = body.get("error", {}).get("message") if isinstance(body, dict) else None
        console.print(f"sidecar admin: {message or f'HTTP {answer.status_code}'}", style="red")
        return 1
    shown = ", ".join(f"{k}={v}" for k, v in body.items() if k not in ("action", "name", "note"))
    console.print(f"{action} {name}: {shown}", markup=False, soft_wrap=True)
    if body.get("note"):
        console.print(f"  {body['note']}", markup=False, soft_wrap=True)
    return 0


def _grpc_action(target: str, action: str, name: str, console: Console, transport: Transport) -> int:
    with transport.channel(target) as channel:
        stub = apb_grpc.AdminStub(channel)
        try:
            reply: apb.CloseCircuitResponse | apb.LiftPauseResponse | apb.ResetSpendResponse
            if action == "close-circuit":
                reply = stub.CloseCircuit(apb.CloseCircuitRequest(name=name), **_call())
                answer = f"changed={reply.changed}"
            elif action == "lift-pause":
                reply = stub.LiftPause(apb.LiftPauseRequest(model=name), **_call())
                answer = f"changed={reply.changed}"
            else:
                reply = stub.ResetSpend(apb.ResetSpendRequest(workflow=name), **_call())
                answer = f"was_usd={reply.was_usd}"
        except grpc.RpcError as exc:
            console.print(f"sidecar admin: {_rpc_message(exc)}", style="red")
            return 1
    console.print(f"{action} {name}: {answer}, reach={reply.reach}", markup=False, soft_wrap=True)
    if reply.note:
        console.print(f"  {reply.note}", markup=False, soft_wrap=True)
    return 0


def _call() -> dict[str, Any]:
    return {"metadata": _metadata(), "timeout": TIMEOUT_S}


RELOAD_TIMEOUT_S = 60.0
"""How long ``sidecar admin reload`` waits: a reload builds the next core (MCP servers opened) first."""


def run_reload(
    target: str, console: Console | None = None, *, transport: Transport = PLAIN, force: bool = False
) -> int:
    """``sidecar admin reload``: ``sidecar.v1.Admin/Reload`` on the gRPC port (``POST /admin/reload`` for an
    ``http://`` target), every worker reloading; 0 when applied, 1 when refused (the config before keeps serving).
    ``force`` (``--force``): applied even when the file keeps none of the models and tools served."""
    console = console or Console()
    try:
        if is_http(target):
            return _http_reload(target, console, transport, force)
        channel = transport.channel(target)
    except TransportError as exc:
        console.print(f"sidecar admin reload: {exc}", style="red", markup=False, soft_wrap=True)
        return 2
    with channel:
        try:
            # a reload validates a whole file (and waits for every worker): more than one state read's time
            outcome = apb_grpc.AdminStub(channel).Reload(
                apb.ReloadRequest(force=force), metadata=_metadata(), timeout=RELOAD_TIMEOUT_S
            )
        except grpc.RpcError as exc:
            console.print(f"sidecar admin reload: {_rpc_message(exc)}", style="red")
            return 1
    for w in outcome.workers:
        _worker_line(console, w.index, w.pid, w.applied, w.error)
    if not outcome.applied:
        console.print(f"sidecar admin reload: refused: {outcome.error}", style="red", markup=False)
        return 1
    console.print("reload applied", markup=False)
    if outcome.restart_needed:
        console.print(f"  not applied, needs a restart: {', '.join(outcome.restart_needed)}", markup=False)
    if outcome.note:
        console.print(f"  {outcome.note}", markup=False)
    return 0


def _worker_line(console: Console, index: Any, pid: Any, applied: bool, error: str) -> None:
    """One worker's outcome of a reload (``--workers N``): applied, or why not (refused, silent)."""
    console.print(f"worker {index} (pid {pid}): {'applied' if applied else 'not applied: ' + error}", markup=False)


def _http_reload(target: str, console: Console, transport: Transport, force: bool) -> int:
    """``POST /admin/reload`` on the HTTP port (``?force=true`` when forced)."""
    path = "/admin/reload?force=true" if force else "/admin/reload"
    posted = _post(target, path, None, RELOAD_TIMEOUT_S, console, transport)
    if posted is None:
        return 1
    answer, body = posted
    if not isinstance(body, dict) or "applied" not in body:
        message = body.get("error", {}).get("message") if isinstance(body, dict) else None
        console.print(f"sidecar admin: {message or f'HTTP {answer.status_code}'}", style="red")
        return 1
    for w in body.get("workers") or ():
        _worker_line(console, w.get("worker"), w.get("pid"), bool(w.get("applied")), w.get("error") or "")
    if not body["applied"]:
        console.print(
            f"reload refused, the config before keeps serving:\n{body.get('error')}", style="red", markup=False
        )
        return 1
    console.print("reload applied", markup=False)
    if body.get("restart_needed"):
        console.print(f"  not applied, needs a restart: {', '.join(body['restart_needed'])}", markup=False)
    if body.get("note"):
        console.print(f"  {body['note']}", markup=False)
    return 0


def _post(
    target: str, path: str, payload: dict[str, Any] | None, timeout: float, console: Console, transport: Transport
) -> tuple[httpx.Response, Any] | None:
    """``POST path`` on the HTTP admin door with ``$SIDECAR_ADMIN_TOKEN``: the answer and its JSON
    body ({} when it has none); None when the door could not be reached (said on ``console``)."""
    token = os.environ.get(TOKEN_ENV, "")
    headers = {"authorization": f"Bearer {token}"} if token else {}
    try:
        with transport.client(target, timeout) as client:
            answer = client.post(
                f"{target.rstrip('/')}{path}", json=payload, headers=headers, extensions=transport.extensions()
            )
    except httpx.HTTPError as exc:
        console.print(f"sidecar admin: {exc}", style="red")
        return None
    try:
        body: Any = answer.json()
    except ValueError:
        body = {}
    return answer, body
