"""The uncorrectable branch of the taxonomy: the tool or model cannot do this now, whatever the input.

ExternalService, UpstreamThrottle, Unauthorized, PermissionDenied, SystemFailure, CircuitOpen,
UpstreamRetriesExhausted, QuotaExhausted, SpendCapExceeded, ModelNotFound, ProviderRefusal,
TokenEstimateExceedsLimit, ContextOverflow, OutputTruncated, JobTimeout, JobCancelled and
StreamInterrupted, in the tree's order, with the bounds and words they need (``MAX_MODELS_LISTED``:
how many catalog ids a MODEL_NOT_FOUND names; ``SHUTTING_DOWN``: the message a shutdown cancels
with). Callers import the classes from ``core.taxonomy``, which draws the tree.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from datetime import datetime

from sidecar.core.details import (
    CircuitDetail,
    HttpInfo,
    PermissionDetail,
    ProviderDetail,
    RefusalDetail,
    ResourceDetail,
    RetryDetail,
    ServiceDetail,
    SpendDetail,
    StreamDetail,
    SystemDetail,
    TokenLimitDetail,
    Trigger,
    TruncationDetail,
)
from sidecar.core.failure import UncorrectableFailure
from sidecar.core.kinds import CircuitState, FailureKind, RetrySignal, TransportFault
from sidecar.core.text import cap, clause, echo

__all__ = [
    "MAX_MODELS_LISTED",
    "SHUTTING_DOWN",
    "CircuitOpen",
    "CompactedOverflow",
    "ContextOverflow",
    "ExternalService",
    "JobCancelled",
    "JobTimeout",
    "ModelNotFound",
    "OutputTruncated",
    "PermissionDenied",
    "ProviderRefusal",
    "QuotaExhausted",
    "SpendCapExceeded",
    "StreamInterrupted",
    "SystemFailure",
    "TokenEstimateExceedsLimit",
    "Unauthorized",
    "UpstreamRetriesExhausted",
    "UpstreamThrottle",
]


class ExternalService(UncorrectableFailure):
    """The service is down, answered with a server error, or could not be reached.

    Without a response, what the message says depends on whether the request may have been
    delivered (``sent``: a reset or a read timeout after it went out) and may simply be repeated::

        never sent                      it could not be reached (connection refused)
        sent, idempotent                it did not answer (connection reset)    -- re-sent, transient
        sent, not idempotent            ... may have been delivered; the outcome is unknown -- check
                                        before repeating this call (it is not idempotent)
        sent, idempotency not known     ... check before repeating this call unless it is idempotent
    """

    kind = FailureKind.EXTERNAL_SERVICE

    def __init__(
        self,
        service: str,
        endpoint: str,
        detail: str,
        *,
        http: HttpInfo | None = None,
        fault: TransportFault = TransportFault.UNSPECIFIED,
        retry_after: float | None = None,
        sent: bool = False,
        idempotent: bool | None = None,
    ) -> None:
        if http is None and not sent:
            said = f"it could not be reached ({cap(detail)})"
        elif http is None and idempotent:
            said = f"it did not answer ({cap(detail)})"
        elif http is None:
            what = _AFTER_SENT.get(clause(detail), f"the call failed ({clause(detail)})")
            repeat = "(it is not idempotent)" if idempotent is False else "unless it is idempotent"
            said = (
                f"{what} after the request was sent, so it may have been delivered; the outcome is unknown "
                f"— check before repeating this call {repeat}"
            )
        elif clause(detail) in ("", f"HTTP {http.status_code}"):
            said = f"it answered HTTP {http.status_code}"
        else:
            said = f"it answered HTTP {http.status_code}: {clause(detail)}"
        super().__init__(
            f"The {service} service failed at {endpoint}: {said}.",
            http=http,
            retry_after=retry_after,
            detail=ServiceDetail(service=service, endpoint=endpoint, detail=cap(detail), fault=fault),
        )


_AFTER_SENT: dict[str, str] = {
    "connection reset": "the connection was reset",
    "no response in time": "no response came in time",
}
"""How a fault's usual words read once the request went out; other details are quoted."""


class UpstreamThrottle(UncorrectableFailure):
    """The service is throttling us."""

    kind = FailureKind.UPSTREAM_THROTTLE

    def __init__(
        self, service: str, endpoint: str, detail: str, *, http: HttpInfo | None, retry_after: float | None = None
    ) -> None:
        status = f"HTTP {http.status_code}" if http else "a throttle"
        asked = ""
        if http is not None and http.retry_after_raw is not None:
            asked = f" It asked to retry after {cap(http.retry_after_raw, 40)}."
        super().__init__(
            f"The {service} service is throttling requests at {endpoint} ({status}: {cap(detail)}).{asked}",
            http=http,
            retry_after=retry_after,
            detail=ServiceDetail(service=service, endpoint=endpoint, detail=cap(detail)),
        )


