"""Build cases: what a client's own builders make of a language-neutral description.

A Build case calls nothing. ``request`` is the base (model, system, messages given as they
are); ``build.messages`` are turns each client makes with its own builders (Python ``user`` /
``assistant`` / ``tool_results``, Go ``sidecar.User`` ..., README: "A Build case"), appended to
the base's messages; ``build.options`` are request controls each client sets its own way. The
observation is the CallModelRequest built, compared with ``expect.request`` as protos (so the
JSON's spelling does not matter), or ``refused`` when a builder refused what it was given::

    build.messages[i]   {"user": TEXT, "images": [IMG], "documents": [DOC], "parts": [PART], "cache": CACHE}
                        {"assistant": <CallModelResponse as proto3 JSON>}
                        {"tool_results": [{"call": <ToolCall>, "content": TEXT, "is_error": BOOL,
                                           "images": [IMG]} | {"call": ..., "outcome": <ExecuteToolResponse>,
                                           "images": [IMG]}]}
    IMG                 one of data (base64) | url | file (in cases/files/); media_type, detail, cache
    DOC                 one of data | url | file | text; media_type, title, cache
    PART                {"text": TEXT, "cache": CACHE} | {"image": IMG} | {"document": DOC}
    CACHE               true | "5m" | "1h"
    build.options       reasoning ("minimal".."high" or a budget), tool_choice ("auto", "none",
                        "required" or a tool's name), parallel_tool_calls, stop, top_p, top_k, seed,
                        presence_penalty, frequency_penalty, end_user, system_cache (CACHE),
                        provider_options (an object)
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["build_problems", "check_build", "observe_build_python"]

STEP_KEYS = {"user": {"user", "images", "documents", "parts", "cache"}, "assistant": {"assistant"}}
RESULT_KEYS = {"call", "content", "is_error", "outcome", "images"}
IMG_SOURCES = ("data", "url", "file")
IMG_KEYS = {*IMG_SOURCES, "media_type", "detail", "cache"}
DOC_SOURCES = ("data", "url", "file", "text")
DOC_KEYS = {*DOC_SOURCES, "media_type", "title", "cache"}
OPTIONS = {
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
    "provider_options",
}
EFFORTS = ("minimal", "low", "medium", "high")
CACHES = (True, "5m", "1h")
DETAILS = ("auto", "low", "high")
FILES = "files"
"""The folder of a Build case's files, beside the cases."""


def build_problems(data: Mapping[str, Any]) -> list[str]:
    """What is wrong with a Build case (every key is checked: a typo would build something else)."""
    problems = []
    unknown = set(data) - {"name", "description", "rpc", "request", "build", "expect"}
    if unknown:
        problems.append(f"unknown keys {sorted(unknown)} (a Build case has request, build and expect)")
    build = data.get("build")
    if not isinstance(build, dict) or not set(build) <= {"messages", "options"}:
        return [*problems, "build is an object of messages and options"]
    for i, step in enumerate(build.get("messages") or []):
        problems.extend(f"build.messages[{i}]: {p}" for p in _step_problems(step))
    options = build.get("options") or {}
    if unknown := set(options) - OPTIONS:
        problems.append(f"build.options: unknown {sorted(unknown)}")
    if "reasoning" in options and not (options["reasoning"] in EFFORTS or _is_int(options["reasoning"])):
        problems.append("build.options.reasoning is an effort or a budget")
    if "system_cache" in options and options["system_cache"] not in CACHES:
        problems.append("build.options.system_cache is true, '5m' or '1h'")
    expect = data.get("expect") or {}
    if set(expect) not in ({"request"}, {"refused"}) or expect.get("refused", True) is not True:
        problems.append("a Build case expects the request built, or refused: true")
    return problems


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _step_problems(step: Any) -> Iterator[str]:
    if not isinstance(step, dict):
        yield "a step is an object"
        return
    if "tool_results" in step:
        if set(step) != {"tool_results"}:
            yield "tool_results stands alone"
        for j, result in enumerate(step["tool_results"]):
            if unknown := set(result) - RESULT_KEYS:
                yield f"tool_results[{j}]: unknown {sorted(unknown)}"
            if "call" not in result or ("content" in result) == ("outcome" in result):
                yield f"tool_results[{j}]: a call, and content or outcome"
            if "outcome" in result and "is_error" in result:
                yield f"tool_results[{j}]: an outcome says is_error itself"
            for k, image in enumerate(result.get("images") or []):
                problems = _source_problems(image, IMG_SOURCES, IMG_KEYS)
                yield from (f"tool_results[{j}].images[{k}]: {p}" for p in problems)
        return
    kind = next((k for k in STEP_KEYS if k in step), None)
    if kind is None or not set(step) <= STEP_KEYS[kind]:
        yield f"a step is one of user, assistant, tool_results, with their keys: {sorted(step)}"
        return
    if "cache" in step and step["cache"] not in CACHES:
        yield "cache is true, '5m' or '1h'"
    for k, image in enumerate(step.get("images") or []):
        yield from (f"images[{k}]: {p}" for p in _source_problems(image, IMG_SOURCES, IMG_KEYS))
    for k, doc in enumerate(step.get("documents") or []):
        yield from (f"documents[{k}]: {p}" for p in _source_problems(doc, DOC_SOURCES, DOC_KEYS))
    for k, part in enumerate(step.get("parts") or []):
        if set(part) in ({"text"}, {"text", "cache"}):
            if part.get("cache", True) not in CACHES:
                yield f"parts[{k}]: cache is true, '5m' or '1h'"
        elif set(part) == {"image"}:
            yield from (f"parts[{k}].image: {p}" for p in _source_problems(part["image"], IMG_SOURCES, IMG_KEYS))
        elif set(part) == {"document"}:
            yield from (f"parts[{k}].document: {p}" for p in _source_problems(part["document"], DOC_SOURCES, DOC_KEYS))
        else:
            yield f"parts[{k}] is {{text[, cache]}}, {{image}} or {{document}}"


