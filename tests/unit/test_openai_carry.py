"""What the OpenAI Chat Completions format carries of issue 21, rule by rule (``formats/openai_chat``).

``test_formats.py`` round-trips every shape the format carries; here is what a round trip cannot say:
the body's exact shape (parts, the tool-result image rule, the reasoning levels, provider options),
what ``check`` refuses before sending and why, what the front refuses by name, and the usage both
halves read and write.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

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
)
from sidecar.core.kinds import FinishReason, Role
from sidecar.core.stream import ReasoningDelta
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.formats.chat import ChatReply
from sidecar.providers.formats.inline import data_url
from sidecar.providers.formats.openai_chat import FORMAT
from sidecar.providers.formats.openai_chat.front import parse_request
from sidecar.providers.formats.openai_chat.upstream import OpenAIUpstream
from sidecar.providers.formats.openai_chat.vocab import (
    DEFAULT_FILENAME,
    TOOL_ERROR_PREFIX,
    tool_image_label,
    tool_image_placeholder,
)
from sidecar.providers.formats.protocol import ReplyHead
from tests.unit.shapes import ASKED, CALL, PNG, SHAPES, WEATHER, as_sent, chat

UP = OpenAIUpstream()
HEAD = ReplyHead("chatcmpl-1", "gpt", 1_700_000_000)


def body_of(request: ModelRequest) -> dict[str, Any]:
    return UP.body(chat(request))


def asking(*parts: Any, **controls: Any) -> ModelRequest:
    return ModelRequest("m", (Message(Role.USER, parts=parts) if parts else ASKED,), controls=Controls(**controls))


def refusal(request: ModelRequest) -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        UP.check(request, "gpt")
    return caught.value


def refused_at(body: dict[str, Any]) -> str:
    with pytest.raises(InvalidInput) as caught:
        FORMAT.front.parse(body)
    return caught.value.detail.parameter  # type: ignore[union-attr]


def request(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "gpt", "messages": list(messages or [{"role": "user", "content": "hi"}]), **extra}


# ---------------------------------------------------------------------------- the body


def test_parts_are_content_parts_images_as_data_urls_and_pdfs_as_files() -> None:
    sent = body_of(
        asking(
            TextPart("Look:"),
            ImagePart("image/png", PNG, detail="low"),
            ImagePart(url="https://example.com/cat.png"),
            DocumentPart("application/pdf", b"%PDF-1.7", title="Report.pdf"),
            DocumentPart("application/pdf", b"%PDF-1.7"),
        )
    )
    assert sent["messages"][0]["content"] == [
        {"type": "text", "text": "Look:"},
        {"type": "image_url", "image_url": {"url": data_url("image/png", PNG), "detail": "low"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
        {"type": "file", "file": {"filename": "Report.pdf", "file_data": data_url("application/pdf", b"%PDF-1.7")}},
        {"type": "file", "file": {"filename": DEFAULT_FILENAME, "file_data": data_url("application/pdf", b"%PDF-1.7")}},
    ]


def test_a_pdf_reads_back_with_its_title_as_the_filename() -> None:
    original = as_sent(asking(DocumentPart("application/pdf", b"%PDF-1.7", title="Report"), TextPart("Sum up.")))
    assert FORMAT.front.parse(body_of(original)).request == original
    assert "parts.document" in OpenAIUpstream.carries
    assert "parts.document_url" not in OpenAIUpstream.carries
    UP.check(original, "gpt")


def test_a_tool_results_images_go_to_one_user_message_after_the_turn_where_placeholders_mark_them() -> None:
    messages = body_of(SHAPES["tool results with images between their text"])["messages"]
    png = {"type": "image_url", "image_url": {"url": data_url("image/png", PNG)}}
    radar = {"type": "image_url", "image_url": {"url": "https://example.com/radar.png", "detail": "low"}}
    text = [{"type": "text", "text": t} for t in (tool_image_placeholder(1), "Paris", tool_image_placeholder(2))]
    assert messages[2:] == [
        {"role": "tool", "tool_call_id": "call_1", "content": text},
        {"role": "tool", "tool_call_id": "call_2", "content": "21 C"},
        {"role": "tool", "tool_call_id": "call_3", "content": [{"type": "text", "text": "Nice:"},
                                                               {"type": "text", "text": tool_image_placeholder(3)}]},
        {"role": "user", "content": [
            {"type": "text", "text": tool_image_label(1, "call_1")}, png,
            {"type": "text", "text": tool_image_label(2, "call_1")}, radar,
            {"type": "text", "text": tool_image_label(3, "call_3")}, png,
        ]},
        {"role": "user", "content": "And tomorrow?"},
    ]  # fmt: skip


def test_an_error_result_given_as_parts_is_marked_before_its_first_text() -> None:
    (tool, _) = body_of(SHAPES["a tool result that is an error with an image"])["messages"][2:]
    assert tool["content"] == [
        {"type": "text", "text": TOOL_ERROR_PREFIX},
        {"type": "text", "text": tool_image_placeholder(1)},
        {"type": "text", "text": "failed"},
    ]
    texted = SHAPES["a tool result with an image"]
    result = replace(texted.messages[2].tool_results[0], is_error=True)
    errored = replace(texted, messages=(*texted.messages[:2], Message(Role.TOOL, tool_results=(result,))))
    assert body_of(errored)["messages"][2]["content"][0] == {"type": "text", "text": TOOL_ERROR_PREFIX + "The map:"}
    assert FORMAT.front.parse(body_of(errored)).request == as_sent(errored)


def test_placeholders_without_the_user_message_of_their_images_are_text_and_a_user_message_stays_one() -> None:
    tool = {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": tool_image_placeholder(1)}]}
    asked = {"role": "user", "content": [{"type": "text", "text": "What now?"}, {"type": "image_url", "image_url":
             {"url": "https://example.com/a.png"}}]}  # fmt: skip
    read = parse_request(request({"role": "user", "content": "hi"}, tool, asked)).messages
    assert read[1].tool_results[0].parts == (TextPart(tool_image_placeholder(1)),)
    assert read[2] == Message(Role.USER, parts=(TextPart("What now?"), ImagePart(url="https://example.com/a.png")))


@pytest.mark.parametrize(
    ("amount", "effort"),
    [(Reasoning("high"), "high"), (Reasoning("minimal"), "minimal"), (Reasoning(budget_tokens=500), "minimal"),
     (Reasoning(budget_tokens=1024), "low"), (Reasoning(budget_tokens=4095), "low"),
     (Reasoning(budget_tokens=4096), "medium"), (Reasoning(budget_tokens=16384), "high")],
)  # fmt: skip
def test_reasoning_is_reasoning_effort_a_budget_by_its_level_with_max_completion_tokens(
    amount: Reasoning, effort: str
) -> None:
    sent = body_of(asking(reasoning=amount))
    assert sent["reasoning_effort"] == effort
    assert "max_tokens" not in sent
    assert sent["max_completion_tokens"] == 1024  # reasoning models refuse max_tokens


def test_the_controls_are_their_openai_keys() -> None:
    controls = Controls(tool_choice=ToolChoice("tool", "weather"), parallel_tool_calls=False, stop=("END",),
                        top_p=0.5, seed=3, presence_penalty=1.0, frequency_penalty=-1.0, end_user="u-1")  # fmt: skip
    sent = body_of(ModelRequest("m", (ASKED,), tools=(WEATHER,), controls=controls))
    assert {k: sent[k] for k in sent if k not in ("model", "messages", "tools", "max_tokens")} == {
        "tool_choice": {"type": "function", "function": {"name": "weather"}},
        "parallel_tool_calls": False,
        "stop": ["END"],
        "top_p": 0.5,
        "seed": 3,
        "presence_penalty": 1.0,
        "frequency_penalty": -1.0,
        "user": "u-1",
    }


def test_provider_options_of_the_format_are_merged_and_of_another_format_left_to_it() -> None:
    options = json.dumps({"openai": {"service_tier": "flex", "metadata": {"run": "7"}}, "anthropic": {"x": 1}})
    sent = body_of(asking(provider_options_json=options))
    assert (sent["service_tier"], sent["metadata"]) == ("flex", {"run": "7"})
    assert "x" not in sent
    UP.check(asking(provider_options_json=options), "gpt")


# ---------------------------------------------------------------------------- check


@pytest.mark.parametrize(
    ("req", "field", "words"),
    [
        (asking(TextPart("hi", CacheBreakpoint())), "messages[0].parts[0].cache", "caches a prompt of 1,024 tokens"),
        (replace(asking(system_cache=CacheBreakpoint()), system="S"), "system_cache", "cache_control"),
        (replace(asking(), tools=(replace(WEATHER, cache=CacheBreakpoint("1h")),)), "tools[0].cache", "by itself"),
        (asking(top_k=5), "top_k", "has no top_k"),
        (asking(DocumentPart(url="https://example.com/a.pdf")), "messages[0].parts[0]",
         "does not carry parts.document_url"),
        (asking(DocumentPart("text/plain", text="notes")), "messages[0].parts[0]", "a PDF only"),
        (ModelRequest("m", (ASKED, Message(Role.ASSISTANT, "Hi.", reasoning=(ReasoningPart("t", "s"),)))),
         "messages[1].reasoning", "takes no reasoning back"),
    ],
)  # fmt: skip
def test_what_chat_completions_has_no_field_for_is_refused_saying_why(
    req: ModelRequest, field: str, words: str
) -> None:
    failure = refusal(req)
    assert failure.detail.parameter == field  # type: ignore[union-attr]
    assert "model gpt speaks the openai wire format, which does not carry" in failure.message
    assert words in failure.message


@pytest.mark.parametrize(
    ("req", "field", "words"),
    [
        (asking(stop=("a", "b", "c", "d", "e")), "stop", "at most 4 stop sequences"),
        (asking(tool_choice=ToolChoice("none")), "tool_choice", "only with tools"),
        (asking(parallel_tool_calls=True), "parallel_tool_calls", "only with tools"),
        (replace(asking(reasoning=Reasoning("low")), temperature=0.3), "temperature", "default temperature (1)"),
        (ModelRequest("m", (ASKED, Message(Role.ASSISTANT, parts=(ImagePart("image/png", PNG),)))),
         "messages[1].parts[0]", "in user messages only"),
        (asking(provider_options_json="[1]"), "provider_options_json", "one object per wire format"),
        (asking(provider_options_json='{"openai": 3}'), "provider_options_json.openai", "a JSON object"),
        (asking(provider_options_json='{"openai": {"messages": []}}'), "provider_options_json.openai.messages",
         "the sidecar sets itself"),
        (asking(provider_options_json='{"openai": {"stop": ["x"]}}'), "provider_options_json.openai.stop",
         "the request's own field"),
        (asking(provider_options_json='{"openai": {"n": 2}}'), "provider_options_json.openai.n", "one choice"),
    ],
)  # fmt: skip
def test_openais_rules_are_refused_before_sending_naming_the_rule(req: ModelRequest, field: str, words: str) -> None:
    failure = refusal(req)
    assert failure.detail.parameter == field  # type: ignore[union-attr]
    assert words in failure.message


def test_what_it_carries_passes_the_check() -> None:
    UP.check(replace(asking(reasoning=Reasoning("high")), temperature=1.0), "gpt")
    UP.check(asking(stop=("a", "b", "c", "d")), "gpt")
    UP.check(SHAPES["tool results with images between their text"], "gpt")


# ---------------------------------------------------------------------------- the front


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (request(n=2), "n"),
        (request({"role": "system", "content": "be brief", "name": "ops"}), "messages[0].name"),
        (request({"role": "developer", "content": [{"type": "text", "text": "x", "cache_control": {}}]}),
         "messages[0].content[0].cache_control"),
        (request({"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}),
         "messages[0].content[0].type"),
        (request({"role": "user", "content": [{"type": "file", "file": {"file_id": "file-abc"}}]}),
         "messages[0].content[0].file.file_id"),
        (request({"role": "user", "content": [{"type": "file", "file": {"file_data": "JVBER"}}]}),
         "messages[0].content[0].file.file_data"),
        (request({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png,xx"}}]}),
         "messages[0].content[0].image_url.url"),
        (request({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://a/b.png",
                                                                                  "detail": "max"}}]}),
         "messages[0].content[0].image_url.detail"),
        (request({"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": "https://a"}}]}),
         "messages[0].content[0].type"),
        (request(reasoning_effort="extreme"), "reasoning_effort"),
        (request(tool_choice="required"), "tool_choice"),
        (request(tool_choice={"type": "allowed_tools"}, tools=[{"type": "function", "function": {"name": "f"}}]),
         "tool_choice.type"),
        (request(parallel_tool_calls=True), "parallel_tool_calls"),
        (request(stop=3), "stop"),
        (request(tools=[{"type": "function", "function": {"name": "f", "strict": "yes"}}]), "tools[0].function.strict"),
        (request(response_format={"type": "json_schema", "json_schema": {"schema": {}, "strict": 1}}),
         "response_format.json_schema.strict"),
        (request(response_format={"type": "json_schema", "json_schema": {"schema": {}, "bogus": 1}}),
         "response_format.json_schema.bogus"),
    ],
)  # fmt: skip
def test_what_the_front_does_not_carry_is_refused_naming_it(body: dict[str, Any], param: str) -> None:
    assert refused_at(body) == param


def test_the_front_reads_what_sdks_send() -> None:
    pdf = data_url("application/pdf", b"%PDF")
    notes = data_url("text/plain", "Notes ✓".encode())
    read = FORMAT.front.parse(
        request(
            {"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": data_url("image/jpeg", b"\xff\xd8"), "detail": "auto"}},
                {"type": "file", "file": {"file_data": pdf, "filename": "a.pdf"}},
                {"type": "file", "file": {"file_data": notes}},
            ]},
            {"role": "assistant", "content": None, "refusal": "I can't.", "annotations": [], "audio": None},
            {"role": "user", "content": "fine"},
            stop="\n", user="u-9", reasoning_effort="low", seed=5, logprobs=None, metadata=None,
            stream=True, stream_options={"include_usage": True},
        )
    ).request  # fmt: skip
    assert read.messages[0].parts == (
        ImagePart("image/jpeg", b"\xff\xd8", detail="auto"),
        DocumentPart("application/pdf", b"%PDF", title="a.pdf"),
        DocumentPart("text/plain", text="Notes ✓"),
    )
    assert read.messages[1] == Message(Role.ASSISTANT, "I can't.")  # the refusal's words, as its text
    assert read.controls == Controls(reasoning=Reasoning("low"), stop=("\n",), seed=5, end_user="u-9")


# ---------------------------------------------------------------------------- usage, reasoning


def test_cached_and_reasoning_tokens_are_read_and_rendered_whole_and_streamed() -> None:
    reply = ChatReply("Hi", finish=FinishReason.STOP, input_tokens=2000, output_tokens=300,
                      cache_read_input_tokens=1536, reasoning_tokens=256)  # fmt: skip
    rendered = FORMAT.front.render(reply, HEAD)
    assert rendered["usage"]["prompt_tokens_details"] == {"cached_tokens": 1536}
    assert rendered["usage"]["completion_tokens_details"] == {"reasoning_tokens": 256}
    assert UP.parse(rendered).usage == reply.usage
    writer = FORMAT.front.writer(HEAD, include_usage=True)
    events = [*writer.start(), *writer.delta(ReasoningDelta(0, "thinking")), *writer.final(reply)]
    decoder = UP.stream_decoder()
    for _, data in events:
        decoder.feed("", data if isinstance(data, str) else json.dumps(data))
    streamed = decoder.reply()
    assert streamed is not None
    assert streamed.usage == reply.usage


def test_a_reasoning_delta_writes_nothing_as_chat_completions_has_no_field_for_it() -> None:
    assert FORMAT.front.writer(HEAD).delta(ReasoningDelta(0, "thinking", "sig")) == []


def test_a_reply_without_details_has_no_cached_or_reasoning_tokens() -> None:
    got = UP.parse({"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "prompt_tokens_details": None}})  # fmt: skip
    assert (got.cache_read_input_tokens, got.reasoning_tokens, got.input_tokens) == (0, 0, 3)


def test_tool_results_given_as_parts_read_back_from_a_request_of_any_client() -> None:
    read = parse_request(
        request(
            {"role": "user", "content": "hi"},
            {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": CALL_FUNCTION}]},
            {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "18 C"}]},
        )
    )
    assert read.messages[2].tool_results == (ToolCallResult("call_1", "", False, "weather", (TextPart("18 C"),)),)


CALL_FUNCTION = {"name": CALL.name, "arguments": CALL.arguments_json}
