"""Issue 21 over gRPC to a model of the Anthropic wire format: parts, thinking, caching and controls, carried.

A real sidecar process path (gRPC in, the fake Anthropic provider out, ``tests/conftest.py``): an
image and a PDF reach the provider as its blocks; a thinking + tool-use loop of three turns passes
the reasoning back byte-identical (and the fake, which checks signatures as the API does, refuses
an altered one: the caller gets the classified failure); a cached prefix is billed at the cache's
prices; StreamModel streams the reasoning as its own events; Anthropic's rules and what the format
cannot carry are refused before anything is sent.
"""

from __future__ import annotations

import json
from typing import Any

import grpc
import pytest
import sidecar_client as sc
from sidecar_client import pb, user
from sidecar_contract.v1 import sidecar_pb2_grpc as pb_grpc

from tests.conftest import Running, Start
from tests.policy.test_call_model import script, sent

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000" + "1f15c489")
PDF = b"%PDF-1.7 a minimal document"
PRICES = {"input": 3.0, "output": 15.0, "read": 0.3, "write": 3.75}
CLAUDE = {
    "provider": "ant",
    "upstream_model": "fake-claude",
    "context_window": 8000,
    "max_output_tokens": 4096,
    "default_output_tokens": 256,
    "input_price_per_mtok": PRICES["input"],
    "output_price_per_mtok": PRICES["output"],
    "cache_read_price_per_mtok": PRICES["read"],
    "cache_write_price_per_mtok": PRICES["write"],
}
THINK = pb.Reasoning(budget_tokens=1024)
SEARCH = pb.ToolDefinition(
    name="search",
    description="Search the docs.",
    parameters_json=json.dumps({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
)


@pytest.fixture
async def claude(start_sidecar: Start) -> Running:
    return await start_sidecar(models={"claude": CLAUDE})


def request(*messages: pb.Message, **fields: Any) -> pb.CallModelRequest:
    return pb.CallModelRequest(model="claude", messages=list(messages), **fields)


async def call(r: Running, req: pb.CallModelRequest) -> pb.CallModelResponse:
    async with grpc.aio.insecure_channel(r.app.address) as channel:
        return await pb_grpc.SidecarStub(channel).CallModel(req)


async def streamed(r: Running, req: pb.CallModelRequest) -> list[pb.StreamModelEvent]:
    async with grpc.aio.insecure_channel(r.app.address) as channel:
        return [e async for e in pb_grpc.SidecarStub(channel).StreamModel(req)]


async def failed(r: Running, req: pb.CallModelRequest) -> sc.SidecarError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(r, req)
    return sc.from_rpc_error(caught.value)


def assistant(reply: pb.CallModelResponse) -> pb.Message:
    """The reply as the next turn's assistant message: its text, tool calls and reasoning as they came."""
    m = reply.message
    return pb.Message(role=pb.ROLE_ASSISTANT, text=m.text, tool_calls=m.tool_calls, reasoning=m.reasoning)


def result(reply: pb.CallModelResponse, content: str) -> pb.Message:
    (c,) = reply.message.tool_calls
    return pb.Message(role=pb.ROLE_TOOL, tool_results=[pb.ToolCallResult(call_id=c.id, name=c.name, content=content)])


# ---------------------------------------------------------------- parts


async def test_an_image_reaches_the_provider_as_its_block(claude: Running) -> None:
    asked = pb.Message(
        role=pb.ROLE_USER,
        parts=[pb.Part(text="What is this?"), pb.Part(image=pb.ImagePart(data=PNG, media_type="image/png"))],
    )
    reply = await call(claude, request(asked))
    assert reply.message.text == "You said: What is this?"
    (message,) = sent(claude, "claude")[-1]["body"]["messages"]
    assert message["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ"},
    }


async def test_a_pdf_and_an_image_by_url_reach_the_provider(claude: Running) -> None:
    asked = pb.Message(
        role=pb.ROLE_USER,
        parts=[
            pb.Part(document=pb.DocumentPart(data=PDF, media_type="application/pdf", title="Report")),
            pb.Part(image=pb.ImagePart(url="https://example.com/cat.png")),
            pb.Part(document=pb.DocumentPart(text="Plain notes.", media_type="text/plain", title="Notes")),
            pb.Part(text="Summarise them."),
        ],
    )
    reply = await call(claude, request(asked))
    assert reply.message.text == "You said: Summarise them."
    pdf, image, notes, _ = sent(claude, "claude")[-1]["body"]["messages"][0]["content"]
    assert pdf["type"] == "document"
    assert pdf["title"] == "Report"
    assert pdf["source"]["media_type"] == "application/pdf"
    assert image["source"] == {"type": "url", "url": "https://example.com/cat.png"}
    assert notes["source"] == {"type": "text", "media_type": "text/plain", "data": "Plain notes."}


async def test_a_bad_image_is_the_providers_refusal_classified(claude: Running) -> None:
    asked = pb.Message(role=pb.ROLE_USER, parts=[pb.Part(image=pb.ImagePart(data=PNG, media_type="image/jpeg"))])
    err = await failed(claude, request(asked))
    assert isinstance(err, sc.InvalidInputError)
    assert err.http is not None
    assert err.http.status_code == 400
    assert "Image does not match the provided media type image/jpeg" in err.http.body


# ---------------------------------------------------------------- thinking and a tool loop


async def test_a_thinking_tool_loop_of_three_turns_passes_the_reasoning_back_byte_identical(claude: Running) -> None:
    script(claude, "claude", {}, {"preset": "reply", "tool_calls": [{"name": "search", "arguments": {"query": "b"}}]})
    conversation = [user("find retries")]
    replies = []
    for turn in range(3):
        reply = await call(claude, request(*conversation, tools=[SEARCH], reasoning=THINK, max_output_tokens=2048))
        replies.append(reply)
        (thought,) = reply.message.reasoning
        assert thought.text
        assert thought.signature
        assert thought.format == "anthropic"
        assert reply.usage.reasoning_tokens > 0
        if turn < 2:
            assert reply.finish_reason == pb.FINISH_REASON_TOOL_CALLS
            conversation += [assistant(reply), result(reply, f"result {turn}")]
    assert replies[-1].message.text == "Based on the tool result: result 1"
    bodies = [r["body"] for r in sent(claude, "claude")]
    assert [b["thinking"] for b in bodies] == [{"type": "enabled", "budget_tokens": 1024}] * 3
    for body, turns in zip(bodies[1:], ([replies[0]], replies[:2]), strict=True):
        passed = [m["content"][0] for m in body["messages"] if m["role"] == "assistant"]
        assert passed == [
            {"type": "thinking", "thinking": r.message.reasoning[0].text, "signature": r.message.reasoning[0].signature}
            for r in turns
        ]


@pytest.mark.parametrize("change", ["signature", "text", "missing"])
async def test_altered_or_missing_reasoning_is_the_providers_refusal_classified(claude: Running, change: str) -> None:
    first = await call(claude, request(user("find retries"), tools=[SEARCH], reasoning=THINK, max_output_tokens=2048))
    turn = assistant(first)
    if change == "missing":
        del turn.reasoning[:]
    else:
        value = getattr(turn.reasoning[0], change)
        setattr(turn.reasoning[0], change, value[:-1] + ("x" if value[-1] != "x" else "y"))
    again = request(user("find retries"), turn, result(first, "found"), tools=[SEARCH], reasoning=THINK,
                    max_output_tokens=2048)  # fmt: skip
    err = await failed(claude, again)
    assert isinstance(err, sc.InvalidInputError)
    assert err.grpc_code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.attempts == 1
    assert err.http is not None
    assert err.http.status_code == 400
    said = "Expected `thinking` or `redacted_thinking`" if change == "missing" else "Invalid `signature`"
    assert said in err.http.body


async def test_redacted_thinking_comes_back_and_is_passed_back(claude: Running) -> None:
    from sidecar.providers.formats.anthropic_messages.fake_answers import REDACTED_TRIGGER

    first = await call(claude, request(user(REDACTED_TRIGGER), tools=[SEARCH], reasoning=THINK, max_output_tokens=2048))
    (thought,) = first.message.reasoning
    assert thought.redacted_data
    assert not thought.text
    second = await call(claude, request(user(REDACTED_TRIGGER), assistant(first), result(first, "x"), tools=[SEARCH],
                                        reasoning=THINK, max_output_tokens=2048))  # fmt: skip
    assert second.message.text.startswith("Based on the tool result")
    assert sent(claude, "claude")[-1]["body"]["messages"][1]["content"][0] == {
        "type": "redacted_thinking",
        "data": thought.redacted_data,
    }


async def test_an_effort_level_is_adaptive_thinking_at_that_effort(claude: Running) -> None:
    reply = await call(claude, request(user("hi"), reasoning=pb.Reasoning(effort=pb.REASONING_EFFORT_LOW)))
    assert reply.message.reasoning[0].signature
    body = sent(claude, "claude")[-1]["body"]
    assert (body["thinking"], body["output_config"]) == ({"type": "adaptive"}, {"effort": "low"})


async def test_streamed_reasoning_deltas_are_their_own_events_and_make_the_final_reasoning(claude: Running) -> None:
    events = await streamed(claude, request(user("one two three"), reasoning=THINK, max_output_tokens=2048))
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds.index("reasoning") < kinds.index("text")
    deltas = [e.reasoning for e in events if e.HasField("reasoning")]
    assert {d.index for d in deltas} == {0}
    assert len([d for d in deltas if d.text]) > 1
    final = events[-1].final
    (thought,) = final.message.reasoning
    assert "".join(d.text for d in deltas) == thought.text
    assert [d.signature for d in deltas if d.signature] == [thought.signature]
    assert "".join(e.text.text for e in events if e.HasField("text")) == final.message.text == "You said: one two three"
    assert 0 < final.usage.reasoning_tokens < final.usage.output_tokens


# ---------------------------------------------------------------- prompt caching


def _cost(usage: pb.Usage) -> float:
    uncached = usage.input_tokens - usage.cache_read_input_tokens - usage.cache_write_input_tokens
    return (
        uncached * PRICES["input"]
        + usage.cache_read_input_tokens * PRICES["read"]
        + usage.cache_write_input_tokens * PRICES["write"]
        + usage.output_tokens * PRICES["output"]
    ) / 1e6


async def test_a_cached_prefix_is_billed_at_the_cache_prices(claude: Running) -> None:
    system = "You are a careful assistant. " * 60
    cached = {"system": system, "system_cache": pb.CacheBreakpoint(ttl=pb.CACHE_TTL_1H)}
    first = await call(claude, request(user("first question"), **cached))
    write = first.usage.cache_write_input_tokens
    assert write > 400
    assert first.usage.cache_read_input_tokens == 0
    assert first.usage.input_tokens > write  # every input token, the cache's too
    assert first.cost_usd == pytest.approx(_cost(first.usage))
    second = await call(claude, request(user("second question"), **cached))
    assert second.usage.cache_read_input_tokens == write
    assert second.usage.cache_write_input_tokens == 0
    assert second.cost_usd == pytest.approx(_cost(second.usage))
    at_input_price = (second.usage.input_tokens * PRICES["input"] + second.usage.output_tokens * PRICES["output"]) / 1e6
    assert second.cost_usd < at_input_price / 3  # the read prefix at a tenth of the price: not billed as input
    assert second.total_usage.cache_read_input_tokens == write
    body = sent(claude, "claude")[-1]["body"]
    assert body["system"] == [{"type": "text", "text": system, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]


async def test_cache_breakpoints_on_a_part_and_a_tool_are_sent_and_streamed_usage_counts_the_cache(
    claude: Running,
) -> None:
    tool = pb.ToolDefinition()
    tool.CopyFrom(SEARCH)
    tool.cache.CopyFrom(pb.CacheBreakpoint())
    context = pb.Part(text="A long shared context. " * 50, cache=pb.CacheBreakpoint())
    asked = pb.Message(role=pb.ROLE_USER, parts=[context, pb.Part(text="Now?")])
    choice = pb.ToolChoice(mode=pb.TOOL_CHOICE_MODE_NONE)
    req = request(asked, tools=[tool], tool_choice=choice, max_output_tokens=4096)
    first = await call(claude, req)
    events = await streamed(claude, req)
    usage = events[-1].final.usage
    assert usage.cache_read_input_tokens == first.usage.cache_write_input_tokens > 0
    body = sent(claude, "claude")[-1]["body"]
    assert body["tools"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}


# ---------------------------------------------------------------- controls


async def test_the_controls_anthropic_has_are_in_the_body(claude: Running) -> None:
    await call(
        claude,
        request(
            user("stop here please"),
            tools=[SEARCH],
            tool_choice=pb.ToolChoice(mode=pb.TOOL_CHOICE_MODE_TOOL, name="search"),
            parallel_tool_calls=False,
            stop=["END"],
            top_p=0.9,
            top_k=40,
            end_user="user-42",
            provider_options_json=json.dumps({"anthropic": {"service_tier": "auto"}, "openai": {"store": False}}),
        ),
    )
    body = sent(claude, "claude")[-1]["body"]
    assert body["tool_choice"] == {"type": "tool", "name": "search", "disable_parallel_tool_use": True}
    assert (body["stop_sequences"], body["top_p"], body["top_k"]) == (["END"], 0.9, 40)
    assert body["metadata"] == {"user_id": "user-42"}
    assert body["service_tier"] == "auto"
    assert "store" not in body


async def test_a_stop_sequence_the_reply_meets_ends_it(claude: Running) -> None:
    reply = await call(claude, request(user("one END two"), stop=["END"]))
    assert reply.message.text == "You said: one "
    assert reply.finish_reason == pb.FINISH_REASON_STOP
    assert sent(claude, "claude")[-1]["body"]["stop_sequences"] == ["END"]


@pytest.mark.parametrize(
    ("fields", "parameter", "said"),
    [
        ({"reasoning": THINK, "max_output_tokens": 2048, "temperature": 0.5}, "temperature", "with thinking"),
        ({"reasoning": THINK, "max_output_tokens": 2048, "top_k": 5}, "top_k", "with thinking"),
        ({"reasoning": THINK, "max_output_tokens": 2048, "top_p": 0.5}, "top_p", "[0.95, 1.0]"),
        ({"reasoning": THINK, "max_output_tokens": 1024}, "reasoning.budget_tokens", "below max_output_tokens"),
        ({"reasoning": pb.Reasoning(budget_tokens=512), "max_output_tokens": 2048}, "reasoning.budget_tokens",
         "at least 1024"),
        ({"reasoning": THINK}, "reasoning.budget_tokens", "below max_tokens (256)"),
        ({"reasoning": pb.Reasoning(effort=pb.REASONING_EFFORT_MINIMAL)}, "reasoning.effort", "low, medium, high"),
        ({"reasoning": THINK, "max_output_tokens": 2048, "tools": [SEARCH],
          "tool_choice": pb.ToolChoice(mode=pb.TOOL_CHOICE_MODE_REQUIRED)}, "tool_choice.mode", "auto or none"),
        ({"system": "s", "system_cache": pb.CacheBreakpoint(), "tools": [SEARCH],
          "tool_choice": pb.ToolChoice(mode=pb.TOOL_CHOICE_MODE_NONE), "parallel_tool_calls": True},
         "parallel_tool_calls", "none calls no tool"),
        ({"provider_options_json": '{"anthropic": {"model": "other"}}'}, "provider_options_json.anthropic.model",
         "sets itself"),
        ({"provider_options_json": '{"antropic": {}}'}, "provider_options_json.antropic", "must name a wire format"),
        ({"provider_options_json": "[1]"}, "provider_options_json", "JSON object"),
    ],
)  # fmt: skip
async def test_anthropics_rules_are_refused_before_sending_naming_the_rule(
    claude: Running, fields: dict[str, Any], parameter: str, said: str
) -> None:
    err = await failed(claude, request(user("hi"), **fields))
    assert isinstance(err, sc.InvalidInputError)
    assert err.detail.parameter == parameter
    assert said in err.message
    assert sent(claude, "claude") == []


async def test_more_than_four_cache_breakpoints_are_refused_naming_the_fifth(claude: Running) -> None:
    parts = [pb.Part(text=f"part {i}", cache=pb.CacheBreakpoint()) for i in range(4)]
    asked = pb.Message(role=pb.ROLE_USER, parts=parts)
    err = await failed(claude, request(asked, system="s", system_cache=pb.CacheBreakpoint()))
    assert isinstance(err, sc.InvalidInputError)
    assert err.detail.parameter == "messages[0].parts[3].cache"
    assert "at most 4 cache breakpoints" in err.message
    assert sent(claude, "claude") == []


async def test_a_low_detail_image_is_refused_naming_it(claude: Running) -> None:
    image = pb.ImagePart(data=PNG, media_type="image/png", detail=pb.IMAGE_DETAIL_LOW)
    err = await failed(claude, request(pb.Message(role=pb.ROLE_USER, parts=[pb.Part(image=image)])))
    assert isinstance(err, sc.InvalidInputError)
    assert err.detail.parameter == "messages[0].parts[0].detail"
    assert sent(claude, "claude") == []