def _source_problems(spec: Any, sources: tuple[str, ...], keys: set[str]) -> Iterator[str]:
    if not isinstance(spec, dict) or len([s for s in sources if s in spec]) != 1:
        yield f"exactly one of {', '.join(sources)}"
        return
    if unknown := set(spec) - keys:
        yield f"unknown {sorted(unknown)}"
    if spec.get("cache", True) not in CACHES:
        yield "cache is true, '5m' or '1h'"
    if spec.get("detail", "auto") not in DETAILS:
        yield "detail is auto, low or high"


# ---------------------------------------------------------------- the Python client's builders


def observe_build_python(case_path: Path, request: Mapping[str, Any], build: Mapping[str, Any]) -> dict[str, Any]:
    """``{"request": <the CallModelRequest built, as JSON>}``, or ``{"refused": ...}`` when a builder refused."""
    from conformance_cases import model_kwargs
    from google.protobuf import json_format
    from sidecar_client import model_request, pb

    files = case_path.parent / FILES
    base = json_format.ParseDict(request, pb.CallModelRequest())
    try:
        built = [_python_step(step, files) for step in build.get("messages") or []]
        options = {**model_kwargs(base), **_python_options(build.get("options") or {})}
        req = model_request(base.model, [*base.messages, *built], **options)
    except (ValueError, TypeError) as refused:
        return {"refused": f"{type(refused).__name__}: {refused}"}
    return {"request": json_format.MessageToDict(req)}


def _python_step(step: Mapping[str, Any], files: Path) -> Any:
    from google.protobuf import json_format
    from sidecar_client import assistant, pb, text_part, tool_result, tool_results, user

    if "assistant" in step:
        return assistant(json_format.ParseDict(step["assistant"], pb.CallModelResponse()))
    if "tool_results" in step:
        results = []
        for r in step["tool_results"]:
            call = json_format.ParseDict(r["call"], pb.ToolCall())
            images = [_python_image(i, files) for i in r.get("images") or []] or None
            if "outcome" in r:
                outcome = json_format.ParseDict(r["outcome"], pb.ExecuteToolResponse())
                results.append(tool_result(call, outcome, image=images))
            else:
                results.append(tool_result(call, r["content"], image=images, is_error=r.get("is_error", False)))
        return tool_results(results)
    parts = []
    for part in step.get("parts") or []:
        if "image" in part:
            parts.append(_python_image(part["image"], files, always_part=True))
        elif "document" in part:
            parts.append(_python_document(part["document"], files, always_part=True))
        else:
            parts.append(text_part(part["text"], cache=part.get("cache")))
    return user(
        step["user"],
        image=[_python_image(i, files) for i in step.get("images") or []] or None,
        document=[_python_document(d, files) for d in step.get("documents") or []] or None,
        parts=parts,
        cache=step.get("cache"),
    )


def _source(spec: Mapping[str, Any], files: Path) -> Any:
    if "data" in spec:
        return base64.b64decode(spec["data"])
    if "file" in spec:
        return files / spec["file"]
    return spec["url"]


def _python_image(spec: Mapping[str, Any], files: Path, *, always_part: bool = False) -> Any:
    """A bare source when that is all the spec says (``user(image=Path(...))``), else an ``image_part``."""
    from sidecar_client import image_part

    source = _source(spec, files)
    extra = {k: spec[k] for k in ("media_type", "detail", "cache") if k in spec}
    return image_part(source, **extra) if extra or always_part else source


def _python_document(spec: Mapping[str, Any], files: Path, *, always_part: bool = False) -> Any:
    from sidecar_client import document_part

    extra = {k: spec[k] for k in ("media_type", "title", "cache") if k in spec}
    if "text" in spec:
        return document_part(text=spec["text"], **extra)
    source = _source(spec, files)
    return document_part(source, **extra) if extra or always_part else source


def _python_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The neutral options as ``ModelOptions``: the same names, the same values."""
    return dict(options)


# ---------------------------------------------------------------- judging


def check_build(expect: Mapping[str, Any], observed: Mapping[str, Any]) -> list[str]:
    """Every way the observed build differs from ``expect`` (``request`` compared as protos, field by field)."""
    from google.protobuf import json_format
    from sidecar_client import pb

    if expect.get("refused"):
        return [] if observed.get("refused") else ["refused: want the builder to refuse, it built a request"]
    if observed.get("refused"):
        return [f"request: the builder refused: {observed['refused']}"]
    want = json_format.ParseDict(expect["request"], pb.CallModelRequest())
    got = json_format.ParseDict(observed.get("request") or {}, pb.CallModelRequest())
    if want == got:
        return []
    problems = list(_differences("request", json_format.MessageToDict(want), json_format.MessageToDict(got)))
    return problems or ["request: the protos differ (unknown fields?)"]


def _differences(at: str, want: Any, got: Any) -> Iterator[str]:
    """Each differing leaf of two JSON values, by its path (``request.messages[0].parts[1].cache``)."""
    import json

    if isinstance(want, dict) and isinstance(got, dict):
        for key in sorted(set(want) | set(got)):
            yield from _differences(f"{at}.{key}", want.get(key), got.get(key))
    elif isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        for i, (w, g) in enumerate(zip(want, got, strict=True)):
            yield from _differences(f"{at}[{i}]", w, g)
    elif want != got:
        yield f"{at}: want {json.dumps(want, ensure_ascii=False)}, got {json.dumps(got, ensure_ascii=False)}"
