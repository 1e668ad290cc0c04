"""A request's content parts and controls, checked before anything is sent, and its images' tokens.

What every format shares is checked here; what one format cannot carry, or its own rules (Anthropic's
thinking rules, OpenAI's four stop sequences), is its upstream's ``check``. Each refusal is an
INVALID_INPUT naming the field (``messages[2].parts[0]``), the value and the rule or the limit::

    a message           text or parts, never both; something to say
    a part              text: not empty; image: data (a media type the model takes, at most
                        parts.max_image_bytes) or an https / data: URL; document: a PDF as data or
                        URL (at most parts.max_document_bytes), or text
    the conversation    at most parts.max_parts images and documents
    a tool result       content or parts (text and images), never both
    reasoning           on assistant messages only, each with text, a signature or redacted data
    controls            a known effort or a budget > 0; tool_choice naming one of the tools; top_p in
                        [0, 1]; top_k >= 1; penalties in [-2, 2]; stop sequences not empty;
                        system_cache with a system prompt

Image tokens follow the providers' published rules (REFERENCE.md): OpenAI counts 85 for a low-detail
look, else 85 + 170 per 512-px tile after scaling to fit 2048 px and the short side to 768;
Anthropic width x height / 750 after scaling the long edge to 1,568 px. The pre-check takes the
larger of the two, so it never under-counts whichever format serves; an image given by URL, or
whose size its header does not say, counts as the largest (1,568 x 1,568).
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass

from sidecar.core.conversation import DocumentPart, ImagePart, Message, ModelRequest, Part, TextPart
from sidecar.core.kinds import Role
from sidecar.core.taxonomy import InvalidInput

__all__ = [
    "EFFORTS",
    "MAX_PROVIDER_OPTIONS_BYTES",
    "Limits",
    "check_content",
    "image_tokens",
    "parts_tokens",
]

EFFORTS = ("minimal", "low", "medium", "high")
CHOICE_MODES = ("auto", "none", "required", "tool")
MAX_PROVIDER_OPTIONS_BYTES = 64 * 1024
"""``provider_options_json`` at most (it is merged into every attempt's body, and shown masked in spans)."""
MAX_PENALTY = 2.0
_URL_SCHEMES = ("https://", "http://", "data:")

_OPENAI_LOW = 85
_OPENAI_TILE = 170
_OPENAI_TILE_PX = 512
_OPENAI_FIT_PX = 2048
_OPENAI_SHORT_PX = 768
_ANTHROPIC_LONG_PX = 1568
_ANTHROPIC_PX_PER_TOKEN = 750
_DOCUMENT_BYTES_PER_TOKEN = 3
"""A PDF's bytes per token, a coarse upper bound (a page of text and its image, ~1,500-3,000 tokens)."""


@dataclass(frozen=True, slots=True)
class Limits:
    """A model's part limits (``models.<id>.parts``), named as the configuration names them."""

    model: str
    max_parts: int
    max_image_bytes: int
    max_document_bytes: int
    image_media_types: Sequence[str]
    document_media_types: Sequence[str]


def check_content(req: ModelRequest, limits: Limits) -> None:
    """InvalidInput for the first part or control that breaks a rule or a limit."""
    counted = 0
    for i, m in enumerate(req.messages):
        where = f"messages[{i}]"
        if m.text and m.parts:
            raise InvalidInput(f"{where}.text", "", f"{where} sets both text and parts: use one of them")
        if not (m.text or m.parts or m.tool_calls or m.tool_results or m.reasoning):
            raise InvalidInput(where, "", "must carry text, parts, tool calls or tool results")
        counted += _check_parts(f"{where}.parts", m.parts, limits, images_only=False)
        for j, r in enumerate(m.tool_results):
            at = f"{where}.tool_results[{j}]"
            if r.content and r.parts:
                raise InvalidInput(f"{at}.content", "", f"{at} sets both content and parts: use one of them")
            counted += _check_parts(f"{at}.parts", r.parts, limits, images_only=True)
        _check_reasoning(where, m)
    if counted > limits.max_parts:
        raise InvalidInput(
            "messages", f"{counted} images and documents", f"at most {limits.max_parts} (models.{limits.model}.parts)"
        )
    _check_controls(req)


def _check_parts(where: str, parts: Sequence[Part], limits: Limits, *, images_only: bool) -> int:
    counted = 0
    for j, part in enumerate(parts):
        at = f"{where}[{j}]"
        match part:
            case TextPart():
                if not part.text:
                    raise InvalidInput(f"{at}.text", "", "a text part must not be empty")
            case ImagePart():
                counted += 1
                _check_image(at, part, limits)
            case DocumentPart():
                if images_only:
                    raise InvalidInput(at, "document", "a tool result carries text and image parts only")
                counted += 1
                _check_document(at, part, limits)
    return counted


def _check_image(at: str, image: ImagePart, limits: Limits) -> None:
    if bool(image.data) == bool(image.url):
        raise InvalidInput(at, "", "an image part sets exactly one of data and url")
    if image.url:
        if not image.url.startswith(_URL_SCHEMES):
            raise InvalidInput(f"{at}.url", image.url[:80], "must be an https, http or data: URL")
        return
    if image.media_type not in limits.image_media_types:
        raise InvalidInput(
            f"{at}.media_type",
            image.media_type,
            f"model {limits.model} takes images as {', '.join(limits.image_media_types)}",
        )
    if len(image.data) > limits.max_image_bytes:
        raise InvalidInput(
            f"{at}.data",
            f"{len(image.data)} bytes",
            f"an image may hold at most {limits.max_image_bytes} bytes (models.{limits.model}.parts.max_image_bytes)",
        )


def _check_document(at: str, doc: DocumentPart, limits: Limits) -> None:
    given = [name for name, set_ in (("data", doc.data), ("url", doc.url), ("text", doc.text is not None)) if set_]
    if len(given) != 1:
        raise InvalidInput(at, ", ".join(given), "a document part sets exactly one of data, url and text")
    media_type = doc.media_type or ("text/plain" if doc.text is not None else "application/pdf")
    if media_type not in limits.document_media_types:
        raise InvalidInput(
            f"{at}.media_type",
            media_type,
            f"model {limits.model} takes documents as {', '.join(limits.document_media_types)}",
        )
    if doc.text is not None and media_type != "text/plain":
        raise InvalidInput(f"{at}.media_type", media_type, "a document given as text is text/plain")
    if doc.url and not doc.url.startswith("https://"):
        raise InvalidInput(f"{at}.url", doc.url[:80], "must be an https URL")
    size = len(doc.data) if doc.data else len((doc.text or "").encode())
    if size > limits.max_document_bytes:
        raise InvalidInput(
            f"{at}.{given[0]}",
            f"{size} bytes",
            f"a document may hold at most {limits.max_document_bytes} bytes "
            f"(models.{limits.model}.parts.max_document_bytes)",
        )


def _check_reasoning(where: str, m: Message) -> None:
    if m.reasoning and m.role is not Role.ASSISTANT:
        raise InvalidInput(f"{where}.reasoning", "", "only an assistant message carries reasoning")
    for j, r in enumerate(m.reasoning):
        if not (r.text or r.signature or r.redacted_data):
            raise InvalidInput(f"{where}.reasoning[{j}]", "", "carries text, a signature or redacted data")
        if r.redacted_data and (r.text or r.signature):
            raise InvalidInput(f"{where}.reasoning[{j}]", "", "redacted reasoning carries its data alone")


def _check_controls(req: ModelRequest) -> None:
    c = req.controls
    if c.reasoning is not None:
        if c.reasoning.budget_tokens is not None:
            if c.reasoning.budget_tokens <= 0:
                raise InvalidInput("reasoning.budget_tokens", str(c.reasoning.budget_tokens), "must be above 0")
        elif c.reasoning.effort not in EFFORTS:
            raise InvalidInput("reasoning.effort", c.reasoning.effort, f"must be one of {', '.join(EFFORTS)}")
    if c.tool_choice is not None:
        choice = c.tool_choice
        if choice.mode not in CHOICE_MODES:
            raise InvalidInput("tool_choice.mode", choice.mode, f"must be one of {', '.join(CHOICE_MODES)}")
        names = [t.name for t in req.tools]
        if choice.mode in ("required", "tool") and not names:
            raise InvalidInput("tool_choice.mode", choice.mode, "asks for a tool call, and the request offers no tools")
        if choice.mode == "tool" and choice.name not in names:
            raise InvalidInput(
                "tool_choice.name", choice.name, "must name one of the request's tools: " + ", ".join(names)
            )
        if choice.mode != "tool" and choice.name:
            raise InvalidInput("tool_choice.name", choice.name, "is set only with mode tool")
    if c.top_p is not None and not 0.0 <= c.top_p <= 1.0:
        raise InvalidInput("top_p", str(c.top_p), "must be between 0 and 1")
    if c.top_k is not None and c.top_k < 1:
        raise InvalidInput("top_k", str(c.top_k), "must be at least 1")
    for name, value in (("presence_penalty", c.presence_penalty), ("frequency_penalty", c.frequency_penalty)):
        if value is not None and not -MAX_PENALTY <= value <= MAX_PENALTY:
            raise InvalidInput(name, str(value), "must be between -2 and 2")
    for i, s in enumerate(c.stop):
        if not s:
            raise InvalidInput(f"stop[{i}]", "", "a stop sequence must not be empty")
    if c.system_cache is not None and not req.system:
        raise InvalidInput("system_cache", "", "marks the system prompt, and the request has none")
    if len(c.provider_options_json.encode()) > MAX_PROVIDER_OPTIONS_BYTES:
        raise InvalidInput(
            "provider_options_json",
            f"{len(c.provider_options_json.encode())} bytes",
            f"must be at most {MAX_PROVIDER_OPTIONS_BYTES} bytes",
        )


def image_tokens(image: ImagePart) -> int:
    """The tokens an image costs, the larger of OpenAI's and Anthropic's published rules."""
    width, height = _ANTHROPIC_LONG_PX, _ANTHROPIC_LONG_PX
    if image.data:
        # Loaded at the first image's data: imagesize imports urllib.request and http.client
        # (30 ms, 2 MB at start), and most sidecars never see an image.
        import imagesize

        w, h = imagesize.get(io.BytesIO(image.data))
        if w > 0 and h > 0:
            width, height = w, h
    return max(_openai_tokens(width, height, image.detail), _anthropic_tokens(width, height))


def _openai_tokens(width: int, height: int, detail: str) -> int:
    if detail == "low":
        return _OPENAI_LOW
    scale = min(1.0, _OPENAI_FIT_PX / max(width, height))
    w, h = width * scale, height * scale
    scale = min(1.0, _OPENAI_SHORT_PX / min(w, h))
    w, h = w * scale, h * scale
    tiles = math.ceil(w / _OPENAI_TILE_PX) * math.ceil(h / _OPENAI_TILE_PX)
    return _OPENAI_LOW + _OPENAI_TILE * tiles


def _anthropic_tokens(width: int, height: int) -> int:
    scale = min(1.0, _ANTHROPIC_LONG_PX / max(width, height))
    return math.ceil(width * scale * height * scale / _ANTHROPIC_PX_PER_TOKEN)


def parts_tokens(parts: Sequence[Part]) -> tuple[int, int]:
    """``(tokens, chars)``: the images' and PDFs' tokens, and the characters of the text parts."""
    tokens = chars = 0
    for part in parts:
        match part:
            case TextPart():
                chars += len(part.text)
            case ImagePart():
                tokens += image_tokens(part)
            case DocumentPart():
                if part.text is not None:
                    chars += len(part.text)
                elif part.data:
                    tokens += math.ceil(len(part.data) / _DOCUMENT_BYTES_PER_TOKEN)
                chars += len(part.title)
    return tokens, chars
