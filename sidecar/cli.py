"""The ``sidecar`` command: serve, check-config, version, fake-provider, tool-backend, demo, status."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from sidecar import __version__

if TYPE_CHECKING:
    from sidecar.config import Config
    from sidecar.server.app import SidecarApp
    from sidecar.status import Transport

__all__ = ["main"]

BANNER = """sidecar {version} listening on {address} ({source})
  health:  grpc-health-probe -addr={address} -service=sidecar.v1.Sidecar{http}
  tools:   {tools}{embedded}
  models:  {models}
  telemetry: {telemetry}
  try it:  sidecar demo --target {address}
Stop with Ctrl-C (SIGINT) or SIGTERM; in-flight calls get {grace:g} s to finish."""


def _load(path: str | None) -> tuple[Config, str]:
    from sidecar.config import load_config, load_default_config

    if path is None:
        return load_default_config(), "embedded default: local provider and tool backend, no keys"
    return load_config(path), path


DEFAULT_HTTP = "http://127.0.0.1:8080"
"""Where ``sidecar demo --http`` looks for the HTTP port when given no URL (``serve --http``'s example)."""
DEFAULT_GRPC = "127.0.0.1:50051"
"""Where ``sidecar status`` and ``sidecar admin`` (an action, reload) look for the gRPC port (the Admin service)
when given no target: the embedded default's ``server.listen``, so they work against ``make run`` with no flag."""
TARGET_HELP = "the HTTP port (a URL) or the gRPC port (HOST:PORT: the Admin service)"
WORKER_BANNER = "sidecar {version} worker {index}/{count} (pid {pid}) listening on {address}"


def _workers(value: str) -> int | Literal["auto"]:
    if value == "auto":
        return "auto"
    try:
        count = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of processes or auto, not {value!r}") from None
    if count < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return count


async def _supervise(
    config: Config, path: str | None, listen: str | None, workers: int | Literal["auto"], http: str | None = None
) -> int:
    from sidecar.server.security import exposure_refusal
    from sidecar.server.workers import supervise
    from sidecar.telemetry.logs import configure_logging

    address = listen or config.server.listen
    refusals = [exposure_refusal(address, config.server), *_http_refusals(config, workers=True)]
    for refusal in filter(None, refusals):
        print(f"sidecar: {refusal}", file=sys.stderr)
        return 2
    configure_logging(config.telemetry.log_level, config.telemetry.log_format, config.secrets)
    return await supervise(config, path, address, workers, http)


async def _serve(
    config: Config, source: str, listen: str | None, path: str | None = None, http: str | None = None
) -> int:
    from sidecar.config import ConfigError
    from sidecar.server.app import SidecarApp
    from sidecar.server.grpc.spans import span_interceptors
    from sidecar.server.security import exposure_refusal
    from sidecar.server.workers import say, watch_parent, worker_role
    from sidecar.telemetry.logs import configure_logging
    from sidecar.telemetry.setup import setup_telemetry

    refusals = [exposure_refusal(listen or config.server.listen, config.server), *_http_refusals(config)]
    for refusal in filter(None, refusals):  # before anything starts: a config problem, exit 2
        print(f"sidecar: {refusal}", file=sys.stderr)
        return 2
    role = worker_role()
    configure_logging(config.telemetry.log_level, config.telemetry.log_format, config.secrets)
    prometheus = config.telemetry.prometheus_port
    if role is not None and prometheus:
        prometheus += role.index  # each worker serves its own scrape endpoint
    telemetry = setup_telemetry(prometheus)
    app = SidecarApp(
        config,
        listen=listen,
        interceptors=span_interceptors(telemetry),
        reuse_port=role is not None,
        embedded=dict(role.embedded) if role is not None else {},
        config_path=path,
        adjust=(lambda c: _with_http(c, http)) if http is not None else None,
        worker=(role.index, role.parent) if role is not None else None,
    )
    stop = app.stop_on_signals()
    early = asyncio.Event()  # a SIGHUP while starting: reloaded once started (the file may be newer)
    asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, early.set)
    if role is not None:
        watcher = asyncio.create_task(watch_parent(role, stop))
    try:
        await app.start()
    except ConfigError as exc:  # the TLS files
        print(f"sidecar: {exc}", file=sys.stderr)
        telemetry.shutdown()
        return 2
    except OSError as exc:
        print(f"sidecar: {exc}", file=sys.stderr)
        telemetry.shutdown()
        return 1
    if role is not None:
        banner = WORKER_BANNER.format(
            version=__version__, index=role.index, count=role.count, pid=os.getpid(), address=app.address
        )
        say(banner)  # one write: the other workers print theirs at the same time to the same stdout
    else:
        _banner(config, source, app.address, app.embedded, telemetry.describe(), _http_banner(app))
    app.reload_on_signals(
        pending=early.is_set()
    )  # SIGHUP (and server.watch_config) reload the config file, the ports kept
    gc.freeze()  # what startup made lives as long as the process: kept out of every later collection's walk
    gc.enable()  # off since the command was read (_serve_command)
    received = await stop
    if role is not None:
        watcher.cancel()
    say(f"sidecar: {received} received; finishing in-flight calls", sys.stderr)
    await app.stop()
    telemetry.shutdown()
    say("sidecar: stopped", sys.stderr)
    return 0