class Unauthorized(UncorrectableFailure):
    """The service or provider rejected the sidecar's own credentials."""

    kind = FailureKind.UNAUTHORIZED

    def __init__(
        self,
        service: str,
        reason: str,
        *,
        http: HttpInfo | None = None,
        endpoint: str = "",
        provider: ProviderDetail | None = None,
        message: str | None = None,
    ) -> None:
        at = f" at {endpoint}" if endpoint else ""
        super().__init__(
            message
            or f"The {service} service rejected the sidecar's credentials{at}: {clause(reason)}. "
            "An operator must fix the configured key.",
            http=http,
            detail=provider or ServiceDetail(service=service, endpoint=endpoint, detail=cap(reason)),
        )

    @classmethod
    def account(
        cls, provider: str, endpoint: str, said: str, fix: str, *, http: HttpInfo | None, detail: ProviderDetail
    ) -> Unauthorized:
        """The provider took the key but will not serve its account (a location, billing, an organization
        not verified or disabled): ``fix`` is what an operator must change (``providers.errors.OPERATOR_FIXES``)."""
        message = f"The {provider} provider refused the sidecar's account at {endpoint}: {clause(said)}."
        message += f" An operator must {fix}."
        return cls(provider, said, http=http, endpoint=endpoint, provider=detail, message=message)


class PermissionDenied(UncorrectableFailure):
    """The person the work runs for lacks access, by the application's own rules."""

    kind = FailureKind.PERMISSION_DENIED

    def __init__(self, message: str, resource: str = "", *, http: HttpInfo | None = None) -> None:
        super().__init__(message, http=http, detail=PermissionDetail(resource=resource))


class SystemFailure(UncorrectableFailure):
    """An unexpected internal error: the model learns only that something broke."""

    kind = FailureKind.SYSTEM

    def __init__(self, component: str) -> None:
        super().__init__(
            f"A system error occurred in {component}. The operation could not be completed.",
            detail=SystemDetail(component=component),
        )


class CircuitOpen(UncorrectableFailure):
    """The service's circuit is open; the refusal quotes the response that opened it."""

    kind = FailureKind.CIRCUIT_OPEN

    def __init__(
        self,
        service: str,
        *,
        remaining: float,
        since: datetime,
        cooldown: float,
        trigger: Trigger,
        half_open: bool = False,
    ) -> None:
        wait = max(1, round(remaining))
        state = "is being probed" if half_open else "is switched off"
        super().__init__(
            f"The {service} service {state} after repeated failures (circuit open). Do not retry tools of "
            f"this service for about {wait} s. It was switched off by: {trigger.describe()}.",
            retry_after=max(remaining, 0.0),
            detail=CircuitDetail(
                service=service,
                state=CircuitState.HALF_OPEN if half_open else CircuitState.OPEN,
                since=since,
                cooldown_s=cooldown,
                opened_by=trigger,
            ),
        )


class UpstreamRetriesExhausted(UncorrectableFailure):
    """Rate limits, overloads or transient faults outlasted the retry budget."""

    kind = FailureKind.UPSTREAM_RETRIES_EXHAUSTED

    def __init__(
        self,
        target: str,
        budget: int,
        signal: RetrySignal,
        last: str,
        *,
        http: HttpInfo | None,
        retry_after: float | None,
        asked_too_long: float | None = None,
        probe: bool = False,
    ) -> None:
        if probe:  # a route deployment's half-open circuit: its probe is one attempt, whatever the budget
            why = f"{target} failed the one attempt that probes its half-open circuit (a probe is never retried)"
        elif asked_too_long is not None and retry_after is not None:
            why = (
                f"{target} was told to wait {retry_after:.0f} s, past the {asked_too_long:.0f} s a wait may last "
                f"(the call's budget is {budget} upstream retries)"
            )
        else:
            why = f"{target} still failed after {budget} upstream retries (the call's budget)"
        super().__init__(
            f"{why}; last signal: {signal.words} ({cap(last)}).",
            http=http,
            retry_after=retry_after,
            detail=RetryDetail(budget=budget, last_signal=signal, target=target),
        )


