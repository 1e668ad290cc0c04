"""The Gemini vocabulary both halves share: finish reasons, statuses, parts, thought signatures, keys.

    finishReason (wire)                             FinishReason (core)    rendered back as
    STOP                                            STOP (TOOL_CALLS when  STOP
                                                    the reply calls tools)
    MAX_TOKENS                                      LENGTH                 MAX_TOKENS
    SAFETY, RECITATION, BLOCKLIST,                  CONTENT_FILTER         the reply's own, else SAFETY
      PROHIBITED_CONTENT, SPII, IMAGE_SAFETY,
      IMAGE_PROHIBITED_CONTENT                      (a refusal, its category the reason)
    promptFeedback.blockReason (no candidates)      CONTENT_FILTER         (a refusal, its category the reason)
    any other (OTHER, MALFORMED_FUNCTION_CALL ...)  UNSPECIFIED            -

The key goes in ``x-goog-api-key``. Parts, both ways (``content_part`` renders one; the front reads
them back)::

    core                                    part (``shapes.Part``)
    TextPart(text)                          text
    ImagePart(media_type, data)             inlineData, the bytes in base64 (a data: URL: the bytes it holds)
    ImagePart(url)                          fileData, its mimeType by the URL's extension
    DocumentPart(data) (a PDF)              inlineData application/pdf
    DocumentPart(url)                       fileData application/pdf
    ToolCall(id, name, arguments)           functionCall (arguments that are not a JSON object: args
                                            {"_raw": text})
    ToolCallResult(call_id, content,        functionResponse, its response {"output": content} or
      is_error, name)                       {"error": content}
    ReasoningPart(text, signature)          text, thought true, thoughtSignature
    ReasoningPart(redacted_data)            text "", thought true, thoughtSignature the data
    ReasoningPart(signature) (no text)      the signature Gemini put on a part that is not a thought (a
                                            functionCall, a text part): ``thoughtSignature`` on the
                                            message's first functionCall part, or on its last text part

Thought signatures are opaque bytes (base64 text) and go back exactly as they came, on the part
Gemini gives them with (``signed_parts``): the first function call of a turn (Gemini 3 refuses a
function-calling turn without it), else the last part of the answer.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Mapping

from sidecar.core.conversation import DocumentPart, ImagePart, Message, Part, TextPart, ToolCall
from sidecar.core.kinds import FinishReason
from sidecar.providers.formats.arguments import arguments_object
from sidecar.providers.formats.gemini.shapes import FunctionCall, GenerationConfig, Request
from sidecar.providers.formats.gemini.shapes import Part as WirePart
from sidecar.providers.formats.inline import b64, read_data_url
from sidecar.providers.formats.shapes import declared

__all__ = [
    "API_KEY_HEADER",
    "BLOCKED",
    "CALL_ID_PREFIX",
    "FINISH",
    "FINISH_NAMES",
    "FORMAT_NAME",
    "PDF",
    "REFUSAL_TEXT",
    "SIDECAR_KEYS",
    "STATUS_CODES",
    "STATUS_NAMES",
    "content_part",
    "signed_parts",
    "url_media_type",
]

FORMAT_NAME = "gemini"
API_KEY_HEADER = "x-goog-api-key"
CALL_ID_PREFIX = "gemini_call_"
"""The id a tool call gets when Gemini gave it none (sent back without it: Gemini matches by name)."""
REFUSAL_TEXT = "the model's answer was blocked"
"""A refusal's explanation when Gemini gave none (a safety block says only its reason)."""
PDF = "application/pdf"

BLOCKED = frozenset(
    {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT"}
)
"""The finish reasons that are a block: the answer was refused, its category the reason."""
FINISH: Mapping[str, FinishReason] = {
    "STOP": FinishReason.STOP,
    "MAX_TOKENS": FinishReason.LENGTH,
    **dict.fromkeys(BLOCKED, FinishReason.CONTENT_FILTER),
}
FINISH_NAMES: Mapping[FinishReason, str] = {
    FinishReason.STOP: "STOP",
    FinishReason.TOOL_CALLS: "STOP",
    FinishReason.LENGTH: "MAX_TOKENS",
    FinishReason.CONTENT_FILTER: "SAFETY",
}

STATUS_CODES: Mapping[str, int] = {
    "INVALID_ARGUMENT": 400,
    "FAILED_PRECONDITION": 400,
    "OUT_OF_RANGE": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "ABORTED": 409,
    "ALREADY_EXISTS": 409,
    "RESOURCE_EXHAUSTED": 429,
    "CANCELLED": 499,
    "INTERNAL": 500,
    "UNKNOWN": 500,
    "NOT_IMPLEMENTED": 501,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
}
"""``error.status`` and the HTTP status Google answers it with (``error.code``)."""
STATUS_NAMES: Mapping[int, str] = {code: name for name, code in reversed(list(STATUS_CODES.items()))}
"""The ``error.status`` of a bare HTTP status: the first of ``STATUS_CODES`` with it (another 5xx: UNAVAILABLE;
another 4xx: INVALID_ARGUMENT)."""

SIDECAR_KEYS = declared(Request)
"""The body's keys the sidecar sets from the request's own fields: provider options may not set them."""
GENERATION_KEYS = declared(GenerationConfig)
"""The ``generationConfig`` keys the sidecar sets (the rest of it a provider option may set)."""


def url_media_type(url: str) -> str:
    """An image URL's media type by its extension ("" when it has none Gemini reads)."""
    guessed, _ = mimetypes.guess_type(url.split("?", 1)[0])
    return guessed if guessed and guessed.startswith("image/") else ""


def _inline(media_type: str, data: bytes) -> WirePart:
    return {"inlineData": {"mimeType": media_type, "data": b64(data)}}


def content_part(part: Part) -> WirePart:
    """A part as a Gemini part (the module's table; ``upstream.GeminiUpstream.check`` refused the rest)."""
    match part:
        case TextPart():
            return {"text": part.text}
        case ImagePart():
            inline = read_data_url(part.url) if part.url else (part.media_type, part.data)
            if inline is None:
                return {"fileData": {"mimeType": url_media_type(part.url), "fileUri": part.url}}
            return _inline(*inline)
        case DocumentPart():
            if part.url:
                return {"fileData": {"mimeType": PDF, "fileUri": part.url}}
            return _inline(part.media_type or PDF, part.data)


def signed_parts(message: Message) -> list[WirePart]:
    """An assistant message's parts: thoughts first, then text and function calls, each signature that came
    on a part that is not a thought put back on the first function call (or the last text part)."""
    parts: list[WirePart] = []
    loose: list[str] = []
    for r in message.reasoning:
        if r.redacted_data:
            parts.append({"text": "", "thought": True, "thoughtSignature": r.redacted_data})
        elif r.text:
            thought: WirePart = {"text": r.text, "thought": True}
            if r.signature:
                thought["thoughtSignature"] = r.signature
            parts.append(thought)
        elif r.signature:
            loose.append(r.signature)
    content = [content_part(p) for p in message.content]
    calls: list[WirePart] = [{"functionCall": _function_call(c)} for c in message.tool_calls]
    if not content and not calls:
        content = [{"text": ""}]
    slots = calls or content[-1:]
    for slot, signature in zip(slots, loose, strict=False):
        slot["thoughtSignature"] = signature
    return [*parts, *content, *calls]


def _function_call(c: ToolCall) -> FunctionCall:
    call: FunctionCall = {"name": c.name, "args": arguments_object(c.arguments_json)}
    if c.id and not c.id.startswith(CALL_ID_PREFIX):
        call = {"id": c.id, **call}
    return call
