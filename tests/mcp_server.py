"""A small real MCP server of the tests' own, on the official SDK: streamable HTTP in-process, or stdio.

    tool      annotations         does
    search    read_only_hint       answers "results for <query>: doc-1, doc-2" (text)
    lookup    read_only_hint      answers structured_content only ({"id", "title"})
    note      (none: not          answers "noted: <text>"
              idempotent)
    refuse    read_only_hint      a result with is_error: "No document '<id>' exists; ..."
    strict                        JSON-RPC error -32602 (invalid params)
    crash     idempotent_hint     JSON-RPC error -32603 (internal error)
    slow      read_only_hint       never answers
    badout    read_only_hint      structured_content that breaks its own output_schema
    exit      (stdio only)        the process exits at once

``McpHttpServer`` serves it on 127.0.0.1 on the test's own event loop (uvicorn, as the sidecar
serves its HTTP port): ``await start()``, ``await stop()`` (the port closes: a transport fault for
its clients), ``await start()`` again on the same port; ``fail_posts = n`` answers the next n POSTs
HTTP 503; with ``token`` set, a request without ``Authorization: Bearer <token>`` is answered 401.
``calls`` records every tools/call (name, arguments, ``_meta``), ``cancelled`` each one the client
cancelled. As a script,
``python tests/mcp_server.py`` serves the same tools on stdio.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from mcp import MCPError, types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

ID = {"type": "object", "properties": {"id": {"type": "string", "minLength": 1}}, "required": ["id"]}
READ_ONLY = types.ToolAnnotations(read_only_hint=True)
TOOLS = [
    types.Tool(
        name="search",
        description="Search the docs.",
        input_schema={
            "type": "object",
            "properties": {"query": {"type": "string", "minLength": 1}},
            "required": ["query"],
            "additionalProperties": False,
        },
        annotations=READ_ONLY,
    ),
    types.Tool(name="lookup", description="A document's title.", input_schema=ID, annotations=READ_ONLY),
    types.Tool(
        name="note",
        description="Write a note.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    ),
    types.Tool(name="refuse", description="Always refuses.", input_schema=ID, annotations=READ_ONLY),
    types.Tool(name="strict", description="Refuses the arguments.", input_schema=ID),
    types.Tool(
        name="crash",
        description="Fails inside.",
        input_schema={"type": "object", "properties": {}},
        annotations=types.ToolAnnotations(idempotent_hint=True),
    ),
    types.Tool(name="slow", description="Never answers.", input_schema={"type": "object"}, annotations=READ_ONLY),
    types.Tool(
        name="badout",
        description="Answers what its outputSchema forbids.",
        input_schema={"type": "object"},
        output_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        annotations=READ_ONLY,
    ),
    types.Tool(name="exit", description="Exits the process.", input_schema={"type": "object"}),
]
REFUSAL = "No document '{id}' exists; search first and use an id the search returns."
STRICT = "id must look like doc-<number>"


@dataclass
class Call:
    name: str
    arguments: dict[str, Any]
    meta: dict[str, Any]


@dataclass
class Tools:
    """The tools' behaviour, and every call made to them."""

    calls: list[Call] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    """The tools whose call the client cancelled (``notifications/cancelled``) while it ran."""

    def server(self) -> Server[Any]:
        async def list_tools(
            _ctx: ServerRequestContext[Any, Any], _params: types.PaginatedRequestParams | None
        ) -> types.ListToolsResult:
            return types.ListToolsResult(tools=TOOLS)

        return Server("tests-mcp", version="1.0", on_list_tools=list_tools, on_call_tool=self._call)

    async def _call(
        self, _ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        name, args = params.name, params.arguments or {}
        meta = dict(params.meta) if params.meta else {}
        self.calls.append(Call(name, args, meta))
        if name == "search":
            return _text(f"results for {args.get('query')}: doc-1, doc-2")
        if name == "lookup":
            return types.CallToolResult(content=[], structured_content={"id": args.get("id"), "title": "Retries"})
        if name == "note":
            return _text(f"noted: {args.get('text')}")
        if name == "refuse":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=REFUSAL.format(id=args.get("id")))], is_error=True
            )
        if name == "strict":
            raise MCPError(types.INVALID_PARAMS, STRICT)
        if name == "crash":
            raise MCPError(types.INTERNAL_ERROR, "the index is corrupt")
        if name == "slow":
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled.append(name)
                raise
        if name == "badout":
            return types.CallToolResult(content=[], structured_content={"n": "three"})
        if name == "exit":
            os._exit(3)
        raise MCPError(types.INVALID_PARAMS, f"no tool {name}")


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


class _OnTheLoop(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.serving = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.serving.set()


class McpHttpServer:
    """The tools over streamable HTTP (stateful, answers as SSE), on 127.0.0.1 on the running loop."""

    def __init__(self) -> None:
        self.tools = Tools()
        self.port = 0
        self.fail_posts = 0
        self.token: str | None = None
        self._server: _OnTheLoop | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def calls(self) -> list[Call]:
        return self.tools.calls

    async def start(self) -> None:
        manager = StreamableHTTPSessionManager(self.tools.server())

        async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
            if self.token is not None and Headers(scope=scope).get("authorization") != f"Bearer {self.token}":
                await Response("who are you?", status_code=401)(scope, receive, send)
                return
            if scope["method"] == "POST" and self.fail_posts > 0:
                self.fail_posts -= 1
                await Response("unavailable", status_code=503)(scope, receive, send)
                return
            await manager.handle_request(scope, receive, send)

        @contextlib.asynccontextmanager
        async def lifespan(_app: Starlette) -> AsyncIterator[None]:
            async with manager.run():
                yield

        route = Route("/mcp", endpoint=_Asgi(endpoint), methods=["GET", "POST", "DELETE"])
        app = Starlette(routes=[route], lifespan=lifespan)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP: asyncio sets NODELAY
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen()
        sock.setblocking(False)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(app, log_config=None, log_level="critical", lifespan="on", http="h11", ws="none")
        self._server = server = _OnTheLoop(config)
        self._task = asyncio.create_task(server.serve(sockets=[sock]))
        await server.serving.wait()

    async def stop(self) -> None:
        """Close the port and everything open on it."""
        if self._server is None or self._task is None:
            return
        self._server.config.timeout_graceful_shutdown = 0
        self._server.should_exit = True
        await self._task
        self._server = self._task = None


class _Asgi:
    def __init__(self, app: Any) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)


async def _stdio() -> None:
    from mcp.server.stdio import stdio_server

    server = Tools().server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


STDIO_COMMAND = [sys.executable, os.path.abspath(__file__)]
"""The command that serves the tools on stdio."""

if __name__ == "__main__":
    asyncio.run(_stdio())
