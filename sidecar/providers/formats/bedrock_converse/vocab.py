"""The Bedrock Converse vocabulary both halves share: stop reasons, error types, stream events, blocks.

    stopReason (wire)                       FinishReason (core)     rendered back as
    end_turn, stop_sequence                 STOP (TOOL_CALLS when   end_turn
                                            the reply calls tools)
    tool_use                                TOOL_CALLS              tool_use
    max_tokens,                             LENGTH                  max_tokens
      model_context_window_exceeded
    guardrail_intervened, content_filtered  CONTENT_FILTER          the reply's own, else content_filtered
                                            (a refusal, the stop reason its category)
    any other (malformed_model_output ...)  UNSPECIFIED             -

Content blocks, both ways (``content_block`` renders a part; the front reads them back; their keys
are ``shapes``')::

    core                                    block
    TextPart(text, cache)                   text, then a cachePoint (its ttl) for a cache breakpoint
    ImagePart(media_type, data)             image: its format, the bytes (a data: URL's: the bytes it holds)
    ImagePart(url) (an s3:// URL)           image: the format by the URL's extension, an s3Location
    DocumentPart(data) (a PDF)              document: pdf, its title the name
    DocumentPart(text) (plain text)         document: txt, the text's bytes, its title the name
                                            (no title: ``document-<n>``, read back as none)
    ToolCall(id, name, arguments)           toolUse (arguments not a JSON object: input {"_raw": text})
    ToolCallResult(call_id, content |       toolResult: its content as text or image blocks; status
      parts, is_error)                      error when is_error
    ReasoningPart(text, signature)          reasoningContent.reasoningText
    ReasoningPart(redacted_data)            reasoningContent.redactedContent

Blobs (an image's or a document's bytes, redacted reasoning) travel as base64 text in the JSON
body, as the service's REST-JSON protocol sends a blob. Reasoning goes back byte-identical: the
signature and the redacted content exactly as they came.

Errors are the HTTP status, the ``x-amzn-ErrorType`` header (``ThrottlingException:...``) and a
body ``{"message": ...}``; in a stream, an event-stream message of type ``exception`` whose
``:exception-type`` names it in lowerCamelCase (``throttlingException``). ``ERROR_STATUS`` is each
type's status as the service model declares it.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Iterable, Mapping
from typing import Any

from sidecar.config import AWS_ENVIRONMENT
from sidecar.core.conversation import CacheBreakpoint, DocumentPart, ImagePart, Part, ReasoningPart, TextPart, ToolCall
from sidecar.core.kinds import FinishReason
from sidecar.providers.formats.arguments import arguments_object
from sidecar.providers.formats.bedrock_converse.shapes import AssistantBlock, ReasoningText
from sidecar.providers.formats.inline import b64, read_data_url

__all__ = [
    "BEARER_ENV",
    "BLOCKED",
    "ENV_CREDENTIALS",
    "ERROR_HEADER",
    "ERROR_STATUS",
    "EVENTS",
    "FINISH",
    "FINISH_NAMES",
    "FORMAT_NAME",
    "IMAGE_FORMATS",
    "REFUSAL_TEXT",
    "SERVICE",
    "SIDECAR_KEYS",
    "cache_point",
    "content_block",
    "exception_event",
    "is_exception",
    "reasoning_blocks",
    "tool_use_blocks",
    "url_format",
]

FORMAT_NAME = "bedrock_converse"
SERVICE = "bedrock"
"""The SigV4 signing name of bedrock-runtime (its service model's ``signingName``)."""
BEARER_ENV = AWS_ENVIRONMENT.bearer
"""The environment variable of a Bedrock API key (sent as ``Authorization: Bearer``), as the AWS SDKs read it."""
ENV_CREDENTIALS: Mapping[str, str | list[str]] = {
    "access_key": AWS_ENVIRONMENT.access_key,
    "secret_key": AWS_ENVIRONMENT.secret_key,
    "token": list(AWS_ENVIRONMENT.tokens),
}
"""botocore's ``EnvProvider`` mapping: SigV4 credentials from ``AWS_ENVIRONMENT``'s variables, the ones masked."""
ERROR_HEADER = "x-amzn-errortype"
REFUSAL_TEXT = "the model's answer was blocked"
"""A refusal's explanation when Bedrock gave no text (a guardrail usually says its own blocked message)."""
PDF = "application/pdf"
TEXT = "text/plain"
DEFAULT_NAME = "document-"

BLOCKED = frozenset({"guardrail_intervened", "content_filtered"})
FINISH: Mapping[str, FinishReason] = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "tool_use": FinishReason.TOOL_CALLS,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    **dict.fromkeys(BLOCKED, FinishReason.CONTENT_FILTER),
}
FINISH_NAMES: Mapping[FinishReason, str] = {
    FinishReason.STOP: "end_turn",
    FinishReason.TOOL_CALLS: "tool_use",
    FinishReason.LENGTH: "max_tokens",
    FinishReason.CONTENT_FILTER: "content_filtered",
}
IMAGE_FORMATS: Mapping[str, str] = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}
"""An image's media type and its Converse ``format``."""
EVENTS = frozenset(
    {"messageStart", "contentBlockStart", "contentBlockDelta", "contentBlockStop", "messageStop", "metadata"}
)
"""The events of a ConverseStream (``:event-type``); any other that is no exception is ignored."""

