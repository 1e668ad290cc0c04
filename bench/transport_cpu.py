"""CPU per 1,000 POSTs through an httpx.AsyncClient, one transport against another.

    .venv/bin/python bench/transport_cpu.py                      # httpx's default transport vs fast_transport
    .venv/bin/python bench/transport_cpu.py --module old=/tmp/netbackend_at_main.py

Each transport makes N sequential POSTs, then N POSTs from CONCURRENCY workers, against one local
keep-alive HTTP/1.1 server in its own process (so its CPU is not counted). CPU is this process's
``time.process_time()``; the transports take turns for ROUNDS rounds and the median is reported,
which keeps a shared machine's noise out of the comparison as far as one process can.
``--module NAME=PATH`` adds the ``fast_transport(limits)`` of another file (say, an older version).
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

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sidecar.core.netbackend import fast_transport

REQUESTS = 2000  # per point
CONCURRENCY = 16
ROUNDS = 5
LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)
BODY = b'{"model":"m","messages":[{"role":"user","content":"hello"}]}'
REPLY = b'{"id":"x","choices":[{"message":{"role":"assistant","content":"hi"}}]}'
RESPONSE = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(REPLY), REPLY)

Factory = Callable[[httpx.Limits], httpx.AsyncBaseTransport]


class _Server(asyncio.Protocol):
    """Answers every request (head plus content-length body) with RESPONSE, keeping the connection."""

    def __init__(self) -> None:
        self.buf = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while (end := self.buf.find(b"\r\n\r\n")) >= 0:
            head = self.buf[:end].lower()
            at = head.find(b"content-length:")
            length = int(head[at + 15 :].split(b"\r\n", 1)[0]) if at >= 0 else 0
            if len(self.buf) < end + 4 + length:
                return
            self.buf = self.buf[end + 4 + length :]
            self.transport.write(RESPONSE)  # type: ignore[attr-defined]


def serve(port: int) -> None:
    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(_Server, "127.0.0.1", port)
        await server.serve_forever()

    asyncio.run(main())


async def _point(factory: Factory, url: str, concurrency: int, requests: int) -> float:
    async with httpx.AsyncClient(transport=factory(LIMITS), trust_env=False) as client:
        await client.post(url, content=BODY)  # connect outside the measurement
        per_worker = requests // concurrency

        async def worker() -> None:
            for _ in range(per_worker):
                r = await client.post(url, content=BODY, headers={"content-type": "application/json"})
                r.raise_for_status()

        start = time.process_time()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return (time.process_time() - start) / (per_worker * concurrency) * 1000


def _load(path: str) -> Factory:
    spec = importlib.util.spec_from_file_location(f"_transport_{abs(hash(path))}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.fast_transport  # type: ignore[no-any-return]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=REQUESTS)
    ap.add_argument("--concurrency", type=int, default=CONCURRENCY)
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    ap.add_argument("--module", action="append", default=[], help="NAME=PATH of a file with fast_transport(limits)")
    ap.add_argument("--no-default", action="store_true", help="leave out httpx's own AsyncHTTPTransport")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve)
        return 0

    factories: dict[str, Factory] = {}
    if not args.no_default:
        factories["httpx"] = lambda limits: httpx.AsyncHTTPTransport(limits=limits, trust_env=False)
    for spec in args.module:
        name, _, path = spec.partition("=")
        factories[name] = _load(path)
    factories["fast_transport"] = fast_transport

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
        points = {(name, c): [] for name in factories for c in (1, args.concurrency)}  # type: dict[tuple[str, int], list[float]]
        for _ in range(args.rounds):
            for name, factory in factories.items():
                for c in (1, args.concurrency):
                    points[name, c].append(asyncio.run(_point(factory, url, c, args.requests)))
    finally:
        server.terminate()
        server.wait()

    print(f"CPU-s per 1,000 POSTs, median of {args.rounds} rounds of {args.requests} (min..max)")
    for (name, c), values in points.items():
        print(f"  {name:16s} c={c:<3d} {statistics.median(values):.3f}  ({min(values):.3f}..{max(values):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
