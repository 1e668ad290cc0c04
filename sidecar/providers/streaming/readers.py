"""A stream's body as (event, data) pairs, by its content type (the format's ``stream_type``).

Server-sent events are read by ``httpx_sse.EventSource``; AWS event-stream frames by botocore's
``EventStreamBuffer`` (no binary framing of our own): a frame that does not parse is ``BrokenFrames``,
as nothing after it can be read. ``drain`` reads what follows a complete reply, briefly.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any

import httpx
from httpx_sse import EventSource

from sidecar.providers.formats.chat import StreamFault
from sidecar.providers.formats.protocol import EVENT_STREAM, SSE

if TYPE_CHECKING:
    from botocore.eventstream import EventStreamMessage

__all__ = ["READERS", "STREAM_DRAIN_S", "BrokenFrames", "drain", "event_stream_events", "sse_events"]

SSE_CONTENT_TYPE = SSE
STREAM_DRAIN_S = 0.05
"""After the reply's end marker, how long the rest of the body (the chunked encoding's last chunk) is
read for, so the connection goes back to the pool; a body still open then is closed with its
connection. Left unread, every stream cost a new connection (a TLS handshake before the next
stream's first token): 90 new sockets per 97 streams, measured."""


class BrokenFrames(Exception):
    """Binary frames that do not parse (a checksum, a length): the stream's framing is lost, nothing after it
    can be read (a mid-stream fault, not one event skipped)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """A ``text/event-stream`` body's events: (its ``event:`` name, its ``data:`` text)."""
    response.encoding = "utf-8"  # an event stream is UTF-8 whatever it says (the SSE standard)
    async for event in EventSource(response).aiter_sse():
        yield event.event, event.data


def _frame_event(message: EventStreamMessage) -> tuple[str, str]:
    headers: Mapping[str, Any] = message.to_response_dict()["headers"]  # (the stubs mistype ``.headers``)
    kind = headers.get(":message-type")
    if kind == "exception":
        return str(headers.get(":exception-type", "")), message.payload.decode("utf-8", "replace")
    if kind == "error":  # the framing's own error: its code and message in headers
        said = {"__type": str(headers.get(":error-code", "")), "message": str(headers.get(":error-message", ""))}
        return "error", json.dumps(said)
    return str(headers.get(":event-type", "")), message.payload.decode("utf-8", "replace")


async def event_stream_events(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """An ``application/vnd.amazon.eventstream`` body's messages, parsed by botocore's ``EventStreamBuffer``
    (prelude, headers, checksums): (its ``:event-type``, or an exception's ``:exception-type``, its payload
    as text). A frame that does not parse is ``BrokenFrames``. botocore is imported by the first such stream."""
    from botocore.eventstream import EventStreamBuffer, ParserError

    buffer = EventStreamBuffer()
    async for chunk in response.aiter_bytes():
        buffer.add_data(chunk)
        while True:
            try:
                message = next(buffer, None)
            except ParserError as exc:
                raise BrokenFrames(f"the stream sent a frame that does not parse ({exc})") from None
            if message is None:
                break
            yield _frame_event(message)


READERS: Mapping[str, Callable[[httpx.Response], AsyncIterator[tuple[str, str]]]] = {
    SSE: sse_events,
    EVENT_STREAM: event_stream_events,
}
"""A stream's reader by its content type (``Upstream.stream_type``): each gives (event, data) pairs."""


async def drain(events: AsyncIterator[Any]) -> None:
    """Read what follows a complete reply, for ``STREAM_DRAIN_S`` at most (see there); its events are
    ignored, and a fault in them is not the reply's."""
    try:
        async with asyncio.timeout(STREAM_DRAIN_S):
            async for _ in events:
                pass
    except (TimeoutError, httpx.HTTPError, StreamFault, BrokenFrames):
        pass
