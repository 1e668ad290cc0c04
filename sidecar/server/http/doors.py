"""The doors of the HTTP port, built from the same core services as the gRPC port's servicer.

    door              path                    config          serves
    MCP front         /mcp                    http.mcp        the configured tools as an MCP server (mcp_front.py)
    the model fronts  each format's           http.openai,    ModelService.call / .stream, through each registered
                      ``front.path``          http.anthropic  format whose ``door`` names the switch (``openai``:
                                                              formats/openai_chat, /v1/chat/completions, and
                                                              formats/openai_responses, /v1/responses;
                                                              ``anthropic``: formats/anthropic_messages, /v1/messages)
    the model list    /v1/models[/{id}]       either of them  the catalog and routes (models_front.py)
    the admin view    /admin/state            server.admin    the live policy state, the actions, POST /admin/reload
                                                              (admin_front.py)

The model fronts share one exchange (``fronts.py``: the body, the envelope's headers, admission,
the SERVER span, the call, the failure table of ``failures.py``); each is one format's front half
(``providers.formats``), which reads the request and renders the answers.

A new door is one more entry of ``build_doors``: its routes and lifespan (``hosting.Door``), built
from ``DoorParts``, calling ``ModelService`` / ``ToolService`` of ``live.core`` (read once per call:
a reload swaps it) like every other door; a new model
front is a registered format whose ``door`` names one of the model door's switches (``model_door`` builds
its routes from the registry).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.routing import BaseRoute, Route

from sidecar.config import Config
from sidecar.core.clock import Clock
from sidecar.core.taxonomy import SidecarFailure
from sidecar.providers.formats.protocol import Front
from sidecar.providers.formats.registry import FORMATS
from sidecar.server.admin import StateView
from sidecar.server.admission import Admission
from sidecar.server.auth import Tokens
from sidecar.server.callers import Callers
from sidecar.server.http.admin_front import admin_door
from sidecar.server.http.failures import answer_of, error_of
from sidecar.server.http.fronts import ModelEndpoint
from sidecar.server.http.hosting import Door
from sidecar.server.http.models_front import models_routes
from sidecar.server.http.resends import Resends
from sidecar.server.live import Live
from sidecar.server.reload import Reload
from sidecar.telemetry.metrics import Metrics

__all__ = ["DoorParts", "build_doors"]


@dataclass(frozen=True, slots=True)
class DoorParts:
    """What a door is built from: the sidecar's one core, shared with the gRPC port."""

    config: Config
    """The config the port was started with (which doors, the body limit): a reload keeps these."""
    clock: Clock
    live: Live
    """The services each call runs on (``live.core``, read once per call)."""
    admission: Admission
    """``server.max_in_flight``: one limit for the calls of every door."""
    admin_view: StateView | None = None
    """The admin state view and its actions (``server.admin.StateView``); None: no admin door."""
    reload: Reload | None = None
    """``POST /admin/reload``: the config file again, on every worker (``server.reload``)."""
    metrics: Metrics | None = None
    """Where the doors count what they do of their own (``sidecar.http.replayed``); None: not counted."""
    callers: Callers = field(default_factory=Callers)
    """The callers of ``server.auth.tokens`` and their own limits (``server.callers``), shared with the gRPC port."""


def build_doors(parts: DoorParts) -> list[Door]:
    """The doors ``parts.config.http`` asks for (nothing when the HTTP port is off)."""
    http = parts.config.http
    if http is None:
        return []
    doors: list[Door] = []
    if http.mcp:
        from sidecar.server.http.mcp_front import mcp_door  # the MCP SDK's server: loaded only for this door

        doors.append(mcp_door(parts.live, parts.admission, parts.config.server.max_message_bytes, parts.callers))
    if http.openai or http.anthropic:
        doors.append(model_door(parts))
    if parts.admin_view is not None:
        admin = parts.config.server.admin
        tokens = Tokens(t.get_secret_value() for t in admin.tokens) if admin is not None and admin.tokens else None
        loopback = admin is not None and admin.read_on_loopback
        doors.append(admin_door(tokens, parts.admin_view, parts.reload, read_on_loopback=loopback))
    return doors


def model_door(parts: DoorParts) -> Door:
    """The fronts of the registered formats whose ``door`` the config turns on (``http.openai``: Chat Completions
    and Responses; ``http.anthropic``: Messages) and the model list, as one door."""
    http = parts.config.http
    assert http is not None
    limit = parts.config.server.max_message_bytes

    fronts: dict[str, Front] = {}
    counted = parts.metrics.replayed if parts.metrics is not None else None
    resends = Resends(parts.clock, counted=counted)  # one memo for every model front: its key holds the door

    def endpoint(front: Front) -> Route:
        app = ModelEndpoint(front, parts.live, parts.admission, parts.clock, limit, resends, parts.callers)
        fronts[front.path] = front
        return Route(front.path, endpoint=app, methods=["POST"])

    switches = {"openai": http.openai, "anthropic": http.anthropic}  # a format's ``door``: the switch turning it on
    routes: list[BaseRoute] = []
    for name, fmt in FORMATS.items():
        if fmt.door is not None and fmt.door not in switches:
            raise ValueError(f"wire format {name}: its door {fmt.door!r} is none of {sorted(switches)}")
        if fmt.door is not None and switches[fmt.door]:
            routes.append(endpoint(fmt.front))
    live = parts.live
    routes.extend(models_routes(lambda: live.core.config, anthropic_shape=http.anthropic))

    def fault(path: str, failure: SidecarFailure) -> tuple[int, dict[str, Any]] | None:
        front = fronts.get(path)  # the model list's paths: the plain (OpenAI) shape
        return None if front is None else error_of(front, failure, answer_of(failure))

    return Door("models", routes, fault=fault)
