"""The Anthropic Messages shapes (``formats/anthropic_messages/shapes.py``) follow the official SDK, and the
front's one boundary names a wrong value by the caller's own path.

    test                                   what it proves
    the request follows the SDK            every key a request shape declares is a key of the SDK's type
                                           at the same place (the pinned ``anthropic`` SDK's param
                                           TypedDicts, walked beside the shapes: a union's member found
                                           by its tag, ``type`` or ``role``)
    the reply follows the SDK              the same of the reply shapes against the SDK's ``Message``
                                           and a stream's deltas (pydantic models), but for the
                                           sidecar's extension
    a wrong type at each depth             through a running sidecar's Anthropic door, with the official
                                           SDK's client: a value of the wrong type at the body, a message,
                                           a block, a tool, a nested option is a 400 INVALID_INPUT naming
                                           the caller's path, and nothing reaches the provider
"""

from __future__ import annotations

import typing
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pydantic
import pytest
import typing_extensions
from anthropic.types import Message, RawContentBlockDeltaEvent
from anthropic.types.message_create_params import MessageCreateParamsStreaming

from sidecar.providers.formats.anthropic_messages.shapes import BlockDelta, MessageCreateParams, MessageReply
from tests.conftest import Start
from tests.fronts.test_http_openai import HTTP

ROOT = Path(__file__).resolve().parents[2]
EXTENSIONS = {"sidecar"}
"""Keys of the sidecar's own in a reply (docs/http.md), no key of the SDK's."""
UNTYPED = {"temperature", "top_p", "top_k"}
"""Request keys the front reads that the pinned SDK types nowhere (the sampling parameters: callers send
them, the core has them; shapes.py says so). Each must stay absent from the SDK: one it types again leaves."""
TAGS = ("type", "role")


def test_the_sdk_is_the_pinned_version_the_shapes_name() -> None:
    pinned = [line for line in (ROOT / "constraints.txt").read_text().splitlines() if line.startswith("anthropic==")]
    assert pinned == [f"anthropic=={version('anthropic')}"]
    assert f"SDK {version('anthropic')}" in " ".join((ROOT / "sidecar/providers/formats/anthropic_messages/shapes.py")
                                                    .read_text().split())  # fmt: skip


def _fields(shape: Any) -> dict[str, Any]:
    """A TypedDict's keys or a pydantic model's fields, each with its type."""
    if typing_extensions.is_typeddict(shape):
        return typing.get_type_hints(shape)
    return {name: field.annotation for name, field in shape.model_fields.items()}


def _objects(annotation: Any) -> list[Any]:
    """The JSON objects (TypedDicts, pydantic models) a type holds, through unions, lists and Annotated."""
    if typing_extensions.is_typeddict(annotation) or (
        isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel)
    ):
        return [annotation]
    return [found for arg in typing.get_args(annotation) for found in _objects(arg)]


def _tags(shape: Any) -> dict[str, set[str]]:
    """The values each tag key of a shape takes (its Literal), for the tags it has."""
    out = {}
    for key in TAGS:
        annotation = _fields(shape).get(key)
        if annotation is not None:
            out[key] = {str(a) for a in _literals(annotation)}
    return out


def _literals(annotation: Any) -> list[Any]:
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    return [value for arg in typing.get_args(annotation) for value in _literals(arg)]


def _counterparts(shape: Any, candidates: list[Any]) -> list[Any]:
    """The SDK's types ``shape`` stands for: those whose tags take its tags' values."""
    mine = _tags(shape)
    return [c for c in candidates if all(values & _tags(c).get(key, set()) for key, values in mine.items())]


def _walk(shape: Any, candidates: list[Any], at: str, skip: set[str]) -> list[str]:
    """Each key of ``shape`` (and of the shapes below it) that no SDK type at the same place has."""
    theirs = _counterparts(shape, candidates)
    if not theirs:
        return [f"{at or 'the body'}: {shape.__name__} is no type the SDK has there"]
    missing = []
    for key, annotation in _fields(shape).items():
        where = f"{at}.{key}" if at else key
        below = [a for t in theirs if key in _fields(t) for a in _objects(_fields(t)[key])]
        if not any(key in _fields(t) for t in theirs):
            if key not in skip:
                missing.append(f"{where} (not in {', '.join(t.__name__ for t in theirs)})")
            continue
        for inner in _objects(annotation):
            missing += _walk(inner, below, where, skip)
    return missing


