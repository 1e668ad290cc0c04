"""The serving process: grpc.aio with health and reflection, graceful shutdown, embedded fakes.

``SidecarApp`` wires the core to the servicer from one ``Config``; ``serve`` runs it until
SIGTERM or SIGINT, then stops taking calls, lets in-flight ones finish within the grace period,
and returns (the process exits 0). The policy state (throttles, pauses, circuits, spend) is the
process's own, or shared through ``state.backend: redis`` (``sidecar.state.redis``, connected
before the port opens, closed after the last call). What a call passes through, outermost first::

    TLS / mTLS handshake          server.tls (security.server_credentials)
    the arrival stamp             where the overhead stopwatch begins (grpc.servicer.Arrival)
    bearer token                  server.auth (grpc.auth.BearerTokenInterceptor); health exempt
    the given interceptors        the server span (grpc.spans)
    decoding                      undecodable bytes -> INVALID_ARGUMENT, every service (grpc.handlers)
    the in-flight limit           CallModel, ExecuteTool: server.max_in_flight (admission.Admission)
    the servicer                  grpc.servicer; every answer masked on its way out (grpc.masking)

``sidecar.v1.Admin`` (grpc.admin: the state view, the operator actions, Reload) is served on the same
port, behind its own tokens (``server.admin``) rather than the callers', outside the in-flight limit.

With ``http`` set, the HTTP port (``server.http``: the MCP front) serves the same core on the same
event loop: started after the gRPC server, drained and stopped with it (one in-flight limit, one
grace period for both).
The MCP servers of ``kind: mcp`` tools are opened and listed before either port serves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import grpc
from grpc_health.v1 import health, health_pb2
from grpc_reflection.v1alpha import reflection, reflection_pb2
from pydantic import SecretStr
from sidecar_contract.v1 import admin_pb2
from sidecar_contract.v1 import sidecar_pb2 as pb

from sidecar.config import Config
from sidecar.core.circuit import CircuitState
from sidecar.core.clock import Clock, RealClock
from sidecar.core.fleet_view import FleetView
from sidecar.core.observer import Observer, StateBackendChanged
from sidecar.core.service_guards import ServiceGuards
from sidecar.core.state import DEPLOYMENT_NAMESPACE, MEMORY, StateBackend
from sidecar.providers.service import ModelService
from sidecar.server.admin import StateView
from sidecar.server.admission import Admission
from sidecar.server.auth import Tokens
from sidecar.server.callers import Callers
from sidecar.server.grpc.admin import ADMIN_SERVICE_NAME, AdminServicer
from sidecar.server.grpc.auth import BearerTokenInterceptor
from sidecar.server.grpc.connections import connection_options
from sidecar.server.grpc.handlers import InFlight, register_service, register_sidecar
from sidecar.server.grpc.masking import SecretMaskingInterceptor
from sidecar.server.grpc.servicer import Arrival, SidecarServicer
from sidecar.server.live import Core, Live, build_core
from sidecar.server.reload import Reload, Reloader, ReloadOutcome
from sidecar.server.security import server_credentials
from sidecar.telemetry import masking
from sidecar.telemetry.metrics import OTHER, Metrics
from sidecar.telemetry.observer import TelemetryObserver
from sidecar.tools.service import ToolService

if TYPE_CHECKING:
    from sidecar.server.http.hosting import HttpHosting

__all__ = ["SERVICE_NAME", "SidecarApp", "running", "start_embedded"]

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Sidecar"].full_name
_log = logging.getLogger("sidecar.server")
_CIRCUIT_VALUE = {CircuitState.CLOSED: 0, CircuitState.HALF_OPEN: 1, CircuitState.OPEN: 2}


CUT_SETTLE_S = 2.0
"""After the grace period, how long (real time) the calls cut have to send their UNAVAILABLE answer."""
PENDING_CALLS_LIMIT = 16384
"""Calls per method gRPC core may hold before the server picks them up (``grpc.server.max_pending_requests``,
soft and hard). Its defaults (1,000 / 3,000, with random drops between) answer a burst's calls
CANCELLED, unlogged, before our code sees them; above a burst, each call reaches the in-flight limit
and gets an answer. Past it core still drops (memory stays bounded: a pending call holds its request)."""


@dataclass
class SidecarApp:
    """Everything one sidecar process holds: core state, the gRPC server, embedded fakes."""

    config: Config
    clock: Clock = field(default_factory=RealClock)
    rng: random.Random = field(default_factory=random.Random)
    listen: str | None = None
    """Overrides ``config.server.listen`` (``127.0.0.1:0`` picks a free port)."""
    interceptors: list[Any] = field(default_factory=list)
    reuse_port: bool = False
    """Bind with SO_REUSEPORT: one of several worker processes serving the same host:port."""

    server: grpc.aio.Server | None = None
    address: str = ""
    port: int = 0
    config_path: str | None = None
    """The file a reload reads again (None: the embedded default, nothing to reload)."""
    adjust: Callable[[Config], Config] | None = None
    """What the command line overrides in a reloaded config (``serve --http``)."""
    worker: tuple[int, int] | None = None
    """(index, supervisor pid) of a worker process: an admin reload reloads the whole fleet."""

    servicer: SidecarServicer | None = None
    live: Live | None = None
    """The core each call runs on (a reload swaps it)."""
    reloader: Reloader | None = None
    metrics: Metrics | None = None
    admission: Admission | None = None
    callers: Callers = field(default_factory=Callers)
    """The callers of ``server.auth.tokens``, their limits and use (``server.callers``), once started."""
    in_flight: InFlight = field(default_factory=InFlight)
    """The gRPC calls being handled: cut at the end of a shutdown's grace period."""
    embedded: dict[str, str] = field(default_factory=dict)
    """The embedded fakes' URLs; a name given here is not started (a worker uses its supervisor's)."""
    state: StateBackend = MEMORY
    state_view: StateView | None = None
    """The admin state view (``GET /admin/state``, ``sidecar.v1.Admin``), once started."""
    admin_reload: Reload | None = None
    """What ``sidecar.v1.Admin/Reload`` runs instead of ``reload_fleet`` (a test's scripted outcomes)."""
    http: HttpHosting | None = None
    """The HTTP port, when ``config.http`` is set (its ``address`` and ``port`` once started)."""
    _fakes: list[Any] = field(default_factory=list)
    _closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    _health: health.aio.HealthServicer | None = None
    _fleet: FleetView | None = None
    _masking: SecretMaskingInterceptor | None = None
    _watching: asyncio.Event | None = None

    @property
    def models(self) -> ModelService | None:
        return self.live.core.models if self.live is not None else None

    @property
    def tools(self) -> ToolService | None:
        return self.live.core.tools if self.live is not None else None

    @property
    def guards(self) -> ServiceGuards | None:
        return self.live.core.guards if self.live is not None else None

    async def next_core(self, config: Config, old: Core) -> Core:
        """A reload's core for ``config``, from ``old`` (the fleet view and masking follow it)."""
        assert self.metrics is not None
        secrets = tuple(sorted({*old.config.secrets, *config.secrets}, key=lambda s: (-len(s), s)))
        masking.register(secrets)
        observer = TelemetryObserver(
            self.clock, self.metrics, record_content=self.config.telemetry.record_content, secrets=secrets
        )
        core = await build_core(
            config,
            clock=self.clock,
            observer=observer,
            state=self.state,
            embedded=self.embedded,
            rng=self.rng,
            carry=old,
        )
        if self._fleet is not None:
            models = core.models
            self._fleet.rebind({m: models.throttle(m) for m in config.models}, core.guards, models.routes.guards)
        if self._masking is not None:
            self._masking.update(secrets)
        return core

    async def reload(self, trigger: str = "admin") -> ReloadOutcome:
        """This process's config file again (``server.reload``): applied, or refused and the old one serving."""
        if self.reloader is None:
            return ReloadOutcome(False, "the sidecar has not started")
        return await self.reloader.reload(trigger)

    async def reload_fleet(self, trigger: str = "admin", *, force: bool = False) -> ReloadOutcome:
        """An operator's reload: this process, or under a supervisor every worker (``Reloader.reload_fleet``);
        ``force``: applied even when the file keeps none of the models and tools served."""
        if self.reloader is None:
            return ReloadOutcome(False, "the sidecar has not started")
        return await self.reloader.reload_fleet(trigger, force=force)

    def reload_on_signals(self, *, pending: bool = False) -> None:
        """SIGHUP reloads (``server.watch_config``: the file's changes too), as a task of the loop;
        ``pending``: one came while starting, reload now."""
        loop = asyncio.get_running_loop()
        tasks: set[asyncio.Task[Any]] = set()

        def spawn(work: Coroutine[Any, Any, Any]) -> None:
            task = loop.create_task(work)
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        loop.add_signal_handler(signal.SIGHUP, lambda: spawn(self.reload("SIGHUP")))
        if pending:
            spawn(self.reload("SIGHUP"))
        if self.reloader is not None and self.worker is not None:
            spawn(self.reloader.serve_supervisor())  # the supervisor's rounds: every worker's reload
        if self.config.server.watch_config and self.reloader is not None and self.config_path is not None:
            self._watching = asyncio.Event()
            spawn(self.reloader.watch(self._watching))

    async def start(self) -> None:
        """Start serving; ``ConfigError`` when the TLS files are unusable, ``OSError`` when it cannot listen."""
        cfg = self.config
        credentials = server_credentials(cfg.server.tls) if cfg.server.tls is not None else None
        await self._start_fakes()
        masking.register(cfg.secrets)  # spans, metric labels and log lines of this process mask them
        self.metrics = metrics = Metrics()
        observer = TelemetryObserver(
            self.clock, metrics, record_content=cfg.telemetry.record_content, secrets=cfg.secrets
        )
        self.state = state = _state_backend(cfg, observer, self.clock)
        core = await build_core(
            cfg, clock=self.clock, observer=observer, state=state, embedded=self.embedded, rng=self.rng
        )
        self.live = live = Live(core)
        models = core.models
        throttles = {m: models.throttle(m) for m in cfg.models}
        self._fleet = view = FleetView(throttles, core.guards, core.ledger, deployments=models.routes.guards)
        self.callers = callers = Callers(cfg.server.auth.tokens if cfg.server.auth else (), metrics)
        self.state_view = StateView(live, state, view, dict(self.embedded), callers)
        self._closers.extend(await _share(state, view, observer))
        metrics.observe_gauges(
            lambda: [(m, live.core.models.throttle(m).throttle) for m in live.core.config.models],
            lambda: _service_gauges(live.core),
        )
        self.servicer = SidecarServicer(live, self.clock, callers)
        self.reloader = Reloader(
            self.config_path,
            live,
            self.next_core,
            metrics,
            adjust=self.adjust,
            drain_s=cfg.server.grace_period_s,
            worker=self.worker,
            wait_s=cfg.server.reload_wait_s,
        )
        interceptors: list[Any] = [Arrival()]  # first: the overhead stopwatch's start (grpc.servicer)
        self._masking = SecretMaskingInterceptor(cfg.secrets)
        if cfg.server.auth is not None:
            interceptors.append(BearerTokenInterceptor(cfg.server.auth.values()))
        limit = cfg.server.max_message_bytes
        self.server = grpc.aio.server(
            # the arrival stamp, then the bearer check (no span, no slot for a refused caller); masking innermost
            interceptors=[*interceptors, *self.interceptors, self._masking],
            options=[
                ("grpc.max_receive_message_length", limit),
                ("grpc.max_send_message_length", limit),
                ("grpc.so_reuseport", 1 if self.reuse_port else 0),
                ("grpc.server.max_pending_requests", PENDING_CALLS_LIMIT),
                ("grpc.server.max_pending_requests_hard_limit", PENDING_CALLS_LIMIT),
                *connection_options(cfg.server.connections),  # handshake, idle, age, keepalive, how many
            ],
        )
        self.admission = admission = Admission(cfg.server.max_in_flight, self.clock)
        if self.metrics is not None:
            self.metrics.admission = lambda: (admission.in_flight, admission.shed)
        register_sidecar(self.server, self.servicer, self.admission.wrap, self.admission.wrap_stream, self.in_flight)
        self._health = health.aio.HealthServicer()
        register_service(self.server, health_pb2.DESCRIPTOR.services_by_name["Health"], self._health)
        assert self.state_view is not None
        given = cfg.server.admin
        admin_tokens = Tokens(t.get_secret_value() for t in given.tokens) if given and given.tokens else None
        # off (PERMISSION_DENIED) without admin tokens, but for GetState from loopback with read_on_loopback
        loopback = given is not None and given.read_on_loopback
        admin = AdminServicer(
            self.state_view, admin_tokens, self.admin_reload or self.reload_fleet, read_on_loopback=loopback
        )
        register_service(self.server, admin_pb2.DESCRIPTOR.services_by_name["Admin"], admin)
        if cfg.server.reflection:
            names = (SERVICE_NAME, ADMIN_SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME)
            described = reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"]
            register_service(self.server, described, reflection.aio.ReflectionServicer(names))
        listen = self.listen or cfg.server.listen
        try:
            if credentials is None:
                bound = self.server.add_insecure_port(listen)
            else:
                bound = self.server.add_secure_port(listen, credentials)
        except RuntimeError:  # grpc refuses an address it cannot bind (in use, no such directory)
            bound = 0
        if bound == 0:
            raise OSError(f"cannot listen on {listen}: the address is in use or not available")
        self.port = bound
        self.address = listen if listen.startswith("unix:") else f"{listen.rsplit(':', 1)[0]}:{bound}"
        await self.server.start()
        await self._start_http()
        for name in ("", SERVICE_NAME):
            await self._health.set(name, health_pb2.HealthCheckResponse.SERVING)

    async def _start_http(self) -> None:
        """The HTTP port and its doors, when ``config.http`` asks for it (uvicorn, Starlette and the fronts
        are imported only then)."""
        cfg = self.config
        if cfg.http is None:
            return
        from sidecar.server.http.doors import DoorParts, build_doors
        from sidecar.server.http.hosting import HttpHosting

        assert self.live is not None
        assert self.admission is not None
        parts = DoorParts(
            cfg,
            self.clock,
            self.live,
            self.admission,
            self.state_view,
            self.reload_fleet,
            metrics=self.metrics,
            callers=self.callers,
        )
        doors = build_doors(parts)
        closed = self.metrics.connection_closed if self.metrics is not None else None
        self.http = HttpHosting(
            cfg.http.listen, cfg.server, doors, reuse_port=self.reuse_port, limits=cfg.http.connections, closed=closed
        )
        await self.http.start()

    async def _start_fakes(self) -> None:
        wanted = self.config.embedded - set(self.embedded)
        if wanted:
            fakes, urls = await start_embedded(wanted)
            self._fakes.extend(fakes)
            self.embedded.update(urls)

    async def stop(self, grace: float | None = None) -> None:
        """Stop taking calls; in-flight calls get ``grace`` seconds to finish.

        Draining, health answers NOT_SERVING and new calls are refused (UNAVAILABLE) while the
        calls in flight finish; then the server stops with what is left of the grace period.
        """
        grace = self.config.server.grace_period_s if grace is None else grace
        if self._watching is not None:
            self._watching.set()
        if self._health is not None:
            await self._health.enter_graceful_shutdown()
        if self.http is not None:
            self.http.draining = True  # GET /healthz: 503 NOT_SERVING, as the gRPC health says
        if self.admission is not None and grace > 0:
            grace = await self._drain(self.admission, grace)  # the calls of both ports: one admission
        if len(self.in_flight):  # past the grace period: each call answers UNAVAILABLE "shutting down"
            cut = self.in_flight.cut()
            _log.warning(
                "the grace period (server.grace_period_s) ended with %d gRPC calls in flight: stopped, "
                "each answered UNAVAILABLE (the sidecar is shutting down)",
                cut,
                extra={"calls_cut": cut},
            )
            await self.in_flight.settled(CUT_SETTLE_S)
        stopping = [self.server.stop(grace)] if self.server is not None else []
        if self.http is not None:
            stopping.append(self.http.stop(grace))
        await asyncio.gather(*stopping)  # both ports at once, with what is left of the grace period
        if self.admission is not None:
            self.admission.close()
        if self.metrics is not None:
            self.metrics.close()
        if self.reloader is not None:
            await self.reloader.aclose()  # the configs before: closed, their calls done or cut
        if self.live is not None:
            self.live.core.close_logs()
            await self.live.core.aclose()
        for close in self._closers:  # the redis backend: what is queued is sent, then it disconnects
            await close()
        self._closers.clear()
        for fake in reversed(self._fakes):
            await fake.stop()
        self._fakes.clear()

    @staticmethod
    async def _drain(admission: Admission, grace: float) -> float:
        """Refuse new calls and wait (real time: the process is leaving) until none is in flight; the grace left."""
        loop = asyncio.get_running_loop()
        end = loop.time() + grace
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(admission.drain(), grace)
        return max(end - loop.time(), 0.0)

    def stop_on_signals(self) -> asyncio.Future[str]:
        """A future set by the first SIGTERM or SIGINT; later ones are ignored while shutting down."""
        loop = asyncio.get_running_loop()
        stop: asyncio.Future[str] = loop.create_future()

        def received(name: str) -> None:
            if not stop.done():
                stop.set_result(name)

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, received, sig.name)
        return stop


