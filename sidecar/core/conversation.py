"""What a caller asks of the sidecar and what it gets back, in plain Python.

The gRPC boundary (``sidecar.server.convert``) builds these from ``sidecar.v1`` messages and
turns the answers back; every other door (the HTTP fronts, MCP) builds the same ones, so every
door runs the same core::

    ModelRequest  -> ModelResponse    CallModel, StreamModel (and the fronts' chat/messages)
    ToolRequest   -> ToolOutcome      ExecuteTool (and MCP tools/call)
    Report        -> ReportAnswer     ClassifyFailure

``Job`` says whose work a call is; ``CallOptions`` is what the boundary resolved once: the
deadline (on the injected clock) and the caller's retry-budget override, if any.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sidecar.core.details import Hop
from sidecar.core.kinds import FinishReason, Role, TransportFault
from sidecar.core.taxonomy import SidecarFailure

__all__ = [
    "CallOptions",
    "Job",
    "Message",
    "MidStream",
    "ModelRequest",
    "ModelResponse",
    "ObservedResponse",
    "Report",
    "ReportAnswer",
    "ToolCall",
    "ToolCallResult",
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


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments_json: str


@dataclass(frozen=True, slots=True)
class ToolCallResult:
    call_id: str
    content: str
    is_error: bool = False
    name: str = ""


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_results: tuple[ToolCallResult, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    name: str
    description: str = ""
    parameters_json: str = ""


class MidStream:
    """What a stream does on a fault after deltas reached the caller (None: the configured policy)."""

    RESTART = "restart"
    FAIL = "fail"


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
    """``MidStream.RESTART`` or ``MidStream.FAIL``; None for the configured policy."""


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


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