def test_every_key_the_request_shapes_declare_is_the_sdks_at_the_same_place() -> None:
    assert _walk(MessageCreateParams, [MessageCreateParamsStreaming], "", UNTYPED) == []
    assert not UNTYPED & set(_fields(MessageCreateParamsStreaming))


def test_every_key_the_reply_shapes_declare_is_the_sdks_but_the_extension() -> None:
    assert _walk(MessageReply, [Message], "", EXTENSIONS) == []
    deltas = _objects(RawContentBlockDeltaEvent.model_fields["delta"].annotation)
    assert [m for delta in typing.get_args(BlockDelta) for m in _walk(delta, deltas, "delta", set())] == []


def test_the_walk_finds_a_key_the_sdk_does_not_have() -> None:
    class Invented(typing_extensions.TypedDict):
        model: str
        invented: int

    assert _walk(Invented, [MessageCreateParamsStreaming], "", set()) == [
        "invented (not in MessageCreateParamsStreaming)"
    ]


# ---------------------------------------------------------------------------- the boundary, through a door

USER = [{"role": "user", "content": "hi"}]


def blocks(*content: Any) -> dict[str, Any]:
    """A body's one user message of these blocks."""
    return {"messages": [{"role": "user", "content": list(content)}]}


PDF_AS_HTML = {"type": "document", "source": {"type": "base64", "media_type": "text/html", "data": ""}}
WRONG: list[tuple[str, dict[str, Any], str]] = [
    ("temperature", {"temperature": "hot"}, "must be a number"),
    ("max_tokens", {"max_tokens": True}, "must be an integer"),
    ("system", {"system": {"text": "be brief"}}, "must be a string or a list"),
    ("messages[0].content", {"messages": [{"role": "user", "content": 7}]}, "must be a string or a list"),
    ("messages[0].role", {"messages": [{"role": "system", "content": "x"}]}, "must be one of 'user', 'assistant'"),
    ("messages[0].content[0].text", blocks({"type": "text", "text": 5}), "must be a string"),
    ("messages[0].content[0].type", blocks({"type": "video"}),
     "must be one of 'text', 'image', 'document', 'tool_result'"),
    ("messages[0].content[0].cache_control.ttl",
     blocks({"type": "text", "text": "a", "cache_control": {"type": "ephemeral", "ttl": "2h"}}),
     "must be '5m' or '1h'"),
    ("messages[0].content[0].source.media_type", blocks(PDF_AS_HTML), "must be 'application/pdf'"),
    ("messages[0].content[0].content[0].text",
     blocks({"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": ["x"]}]}),
     "must be a string"),
    ("tools[0].strict", {"tools": [{"name": "f", "input_schema": {"type": "object"}, "strict": "yes"}]},
     "must be true or false"),
    ("tools[0].input_schema", {"tools": [{"name": "f", "input_schema": "object"}]}, "must be a JSON object"),
    ("tool_choice.name", {"tool_choice": {"type": "tool", "name": 7}}, "must be a string"),
    ("thinking.budget_tokens", {"thinking": {"type": "enabled", "budget_tokens": "many"}}, "must be an integer"),
    ("output_config.format.schema", {"output_config": {"format": {"type": "json_schema", "schema": 7}}},
     "must be a JSON object"),
    ("metadata.user_id", {"metadata": {"user_id": 5}}, "must be a string"),
]  # fmt: skip


async def test_a_wrong_type_at_each_depth_is_invalid_input_naming_the_callers_path(start_sidecar: Start) -> None:
    r = await start_sidecar(http=HTTP)
    assert r.app.http is not None
    wrong = []
    async with anthropic.AsyncAnthropic(
        base_url=f"http://127.0.0.1:{r.app.http.port}", api_key="unused", max_retries=0
    ) as client:
        for path, fields, rule in WRONG:
            body = {"model": "claude", "max_tokens": 5, "messages": USER, **fields}
            with pytest.raises(anthropic.BadRequestError) as caught:
                await client.post("/v1/messages", body=body, cast_to=httpx.Response)
            error = caught.value.body["error"]  # type: ignore[index]
            named = error["sidecar"]["failure"]["invalid_input"]
            if (error["type"], error["sidecar"]["kind"], named["parameter"]) != (
                "invalid_request_error",
                "INVALID_INPUT",
                path,
            ) or rule not in named["rule"]:
                wrong.append((path, error))
    assert wrong == []
    assert r.provider.requests() == []