ERROR_STATUS: Mapping[str, int] = {
    "AccessDeniedException": 403,
    "ResourceNotFoundException": 404,
    "ThrottlingException": 429,
    "ModelNotReadyException": 429,
    "ModelTimeoutException": 408,
    "ModelErrorException": 424,
    "ModelStreamErrorException": 424,
    "ValidationException": 400,
    "ServiceQuotaExceededException": 400,
    "InternalServerException": 500,
    "ServiceUnavailableException": 503,
    "UnrecognizedClientException": 403,
}

SIDECAR_KEYS = frozenset({"modelId", "messages", "system", "inferenceConfig", "toolConfig", "stream"})
"""The body's keys the sidecar sets from the request's own fields: provider options may not set them."""


def is_exception(event: str) -> bool:
    """A stream message that is an exception (``throttlingException``; ``error``: the framing's own), not an event."""
    return event.endswith("Exception") or event == "error"


def exception_event(error_type: str) -> str:
    """An error type as a stream's ``:exception-type`` (``ThrottlingException`` -> ``throttlingException``)."""
    return error_type[:1].lower() + error_type[1:]


def reasoning_blocks(parts: Iterable[ReasoningPart]) -> list[AssistantBlock]:
    """An assistant turn's reasoning as its first blocks, byte-identical (a part with nothing in it: none)."""
    out: list[AssistantBlock] = []
    for r in parts:
        if r.redacted_data:
            out.append({"reasoningContent": {"redactedContent": r.redacted_data}})
        elif r.text or r.signature:
            text: ReasoningText = {"text": r.text, "signature": r.signature} if r.signature else {"text": r.text}
            out.append({"reasoningContent": {"reasoningText": text}})
    return out


def tool_use_blocks(calls: Iterable[ToolCall]) -> list[AssistantBlock]:
    """An assistant turn's tool calls as its last blocks."""
    return [
        {"toolUse": {"toolUseId": c.id, "name": c.name, "input": arguments_object(c.arguments_json)}} for c in calls
    ]


def cache_point(cache: CacheBreakpoint) -> dict[str, Any]:
    point: dict[str, Any] = {"type": "default"}
    if cache.ttl:
        point["ttl"] = cache.ttl
    return {"cachePoint": point}


def default_name(n: int) -> str:
    """The name of a document given without a title (Converse requires one)."""
    return f"{DEFAULT_NAME}{n}"


def url_format(url: str) -> str:
    """An image URL's Converse ``format`` by its extension ("" when it names none)."""
    guessed, _ = mimetypes.guess_type(url.split("?", 1)[0])
    return IMAGE_FORMATS.get(guessed or "", "")


def content_block(part: Part, n: int) -> list[dict[str, Any]]:
    """A part as Converse blocks (the module's table; ``upstream.BedrockUpstream.check`` refused the rest);
    ``n``: the document's number in its message, for a document's default name."""
    match part:
        case TextPart():
            out: list[dict[str, Any]] = [{"text": part.text}]
        case ImagePart():
            inline = read_data_url(part.url) if part.url else (part.media_type, part.data)
            if inline is None:
                image = {"format": url_format(part.url), "source": {"s3Location": {"uri": part.url}}}
            else:
                image = {"format": IMAGE_FORMATS[inline[0]], "source": {"bytes": b64(inline[1])}}
            out = [{"image": image}]
        case DocumentPart():
            name = part.title or default_name(n)
            if part.text is not None:
                document = {"format": "txt", "name": name, "source": {"bytes": b64(part.text.encode())}}
            else:
                document = {"format": "pdf", "name": name, "source": {"bytes": b64(part.data)}}
            out = [{"document": document}]
    if part.cache is not None:
        out.append(cache_point(part.cache))
    return out
