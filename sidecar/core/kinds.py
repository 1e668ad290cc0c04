"""The core's enumerations, in plain Python: what failed, why an attempt is retried, what broke in transit.

Each value has the number of its ``sidecar.v1`` proto counterpart (``FAILURE_KIND_X`` is
``FailureKind.X``), so the gRPC boundary converts by number and a test proves the two lists equal.
Which kinds are correctable is the contract's word, read from ``core.correctability`` (a table
tools/protogen.py generates from it). Nothing here imports generated code.
"""

from __future__ import annotations

import enum

from sidecar.core.correctability import CORRECTABLE_KIND_NUMBERS

__all__ = ["CORRECTABLE_KINDS", "CircuitState", "FailureKind", "FinishReason", "RetrySignal", "Role", "TransportFault"]


class FailureKind(enum.IntEnum):
    """The one taxonomy's kinds (``UNSPECIFIED`` is "no failure": a success or a granted pre-check)."""

    UNSPECIFIED = 0
    INVALID_INPUT = 1
    RESOURCE_NOT_FOUND = 2
    GUARDRAIL = 3
    JSON_PARSE = 4
    RESPONSE_VALIDATION = 5
    EXTERNAL_SERVICE = 6
    UPSTREAM_THROTTLE = 7
    UNAUTHORIZED = 8
    PERMISSION_DENIED = 9
    SYSTEM = 10
    CIRCUIT_OPEN = 11
    UPSTREAM_RETRIES_EXHAUSTED = 12
    QUOTA_EXHAUSTED = 13
    SPEND_CAP_EXCEEDED = 14
    MODEL_NOT_FOUND = 15
    PROVIDER_REFUSAL = 16
    TOKEN_ESTIMATE_EXCEEDS_LIMIT = 17
    CONTEXT_OVERFLOW = 18
    OUTPUT_TRUNCATED = 19
    JOB_TIMEOUT = 20
    JOB_CANCELLED = 21
    STREAM_INTERRUPTED = 22


CORRECTABLE_KINDS = frozenset(FailureKind(number) for number in CORRECTABLE_KIND_NUMBERS)
"""The kinds where a corrected call may succeed; every other kind needs another approach. The contract
says which (``(sidecar.v1.correctable)``), through the table generated from it (``core.correctability``)."""


class RetrySignal(enum.IntEnum):
    """Why an upstream attempt is sent again: nobody's mistake."""

    UNSPECIFIED = 0
    RATE_LIMIT = 1
    """429: this caller went past its own budget."""
    OVERLOAD = 2
    """529 or overloaded_error: the provider's fleet is saturated, whoever calls."""
    TRANSIENT = 3
    """A plain 5xx, a dropped connection, a timeout: a fault, no request to slow down."""

    @property
    def words(self) -> str:
        return _SIGNAL_WORDS[self]

    @property
    def label(self) -> str:
        """The lower-case name used in spans and metrics (``rate_limit``, ``overload``, ``transient``)."""
        return self.name.lower()


_SIGNAL_WORDS = {
    RetrySignal.UNSPECIFIED: "unknown signal",
    RetrySignal.RATE_LIMIT: "rate limit",
    RetrySignal.OVERLOAD: "overload",
    RetrySignal.TRANSIENT: "transient fault",
}


class TransportFault(enum.IntEnum):
    """A failure to get any response back."""

    UNSPECIFIED = 0
    REFUSED = 1
    TIMEOUT = 2
    RESET = 3
    DNS = 4


class CircuitState(enum.IntEnum):
    UNSPECIFIED = 0
    CLOSED = 1
    OPEN = 2
    HALF_OPEN = 3


class FinishReason(enum.IntEnum):
    UNSPECIFIED = 0
    STOP = 1
    LENGTH = 2
    TOOL_CALLS = 3
    CONTENT_FILTER = 4


class Role(enum.IntEnum):
    UNSPECIFIED = 0
    USER = 1
    ASSISTANT = 2
    TOOL = 3
