"""What a caller asks of the sidecar and what it gets back, in plain Python.

The gRPC boundary (``sidecar.server.convert``) builds these from ``sidecar.v1`` messages and
turns the answers back; every other door (the HTTP fronts, MCP) builds the same ones, so every
door runs the same core::

    ModelRequest  -> ModelResponse    CallModel, StreamModel (and the fronts' chat/messages)
    ToolRequest   -> ToolOutcome      ExecuteTool (and MCP tools/call)
    Report        -> ReportAnswer     ClassifyFailure

``Job`` says whose work a call is; ``CallOptions`` is what the boundary resolved once: the
deadline (on the injected clock) and the caller's retry-budget override, if any.

A message's content is its ``text``, or its ordered ``parts`` (never both: the door refuses that)::

    Part            TextPart | ImagePart | DocumentPart, each with an optional CacheBreakpoint
    ReasoningPart   what a model reasoned (text, its signature, or redacted data), an assistant
                    message's first content, passed back byte-identical in a later turn
    Controls        what else a request says: reasoning, tool choice, sampling, stop, the end user,
                    per-format provider options; each carried by a format or refused by name
    OverflowPolicy  what a conversation that does not fit does (fail, or compact by named strategies);
                    ``Compaction`` is what a compacting call changed, its messages to adopt
    Carried         what a front read but did not interpret (keys of one wire format, verbatim): on the
                    request, a message, a part, a tool, a call or a result; sent only to a deployment
                    of that same format, refused by name on any other (docs/carried.md)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sidecar.core.details import Hop
from sidecar.core.kinds import FinishReason, Role, TransportFault
from sidecar.core.taxonomy import SidecarFailure

__all__ = [
    "CacheBreakpoint",
    "CallOptions",
    "Carried",
    "Compaction",
    "CompactionStep",
    "Continuation",
    "Controls",
    "DocumentPart",
    "ImagePart",
    "Job",
    "Message",
    "MidStream",
    "ModelRequest",
    "ModelResponse",
    "ObservedResponse",
    "Overflow",
    "OverflowPolicy",
    "Part",
    "Reasoning",
    "ReasoningPart",
    "Report",
    "ReportAnswer",
    "TextPart",
    "ToolCall",
    "ToolCallResult",
    "ToolChoice",
    "ToolDefinition",
    "ToolOutcome",
    "ToolRequest",
    "ToolResult",
    "Usage",
]


@dataclass(frozen=True, slots=True)
class Job:
    job_id: str = ""
    workflow_id: str = ""
    attributes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CallOptions:
    """Resolved once at the door: the deadline on the injected clock, and the budget override."""

    deadline: float | None = None
    upstream_retries: int | None = None
    """The caller's own retry budget for this call, overriding the configured one."""
    timeouts_move_on: bool = False
    """A route's hop with another deployment after it, whose route moves on from a timeout
    (``core.routing.timeout_moves_on``): an attempt past its header or first-token timeout ends the
    hop at once (``core.routing.TIMED_OUT``) instead of being retried on this deployment."""
    preset: str | None = None
    """The door's preset (``interactive`` at the HTTP fronts), for a model and a policy that name none."""
    overflow_moves_on: bool = False
    """A route's hop with the route's ``context_fallback`` still after it: a conversation that does not fit
    moves on to it (the whole conversation, nothing lost) instead of being compacted here."""
    probe: bool = False
    """A route's hop that is its deployment's half-open circuit's one probe: one upstream attempt,
    whatever the retry budget (a failure is the hop's at once, no backoff), its span marked a probe."""


@dataclass(frozen=True, slots=True)
class Carried:
    """Keys a front did not interpret, carried verbatim to a deployment of the same wire format.

    ``keys`` are JSON values as the caller wrote them; a key under a sub-object the front does
    interpret is kept as a nested partial object (``{"thinking": {"display": "omitted"}}``), which the
    upstream deep-merges into the object it renders. ``at`` is the caller's path of the element
    ("" for the body, ``tools[0]``, ``messages[2].content[1]``) and ``names`` each key's path below it
    (``thinking.display``), for a refusal to name them.
    """

    format: str
    keys: Mapping[str, Any]
    at: str = ""
    names: tuple[str, ...] = ()

    @property
    def first(self) -> str:
        """The caller's path of the first carried key (what a refusal names)."""
        name = self.names[0] if self.names else next(iter(self.keys), "")
        return f"{self.at}.{name}" if self.at else name


@dataclass(frozen=True, slots=True)
class CacheBreakpoint:
    """The prompt up to here is cached; ``ttl`` "" is the provider's default, else "5m" or "1h"."""

    ttl: str = ""


