"""The engine's event-stream reader: botocore's parser over the fake's frames, however the bytes arrive.

``providers.streaming.readers.event_stream_events`` gives each frame of an ``application/vnd.amazon.eventstream``
body as (event, data), the pairs ``StreamDecoder.feed`` takes: an event by its ``:event-type``, an
exception by its ``:exception-type``; a frame cut across reads is read whole once it is; a frame whose
checksum does not hold is ``BrokenFrames`` (the framing is lost: a mid-stream fault, never skipped).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from sidecar.providers.formats.bedrock_converse.fake import frame
from sidecar.providers.streaming.readers import BrokenFrames, event_stream_events

EVENT = {":event-type": "contentBlockDelta", ":content-type": "application/json", ":message-type": "event"}
THROTTLED = {":exception-type": "throttlingException", ":content-type": "application/json",
             ":message-type": "exception"}  # fmt: skip
DELTAS = [{"delta": {"text": t}, "contentBlockIndex": 0} for t in ("Hello", " 東京", " ✓")]


class _Body(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


async def read(chunks: list[bytes]) -> list[tuple[str, str]]:
    response = httpx.Response(200, stream=_Body(chunks))
    return [pair async for pair in event_stream_events(response)]


def body() -> bytes:
    events = b"".join(frame(EVENT, json.dumps(d).encode()) for d in DELTAS)
    return events + frame(THROTTLED, b'{"message":"Too many requests"}')


@pytest.mark.parametrize("size", [1, 7, 64, 100_000])
async def test_frames_read_whole_however_the_bytes_are_cut(size: int) -> None:
    raw = body()
    pairs = await read([raw[i : i + size] for i in range(0, len(raw), size)])
    assert [name for name, _ in pairs] == ["contentBlockDelta"] * 3 + ["throttlingException"]
    assert [json.loads(data) for _, data in pairs[:3]] == DELTAS
    assert json.loads(pairs[3][1]) == {"message": "Too many requests"}


async def test_a_frame_whose_checksum_does_not_hold_is_broken_framing() -> None:
    good = frame(EVENT, json.dumps(DELTAS[0]).encode())
    bad = bytearray(frame(EVENT, json.dumps(DELTAS[1]).encode()))
    bad[-6] ^= 0xFF  # a payload byte: the message CRC no longer holds
    pairs: list[tuple[str, str]] = []

    async def collect() -> None:
        async for pair in event_stream_events(httpx.Response(200, stream=_Body([good + bytes(bad)]))):
            pairs.append(pair)

    with pytest.raises(BrokenFrames, match="does not parse"):
        await collect()
    assert [name for name, _ in pairs] == ["contentBlockDelta"]  # what came before it was read


async def test_a_body_that_ends_inside_a_frame_gives_what_came_whole() -> None:
    raw = body()
    pairs = await read([raw[:-5]])
    assert [name for name, _ in pairs] == ["contentBlockDelta"] * 3
