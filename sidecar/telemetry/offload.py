"""Spans exported by a child process: OTLP encoding and sending leave the serving process's GIL.

The default export (``SIDECAR_TRACES_OFFLOAD=false`` keeps it in a thread, ``batching.py``):

    OffloadSpanProcessor(protocol, resource)
                                     each ended span (a ``lean.LeanSpan``'s fields, or an SDK span's
                                     copied into the same tuple) is queued: a deque append on the
                                     event loop; a thread pickles batches down a pipe to the child
    python -m sidecar.telemetry.offload PROTOCOL
                                     the child: encodes each batch, masked, straight to OTLP bytes
                                     (``otlp_wire.SpanEncoder``) and sends them (``otlp_send.OtlpSender``,
                                     ``grpc`` or ``http/protobuf``), configured by the same
                                     OTEL_EXPORTER_OTLP_* variables (it inherits the environment)

Why: in the serving process, encoding holds the GIL the event loop needs. Here the serving process
only turns each span's contexts into plain tuples and pickles the batch (C); the child does the rest,
on another core (BENCHMARKS.md, the tracing rows).

The child is told the process's secrets (``masking.known()``) with every batch after they change,
over the same pipe, so what it exports is masked exactly as ``MaskingSpanExporter`` masks in
process. The pipe's frames are a 4-byte length and a pickle; the child answers a flush with one
line on its stdout. The batch processor's variables apply: OTEL_BSP_SCHEDULE_DELAY (ms, default
5000), OTEL_BSP_MAX_QUEUE_SIZE (2048; spans beyond it are dropped and counted, as the SDK does),
OTEL_BSP_MAX_EXPORT_BATCH_SIZE (512). If the child dies, spans are dropped (logged once); serving
goes on.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import struct
import subprocess
import sys
import threading
from collections import deque
from typing import IO, Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from sidecar.telemetry import masking
from sidecar.telemetry.batching import DEFAULT_BATCH, DEFAULT_MAX_QUEUE, DEFAULT_SCHEDULE_DELAY_MS
from sidecar.telemetry.batching import env_int as _env_int

__all__ = ["OffloadSpanProcessor"]

_log = logging.getLogger("sidecar.telemetry")
_FRAME = struct.Struct("!I")


def _plain(attributes: Any) -> dict[str, Any] | None:
    """A span's, event's or link's attributes as a dict (the SDK's mapping copies itself in C)."""
    if not attributes:
        return None
    copy = getattr(attributes, "copy", None)
    if copy is None:
        return dict(attributes)
    out = copy()
    return out if isinstance(out, dict) else dict(out)


def _context(ctx: Any) -> tuple[int, int, int, tuple[tuple[str, str], ...], bool] | None:
    if ctx is None:
        return None
    state = ctx.trace_state
    return (ctx.trace_id, ctx.span_id, int(ctx.trace_flags), tuple(state.items()) if state else (), ctx.is_remote)


def _fields(span: ReadableSpan) -> tuple[Any, ...]:
    """A span as plain values (picklable, no locks): everything the OTLP encoder reads but the resource."""
    scope = span.instrumentation_scope
    status = span.status
    return (
        span.name,
        _context(span.context),
        _context(span.parent),
        span.kind.value,
        span.start_time,
        span.end_time,
        _plain(span.attributes),
        [(e.name, _plain(e.attributes), e.timestamp) for e in span.events],
        [(_context(link.context), _plain(link.attributes)) for link in span.links],
        status.status_code.value,
        status.description,
        (scope.name, scope.version, scope.schema_url) if scope is not None else None,
    )


def _picklable(fields: tuple[Any, ...]) -> tuple[Any, ...]:
    """A lean span's fields with its contexts as plain tuples (``SpanContext`` does not pickle)."""
    links = [(_context(link_ctx), attrs) for link_ctx, attrs in fields[8]]
    return (fields[0], _context(fields[1]), _context(fields[2]), *fields[3:8], links, *fields[9:])


def _revived(fields: tuple[Any, ...]) -> tuple[Any, ...]:
    """``_picklable``'s and ``_fields``'s tuples back to the fields ``otlp_wire`` encodes (in the child)."""
    from opentelemetry.trace import SpanContext, TraceFlags, TraceState

    def context(values: Any) -> SpanContext | None:
        if values is None:
            return None
        trace_id, span_id, flags, state, remote = values
        return SpanContext(trace_id, span_id, remote, TraceFlags(flags), TraceState(state))

    links = [(context(link_ctx), attrs) for link_ctx, attrs in fields[8]]
    return (fields[0], context(fields[1]), context(fields[2]), *fields[3:8], links, *fields[9:])


