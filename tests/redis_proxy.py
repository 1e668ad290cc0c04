"""A TCP proxy in front of a real redis-server that fails the write of one tool call's outcome.

    proxy = RedisProxy(redis.port).start()   a free loopback port (``url``), both ways forwarded, on a thread
                                             and event loop of its own (a sidecar process or the test's own
                                             loop may block, the proxy goes on)
    proxy.fail_next_outcome("reset")         the next command carrying an outcome (a ``{prefix}:call:`` key and
                                             a value ``o{...}``) closes its connection unforwarded: Redis never
                                             sees it, the sidecar reads the connection closed
    proxy.fail_next_outcome("stall")         that command held, unforwarded and unanswered, until the sidecar
                                             drops the connection (its timeout_ms); then dropped too
    proxy.fail_next_outcome(how, times=3)    the next three such commands (a write tried again)
    proxy.failed                             set once the armed fault has caught its command
    proxy.trips                              every round trip forwarded: a ``Trip`` (when, which connection,
                                             its commands): what one read of a client carried whole, a
                                             pipeline's commands together (``clear_trips`` to start over)
    proxy.delay_s = 0.2                      every round trip held this long before it is forwarded: a call
                                             that awaits k round trips takes k x delay_s longer

Commands are read whole (RESP arrays of bulk strings, as redis-py writes them), so a command split
across reads is judged as one; every other command, and every reply, passes as it came.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import dataclass
from typing import Literal

Fault = Literal["reset", "stall"]
CHUNK = 65536
START_TIMEOUT_S = 10.0


def command(buffer: bytes) -> tuple[int, list[bytes]] | None:
    """The first whole command of ``buffer``: its length in bytes and its arguments; None while it is cut."""
    end = buffer.find(b"\r\n")
    if end < 0:
        return None
    if buffer[:1] != b"*":  # an inline command (redis-py sends none): one line
        return end + 2, buffer[:end].split()
    count, pos, args = int(buffer[1:end]), end + 2, []
    for _ in range(count):
        end = buffer.find(b"\r\n", pos)
        if end < 0:
            return None
        start = end + 2
        stop = start + int(buffer[pos + 1 : end])
        if len(buffer) < stop + 2:
            return None
        args.append(buffer[start:stop])
        pos = stop + 2
    return pos, args


@dataclass(frozen=True, slots=True)
class Trip:
    """One round trip a client sent: when (time.monotonic(), the machine's one clock), on which connection
    (numbered as accepted), and its commands (each its arguments, the name first)."""

    at: float
    connection: int
    commands: tuple[tuple[bytes, ...], ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c[0].decode("ascii", "replace").upper() for c in self.commands if c)

    @property
    def heartbeat(self) -> bool:
        """A replica's beat (the script on the ``{prefix}:replicas`` key alone), or the subscriber's own
        traffic (SUBSCRIBE, PING): what a replica sends whether or not a call is made."""
        if all(n in {"SUBSCRIBE", "UNSUBSCRIBE", "PING", "CLIENT", "HELLO", "SELECT"} for n in self.names):
            return True
        return all(
            len(c) > 3 and c[0].upper() in (b"EVALSHA", b"EVAL") and c[2] == b"1" and c[3].endswith(b":replicas")
            for c in self.commands
        )


def is_outcome(args: list[bytes]) -> bool:
    """A write of a tool call's outcome: a call record's key and an outcome's value (``o`` and its JSON)."""
    return any(b":call:" in a for a in args) and any(a.startswith(b"o{") for a in args)


class RedisProxy:
    """Forwards loopback connections to a redis-server, failing the one outcome write it is armed for."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self.failed = threading.Event()
        self._armed: Fault | None = None
        self._times = 0
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self.trips: list[Trip] = []
        self.delay_s = 0.0
        self._connections = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisProxy:
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
            self.port = int(self._server.sockets[0].getsockname()[1])
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="redis-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(START_TIMEOUT_S):
            raise RuntimeError("the Redis proxy did not start")
        return self

    def stop(self) -> None:
        if self._thread is None:
            return

        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for writer in self._open:  # each connection's reader sees its end, and its handler returns
                writer.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            await asyncio.wait(tasks, timeout=START_TIMEOUT_S) if tasks else None

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(START_TIMEOUT_S)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(START_TIMEOUT_S)
        self._loop.close()
        self._thread = None

    def clear_trips(self) -> None:
        with self._lock:
            self.trips = []

    def calls_trips(self) -> list[Trip]:
        """The round trips so far that are not a heartbeat or the subscriber's (``Trip.heartbeat``)."""
        with self._lock:
            return [t for t in self.trips if not t.heartbeat]

    def fail_next_outcome(self, how: Fault, times: int = 1) -> None:
        with self._lock:
            self._armed, self._times = how, times
        self.failed.clear()

    def _take(self, args: list[bytes]) -> Fault | None:
        if not is_outcome(args):
            return None
        with self._lock:
            how = self._armed
            self._times -= 1
            if self._times <= 0:
                self._armed = None
        if how is not None:
            self.failed.set()
        return how

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        self._open |= {writer, up_writer}
        self._connections += 1
        back = asyncio.create_task(self._copy(up_reader, writer))
        try:
            await self._forward(reader, up_writer, self._connections)
        finally:
            for w in (writer, up_writer):
                w.close()
                self._open.discard(w)
            with contextlib.suppress(OSError):
                await back

    async def _forward(self, reader: asyncio.StreamReader, upstream: asyncio.StreamWriter, number: int) -> None:
        buffer = b""
        while chunk := await reader.read(CHUNK):
            buffer += chunk
            sent: list[tuple[bytes, ...]] = []
            if self.delay_s > 0 and command(buffer) is not None:
                await asyncio.sleep(self.delay_s)
            while (whole := command(buffer)) is not None:
                size, args = whole
                sent.append(tuple(args))
                how = self._take(args)
                if how == "reset":
                    return
                if how == "stall":
                    while await reader.read(CHUNK):  # held until the sidecar gives the connection up
                        pass
                    return
                upstream.write(buffer[:size])
                buffer = buffer[size:]
            if sent:
                with self._lock:
                    self.trips.append(Trip(time.monotonic(), number, tuple(sent)))
            await upstream.drain()

    @staticmethod
    async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while chunk := await reader.read(CHUNK):
                writer.write(chunk)
                await writer.drain()
        writer.close()
