"""Conversations of every shape the core carries, and the ChatRequest a call sends for one (the wire tests)."""

from __future__ import annotations

import json
from typing import Any

from sidecar.core.conversation import (
    CacheBreakpoint,
    Controls,
    DocumentPart,
    ImagePart,
    Message,
    ModelRequest,
    Reasoning,
    ReasoningPart,
    TextPart,
    ToolCall,
    ToolCallResult,
    ToolChoice,
    ToolDefinition,
)
from sidecar.core.kinds import Role
from sidecar.providers.formats.carried import asked
from sidecar.providers.formats.chat import ChatRequest

__all__ = ["SHAPES", "as_sent", "chat", "features"]

SCHEMA = '{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}'
WEATHER = ToolDefinition("weather", "The weather in a city.", SCHEMA)
CALL = ToolCall("call_1", "weather", '{"city":"Paris"}')
ASKED = Message(Role.USER, "What is the weather in Paris?")

SHAPES: dict[str, ModelRequest] = {
    "user text": ModelRequest("m", (ASKED,)),
    "system": ModelRequest("m", (ASKED,), system="You answer briefly.\nAlways in French."),
    "assistant text": ModelRequest("m", (ASKED, Message(Role.ASSISTANT, "Sunny."), Message(Role.USER, "Thanks"))),
    "assistant tool calls": ModelRequest(
        "m", (ASKED, Message(Role.ASSISTANT, "Let me look.", (CALL, ToolCall("call_2", "weather", '{"city":"Nice"}'))))
    ),
    "assistant tool call without text": ModelRequest("m", (ASKED, Message(Role.ASSISTANT, "", (CALL,)))),
    "arguments that are not JSON": ModelRequest(
        "m", (ASKED, Message(Role.ASSISTANT, "", (ToolCall("call_1", "weather", "Paris, please"),)))
    ),
    "tool results": ModelRequest(
        "m",
        (
            ASKED,
            Message(Role.ASSISTANT, "", (CALL, ToolCall("call_2", "weather", '{"city":"Nice"}'))),
            Message(
                Role.TOOL,
                tool_results=(
                    ToolCallResult("call_1", "18 C", False, "weather"),
                    ToolCallResult("call_2", "21 C", False, "weather"),
                ),
            ),
        ),
    ),
    "a tool result that is an error": ModelRequest(
        "m",
        (
            ASKED,
            Message(Role.ASSISTANT, "", (CALL,)),
            Message(
                Role.TOOL, tool_results=(ToolCallResult("call_1", "The weather service failed.", True, "weather"),)
            ),
            Message(Role.ASSISTANT, "I could not find out."),
        ),
    ),
    "tool results then the user": ModelRequest(
        "m",
        (
            ASKED,
            Message(Role.ASSISTANT, "", (CALL,)),
            Message(Role.TOOL, tool_results=(ToolCallResult("call_1", "18 C", False, "weather"),)),
            Message(Role.USER, "And tomorrow?"),
        ),
    ),
    "tools with schemas": ModelRequest(
        "m",
        (ASKED,),
        tools=(WEATHER, ToolDefinition("now", "", '{"type":"object","properties":{}}')),
    ),
    "response schema": ModelRequest("m", (ASKED,), system="Be exact.", response_schema_json=SCHEMA),
    "response schema without a system prompt": ModelRequest("m", (ASKED,), response_schema_json=SCHEMA),
    "temperature and max tokens": ModelRequest("m", (ASKED,), max_output_tokens=321, temperature=0.25),
    "everything at once": ModelRequest(
        "m",
        (
            ASKED,
            Message(Role.ASSISTANT, "Looking.", (CALL,)),
            Message(Role.TOOL, tool_results=(ToolCallResult("call_1", "no answer", True, "weather"),)),
            Message(Role.ASSISTANT, "Trying again.", (ToolCall("call_3", "weather", '{"city":"Paris, FR"}'),)),
            Message(Role.TOOL, tool_results=(ToolCallResult("call_3", "18 C", False, "weather"),)),
            Message(Role.USER, "Ünïcode too: 東京?"),
        ),
        system="You are terse.",
        tools=(WEATHER,),
        response_schema_json=SCHEMA,
        max_output_tokens=64,
        temperature=0.0,
    ),
}
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000" + "1f15c489")
"""A PNG's header (1 x 1): enough for ``imagesize`` and for a provider's media-type check of the fake."""
THOUGHT = ReasoningPart("The user wants Paris; call weather.", "EqQBCkYIBxgCKkD-signature", "", "")
PARTS_SHAPES: dict[str, ModelRequest] = {
    "text parts": ModelRequest("m", (Message(Role.USER, parts=(TextPart("Look: "), TextPart("what is it?"))),)),
    "an inline image": ModelRequest(
        "m", (Message(Role.USER, parts=(TextPart("What is this?"), ImagePart("image/png", PNG, detail="high"))),)
    ),
    "an image by URL": ModelRequest(
        "m", (Message(Role.USER, parts=(ImagePart(url="https://example.com/cat.png"), TextPart("And this?"))),)
    ),
    "a PDF and a text document": ModelRequest(
        "m",
        (
            Message(
                Role.USER,
                parts=(
                    DocumentPart("application/pdf", b"%PDF-1.7 minimal", title="Report"),
                    DocumentPart("text/plain", text="Plain notes.", title="Notes"),
                    TextPart("Summarise both."),
                ),
            ),
        ),
    ),
    "a PDF by URL": ModelRequest(
        "m", (Message(Role.USER, parts=(DocumentPart(url="https://example.com/a.pdf"), TextPart("Read it."))),)
    ),
    "strict tools": ModelRequest(
        "m",
        (Message(Role.USER, "Weather in Paris?"),),
        tools=(ToolDefinition("weather", "The weather in a city.", SCHEMA, strict=True),),
    ),
    "loose tools": ModelRequest(
        "m",
        (Message(Role.USER, "Weather in Paris?"),),
        tools=(ToolDefinition("weather", "The weather in a city.", SCHEMA, strict=False),),
    ),
    "cache breakpoints": ModelRequest(
        "m",
        (Message(Role.USER, parts=(TextPart("A long shared context.", CacheBreakpoint("1h")), TextPart("Now?"))),),
        system="A long system prompt.",
        tools=(ToolDefinition("weather", "The weather in a city.", SCHEMA, CacheBreakpoint()),),
        controls=Controls(system_cache=CacheBreakpoint("5m")),
    ),
    "reasoning passed back": ModelRequest(
        "m",
        (
            ASKED,
            Message(Role.ASSISTANT, "", (CALL,), reasoning=(THOUGHT,)),
            Message(Role.TOOL, tool_results=(ToolCallResult("call_1", "18 C", False, "weather"),)),
        ),
        tools=(WEATHER,),
        max_output_tokens=4096,
        controls=Controls(reasoning=Reasoning(budget_tokens=2048)),
    ),
    "redacted reasoning passed back": ModelRequest(
        "m",
        (ASKED, Message(Role.ASSISTANT, "Sunny.", reasoning=(ReasoningPart(redacted_data="EmwKAhgBEgy-opaque"),))),
        controls=Controls(reasoning=Reasoning(budget_tokens=1024)),
        max_output_tokens=4096,
    ),
    "a tool result with an image": ModelRequest(
        "m",
        (
            ASKED,
            Message(Role.ASSISTANT, "", (CALL,)),
            Message(
                Role.TOOL,
                tool_results=(
                    ToolCallResult("call_1", "", False, "weather", (TextPart("The map:"), ImagePart("image/png", PNG))),
                ),
            ),
        ),
        tools=(WEATHER,),
    ),
    "tool choice: a named tool": ModelRequest(
        "m", (ASKED,), tools=(WEATHER,), controls=Controls(tool_choice=ToolChoice("tool", "weather"))
    ),
    "tool choice: required, no parallel calls": ModelRequest(
        "m",
        (ASKED,),
        tools=(WEATHER,),
        controls=Controls(tool_choice=ToolChoice("required"), parallel_tool_calls=False),
    ),
    "tool choice: none": ModelRequest(
        "m", (ASKED,), tools=(WEATHER,), controls=Controls(tool_choice=ToolChoice("none"))
    ),
    "sampling and stop": ModelRequest(
        "m", (ASKED,), temperature=0.5, controls=Controls(stop=("\n\n", "END"), top_p=0.9, end_user="user-42")
    ),
    "top_k": ModelRequest("m", (ASKED,), controls=Controls(top_k=40)),
    "seed and penalties": ModelRequest(
        "m", (ASKED,), controls=Controls(seed=7, presence_penalty=0.5, frequency_penalty=-0.5)
    ),
    "reasoning effort": ModelRequest("m", (ASKED,), controls=Controls(reasoning=Reasoning(effort="high"))),
}
"""What issue 21 carries: each format round-trips the ones whose features it carries, and refuses the others."""
SHAPES.update(PARTS_SHAPES)
DEFAULT_MAX_TOKENS = 1024


