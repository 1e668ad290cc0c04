"""What a request asks beyond plain text, by name, and the refusal of what a format does not carry.

Every format's ``Upstream.carries`` names the features below it carries; ``refuse_uncarried``
refuses the first one a request asks for that it does not, as INVALID_INPUT naming the field and
the model, before anything is sent (nothing is accepted and then dropped). docs/carried.md is the
table of every feature against every format::

    feature                 asked for by
    parts.text              a message's text parts (with or without cache breakpoints)
    parts.image             an image part of a message
    parts.document          a PDF document part of a message, given as data
    parts.document_url      a PDF document part of a message, given by URL
    parts.text_document     a plain-text document part of a message
    parts.cache             a cache breakpoint on a part
    tool_results.parts      a tool result given as parts (text)
    tool_results.image      an image part of a tool result
    reasoning.history       an assistant message's reasoning made by this format, passed back (reasoning
                            another format made is never sent: ModelService drops it with a warning)
    tools.cache             a cache breakpoint on a tool definition
    tools.strict            strict function calling asked on a tool definition (``strict`` true; false
                            and unset ask nothing a format must carry)
    reasoning, tool_choice, parallel_tool_calls, stop, top_p, top_k, seed, presence_penalty,
    frequency_penalty, end_user, system_cache, provider_options_json
                            the request's control of that name (``Controls.asked``)
"""

from __future__ import annotations

from collections.abc import Iterator

from sidecar.core.conversation import Controls, DocumentPart, ImagePart, ModelRequest, Part, TextPart
from sidecar.core.taxonomy import InvalidInput

__all__ = ["CONTROLS", "FEATURES", "asked", "plain", "refuse_uncarried"]

CONTROLS = (
    "reasoning",
    "tool_choice",
    "parallel_tool_calls",
    "stop",
    "top_p",
    "top_k",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "end_user",
    "system_cache",
    "provider_options_json",
)
FEATURES = (
    "parts.text",
    "parts.image",
    "parts.document",
    "parts.document_url",
    "parts.text_document",
    "parts.cache",
    "tool_results.parts",
    "tool_results.image",
    "reasoning.history",
    "tools.cache",
    "tools.strict",
    *CONTROLS,
)


def _parts(where: str, parts: tuple[Part, ...], prefix: str) -> Iterator[tuple[str, str]]:
    for j, part in enumerate(parts):
        at = f"{where}[{j}]"
        match part:
            case TextPart():
                yield f"{prefix}.text" if prefix == "parts" else f"{prefix}.parts", at
            case ImagePart():
                yield f"{prefix}.image", at
            case DocumentPart(text=None, url=""):
                yield f"{prefix}.document", at
            case DocumentPart(text=None):
                yield f"{prefix}.document_url", at
            case _:
                yield f"{prefix}.text_document", at
        if part.cache is not None:
            yield "parts.cache", f"{at}.cache"


_NO_CONTROLS = Controls()


def plain(request: ModelRequest) -> bool:
    """The request asks for no feature (text, tool calls and results as text): nothing to refuse, and no
    format rule applies (every rule is about a feature). Most calls are: a format's ``check`` returns."""
    return (
        request.controls == _NO_CONTROLS
        and not any(m.parts or m.reasoning or any(r.parts for r in m.tool_results) for m in request.messages)
        and not any(t.cache is not None or t.strict for t in request.tools)
    )


def asked(request: ModelRequest) -> Iterator[tuple[str, str]]:
    """``(feature, field)`` for everything the request asks that plain text does not, in order."""
    for i, m in enumerate(request.messages):
        yield from _parts(f"messages[{i}].parts", m.parts, "parts")
        for j, r in enumerate(m.tool_results):
            if r.parts:
                yield "tool_results.parts", f"messages[{i}].tool_results[{j}].parts"
                yield from _parts(f"messages[{i}].tool_results[{j}].parts", r.parts, "tool_results")
        if m.reasoning:
            yield "reasoning.history", f"messages[{i}].reasoning"
    for i, t in enumerate(request.tools):
        if t.cache is not None:
            yield "tools.cache", f"tools[{i}].cache"
        if t.strict:
            yield "tools.strict", f"tools[{i}].strict"
    for name in request.controls.asked():
        yield name, name


def refuse_uncarried(request: ModelRequest, carries: frozenset[str], format_name: str, model_id: str) -> None:
    """InvalidInput naming the first field whose feature the format does not carry."""
    for feature, field in asked(request):
        if feature not in carries:
            raise InvalidInput(
                field,
                feature,
                f"model {model_id} speaks the {format_name} wire format, which does not carry {feature} "
                "(docs/carried.md)",
            )
