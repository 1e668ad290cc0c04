"""The MCP front: the configured tools served as an MCP server (streamable HTTP) at ``/mcp``.

    MCP                          the core
    initialize                   the official SDK's low-level ``Server`` ("sidecar", the package's version),
                                 stateless, answering JSON: no session to keep (a restarted sidecar goes on
                                 serving its clients), no event stream (only POST; GET and DELETE are 405);
                                 the SDK 2.x also serves the 2026-07-28 revision (``server/discover``, no
                                 initialize) to a client that names it in ``MCP-Protocol-Version``
    tools/list                   ``ToolService.catalog()``: the names, descriptions and JSON schemas ListTools gives
    tools/call                   ``ToolService.execute``: the same checks, retries, throttles, circuits, spans,
                                 metrics and logs as ExecuteTool (the SDK validates nothing itself)
      a result                -> ``content: [text: model_text]``, ``isError: false``
      a failure               -> ``content: [text: model_text]``, ``isError: true`` (what the model reads)
      spans                      the sidecar's own (``tracing.py``); the SDK's span middleware is taken off
      either                     ``_meta``: sidecar/kind, sidecar/correctable, sidecar/attempts
      server.max_in_flight       calls in flight on every door together: shed as ``isError`` (UPSTREAM_THROTTLE);
                                 while the process drains (SIGTERM), refused the same way
      the caller's limit         its requests_per_second (``server.callers``; a tool call charges no tokens):
                                 over it, refused before the SDK reads the body: 429 with Retry-After and a
                                 JSON-RPC error, ``CALLER_LIMITED`` (-32029), its ``data`` the kind
                                 (UPSTREAM_THROTTLE), the caller and ``retry_after_s``; the span names the caller
    request headers              ``x-sidecar-job-id``, ``x-sidecar-workflow-id``: the call's Job;
                                 ``traceparent`` / ``tracestate``: the parent of its spans (``tracing.py``)
    the JSON-RPC request id      the call's ``call_id``
    every text it answers        configured secrets masked, as the gRPC port's last step masks them
    a body the SDK cannot take   checked before the SDK reads it (``_checked``), 400: not JSON (100,000 ``[``)
                                 -32700; a lone surrogate escape -32602 in ``params`` (else -32600), naming
                                 the JSON path; a request's id neither a string nor an integer -32600
                                 (the SDK read it as a notification: 202, the call dropped); a fault of
                                 the front's own: 500 -32603 (``hosting.py``)

A call has no deadline of its own (MCP carries none): each attempt is bounded by the tool's
timeout and the call by its retry budget, as an ExecuteTool without a deadline.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from sidecar import __version__
from sidecar.core.conversation import CallOptions, ToolOutcome, ToolRequest
from sidecar.core.details import InvalidInputDetail
from sidecar.core.json_depth import loads
from sidecar.core.redact import mask_secrets
from sidecar.core.taxonomy import InvalidInput, SidecarFailure
from sidecar.server.admission import Admission
from sidecar.server.callers import SCOPE_KEY, Callers
from sidecar.server.http.envelope import job_of
from sidecar.server.http.failures import answer_of, failure_headers
from sidecar.server.http.hosting import Door
from sidecar.server.http.json_bodies import check_unicode
from sidecar.server.http.tracing import server_span
from sidecar.server.live import Live
from sidecar.telemetry import names as n

__all__ = ["MCP_PATH", "SERVER_NAME", "mcp_door"]

MCP_PATH = "/mcp"
SERVER_NAME = "sidecar"
META_KIND = "sidecar/kind"
META_CORRECTABLE = "sidecar/correctable"
META_ATTEMPTS = "sidecar/attempts"
SHED_METHOD = "mcp/tools/call"
"""How a call shed at the in-flight limit is named in the refusal and the log."""


CALLER_LIMITED = -32029
"""The JSON-RPC error of a tools/call over its caller's limit (a server error code: -32000 to -32099)."""
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


