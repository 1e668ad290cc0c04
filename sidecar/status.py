"""``sidecar status``: the admin state view (``GET /admin/state``) as tables, with ``rich``.

    sidecar status [--target http://127.0.0.1:8080] [--watch [SECONDS]]
    sidecar admin close-circuit|lift-pause|reset-spend NAME [--target ...]

The operator token is read from the environment (``SIDECAR_ADMIN_TOKEN``), never from the
command line (where ``ps`` shows it). ``--watch`` redraws in place (``rich.live.Live``) until Ctrl-C.
"""

from __future__ import annotations

import os
import time
from typing import Any

import httpx
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

__all__ = ["TOKEN_ENV", "render", "run_action", "run_status"]

TOKEN_ENV = "SIDECAR_ADMIN_TOKEN"
PATH = "/admin/state"


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def render(doc: dict[str, Any]) -> Group:
    """The view's document as four tables."""
    models = Table(title="models", title_justify="left")
    for col in ("model", "throttle", "paced/s", "pause left s", "in flight", "queued", "last signal", "age s"):
        models.add_column(col)
    for m in doc.get("models", []):
        models.add_row(
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
            circuits.add_row(
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
        spend.add_row(w["workflow"], _num(w["spent_usd"]), _num(w["cap_usd"]))
    state = doc.get("state", {})
    backend = Table(title="state backend", title_justify="left")
    for col in ("backend", "reachable", "replicas"):
        backend.add_column(col)
    backend.add_row(str(state.get("backend", "?")), str(state.get("reachable", "?")), _num(state.get("replicas")))
    return Group(models, circuits, spend, backend)


def _fetch(client: httpx.Client, target: str) -> dict[str, Any]:
    token = os.environ.get(TOKEN_ENV, "")
    headers = {"authorization": f"Bearer {token}"} if token else {}
    answer = client.get(target.rstrip("/") + PATH, headers=headers)
    if answer.status_code != 200:
        try:
            message = answer.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = f"HTTP {answer.status_code}"
        raise RuntimeError(message)
    doc: dict[str, Any] = answer.json()
    return doc


def run_status(target: str, watch: float | None, console: Console | None = None) -> int:
    console = console or Console()
    with httpx.Client(timeout=5.0) as client:
        try:
            if watch is None:
                console.print(render(_fetch(client, target)))
                return 0
            with Live(render(_fetch(client, target)), console=console, auto_refresh=False) as live:
                while True:
                    time.sleep(watch)
                    live.update(render(_fetch(client, target)), refresh=True)
        except (RuntimeError, httpx.HTTPError) as exc:
            console.print(f"sidecar status: {exc}", style="red")
            return 1
        except KeyboardInterrupt:
            return 0


def run_action(target: str, action: str, name: str, console: Console | None = None) -> int:
    """``sidecar admin ACTION NAME``: one operator action (``POST /admin/actions/ACTION``)."""
    console = console or Console()
    token = os.environ.get(TOKEN_ENV, "")
    headers = {"authorization": f"Bearer {token}"} if token else {}
    try:
        with httpx.Client(timeout=5.0) as client:
            answer = client.post(f"{target.rstrip('/')}/admin/actions/{action}", json={"name": name}, headers=headers)
    except httpx.HTTPError as exc:
        console.print(f"sidecar admin: {exc}", style="red")
        return 1
    try:
        body: Any = answer.json()
    except ValueError:
        body = {}
    if answer.status_code != 200:
        message = body.get("error", {}).get("message") if isinstance(body, dict) else None
        console.print(f"sidecar admin: {message or f'HTTP {answer.status_code}'}", style="red")
        return 1
    console.print(f"{action} {name}: {', '.join(f'{k}={v}' for k, v in body.items() if k not in ('action', 'name'))}")
    return 0


RELOAD_TIMEOUT_S = 60.0
"""How long ``sidecar admin reload`` waits: a reload builds the next core (MCP servers opened) first."""


def run_reload(target: str, console: Console | None = None) -> int:
    """``sidecar admin reload``: the config file read again on every worker (``POST /admin/reload``);
    0 when applied, 1 when refused (check-config's error printed; the config before keeps serving)."""
    console = console or Console()
    token = os.environ.get(TOKEN_ENV, "")
    headers = {"authorization": f"Bearer {token}"} if token else {}
    try:
        with httpx.Client(timeout=RELOAD_TIMEOUT_S) as client:
            answer = client.post(f"{target.rstrip('/')}/admin/reload", headers=headers)
    except httpx.HTTPError as exc:
        console.print(f"sidecar admin: {exc}", style="red")
        return 1
    try:
        body: Any = answer.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict) or "applied" not in body:
        message = body.get("error", {}).get("message") if isinstance(body, dict) else None
        console.print(f"sidecar admin: {message or f'HTTP {answer.status_code}'}", style="red")
        return 1
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
