"""Run an :class:`HttpServer` on its own event loop in a daemon thread."""

from __future__ import annotations

import asyncio
import threading
from typing import Generic, Self, TypeVar

from ._http import HttpServer

__all__ = ["ThreadedServer"]

S = TypeVar("S", bound=HttpServer)


class ThreadedServer(Generic[S]):
    """``with ThreadedServer(FakeProvider()) as srv: httpx.get(srv.url + ...)``.

    ``srv.server`` is the wrapped server; its Python control methods
    (``script``, ``requests``, ``reset``...) are safe to call from this thread.
    """

    def __init__(self, server: S) -> None:
        self.server = server
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def port(self) -> int:
        return self.server.port

    def start(self, timeout: float = 10.0) -> Self:
        if self._thread is not None:
            raise RuntimeError("already started")
        ready = threading.Event()
        failure: list[BaseException] = []
        loop = asyncio.new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.server.start())
            except BaseException as exc:  # report bind errors to the caller
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.close()

        thread = threading.Thread(target=run, name=f"fake-http-{type(self.server).__name__}", daemon=True)
        thread.start()
        if not ready.wait(timeout):
            raise TimeoutError("server did not start in time")
        if failure:
            thread.join()
            raise failure[0]
        self._loop, self._thread = loop, thread
        return self

    def stop(self, timeout: float = 10.0) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self._loop = self._thread = None
        future = asyncio.run_coroutine_threadsafe(self.server.stop(), loop)
        try:
            future.result(timeout)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