class QuotaExhausted(UncorrectableFailure):
    """The provider account is out of money: fund it or raise its budget."""

    kind = FailureKind.QUOTA_EXHAUSTED

    def __init__(self, provider: str, account: str, model: str, said: str, *, http: HttpInfo | None) -> None:
        acct = f" (account {account})" if account else ""
        super().__init__(
            f"The {provider} account{acct} is out of quota for model {model}: {clause(said)}. "
            "Waiting will not help; fund the account or raise its spend budget.",
            http=http,
            detail=ProviderDetail(provider=provider, account=account, model=model, provider_message=cap(said)),
        )


class SpendCapExceeded(UncorrectableFailure):
    """The workflow's recorded spend has reached its configured cap."""

    kind = FailureKind.SPEND_CAP_EXCEEDED

    def __init__(self, workflow_id: str, spent: float, cap_usd: float) -> None:
        workflow_id = echo(workflow_id)
        super().__init__(
            f"Workflow '{workflow_id}' has spent ${spent:.4f} of its ${cap_usd:.4f} cap; the call was not sent. "
            "Raise the cap or end the workflow.",
            detail=SpendDetail(workflow_id=workflow_id, spent_usd=spent, cap_usd=cap_usd),
        )


MAX_MODELS_LISTED = 20
"""How many catalog ids a MODEL_NOT_FOUND names: the failure travels in a status's trailers, which a
client bounds (grpc-java: 8 KiB), so a large catalog is named in part (ListModels names it whole)."""


def _listed_models(model: str, available: Sequence[str]) -> tuple[tuple[str, ...], str]:
    """The ids a MODEL_NOT_FOUND names (the closest to ``model`` first when not all fit) and its words."""
    if not available:
        return (), "none"
    if len(available) <= MAX_MODELS_LISTED:
        return tuple(available), ", ".join(available)
    close = difflib.get_close_matches(model, available, n=5, cutoff=0.5)
    named = (*close, *(m for m in available if m not in close))[:MAX_MODELS_LISTED]
    more = len(available) - len(named)
    return named, f"{', '.join(named)} and {more} more (ListModels lists every one)"


class ModelNotFound(UncorrectableFailure):
    """A model id the catalog does not hold."""

    kind = FailureKind.MODEL_NOT_FOUND

    def __init__(
        self, model: str, available: Sequence[str], *, http: HttpInfo | None = None, message: str | None = None
    ) -> None:
        model = echo(model)
        named, listed = _listed_models(model, available)
        super().__init__(
            message or f"Model '{cap(model, 80)}' is not in the catalog. Models that exist: {listed}.",
            http=http,
            detail=ResourceDetail(resource_type="model", identifier=model, available=named),
        )

    @classmethod
    def at_provider(
        cls,
        provider: str,
        upstream_model: str,
        model_id: str,
        said: str,
        *,
        http: HttpInfo | None,
        fix: str = "",
    ) -> ModelNotFound:
        """The catalog holds the model, but its provider answered 404: the catalog entry is wrong. With ``fix``
        (what an operator must change: ``providers.errors.OPERATOR_FIXES``), a provider that will not serve
        the model as the catalog names it (on demand, in this region, for this account)."""
        if fix:
            message = (
                f"The {provider} provider will not serve model '{upstream_model}' (catalog id '{model_id}') as "
                f"configured: {clause(said)}. An operator must {fix}."
            )
        else:
            message = (
                f"The {provider} provider does not serve model '{upstream_model}' (catalog id '{model_id}'): "
                f"{said}. Fix the catalog entry or choose another model."
            )
        return cls(model_id, (), http=http, message=message)


class ProviderRefusal(UncorrectableFailure):
    """The provider declined the call; never re-rolled on the same model.

    ``category`` says why, in the provider's own terms: the categories its content filter marked
    filtered, comma-separated (Azure: ``hate``, ``sexual``, ``violence``, ``self_harm``,
    ``jailbreak`` ...); else its error code (``content_policy_violation``, ``content_filter``,
    ``invalid_prompt``); else ``refusal`` (the model declined in words) or the finish reason. A
    refusal that came as an error answer keeps it in ``http``.
    """

    kind = FailureKind.PROVIDER_REFUSAL

    def __init__(self, model: str, category: str, explanation: str, *, http: HttpInfo | None = None) -> None:
        model, category = echo(model), echo(category)
        said = f": {clause(explanation)}" if explanation else ""
        words = category.replace(",", ", ")
        super().__init__(
            f"Model {model} refused the request ({words}){said}. Retrying the same model will not help.",
            http=http,
            detail=RefusalDetail(model=model, category=category, explanation=cap(explanation)),
        )


