"""The OpenAI Chat Completions shapes (``formats/openai_chat/shapes.py``) follow the SDK, and are the boundary.

test                                    what it proves
the request follows the SDK             every key a request shape declares, at every depth, is a key of the
                                        SDK's request TypedDict there (``CompletionCreateParams``, walked
                                        through its messages, parts, tools ...: a union's member paired by
                                        its ``type`` or ``role``), at the version constraints.txt pins
the reply follows the SDK               the same for what ``render`` and ``ChunkWriter`` write, against
                                        ``ChatCompletion`` and ``ChatCompletionChunk`` (pydantic models)
a wrong type at each depth              a value of the wrong type in the body, a message, a part, a tool and a
                                        nested option, sent with the official SDK to a running sidecar: 400
                                        INVALID_INPUT naming the caller's path, and nothing sent upstream
"""

from __future__ import annotations

import typing
from importlib.metadata import version
from pathlib import Path
from typing import Any

import openai
import pytest
import pytest_asyncio
import typing_extensions
from openai.types import chat as sdk
from openai.types.chat import completion_create_params
from pydantic import BaseModel

from sidecar.providers.formats.openai_chat import shapes
from sidecar.providers.formats.shapes import declared
from tests.conftest import Running, Start

WIDER = {(shapes.AssistantMessage, "annotations"): sdk.ChatCompletionMessage}
"""A key declared wider than the SDK's request type, and the SDK type it comes from (shapes.py's docstring)."""
OURS = {"sidecar"}
"""The sidecar's own extension of an answer (``error.sidecar``, ``sidecar.restart``)."""


def test_the_sdk_is_the_pinned_one() -> None:
    pins = (Path(__file__).parents[2] / "constraints.txt").read_text().split()
    assert f"openai=={version('openai')}" in pins
    assert f"SDK {version('openai')}" in (shapes.__doc__ or "")  # the shapes name the version tested


def _classes(annotation: Any) -> list[Any]:
    """The TypedDicts and pydantic models an annotation names, through unions, lists, Required and the like."""
    if isinstance(annotation, type) and (
        typing_extensions.is_typeddict(annotation) or issubclass(annotation, BaseModel)
    ):
        return [annotation]
    return [c for arg in typing_extensions.get_args(annotation) for c in _classes(arg)]


def _fields(cls: Any) -> dict[str, Any]:
    """A TypedDict's or a model's keys and their annotations."""
    if isinstance(cls, type) and issubclass(cls, BaseModel):
        return {name: field.annotation for name, field in cls.model_fields.items()}
    return typing_extensions.get_type_hints(cls, include_extras=True)


def _tag(cls: Any) -> str | None:
    """The ``type`` or ``role`` a union member is told by (its one Literal value), if it has one: a member
    of a union of several is paired with the SDK's member of the same tag."""
    for key in ("type", "role"):
        annotation = _fields(cls).get(key)
        while annotation is not None and typing_extensions.get_origin(annotation) is not typing.Literal:
            args = [a for a in typing_extensions.get_args(annotation) if a is not type(None)]
            annotation = args[0] if len(args) == 1 else None
        if annotation is not None and len(typing_extensions.get_args(annotation)) == 1:
            return str(typing_extensions.get_args(annotation)[0])
    return None


def _unfollowed(mine: Any, theirs: list[Any], at: str, walked: set[Any] | None = None) -> list[str]:
    """The paths of the keys ``mine`` declares that none of the SDK's ``theirs`` has, at every depth (each
    shape walked added to ``walked``)."""
    missing: list[str] = []
    walked = set() if walked is None else walked
    walked.add(mine)
    hints = typing_extensions.get_type_hints(mine, include_extras=True)
    for key in sorted(declared(mine)):
        wider = WIDER.get((mine, key))
        theirs_here = [wider] if wider is not None else [t for t in theirs if key in _fields(t)]
        if not theirs_here:
            missing.append(f"{at}.{key}")
            continue
        nested = [c for t in theirs_here for c in _classes(_fields(t)[key])]
        for inner in _classes(hints[key]):
            tag = _tag(inner)
            paired = [c for c in nested if _tag(c) == tag] if tag is not None and len(nested) > 1 else nested
            if not paired:
                missing.append(f"{at}.{key} ({inner.__name__}: no SDK type of {tag!r})")
                continue
            missing += _unfollowed(inner, paired, f"{at}.{key}", walked)
    return missing


