"""One reply judged, and the call's running state across its runs of the engine.

    refusal / content filter     -> PROVIDER_REFUSAL (never re-rolled)
    cut off at the output limit  -> once more at the model's maximum, else OUTPUT_TRUNCATED
    schema asked, reply unusable -> the failure's explanation sent back (at most max_corrections);
                                    past them a parse failure fails, empty fields are a warning
    else                         -> the reply (``response_of``: the call's ModelResponse)

``Call.judge`` runs while the attempt's span is open; ``ModelService`` acts on the ``Verdict``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sidecar.config import ModelConfig
from sidecar.core.conversation import Message, ModelRequest, ModelResponse
from sidecar.core.details import ReplyDetail
from sidecar.core.kinds import FinishReason, Role
from sidecar.core.retry import Attempt, Tally
from sidecar.core.taxonomy import JsonParse, OutputTruncated, ProviderRefusal, SidecarFailure
from sidecar.providers.client import Spent
from sidecar.providers.formats.chat import ChatReply
from sidecar.providers.schemas import CallChecks
from sidecar.providers.streaming.outlet import Outlet

__all__ = ["Call", "Verdict", "response_of"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one reply means to the call."""

    reply: ChatReply
    parsed: dict[str, Any] | None = None
    raise_budget: bool = False
    correction: SidecarFailure | None = None
    failure: SidecarFailure | None = None
    warning: str = ""


@dataclass(slots=True)
class Call:
    """One model call's running state, across its runs of the engine."""

    request: ModelRequest
    model: ModelConfig
    checks: CallChecks
    schema: dict[str, Any] | None
    budget_tokens: int
    max_corrections: int
    tally: Tally
    conversation: list[Message]
    spent: Spent = field(default_factory=Spent)
    corrections: int = 0
    raised: bool = False
    warnings: list[str] = field(default_factory=list)

    async def judge(self, reply: ChatReply, attempt: Attempt) -> Verdict:
        """Refusal, truncation, then the schema; a correction is marked on the attempt's span."""
        model_id = self.request.model
        if reply.refusal is not None or reply.finish is FinishReason.CONTENT_FILTER:
            category = reply.refusal_category or (
                "refusal" if reply.raw_finish in ("refusal", "stop") or reply.refusal else reply.raw_finish
            )
            refusal = ProviderRefusal(model_id, category or "content_filter", reply.refusal or "")
            return Verdict(reply, failure=refusal)
        if reply.finish is FinishReason.LENGTH:
            if not self.raised and self.budget_tokens < self.model.max_output_tokens:
                return Verdict(reply, raise_budget=True)
            return Verdict(reply, failure=OutputTruncated(model_id, self.budget_tokens, self.model.max_output_tokens))
        if self.schema is None or reply.tool_calls:  # a tool call is not the answer yet
            return Verdict(reply)
        try:  # the caller's schema runs off the event loop, within the time limit (CallChecks)
            parsed, problem = await self.checks.reply(
                reply.text, self.schema, model_id, self.request.response_schema_json
            )
        except JsonParse as failure:
            if self.corrections >= self.max_corrections:
                return Verdict(reply, failure=failure)
            attempt.record.correction(failure.kind_name)
            return Verdict(reply, correction=failure)
        if problem is None:
            return Verdict(reply, parsed=parsed)
        if self.corrections < self.max_corrections:
            attempt.record.correction(problem.kind_name)
            return Verdict(reply, correction=problem)
        assert isinstance(problem.detail, ReplyDetail)
        fields = "; ".join(f"{f.field} {f.problem}" for f in problem.detail.fields)
        warning = f"required fields still empty after {self.corrections} corrections: {fields}"
        return Verdict(reply, parsed=parsed, warning=warning)


def response_of(call: Call, provider: str, verdict: Verdict, outlet: Outlet | None) -> ModelResponse:
    """The call's answer: the reply the verdict accepted, with what the whole call counted."""
    reply = verdict.reply
    warnings = (*call.warnings, *(outlet.warnings if outlet is not None else ()))
    return ModelResponse(
        message=Message(Role.ASSISTANT, reply.text, tuple(reply.tool_calls), reasoning=tuple(reply.reasoning)),
        finish_reason=reply.finish,
        usage=reply.usage,
        parsed=verdict.parsed,
        attempts=call.tally.attempts,
        corrections=call.corrections,
        output_budget_raised=call.raised,
        warnings=warnings,
        provider=provider,
        response_model=reply.response_model,
        total_usage=call.spent.usage,
        cost_usd=call.spent.cost_usd,
        response_id=reply.response_id,
        raw_finish=reply.raw_finish,
        served_by=call.request.model,
        continuations=tuple(outlet.continuations) if outlet is not None else (),
    )