def chat(request: ModelRequest) -> ChatRequest:
    """The ChatRequest a call to ``request`` sends (as ModelService builds it)."""
    return ChatRequest(
        upstream_model=request.model,
        system=request.system,
        messages=list(request.messages),
        tools=list(request.tools),
        response_schema=json.loads(request.response_schema_json) if request.response_schema_json else None,
        max_tokens=request.max_output_tokens or DEFAULT_MAX_TOKENS,
        temperature=request.temperature,
        controls=request.controls,
        carried=request.carried,
    )


def features(request: ModelRequest) -> frozenset[str]:
    """What the request asks beyond plain text (``formats.carried``): a format round-trips it if it carries all."""
    return frozenset(feature for feature, _ in asked(request))


def as_sent(request: ModelRequest) -> ModelRequest:
    """``request`` as a body carries it: the output budget is always sent."""
    return request if request.max_output_tokens else ModelRequest(**{**_fields(request), "max_output_tokens": 1024})


def _fields(request: ModelRequest) -> dict[str, Any]:
    return {name: getattr(request, name) for name in request.__dataclass_fields__}


TOOL_IMAGE_SHAPES: dict[str, ModelRequest] = {
    "tool results with images between their text": ModelRequest(
        "m",
        (
            ASKED,
            Message(Role.ASSISTANT, "", (CALL, ToolCall("call_2", "weather", '{"city":"Rome"}'),
                                         ToolCall("call_3", "weather", '{"city":"Nice"}'))),
            Message(
                Role.TOOL,
                tool_results=(
                    ToolCallResult(
                        "call_1", "", False, "weather", (ImagePart("image/png", PNG), TextPart("Paris"),
                                                         ImagePart(url="https://example.com/radar.png", detail="low"))
                    ),
                    ToolCallResult("call_2", "21 C", False, "weather"),
                    ToolCallResult("call_3", "", False, "weather", (TextPart("Nice:"), ImagePart("image/png", PNG))),
                ),
            ),
            Message(Role.USER, "And tomorrow?"),
        ),
        tools=(WEATHER,),
    ),
    "a tool result that is an error with an image": ModelRequest(
        "m",
        (
            ASKED,
            Message(Role.ASSISTANT, "", (CALL,)),
            Message(
                Role.TOOL,
                tool_results=(
                    ToolCallResult("call_1", "", True, "weather", (ImagePart("image/png", PNG), TextPart("failed"))),
                ),
            ),
        ),
        tools=(WEATHER,),
    ),
}  # fmt: skip
"""A tool result's images where they stood among its text, over several results, and an error's (the
OpenAI format moves them to a user message and back: ``openai_chat/upstream.py``)."""
PARTS_SHAPES.update(TOOL_IMAGE_SHAPES)
SHAPES.update(TOOL_IMAGE_SHAPES)


