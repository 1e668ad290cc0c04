"""The Converse shapes follow botocore's service model, and a request of the wrong shape is refused by its path.

``sidecar/providers/formats/bedrock_converse/shapes.py`` declares the request and the replies as
``TypedDict``s. Here botocore's ``bedrock-runtime`` service model (botocore pinned in constraints.txt,
loaded with ``botocore.loaders``; the sidecar never loads it) judges them: every key a shape declares is a
member of the service model's shape it stands for, each of the member's type (a literal one of its enum),
walked to the leaves. Inside ``additionalModelRequestFields`` (a Document: the model's own keys) the front
reads Anthropic's ``thinking``, judged by the ``anthropic`` SDK's ``ThinkingConfigEnabledParam``.

The boundary: a value of the wrong type at each depth (the body, a message, a block, a tool, a nested
option) and a key no shape declares are answered by the fake provider on loopback (its Bedrock wire
reads a request with the format's front; the format has no door) as a 400 ValidationException naming
the caller's path, read by botocore's own client, or by plain HTTP where botocore cannot send the value.
Through a running sidecar, a provider option of the wrong type comes back as INVALID_INPUT naming it.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import botocore.session
import httpx
import pytest
import sidecar_client as sc
from anthropic.types import ThinkingConfigEnabledParam
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.loaders import create_loader
from botocore.model import ListShape, MapShape, ServiceModel, Shape, StringShape, StructureShape
from sidecar_client import pb, user
from typing_extensions import TypedDict, is_typeddict

from sidecar.fakes._threaded import ThreadedServer
from sidecar.fakes.provider import FakeProvider
from sidecar.providers.formats.bedrock_converse import shapes
from sidecar.providers.formats.bedrock_converse.fake import FAKE_ACCESS_KEY, FAKE_SECRET_KEY
from tests.conftest import Running, Start

MODEL = "anthropic.claude-sonnet-4-20250514-v1:0"
REGION = "us-east-1"
NOT_THE_SDKS = {"stream", "sidecar"}
"""Keys no Converse shape has: the URL's method (``routed`` puts it in the body), the sidecar's extension."""
SCALARS: dict[Any, set[str]] = {
    str: {"string", "blob"},
    int: {"integer", "long"},
    float: {"float", "double"},
    bool: {"boolean"},
}


@pytest.fixture(scope="module")
def model() -> ServiceModel:
    loader = create_loader()
    return ServiceModel(loader.load_service_model("bedrock-runtime", "service-2"), "bedrock-runtime")


def follows(hint: Any, shape: Shape, at: str) -> Iterator[str]:
    """What of ``hint`` (a shape's declared type, NotRequired and Annotated stripped by ``get_type_hints``) the
    service model's ``shape`` does not have."""
    if get_origin(hint) in (Union, types.UnionType):
        for member in get_args(hint):
            if member is not type(None):
                yield from follows(member, shape, at)
    elif shape.metadata.get("document"):
        if is_typeddict(hint):  # the model's own keys, under additionalModelRequestFields: Anthropic's
            yield from (f"{at}.{k}: not Anthropic's" for k in get_type_hints(hint) if k != "thinking")
            yield from keys_of(get_type_hints(hint)["thinking"], ThinkingConfigEnabledParam, f"{at}.thinking")
        else:
            assert hint in (dict[str, Any], Any) or get_origin(hint) is dict, at
    elif is_typeddict(hint):
        if not isinstance(shape, StructureShape):
            yield f"{at}: a {shape.type_name} in the service model, an object here"
            return
        for key, value in get_type_hints(hint).items():
            if key in NOT_THE_SDKS:
                continue
            if key not in shape.members:
                yield f"{at}.{key}: not a member of {shape.name}"
            else:
                yield from follows(value, shape.members[key], f"{at}.{key}")
    elif get_origin(hint) is list:
        if not isinstance(shape, ListShape):
            yield f"{at}: a {shape.type_name} in the service model, a list here"
        else:
            yield from follows(get_args(hint)[0], shape.member, f"{at}[]")
    elif get_origin(hint) is dict:
        if not isinstance(shape, StructureShape | MapShape):
            yield f"{at}: a {shape.type_name} in the service model, an object here"
        elif isinstance(shape, MapShape) and get_args(hint)[1] is not Any:
            yield from follows(get_args(hint)[1], shape.value, f"{at}.*")
    elif get_origin(hint) is Literal:
        enum = shape.enum if isinstance(shape, StringShape) else []
        yield from (f"{at}: {v!r} is not one of {shape.name}'s {enum}" for v in get_args(hint) if v not in enum)
    elif shape.type_name not in SCALARS.get(hint, set()):
        yield f"{at}: a {shape.type_name} in the service model, {hint} here"


def keys_of(hint: Any, sdk_type: Any, at: str) -> Iterator[str]:
    (declared,) = [m for m in get_args(hint) if m is not type(None)]
    yield from (
        f"{at}.{k}: not a key of {sdk_type.__name__}"
        for k in get_type_hints(declared)
        if k not in sdk_type.__annotations__
    )


def operation(model: ServiceModel, name: str, which: str) -> StructureShape:
    shape = getattr(model.operation_model(name), f"{which}_shape")
    assert isinstance(shape, StructureShape)
    return shape


def stream_event(model: ServiceModel, name: str) -> Shape:
    events = operation(model, "ConverseStream", "output").members["stream"]
    assert isinstance(events, StructureShape)
    return events.members[name]


# ---------------------------------------------------------------- the shapes follow the SDK


def test_the_pinned_botocore_is_the_one_the_shapes_name() -> None:
    assert botocore.__version__ == "1.44.5"
    assert "botocore 1.44.5" in (shapes.__doc__ or "")


def test_every_request_key_is_a_member_of_the_converse_request(model: ServiceModel) -> None:
    for name in ("Converse", "ConverseStream"):
        assert list(follows(shapes.ConverseRequest, operation(model, name, "input"), name)) == []


def test_the_request_declares_what_the_front_reads_and_the_converse_request_has_it(model: ServiceModel) -> None:
    members = set(operation(model, "Converse", "input").members)
    assert set(get_type_hints(shapes.ConverseRequest)) - NOT_THE_SDKS == members


def test_a_shape_that_strays_from_the_sdk_is_caught(model: ServiceModel) -> None:
    class Stray(TypedDict, total=False):
        maxTokens: int
        topP: str
        maxTokenz: int

    found = list(follows(Stray, model.shape_for("InferenceConfiguration"), "inferenceConfig"))
    assert found == [
        "inferenceConfig.topP: a float in the service model, <class 'str'> here",
        "inferenceConfig.maxTokenz: not a member of InferenceConfiguration",
    ]


def test_every_reply_key_is_a_member_of_the_converse_response(model: ServiceModel) -> None:
    assert list(follows(shapes.Response, operation(model, "Converse", "output"), "Converse")) == []
    assert list(follows(shapes.ErrorBody, model.shape_for("ValidationException"), "ValidationException")) == []


@pytest.mark.parametrize(
    ("event", "declared"),
    [
        ("messageStart", shapes.MessageStart),
        ("contentBlockStart", shapes.ContentBlockStart),
        ("contentBlockDelta", shapes.ContentBlockDelta),
        ("contentBlockStop", shapes.ContentBlockStop),
        ("messageStop", shapes.MessageStop),
        ("metadata", shapes.Metadata),
    ],
)
def test_every_stream_event_the_writer_writes_is_a_converse_stream_event(
    model: ServiceModel, event: str, declared: Any
) -> None:
    assert list(follows(declared, stream_event(model, event), event)) == []


# ---------------------------------------------------------------- the boundary


def said(role: str, *blocks: dict[str, Any]) -> dict[str, Any]:
    return {"messages": [{"role": role, "content": list(blocks)}]}


ASK: dict[str, Any] = {
    "messages": [{"role": "user", "content": [{"text": "find retries"}]}],
    "toolConfig": {"tools": [{"toolSpec": {"name": "search", "inputSchema": {"json": {"type": "object"}}}}]},
}
WRONG = [
    # (where, the request's change, what the refusal names, its rule)
    ("body", {"inferenceConfig": "fast"}, "inferenceConfig", "must be a JSON object"),
    ("body", {"additionalModelResponseFieldPaths": "/stop"}, "additionalModelResponseFieldPaths", "must be a list"),
    ("body", {"temperature": 0.5}, "temperature", "is not carried by the sidecar"),
    ("message", said("system"), "messages[0].role", "must be one of 'user', 'assistant'"),
    ("message", {"messages": [{"role": "user", "content": {"text": "hi"}}]}, "messages[0].content", "must be a list"),
    ("block", said("user", {"text": 7}), "messages[0].content[0].text", "must be a string"),
    ("block", said("user", {"image": {"format": "bmp", "source": {"bytes": "AA=="}}}),
     "messages[0].content[0].image.format", "must be 'png', 'jpeg', 'gif' or 'webp'"),
    ("block", said("assistant", {"toolUse": {"toolUseId": "t", "name": "s", "input": [1]}}),
     "messages[0].content[0].toolUse.input", "must be a JSON object"),
    ("tool", {"toolConfig": {"tools": [{"toolSpec": {"name": 7, "inputSchema": {"json": {}}}}]}},
     "toolConfig.tools[0].toolSpec.name", "must be a string"),
    ("tool", {"toolConfig": {"tools": [{"toolSpec": {"name": "s", "inputSchema": {}}}]}},
     "toolConfig.tools[0].toolSpec.inputSchema.json", "is required"),
    ("nested option", {"inferenceConfig": {"maxTokens": "many"}}, "inferenceConfig.maxTokens", "must be an integer"),
    ("nested option", {"additionalModelRequestFields": {"thinking": {"type": "enabled", "budget_tokens": True}}},
     "additionalModelRequestFields.thinking.budget_tokens", "must be an integer"),
    ("nested option", {"toolConfig": {"tools": ASK["toolConfig"]["tools"], "toolChoice": {"auto": {"now": True}}}},
     "toolConfig.toolChoice.auto.now", "is not carried by the sidecar"),
]  # fmt: skip


@pytest.fixture(scope="module")
def fake() -> Iterator[ThreadedServer[FakeProvider]]:
    with ThreadedServer(FakeProvider()) as srv:
        yield srv


def refused(fake: ThreadedServer[FakeProvider], change: dict[str, Any]) -> tuple[str, str]:
    """The fake's answer to the request changed by ``change`` (plain HTTP): its error type and message."""
    url = f"{fake.url}/model/{MODEL}/converse"
    answer = httpx.post(url, json={**ASK, **change}, headers={"authorization": "Bearer test-key"}, timeout=30)
    assert answer.status_code == 400, answer.text
    return answer.headers["x-amzn-errortype"].split(":", 1)[0], answer.json()["message"]


@pytest.mark.parametrize(("depth", "change", "path", "rule"), WRONG, ids=[f"{w[0]}: {w[2]}" for w in WRONG])
def test_a_wrong_value_at_each_depth_is_a_validation_exception_naming_its_path(
    fake: ThreadedServer[FakeProvider], depth: str, change: dict[str, Any], path: str, rule: str
) -> None:
    error_type, message = refused(fake, change)
    assert error_type == "ValidationException"
    assert message.startswith(f"Invalid value for parameter '{path}'")
    assert rule in message


def test_a_null_key_no_shape_declares_is_absent_as_a_null_value_is(fake: ThreadedServer[FakeProvider]) -> None:
    body = {**said("user", {"text": "hi", "video": None}), "bogus": None, "guardrailConfig": None}
    answer = httpx.post(
        f"{fake.url}/model/{MODEL}/converse", json=body, headers={"authorization": "Bearer test-key"}, timeout=30
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["output"]["message"]["content"] == [{"text": "You said: hi"}]


@pytest.mark.parametrize(
    ("sent", "path", "rule"),
    [
        (said("user", {"text": 7}), "messages[0].content[0].text", "must be a string"),
        (said("user", {"text": "a", "cachePoint": {"type": "default", "ttl": 5}}),
         "messages[0].content[0].cachePoint.ttl", "must be '5m' or '1h'"),
        (said("user", {"toolResult": {"toolUseId": "t", "content": [{"text": "r"}], "status": "ok"}}),
         "messages[0].content[0].toolResult.status", "must be 'success' or 'error'"),
    ],
)  # fmt: skip
def test_botocore_sending_a_wrong_value_gets_a_validation_exception_naming_its_path(
    fake: ThreadedServer[FakeProvider], sent: dict[str, Any], path: str, rule: str
) -> None:
    client: Any = botocore.session.get_session().create_client(
        "bedrock-runtime",
        endpoint_url=fake.url,
        region_name=REGION,
        aws_access_key_id=FAKE_ACCESS_KEY,
        aws_secret_access_key=FAKE_SECRET_KEY,
        config=Config(retries={"total_max_attempts": 1}, parameter_validation=False),
    )
    with pytest.raises(ClientError) as caught:
        client.converse(modelId=MODEL, **sent)
    error = caught.value.response["Error"]
    assert error["Code"] == "ValidationException"
    assert error["Message"].startswith(f"Invalid value for parameter '{path}'")
    assert rule in error["Message"]


async def test_through_the_sidecar_a_wrong_provider_option_is_invalid_input_naming_it(
    start_sidecar: Start, provider: ThreadedServer[FakeProvider]
) -> None:
    r: Running = await start_sidecar(
        providers={"bed": {"wire_format": "bedrock_converse", "base_url": provider.url, "api_key": "test-key"}},
        models={"bed": {"provider": "bed", "upstream_model": MODEL, "context_window": 8000, "max_output_tokens": 2048}},
    )
    options = {"bedrock_converse": {"requestMetadata": {"team": 7}}}
    with pytest.raises(sc.InvalidInputError) as caught:
        await r.client.call_model("bed", [user("hi")], provider_options=options)
    assert "HTTP 400 ValidationException" in caught.value.message
    assert "Invalid value for parameter 'requestMetadata.team'" in caught.value.message
    assert "must be a string" in caught.value.message
    (record,) = r.provider.requests(model=MODEL)
    assert record["body"]["requestMetadata"] == {"team": 7}
    assert caught.value.kind == pb.FAILURE_KIND_INVALID_INPUT
