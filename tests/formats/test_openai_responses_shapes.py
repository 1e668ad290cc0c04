"""The Responses format's shapes (``openai_responses/shapes.py``) follow the ``openai`` SDK, and are its boundary.

(a) Every key a request shape declares is a key of the SDK's TypedDict it follows, at the version
constraints.txt pins; every word a shape allows (a ``Literal``: an item's ``type``, a role, an
effort) is one the SDK allows there. The sidecar never imports the SDK: the test does.

(b) Through a real sidecar's ``/v1/responses`` door, with the official SDK as the client: a value of
the wrong type at each depth (the body, an input item, a content part, a tool, a nested option) is a
400 INVALID_INPUT whose ``param`` is the caller's own path, and nothing reaches the provider.
"""

from __future__ import annotations

import types
import typing
from collections.abc import AsyncIterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import openai
import pytest
import pytest_asyncio
from openai.types import responses, shared_params
from openai.types.responses import (
    easy_input_message_param,
    function_tool_param,
    response_create_params,
    response_format_text_json_schema_config_param,
    response_function_tool_call_param,
    response_input_file_param,
    response_input_image_param,
    response_input_item_param,
    response_input_text_param,
    response_output_message_param,
    response_output_refusal_param,
    response_output_text_param,
    response_reasoning_item_param,
    response_text_config_param,
    tool_choice_function_param,
)

from sidecar.fakes._threaded import ThreadedServer
from sidecar.fakes.provider import FakeProvider
from sidecar.providers.formats.openai_responses import shapes
from sidecar.providers.formats.shapes import declared
from tests.conftest import Running, Start

ROOT = Path(__file__).resolve().parents[2]
FOLLOWS: list[tuple[Any, tuple[Any, ...]]] = [
    (
        shapes.Request,
        (response_create_params.ResponseCreateParamsBase, response_create_params.ResponseCreateParamsStreaming),
    ),
    (shapes.SystemMessage, (easy_input_message_param.EasyInputMessageParam, response_input_item_param.Message)),
    (shapes.UserMessage, (easy_input_message_param.EasyInputMessageParam, response_input_item_param.Message)),
    (
        shapes.AssistantMessage,
        (easy_input_message_param.EasyInputMessageParam, response_output_message_param.ResponseOutputMessageParam),
    ),
    (shapes.FunctionCall, (response_function_tool_call_param.ResponseFunctionToolCallParam,)),
    (shapes.FunctionCallOutput, (response_input_item_param.FunctionCallOutput,)),
    (shapes.ReasoningItem, (response_reasoning_item_param.ResponseReasoningItemParam,)),
    (shapes.SummaryText, (response_reasoning_item_param.Summary,)),
    (shapes.InputText, (response_input_text_param.ResponseInputTextParam,)),
    (shapes.InputImage, (response_input_image_param.ResponseInputImageParam,)),
    (shapes.InputFile, (response_input_file_param.ResponseInputFileParam,)),
    (shapes.OutputText, (response_output_text_param.ResponseOutputTextParam,)),
    (shapes.Refusal, (response_output_refusal_param.ResponseOutputRefusalParam,)),
    (shapes.FunctionTool, (function_tool_param.FunctionToolParam,)),
    (shapes.ToolChoiceFunction, (tool_choice_function_param.ToolChoiceFunctionParam,)),
    (shapes.TextConfig, (response_text_config_param.ResponseTextConfigParam,)),
    (shapes.JsonSchemaFormat, (response_format_text_json_schema_config_param.ResponseFormatTextJSONSchemaConfigParam,)),
    (shapes.TextFormat, (shared_params.ResponseFormatText,)),
    (shapes.JsonObjectFormat, (shared_params.ResponseFormatJSONObject,)),
    (shapes.ReasoningConfig, (shared_params.Reasoning,)),
]
"""Each request shape and the SDK TypedDicts it follows (a message: the SDK's message params of its role)."""


