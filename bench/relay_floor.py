"""The runtime's floor for StreamModel: a grpc.aio server relaying the upstream's SSE, no policy.

    BENCH_KEY=KEY .venv/bin/python bench/relay_floor.py --listen 127.0.0.1:PORT --upstream http://127.0.0.1:UP
        [--client aiohttp | httpx-sse]

The streaming scenario (bench/scenario_stream.py) measures it beside the direct read and the sidecar:
what a Python process serving the sidecar's contract over grpc.aio and calling the provider pays
before any policy runs. StreamModel posts the bench's chat request with ``stream: true`` and sends
each ``delta.content`` as a text event, then a final event; no retries, no spans, no checks.

    --client aiohttp     aiohttp's client; each chunk split into ``data:`` lines (the upstream writes
                         one event per chunk): the least a Python relay can do
    --client httpx-sse   what the sidecar reads with, as it reads: an httpx.Request sent on the sidecar's
                         own transport (sidecar.net.backend: aiohttp beneath httpx; no client layers)
                         and the response read with httpx-sse's EventSource

CallModel posts the same request whole and answers its text (the runner's probe, and the CallModel
floor bench/lean.py divides the sidecar's CPU per call by). Not a product:
the sidecar's numbers minus these are what its policy costs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import grpc
import httpx
from httpx_sse import EventSource
from sidecar_contract.v1 import sidecar_pb2 as pb
from sidecar_contract.v1 import sidecar_pb2_grpc as pb_grpc

BODY: dict[str, Any] = {
    "model": "bench",
    "messages": [{"role": "user", "content": "hi"}],
    "max_tokens": 64,
}

TIMEOUT = httpx.Timeout(30.0).as_dict()


class Relay(pb_grpc.SidecarServicer):
    def __init__(self, url: str, key: str, client: str) -> None:
        self._url = url
        self._headers = {"authorization": f"Bearer {key}"}
        self._session: aiohttp.ClientSession | None = None
        self._transport: httpx.AsyncBaseTransport | None = None
        if client == "httpx-sse":
            from sidecar.net.backend import fast_transport

            self._transport = fast_transport(httpx.Limits())

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        return self._session

    async def CallModel(self, request: pb.CallModelRequest, context: Any) -> pb.CallModelResponse:
        async with self._open().post(self._url, json=BODY, headers=self._headers) as response:
            reply = await response.json()
        return pb.CallModelResponse(message=pb.Message(text=reply["choices"][0]["message"]["content"]))

    async def StreamModel(self, request: pb.CallModelRequest, context: Any) -> AsyncIterator[pb.StreamModelEvent]:
        body = {**BODY, "stream": True, "stream_options": {"include_usage": True}}
        headers = {**self._headers, "accept": "text/event-stream"}
        if self._transport is not None:
            request = httpx.Request("POST", self._url, json=body, headers=headers, extensions={"timeout": TIMEOUT})
            streamed = await self._transport.handle_async_request(request)
            try:
                async for event in EventSource(streamed).aiter_sse():
                    if event.data.startswith("{"):
                        choices = json.loads(event.data).get("choices") or [{}]
                        text = choices[0].get("delta", {}).get("content")
                        if text:
                            yield pb.StreamModelEvent(text=pb.TextDelta(text=text))
            finally:
                await streamed.aclose()
            yield pb.StreamModelEvent(final=pb.CallModelResponse())
            return
        async with self._open().post(self._url, json=body, headers=headers) as response:
            async for chunk in response.content.iter_any():
                for line in chunk.split(b"\n"):
                    if not line.startswith(b"data: {"):
                        continue
                    choices = json.loads(line[6:]).get("choices") or [{}]
                    text = choices[0].get("delta", {}).get("content")
                    if text:
                        yield pb.StreamModelEvent(text=pb.TextDelta(text=text))
        yield pb.StreamModelEvent(final=pb.CallModelResponse())


async def serve(listen: str, upstream: str, key: str, client: str) -> None:
    server = grpc.aio.server()
    pb_grpc.add_SidecarServicer_to_server(Relay(f"{upstream}/v1/chat/completions", key, client), server)
    server.add_insecure_port(listen)
    await server.start()
    await server.wait_for_termination()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--listen", required=True)
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--client", choices=("aiohttp", "httpx-sse"), default="aiohttp")
    args = ap.parse_args()
    asyncio.run(serve(args.listen, args.upstream, os.environ["BENCH_KEY"], args.client))


if __name__ == "__main__":
    main()
