"""The lean tracer's span (``lean.LeanTracerProvider``): a recording span as plain fields, and the SDK's limits
on what it records.

``LeanSpan`` implements the API's ``Span`` with slots, a dict of attributes and a list of events;
when it ends it hands the provider's ``sink`` one tuple of plain values (``Fields``). Its values
follow the SDK's rules: ``Limits`` are the SDK's ``SpanLimits`` (the attribute, event and link
counts, the value lengths); ``clean_attributes`` keeps what OpenTelemetry carries (str, bool, int,
float and homogeneous sequences of them), cuts strings to the length and drops the rest, logged
once per key (``warn_once``).
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.sdk.trace import SpanLimits
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode
from opentelemetry.util.types import Attributes

if TYPE_CHECKING:
    from sidecar.telemetry.lean import LeanTracerProvider

__all__ = ["Fields", "LeanSpan", "Limits", "clean_attributes", "warn_once"]

_log = logging.getLogger("sidecar.telemetry")

Fields = tuple[Any, ...]
"""An ended span: name, context (a ``SpanContext``), parent (one, or None), kind (the SDK's value),
start, end (ns), attributes (a dict), events ((name, attributes, ns)), links ((``SpanContext``,
attributes)), status code (the SDK's value), status description, scope (name, version, schema_url)."""

_PLAIN = (str, bool, int, float)
_UNSET = StatusCode.UNSET.value
_warned: set[str] = set()


def warn_once(key: str, message: str, *args: object) -> None:
    if key not in _warned and len(_warned) < 1000:
        _warned.add(key)
        _log.warning(message, *args)


class Limits:
    __slots__ = ("attributes", "event_attributes", "events", "length", "link_attributes", "links", "other_length")

    def __init__(self, limits: SpanLimits) -> None:
        self.attributes = limits.max_span_attributes
        self.events = limits.max_events
        self.links = limits.max_links
        self.event_attributes = limits.max_event_attributes
        self.link_attributes = limits.max_link_attributes
        self.length = limits.max_span_attribute_length
        self.other_length = limits.max_attribute_length  # events' and links' (the SDK's split)


def _clean(key: str, value: Any, length: int | None) -> Any:
    """The value as OTLP carries it, or None when the SDK would drop it."""
    kind = type(value)
    if kind is str:
        return value if length is None or len(value) <= length else value[:length]
    if kind in _PLAIN:
        return value
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray)):
        items = tuple(value)
        kinds = {type(v) for v in items if v is not None}
        if len(kinds) <= 1 and kinds <= set(_PLAIN):
            if length is not None and kinds == {str}:
                return tuple(v if v is None or len(v) <= length else v[:length] for v in items)
            return items
    if isinstance(value, _PLAIN):  # a subclass (an IntEnum, a str enum): its plain value
        for plain in _PLAIN:
            if isinstance(value, plain):
                return plain(value)
    warn_once(f"attr:{key}", "span attribute %s dropped: %s is not an OpenTelemetry attribute value", key, kind)
    return None


def clean_attributes(attributes: Attributes, limit: int | None, length: int | None) -> dict[str, Any]:
    if not attributes:
        return {}
    if length is None and (limit is None or len(attributes) <= limit):
        out = dict(attributes)  # the common case: copy, then clean only what is not plain
        for key, value in attributes.items():
            kind = type(value)
            if kind is not str and kind is not int and kind is not float and kind is not bool:
                cleaned = _clean(key, value, length)
                if cleaned is None:
                    del out[key]
                else:
                    out[key] = cleaned
        return out
    out = {}
    for key, value in attributes.items():
        if limit is not None and len(out) >= limit and key not in out:
            break
        cleaned = _clean(key, value, length)
        if cleaned is not None:
            out[key] = cleaned
    return out