REPLIES: list[tuple[Any, tuple[Any, ...]]] = [
    (shapes.Response, (responses.Response,)),
    (shapes.Usage, (responses.ResponseUsage,)),
    (shapes.OutputMessage, (responses.ResponseOutputMessage,)),
    (shapes.OutputCall, (responses.ResponseFunctionToolCall,)),
    (shapes.OutputReasoning, (responses.ResponseReasoningItem,)),
    (shapes.Event, typing.get_args(typing.get_args(responses.ResponseStreamEvent)[0])),
]
"""Each reply shape and the SDK models it follows (an event: every event model of the stream)."""
OWN = {"sidecar", "restart"}
"""The sidecar's own keys of a reply: its extension, and its restart event's words."""
EXTRA = {"Response": {"store"}, "Event": {"name"}}
"""Keys the front wrote before its shapes were declared that the SDK's models do not declare (a Response's
``store``; ``name`` on response.function_call_arguments.done): kept, as the SDK keeps them (its models take
extra keys), so that no client that reads them breaks; named here so that no other key joins them."""


def words(tp: Any) -> set[Any]:
    """Every ``Literal`` value a type allows, through unions, ``Optional``, lists and ``Annotated`` (not into a
    TypedDict: its words are its own keys')."""
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return set(typing.get_args(tp))
    if origin is typing.Annotated:
        return words(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType) or origin in (list, typing.Required, typing.NotRequired):
        return set().union(*(words(a) for a in typing.get_args(tp)))
    if origin is not None and getattr(origin, "__name__", "") in ("Iterable", "List", "Required", "NotRequired"):
        return set().union(*(words(a) for a in typing.get_args(tp)))
    return set()


def hints(shape: Any) -> dict[str, Any]:
    return typing.get_type_hints(shape, include_extras=True)


def test_the_sdk_is_the_pinned_version_the_shapes_name() -> None:
    pinned = next(line for line in (ROOT / "constraints.txt").read_text().splitlines() if line.startswith("openai=="))
    assert pinned == f"openai=={version('openai')}"
    assert f"``openai`` SDK {version('openai')}" in (shapes.__doc__ or "")


@pytest.mark.parametrize(("shape", "sdk"), FOLLOWS, ids=[s.__name__ for s, _ in FOLLOWS])
def test_every_key_a_shape_declares_is_the_sdks(shape: Any, sdk: tuple[Any, ...]) -> None:
    theirs = set().union(*(declared(t) for t in sdk))
    assert declared(shape) <= theirs, declared(shape) - theirs


@pytest.mark.parametrize(("shape", "sdk"), REPLIES, ids=[s.__name__ for s, _ in REPLIES])
def test_every_key_a_reply_shape_declares_is_the_sdks(shape: Any, sdk: tuple[Any, ...]) -> None:
    theirs = set().union(*(t.model_fields for t in sdk), EXTRA.get(shape.__name__, ()))
    assert declared(shape) - OWN <= theirs, declared(shape) - OWN - theirs


@pytest.mark.parametrize(("shape", "sdk"), FOLLOWS, ids=[s.__name__ for s, _ in FOLLOWS])
def test_every_word_a_shape_allows_is_one_the_sdk_allows(shape: Any, sdk: tuple[Any, ...]) -> None:
    sdk_hints = [hints(t) for t in sdk]
    for key, tp in hints(shape).items():
        mine = words(tp)
        theirs = set().union(*(words(h[key]) for h in sdk_hints if key in h))
        assert mine <= theirs, (key, mine - theirs)


def test_the_input_items_are_the_sdks() -> None:
    """The four items a stateless conversation holds, by the ``type`` the SDK gives each."""
    sdk_items = typing.get_args(response_input_item_param.ResponseInputItemParam)
    tags = set().union(*(words(hints(t).get("type")) for t in sdk_items))
    assert {"message", "function_call", "function_call_output", "reasoning"} <= tags


# ---------------------------------------------------------------- (b) the boundary, through a running sidecar

