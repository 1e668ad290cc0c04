"""Routes whose deployments speak different wire formats, over real gRPC and one fake provider.

The fake provider speaks every registered format, each deployment its own upstream model. A chain
fails over on overload from one format to the next; the conversation (a tool call and its result
in the history) reaches every hop as the same core request, read back through that format's own
front half, and the reply says which deployment served it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from sidecar_client import pb, user

from sidecar.core.conversation import ModelRequest
from sidecar.fakes import FakeProvider, ThreadedServer
from sidecar.providers.formats.registry import FORMATS, format_named
from tests.conftest import Running, Start

KEYS = {"openai": "sk-test-OAI1234567890abcd", "anthropic": "sk-ant-ANT1234567890abcd"}
UNDER_V1 = {"openai", "openai_responses"}
"""The formats whose base URL ends in ``/v1``, as OpenAI's does."""
ISSUE_CHAIN = ("openai_responses", "anthropic", "gemini")
"""The chain issue 23 names."""
CHAINS = [
    pytest.param(ISSUE_CHAIN, id="responses-anthropic-gemini"),
    pytest.param(tuple(sorted(FORMATS)), id="every-format"),
    pytest.param(tuple(sorted(FORMATS, reverse=True)), id="every-format-reversed"),
]
WEATHER = pb.ToolDefinition(
    name="weather",
    description="The weather in a city.",
    parameters_json='{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}',
)
HISTORY = [
    user("What is the weather in Paris?"),
    pb.Message(
        role=pb.ROLE_ASSISTANT,
        text="Looking.",
        tool_calls=[pb.ToolCall(id="call_1", name="weather", arguments_json='{"city":"Paris"}')],
    ),
    pb.Message(
        role=pb.ROLE_TOOL,
        tool_results=[pb.ToolCallResult(call_id="call_1", content="18 C", name="weather")],
    ),
]


def provider_of(name: str, url: str) -> dict[str, Any]:
    extra: dict[str, Any] = {"region": "us-east-1"} if name == "bedrock_converse" else {}
    return {
        "wire_format": name,
        "base_url": url + ("/v1" if name in UNDER_V1 else ""),
        "api_key": KEYS.get(name, f"key-{name}-1234567890abcdef"),
        **extra,
    }


async def chain_sidecar(start_sidecar: Start, fake: ThreadedServer[FakeProvider], chain: tuple[str, ...]) -> Running:
    missing = [name for name in chain if name not in FORMATS]
    assert not missing, f"formats not registered: {missing}"
    deployments = {
        f"d-{name}": {
            "provider": f"p-{name}",
            "upstream_model": f"up-{name}",
            "context_window": 8000,
            "max_output_tokens": 2048,
            "default_output_tokens": 256,
        }
        for name in chain
    }
    return await start_sidecar(
        policy={"upstream_retries": 1},
        providers={f"p-{name}": provider_of(name, fake.url) for name in chain},
        models={**deployments, "chain": {"route": {"fallbacks": [f"d-{name}" for name in chain]}}},
    )


def as_core(r: Running, name: str) -> list[ModelRequest]:
    """What each request the fake got for ``name``'s deployment says, read by that format's front."""
    front = format_named(name).front
    records = r.provider.requests(model=f"up-{name}")
    # a format that names the model in its path (Gemini, Bedrock) reads the body with the path's words
    routed = getattr(front, "routed", None)
    bodies = [rec["body"] if routed is None else routed(rec["path"], rec["body"]) for rec in records]
    return [replace(front.parse(body).request, model="") for body in bodies]


def conversation(req: ModelRequest) -> list[tuple[str, str, list[tuple[str, str]], list[tuple[str, str]]]]:
    """The history as every format can carry it: roles, text, tool calls (name, arguments), results."""
    return [
        (
            m.role,
            m.text,
            [(c.name, c.arguments_json.replace(" ", "")) for c in m.tool_calls],
            [(t.name, t.content) for t in m.tool_results],
        )
        for m in req.messages
    ]


@pytest.mark.parametrize("chain", CHAINS)
async def test_a_chain_across_formats_fails_over_on_overload_to_its_last_deployment(
    start_sidecar: Start, provider: ThreadedServer[FakeProvider], chain: tuple[str, ...]
) -> None:
    r = await chain_sidecar(start_sidecar, provider, chain)
    *overloaded, last = chain
    for name in overloaded:
        r.provider.script(f"up-{name}", [{"preset": "overloaded", "repeat": 2}])
    reply = await r.client.call_model("chain", HISTORY, system="Be brief.", tools=[WEATHER])
    assert reply.served_by == f"d-{last}"
    assert [(h.deployment, h.kind, h.attempts) for h in reply.hops] == [
        *[(f"d-{name}", pb.FAILURE_KIND_UPSTREAM_RETRIES_EXHAUSTED, 2) for name in overloaded],
        (f"d-{last}", pb.FAILURE_KIND_UNSPECIFIED, 1),
    ]
    assert reply.provider == f"p-{last}"
    assert reply.message.text.startswith("Based on the tool result")
    first = as_core(r, chain[0])[0]
    assert first.system == "Be brief."
    assert [t.name for t in first.tools] == ["weather"]
    for name in chain:
        (seen, *rest) = as_core(r, name)
        assert conversation(seen) == conversation(first), name
        assert seen.system == first.system, name
        assert [t.name for t in seen.tools] == ["weather"], name
        assert all(conversation(again) == conversation(seen) for again in rest), name


