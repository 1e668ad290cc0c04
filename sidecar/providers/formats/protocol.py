"""What a wire format implements: ``WireFormat``, its upstream half and its front half.

A format is one folder of ``sidecar/providers/formats/`` (``vocab``, ``upstream``, ``front``, ``fake``) and
one line of ``names.py``. Everything that speaks it goes through these protocols::

    who                              half        what it does with it
    ModelService (providers/client,  Upstream    the sidecar as a provider's client: where to send, the
      streaming)                                 request, the reply read whole or streamed, its errors
    the HTTP doors (server/http/)    Front       the sidecar as a provider: a caller's request read into
                                                 the core's ModelRequest, the answer (whole, streamed, a
                                                 failure) rendered in the format
    the fake provider (fakes/, each  Front       a scripted provider of the format: the same reader and
      format's ``fakes``)                        renderers, with faults of its own

The two halves are each other's inverse, which ``tests/unit/test_formats.py`` proves for every
registered format: a ChatRequest rendered by ``Upstream.body`` reads back through ``Front.parse``,
and a ChatReply rendered by ``Front.render`` (or streamed by ``Front.writer``) reads back through
``Upstream.parse`` (or ``Upstream.stream_decoder``) as itself.

A stream decoder is fed every event (``event`` name, ``data`` text) in order: a server-sent event, or an
event-stream message (its ``:event-type``, or an exception's ``:exception-type``, and its payload)::

    feed(event, data) -> [Delta, ...]   the deltas the event carries (none: a ping, an unknown event)
                      raises StreamFault  an error event (``error_body``: classify it as an error answer)
                                          or data that is not what the wire sends (garbled)
    complete                            the wire's end marker arrived ([DONE], message_stop)
    reply()                             the reply the events made, or None when no finish was seen

A stream writer makes the events of one reply, in order: ``start``, then ``delta`` (and ``refusal``)
as the reply comes, ``restarted`` when the sidecar starts the reply again, and ``final`` or
``error`` last.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sidecar.config import ProviderConfig
from sidecar.core.conversation import ModelRequest
from sidecar.core.rate_budget import Budget
from sidecar.core.retry import Retry
from sidecar.core.stream import Delta
from sidecar.core.taxonomy import SidecarFailure
from sidecar.providers.errors import Target
from sidecar.providers.formats.chat import ChatReply, ChatRequest

__all__ = [
    "EVENT_STREAM",
    "SSE",
    "Ask",
    "Front",
    "HeaderKeyed",
    "ParamNames",
    "ReplyHead",
    "Sse",
    "StreamDecoder",
    "StreamWriter",
    "Upstream",
    "WireFormat",
]

SSE = "text/event-stream"
"""``Upstream.stream_type`` of a format that streams server-sent events."""
EVENT_STREAM = "application/vnd.amazon.eventstream"
"""``Upstream.stream_type`` of a format that streams AWS event-stream frames (botocore reads them)."""

ParamNames = Mapping[str, "str | tuple[str, ...]"]
"""A front's names for the core's parameter paths (``server/http/params.py`` reads them): a core path
with its indices written ``[]`` (``tools[].parameters_json``) -> the caller's path, its ``[]`` the same
indices in order (``tools[].input_schema``), or the request keys that mean it, the first one a caller
sent naming it (``("max_tokens", "max_completion_tokens")``). A path it does not name is the same at
the door; ``messages`` names the list the caller's messages are in."""

Sse = tuple[str, "dict[str, Any] | str"]
"""A server-sent event: its name ("" for none) and its data (an object, or raw text like ``[DONE]``)."""


@dataclass(frozen=True, slots=True)
class Ask:
    """A request read in a format: the core's request and what the format asks of the answer."""

    request: ModelRequest
    stream: bool = False
    include_usage: bool = False


@dataclass(frozen=True, slots=True)
class ReplyHead:
    """What names a rendered reply: its id, the model it says it is, and when it was made."""

    reply_id: str
    model: str
    created: int = 0
    """Seconds since the epoch (a format that dates its replies)."""
    fingerprint: str | None = None
    """OpenAI's ``system_fingerprint`` (a fake provider sends one; the sidecar has none)."""


class StreamDecoder(Protocol):
    """One attempt's stream, event by event, turned into deltas and a reply."""

    def feed(self, event: str, data: str) -> list[Delta]: ...

    @property
    def complete(self) -> bool: ...

    def reply(self) -> ChatReply | None: ...

    @property
    def model(self) -> str:
        """The model the stream says wrote it, as far as read ("" until it says)."""
        ...


