"""CPU per 1,000 POSTs through an httpx.AsyncClient, one transport against another.

    .venv/bin/python bench/transport_cpu.py                      # httpx's default transport vs fast_transport
    .venv/bin/python bench/transport_cpu.py --module old=/tmp/netbackend_at_main.py

Each transport makes N sequential POSTs, then N POSTs from CONCURRENCY workers, against one local
keep-alive HTTP/1.1 server in its own process (so its CPU is not counted). CPU is this process's
``time.process_time()``; the transports take turns for ROUNDS rounds and the median is reported,
which keeps a shared machine's noise out of the comparison as far as one process can.
``--module NAME=PATH`` adds the ``fast_transport(limits)`` of another file (say, an older version).
``--streams`` also times the network stream alone (``AsyncioBackend`` of each file that has one):
one connection, N request/response exchanges written and read straight on the stream, no pool.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sidecar.core import netbackend

REQUESTS = 2000  # per point
CONCURRENCY = 16
ROUNDS = 5
LIMITS = httpx.Limits(max_connections=200, max_keepalive_connections=50)  # the sidecar's defaults
BODY = b'{"model":"m","messages":[{"role":"user","content":"hello"}]}'
REPLY = b'{"id":"x","choices":[{"message":{"role":"assistant","content":"hi"}}]}'
RESPONSE = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(REPLY), REPLY)

Factory = Callable[[httpx.Limits], httpx.AsyncBaseTransport]


class _Server(asyncio.Protocol):
    """Answers every request (head plus content-length body) with RESPONSE, keeping the connection;
    GET /connections answers how many connections it has accepted."""

    accepted = 0

    def __init__(self) -> None:
        self.buf = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        _Server.accepted += 1

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while (end := self.buf.find(b"\r\n\r\n")) >= 0:
            head = self.buf[:end].lower()
            at = head.find(b"content-length:")
            length = int(head[at + 15 :].split(b"\r\n", 1)[0]) if at >= 0 else 0
            if len(self.buf) < end + 4 + length:
                return
            self.buf = self.buf[end + 4 + length :]
            if head.startswith(b"get /connections "):
                count = b"%d" % _Server.accepted
                self.transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(count), count))  # type: ignore[attr-defined]
            else:
                self.transport.write(RESPONSE)  # type: ignore[attr-defined]


def serve(port: int) -> None:
    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(_Server, "127.0.0.1", port)
        await server.serve_forever()

    asyncio.run(main())


async def _connections(url: str) -> int:
    async with httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(trust_env=False)) as client:
        return int((await client.get(httpx.URL(url).copy_with(path="/connections"))).text)


async def _point(factory: Factory, url: str, concurrency: int, requests: int) -> tuple[float, int]:
    """CPU-s per 1,000 POSTs, and how many connections the transport opened for them."""
    async with httpx.AsyncClient(transport=factory(LIMITS), trust_env=False) as client:
        await client.post(url, content=BODY)  # connect outside the measurement
        opened = await _connections(url)
        per_worker = requests // concurrency

        async def worker() -> None:
            for _ in range(per_worker):
                r = await client.post(url, content=BODY, headers={"content-type": "application/json"})
                r.raise_for_status()

        start = time.process_time()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        cpu = (time.process_time() - start) / (per_worker * concurrency) * 1000
        return cpu, await _connections(url) - opened - 1


async def _stream_point(backend: Any, port: int, requests: int) -> float:
    """µs of CPU per request/response exchange on one connection of ``backend``, no pool."""
    head = b"POST /x HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: %d\r\n\r\n" % len(BODY)
    stream = await backend.connect_tcp("127.0.0.1", port)
    start = time.process_time()
    for _ in range(requests):
        await stream.write(head, timeout=5.0)
        await stream.write(BODY, timeout=5.0)
        data = await stream.read(65536, timeout=5.0)
        while len(data) < len(RESPONSE):
            data += await stream.read(65536, timeout=5.0)
        stream.get_extra_info("is_readable")
    cpu = time.process_time() - start
    await stream.aclose()
    return cpu / requests * 1e6


def _load(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_transport_{abs(hash(path))}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=REQUESTS)
    ap.add_argument("--concurrency", type=int, default=CONCURRENCY)
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    ap.add_argument("--module", action="append", default=[], help="NAME=PATH of a file with fast_transport(limits)")
    ap.add_argument("--no-default", action="store_true", help="leave out httpx's own AsyncHTTPTransport")
    ap.add_argument("--streams", action="store_true", help="also time each AsyncioBackend's stream alone")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve)
        return 0

    factories: dict[str, Factory] = {}
    backends: dict[str, Any] = {}
    if not args.no_default:
        factories["httpx"] = lambda limits: httpx.AsyncHTTPTransport(limits=limits, trust_env=False)
    for spec in args.module:
        name, _, path = spec.partition("=")
        module = _load(path)
        factories[name] = module.fast_transport
        if hasattr(module, "AsyncioBackend"):
            backends[name] = module.AsyncioBackend
    factories["fast_transport"] = netbackend.fast_transport
    backends["fast_transport"] = netbackend.AsyncioBackend

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        points: dict[tuple[str, int], list[tuple[float, int]]] = {
            (name, c): [] for name in factories for c in (1, args.concurrency)
        }
        for _ in range(args.rounds):
            for name, factory in factories.items():
                for c in (1, args.concurrency):
                    points[name, c].append(asyncio.run(_point(factory, url, c, args.requests)))
        streams: dict[str, list[float]] = {name: [] for name in backends} if args.streams else {}
        for _ in range(args.rounds if args.streams else 0):
            for name, backend in backends.items():
                streams[name].append(asyncio.run(_stream_point(backend(), port, args.requests)))
    finally:
        server.terminate()
        server.wait()

    print(f"CPU-s per 1,000 POSTs, median of {args.rounds} rounds of {args.requests} (min..max); connections opened")
    for (name, c), results in points.items():
        cpu, opened = [r[0] for r in results], [r[1] for r in results]
        print(
            f"  {name:16s} c={c:<3d} {statistics.median(cpu):.3f}  ({min(cpu):.3f}..{max(cpu):.3f})"
            f"  connections {statistics.median(opened):.0f} ({min(opened)}..{max(opened)})"
        )
    if streams:
        print(f"µs CPU per exchange on the stream alone, median of {args.rounds} rounds of {args.requests} (min..max)")
        for name, values in streams.items():
            print(f"  {name:16s} {statistics.median(values):.1f}  ({min(values):.1f}..{max(values):.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