async def start_embedded(wanted: set[str]) -> tuple[list[Any], dict[str, str]]:
    """Start the bundled fakes named in ``wanted`` (``provider``, ``tools``), each on a free loopback port;
    the started fakes and their URLs.

    No well-known port: a second sidecar (another ``make run``, a CI job) would find it taken and a
    client scripting it there would script the first sidecar's provider. Who needs a URL reads it from
    the banner or from the admin view (``StateView.told``: ``sidecar demo`` does), never from an agent's door.
    """
    from sidecar.fakes import FakeProvider, FakeToolBackend

    fakes: list[Any] = []
    urls: dict[str, str] = {}
    for name, cls in (("provider", FakeProvider), ("tools", FakeToolBackend)):
        if name not in wanted:
            continue
        fake = cls(port=0)
        await fake.start()
        fakes.append(fake)
        urls[name] = fake.url
    return fakes, urls


def _service_gauges(core: Core) -> list[tuple[str, float, int]]:
    """Each service's throttle and circuit state, for the gauges: the services the config names or the
    sidecar calls by name, and each route deployment (named as in the shared state). The services known
    only from ClassifyFailure reports (up to ``MAX_REPORTED``, named by callers) are one ``_OTHER``
    series, the worst throttle and circuit among them: a label value is never a caller's free text.
    """
    out: list[tuple[str, float, int]] = []
    other: tuple[float, int] | None = None
    for g in core.guards.all():
        if core.guards.is_own(g.name):
            out.append((g.name, g.throttle, _CIRCUIT_VALUE[g.state]))
        else:
            mine = (g.throttle, _CIRCUIT_VALUE[g.state])
            other = mine if other is None else (max(other[0], mine[0]), max(other[1], mine[1]))
    if other is not None:
        out.append((OTHER, *other))
    out.extend(
        (DEPLOYMENT_NAMESPACE + g.name, g.throttle, _CIRCUIT_VALUE[g.state]) for g in core.models.routes.guards.all()
    )
    return out