class TokenEstimateExceedsLimit(UncorrectableFailure):
    """Before sending, the estimated conversation does not fit the context window."""

    kind = FailureKind.TOKEN_ESTIMATE_EXCEEDS_LIMIT

    def __init__(self, model: str, estimate: int, limit: int) -> None:
        overflow = estimate - limit
        ratio = estimate / limit if limit else float("inf")
        super().__init__(
            f"The conversation is estimated at {estimate} tokens (input plus output budget), over model {model}'s "
            f"{limit}-token context window by {overflow} ({ratio:.2f}x). This is the sidecar's estimate, not a "
            "provider response; shorten or compact the conversation.",
            detail=TokenLimitDetail(estimate=estimate, limit=limit, overflow=overflow, ratio=ratio, model=model),
        )


class ContextOverflow(UncorrectableFailure):
    """The provider itself says the context is too long."""

    kind = FailureKind.CONTEXT_OVERFLOW

    def __init__(self, provider: str, model: str, said: str, *, http: HttpInfo | None) -> None:
        super().__init__(
            f"The {provider} provider says the conversation is too long for model {model}: {clause(said)}.",
            http=http,
            detail=ProviderDetail(provider=provider, model=model, provider_message=cap(said)),
        )


class CompactedOverflow(ContextOverflow):
    """Even the compacted conversation does not fit the window (CONTEXT_OVERFLOW, the sizes named)."""

    def __init__(self, model: str, before: int, after: int, budget: int, window: int, strategies: str) -> None:
        total = after + budget
        UncorrectableFailure.__init__(
            self,
            f"The conversation does not fit model {model}'s {window}-token context window even compacted "
            f"({strategies}): estimated at {before} tokens before compaction and {after} after, plus an output "
            f"budget of {budget} ({total} in all, over by {total - window}). Start a new conversation, or give "
            "the model more room (a larger-context deployment, a smaller output budget, more strategies).",
            detail=TokenLimitDetail(
                estimate=total, limit=window, overflow=total - window, ratio=total / window, model=model
            ),
        )


class OutputTruncated(UncorrectableFailure):
    """The reply was cut off at the output limit, even at the model's maximum."""

    kind = FailureKind.OUTPUT_TRUNCATED

    def __init__(self, model: str, budget: int, model_max: int) -> None:
        super().__init__(
            f"Model {model}'s reply was cut off at its output limit of {budget} tokens "
            f"(the model's maximum is {model_max}). Ask for a shorter answer or split the task.",
            detail=TruncationDetail(model=model, max_output_tokens=budget, model_max_output_tokens=model_max),
        )


class JobTimeout(UncorrectableFailure):
    """The caller's deadline ends before the call could."""

    kind = FailureKind.JOB_TIMEOUT

    def __init__(
        self,
        target: str,
        reason: str,
        *,
        signal: RetrySignal = RetrySignal.UNSPECIFIED,
        http: HttpInfo | None = None,
        retry_after: float | None = None,
        budget: int = 0,
    ) -> None:
        target = echo(target)
        super().__init__(
            f"The call to {target} would not finish before the caller's deadline: {reason}.",
            http=http,
            retry_after=retry_after,
            detail=RetryDetail(target=target, budget=budget, last_signal=signal, next_wait_s=retry_after),
        )


SHUTTING_DOWN = "the sidecar is shutting down"
"""The message a shutdown cancels the calls it cuts with (``task.cancel(SHUTTING_DOWN)``): a call that
sees it was stopped by the sidecar, not cancelled by its caller."""


class JobCancelled(UncorrectableFailure):
    """The caller cancelled the call (or, ``by_shutdown``, the sidecar's shutdown cut it)."""

    kind = FailureKind.JOB_CANCELLED

    def __init__(self, target: str, *, by_shutdown: bool = False) -> None:
        target = echo(target)
        words = f"was stopped: {SHUTTING_DOWN}" if by_shutdown else "was cancelled by the caller"
        super().__init__(f"The call to {target} {words}.", detail=RetryDetail(target=target))

    @staticmethod
    def cut(exc: BaseException) -> bool:
        """Whether a ``CancelledError`` is a shutdown's cut (its message SHUTTING_DOWN)."""
        return SHUTTING_DOWN in exc.args


class StreamInterrupted(UncorrectableFailure):
    """A stream failed after deltas had reached the caller, and no restart was allowed or left."""

    kind = FailureKind.STREAM_INTERRUPTED

    def __init__(self, model: str, reason: str, partial_text: str, deltas_sent: int, *, http: HttpInfo | None = None):
        super().__init__(
            f"The stream from model {model} broke off after {deltas_sent} deltas had been sent: {clause(reason)}. "
            "The partial reply is in the failure; what was sent before is incomplete.",
            http=http,
            detail=StreamDetail(partial_text=partial_text, reason=reason, deltas_sent=deltas_sent),
        )
