"""The plain-asyncio network backend under httpx: plain HTTP, TLS, timeouts, resets, reuse."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from sidecar.net.backend import fast_transport

RESPONSE = b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 10\r\n\r\n{"ok": 1 }'


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, mode: str) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                ),
                0,
            )
            if length:
                await reader.readexactly(length)
            if mode == "reset":
                writer.transport.abort()
                return
            if mode == "hang":
                await asyncio.sleep(10)
            writer.write(RESPONSE)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


def _tls_context(tmp_path: Path) -> ssl.SSLContext:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    command = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost"]
    subprocess.run([*command, "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    return ctx


@pytest_asyncio.fixture
async def server(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[str, int]]:
    mode, tls = request.param
    ctx = _tls_context(tmp_path) if tls else None
    srv = await asyncio.start_server(lambda r, w: _serve(r, w, mode), "127.0.0.1", 0, ssl=ctx)
    port = srv.sockets[0].getsockname()[1]
    yield ("https" if tls else "http"), port
    srv.close()


def _client(**kw: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=fast_transport(httpx.Limits(max_connections=4)), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("server", [("ok", False)], indirect=True)
async def test_plain_http_and_connection_reuse(server: tuple[str, int]) -> None:
    scheme, port = server
    async with _client() as client:
        for _ in range(5):
            r = await client.post(f"{scheme}://127.0.0.1:{port}/x", json={"a": 1})
            assert r.json() == {"ok": 1}
        pool = client._transport._pool  # type: ignore[attr-defined]
        assert len(pool.connections) == 1


@pytest.mark.parametrize("server", [("ok", True)], indirect=True)
async def test_tls(server: tuple[str, int]) -> None:
    scheme, port = server
    transport = fast_transport(httpx.Limits(max_connections=4))
    transport._pool._ssl_context = ssl._create_unverified_context()  # type: ignore[attr-defined]
    async with httpx.AsyncClient(transport=transport) as client:
        r = await client.get(f"{scheme}://localhost:{port}/x")
        assert r.json() == {"ok": 1}


@pytest.mark.parametrize("server", [("reset", False)], indirect=True)
async def test_a_reset_is_a_transport_error(server: tuple[str, int]) -> None:
    async with _client() as client:
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
            await client.get(f"http://127.0.0.1:{server[1]}/x")


@pytest.mark.parametrize("server", [("hang", False)], indirect=True)
async def test_read_timeout(server: tuple[str, int]) -> None:
    async with _client(timeout=0.2) as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.get(f"http://127.0.0.1:{server[1]}/x")


async def test_refused_is_a_connect_error() -> None:
    async with _client() as client:
        with pytest.raises(httpx.ConnectError):
            await client.get("http://127.0.0.1:1/x")
