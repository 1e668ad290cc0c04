"""Python client of the sidecar.v1 contract.

``AsyncSidecarClient`` / ``SidecarClient`` call the sidecar; ``stream_model`` gives the reply as
an (async) iterator of events (``AsyncModelStream`` / ``ModelStream``, with ``collect()``);
CallModel and StreamModel failures raise one ``SidecarError`` subclass per kind (``correctable``,
``explanation``, ``http``, ``retry_after``, ``detail``, ``hops``); ``openai_tool_message`` /
``anthropic_tool_result`` hand a tool outcome back to a model.
The generated messages are re-exported as ``sidecar_client.pb``.
"""

from sidecar_contract.v1 import sidecar_pb2 as pb

from sidecar_client.client import AsyncSidecarClient, SidecarClient, Tls, assistant, job, tool_results, user
from sidecar_client.errors import (
    CORRECTABLE_KINDS,
    CORRECTABLE_LINE,
    UNCORRECTABLE_LINE,
    CircuitOpenError,
    ContextOverflowError,
    CorrectableError,
    ExternalServiceError,
    GuardrailError,
    InvalidInputError,
    JobCancelledError,
    JobTimeoutError,
    JsonParseError,
    ModelNotFoundError,
    OutputTruncatedError,
    PermissionDeniedError,
    ProviderRefusalError,
    QuotaExhaustedError,
    ResourceNotFoundError,
    ResponseValidationError,
    SidecarError,
    SpendCapExceededError,
    StreamInterruptedError,
    SystemFailureError,
    TokenEstimateExceedsLimitError,
    UnauthorizedError,
    UncorrectableError,
    UpstreamRetriesExhaustedError,
    UpstreamThrottleError,
    error_class,
    from_failure,
    from_rpc_error,
)
from sidecar_client.streaming import AsyncModelStream, ModelStream, StreamAccumulator
from sidecar_client.tool_messages import anthropic_tool_result, openai_tool_message

__all__ = [
    "CORRECTABLE_KINDS",
    "CORRECTABLE_LINE",
    "UNCORRECTABLE_LINE",
    "AsyncModelStream",
    "AsyncSidecarClient",
    "CircuitOpenError",
    "ContextOverflowError",
    "CorrectableError",
    "ExternalServiceError",
    "GuardrailError",
    "InvalidInputError",
    "JobCancelledError",
    "JobTimeoutError",
    "JsonParseError",
    "ModelNotFoundError",
    "ModelStream",
    "OutputTruncatedError",
    "PermissionDeniedError",
    "ProviderRefusalError",
    "QuotaExhaustedError",
    "ResourceNotFoundError",
    "ResponseValidationError",
    "SidecarClient",
    "SidecarError",
    "SpendCapExceededError",
    "StreamAccumulator",
    "StreamInterruptedError",
    "SystemFailureError",
    "Tls",
    "TokenEstimateExceedsLimitError",
    "UnauthorizedError",
    "UncorrectableError",
    "UpstreamRetriesExhaustedError",
    "UpstreamThrottleError",
    "anthropic_tool_result",
    "assistant",
    "error_class",
    "from_failure",
    "from_rpc_error",
    "job",
    "openai_tool_message",
    "pb",
    "tool_results",
    "user",
]
