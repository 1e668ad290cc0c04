"""Run a fake in the foreground until SIGINT/SIGTERM, printing its URL."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys

from ._http import HttpServer

__all__ = ["serve_forever"]


async def _run(server: HttpServer) -> None:
    await server.start()
    print(server.url, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await server.stop()


def serve_forever(server: HttpServer) -> int:
    try:
        asyncio.run(_run(server))
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        print(f"cannot listen on {server.host}:{server.port}: {exc}", file=sys.stderr)
        return 1
    return 0