@dataclass(frozen=True, slots=True)
class TextPart:
    text: str
    cache: CacheBreakpoint | None = None
    carried: Carried | None = None


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image: ``data`` with its ``media_type``, or a ``url``; ``detail`` "", "auto", "low" or "high"."""

    media_type: str = ""
    data: bytes = b""
    url: str = ""
    detail: str = ""
    cache: CacheBreakpoint | None = None
    carried: Carried | None = None


@dataclass(frozen=True, slots=True)
class DocumentPart:
    """A document: a PDF as ``data`` or a ``url``, or plain ``text`` (``media_type`` text/plain)."""

    media_type: str = ""
    data: bytes = b""
    url: str = ""
    text: str | None = None
    title: str = ""
    cache: CacheBreakpoint | None = None
    carried: Carried | None = None


Part = TextPart | ImagePart | DocumentPart


@dataclass(frozen=True, slots=True)
class ReasoningPart:
    """A model's reasoning: its text (or summary) and signature, or redacted ``data``; ``format`` made it."""

    text: str = ""
    signature: str = ""
    redacted_data: str = ""
    format: str = ""


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments_json: str
    carried: Carried | None = None


@dataclass(frozen=True, slots=True)
class ToolCallResult:
    call_id: str
    content: str
    is_error: bool = False
    name: str = ""
    parts: tuple[Part, ...] = ()
    """The content as text and image parts, instead of ``content``."""
    carried: Carried | None = None


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_results: tuple[ToolCallResult, ...] = ()
    parts: tuple[Part, ...] = ()
    """The content as ordered parts, instead of ``text``."""
    reasoning: tuple[ReasoningPart, ...] = ()
    """An assistant message's reasoning, before the rest of its content."""
    carried: Carried | None = None

    @property
    def content(self) -> tuple[Part, ...]:
        """The content as parts, whichever way it was given."""
        return self.parts or ((TextPart(self.text),) if self.text else ())


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    name: str
    description: str = ""
    parameters_json: str = ""
    cache: CacheBreakpoint | None = None
    strict: bool | None = None
    """Strict function calling: True asks it (``carried``'s ``tools.strict``), False asks it off, None: the
    format's default."""
    carried: Carried | None = None


@dataclass(frozen=True, slots=True)
class Reasoning:
    """How much to reason: an ``effort`` ("minimal", "low", "medium", "high") or a ``budget_tokens``."""

    effort: str = ""
    budget_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """``mode`` "auto", "none", "required" or "tool" (then ``name`` is the tool)."""

    mode: str
    name: str = ""


@dataclass(frozen=True, slots=True)
class Controls:
    """What a request says beyond its conversation; None (or empty) is "not asked for"."""

    reasoning: Reasoning | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    stop: tuple[str, ...] = ()
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    end_user: str = ""
    system_cache: CacheBreakpoint | None = None
    provider_options_json: str = ""
    """Per wire format, an object merged into the upstream body as it is: ``{"anthropic": {...}}``."""

    def asked(self) -> list[str]:
        """The contract's names of what is set, in the contract's order."""
        names = [
            ("reasoning", self.reasoning is not None),
            ("tool_choice", self.tool_choice is not None),
            ("parallel_tool_calls", self.parallel_tool_calls is not None),
            ("stop", bool(self.stop)),
            ("top_p", self.top_p is not None),
            ("top_k", self.top_k is not None),
            ("seed", self.seed is not None),
            ("presence_penalty", self.presence_penalty is not None),
            ("frequency_penalty", self.frequency_penalty is not None),
            ("end_user", bool(self.end_user)),
            ("system_cache", self.system_cache is not None),
            ("provider_options_json", bool(self.provider_options_json)),
        ]
        return [name for name, set_ in names if set_]


class MidStream:
    """What a stream does on a fault after deltas reached the caller (None: the configured policy)."""

    RESTART = "restart"
    FAIL = "fail"
    CONTINUE = "continue"
    """Sent again with the text the caller holds as an assistant prefill; only the continuation streams."""

    ALL = (RESTART, FAIL, CONTINUE)


@dataclass(frozen=True, slots=True)
class Continuation:
    """A stream that broke after text reached the caller and went on from it (``MidStream.CONTINUE``)."""

    attempt: int
    """The attempt whose deltas continued the text."""
    cause: str
    """``upstream_fault`` (the same deployment) or ``failover`` (a route's next one)."""
    reason: str
    chars: int
    """The characters of text the caller held: what the new attempt was prefilled with."""


class Overflow:
    """What a conversation that does not fit the model's window does, and how it is made smaller."""

    FAIL = "fail"
    """TOKEN_ESTIMATE_EXCEEDS_LIMIT / CONTEXT_OVERFLOW (a route's context_fallback takes it): the default."""
    COMPACT = "compact"
    """Compacted by the strategies in order, and tried again; failed only when even that does not fit."""
    ACTIONS = (FAIL, COMPACT)

    TOOL_RESULTS = "tool_results"
    """Old tool results shortened to a note (the newest ``keep_tool_results`` kept)."""
    REASONING = "reasoning"
    """Reasoning before the last user turn dropped (the current turn's signed reasoning kept)."""
    SUMMARIZE = "summarize"
    """The turns before the last user turn replaced by one summary, made by the summarizer model."""
    STRATEGIES = (TOOL_RESULTS, REASONING, SUMMARIZE)

    ESTIMATE = "estimate"
    """Trigger: the sidecar's estimate did not fit the window."""
    PROVIDER = "provider"
    """Trigger: the provider said the conversation is too long (its count beat the estimate)."""