def _http_refusals(config: Config, *, workers: bool = False) -> list[str | None]:
    """Why the HTTP port may not listen where ``http.listen`` says (the gRPC port's rules), or nothing."""
    from sidecar.server.security import exposure_refusal

    if config.http is None:
        return []
    listen = config.http.listen
    refusals = [exposure_refusal(listen, config.server)]
    if workers and listen.rpartition(":")[2] == "0":
        refusals.append(
            f"http.listen: {listen} would give each worker a port of its own; give the port "
            "(the workers share it, as they share server.listen)"
        )
    return refusals


def _with_http(config: Config, listen: str) -> Config:
    """``config`` with the HTTP port at ``listen`` (``serve --http``): the rest of its ``http`` section kept."""
    from pydantic import ValidationError

    from sidecar.config import ConfigError, HttpConfig

    given = config.http.model_dump() if config.http is not None else {}
    try:
        http = HttpConfig.model_validate({**given, "listen": listen})
    except ValidationError as exc:
        problem = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise ConfigError(f"--http {listen}: {problem}") from None
    return config.model_copy(update={"http": http})


def _http_banner(app: SidecarApp) -> str:
    http = app.http
    if http is None:
        return ""
    base = f"{http.scheme}://{http.address}"
    cfg = app.config.http
    mcp = f"\n  mcp:     {base}/mcp (streamable HTTP)" if cfg and cfg.mcp else ""
    fronts = [f"OpenAI {base}/v1/chat/completions"] if cfg and cfg.openai else []
    fronts += [f"Anthropic {base}/v1/messages"] if cfg and cfg.anthropic else []
    models = f"\n  models:  {', '.join(fronts)} (SDK base_url {base}/v1 / {base})" if fronts else ""
    return f"\n  http:    {base} (health: {base}/healthz){mcp}{models}"


def _banner(
    config: Config, source: str, address: str, embedded: dict[str, str], telemetry: str, http: str = ""
) -> None:
    print(
        BANNER.format(
            version=__version__,
            address=address,
            source=source,
            tools=", ".join(config.tools) or "none",
            models=", ".join(config.models) or "none",
            grace=config.server.grace_period_s,
            embedded="".join(f"\n  local {k}: {v}" for k, v in embedded.items()),
            telemetry=telemetry,
            http=http,
        ),
        flush=True,
    )


def _tls_flags(parser: argparse.ArgumentParser) -> None:
    """The admin door over TLS (a sidecar with ``server.tls``): the gRPC port, or an https:// URL."""
    parser.add_argument("--tls", action="store_true", help="TLS to a gRPC target (an https:// URL is TLS already)")
    parser.add_argument(
        "--ca", metavar="FILE", help="trust this CA (PEM) for the sidecar's certificate (implies --tls)"
    )
    parser.add_argument("--cert", metavar="FILE", help="a client certificate (PEM), for mTLS (server.tls.client_ca)")
    parser.add_argument("--key", metavar="FILE", help="the client certificate's key (PEM)")
    parser.add_argument("--server-name", metavar="NAME", help="the name to check in the sidecar's certificate")


def _transport(args: argparse.Namespace) -> Transport:
    from sidecar.status import Transport

    return Transport(args.tls, args.ca, args.cert, args.key, args.server_name)


