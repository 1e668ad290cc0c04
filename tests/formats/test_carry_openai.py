"""What issue 21 carries, over gRPC to an OpenAI-format model: the running sidecar, the fake provider behind it.

Each case sends a CallModelRequest (or StreamModel) with a part or a control and reads, in the body
the fake received, the Chat Completions key it became; the fake validates the body as the API does
(``sidecar/providers/formats/openai_chat/fake.py``), so a body the API would refuse fails here. Usage with cached and
reasoning tokens comes back in the reply and is priced at the model's cache price.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import grpc
import pytest
import pytest_asyncio
import sidecar_client as sc
from sidecar_client import pb, user
from sidecar_contract.v1 import sidecar_pb2_grpc as pb_grpc

from sidecar.providers.formats.openai_chat.vocab import tool_image_label, tool_image_placeholder
from tests.conftest import Running, Start

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000" + "1f15c489")
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()
PDF = b"%PDF-1.7 a minimal document"
PARAMETERS = json.dumps({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
WEATHER = pb.ToolDefinition(name="weather", description="The weather in a city.", parameters_json=PARAMETERS)
NOW = pb.ToolDefinition(name="now", description="The time.", parameters_json='{"type":"object","properties":{}}')
PRICES = {"input_price_per_mtok": 1.0, "output_price_per_mtok": 2.0, "cache_read_price_per_mtok": 0.1}
GPT = {
    "provider": "oai",
    "upstream_model": "fake-gpt",
    "context_window": 8000,
    "max_output_tokens": 2048,
    "default_output_tokens": 256,
    **PRICES,
}


@pytest_asyncio.fixture
async def sidecar(start_sidecar: Start) -> Running:
    return await start_sidecar(models={"gpt": GPT})


def asked(*parts: pb.Part) -> pb.Message:
    return pb.Message(role=pb.ROLE_USER, parts=list(parts))


def request(*messages: pb.Message, **fields: Any) -> pb.CallModelRequest:
    return pb.CallModelRequest(model="gpt", messages=list(messages) or [user("hi")], **fields)


async def call(r: Running, req: pb.CallModelRequest) -> pb.CallModelResponse:
    async with grpc.aio.insecure_channel(r.app.address) as channel:
        reply: pb.CallModelResponse = await pb_grpc.SidecarStub(channel).CallModel(req)
    return reply


async def refused(r: Running, req: pb.CallModelRequest) -> sc.SidecarError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(r, req)
    return sc.from_rpc_error(caught.value)


def sent(r: Running) -> dict[str, Any]:
    """The body of the one request the fake received."""
    (record,) = r.provider.requests(model="fake-gpt")
    body: dict[str, Any] = record["body"]
    return body


# ---------------------------------------------------------------------------- parts


async def test_an_inline_image_is_an_image_url_data_url_with_its_detail(sidecar: Running) -> None:
    image = pb.ImagePart(data=PNG, media_type="image/png", detail=pb.IMAGE_DETAIL_HIGH)
    reply = await call(sidecar, request(asked(pb.Part(text="What is this?"), pb.Part(image=image))))
    assert reply.message.text == "You said: What is this?"
    assert sent(sidecar)["messages"][0]["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": PNG_URL, "detail": "high"}},
    ]


async def test_an_image_by_url_is_the_url(sidecar: Running) -> None:
    image = pb.ImagePart(url="https://example.com/cat.png")
    await call(sidecar, request(asked(pb.Part(image=image), pb.Part(text="And this?"))))
    assert sent(sidecar)["messages"][0]["content"][0] == {
        "type": "image_url",
        "image_url": {"url": "https://example.com/cat.png"},
    }


async def test_a_pdf_is_a_file_part_with_its_title_as_the_filename(sidecar: Running) -> None:
    pdf = pb.DocumentPart(data=PDF, media_type="application/pdf", title="Report.pdf")
    await call(sidecar, request(asked(pb.Part(document=pdf), pb.Part(text="Summarise it."))))
    assert sent(sidecar)["messages"][0]["content"][0] == {
        "type": "file",
        "file": {
            "filename": "Report.pdf",
            "file_data": "data:application/pdf;base64," + base64.b64encode(PDF).decode(),
        },
    }


async def test_a_pdf_by_url_is_refused_naming_it_and_nothing_is_sent(sidecar: Running) -> None:
    pdf = pb.DocumentPart(url="https://example.com/a.pdf")
    err = await refused(sidecar, request(asked(pb.Part(document=pdf), pb.Part(text="Read it."))))
    assert isinstance(err, sc.InvalidInputError)
    assert err.detail.parameter == "messages[0].parts[0]"
    assert "does not carry parts.document_url" in err.message
    assert sidecar.provider.requests() == []


async def test_a_tool_results_image_moves_to_one_user_message_after_the_turn(sidecar: Running) -> None:
    call_ = pb.ToolCall(id="call_1", name="weather", arguments_json='{"city":"Paris"}')
    result = pb.ToolCallResult(
        call_id="call_1",
        name="weather",
        parts=[pb.Part(text="The map:"), pb.Part(image=pb.ImagePart(data=PNG, media_type="image/png"))],
    )
    messages = [
        user("What is the weather in Paris?"),
        pb.Message(role=pb.ROLE_ASSISTANT, tool_calls=[call_]),
        pb.Message(role=pb.ROLE_TOOL, tool_results=[result]),
    ]
    reply = await call(sidecar, request(*messages, tools=[WEATHER]))
    assert reply.message.text == "Based on the tool result: The map:"
    assert sent(sidecar)["messages"][2:] == [
        {"role": "tool", "tool_call_id": "call_1", "content": [
            {"type": "text", "text": "The map:"}, {"type": "text", "text": tool_image_placeholder(1)}]},
        {"role": "user", "content": [
            {"type": "text", "text": tool_image_label(1, "call_1")},
            {"type": "image_url", "image_url": {"url": PNG_URL}}]},
    ]  # fmt: skip


# ---------------------------------------------------------------------------- controls


@pytest.mark.parametrize(
    ("choice", "wire", "called"),
    [
        (pb.ToolChoice(mode=pb.TOOL_CHOICE_MODE_REQUIRED), "required", "weather"),
        (pb.ToolChoice(mode=pb.TOOL_CHOICE_MODE_TOOL, name="now"), {"type": "function", "function": {"name": "now"}},
         "now"),
    ],
)  # fmt: skip
async def test_tool_choice_required_or_named_is_sent_and_the_model_calls_the_tool(
    sidecar: Running, choice: pb.ToolChoice, wire: Any, called: str
) -> None:
    reply = await call(sidecar, request(tools=[WEATHER, NOW], tool_choice=choice, parallel_tool_calls=False))
    assert [c.name for c in reply.message.tool_calls] == [called]
    body = sent(sidecar)
    assert (body["tool_choice"], body["parallel_tool_calls"]) == (wire, False)


async def test_stop_seed_sampling_and_the_end_user_are_their_openai_keys(sidecar: Running) -> None:
    req = request(stop=["\n\n", "END"], seed=7, top_p=0.9, presence_penalty=0.5, frequency_penalty=-0.5,
                  end_user="user-42", temperature=0.2)  # fmt: skip
    await call(sidecar, req)
    body = sent(sidecar)
    assert body["stop"] == ["\n\n", "END"]
    got = {k: body[k] for k in ("seed", "top_p", "presence_penalty", "frequency_penalty", "user", "temperature")}
    assert got == {"seed": 7, "top_p": 0.9, "presence_penalty": 0.5, "frequency_penalty": -0.5, "user": "user-42",
                   "temperature": 0.2}  # fmt: skip


async def test_more_than_four_stop_sequences_are_refused_naming_the_rule(sidecar: Running) -> None:
    err = await refused(sidecar, request(stop=["a", "b", "c", "d", "e"]))
    assert isinstance(err, sc.InvalidInputError)
    assert err.detail.parameter == "stop"
    assert "at most 4 stop sequences" in err.message
    assert sidecar.provider.requests() == []


@pytest.mark.parametrize(
    ("reasoning", "effort"),
    [(pb.Reasoning(effort=pb.REASONING_EFFORT_HIGH), "high"), (pb.Reasoning(budget_tokens=5000), "medium")],
)
async def test_reasoning_is_reasoning_effort_with_max_completion_tokens(
    sidecar: Running, reasoning: pb.Reasoning, effort: str
) -> None:
    await call(sidecar, request(reasoning=reasoning, max_output_tokens=300))
    body = sent(sidecar)
    assert (body["reasoning_effort"], body["max_completion_tokens"]) == (effort, 300)
    assert "max_tokens" not in body  # a reasoning model refuses it (and so does the fake)


async def test_a_temperature_with_reasoning_is_refused_naming_the_rule(sidecar: Running) -> None:
    err = await refused(sidecar, request(reasoning=pb.Reasoning(effort=pb.REASONING_EFFORT_LOW), temperature=0.5))
    assert isinstance(err, sc.InvalidInputError)
    assert err.detail.parameter == "temperature"
    assert "default temperature (1)" in err.message
    assert sidecar.provider.requests() == []


async def test_provider_options_are_merged_into_the_body_and_a_key_the_sidecar_sets_is_refused(
    sidecar: Running,
) -> None:
    options = {"openai": {"service_tier": "flex", "prompt_cache_key": "agent-7"}}
    await call(sidecar, request(provider_options_json=json.dumps(options)))
    body = sent(sidecar)
    assert (body["service_tier"], body["prompt_cache_key"]) == ("flex", "agent-7")
    err = await refused(sidecar, request(provider_options_json='{"openai": {"model": "gpt-5"}}'))
    assert isinstance(err, sc.InvalidInputError)
    assert err.detail.parameter == "provider_options_json.openai.model"
    assert len(sidecar.provider.requests()) == 1


# ---------------------------------------------------------------------------- usage and cost


def cost(usage: pb.Usage) -> float:
    uncached = usage.input_tokens - usage.cache_read_input_tokens
    read = usage.cache_read_input_tokens * PRICES["cache_read_price_per_mtok"]
    return (
        uncached * PRICES["input_price_per_mtok"] + read + usage.output_tokens * PRICES["output_price_per_mtok"]
    ) / 1e6


async def test_cached_and_reasoning_tokens_come_back_and_the_cached_ones_are_billed_at_the_cache_price(
    sidecar: Running,
) -> None:
    usage = {"cache_read_input_tokens": 1024, "reasoning_tokens": 64}
    sidecar.provider.script("fake-gpt", [{"preset": "reply", "text": "Done.", "usage": usage}])
    reply = await call(sidecar, request(user("x" * 6000), reasoning=pb.Reasoning(effort=pb.REASONING_EFFORT_LOW)))
    got = reply.usage
    assert got.input_tokens > 1024  # all of them, the cached ones among them
    assert (got.cache_read_input_tokens, got.reasoning_tokens) == (1024, 64)
    assert got.output_tokens == 2 + 64  # "Done." and the reasoning
    assert reply.cost_usd == pytest.approx(cost(got))
    at_input_price = (got.input_tokens * 1.0 + got.output_tokens * 2.0) / 1e6
    assert at_input_price - reply.cost_usd == pytest.approx(1024 * (1.0 - 0.1) / 1e6)  # the discount, exactly
    assert reply.total_usage == got


async def test_a_streamed_reply_reports_the_same_cached_and_reasoning_tokens(sidecar: Running) -> None:
    usage = {"cache_read_input_tokens": 1024, "reasoning_tokens": 64}
    sidecar.provider.script("fake-gpt", [{"preset": "reply", "text": "Done.", "usage": usage}])
    async with grpc.aio.insecure_channel(sidecar.app.address) as channel:
        events = [e async for e in pb_grpc.SidecarStub(channel).StreamModel(request(user("x" * 6000)))]
    final = events[-1].final
    assert (final.usage.cache_read_input_tokens, final.usage.reasoning_tokens) == (1024, 64)
    assert final.cost_usd == pytest.approx(cost(final.usage))
    assert sent(sidecar)["stream_options"] == {"include_usage": True}
