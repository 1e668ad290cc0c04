"""Ended spans batched, encoded (``otlp_wire``) and sent (``otlp_send``) by one thread: the default export.

    SpanBatcher(protocol, resource)      ``sink`` is ``lean.LeanTracerProvider``'s: each ended span is
                                         encoded at once (``otlp_wire``, on the thread that ended it)
                                         and its bytes appended to a deque
    batcher.force_flush() / shutdown()   everything queued encoded and sent, then answered

Why not the SDK's ``BatchSpanProcessor`` and OTLP exporter: they encode with a protobuf object per
attribute from a ``ReadableSpan`` (about 190 µs a span on the bench machine) while holding the GIL
the event loop needs. ``otlp_wire`` encodes a span in a tenth of that, from values the lean span
already holds. It encodes each span as it ends, on the event loop (a few µs with the memo), and
queues only the bytes: a queue of 2,048 ended spans kept as objects cost the loop about a tenth of
its calls in garbage collection (each span's dicts and lists survive into the old generations),
and bytes are not tracked by the collector. The thread only joins a batch and sends it (the
network wait releases the GIL).
(``offload`` does the same in a child process: opt-in, for a machine with a core to spare.)

The SDK's batch variables apply: OTEL_BSP_SCHEDULE_DELAY (ms, default 5000), OTEL_BSP_MAX_QUEUE_SIZE
(2048; spans beyond it are dropped, counted and logged), OTEL_BSP_MAX_EXPORT_BATCH_SIZE (512). A
batch the collector refuses is dropped and logged (``otlp_send`` has retried it first); serving
goes on. Every span is masked as ``MaskingSpanExporter`` masks (``otlp_wire``), against the secrets
the process knows at encoding time.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Mapping
from typing import Any

from sidecar.telemetry import masking
from sidecar.telemetry.otlp_send import OtlpSender
from sidecar.telemetry.otlp_wire import SpanEncoder

__all__ = ["DEFAULT_BATCH", "DEFAULT_MAX_QUEUE", "DEFAULT_SCHEDULE_DELAY_MS", "SpanBatcher", "env_int"]

_log = logging.getLogger("sidecar.telemetry")
DEFAULT_SCHEDULE_DELAY_MS = 5000
DEFAULT_MAX_QUEUE = 2048
DEFAULT_BATCH = 512


def env_int(name: str, default: int) -> int:
    """A positive integer from the environment, else ``default`` (as the SDK reads OTEL_BSP_*)."""
    try:
        value = int(os.environ.get(name, "").strip() or default)
    except ValueError:
        return default
    return value if value > 0 else default


class SpanBatcher:
    """The queue, the batches and the thread that encodes and sends them."""

    masked = True
    """Every span is masked as ``MaskingSpanExporter`` masks (``otlp_wire``)."""

    def __init__(
        self, protocol: str, resource: Mapping[str, Any] | None = None, schema_url: str = "", sender: Any = None
    ) -> None:
        self.protocol = "http/protobuf" if protocol.startswith("http") else "grpc"
        self.schedule_delay_millis = env_int("OTEL_BSP_SCHEDULE_DELAY", DEFAULT_SCHEDULE_DELAY_MS)
        self._delay_s = self.schedule_delay_millis / 1000
        self.max_queue = env_int("OTEL_BSP_MAX_QUEUE_SIZE", DEFAULT_MAX_QUEUE)
        self.batch = min(env_int("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", DEFAULT_BATCH), self.max_queue)
        self._queue: deque[tuple[Any, bytes]] = deque()
        self._wake = threading.Event()
        self._io = threading.Lock()  # one batch encoded and sent at a time (the thread, or a flush)
        self._done = False
        self._dropped = 0
        self._secrets = masking.known()
        self._encoder = SpanEncoder(resource or {}, schema_url)
        self.sender: OtlpSender = sender if sender is not None else OtlpSender.from_env(self.protocol)
        self._thread = threading.Thread(target=self._run, name="sidecar-span-export", daemon=True)
        self._thread.start()

    def sink(self, fields: tuple[Any, ...]) -> None:
        """Encode an ended span and queue its bytes (a full queue drops and counts)."""
        queue = self._queue
        if self._done:
            return
        if len(queue) >= self.max_queue:
            self._dropped += 1
            return
        secrets = masking.known()
        if secrets is not self._secrets:  # a value seen before may mask differently now
            self._secrets = secrets
            self._encoder.forget()
        queue.append((fields[11], self._encoder.span(fields)))
        if len(queue) >= self.batch:
            self._wake.set()

    def _run(self) -> None:
        while not self._done:
            self._wake.wait(self._delay_s)
            self._wake.clear()
            with self._io:
                self._drain()

    def _drain(self) -> bool:
        """Send everything queued (``_io`` held); whether every batch was taken."""
        queue = self._queue
        ok = True
        while queue:
            batch = [queue.popleft() for _ in range(min(self.batch, len(queue)))]
            ok = self.sender.send(self._encoder.request_of(batch)) and ok
        if self._dropped:
            _log.warning("span queue full: %d spans dropped", self._dropped)
            self._dropped = 0
        return ok

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        with self._io:
            return self._drain()

    def shutdown(self) -> None:
        if self._done:
            return
        self.force_flush()
        self._done = True
        self._wake.set()
        self._thread.join(5)
        self.sender.close()
