"""What a request asks beyond plain text, by name, and the refusal of what a format does not carry.

Every format's ``Upstream.carries`` names the features below it carries; ``refuse_uncarried``
refuses the first one a request asks for that it does not (with the format's reason, when it has one),
as INVALID_INPUT naming the field and the model, before anything is sent (nothing is accepted and then
dropped); ``format_rule`` is the refusal of a format's own rule in the same words. docs/carried.md is
the table of every feature against every format::

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

What a front reads but does not interpret is carried, not refused (``core.conversation.Carried``)::

    Unknown(format)         a front gathers one element's keys it does not interpret (``take``), nested
                            under the sub-object they were found in; ``carried(at)`` is the element's Carried
    merge_carried           an upstream deep-merges an element's carried keys of its own format into the
                            object it rendered (objects key by key; a key the upstream sets itself: refused)
    refuse_foreign          every upstream's ``check`` (by ``refuse_uncarried``): the first element carrying
                            another format's keys, refused by name before anything is sent (on a route:
                            NotCarried, so a deployment of that format is tried next)
"""

from __future__ import annotations

import copy
import json
from collections.abc import Collection, Iterator, Mapping
from typing import Any

from sidecar.core.conversation import (
    Carried,
    Controls,
    DocumentPart,
    ImagePart,
    Message,
    ModelRequest,
    Part,
    TextPart,
)
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.formats.fields import shown

__all__ = [
    "CONTROLS",
    "FEATURES",
    "UNCARRIED",
    "Unknown",
    "asked",
    "carried_elements",
    "format_rule",
    "kept",
    "merge_carried",
    "plain",
    "refuse_foreign",
    "refuse_uncarried",
    "refuse_unknown",
]

UNCARRIED = "is not carried by the sidecar{} (docs/carried.md): leave it out"
"""The rule a key no element of the core carries is refused with (``refuse_unknown``, a closed ``shapes.Shape``)."""

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
    """The request asks for no feature (text, tool calls and results as text) and carries no key: nothing to
    refuse, and no format rule applies (every rule is about a feature). Most calls are: ``check`` returns."""
    return (
        request.controls == _NO_CONTROLS
        and next(carried_elements(request), None) is None
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


def format_rule(field: str, value: str, model_id: str, format_name: str, rule: str) -> InvalidInput:
    """INVALID_INPUT naming ``field`` for a rule of ``format_name``'s: "model M speaks the F wire format: rule"."""
    return InvalidInput(field, value, f"model {model_id} speaks the {format_name} wire format: {rule}")


def refuse_uncarried(
    request: ModelRequest,
    carries: frozenset[str],
    format_name: str,
    model_id: str,
    why: Mapping[str, str] | None = None,
) -> None:
    """InvalidInput naming the first field whose feature the format does not carry for a reason it can say
    (``why``: the feature -> the reason), else the first key carried for another format (``refuse_foreign``),
    else the first field whose feature the format does not carry."""
    for feature, field in asked(request) if why is not None else ():
        if why is not None and feature in why:
            rule = f"model {model_id} speaks the {format_name} wire format, which does not carry {feature}: "
            raise InvalidInput(field, feature, f"{rule}{why[feature]} (docs/carried.md)")
    refuse_foreign(request, format_name, model_id)
    for feature, field in asked(request):
        if feature not in carries:
            raise InvalidInput(
                field,
                feature,
                f"model {model_id} speaks the {format_name} wire format, which does not carry {feature} "
                "(docs/carried.md)",
            )


# ---------------------------------------------------------------------------- keys carried, not interpreted


class Unknown:
    """The keys of one element a front does not interpret, gathered for its ``Carried``."""

    __slots__ = ("_format", "_keys", "_names")

    def __init__(self, format_name: str) -> None:
        self._format = format_name
        self._keys: dict[str, Any] = {}
        self._names: list[str] = []

    def take(self, value: Mapping[str, Any], known: Collection[str], *under: str) -> None:
        """Every key of ``value`` not in ``known`` (a null one says nothing), nested under ``under``: the
        keys that lead from the element to ``value`` (``take(source, KNOWN, "source")``)."""
        for key, item in value.items():
            if key in known or item is None:
                continue
            node = self._keys
            for parent in under:
                node = node.setdefault(parent, {})
            node[key] = item
            self._names.append(".".join((*under, key)))

    def carried(self, at: str) -> Carried | None:
        """The element's Carried (``at`` its caller's path), None when it has no such key."""
        if not self._keys:
            return None
        return Carried(self._format, self._keys, at, tuple(self._names))


def kept(format_name: str, value: Mapping[str, Any], known: Collection[str], at: str) -> Carried | None:
    """The Carried of one element's keys not in ``known`` (an element with no sub-object to look into)."""
    unknown = Unknown(format_name)
    unknown.take(value, known)
    return unknown.carried(at)


def _message_elements(m: Message) -> Iterator[Carried | None]:
    yield m.carried
    for part in m.parts:
        yield part.carried
    for call in m.tool_calls:
        yield call.carried
    for r in m.tool_results:
        yield r.carried
        for part in r.parts:
            yield part.carried


def carried_elements(request: ModelRequest) -> Iterator[Carried]:
    """Every element's Carried, in the request's order (the body first)."""
    elements: list[Carried | None] = [request.carried]
    for m in request.messages:
        elements.extend(_message_elements(m))
    elements.extend(t.carried for t in request.tools)
    yield from (c for c in elements if c is not None)


def refuse_unknown(value: Mapping[str, Any], known: Collection[str], where: str = "", *, here: bool = False) -> None:
    """INVALID_INPUT naming the first key of ``value`` not in ``known`` whose value is not null: a front's
    refusal of a key where no element of the core can carry it (``here``: a place whose other keys are
    carried, a system block beside a message's)."""
    for key, item in value.items():
        if key not in known and item is not None:
            at = f"{where}.{key}" if where else key
            raise InvalidInput(at, shown(item), UNCARRIED.format(" here" if here else ""), as_sent=True)


def refuse_foreign(request: ModelRequest, format_name: str, model_id: str) -> None:
    """InvalidInput naming the first key carried for a format other than ``format_name``: it was never
    interpreted, so only a deployment of the format it was written in can be sent it."""
    for c in carried_elements(request):
        if c.format != format_name:
            value = json.dumps(next(iter(c.keys.values()), None))[:200]
            raise InvalidInput(
                c.first,
                value,
                f"is not interpreted by the sidecar and is carried only to a deployment of the {c.format} "
                f"wire format; model {model_id} speaks {format_name} (docs/carried.md)",
                as_sent=True,
            )


def _merge(into: dict[str, Any], keys: Mapping[str, Any], at: str) -> None:
    for key, value in keys.items():
        path = f"{at}.{key}" if at else key
        mine = into.get(key)
        if key not in into:
            into[key] = copy.deepcopy(value)
        elif isinstance(mine, dict) and isinstance(value, Mapping):
            _merge(mine, value, path)
        else:
            rule = "is a key the sidecar sets itself from the request's own fields: set it there"
            raise InvalidInput(path, json.dumps(value)[:200], rule, as_sent=True)


def merge_carried(rendered: dict[str, Any], carried: Carried | None, format_name: str) -> dict[str, Any]:
    """``rendered`` with the carried keys of ``format_name`` deep-merged into it (objects key by key); a key the
    upstream rendered itself is refused by name. Another format's keys are not sent (``refuse_foreign`` has
    refused them in ``check``)."""
    if carried is not None and carried.format == format_name:
        _merge(rendered, carried.keys, carried.at)
    return rendered