class LeanSpan(trace.Span):
    """A recording span: plain fields, handed to the provider's sink as ``Fields`` when it ends."""

    __slots__ = (
        "_attributes",
        "_context",
        "_end",
        "_events",
        "_kind",
        "_limits",
        "_links",
        "_name",
        "_parent",
        "_provider",
        "_record_exception",
        "_scope",
        "_set_status_on_exception",
        "_start",
        "_status",
        "_status_description",
    )

    def __init__(  # noqa: PLR0913 - a span's fields, given once by the tracer
        self,
        provider: LeanTracerProvider,
        name: str,
        context: SpanContext,
        parent: SpanContext | None,
        kind: SpanKind,
        attributes: dict[str, Any],
        links: list[tuple[SpanContext, dict[str, Any]]],
        start: int,
        scope: tuple[str, str | None, str | None],
        record_exception: bool,
        set_status_on_exception: bool,
    ) -> None:
        self._provider = provider
        self._limits = provider.limits
        self._name = name
        self._context = context
        self._parent = parent
        self._kind = kind
        self._attributes = attributes
        self._events: list[tuple[str, dict[str, Any] | None, int]] = []
        self._links = links
        self._start = start
        self._end: int | None = None
        self._status = _UNSET
        self._status_description: str | None = None
        self._scope = scope
        self._record_exception = record_exception
        self._set_status_on_exception = set_status_on_exception

    # The API.

    def get_span_context(self) -> SpanContext:
        return self._context

    def is_recording(self) -> bool:
        return self._end is None

    def _ended(self, what: str) -> bool:
        if self._end is None:
            return False
        warn_once(f"ended:{what}", "%s on an ended span ignored", what)
        return True

    def set_attribute(self, key: str, value: Any) -> None:
        if self._end is not None:
            self._ended("set_attribute")
            return
        self._set(key, value)

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        if self._end is not None:
            self._ended("set_attributes")
            return
        mine = self._attributes
        limits = self._limits
        if limits.length is None and (limits.attributes is None or len(mine) + len(attributes) <= limits.attributes):
            for key, value in attributes.items():  # the common case, inline
                kind = type(value)
                if kind is str or kind is int or kind is float or kind is bool:
                    mine[key] = value
                else:
                    self._set(key, value)
            return
        for key, value in attributes.items():
            self._set(key, value)

    def _set(self, key: str, value: Any) -> None:
        attributes = self._attributes
        limits = self._limits
        kind = type(value)
        if kind is str:
            if limits.length is not None and len(value) > limits.length:
                value = value[: limits.length]
        elif kind is not int and kind is not float and kind is not bool:
            value = _clean(key, value, limits.length)
            if value is None:
                return
        if limits.attributes is not None and len(attributes) >= limits.attributes and key not in attributes:
            return
        attributes[key] = value

    def add_event(self, name: str, attributes: Attributes = None, timestamp: int | None = None) -> None:
        if self._ended("add_event"):
            return
        limits = self._limits
        if limits.events is not None and len(self._events) >= limits.events:
            return
        attrs = clean_attributes(attributes, limits.event_attributes, limits.other_length) if attributes else None
        self._events.append((name, attrs, time.time_ns() if timestamp is None else timestamp))

    def add_link(self, context: SpanContext, attributes: Attributes = None) -> None:
        if self._ended("add_link") or not context.is_valid:
            return
        limits = self._limits
        if limits.links is not None and len(self._links) >= limits.links:
            return
        self._links.append((context, clean_attributes(attributes, limits.link_attributes, limits.other_length)))

    def update_name(self, name: str) -> None:
        if not self._ended("update_name"):
            self._name = name

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        if self._ended("set_status"):
            return
        if isinstance(status, Status):
            code, text = status.status_code, status.description
        else:
            code, text = status, description
        if self._status == StatusCode.OK.value:
            return  # OK is final, as the SDK keeps it
        if code is StatusCode.UNSET:
            return
        self._status = code.value
        self._status_description = text if code is StatusCode.ERROR else None

    def record_exception(
        self,
        exception: BaseException,
        attributes: Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        stack = "".join(traceback.format_exception(type(exception), value=exception, tb=exception.__traceback__))
        attrs: dict[str, Any] = {
            "exception.type": type(exception).__qualname__,
            "exception.message": str(exception),
            "exception.stacktrace": stack,
            "exception.escaped": str(escaped),
        }
        if attributes:
            attrs.update(attributes)
        self.add_event("exception", attrs, timestamp)

    def end(self, end_time: int | None = None) -> None:
        if self._end is not None:
            warn_once("end", "a span ended twice: the second end ignored")
            return
        self._end = end = time.time_ns() if end_time is None else end_time
        self._provider.sink(
            (
                self._name,
                self._context,
                self._parent,
                self._kind.value,
                self._start,
                end,
                self._attributes,
                self._events,
                self._links,
                self._status,
                self._status_description,
                self._scope,
            )
        )

    def __exit__(self, exc_type: Any, exc_val: BaseException | None, exc_tb: Any) -> None:
        if exc_val is not None and self.is_recording():
            if self._record_exception:
                self.record_exception(exc_val, escaped=True)
            if self._set_status_on_exception:
                self.set_status(Status(StatusCode.ERROR, f"{exc_type.__name__}: {exc_val}"))
        self.end()

    def __repr__(self) -> str:
        return f"LeanSpan(name={self._name!r}, context={self._context!r})"
