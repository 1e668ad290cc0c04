"""Streamed replies: a reply cut into deltas, sent as server-sent events, with scripted mid-stream faults.

A request with ``"stream": true`` gets the same reply its non-streaming twin would get, as a
``text/event-stream`` body flushed event by event (chunked transfer-encoding), cut into deltas
as :mod:`._sse` says.  A step's stream fields can make that stream go wrong part way.

Step fields (provider only; a request without ``stream: true`` ignores them):

    stream_fault    what goes wrong after ``after_deltas`` deltas (see below)
    after_deltas    how many deltas go out first (default: half of the reply's, at least 1);
                    0 is right after the ``open`` events; past the last delta, just before ``close``
    stall_ms        with ``stall``: silence this long, then the rest; absent: silence until the client leaves
    delta_delay_ms  a wait before every delta (time to first token, slow readers)
    delta_chars     cut text and arguments into pieces of exactly this many chars instead

    stream_fault:   after the first ``after_deltas`` deltas ...
    overloaded      ... an error event (Anthropic ``event: error`` overloaded_error; OpenAI ``data: {"error"}``),
                    then the body ends; ``message`` / ``extra_error_fields`` shape the error
    server_error    ... the same with the wire's server error (api_error / server_error)
    content_policy  ... the same with the wire's content-policy refusal (the error presets of that name)
    content_filter  ... the same with Azure's content filter (``categories``) / Anthropic's
    drop            ... the connection closes (FIN) with the chunked body unfinished
    reset           ... the connection aborts (RST) with the body unfinished
    stall           ... no bytes (``stall_ms``, or until the client leaves)
    end_early       ... the body ends cleanly, with no finish event and no end marker
    no_end_marker   the whole reply, its finish and usage, but the body ends without the end marker
                    (OpenAI ``[DONE]``, Anthropic ``message_stop``); ``after_deltas`` does not apply
    garbled         ... the next event arrives with its data cut in half (not JSON), then the rest
                    (``garbled_events``: that many events in a row, each cut so)
    unknown_event   ... an event clients must ignore (Anthropic: a new event type; OpenAI: an SSE
                    comment and a chunk with empty ``choices`` and a new field), then the rest
    truncated       the reply itself stops after ``after_deltas`` deltas and finishes with
                    ``length`` (OpenAI) / ``max_tokens`` (Anthropic); the stream ends properly

Replies of any kind stream (the brain's, ``reply``, ``truncated``, ``bad_json``,
``missing_fields``, ``refusal``); a step with only stream fields streams the brain's reply.
Error presets, raw ``body`` steps and error statuses answer with their usual JSON even when the
request asked for a stream, as providers do before a stream begins (so ``stream_fault`` cannot
go with them, nor with ``fault``).  The base fields still apply: ``delay_ms`` holds back the
response head (time to first byte), ``headers`` / ``retry_after`` add headers, ``fault``
``reset`` / ``hang`` come before any byte, and ``drop_mid_body`` sends half the events, then
closes.  Each delta waits ``delta_delay_ms`` after the one before, so a 10-delta reply with
``delta_delay_ms: 100`` takes about a second to stream.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ._brain import Reply, ToolCall
from ._http import Chunk, Response, StreamEnd
from ._sse import Piece, Plan, SseEvent, plan_for
from ._wire import Exchange, Wire

__all__ = ["STREAM_FAULTS", "STREAM_PARAMS", "StreamOptions", "render_stream"]

STREAM_PARAMS = ("stream_fault", "after_deltas", "stall_ms", "delta_delay_ms", "delta_chars", "garbled_events")
ERROR_FAULTS = ("overloaded", "server_error", "content_policy", "content_filter")  # the wire's preset error
STREAM_FAULTS = (
    *ERROR_FAULTS,
    "drop",
    "reset",
    "stall",
    "end_early",
    "no_end_marker",
    "garbled",
    "unknown_event",
    "truncated",
)


@dataclass(frozen=True)
class StreamOptions:
    fault: str | None = None
    after_deltas: int | None = None
    stall_ms: float | None = None
    delta_delay_ms: float = 0.0
    delta_chars: int | None = None
    garbled_events: int = 1

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> StreamOptions:
        """Read the stream fields of a step; ``ValueError`` when one is malformed."""
        fault = params.get("stream_fault")
        if fault is not None and fault not in STREAM_FAULTS:
            raise ValueError(f"unknown stream_fault {fault!r} (expected one of: {', '.join(STREAM_FAULTS)})")
        after = _count(params, "after_deltas", 0)
        chars = _count(params, "delta_chars", 1)
        stall = _millis(params, "stall_ms")
        if fault is None and after is not None:
            raise ValueError("'after_deltas' needs a 'stream_fault'")
        if stall is not None and fault != "stall":
            raise ValueError("'stall_ms' goes with stream_fault 'stall'")
        garbled = _count(params, "garbled_events", 1)
        if garbled is not None and fault != "garbled":
            raise ValueError("'garbled_events' goes with stream_fault 'garbled'")
        return cls(fault, after, stall, _millis(params, "delta_delay_ms") or 0.0, chars, garbled or 1)

    def cut(self, plan: Plan) -> int:
        """How many deltas go out before the fault."""
        if self.after_deltas is not None:
            return self.after_deltas
        return min(plan.deltas, max(1, plan.deltas // 2))


def _count(params: Mapping[str, Any], key: str, least: int) -> int | None:
    value = params.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{key!r} must be an integer >= {least}, got {value!r}")
    return value


def _millis(params: Mapping[str, Any], key: str) -> float | None:
    value = params.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"{key!r} must be a non-negative number of milliseconds, got {value!r}")
    return float(value)


def _cut_reply(reply: Reply, pieces: Sequence[Piece], keep: int) -> Reply:
    """The reply as far as its first ``keep`` deltas, finishing with ``length``."""
    kept: list[Piece] = []
    seen = 0
    for piece in pieces:
        if piece.is_delta and seen == keep:
            break
        kept.append(piece)
        seen += piece.is_delta
    text = "".join(p.text for p in kept if p.kind == "text")
    refusal = "".join(p.text for p in kept if p.kind == "refusal")
    calls = [
        ToolCall(p.text, "".join(a.text for a in kept if a.kind == "args" and a.index == p.index))
        for p in kept
        if p.kind == "tool"
    ]
    return replace(
        reply,
        text=None if reply.text is None else text,
        refusal=None if reply.refusal is None else refusal,
        tool_calls=calls,
        finish="length",
    )


def _cut_index(events: Sequence[SseEvent], after: int) -> int:
    """Where the fault goes: right after the ``after``-th delta, never past the ``close`` events."""
    seen = 0
    for i, event in enumerate(events):
        if event.part == "close" or (after == 0 and event.part != "open"):
            return i
        if event.part == "delta":
            seen += 1
            if seen == after:
                return i + 1
    return len(events)


def _error_event(fault: str, wire: Wire, ex: Exchange, params: Mapping[str, Any]) -> SseEvent:
    spec = wire.preset_error(fault, ex)
    assert spec is not None, fault
    if isinstance(params.get("message"), str):
        spec = replace(spec, message=params["message"])
    body = wire.error_body(spec, ex, in_stream=True)
    wire.error_fields(body).update(params.get("extra_error_fields") or {})
    return wire.stream_error(body, ex)


def _faulted(
    events: list[SseEvent], opts: StreamOptions, plan: Plan, wire: Wire, ex: Exchange, params: Mapping[str, Any]
) -> tuple[list[SseEvent], StreamEnd, int]:
    """The events to send, how the body ends, and the index of an event to delay by ``stall_ms``."""
    fault = opts.fault
    if fault is None or fault == "truncated":
        return events, StreamEnd.COMPLETE, -1
    if fault == "no_end_marker":
        return events[:-1], StreamEnd.COMPLETE, -1
    at = _cut_index(events, opts.cut(plan))
    head, rest = events[:at], events[at:]
    if fault in ERROR_FAULTS:
        return [*head, _error_event(fault, wire, ex, params)], StreamEnd.COMPLETE, -1
    if fault == "stall":
        if opts.stall_ms is None:
            return head, StreamEnd.HANG, -1
        return events, StreamEnd.COMPLETE, at
    if fault == "garbled":
        k = opts.garbled_events
        broken = [replace(e, data=e.data[: len(e.data) // 2], part="body") for e in rest[:k]]
        return [*head, *broken, *rest[k:]], StreamEnd.COMPLETE, -1
    if fault == "unknown_event":
        return [*head, *wire.unknown_events(ex), *rest], StreamEnd.COMPLETE, -1
    ends = {"drop": StreamEnd.DROP, "reset": StreamEnd.RESET, "end_early": StreamEnd.COMPLETE}
    return head, ends[fault], -1


def render_stream(reply: Reply, wire: Wire, ex: Exchange, params: Mapping[str, Any]) -> Response:
    """``reply`` as a 200 ``text/event-stream`` response on ``wire``, with the step's stream fault."""
    opts = StreamOptions.from_params(params)
    plan = plan_for(reply, ex.conversation, opts.delta_chars)
    if opts.fault == "truncated":
        plan = plan_for(_cut_reply(reply, plan.pieces, opts.cut(plan)), ex.conversation, opts.delta_chars)
    events, end, stall_at = _faulted(wire.stream_events(plan, ex, int(time.time())), opts, plan, wire, ex, params)
    chunks = []
    for i, event in enumerate(events):
        delay = opts.delta_delay_ms if event.part == "delta" else 0.0
        if i == stall_at:
            delay += opts.stall_ms or 0.0
        chunks.append(Chunk(wire.encode(event), delay))
    headers = wire.headers(ex, 200)
    headers.update({"content-type": wire.stream_content_type, "cache-control": "no-cache"})
    return Response(status=200, headers=headers, stream=tuple(chunks), stream_end=end)