def _state_backend(cfg: Config, observer: Observer, clock: Clock) -> StateBackend:
    """The configured state backend (``state.backend``): this process's own, or a Redis shared by the fleet."""
    state = cfg.state
    if state.backend == "memory" or (state.url is None and state.sentinel is None and not state.nodes):
        return MEMORY
    from sidecar.state.redis import RedisState
    from sidecar.state.redis.dial import Dial, SentinelNodes, Tls

    def plain(secret: SecretStr | None) -> str | None:
        return secret.get_secret_value() if secret is not None else None

    s = state.sentinel
    nodes = None
    if s is not None:
        hosts = tuple((h.strip("[]"), int(p)) for h, _, p in (n.rpartition(":") for n in s.nodes))
        nodes = SentinelNodes(hosts, s.service, s.db, plain(s.username), plain(s.password))
    tls = Tls(state.tls.ca_file, state.tls.cert_file, state.tls.key_file) if state.tls is not None else None
    cluster = tuple(state.nodes) if state.mode == "cluster" else None
    dial = Dial(state.url, nodes, plain(state.username), plain(state.password), tls, cluster)
    return RedisState(
        dial,
        state.prefix,
        state.timeout_ms,
        observer=observer,
        clock=clock,
        shutdown_flush_s=state.shutdown_flush_s,
    )


async def _share(state: StateBackend, view: FleetView, observer: Observer) -> list[Callable[[], Awaitable[None]]]:
    """Connect a shared backend to this replica's view (an unreachable Redis starts an outage, not a
    failure); what closes it."""
    if not state.shared:
        return []
    from sidecar.state.redis import BACKEND, RedisState

    assert isinstance(state, RedisState)
    await state.start(view)
    if state.available:
        observer.event(StateBackendChanged(BACKEND, True, "connected"))
    return [state.close]


@contextlib.asynccontextmanager
async def running(config: Config, **kwargs: Any) -> AsyncIterator[SidecarApp]:
    """A started app for tests: ``async with running(cfg, listen="127.0.0.1:0", clock=...) as app``."""
    app = SidecarApp(config, **kwargs)
    try:
        await app.start()
    except BaseException:  # what did start (the fakes, MCP sessions, a port) is stopped again
        await app.stop(grace=0)
        raise
    try:
        yield app
    finally:
        await app.stop(grace=0)
