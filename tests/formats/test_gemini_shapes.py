"""The Gemini shapes (``formats/gemini/shapes.py``) follow the SDK, and are the one boundary of the front.

test                            what it proves
the request follows the SDK     every key a request TypedDict declares, at every depth, is a field (by its
                                camelCase alias) of the ``google-genai`` model at that place, at the version
                                constraints.txt pins; the REST body is InlinedRequest's model and contents,
                                GenerateContentConfig's keys that are not GenerationConfig's, and a
                                generationConfig (``stream`` is the URL's)
the reply follows the SDK       the same for what ``render`` and the stream writer write
the SDK's request is read       the official client, with every option the shape declares, is answered
a wrong type is named           a wrong value at each depth (body, content, part, tool, a nested option) and a
                                key no shape declares: 400 INVALID_ARGUMENT from the running fake provider
                                (whose Gemini front is the format's), its message naming the caller's path;
                                through plain HTTP and through the official client's ``extra_body``
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, get_args, get_type_hints

import httpx
import pytest
from google import genai
from google.genai import errors, types
from pydantic import BaseModel
from typing_extensions import TypedDict, is_typeddict

from sidecar.fakes._threaded import ThreadedServer
from sidecar.fakes.provider import FakeProvider
from sidecar.providers.formats.gemini import shapes
from sidecar.providers.formats.shapes import declared

MODEL = "fake-gemini"
KEY = "AIza-test-key"
OURS = frozenset({"stream", "sidecar"})
"""Keys that are not Google's: the URL's streaming (``routed``), the sidecar's own extension of a reply."""


def fields(model: type[BaseModel]) -> dict[str, Any]:
    """A model's fields by the names the REST JSON gives them (their aliases), each with its type."""
    return {(f.alias or name): f.annotation for name, f in model.model_fields.items()}


def _typed_dicts(annotation: Any) -> list[Any]:
    return [annotation] if is_typeddict(annotation) else [t for a in get_args(annotation) for t in _typed_dicts(a)]


def _models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in get_args(annotation) for m in _models(a)]


def undeclared(shape: Any, sdk: Mapping[str, Any], at: str = "") -> Iterator[str]:
    """The paths of the keys ``shape`` declares (and those of the shapes inside it) that ``sdk`` has not: the
    SDK's model at each place is the one of the TypedDict's name its field's type names, else the first it
    names (a field typed a bare ``list``, as ``tools`` is: the SDK's model of the TypedDict's name)."""
    hints = get_type_hints(shape, include_extras=True)
    for key in sorted(declared(shape) - OURS):
        if key not in sdk:
            yield at + key
            continue
        for inner in _typed_dicts(hints[key]):
            found = _models(sdk[key]) or [getattr(types, inner.__name__)]  # a list typed loosely (tools): by name
            model = next((m for m in found if m.__name__ == inner.__name__), found[0])
            yield from undeclared(inner, fields(model), f"{at}{key}.")


def test_the_request_follows_the_sdk() -> None:
    config = {k: v for k, v in fields(types.GenerateContentConfig).items() if k not in fields(types.GenerationConfig)}
    inlined = fields(types.InlinedRequest)
    body = {
        "model": inlined["model"],
        "contents": inlined["contents"],
        **config,
        "generationConfig": types.GenerationConfig,
    }
    assert list(undeclared(shapes.Request, body)) == []
    assert {"contents", "systemInstruction", "tools", "toolConfig", "generationConfig"} <= declared(shapes.Request)


def test_the_reply_follows_the_sdk() -> None:
    assert list(undeclared(shapes.Response, fields(types.GenerateContentResponse))) == []
    assert list(undeclared(shapes.UsageMetadata, fields(types.GenerateContentResponseUsageMetadata))) == []


class _Part(TypedDict):
    text: str
    bogus: str


class _Content(TypedDict):
    parts: list[_Part]


class _Body(TypedDict):
    contents: list[_Content]


def test_a_key_the_sdk_lacks_is_found_at_its_depth() -> None:
    """The walk looks inside: a key the SDK's Part has not, two levels down, is named by its path."""
    assert list(undeclared(_Body, {"contents": list[types.Content]})) == ["contents.parts.bogus"]


# ----------------------------------------------------------------------------- the boundary, through the fake


@pytest.fixture(scope="module")
def fake() -> Iterator[ThreadedServer[FakeProvider]]:
    with ThreadedServer(FakeProvider()) as srv:
        yield srv


def client(fake: ThreadedServer[FakeProvider]) -> genai.Client:
    once = types.HttpRetryOptions(attempts=1)
    return genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=fake.url, api_version="v1beta",
                                                                     retry_options=once))  # fmt: skip


