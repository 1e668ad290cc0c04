"""The transport's connection pool (sidecar/net/pool.py) against real servers on loopback.

At most max_connections open, the next request waits its turn (first come, first served) and
fails with PoolTimeout past its pool timeout; connections past max_keepalive_connections idle
are closed but no fewer are kept (httpcore's own pool counted busy ones too, and closed every
connection that went idle while more than the limit were open); a full pool makes room for
another origin by closing an idle connection; a connection past its keep-alive expiry is closed, not reused;
a request cancelled while waiting, or after it was handed a connection, leaves the pool usable.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from sidecar.net.backend import AsyncioTransport, fast_transport

OK = b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 8\r\n\r\n{"ok":1}'


class Server:
    """Answers every request on a connection once ``gate`` is set; counts connections and closes."""

    def __init__(self) -> None:
        self.accepted = 0
        self.open = 0
        self.gate = asyncio.Event()
        self.gate.set()
        self.arrived = 0
        self.url = ""
        self.tasks: set[asyncio.Task[object]] = set()

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self.open += 1
        task = asyncio.current_task()
        if task is not None:
            self.tasks.add(task)
        try:
            while True:
                await reader.readuntil(b"\r\n\r\n")
                self.arrived += 1
                await self.gate.wait()
                writer.write(OK)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.open -= 1
            writer.close()


@contextlib.asynccontextmanager
async def serving() -> AsyncIterator[Server]:
    server = Server()
    srv = await asyncio.start_server(server, "127.0.0.1", 0)
    server.url = f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}"
    try:
        yield server
    finally:
        srv.close()
        for task in server.tasks:
            task.cancel()
        await asyncio.gather(*server.tasks, return_exceptions=True)


def client(transport: AsyncioTransport, **kw: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=transport, trust_env=False, **kw)  # type: ignore[arg-type]


async def until(condition: Callable[[], bool], turns: int = 2000) -> bool:
    """Let the event loop run until ``condition`` holds (at most ``turns`` turns, no real sleep)."""
    for _ in range(turns):
        if condition():
            return True
        await asyncio.sleep(0)
    return condition()


async def test_at_most_max_connections_open_and_the_next_request_waits_its_turn() -> None:
    transport = fast_transport(httpx.Limits(max_connections=2, max_keepalive_connections=2))
    async with serving() as server, client(transport) as c:
        server.gate.clear()
        done: list[int] = []

        async def get(i: int) -> None:
            r = await c.get(f"{server.url}/{i}")
            assert r.json() == {"ok": 1}
            done.append(i)

        tasks = [asyncio.create_task(get(i)) for i in range(5)]
        assert await until(lambda: server.arrived == 2)
        assert not await until(lambda: server.arrived > 2, turns=50)  # the other three wait in the pool
        server.gate.set()
        await asyncio.gather(*tasks)
        assert sorted(done) == [0, 1, 2, 3, 4]
        assert done[2:] == [2, 3, 4]  # served in the order they asked
        assert server.accepted == 2
        assert len(transport.pool.connections) == 2


async def test_a_request_that_waits_past_its_pool_timeout_fails_with_pool_timeout() -> None:
    transport = fast_transport(httpx.Limits(max_connections=1))
    async with serving() as server, client(transport, timeout=httpx.Timeout(5, pool=0.05)) as c:
        server.gate.clear()
        first = asyncio.create_task(c.get(f"{server.url}/1"))
        assert await until(lambda: server.arrived == 1)
        with pytest.raises(httpx.PoolTimeout):
            await c.get(f"{server.url}/2")
        server.gate.set()
        assert (await first).json() == {"ok": 1}
        assert (await c.get(f"{server.url}/3")).json() == {"ok": 1}  # the pool is whole again
        assert server.accepted == 1


async def test_as_many_idle_connections_are_kept_as_the_keepalive_limit_even_with_more_open() -> None:
    transport = fast_transport(httpx.Limits(max_connections=10, max_keepalive_connections=3))
    async with serving() as server, client(transport) as c:
        for _ in range(3):
            server.gate.clear()
            tasks = [asyncio.create_task(c.get(f"{server.url}/x")) for _ in range(4)]
            assert await until(lambda: server.arrived in (4, 8, 12) and len(transport.pool.connections) == 4)
            server.gate.set()
            await asyncio.gather(*tasks)
            assert len(transport.pool.connections) == 3  # one closed: past the limit of idle ones
        assert server.accepted == 4 + 1 + 1  # each round reused the three kept, opened one more
        assert await until(lambda: server.open == 3)


async def test_no_idle_connection_is_kept_with_a_keepalive_limit_of_zero() -> None:
    transport = fast_transport(httpx.Limits(max_connections=10, max_keepalive_connections=0))
    async with serving() as server, client(transport) as c:
        for _ in range(3):
            assert (await c.get(f"{server.url}/x")).json() == {"ok": 1}
            assert transport.pool.connections == []
        assert server.accepted == 3


async def test_a_full_pool_closes_an_idle_connection_to_another_origin_for_a_new_one() -> None:
    transport = fast_transport(httpx.Limits(max_connections=1))
    async with serving() as a, serving() as b, client(transport) as c:
        assert (await c.get(f"{a.url}/x")).json() == {"ok": 1}
        assert (await c.get(f"{b.url}/x")).json() == {"ok": 1}
        assert (await c.get(f"{a.url}/x")).json() == {"ok": 1}
        assert (a.accepted, b.accepted) == (2, 1)
        assert len(transport.pool.connections) == 1
        assert await until(lambda: a.open + b.open == 1)


async def test_a_waiter_for_another_origin_gets_a_new_connection_when_one_is_released() -> None:
    transport = fast_transport(httpx.Limits(max_connections=1))
    async with serving() as a, serving() as b, client(transport) as c:
        a.gate.clear()
        first = asyncio.create_task(c.get(f"{a.url}/x"))
        assert await until(lambda: a.arrived == 1)
        second = asyncio.create_task(c.get(f"{b.url}/x"))
        assert not await until(second.done, turns=50)
        a.gate.set()
        assert (await first).json() == {"ok": 1}
        assert (await second).json() == {"ok": 1}
        assert (a.accepted, b.accepted) == (1, 1)
        assert await until(lambda: a.open == 0 and b.open == 1)


async def test_a_connection_past_its_keepalive_expiry_is_not_reused() -> None:
    transport = AsyncioTransport(httpx.Limits(max_connections=4, keepalive_expiry=0))
    async with serving() as server, client(transport) as c:
        for _ in range(2):
            assert (await c.get(f"{server.url}/x")).json() == {"ok": 1}
            assert transport.pool.connections == []  # a keep-alive of 0 s has passed already: closed
        assert server.accepted == 2
        assert await until(lambda: server.open == 0)


@pytest.mark.parametrize("when", ["waiting", "handed a connection"])
async def test_a_request_cancelled_in_the_queue_leaves_the_pool_usable(when: str) -> None:
    transport = fast_transport(httpx.Limits(max_connections=1))
    async with serving() as server, client(transport) as c:
        async with c.stream("GET", f"{server.url}/1") as first:
            body = first.aiter_raw()
            assert await anext(body) == b'{"ok":1}'  # not to its end: the connection stays busy
            queued = asyncio.create_task(c.get(f"{server.url}/2"))
            third = asyncio.create_task(c.get(f"{server.url}/3"))
            assert not await until(queued.done, turns=50)
            if when == "waiting":
                queued.cancel()
                assert await until(queued.done)
            await body.aclose()
        if when == "handed a connection":  # closing the response handed a slot over; cancelled before it ran
            queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued
        assert (await third).json() == {"ok": 1}  # the slot went on to the next in line
        assert (await c.get(f"{server.url}/4")).json() == {"ok": 1}
        assert server.accepted == 2  # the first, closed before its end, and one for the others
        assert len(transport.pool.connections) == 1


async def test_closing_the_client_closes_every_connection_and_fails_the_waiting() -> None:
    transport = fast_transport(httpx.Limits(max_connections=1))
    async with serving() as server:
        c = client(transport)
        server.gate.clear()
        first = asyncio.create_task(c.get(f"{server.url}/1"))
        assert await until(lambda: server.arrived == 1)
        queued = asyncio.create_task(c.get(f"{server.url}/2"))
        assert not await until(queued.done, turns=50)
        await c.aclose()
        with pytest.raises(httpx.PoolTimeout):
            await queued
        with pytest.raises(httpx.TransportError):
            await first
        assert transport.pool.connections == []
        server.gate.set()
        assert await until(lambda: server.open == 0)  # the client's end closed: the server saw EOF