def _run_fake(command: str, rest: list[str]) -> int:
    if command == "fake-provider":
        from sidecar.fakes.provider import main as provider_main

        return int(provider_main(rest) or 0)
    from sidecar.fakes.tool_backend import main as backend_main

    return int(backend_main(rest) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="sidecar", description="One failure policy for an agent's model and tool calls."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the sidecar (the embedded default when no --config)")
    serve.add_argument("--config", help="a YAML config file")
    serve.add_argument("--listen", help="override server.listen (host:port or unix:/path)")
    serve.add_argument(
        "--http",
        metavar="HOST:PORT",
        help=f"serve the HTTP port there (override http.listen; e.g. {DEFAULT_HTTP.removeprefix('http://')})",
    )
    serve.add_argument(
        "--workers",
        type=_workers,
        help="override server.workers: processes serving the address together (a number, or auto: one per core)",
    )
    check = sub.add_parser("check-config", help="validate a config file without serving")
    check.add_argument("file")
    sub.add_parser("version", help="print the version")
    fp = sub.add_parser("fake-provider", help="run the fault-injecting local provider", add_help=False)
    fp.add_argument("rest", nargs=argparse.REMAINDER)
    tb = sub.add_parser("tool-backend", help="run the bundled local tool backend", add_help=False)
    tb.add_argument("rest", nargs=argparse.REMAINDER)
    demo = sub.add_parser("demo", help="play a short scripted agent session against a running sidecar")
    demo.add_argument("--target", default=DEFAULT_GRPC)
    demo.add_argument(
        "--provider",
        help="the fake provider the sidecar uses (default: the one the sidecar's admin view names: "
        "its embedded local provider)",
    )
    demo.add_argument(
        "--http",
        nargs="?",
        const=DEFAULT_HTTP,
        metavar="URL",
        help=f"play it through the HTTP port (the OpenAI SDK, the MCP client) at URL (default {DEFAULT_HTTP})",
    )
    status = sub.add_parser(
        "status", help="print the admin state view (token: $SIDECAR_ADMIN_TOKEN; none on loopback with make run)"
    )
    status.add_argument("--target", default=DEFAULT_GRPC, help=f"{TARGET_HELP}; default {DEFAULT_GRPC}")
    status.add_argument(
        "--watch", nargs="?", type=float, const=2.0, metavar="SECONDS", help="redraw in place every SECONDS (2)"
    )
    admin = sub.add_parser("admin", help="an operator action on a running sidecar (token: $SIDECAR_ADMIN_TOKEN)")
    admin.add_argument("action", choices=["close-circuit", "lift-pause", "reset-spend", "reload"])
    admin.add_argument("name", nargs="?", help="the service or deployment, model, or workflow (not for reload)")
    admin.add_argument("--target", help=f"{TARGET_HELP}; default {DEFAULT_GRPC}")
    admin.add_argument(
        "--force",
        action="store_true",
        help="reload: apply a file that keeps none of the models and tools served (every call naming one fails)",
    )
    for door in (status, admin):
        _tls_flags(door)
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw and raw[0] in ("fake-provider", "tool-backend"):  # their own flags, passed through whole
        return _run_fake(raw[0], raw[1:])
    args = parser.parse_args(raw)

    if args.command == "version":
        print(f"sidecar {__version__}")
        return 0
    if args.command == "check-config":
        from sidecar.config import ConfigError, load_config

        try:
            cfg = load_config(args.file)
        except ConfigError as exc:
            print(f"sidecar: {exc}", file=sys.stderr)
            return 2
        print(f"{args.file}: ok ({len(cfg.models)} models, {len(cfg.tools)} tools, {len(cfg.providers)} providers)")
        return 0
    if args.command == "status":
        from sidecar.status import run_status

        return run_status(args.target, args.watch, transport=_transport(args))
    if args.command == "admin":
        from sidecar.status import run_action, run_reload

        if args.action == "reload":
            if args.name is not None:
                parser.error("admin reload takes no NAME")
            return run_reload(args.target or DEFAULT_GRPC, transport=_transport(args), force=args.force)
        if args.force:
            parser.error(f"--force is for admin reload, not admin {args.action}")
        if args.name is None:
            parser.error(f"admin {args.action} needs a NAME")
        return run_action(args.target or DEFAULT_GRPC, args.action, args.name, transport=_transport(args))
    if args.command == "demo":
        from sidecar.demo import run_demo

        return run_demo(args.target, args.provider, args.http)
    gc.disable()  # until it serves: see _serve_command
    try:
        return _serve_command(args)
    finally:
        gc.enable()


def _serve_command(args: argparse.Namespace) -> int:
    """``serve``: the config loaded and checked, then one process serving, or a supervisor of workers.

    It runs with the collector off (``main``) until the process serves (``_serve``: ``gc.freeze``, then the collector
    on). What a start makes (the modules, the config, the core) lives as long as the process, and the collector's
    passes over it while it grew (about 200, one of them over the whole heap) were 60-100 ms of a 0.8 s start;
    what they found unreachable (about 2,500 objects) was never more than a fraction of a megabyte: the idle RSS is
    the same with one collection before the freeze as without. A supervisor turns the collector on before it
    starts its workers, each of which is a start of its own."""
    from sidecar.config import ConfigError, workers_refusal
    from sidecar.server.cores import worker_count

    try:
        config, source = _load(args.config)
        if args.http is not None:
            config = _with_http(config, args.http)
    except ConfigError as exc:
        print(f"sidecar: {exc}", file=sys.stderr)
        return 2
    workers = args.workers if args.workers is not None else config.server.workers
    refusal = workers_refusal(workers, args.listen or config.server.listen, config.state.backend)
    if refusal is not None:  # --workers or --listen against the config: a config problem, exit 2
        print(f"sidecar: {refusal}", file=sys.stderr)
        return 2
    try:
        if worker_count(workers) > 1:
            gc.enable()  # the supervisor runs as long as its workers: collected as any process is
            return asyncio.run(_supervise(config, args.config, args.listen, workers, args.http))
        return asyncio.run(_serve(config, source, args.listen, args.config, args.http))
    except KeyboardInterrupt:
        return 0