ASK = {"contents": [{"role": "user", "parts": [{"text": "find retries"}]}]}
SEARCH = {"name": "search", "description": "Search.", "parametersJsonSchema": {"type": "object"}}
WRONG = [
    ({"contents": "find retries"}, "contents", "must be a list"),
    ({"contents": [{"role": 7, "parts": [{"text": "hi"}]}]}, "contents[0].role", "must be 'user', 'model' or ''"),
    ({"contents": [{"role": "user", "parts": [{"text": 7}]}]}, "contents[0].parts[0].text", "must be a string"),
    ({"contents": [{"parts": [{"inlineData": {"mimeType": "image/png"}}]}]}, "contents[0].parts[0].inlineData.data",
     "is required"),
    ({**ASK, "tools": [{"functionDeclarations": [{**SEARCH, "name": 7}]}]}, "tools[0].functionDeclarations[0].name",
     "must be a string"),
    ({**ASK, "toolConfig": {"functionCallingConfig": {"mode": "SOMETIMES"}}}, "toolConfig.functionCallingConfig.mode",
     "must be 'AUTO', 'NONE' or 'ANY'"),
    ({**ASK, "generationConfig": {"thinkingConfig": {"thinkingBudget": "1024"}}},
     "generationConfig.thinkingConfig.thinkingBudget", "must be an integer"),
    ({**ASK, "generation_config": {"stop_sequences": ["a", 2]}}, "generation_config.stop_sequences[1]",
     "must be a string"),
    ({**ASK, "generationConfig": {"thinking_config": {"thinking_level": "EXTREME"}}},
     "generationConfig.thinking_config.thinking_level", "must be MINIMAL, LOW, MEDIUM or HIGH"),
    ({**ASK, "generationConfig": {"topK": 2.5}}, "generationConfig.topK", "must be a whole number"),
    ({"contents": [{"parts": [{"text": "hi", "bogus": True}]}]}, "contents[0].parts[0].bogus",
     "is not carried by the sidecar"),
    ({**ASK, "cachedContent": "cachedContents/x"}, "cachedContent", "is not carried by the sidecar"),
]  # fmt: skip


@pytest.mark.parametrize(("body", "path", "rule"), WRONG, ids=[path for _, path, _ in WRONG])
def test_a_wrong_value_at_each_depth_is_invalid_input_naming_its_path(
    fake: ThreadedServer[FakeProvider], body: dict[str, Any], path: str, rule: str
) -> None:
    url = f"{fake.url}/v1beta/models/{MODEL}:generateContent"
    answer = httpx.post(url, json=body, headers={"x-goog-api-key": KEY}, timeout=30)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
    assert f"Invalid value for parameter '{path}'" in error["message"]
    assert rule in error["message"]


def test_the_sdks_request_with_every_declared_option_is_read(fake: ThreadedServer[FakeProvider]) -> None:
    declaration = types.FunctionDeclaration(name="search", description="Search.", parameters_json_schema={})
    tool = types.Tool(function_declarations=[declaration])
    config = types.GenerateContentConfig(
        system_instruction="Be brief.",
        tools=[tool],
        tool_config=types.ToolConfig(function_calling_config=types.FunctionCallingConfig(mode="AUTO")),
        max_output_tokens=100,
        temperature=0.5,
        top_p=0.9,
        top_k=20,
        stop_sequences=["END"],
        seed=7,
        presence_penalty=0.1,
        frequency_penalty=0.2,
        response_mime_type="application/json",
        response_json_schema={"type": "object"},
        thinking_config=types.ThinkingConfig(thinking_budget=512, include_thoughts=True),
    )
    fake.server.script(MODEL, [{"preset": "reply", "text": '{"ok": true}'}])
    sdk = client(fake)
    reply = sdk.models.generate_content(model=MODEL, contents="hello", config=config)
    assert reply.text == '{"ok": true}'
    sent = fake.server.requests(model=MODEL)[-1]["body"]
    assert set(sent) <= declared(shapes.Request)
    assert set(sent["generationConfig"]) == declared(shapes.GenerationConfig)


@pytest.mark.parametrize(
    ("extra", "path"),
    [
        ({"generationConfig": {"topP": "most"}}, "generationConfig.topP"),
        ({"generationConfig": {"thinkingConfig": {"thinking_budget": "many"}}},
         "generationConfig.thinkingConfig.thinking_budget"),
    ],
)  # fmt: skip
def test_a_wrong_type_the_sdk_sends_in_extra_body_is_named_as_it_sent_it(
    fake: ThreadedServer[FakeProvider], extra: dict[str, Any], path: str
) -> None:
    """The SDK writes some keys in snake_case (``thinking_budget``): the path names them so."""
    options = types.HttpOptions(extra_body=extra)
    thinking = types.ThinkingConfig(include_thoughts=True)
    config = types.GenerateContentConfig(thinking_config=thinking, http_options=options)
    sdk = client(fake)
    with pytest.raises(errors.ClientError) as caught:
        sdk.models.generate_content(model=MODEL, contents="hi", config=config)
    assert (caught.value.code, caught.value.status) == (400, "INVALID_ARGUMENT")
    assert f"Invalid value for parameter '{path}'" in (caught.value.message or "")