MODEL = "fake-resp"
KEY = "sk-resp-test-key"
TOOL = {"type": "function", "name": "search", "parameters": {"type": "object", "properties": {}}}
CALL = {"type": "function_call", "call_id": "c1", "name": "search", "arguments": "{}"}
WRONG: list[tuple[str, dict[str, Any], str, str]] = [
    ("the body", {"input": "hi", "temperature": "hot"}, "temperature", "must be a number"),
    ("the body", {"input": "hi", "max_output_tokens": 2.5}, "max_output_tokens", "must be an integer"),
    ("the body", {"input": 7}, "input", "must be a string or a list"),
    ("the body", {"input": "hi", "user": 7}, "user", "must be a string"),  # was named safety_identifier
    ("an item", {"input": [{"role": "user", "content": 7}]}, "input[0].content", "must be a string or a list"),
    ("an item", {"input": [{"role": "critic", "content": "hi"}]}, "input[0].role", "must be one of 'system'"),
    ("an item", {"input": [{"type": "web_search_call"}]}, "input[0].type", "must be one of 'message'"),
    ("an item", {"input": [{"role": "assistant", "content": "hi", "id": {}}]}, "input[0].id", "must be a string"),
    ("an item", {"input": [{"role": "user", "content": "hi"}, {**CALL, "call_id": 9}]}, "input[1].call_id",
     "must be a string"),
    ("a part", {"input": [{"role": "user", "content": [{"type": "input_text", "text": ["hi"]}]}]},
     "input[0].content[0].text", "must be a string"),
    ("a part", {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "https://x/a.png",
                                                        "detail": "huge"}]}]},
     "input[0].content[0].detail", "must be 'auto', 'low' or 'high'"),
    ("a part", {"input": [{"role": "user", "content": "hi"}, CALL,
                          {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text"}]}]},
     "input[2].output[0].text", "is required"),
    ("a tool", {"input": "hi", "tools": [{**TOOL, "name": 7}]}, "tools[0].name", "must be a string"),
    ("a tool", {"input": "hi", "tools": [{**TOOL, "strict": "yes"}]}, "tools[0].strict", "must be true or false"),
    ("a tool", {"input": "hi", "tools": [{"type": "web_search"}]}, "tools[0].type", "must be 'function'"),
    ("an option", {"input": "hi", "reasoning": {"effort": 3}}, "reasoning.effort", "must be 'minimal'"),
    ("an option", {"input": "hi", "text": {"format": {"type": "json_schema", "name": "r", "schema": "{}"}}},
     "text.format.schema", "must be a JSON object"),
    ("an option", {"input": "hi", "tools": [TOOL], "tool_choice": {"type": "function", "name": ["search"]}},
     "tool_choice.name", "must be a string"),
    ("an option", {"input": "hi", "include": ["file_search_call.results"]}, "include[0]",
     "must be 'reasoning.encrypted_content'"),
]  # fmt: skip


@pytest_asyncio.fixture
async def front(start_sidecar: Start, provider: ThreadedServer[FakeProvider]) -> Running:
    return await start_sidecar(
        http={"listen": "127.0.0.1:0"},
        providers={"resp": {"wire_format": "openai_responses", "base_url": provider.url + "/v1", "api_key": KEY}},
        models={"resp": {"provider": "resp", "upstream_model": MODEL, "context_window": 8000,
                         "max_output_tokens": 2048, "default_output_tokens": 256}},
    )  # fmt: skip


@pytest_asyncio.fixture
async def client(front: Running) -> AsyncIterator[openai.AsyncOpenAI]:
    assert front.app.http is not None
    url = f"http://127.0.0.1:{front.app.http.port}/v1"
    async with openai.AsyncOpenAI(base_url=url, api_key="unused", max_retries=0) as c:
        yield c


@pytest.mark.parametrize(("depth", "fields", "param", "rule"), WRONG, ids=[f"{d}: {p}" for d, _, p, _ in WRONG])
async def test_a_wrong_type_at_any_depth_is_invalid_input_naming_the_callers_path(
    front: Running, client: openai.AsyncOpenAI, depth: str, fields: dict[str, Any], param: str, rule: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.create(model="resp", **fields)
    assert caught.value.param == param
    body = caught.value.body
    assert isinstance(body, dict)
    error = body.get("error", body)
    failure = error["sidecar"]["failure"]["invalid_input"]
    assert (failure["parameter"], error["sidecar"]["kind"]) == (param, "INVALID_INPUT")
    assert rule in failure["rule"], failure
    assert front.provider.requests(model=MODEL) == []


async def test_the_same_request_well_typed_is_answered(front: Running, client: openai.AsyncOpenAI) -> None:
    """The boundary refuses the wrong type, not the request: each key above, well typed, reaches the provider."""
    reply = await client.responses.create(
        model="resp",
        input=[{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        temperature=1,
        max_output_tokens=64,
        tools=[{**TOOL, "strict": False}],  # type: ignore[list-item]
        tool_choice={"type": "function", "name": "search"},
        include=["reasoning.encrypted_content"],
    )
    assert reply.status == "completed"
    (sent,) = [r["body"] for r in front.provider.requests(model=MODEL)]
    assert sent["tool_choice"] == {"type": "function", "name": "search"}
