"""What a streamed model call (StreamModel) sends its caller, in plain Python.

``ModelService.stream`` yields these; ``server.convert.stream_event`` turns each into a
``sidecar.v1.StreamModelEvent``. The order a caller sees::

    (Serving? Delta*  ((Restart | Continued) Serving? Delta*)*  Final      a reply (Delta: TextDelta |
                                                                          ToolCallDelta | ReasoningDelta)
    ... then the stream ends with the call's failure (the same status and details as CallModel)

    event           carries                                   the caller
    Serving         the model that writes the deltas that      names the reply after it (a door's
                    follow, as its provider reported it        ``model``); gRPC callers get it in
                    (before an attempt's first delta, when it  Final's ``response_model``
                    names another model than the last one)
    TextDelta       text to append                            appends it
    ToolCallDelta   tool call ``index`` (0-based): its id and  appends the fragment to that call
                    name on its first fragment, an arguments
                    JSON fragment
    ReasoningDelta  reasoning part ``index`` (0-based): text   appends the text to that part; keeps
                    to append, its signature or redacted data  the signature or data as it is
                    (each whole, when it arrives)
    Restart         why (a ``RestartCause`` and words), the   drops every delta before it: what
                    attempt whose deltas follow                follows is a new reply from the start
    Continued       why (UPSTREAM_FAULT or FAILOVER, words),  keeps what it holds: the deltas that
                    the attempt whose deltas follow, the      follow continue it (the new attempt was
                    characters of text already delivered      prefilled with that text)
    Final           the whole reply, as CallModel returns it  uses it (it is the reply, whatever came before)

A ``Restart`` is sent only right before the deltas it announces (or before ``Final`` when the
new attempt wrote none), never for an attempt that sent nothing: a delta is never duplicated
and never interleaved with another attempt's.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from sidecar.core.conversation import ModelResponse

__all__ = [
    "Continued",
    "Delta",
    "Final",
    "ReasoningDelta",
    "Restart",
    "RestartCause",
    "Serving",
    "StreamEvent",
    "TextDelta",
    "ToolCallDelta",
]


class RestartCause(enum.IntEnum):
    """Why a stream starts again (numbered as ``sidecar.v1.RestartCause``)."""

    UNSPECIFIED = 0
    UPSTREAM_FAULT = 1
    """The upstream faulted mid-stream (an overload or error event, a dropped connection, a stall)."""
    TRUNCATED = 2
    """The reply was cut off at its output limit: re-run with a larger budget."""
    CORRECTION = 3
    """The reply was not the JSON asked for: sent back with the fix asked for."""
    FAILOVER = 4
    """Another deployment of a route takes over."""


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    index: int
    """Which tool call of the reply (0-based); fragments of one call share it."""
    id: str = ""
    name: str = ""
    arguments_fragment: str = ""


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    index: int
    """Which reasoning part of the reply (0-based)."""
    text: str = ""
    signature: str = ""
    redacted_data: str = ""


@dataclass(frozen=True, slots=True)
class Restart:
    cause: RestartCause
    reason: str
    attempt: int
    """The upstream attempt whose deltas follow (1-based, across the call)."""


@dataclass(frozen=True, slots=True)
class Continued:
    cause: RestartCause
    """UPSTREAM_FAULT (the same deployment goes on) or FAILOVER (a route's next deployment does)."""
    reason: str
    attempt: int
    """The upstream attempt whose deltas follow (1-based, across the call)."""
    chars: int
    """The characters of text the caller already holds (the new attempt's prefill)."""


@dataclass(frozen=True, slots=True)
class Serving:
    model: str
    """The model the provider says wrote the deltas that follow (after a failover, the deployment's)."""


@dataclass(frozen=True, slots=True)
class Final:
    response: ModelResponse


Delta = TextDelta | ToolCallDelta | ReasoningDelta
StreamEvent = TextDelta | ToolCallDelta | ReasoningDelta | Restart | Continued | Serving | Final