def rpc_error(code: int, message: str, request_id: Any = None, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC error object (``request_id`` null when the request's could not be read)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _checked(body: bytes) -> tuple[int, dict[str, Any]] | None:
    """The JSON-RPC error a body earns before the SDK reads it, or None: it is JSON the SDK may read.

    The SDK reads the body with ``json.loads`` and answers a RecursionError (a body of 100,000 ``[``)
    500 -32603; and a lone surrogate escape (``"name": "\\ud800"``) reaches the tool's name, the
    logs and spans, where no encoder writes it. Both are the caller's bytes: a parse error, and an
    invalid request (-32600) or, inside ``params``, invalid params (-32602) naming the JSON path.
    """
    try:
        message = loads(body)
    except ValueError:
        return 400, rpc_error(PARSE_ERROR, f"Parse error: the body ({len(body)} bytes) is not JSON")
    try:
        check_unicode(message)
        _check_id(message)
    except SidecarFailure as failure:
        where = failure.detail.parameter if isinstance(failure.detail, InvalidInputDetail) else ""
        code = INVALID_PARAMS if where.startswith("params") or ".params" in where else INVALID_REQUEST
        request_id = message.get("id") if isinstance(message, dict) else None
        if not isinstance(request_id, str | int) or isinstance(request_id, bool) or where == "id":
            request_id = None
        data = {"kind": failure.kind_name, "parameter": where}
        return 400, rpc_error(code, failure.message, request_id, data)
    return None


def _check_id(message: Any) -> None:
    """INVALID_INPUT naming ``id`` when a request's id is neither a string nor an integer (MCP: never null).
    The SDK reads such a request as a notification: 202 with no body, and the call silently dropped."""
    if isinstance(message, dict) and "method" in message and "id" in message:
        request_id = message["id"]
        if not isinstance(request_id, str | int) or isinstance(request_id, bool):
            raise InvalidInput("id", json.dumps(request_id)[:100], "must be a string or an integer (never null)")


class _Endpoint:
    """The session manager as an ASGI app (a Starlette route hands it the whole exchange), the body
    checked first (``_checked``) and handed on as it came."""

    def __init__(self, manager: StreamableHTTPSessionManager, max_body_bytes: int, callers: Callers) -> None:
        self._manager = manager
        self._limit = max_body_bytes
        self._callers = callers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        chunks: list[bytes] = []
        size, more = 0, True
        while more and size <= self._limit:
            message = await receive()
            if message["type"] != "http.request":  # the caller left
                return
            chunk = message.get("body", b"")
            chunks.append(chunk)
            size += len(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        refused = None if more else _checked(body)  # past the limit: the SDK's own 413
        if refused is not None:
            status, answer = refused
            await Response(json.dumps(answer), status, media_type="application/json")(scope, receive, send)
            return
        limited = None if more else await self._limited(scope.get(SCOPE_KEY), body)
        if limited is not None:
            await limited(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": more}

        await self._manager.handle_request(scope, replay, send)

    async def _limited(self, caller: int | None, body: bytes) -> Response | None:
        """The answer to a tools/call its caller's limit refuses (429, Retry-After, the JSON-RPC error);
        None: admitted (charged), or not a tools/call."""
        if caller is None or b"tools/call" not in body:
            return None
        message = loads(body)  # _checked read it already: JSON
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            return None
        failure = await self._callers.admit(caller, SHED_METHOD)
        if failure is None:
            return None
        named = self._callers.of(caller)
        data = {"kind": failure.kind_name, "caller": named and named.name, "retry_after_s": failure.retry_after}
        request_id = message.get("id")
        request_id = request_id if isinstance(request_id, str | int) else None
        answer = rpc_error(CALLER_LIMITED, failure.message, request_id, data)
        headers = failure_headers(failure, answer_of(failure))
        return Response(json.dumps(answer), 429, headers, media_type="application/json")


@dataclass
class _Front:
    live: Live
    """The core each call runs on (read once, as the call starts)."""
    admission: Admission
    callers: Callers
    """The callers of server.auth.tokens: the span of a call names its caller."""

    async def list_tools(
        self, _ctx: ServerRequestContext[Any, Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tools = [
            types.Tool(
                name=t.name,
                description=self._masked(t.description),
                input_schema=dict(t.parameters),
                annotations=types.ToolAnnotations(idempotent_hint=t.idempotent),
            )
            for t in self.live.core.tools.catalog()
        ]
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        self, context: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        name, arguments = params.name, params.arguments or {}
        http = context.request
        headers = http.headers if isinstance(http, Request) else Headers()
        request = ToolRequest(
            tool=name, arguments_json=json.dumps(arguments), call_id=str(context.request_id), job=job_of(headers)
        )
        attributes = {n.MCP_METHOD_NAME: "tools/call", n.GEN_AI_TOOL_NAME: name, n.JSONRPC_REQUEST_ID: request.call_id}
        caller = self.callers.of(http.scope.get(SCOPE_KEY)) if isinstance(http, Request) else None
        if caller is not None:
            attributes[n.CALLER] = caller.name
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
            return await self.live.core.tools.execute(request, CallOptions())
        finally:
            self.admission.leave()

    def _result(self, outcome: ToolOutcome) -> types.CallToolResult:
        failure = outcome.failure
        meta: dict[str, Any] = {META_ATTEMPTS: outcome.attempts}
        if failure is not None:
            meta |= {META_KIND: failure.kind_name, META_CORRECTABLE: failure.correctable}
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=self._masked(outcome.model_text))],
            is_error=failure is not None,
            _meta=meta,
        )

    def _masked(self, text: str) -> str:
        return mask_secrets(text, self.live.secrets)


def mcp_door(live: Live, admission: Admission, max_body_bytes: int, callers: Callers | None = None) -> Door:
    """The MCP front as a door of the HTTP port: its route and its session manager's lifespan."""
    callers = callers if callers is not None else Callers()
    front = _Front(live, admission, callers)
    server: Server[Any] = Server(
        SERVER_NAME, version=__version__, on_list_tools=front.list_tools, on_call_tool=front.call_tool
    )
    server.middleware.clear()  # the SDK's own SERVER span per message: the front makes its own (tracing.py)
    # Stateless: sessions saved 1-3 ms a tools/call (p50 4.0-6.1 against 6.9-7.5 ms, measured), but a
    # restarted sidecar would answer every client's next call "session not found".
    manager = StreamableHTTPSessionManager(
        server, stateless=True, json_response=True, max_request_body_size=max_body_bytes
    )
    route = Route(MCP_PATH, endpoint=_Endpoint(manager, max_body_bytes, callers), methods=["POST"])

    def fault(path: str, failure: SidecarFailure) -> tuple[int, dict[str, Any]] | None:
        return (
            (500, rpc_error(INTERNAL_ERROR, failure.message, data={"kind": failure.kind_name}))
            if path == MCP_PATH
            else None
        )

    return Door("mcp", [route], manager.run, fault=fault)
