"""The MCP SDK's HTTP client over the sidecar's own transport: httpx2 above, httpx on aiohttp beneath.

The SDK 2.x speaks ``httpx2`` (a client it is handed: ``streamable_http_client(http_client=...)``);
the sidecar's HTTP stack is httpx over aiohttp (``net.backend``), with its pool, its upstream
stopwatch (``core.overhead``) and its transport faults (``net.transport.fault_of``). ``McpTransport``
is an ``httpx2`` transport that sends each request on that stack::

    httpx2.Request   -> httpx.Request (method, URL, raw headers, body, the client's timeouts)
    httpx.Response   -> httpx2.Response (status, raw headers, the body streamed as it is read)
    a transport fault   raised as the stack raised it (httpx's), for ``fault_of``
    a POST answered an HTTP error status (but 404 on a session: the SDK's "Session terminated")
                     -> httpx.HTTPStatusError, its status and headers (Retry-After) for the taxonomy

The SDK 1.x raised that status error itself; 2.x turns a status into a JSON-RPC error
(-32603 "Server returned an error response") and the status is lost. Raised here it ends the
session's task as it did under 1.x, and the call reads the status (``McpSession._broken``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import httpx2

__all__ = ["SESSION_HEADER", "McpTransport"]

SESSION_HEADER = "mcp-session-id"
"""The streamable HTTP session's header: a 404 to a request carrying it is the session gone."""


class _Body(httpx2.AsyncByteStream):
    """The inner response's body, read as the SDK reads it; ``aclose`` gives back its connection."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._response.aiter_raw():
            yield chunk

    async def aclose(self) -> None:
        await self._response.aclose()


class McpTransport(httpx2.AsyncBaseTransport):
    """An ``httpx2`` transport that sends on one of the sidecar's httpx transports (``fast_transport``)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        sent = httpx.Request(
            request.method,
            str(request.url),
            headers=request.headers.raw,
            content=body,
            extensions={"timeout": request.extensions.get("timeout", {})},
        )
        response = await self._inner.handle_async_request(sent)
        response.request = sent
        status = response.status_code
        if request.method == "POST" and status >= 400 and not (status == 404 and SESSION_HEADER in request.headers):
            await response.aread()
            await response.aclose()
            raise httpx.HTTPStatusError(f"HTTP {status}", request=sent, response=response)
        return httpx2.Response(
            status,
            headers=response.headers.raw,
            stream=_Body(response),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": response.reason_phrase.encode("latin-1")},
        )

    async def aclose(self) -> None:
        await self._inner.aclose()
