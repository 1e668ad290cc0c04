"""The MCP front: the configured tools served as an MCP server (streamable HTTP) at ``/mcp``.

    MCP                          the core
    initialize                   the official SDK's low-level ``Server`` ("sidecar", the package's version),
                                 stateless, answering JSON: no session to keep (a restarted sidecar goes on
                                 serving its clients), no event stream (only POST; GET and DELETE are 405)
    tools/list                   ``ToolService.catalog()``: the names, descriptions and JSON schemas ListTools gives
    tools/call                   ``ToolService.execute``: the same checks, retries, throttles, circuits, spans,
                                 metrics and logs as ExecuteTool (the SDK validates nothing itself)
      a result                -> ``content: [text: model_text]``, ``isError: false``
      a failure               -> ``content: [text: model_text]``, ``isError: true`` (what the model reads)
      either                     ``_meta``: sidecar/kind, sidecar/correctable, sidecar/attempts
      server.max_in_flight       calls in flight on every door together: shed as ``isError`` (UPSTREAM_THROTTLE);
                                 while the process drains (SIGTERM), refused the same way
    request headers              ``x-sidecar-job-id``, ``x-sidecar-workflow-id``: the call's Job;
                                 ``traceparent`` / ``tracestate``: the parent of its spans (``tracing.py``)
    the JSON-RPC request id      the call's ``call_id``
    every text it answers        configured secrets masked, as the gRPC port's last step masks them

A call has no deadline of its own (MCP carries none): each attempt is bounded by the tool's
timeout and the call by its retry budget, as an ExecuteTool without a deadline.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.datastructures import Headers
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from sidecar import __version__
from sidecar.core.conversation import CallOptions, ToolOutcome, ToolRequest
from sidecar.core.redact import mask_secrets
from sidecar.server.admission import Admission
from sidecar.server.http.envelope import job_of
from sidecar.server.http.hosting import Door
from sidecar.server.http.tracing import server_span
from sidecar.telemetry import names as n
from sidecar.tools.service import ToolService

__all__ = ["MCP_PATH", "SERVER_NAME", "mcp_door"]

MCP_PATH = "/mcp"
SERVER_NAME = "sidecar"
META_KIND = "sidecar/kind"
META_CORRECTABLE = "sidecar/correctable"
META_ATTEMPTS = "sidecar/attempts"
SHED_METHOD = "mcp/tools/call"
"""How a call shed at the in-flight limit is named in the refusal and the log."""


class _Endpoint:
    """The session manager as an ASGI app (a Starlette route hands it the whole exchange)."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self._manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._manager.handle_request(scope, receive, send)


@dataclass
class _Front:
    server: Server[Any, Any]
    tools: ToolService
    admission: Admission
    secrets: tuple[str, ...]

    async def list_tools(self) -> list[types.Tool]:
        return [
            types.Tool(
                name=t.name,
                description=self._masked(t.description),
                inputSchema=dict(t.parameters),
                annotations=types.ToolAnnotations(idempotentHint=t.idempotent),
            )
            for t in self.tools.catalog()
        ]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        context = self.server.request_context
        http = context.request
        headers = http.headers if http is not None else Headers()
        request = ToolRequest(
            tool=name, arguments_json=json.dumps(arguments), call_id=str(context.request_id), job=job_of(headers)
        )
        attributes = {n.MCP_METHOD_NAME: "tools/call", n.GEN_AI_TOOL_NAME: name, n.JSONRPC_REQUEST_ID: request.call_id}
        with server_span(n.SPAN_MCP_SERVER.format(tool=name), headers, attributes) as span:
            outcome = await self._execute(request)
            if outcome.failure is not None and span.is_recording():
                span.set_attribute(n.ERROR_TYPE, n.ERROR_TOOL)
        return self._result(outcome)

    async def _execute(self, request: ToolRequest) -> ToolOutcome:
        refused = self.admission.enter(SHED_METHOD)
        if refused is not None:
            return ToolOutcome(None, refused, 0)
        try:
            return await self.tools.execute(request, CallOptions())
        finally:
            self.admission.leave()

    def _result(self, outcome: ToolOutcome) -> types.CallToolResult:
        failure = outcome.failure
        meta: dict[str, Any] = {META_ATTEMPTS: outcome.attempts}
        if failure is not None:
            meta |= {META_KIND: failure.kind_name, META_CORRECTABLE: failure.correctable}
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=self._masked(outcome.model_text))],
            isError=failure is not None,
            _meta=meta,
        )

    def _masked(self, text: str) -> str:
        return mask_secrets(text, self.secrets)


def mcp_door(tools: ToolService, admission: Admission, secrets: tuple[str, ...], max_body_bytes: int) -> Door:
    """The MCP front as a door of the HTTP port: its route and its session manager's lifespan."""
    server: Server[Any, Any] = Server(SERVER_NAME, version=__version__)
    front = _Front(server, tools, admission, secrets)
    server.list_tools()(front.list_tools)  # type: ignore[no-untyped-call]  # untyped in the SDK (1.x)
    server.call_tool(validate_input=False)(front.call_tool)
    # Stateless: sessions saved 1-3 ms a tools/call (p50 4.0-6.1 against 6.9-7.5 ms, measured), but a
    # restarted sidecar would answer every client's next call "session not found".
    manager = StreamableHTTPSessionManager(
        server, stateless=True, json_response=True, max_request_body_size=max_body_bytes
    )
    route = Route(MCP_PATH, endpoint=_Endpoint(manager), methods=["POST"])
    return Door("mcp", [route], manager.run)
