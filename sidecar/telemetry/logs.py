"""Structured JSON log lines with trace_id and span_id; never a secret.

One JSON object per line on stderr::

    {"time": "2026-01-01T00:00:00.000+00:00", "level": "WARNING", "logger": "sidecar.failures",
     "message": "JSON_PARSE: ...", "trace_id": "4bf9...", "span_id": "00f0...",
     "failure_kind": "JSON_PARSE", "correctable": true, "model": "gpt"}

``trace_id`` / ``span_id`` are the span current when the line was written (the ``chat`` or
``execute_tool`` span of the call, when there is one), so a line leads to its trace and back.
Fields passed as ``extra=`` are kept.

Masking: the secrets given here and every secret the process knows (``masking.known``), in any
form (``redact.secret_forms``), and anything key-shaped. Each value (message, extra fields, the
stack) is masked before it is written as JSON, then the whole line once more: a secret holding
``"`` or ``\\`` is caught before JSON escapes it, and an escaped one after.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, TextIO

from opentelemetry import trace

from sidecar.telemetry.masking import mask

__all__ = ["JsonFormatter", "TextFormatter", "configure_logging"]

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}
QUIET_LOGGERS = ("httpx", "httpcore", "grpc", "opentelemetry", "uvicorn", "mcp", "sse_starlette")
"""Libraries whose INFO lines are noise here (uvicorn's start banner, the MCP SDK's line per request):
WARNING and above only."""


def _plain(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return mask(value, secrets)
    if value is None or isinstance(value, int | float | bool):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, str | int | float | bool) for v in value):
        return [mask(v, secrets) if isinstance(v, str) else v for v in value]
    return mask(str(value), secrets)


class JsonFormatter(logging.Formatter):
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self._secrets = [s for s in secrets if s]

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": mask(record.getMessage(), self._secrets),
        }
        ctx = trace.get_current_span().get_span_context()
        if ctx.is_valid:
            out["trace_id"] = format(ctx.trace_id, "032x")
            out["span_id"] = format(ctx.span_id, "016x")
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_") and key not in out:
                out[key] = _plain(value, self._secrets)
        if record.exc_info:
            out["stack"] = mask(self.formatException(record.exc_info), self._secrets)
        elif record.stack_info:
            out["stack"] = mask(self.formatStack(record.stack_info), self._secrets)
        return mask(json.dumps(out, ensure_ascii=False), self._secrets)


class TextFormatter(logging.Formatter):
    """For a person at a terminal (``telemetry.log_format: text``); masked like the JSON lines."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")
        self._secrets = [s for s in secrets if s]

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        ctx = trace.get_current_span().get_span_context()
        if ctx.is_valid:
            line += f" trace_id={ctx.trace_id:032x} span_id={ctx.span_id:016x}"
        return mask(line, self._secrets)


def configure_logging(
    level: str = "INFO", fmt: str = "json", secrets: Iterable[str] = (), stream: TextIO | None = None
) -> logging.Handler:
    """Send every log line to stderr (or ``stream``), one JSON object (or text line) each."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter(secrets) if fmt == "json" else TextFormatter(secrets))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in QUIET_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return handler