def test_every_request_key_the_shapes_declare_is_the_sdks() -> None:
    theirs = [completion_create_params.CompletionCreateParamsNonStreaming]
    walked: set[Any] = set()
    assert _unfollowed(shapes.Request, theirs, "request", walked) == []
    declared_shapes = {v for v in vars(shapes).values() if typing_extensions.is_typeddict(v)}
    reply = {shapes.Completion, shapes.Chunk}
    reply_walked: set[Any] = set()
    for mine, sdk_type in ((shapes.Completion, sdk.ChatCompletion), (shapes.Chunk, sdk.ChatCompletionChunk)):
        _unfollowed(mine, [sdk_type], "reply", reply_walked)
    assert reply <= reply_walked
    assert declared_shapes - walked - reply_walked == set()  # every shape was compared, none skipped


@pytest.mark.parametrize(
    ("mine", "theirs"), [(shapes.Completion, sdk.ChatCompletion), (shapes.Chunk, sdk.ChatCompletionChunk)]
)
def test_every_reply_key_the_shapes_declare_is_the_sdks(mine: Any, theirs: Any) -> None:
    assert [p for p in _unfollowed(mine, [theirs], "reply") if p.rsplit(".", 1)[-1] not in OURS] == []


def test_the_walk_finds_a_key_the_sdk_does_not_have() -> None:
    class Bogus(shapes.TextPart):
        shiny: str

    assert _unfollowed(Bogus, [sdk.ChatCompletionContentPartTextParam], "part") == ["part.shiny"]


# ---------------------------------------------------------------------------- the boundary, through a sidecar

HTTP = {"listen": "127.0.0.1:0"}
USER = [{"role": "user", "content": "hi"}]
FUNCTION = {"name": "lookup", "parameters": {"type": "object"}}
TOOL = {"type": "function", "function": FUNCTION}
WRONG: list[tuple[str, dict[str, Any], str]] = [
    ("body", {"temperature": "hot"}, "temperature"),
    ("body", {"stop": [1]}, "stop[0]"),
    ("message", {"messages": ["hi"]}, "messages[0]"),
    ("message", {"messages": [{"role": "user", "content": 7}]}, "messages[0].content"),
    ("message", {"messages": [*USER, {"role": "tool", "tool_call_id": ["c"], "content": "ok"}]},
     "messages[1].tool_call_id"),
    ("block", {"messages": [{"role": "user", "content": [{"type": "text", "text": {"a": 1}}]}]},
     "messages[0].content[0].text"),
    ("block", {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": 5}}]}]},
     "messages[0].content[0].image_url.url"),
    ("tool", {"tools": [{"type": "function", "function": {"name": 7}}]}, "tools[0].function.name"),
    ("tool", {"tools": [{**TOOL, "function": {**FUNCTION, "parameters": "an object"}}]},
     "tools[0].function.parameters"),
    ("nested option", {"stream": True, "stream_options": {"include_usage": "yes"}}, "stream_options.include_usage"),
    ("nested option", {"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": {}}}},
     "tool_choice.function.name"),
    ("nested option", {"response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": []}}},
     "response_format.json_schema.schema"),
]  # fmt: skip


@pytest_asyncio.fixture
async def http_sidecar(start_sidecar: Start) -> Running:
    return await start_sidecar(http=HTTP)


@pytest.mark.parametrize(("depth", "fields", "param"), WRONG, ids=[f"{d}: {p}" for d, _, p in WRONG])
async def test_a_wrong_type_at_each_depth_is_invalid_input_naming_the_callers_path(
    http_sidecar: Running, depth: str, fields: dict[str, Any], param: str
) -> None:
    assert http_sidecar.app.http is not None
    url = f"http://127.0.0.1:{http_sidecar.app.http.port}/v1"
    kwargs: Any = {"model": "gpt", "messages": USER, **fields}
    async with openai.AsyncOpenAI(base_url=url, api_key="unused", max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(**kwargs)
    assert caught.value.param == param
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["sidecar"]["kind"] == "INVALID_INPUT"
    assert "must be" in caught.value.message
    assert http_sidecar.provider.requests() == []


@pytest.mark.parametrize("kind", ["json_object", "json_schema", "text"])
async def test_a_response_format_key_the_sidecar_does_not_read_is_refused_by_name(
    http_sidecar: Running, kind: str
) -> None:
    """response_format becomes the call's response schema, which holds nothing else: a key beside ``type`` and
    ``json_schema`` has no element to be carried on, so it is refused, never accepted and then dropped."""
    assert http_sidecar.app.http is not None
    url = f"http://127.0.0.1:{http_sidecar.app.http.port}/v1"
    fmt: dict[str, Any] = {"type": kind, "shiny": True}
    if kind == "json_schema":
        fmt["json_schema"] = {"name": "r", "schema": {"type": "object"}}
    async with openai.AsyncOpenAI(base_url=url, api_key="unused", max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(model="gpt", messages=USER, response_format=fmt)  # type: ignore[arg-type]
    assert caught.value.param == "response_format.shiny"
    assert "is not carried by the sidecar" in caught.value.message
    assert http_sidecar.provider.requests() == []