class OffloadSpanProcessor(SpanProcessor):
    """Queues ended spans and sends them in batches to a child process that masks, encodes and exports."""

    masked = True
    """Every span the child exports is masked as ``MaskingSpanExporter`` masks (``otlp_wire``)."""

    def __init__(self, protocol: str, resource: Any) -> None:
        self.protocol = protocol
        self.schedule_delay_millis = _env_int("OTEL_BSP_SCHEDULE_DELAY", DEFAULT_SCHEDULE_DELAY_MS)
        self._delay_s = self.schedule_delay_millis / 1000
        self._max_queue = _env_int("OTEL_BSP_MAX_QUEUE_SIZE", DEFAULT_MAX_QUEUE)
        self._batch = min(_env_int("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", DEFAULT_BATCH), self._max_queue)
        self._queue: deque[ReadableSpan | tuple[Any, ...]] = deque()
        self._wake = threading.Event()
        self._io = threading.Lock()  # one writer of the pipe at a time (the thread, or a flush)
        self._done = False
        self._dropped = 0
        self._broken = False
        self._secrets_sent: tuple[str, ...] | None = None
        self._flushes = 0
        self._acked = 0
        self._ack = threading.Condition()
        self._child = subprocess.Popen(
            [sys.executable, "-P", "-m", "sidecar.telemetry.offload", protocol],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
        )
        self._send(("resource", dict(resource.attributes), resource.schema_url))
        self._thread = threading.Thread(target=self._run, name="sidecar-span-offload", daemon=True)
        self._thread.start()
        threading.Thread(target=self._acks, name="sidecar-span-offload-acks", daemon=True).start()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        if not span.context.trace_flags.sampled:
            return
        self.sink(span)

    def sink(self, span: ReadableSpan | tuple[Any, ...]) -> None:
        """Queue an ended span: the SDK's, or a ``lean.LeanSpan``'s fields (already plain)."""
        if self._done:
            return
        queue = self._queue
        if len(queue) >= self._max_queue:
            self._dropped += 1
            return
        queue.append(span)
        if len(queue) >= self._batch:
            self._wake.set()

    def _run(self) -> None:
        while not self._done:
            self._wake.wait(self._delay_s)
            self._wake.clear()
            with self._io:
                self._drain()

    def _drain(self) -> None:
        """Send everything queued (called with ``_io`` held)."""
        queue = self._queue
        while queue:
            batch: list[tuple[Any, ...]] = []
            while queue and len(batch) < self._batch:
                item = queue.popleft()
                batch.append(_picklable(item) if isinstance(item, tuple) else _fields(item))
            secrets = masking.known()
            if secrets != self._secrets_sent:
                self._send(("secrets", secrets))
                self._secrets_sent = secrets
            self._send(("spans", batch))
        if self._dropped:
            _log.warning("span queue full: %d spans dropped", self._dropped)
            self._dropped = 0

    def _send(self, message: tuple[Any, ...]) -> None:
        if self._broken:
            return
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        pipe = self._child.stdin
        try:
            assert pipe is not None
            pipe.write(_FRAME.pack(len(data)) + data)
            pipe.flush()
        except (BrokenPipeError, OSError, ValueError):
            self._broken = True
            _log.warning("the span export process is gone (exit %s): spans are dropped", self._child.poll())

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        with self._io:
            self._drain()
            self._flushes += 1
            self._send(("flush", self._flushes))
            if self._broken:
                return False
            return self._await_ack(self._flushes, timeout_millis / 1000)

    def _acks(self) -> None:
        """Read the child's answers to flushes (one number a line) until it exits."""
        out = self._child.stdout
        assert out is not None
        for line in out:
            if line.strip().isdigit():
                with self._ack:
                    self._acked = max(self._acked, int(line))
                    self._ack.notify_all()

    def _await_ack(self, number: int, timeout_s: float) -> bool:
        with self._ack:
            return self._ack.wait_for(lambda: self._acked >= number, timeout_s)

    def shutdown(self) -> None:
        if self._done:
            return
        self.force_flush()
        self._done = True
        self._wake.set()
        self._thread.join(5)
        with self._io:
            if self._child.stdin is not None:
                with contextlib.suppress(OSError):
                    self._child.stdin.close()
        try:
            self._child.wait(30)
        except subprocess.TimeoutExpired:
            self._child.kill()
            self._child.wait()


# The child.


def _read(stream: IO[bytes], size: int) -> bytes | None:
    data = stream.read(size)
    return data if data is not None and len(data) == size else None


def child(protocol: str) -> int:
    """Read frames from stdin until it closes; encode and send every batch of spans; answer each flush."""
    from sidecar.telemetry.otlp_send import OtlpSender
    from sidecar.telemetry.otlp_wire import SpanEncoder

    sender = OtlpSender.from_env(protocol)
    encoder = SpanEncoder()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    try:
        while (head := _read(stdin, _FRAME.size)) is not None:
            body = _read(stdin, _FRAME.unpack(head)[0])
            if body is None:
                break
            message = pickle.loads(body)
            match message[0]:
                case "spans":
                    if message[1]:
                        sender.send(encoder.request([_revived(f) for f in message[1]]))
                case "secrets":
                    masking.register(message[1])
                    encoder.forget()
                case "resource":
                    encoder.resource(message[1], message[2] or "")
                case "flush":
                    stdout.write(b"%d\n" % message[1])
                    stdout.flush()
    finally:
        sender.close()
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    sys.exit(child(sys.argv[1] if len(sys.argv) > 1 else "grpc"))
