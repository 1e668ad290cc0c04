"""The process's secrets, and the masking every span and metric label passes on its way out.

    register(secrets)       a sidecar's ``Config.secrets``, added when it starts (``SidecarApp``)
    known()                 every secret registered in this process, longest first
    mask(text)              ``redact.mask_keys`` with ``known()``: secrets in any form, key shapes
    mask_label(value)       ``mask`` for a metric label value, cached (labels are a bounded set)
    MaskingSpanExporter     wraps an exporter: every span is exported as a masked copy (``masking_export``,
                            the SDK's span types: loaded when first named, so a sidecar with tracing
                            off never imports the SDK's trace package for it)

The tracer and meter providers are the process's, so the secrets they must not carry are the
process's too: every config a sidecar here was started from adds its secrets, and none is
removed (spans of a stopped sidecar may still wait in a batch to be exported).

Spans are masked in the exporter, not where attributes are set: an ended span's attributes
cannot be changed through the SDK's public API, and the exporter is the one door every span goes
out by, whoever set its attributes (our code, the server interceptor, ``record_exception``).
The copy carries the name, every attribute, every event's name and attributes, every link's
attributes and the status description masked; ids, times, kind and resource are unchanged.
With a batch processor the masking runs in the exporter's thread, off the call's path; but that
thread holds the GIL while it masks, so short values (most repeat on every span: names, URLs,
methods) are masked once and remembered, keyed by the registered secrets' generation.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from opentelemetry.util.types import Attributes, AttributeValue

from sidecar.core.redact import MIN_SECRET_CHARS, mask_keys

if TYPE_CHECKING:
    from sidecar.telemetry.masking_export import MaskingSpanExporter

__all__ = ["MaskingSpanExporter", "known", "mask", "mask_attributes", "mask_label", "mask_value", "register"]

LABEL_CACHE_SIZE = 4096
"""Masked metric label values remembered (model, tool and service names: a bounded set)."""

_lock = threading.Lock()
_known: tuple[str, ...] = ()
_generation = 0


def register(secrets: Iterable[str]) -> None:
    """Mask these secrets in every span, metric label and log line of this process from now on."""
    global _known, _generation
    wanted = {s for s in secrets if len(s) >= MIN_SECRET_CHARS}
    with _lock:
        if wanted <= set(_known):
            return
        _known = tuple(sorted(wanted | set(_known), key=lambda s: (-len(s), s)))
        _generation += 1


def known() -> tuple[str, ...]:
    """Every secret registered in this process, longest first."""
    return _known


def mask(text: str, extra: Iterable[str] = ()) -> str:
    """``text`` with every known secret (and ``extra``) masked in any form, and key shapes masked."""
    return mask_keys(text, (*extra, *_known) if extra else _known)


def mask_label(value: str) -> str:
    """A metric label value with every known secret masked (the answer cached per value)."""
    return _mask_label(value, _generation)


@lru_cache(maxsize=LABEL_CACHE_SIZE)
def _mask_label(value: str, generation: int) -> str:
    return mask(value)


VALUE_CACHE_SIZE = 8192
"""Masked short attribute values remembered: most repeat on every span (names, URLs, methods, kinds)."""
CACHED_VALUE_CHARS = 256
"""Attribute values up to this long are masked through the cache; longer ones (content) each time."""


@lru_cache(maxsize=VALUE_CACHE_SIZE)
def _mask_short(value: str, generation: int) -> str:
    return mask(value)


def _mask_value(value: str) -> str:
    """``mask`` of an attribute value; a short one answered from the cache (keyed by the secrets' generation)."""
    if len(value) <= CACHED_VALUE_CHARS:
        return _mask_short(value, _generation)
    return mask(value)


def mask_value(value: str) -> str:
    """A span's name or string attribute value masked as ``MaskingSpanExporter`` masks it (short ones cached)."""
    return _mask_value(value)


def _value(value: AttributeValue) -> AttributeValue:
    if isinstance(value, str):
        return _mask_value(value)
    if isinstance(value, tuple | list) and value and isinstance(value[0], str):
        return tuple(_mask_value(v) for v in value if isinstance(v, str))
    return value


def mask_attributes(attributes: Attributes) -> Attributes:
    """Attributes with every string value (and string in a sequence value) masked; keys are ours."""
    if not attributes:
        return attributes
    return {key: _value(value) for key, value in attributes.items()}


def __getattr__(name: str) -> Any:
    """``MaskingSpanExporter``, imported from ``masking_export`` the first time it is named here."""
    if name == "MaskingSpanExporter":
        from sidecar.telemetry.masking_export import MaskingSpanExporter

        return MaskingSpanExporter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