@dataclass(frozen=True, slots=True)
class OverflowPolicy:
    """A call's own overflow policy: ``action`` (None: the model's), ``strategies`` (empty: the model's order)."""

    action: str | None = None
    strategies: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CompactionStep:
    """One strategy's change: the request's messages it shortened or replaced (0-based), tokens around it."""

    strategy: str
    turns: tuple[int, ...]
    tokens_before: int
    tokens_after: int


@dataclass(frozen=True, slots=True)
class Compaction:
    """What a call compacted (``Overflow.ESTIMATE`` or ``PROVIDER``), and the conversation to adopt."""

    trigger: str
    tokens_before: int
    tokens_after: int
    steps: tuple[CompactionStep, ...]
    messages: tuple[Message, ...]
    summarizer_calls: int = 0


@dataclass(frozen=True, slots=True)
class ModelRequest:
    model: str
    messages: tuple[Message, ...]
    system: str = ""
    tools: tuple[ToolDefinition, ...] = ()
    response_schema_json: str = ""
    max_output_tokens: int | None = None
    temperature: float | None = None
    job: Job = Job()
    mid_stream: str | None = None
    """``MidStream.RESTART``, ``FAIL`` or ``CONTINUE``; None for the configured policy."""
    controls: Controls = Controls()
    carried: Carried | None = None
    """The body's keys the front did not interpret."""
    on_overflow: OverflowPolicy | None = None
    """The call's own overflow policy; None for the model's (``on_overflow``, default fail)."""


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    """All of them, cached ones included."""
    output_tokens: int = 0
    """Reasoning included."""
    cache_read_input_tokens: int = 0
    cache_write_input_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_input_tokens + other.cache_read_input_tokens,
            self.cache_write_input_tokens + other.cache_write_input_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
        )


@dataclass(frozen=True, slots=True)
class ModelResponse:
    message: Message
    finish_reason: FinishReason
    usage: Usage
    """Tokens of the last attempt."""
    parsed: dict[str, Any] | None
    """The reply as a JSON object, when a schema was asked for."""
    attempts: int
    corrections: int
    output_budget_raised: bool
    warnings: tuple[str, ...]
    provider: str
    response_model: str
    total_usage: Usage
    """Tokens of every attempt together."""
    cost_usd: float
    response_id: str = ""
    raw_finish: str = ""
    served_by: str = ""
    hops: tuple[Hop, ...] = ()
    continuations: tuple[Continuation, ...] = ()
    """A stream's continuations after mid-stream faults, in order."""
    compaction: Compaction | None = None
    """Set when the conversation was compacted to fit."""


@dataclass(frozen=True, slots=True)
class ToolRequest:
    tool: str
    arguments_json: str
    call_id: str = ""
    job: Job = Job()


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool's successful answer."""

    content: str
    content_type: str
    status_code: int
    empty: bool


EMPTY_SEARCH_TEXT = "The search found no results."
EMPTY_RESULT_TEXT = "The tool returned an empty result."


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """A tool call's outcome: a result or a failure, and the upstream attempts made."""

    result: ToolResult | None
    failure: SidecarFailure | None
    attempts: int
    empty_text: str = EMPTY_SEARCH_TEXT
    """What the model reads for an empty result (a search's, or any other tool's)."""

    @property
    def model_text(self) -> str:
        """Exactly what the agent hands back to the model."""
        if self.failure is not None:
            return self.failure.explain_to_llm()
        assert self.result is not None
        if self.result.empty and not self.result.content.strip():
            return self.empty_text
        return self.result.content


@dataclass(frozen=True, slots=True)
class ObservedResponse:
    status_code: int
    headers: Mapping[str, str]
    body: str


@dataclass(frozen=True, slots=True)
class Report:
    """What an agent's own tool saw (ClassifyFailure); neither response nor fault: a pre-check."""

    service: str
    endpoint: str = ""
    tool_kind: str = "fetch"
    parameter: str = ""
    value: str = ""
    response: ObservedResponse | None = None
    fault: TransportFault | None = None
    attempts: int = 0
    resource_type: str = "resource"
    probe: bool = False
    job: Job = Job()


@dataclass(frozen=True, slots=True)
class ReportAnswer:
    """The failure the report means (None: a success, or a pre-check the circuit lets through)."""

    failure: SidecarFailure | None
    probe_granted: bool = False
    """A pre-check found the circuit half-open and this caller holds its one probe."""
    service: str = ""