class Upstream(Protocol):
    """The client half: the sidecar speaking the format to a provider (one per configured provider)."""

    @property
    def carries(self) -> frozenset[str]:
        """The features of ``carried.FEATURES`` the format carries to its provider."""
        ...

    def check(self, request: ModelRequest, model_id: str) -> None:
        """InvalidInput for what the format does not carry (``carried.refuse_uncarried``) or breaks its rules."""
        ...

    def path(self, model: str, *, stream: bool) -> str:
        """Where a chat request goes, below the provider's base URL."""
        ...

    def headers(self, api_key: str | None) -> dict[str, str]: ...

    @property
    def stream_type(self) -> str:
        """The media type a stream of the format comes as: ``text/event-stream`` (server-sent events), or
        ``application/vnd.amazon.eventstream`` (binary event-stream frames); the engine reads either into
        the (event, data) pairs ``StreamDecoder.feed`` takes."""
        ...

    def sign(self, method: str, url: str, headers: Mapping[str, str], body: bytes) -> dict[str, str]:
        """The headers one request goes with, given all of it (a request signature such as SigV4 covers the
        URL and the body); a format whose key is a plain header returns ``headers`` as they are."""
        ...

    def body(self, request: ChatRequest, *, stream: bool = False) -> dict[str, Any]: ...

    def parse(self, body: dict[str, Any]) -> ChatReply: ...

    def stream_decoder(self) -> StreamDecoder: ...

    def classify(
        self,
        status: int,
        headers: Mapping[str, str],
        body: str,
        target: Target,
        secrets: Iterable[str],
        now: datetime,
    ) -> Retry | SidecarFailure:
        """An answer that is not a reply: a retry signal or a terminal failure (``providers.errors``)."""
        ...

    def budget(self, headers: Mapping[str, str], now: datetime) -> Budget:
        """What an answer's rate-limit headers say is left (``core.rate_budget``; ``Budget()``: nothing told),
        read on every answer, a success's too (``now``: the wall clock, for resets given as a time)."""
        ...


class HeaderKeyed:
    """What an ``Upstream`` whose key is a header (every format but a signed one) has: server-sent events,
    and ``sign`` the headers as they are."""

    stream_type = SSE

    def sign(self, method: str, url: str, headers: Mapping[str, str], body: bytes) -> dict[str, str]:
        return dict(headers)  # the key is a header (``headers``): nothing covers the request itself


class StreamWriter(Protocol):
    """One reply as the format's server-sent events (the module's docstring)."""

    def start(self, input_tokens: int = 0) -> list[Sse]: ...

    def delta(self, delta: Delta) -> list[Sse]: ...

    def refusal(self, text: str) -> list[Sse]: ...

    def restarted(self, words: Mapping[str, Any]) -> list[Sse]:
        """The sidecar's restart (``words``: cause, reason, attempt) as the format can tell it; the reply's
        parts that follow are numbered afresh."""
        ...

    def final(self, reply: ChatReply, extension: Mapping[str, Any] | None = None) -> list[Sse]: ...

    def error(self, body: dict[str, Any]) -> list[Sse]:
        """An error object (``Front.error_body``) sent after the stream began."""
        ...


class Front(Protocol):
    """The server half: the format as a provider speaks it (an HTTP door of the sidecar, a fake provider)."""

    path: str
    """The route a door serves (``/v1/chat/completions``)."""
    words: str
    """The format in the sidecar's words ("an OpenAI-compatible")."""
    id_prefix: str
    """What its reply ids begin with (``chatcmpl-``)."""

    @property
    def params(self) -> ParamNames:
        """The caller's names of the core's parameters (``ParamNames``), so that an INVALID_INPUT the core
        raises names what the caller sent (``max_output_tokens`` is Anthropic's ``max_tokens``)."""
        ...

    def parse(self, body: dict[str, Any]) -> Ask:
        """A request as the core's; INVALID_INPUT naming the field it cannot carry."""
        ...

    def render(self, reply: ChatReply, head: ReplyHead, extension: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A whole reply; ``extension`` rides along as ``sidecar``."""
        ...

    def writer(self, head: ReplyHead, *, include_usage: bool = False) -> StreamWriter: ...

    def error_body(
        self,
        message: str,
        error_type: str,
        *,
        code: str | None = None,
        param: str | None = None,
        extension: Mapping[str, Any] | None = None,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """The format's error object."""
        ...

    def answer(self, code: str, status: int) -> tuple[int, str]:
        """The status and error type the format answers a sidecar failure with (``code``: its OpenAI-style
        code, ``status``: the door's status for it; ``server/http/failures.py``)."""
        ...

    def error_type(self, status: int) -> str:
        """The error type a provider of the format sends with a bare ``status``."""
        ...

    def api_key(self, headers: Mapping[str, str]) -> str:
        """The key a caller sent (the inverse of ``Upstream.headers``); "" when none."""
        ...


class WireFormat(Protocol):
    """One wire format: its name in the configuration (``wire_format``), its two halves."""

    name: str

    @property
    def front(self) -> Front:
        """The server half (one for every door and fake)."""
        ...

    @property
    def door(self) -> str | None:
        """The HTTP door that serves ``front`` at its ``path``, by the ``http`` switch that turns it on
        (``openai``, ``anthropic``: ``server/http/doors.py``); None: no door serves it."""
        ...

    @property
    def fakes(self) -> tuple[str, ...]:
        """Where the fake provider's wires of the format are (``module:NAME``, a ``sidecar.fakes`` ``Wire``),
        loaded by the fake provider alone, never by the sidecar: the first answers at ``front.path``, any
        more speak the format behind other URLs (Azure OpenAI's)."""
        ...

    def upstream(self, provider: ProviderConfig) -> Upstream:
        """The client half for one configured provider."""
        ...