@pytest.mark.parametrize("chain", CHAINS)
async def test_a_stream_across_formats_fails_over_before_its_first_delta(
    start_sidecar: Start, provider: ThreadedServer[FakeProvider], chain: tuple[str, ...]
) -> None:
    r = await chain_sidecar(start_sidecar, provider, chain)
    *overloaded, last = chain
    for name in overloaded:
        r.provider.script(f"up-{name}", [{"preset": "overloaded", "repeat": 2}])
    call = r.client.stream_model("chain", [user("Hello there")])
    events = [event async for event in call]
    assert [e for e in events if e.WhichOneof("event") == "restart"] == []  # nothing reached the caller before
    final = events[-1].final
    assert final.served_by == f"d-{last}"
    assert [h.deployment for h in final.hops] == [f"d-{name}" for name in chain]
    assert call.text == final.message.text == "You said: Hello there"


# ---------------------------------------------------------------- strict function calling (issue 23)

STRICT = pb.ToolDefinition(
    name="weather",
    description="The weather in a city.",
    parameters_json='{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],'
    '"additionalProperties":false}',
    strict=True,
)
STRICT_FIELD = {
    "openai": lambda tool: tool["function"].get("strict"),
    "anthropic": lambda tool: tool.get("strict"),
    "openai_responses": lambda tool: tool.get("strict"),
}
"""Where each format that carries strict function calling puts it on the wire (docs/carried.md, tools.strict)."""


def test_strict_crosses_grpc_as_set_unset_differing_from_false() -> None:
    from sidecar.server.convert import model_request

    tools = [STRICT, replace_pb(STRICT, strict=False), pb.ToolDefinition(name="plain")]
    req = model_request(pb.CallModelRequest(model="m", messages=[user("hi")], tools=tools))
    assert [t.strict for t in req.tools] == [True, False, None]


def replace_pb(tool: pb.ToolDefinition, **fields: Any) -> pb.ToolDefinition:
    copy = pb.ToolDefinition()
    copy.CopyFrom(tool)
    for key, value in fields.items():
        setattr(copy, key, value)
    return copy


@pytest.mark.parametrize("name", sorted(STRICT_FIELD))
async def test_a_strict_tool_reaches_the_provider_strict(
    start_sidecar: Start, provider: ThreadedServer[FakeProvider], name: str
) -> None:
    r = await chain_sidecar(start_sidecar, provider, (name,))
    loose = replace_pb(STRICT, name="loose", strict=False)
    unset = pb.ToolDefinition(name="unset", parameters_json=STRICT.parameters_json)
    await r.client.call_model(f"d-{name}", [user("Weather in Paris?")], tools=[STRICT, loose, unset])
    [sent] = r.provider.requests(model=f"up-{name}")
    strict = [STRICT_FIELD[name](tool) for tool in sent["body"]["tools"]]
    # unset: Chat Completions and Anthropic are sent none (their default is off); Responses false (its default is on)
    assert strict == [True, False, False if name == "openai_responses" else None]
    assert [t.strict for t in as_core(r, name)[0].tools][:2] == [True, False]


@pytest.mark.parametrize("name", sorted(set(FORMATS) - set(STRICT_FIELD)))
async def test_a_format_without_strict_refuses_it_naming_the_field_and_sends_nothing(
    start_sidecar: Start, provider: ThreadedServer[FakeProvider], name: str
) -> None:
    import sidecar_client as sc

    r = await chain_sidecar(start_sidecar, provider, (name,))
    with pytest.raises(sc.InvalidInputError) as caught:
        await r.client.call_model(f"d-{name}", [user("Weather in Paris?")], tools=[STRICT])
    assert caught.value.detail.parameter == "tools[0].strict"
    assert f"speaks the {name} wire format, which does not carry tools.strict" in str(caught.value)
    assert r.provider.requests(model=f"up-{name}") == []
    # strict false asks nothing: the same tool goes through
    await r.client.call_model(f"d-{name}", [user("Weather in Paris?")], tools=[replace_pb(STRICT, strict=False)])
    assert len(r.provider.requests(model=f"up-{name}")) == 1


async def test_a_route_passes_over_a_deployment_that_cannot_carry_strict_and_never_drops_it(
    start_sidecar: Start, provider: ThreadedServer[FakeProvider]
) -> None:
    r = await chain_sidecar(start_sidecar, provider, ("gemini", "bedrock_converse", "openai_responses"))
    reply = await r.client.call_model("chain", [user("Weather in Paris?")], tools=[STRICT])
    assert reply.served_by == "d-openai_responses"
    assert [(h.deployment, h.attempts) for h in reply.hops] == [
        ("d-gemini", 0),
        ("d-bedrock_converse", 0),
        ("d-openai_responses", 1),
    ]
    assert all("does not carry tools.strict" in h.reason for h in reply.hops[:2])
    assert r.provider.requests(model="up-gemini") == r.provider.requests(model="up-bedrock_converse") == []
    [sent] = r.provider.requests(model="up-openai_responses")
    assert sent["body"]["tools"][0]["strict"] is True
