"""The one boundary for transport failures: httpx exceptions become a TransportFault.

httpx.ConnectError (name resolution)   -> DNS       never reached the service
httpx.ConnectError                     -> REFUSED   never reached the service
httpx.ConnectTimeout, PoolTimeout      -> TIMEOUT   never reached the service
httpx.ReadTimeout, WriteTimeout        -> TIMEOUT   may have reached it
httpx.RemoteProtocolError, Read/WriteError, other TransportError -> RESET  may have reached it
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from sidecar.core.kinds import TransportFault

__all__ = ["Fault", "fault_of", "read_capped", "text_of"]

_DNS_WORDS = ("name or service not known", "nodename nor servname", "name resolution", "getaddrinfo", "no address")


@dataclass(frozen=True, slots=True)
class Fault:
    """A transport failure: which fault, whether the request may have reached the service, and a detail."""

    fault: TransportFault
    may_have_reached: bool
    detail: str


async def read_capped(response: httpx.Response, limit: int) -> bytes:
    """A streamed response's body, at most ``limit`` bytes (the rest is not read)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(chunks)[:limit]


def text_of(response: httpx.Response, raw: bytes) -> str:
    """A body as text: UTF-8 unless the content type names a charset (httpx's ``encoding`` then).

    The same answer as ``raw.decode(response.encoding or "utf-8")`` (httpx's default is UTF-8), without
    its content-type parse (an ``email.message.Message`` per response) when there is no charset to read.
    """
    if "charset" in response.headers.get("content-type", "").lower():
        return raw.decode(response.encoding or "utf-8", "replace")
    return raw.decode("utf-8", "replace")


def fault_of(exc: httpx.HTTPError) -> Fault:
    text = str(exc).lower()
    if isinstance(exc, httpx.ConnectError):
        if any(w in text for w in _DNS_WORDS):
            return Fault(TransportFault.DNS, False, "the host name did not resolve")
        return Fault(TransportFault.REFUSED, False, "connection refused")
    if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
        return Fault(TransportFault.TIMEOUT, False, "no connection in time")
    if isinstance(exc, httpx.TimeoutException):
        return Fault(TransportFault.TIMEOUT, True, "no response in time")
    if isinstance(exc, httpx.DecodingError):
        return Fault(TransportFault.RESET, True, "the response could not be decoded")
    return Fault(TransportFault.RESET, True, "connection reset before a complete response")