def _without_image_detail(request: ModelRequest) -> ModelRequest:
    from dataclasses import replace

    def plain(parts: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(replace(p, detail="") if isinstance(p, ImagePart) else p for p in parts)

    messages = tuple(
        replace(
            m,
            parts=plain(m.parts),
            tool_results=tuple(replace(r, parts=plain(r.parts)) for r in m.tool_results),
        )
        for m in request.messages
    )
    return replace(request, messages=messages)


def _budget_as_effort(request: ModelRequest) -> ModelRequest:
    """The Responses API takes a reasoning effort, no budget: a budget goes as its level and reads back so."""
    from dataclasses import replace

    from sidecar.providers.formats.openai_responses.vocab import effort_for_budget

    reasoning = request.controls.reasoning
    if reasoning is None or reasoning.budget_tokens is None:
        return request
    effort = Reasoning(effort=effort_for_budget(reasoning.budget_tokens))
    return replace(request, controls=replace(request.controls, reasoning=effort))


def _strict_always_sent(request: ModelRequest) -> ModelRequest:
    """The Responses upstream sends every tool's ``strict`` (unset as false, not the API's default true), so
    an unset one reads back false."""
    from dataclasses import replace

    tools = tuple(replace(t, strict=bool(t.strict)) for t in request.tools)
    return replace(_budget_as_effort(request), tools=tools)


def _no_strict_field(request: ModelRequest) -> ModelRequest:
    """Gemini and Converse have no strict mode: ``strict`` false (true is refused) is not sent, and reads back unset."""
    from dataclasses import replace

    tools = tuple(replace(t, strict=None) for t in request.tools)
    return replace(_without_image_detail(request), tools=tools)


READ_BACK: dict[str, Any] = {
    "anthropic": _without_image_detail,
    "gemini": _no_strict_field,
    "openai_responses": _strict_always_sent,
    "bedrock_converse": _no_strict_field,
}
"""What a format's front reads back of a request its upstream sent, where the format has no field for
something it carries by its own rule: Anthropic sees every image at full detail and has no ``detail``
(``anthropic_messages.vocab``), so an image reads back with detail "" ("low" is refused before sending)."""


def read_back(request: ModelRequest, format_name: str) -> ModelRequest:
    """``request`` as the format's front reads back the body its upstream rendered for it."""
    normalise = READ_BACK.get(format_name)
    return request if normalise is None else normalise(request)
