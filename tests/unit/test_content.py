"""sidecar.core.content: the parts and controls a request may carry, and what an image costs in tokens."""

from __future__ import annotations

import struct
import zlib
from dataclasses import replace

import pytest

from sidecar.core.content import Limits, check_content, image_tokens
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
    ToolCallResult,
    ToolChoice,
    ToolDefinition,
)
from sidecar.core.kinds import Role
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.formats.carried import FEATURES, asked, refuse_uncarried
from sidecar.providers.formats.registry import FORMATS

LIMITS = Limits("vision", 3, 1000, 2000, ("image/png", "image/jpeg"), ("application/pdf", "text/plain"))


def png(width: int, height: int) -> bytes:
    """The header of a PNG of this size (what ``imagesize`` reads)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(ihdr)) + chunk + struct.pack(">I", zlib.crc32(chunk))


def request(*messages: Message, **controls: object) -> ModelRequest:
    tools = (ToolDefinition("search"),)
    return ModelRequest("vision", messages or (Message(Role.USER, "hi"),), tools=tools, controls=Controls(**controls))  # type: ignore[arg-type]


def refused(req: ModelRequest) -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        check_content(req, LIMITS)
    return caught.value


def test_text_and_parts_together_are_refused_naming_both() -> None:
    err = refused(request(Message(Role.USER, "hi", parts=(TextPart("hi"),))))
    assert err.detail.parameter == "messages[0].text"
    assert "sets both text and parts" in err.message


@pytest.mark.parametrize(
    ("part", "field", "words"),
    [
        (TextPart(""), "messages[0].parts[1].text", "must not be empty"),
        (ImagePart("image/png"), "messages[0].parts[1]", "exactly one of data and url"),
        (ImagePart("image/png", b"x", "https://x"), "messages[0].parts[1]", "exactly one of data and url"),
        (ImagePart("image/tiff", b"x"), "messages[0].parts[1].media_type", "image/png, image/jpeg"),
        (ImagePart("image/png", b"x" * 1001), "messages[0].parts[1].data", "at most 1000 bytes"),
        (ImagePart(url="ftp://x"), "messages[0].parts[1].url", "https, http or data:"),
        (DocumentPart(), "messages[0].parts[1]", "exactly one of data, url and text"),
        (DocumentPart("application/msword", b"x"), "messages[0].parts[1].media_type", "application/pdf"),
        (DocumentPart("application/pdf", text="x"), "messages[0].parts[1].media_type", "is text/plain"),
        (DocumentPart(data=b"x" * 2001), "messages[0].parts[1].data", "max_document_bytes"),
    ],
)
def test_a_bad_part_is_refused_naming_its_index_and_the_limit(part: object, field: str, words: str) -> None:
    err = refused(request(Message(Role.USER, parts=(TextPart("look"), part))))  # type: ignore[arg-type]
    assert err.detail.parameter == field
    assert words in err.message


def test_the_limits_name_the_models_configuration() -> None:
    err = refused(request(Message(Role.USER, parts=(ImagePart("image/png", b"x" * 1001),))))
    assert "models.vision.parts.max_image_bytes" in err.message
    image = ImagePart("image/png", png(10, 10))
    err = refused(request(Message(Role.USER, parts=(image,) * 4)))
    assert err.detail.parameter == "messages"
    assert "at most 3 (models.vision.parts)" in err.message


def test_a_tool_result_carries_text_and_images_not_documents() -> None:
    result = ToolCallResult("c1", "", parts=(TextPart("seen"), DocumentPart(text="x")))
    err = refused(request(Message(Role.TOOL, tool_results=(result,))))
    assert err.detail.parameter == "messages[0].tool_results[0].parts[1]"
    both = ToolCallResult("c1", "text", parts=(TextPart("seen"),))
    assert refused(request(Message(Role.TOOL, tool_results=(both,)))).detail.parameter == (
        "messages[0].tool_results[0].content"
    )


def test_reasoning_goes_back_on_assistant_messages_only() -> None:
    thought = ReasoningPart("thinking", "sig")
    err = refused(request(Message(Role.USER, "hi", reasoning=(thought,))))
    assert err.detail.parameter == "messages[0].reasoning"
    err = refused(request(Message(Role.ASSISTANT, "ok", reasoning=(ReasoningPart(),))))
    assert err.detail.parameter == "messages[0].reasoning[0]"
    check_content(request(Message(Role.USER, "hi"), Message(Role.ASSISTANT, "ok", reasoning=(thought,))), LIMITS)


@pytest.mark.parametrize(
    ("controls", "field"),
    [
        ({"reasoning": Reasoning(effort="max")}, "reasoning.effort"),
        ({"reasoning": Reasoning(budget_tokens=0)}, "reasoning.budget_tokens"),
        ({"tool_choice": ToolChoice("sometimes")}, "tool_choice.mode"),
        ({"tool_choice": ToolChoice("tool", "fetch")}, "tool_choice.name"),
        ({"tool_choice": ToolChoice("auto", "search")}, "tool_choice.name"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_k": 0}, "top_k"),
        ({"presence_penalty": -2.5}, "presence_penalty"),
        ({"frequency_penalty": 3.0}, "frequency_penalty"),
        ({"stop": ("\n", "")}, "stop[1]"),
        ({"system_cache": CacheBreakpoint()}, "system_cache"),
        ({"provider_options_json": "x" * (64 * 1024 + 1)}, "provider_options_json"),
    ],
)
def test_a_bad_control_is_refused_naming_it(controls: dict[str, object], field: str) -> None:
    assert refused(request(**controls)).detail.parameter == field


def test_a_required_tool_needs_tools() -> None:
    req = replace(request(tool_choice=ToolChoice("required")), tools=())
    assert refused(req).detail.parameter == "tool_choice.mode"


@pytest.mark.parametrize(
    ("width", "height", "detail", "tokens"),
    [
        (1024, 1024, "low", 1399),  # Anthropic's 1024*1024/750 is above OpenAI's 85
        (512, 512, "high", 350),  # Anthropic 350 (262144/750 = 349.5); OpenAI 85 + 170 = 255
        # Anthropic: scaled to 1568x784, 1639.08 -> 1640; OpenAI: 2048x1024 -> 1536x768, 6 tiles = 1105
        (4096, 2048, "high", 1640),
        (2048, 4096, "", 1640),
    ],
)
def test_an_image_costs_the_larger_of_the_two_published_rules(
    width: int, height: int, detail: str, tokens: int
) -> None:
    assert image_tokens(ImagePart("image/png", png(width, height), detail=detail)) == tokens


def test_an_image_whose_size_is_unknown_counts_as_the_largest() -> None:
    largest = image_tokens(ImagePart("image/png", png(1568, 1568)))
    assert image_tokens(ImagePart(url="https://example.com/cat.png")) == largest
    assert image_tokens(ImagePart("image/png", b"not an image")) == largest


def test_every_feature_a_request_asks_is_named_and_a_format_refuses_what_it_does_not_carry() -> None:
    image = ImagePart("image/png", png(8, 8), cache=CacheBreakpoint("1h"))
    req = replace(
        request(
            Message(
                Role.USER,
                parts=(
                    TextPart("a"),
                    image,
                    DocumentPart(text="doc"),
                    DocumentPart(data=b"%PDF"),
                    DocumentPart(url="https://x/a.pdf"),
                ),
            ),
            Message(Role.ASSISTANT, "ok", reasoning=(ReasoningPart("t", "s"),)),
            Message(
                Role.TOOL, tool_results=(ToolCallResult("c", "", parts=(TextPart("r"), ImagePart(url="https://x"))),)
            ),
            reasoning=Reasoning(effort="low"),
            tool_choice=ToolChoice("required"),
            parallel_tool_calls=False,
            stop=("\n",),
            top_p=0.5,
            top_k=3,
            seed=7,
            presence_penalty=0.1,
            frequency_penalty=0.2,
            end_user="u-1",
            system_cache=CacheBreakpoint(),
            provider_options_json='{"anthropic": {}}',
        ),
        tools=(ToolDefinition("search", cache=CacheBreakpoint(), strict=True),),
    )
    assert {feature for feature, _ in asked(req)} == set(FEATURES)
    with pytest.raises(InvalidInput) as caught:
        refuse_uncarried(req, frozenset({"parts.text"}), "openai", "gpt")
    assert caught.value.detail.parameter == "messages[0].parts[1]"
    assert "model gpt speaks the openai wire format, which does not carry parts.image" in caught.value.message
    refuse_uncarried(req, frozenset(FEATURES), "openai", "gpt")


def test_reasoning_another_format_made_is_dropped_with_a_warning_and_its_own_kept() -> None:
    from sidecar.providers.fitting import own_reasoning

    theirs, mine, unmarked = (
        ReasoningPart("t", "s", format="openai"),
        ReasoningPart("u", "v", format="anthropic"),
        (ReasoningPart("w", "x")),
    )
    req = request(Message(Role.USER, "hi"), Message(Role.ASSISTANT, "ok", reasoning=(theirs, mine, unmarked)))
    kept, warning = own_reasoning(req, "anthropic")
    assert kept.messages[1].reasoning == (mine, unmarked)
    assert warning.startswith("reasoning dropped: 1 by the openai format; model vision speaks anthropic")
    assert own_reasoning(kept, "anthropic") == (kept, "")


@pytest.mark.parametrize(
    ("raw", "field", "words"),
    [
        ('{"opneai": {}}', "provider_options_json.opneai", f"must name a wire format: {', '.join(sorted(FORMATS))}"),
        ('{"openai": 3}', "provider_options_json.openai", "must be a JSON object"),
        ("[1]", "provider_options_json", "one object per wire format"),
        ("{", "provider_options_json", "one object per wire format"),
    ],
)
def test_provider_options_name_registered_formats_each_an_object(raw: str, field: str, words: str) -> None:
    from sidecar.providers.formats.registry import check_options

    with pytest.raises(InvalidInput) as caught:
        check_options(raw)
    assert caught.value.detail.parameter == field
    assert words in caught.value.message
    check_options('{"openai": {"logit_bias": {}}, "anthropic": {}}')
