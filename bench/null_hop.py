"""A null hop on the sidecar's own stack: both doors, nothing but the forward (bench/overhead.py's calibration).

    BENCH_KEY=KEY .venv/bin/python bench/null_hop.py --grpc 127.0.0.1:P --http 127.0.0.1:Q --upstream URL

The sidecar's latency over a direct call holds costs that are not the sidecar's work: the extra
loopback hop (the client's send, the kernel, the event loop's wakeup before uvicorn or gRPC hand
the request to Python; after the answer is handed back, its write and the client's wakeup). This
process pays the same, on the same stack, and measures itself with the same stopwatch at the same
edges (``sidecar.core.overhead``), so its latency over the direct call, less its own figure, is
what the hop costs outside the sidecar's clock:

    HTTP door    uvicorn with the sidecar's protocol (the arrival stamp at the first bytes read, an
                 answer's head and body in one write) under the sidecar's ``Overhead`` wrapper;
                 the body forwarded as it came on the sidecar's transport (``net.backend``: aiohttp
                 beneath httpx, the upstream's time excluded), the upstream's bytes answered as they came
    gRPC door    grpc.aio with the sidecar's ``Arrival`` interceptor (its stopwatch, its trailer when
                 the answer is back); CallModel posts the request's text and answers the reply's text

Each answer also carries ``x-null-arrived`` and ``x-null-answered`` (``perf_counter``, which on Linux
is CLOCK_MONOTONIC, one clock for every process): where the stopwatch began and when the answer was
handed back, so the bench splits the hop into its way in and its way out. Not a product.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import time
from typing import Any

import grpc
import httpx
import uvicorn
from sidecar_contract.v1 import sidecar_pb2 as pb
from sidecar_contract.v1 import sidecar_pb2_grpc as pb_grpc

from sidecar.core import overhead
from sidecar.net.backend import fast_transport
from sidecar.server.grpc.servicer import Arrival
from sidecar.server.http.envelope import Overhead
from sidecar.server.http.hosting import _Stamped

ARRIVED, ANSWERED = "x-null-arrived", "x-null-answered"
TIMEOUT = httpx.Timeout(60.0).as_dict()


class _Forward:
    """The one upstream request each door makes, on the sidecar's transport."""

    def __init__(self, url: str, key: str) -> None:
        self._url = url
        self._headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}
        self._transport = fast_transport(httpx.Limits(max_connections=1024, keepalive_expiry=60))

    async def post(self, body: bytes) -> bytes:
        request = httpx.Request("POST", self._url, content=body, headers=self._headers, extensions={"timeout": TIMEOUT})
        response = await self._transport.send(request)
        return await response.aread()


def _stamps() -> tuple[str, str]:
    return f"{overhead.arrival() or 0.0:.9f}", f"{time.perf_counter():.9f}"


def http_app(forward: _Forward) -> Overhead:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        reply = await forward.post(body)
        arrived, answered = _stamps()
        headers = [
            (b"content-type", b"application/json"),
            (ARRIVED.encode(), arrived.encode()),
            (ANSWERED.encode(), answered.encode()),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": reply})

    return Overhead(app)


class NullServicer(pb_grpc.SidecarServicer):
    def __init__(self, forward: _Forward) -> None:
        self._forward = forward

    async def CallModel(self, request: pb.CallModelRequest, context: Any) -> pb.CallModelResponse:
        # the stopwatch is Arrival's (as the sidecar's): it sets the overhead trailer when the answer is back
        text = request.messages[0].text if request.messages else ""
        body = {"model": "fake", "messages": [{"role": "user", "content": text}]}
        reply = json.loads(await self._forward.post(json.dumps(body).encode()))
        answer = pb.CallModelResponse(message=pb.Message(text=reply["choices"][0]["message"]["content"]))
        arrived, answered = _stamps()
        context.set_trailing_metadata(((ARRIVED, arrived), (ANSWERED, answered)))
        return answer


async def serve(grpc_listen: str, http_listen: str, upstream: str, key: str) -> None:
    forward = _Forward(f"{upstream}/v1/chat/completions", key)
    server = grpc.aio.server(interceptors=[Arrival()])
    pb_grpc.add_SidecarServicer_to_server(NullServicer(forward), server)
    server.add_insecure_port(grpc_listen)
    await server.start()
    host, _, port = http_listen.rpartition(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, int(port)))
    config = uvicorn.Config(
        http_app(forward),
        log_config=None,
        log_level=None,
        access_log=False,
        lifespan="off",
        http=_Stamped,
        ws="none",
        interface="asgi3",
        server_header=False,
        proxy_headers=False,
    )
    web = uvicorn.Server(config)
    print("serving", flush=True)
    await web.serve(sockets=[sock])  # until SIGTERM / SIGINT (uvicorn's handlers)
    await server.stop(1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grpc", required=True)
    ap.add_argument("--http", required=True)
    ap.add_argument("--upstream", required=True)
    args = ap.parse_args()
    asyncio.run(serve(args.grpc, args.http, args.upstream, os.environ["BENCH_KEY"]))


if __name__ == "__main__":
    main()
