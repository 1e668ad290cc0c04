"""The one failure taxonomy: every failure the sidecar reports is one of these.

A failure answers two questions in plain words: what went wrong (``message``), and
whether a corrected call can help (``correctable``). ``explain_to_llm()`` is the text
the model reads: the message, a newline, and one of the two retry lines.

    SidecarFailure                          (abstract; kind, message, http, retry_after, attempts, detail)
    ├── CorrectableFailure                  the call was wrong: fix it and call again
    │   ├── InvalidInput                    parameter / value / rule            400 413 422, schema
    │   │   └── NotCarried                  the same, from a deployment's format before sending (a route
    │   │                                   moves on: another deployment may carry it)
    │   ├── ResourceNotFound                resource type / identifier          404 on a fetch
    │   ├── Guardrail                       a guardrail refused the call
    │   ├── JsonParse                       reply not the JSON object asked for (parser reason, shape)
    │   └── ResponseValidation              reply left required fields empty (one per line)
    └── UncorrectableFailure                the tool or model cannot do this now: try another way
        ├── ExternalService                 down, 5xx, unlisted status, refused / timeout / reset / dns;
        │                                   a re-send whose first sending left no outcome ("outcome
        │                                   unknown, not sent again": tools.once)
        ├── UpstreamThrottle                429, or 401/403 whose body says throttling
        ├── Unauthorized                    401/403: our credentials were refused
        ├── PermissionDenied                the person the work runs for lacks access
        ├── SystemFailure                   a bug: "A system error occurred in <component>. ..."
        ├── CircuitOpen                     the service is switched off; quotes what switched it off
        ├── UpstreamRetriesExhausted        429 / 529 / transient outlasted the retry budget
        ├── QuotaExhausted                  the provider account is out of money
        ├── SpendCapExceeded                the workflow's recorded spend reached its cap
        ├── ModelNotFound                   not in the catalog (lists the ids that are)
        ├── ProviderRefusal                 content filter or refusal; never re-rolled
        ├── TokenEstimateExceedsLimit       the estimate does not fit the window (an estimate)
        ├── ContextOverflow                 the provider says the context is too long
        ├── OutputTruncated                 cut off at the output limit, even at the maximum
        ├── JobTimeout                      the caller's deadline ends first
        ├── JobCancelled                    the caller cancelled
        └── StreamInterrupted               a stream failed after deltas reached the caller (partial text kept)

Plain Python throughout: kinds are ``core.kinds.FailureKind``, details are ``core.details``
records. The classes live by branch (``core.failure``: ``SidecarFailure`` and the two branches;
``core.correctable_failures``; ``core.uncorrectable_failures``), and every caller imports them from
here, as it does ``failure_class`` (the class of a kind). The gRPC boundary converts them
(``sidecar.server.convert``) and carries them in a rich status (``sidecar.server.grpc.status``).
``as_failure()`` is the one boundary that turns any other exception into ``SystemFailure``. A
failure's ``str()`` is its message, always. How a failed call is logged (who acts on each kind, so
at which level; each kind's lines bounded) is ``core.failure_log``'s table.

Which kinds are correctable, and the two retry lines, are the contract's words (options of
``FailureKind`` in sidecar.proto), taken from the table tools/protogen.py generates from it
(``core.correctability``); a class defined under the branch the contract does not name fails at import.
"""

from __future__ import annotations

import logging

from sidecar.core.correctable_failures import (
    Guardrail,
    InvalidInput,
    JsonParse,
    NotCarried,
    ResourceNotFound,
    ResponseValidation,
)
from sidecar.core.failure import CorrectableFailure, SidecarFailure, UncorrectableFailure
from sidecar.core.kinds import FailureKind
from sidecar.core.uncorrectable_failures import (
    CircuitOpen,
    ContextOverflow,
    ExternalService,
    JobCancelled,
    JobTimeout,
    ModelNotFound,
    OutputTruncated,
    PermissionDenied,
    ProviderRefusal,
    QuotaExhausted,
    SpendCapExceeded,
    StreamInterrupted,
    SystemFailure,
    TokenEstimateExceedsLimit,
    Unauthorized,
    UpstreamRetriesExhausted,
    UpstreamThrottle,
)

__all__ = [
    "CircuitOpen",
    "ContextOverflow",
    "CorrectableFailure",
    "ExternalService",
    "Guardrail",
    "InvalidInput",
    "JobCancelled",
    "JobTimeout",
    "JsonParse",
    "ModelNotFound",
    "NotCarried",
    "OutputTruncated",
    "PermissionDenied",
    "ProviderRefusal",
    "QuotaExhausted",
    "ResourceNotFound",
    "ResponseValidation",
    "SidecarFailure",
    "SpendCapExceeded",
    "StreamInterrupted",
    "SystemFailure",
    "TokenEstimateExceedsLimit",
    "Unauthorized",
    "UncorrectableFailure",
    "UpstreamRetriesExhausted",
    "UpstreamThrottle",
    "as_failure",
    "failure_class",
]


_CLASSES: list[type[SidecarFailure]] = [
    InvalidInput,
    ResourceNotFound,
    Guardrail,
    JsonParse,
    ResponseValidation,
    ExternalService,
    UpstreamThrottle,
    Unauthorized,
    PermissionDenied,
    SystemFailure,
    CircuitOpen,
    UpstreamRetriesExhausted,
    QuotaExhausted,
    SpendCapExceeded,
    ModelNotFound,
    ProviderRefusal,
    TokenEstimateExceedsLimit,
    ContextOverflow,
    OutputTruncated,
    JobTimeout,
    JobCancelled,
    StreamInterrupted,
]
_BY_KIND: dict[FailureKind, type[SidecarFailure]] = {cls.kind: cls for cls in _CLASSES}


def failure_class(kind: FailureKind) -> type[SidecarFailure]:
    """The class of a kind (``UNSPECIFIED`` reads as SystemFailure)."""
    return _BY_KIND.get(kind, SystemFailure)


_log = logging.getLogger("sidecar.failures")


def as_failure(exc: BaseException, component: str) -> SidecarFailure:
    """The one boundary: a failure of the taxonomy stays itself; anything else becomes SystemFailure.

    The model reads only that something broke in ``component``; the details go to the log.
    """
    if isinstance(exc, SidecarFailure):
        return exc
    failure = SystemFailure(component)
    _log.error("unexpected error in %s: %r", component, exc, exc_info=(type(exc), exc, exc.__traceback__))
    return failure
