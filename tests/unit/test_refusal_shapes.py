"""Each format's content-policy refusals as providers send them: PROVIDER_REFUSAL with the category.

``Upstream.classify`` looks for the format's refusal before anything else, whatever the status (a
stream's error event is classified as a 500): never a Retry, never INVALID_INPUT. A reply or a
streamed chunk that finishes ``content_filter`` carries Azure's filter categories to the call.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from sidecar.core.details import RefusalDetail
from sidecar.core.kinds import FailureKind, FinishReason
from sidecar.core.retry import Retry
from sidecar.core.taxonomy import SidecarFailure
from sidecar.providers.errors import Target
from sidecar.providers.formats.anthropic_messages.upstream import AnthropicStream, AnthropicUpstream
from sidecar.providers.formats.openai_chat.upstream import OpenAIStream, OpenAIUpstream
from sidecar.providers.formats.openai_chat.vocab import error_refusal, filtered_categories

NOW = datetime(2026, 1, 1, tzinfo=UTC)
TARGET = Target("azure-east", "acct", "gpt", "gpt-4o", "https://east.example/openai/v1/chat/completions")
KEY = "sk-live-ABCDEFGHIJKLMNOP1234"


def azure_error(categories: dict[str, bool], code: str = "content_filter", **extra: Any) -> str:
    result: dict[str, Any] = {
        name: {"filtered": hit, "severity": "high" if hit else "safe"} for name, hit in categories.items()
    }
    inner = {"code": "ResponsibleAIPolicyViolation", "content_filter_result": result}
    error = {
        "message": "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.",
        "type": None,
        "param": "prompt",
        "code": code,
        "status": 400,
        "innererror": inner,
        **extra,
    }
    return json.dumps({"error": error})


def openai_error(message: str, code: str | None, type_: str = "invalid_request_error") -> str:
    return json.dumps({"error": {"message": message, "type": type_, "param": None, "code": code}})


POLICY = openai_error(
    "Your request was rejected as a result of our safety system. Your prompt may contain text that is not allowed.",
    "content_policy_violation",
)
FLAGGED = openai_error(
    "Invalid prompt: your prompt was flagged as potentially violating our usage policy. Please try again with a "
    "different prompt.",
    "invalid_prompt",
)


def classify(upstream: Any, status: int, body: str) -> Retry | SidecarFailure:
    return upstream.classify(status, {"retry-after": "3"}, body, TARGET, (KEY,), NOW)


def refusal(upstream: Any, status: int, body: str) -> RefusalDetail:
    got = classify(upstream, status, body)
    assert isinstance(got, SidecarFailure), f"expected a refusal, got {got!r}"
    assert got.kind is FailureKind.PROVIDER_REFUSAL
    assert not got.correctable
    assert got.http is not None
    assert got.http.status_code == status
    assert isinstance(got.detail, RefusalDetail)
    return got.detail


@pytest.mark.parametrize("status", [400, 500])  # 500: how a stream's error event is classified
@pytest.mark.parametrize(
    ("body", "category", "said"),
    [
        (POLICY, "content_policy_violation", "rejected as a result of our safety system"),
        (FLAGGED, "invalid_prompt", "flagged as potentially violating our usage policy"),
        (azure_error({"hate": True, "self_harm": False, "sexual": False, "violence": False}), "hate", "Azure OpenAI"),
        (azure_error({"hate": False, "sexual": True, "violence": True}), "sexual,violence", "content management"),
        (azure_error({"hate": False}), "content_filter", "Azure"),  # no category marked: the code
        (azure_error({"jailbreak": True}, code="400"), "jailbreak", "Azure"),  # the inner code alone says so
    ],
)
def test_openai_and_azure_refusals_are_provider_refusal_with_the_category(
    status: int, body: str, category: str, said: str
) -> None:
    detail = refusal(OpenAIUpstream(), status, body)
    assert detail.category == category
    assert detail.categories == tuple(category.split(","))
    assert said in detail.explanation
    assert detail.model == "gpt"


@pytest.mark.parametrize("status", [400, 500])
def test_anthropics_content_filter_is_provider_refusal(status: int) -> None:
    body = json.dumps(
        {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "Output blocked by content filtering policy"},
        }
    )
    detail = refusal(AnthropicUpstream(), status, body)
    assert detail.category == "content_filter"
    assert detail.explanation == "Output blocked by content filtering policy"


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (
            400,
            openai_error("Invalid prompt: the messages array is empty.", "invalid_prompt"),
            FailureKind.INVALID_INPUT,
        ),
        (400, openai_error("content_filter is not a parameter", None), FailureKind.INVALID_INPUT),
        (400, json.dumps({"error": {"code": ["content_filter"]}}), FailureKind.INVALID_INPUT),
        (400, "content_policy_violation", FailureKind.INVALID_INPUT),  # not JSON: no refusal is read into it
    ],
)
def test_other_errors_are_not_refusals(status: int, body: str, kind: FailureKind) -> None:
    got = classify(OpenAIUpstream(), status, body)
    assert isinstance(got, SidecarFailure)
    assert got.kind is kind


def test_a_server_error_is_still_retried() -> None:
    assert isinstance(classify(OpenAIUpstream(), 500, openai_error("The server had an error", None)), Retry)
    assert isinstance(classify(AnthropicUpstream(), 529, json.dumps({"error": {"type": "overloaded_error"}})), Retry)


def test_a_secret_in_the_refusals_words_is_masked() -> None:
    body = openai_error(f"rejected by our safety system (key {KEY})", "content_policy_violation")
    got = classify(OpenAIUpstream(), 400, body)
    assert KEY not in got.message
    assert isinstance(got, SidecarFailure)
    assert got.http is not None
    assert KEY not in got.http.body
    assert KEY not in str(got.detail)


@pytest.mark.parametrize("body", ["", "null", "[]", '{"error": "content_filter"}', '{"error": {"innererror": 3}}'])
def test_an_error_body_of_any_shape_is_read_without_a_crash(body: str) -> None:
    assert error_refusal(body) is None


def test_filtered_categories_reads_each_once_in_order() -> None:
    results = {"hate": {"filtered": True}, "sexual": {"filtered": False}, "violence": {"filtered": True}, "x": 3}
    prompt = [
        {
            "prompt_index": 0,
            "content_filter_results": {
                "violence": {"filtered": True},
                "jailbreak": {"filtered": True, "detected": True},
            },
        }
    ]
    assert filtered_categories(results, prompt, None, "text") == ["hate", "violence", "jailbreak"]


def _choice(delta: dict[str, Any], finish: str | None = None, results: dict[str, Any] | None = None) -> str:
    choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
    if results is not None:
        choice["content_filter_results"] = results
    return json.dumps({"id": "c1", "model": "gpt-4o", "choices": [choice]})


def test_a_reply_that_finishes_content_filter_carries_azures_categories() -> None:
    body = {
        "id": "c1",
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "It"},
                "finish_reason": "content_filter",
                "content_filter_results": {"hate": {"filtered": False}, "violence": {"filtered": True}},
            }
        ],
        "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {"hate": {"filtered": False}}}],
    }
    reply = OpenAIUpstream().parse(body)
    assert reply.finish is FinishReason.CONTENT_FILTER
    assert reply.refusal_category == "violence"


def test_a_stream_that_finishes_content_filter_carries_azures_categories() -> None:
    stream = OpenAIStream()
    safe = {"hate": {"filtered": False, "severity": "safe"}, "violence": {"filtered": False, "severity": "safe"}}
    stream.feed("", json.dumps({"choices": [], "prompt_filter_results": [{"content_filter_results": safe}]}))
    stream.feed("", _choice({"role": "assistant", "content": ""}))
    stream.feed("", _choice({"content": "Once"}, results=safe))
    stream.feed("", _choice({}, "content_filter", {**safe, "self_harm": {"filtered": True, "severity": "medium"}}))
    stream.feed("", "[DONE]")
    reply = stream.reply()
    assert reply is not None
    assert reply.finish is FinishReason.CONTENT_FILTER
    assert reply.text == "Once"
    assert reply.refusal_category == "self_harm"


def test_an_anthropic_refusal_names_no_category_of_its_own() -> None:
    stream = AnthropicStream()
    stream.feed(
        "message_start",
        json.dumps({"type": "message_start", "message": {"id": "m", "model": "c", "usage": {"input_tokens": 1}}}),
    )
    stream.feed(
        "message_delta",
        json.dumps({"type": "message_delta", "delta": {"stop_reason": "refusal"}, "usage": {"output_tokens": 1}}),
    )
    stream.feed("message_stop", json.dumps({"type": "message_stop"}))
    reply = stream.reply()
    assert reply is not None
    assert reply.refusal is not None
    assert reply.refusal_category == ""  # the call names it "refusal"
