"""sidecar.providers.errors.classify_response: every row of its order, in both wire formats."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidecar.core.details import ProviderDetail, ResourceDetail
from sidecar.core.kinds import FailureKind, RetrySignal
from sidecar.core.redact import REDACTED
from sidecar.core.retry import Retry
from sidecar.core.taxonomy import InvalidInput, SidecarFailure
from sidecar.providers.errors import Target, classify_response
from tests.unit.profile import PROPERTY

NOW = datetime(2026, 1, 1, tzinfo=UTC)
TARGET = Target("oai", "acct-main", "gpt", "gpt-4o", "https://api.example/v1/chat/completions")
KEY = "sk-live-ABCDEFGHIJKLMNOP1234"
CONFIGURED = "Zq9-configured-secret"
SECRETS = (KEY, CONFIGURED)


def openai(message: str, type_: str = "invalid_request_error", code: str | None = None) -> str:
    return json.dumps({"error": {"message": message, "type": type_, "param": None, "code": code}})


def anthropic(message: str, type_: str = "invalid_request_error") -> str:
    return json.dumps({"type": "error", "error": {"type": type_, "message": message}})


def outcome(status: int, body: str, headers: dict[str, str] | None = None) -> Retry | SidecarFailure:
    return classify_response(status, headers or {}, body, TARGET, SECRETS, NOW)


def retried(status: int, body: str, headers: dict[str, str] | None = None) -> Retry:
    got = outcome(status, body, headers)
    assert isinstance(got, Retry), f"expected a retry signal, got {got!r}"
    return got


def failed(status: int, body: str, headers: dict[str, str] | None = None) -> SidecarFailure:
    got = outcome(status, body, headers)
    assert isinstance(got, SidecarFailure), f"expected a failure, got {got!r}"
    return got


# ---------------------------------------------------------------- 1. quota, before anything else


@pytest.mark.parametrize(
    ("status", "body", "said"),
    [
        (402, openai("Payment required", "billing_error"), "Payment required"),
        (402, anthropic("Payment required", "billing_error"), "Payment required"),
        (402, "", "HTTP 402"),
        (  # OpenAI: quota comes as a 429, and is no rate limit
            429,
            openai(
                "You exceeded your current quota, please check your plan", "insufficient_quota", "insufficient_quota"
            ),
            "You exceeded your current quota, please check your plan",
        ),
        (  # Anthropic: quota comes as a 400
            400,
            anthropic("Your credit balance is too low to access the Anthropic API."),
            "Your credit balance is too low to access the Anthropic API.",
        ),
        (400, openai("billing_hard_limit_reached", "invalid_request_error", "billing_hard_limit_reached"), None),
        (503, openai("insufficient_quota"), None),  # even before a 5xx
        (529, anthropic("credit balance is too low", "overloaded_error"), None),  # and before an overload
    ],
)
def test_quota_comes_before_every_other_row(status: int, body: str, said: str | None) -> None:
    failure = failed(status, body, {"retry-after": "3", "x-should-retry": "true"})
    assert failure.kind is FailureKind.QUOTA_EXHAUSTED
    assert isinstance(failure.detail, ProviderDetail)
    assert failure.detail.account == "acct-main"
    if said is not None:
        assert failure.message == (
            f"The oai account (account acct-main) is out of quota for model gpt: {said.rstrip('.')}. "
            "Waiting will not help; fund the account or raise its spend budget."
        )


# ---------------------------------------------------------------- 2. overload: 529, or overloaded_error anywhere


@pytest.mark.parametrize(
    ("status", "body", "detail"),
    [
        (529, anthropic("Overloaded", "overloaded_error"), "Overloaded"),
        (529, "", "HTTP 529"),
        (529, openai("busy", "server_error"), "busy"),  # 529 whatever the body says
        (200, anthropic("Overloaded", "overloaded_error"), "Overloaded"),  # inside a 200
        (500, anthropic("Overloaded", "overloaded_error"), "Overloaded"),
        (429, anthropic("Overloaded", "overloaded_error"), "Overloaded"),  # before the 429 row
        (400, openai("Overloaded", "server_error", "overloaded_error"), "Overloaded"),  # as the code
        (503, "event: error\ndata: overloaded_error", "event: error data: overloaded_error"),  # not JSON
    ],
)
def test_529_or_overloaded_error_in_any_status_is_overload(status: int, body: str, detail: str) -> None:
    signal = retried(status, body, {"retry-after": "4"})
    assert signal.signal is RetrySignal.OVERLOAD
    assert signal.detail == detail
    assert signal.retry_after == 4.0
    assert signal.http is not None
    assert signal.http.status_code == status


def test_overloaded_error_in_a_message_of_another_type_is_no_overload() -> None:
    assert failed(400, anthropic("do not send overloaded_error here")).kind is FailureKind.INVALID_INPUT


# ---------------------------------------------------------------- 3. 429: rate limit, Retry-After read and kept


@pytest.mark.parametrize(
    "body",
    [
        openai("Rate limit reached for requests", "requests", "rate_limit_exceeded"),
        anthropic("slow", "rate_limit_error"),
    ],
)
def test_429_is_rate_limit_with_retry_after_read_and_kept_raw(body: str) -> None:
    signal = retried(429, body, {"Retry-After": "7", "retry-after-ms": "6500"})
    assert signal.signal is RetrySignal.RATE_LIMIT
    assert signal.retry_after == 6.5  # retry-after-ms first
    assert signal.http is not None
    assert signal.http.retry_after_raw == "7"


def test_429_without_a_usable_retry_after_asks_no_wait() -> None:
    signal = retried(429, "", {"retry-after": "later"})
    assert signal.retry_after is None
    assert signal.detail == "HTTP 429"
    assert signal.http is not None
    assert signal.http.retry_after_raw == "later"


def test_429_even_with_x_should_retry_false_is_a_rate_limit() -> None:
    assert retried(429, "", {"x-should-retry": "false"}).signal is RetrySignal.RATE_LIMIT


# ---------------------------------------------------------------- 4-5. x-should-retry, 408, 5xx


@pytest.mark.parametrize("status", [400, 401, 404, 409, 422])
def test_x_should_retry_true_overrides_the_status(status: int) -> None:
    signal = retried(status, openai("try again"), {"X-Should-Retry": " True "})
    assert signal.signal is RetrySignal.TRANSIENT
    assert signal.detail == "try again"


@pytest.mark.parametrize("status", [408, 500, 502, 503, 504, 599])
def test_408_and_5xx_are_transient(status: int) -> None:
    signal = retried(status, "<html>bad gateway</html>")
    assert signal.signal is RetrySignal.TRANSIENT
    assert signal.detail == "<html>bad gateway</html>"
    assert signal.retry_after is None


def test_a_5xx_with_x_should_retry_false_is_external_service() -> None:
    failure = failed(500, anthropic("internal", "api_error"), {"x-should-retry": "false"})
    assert failure.kind is FailureKind.EXTERNAL_SERVICE
    assert (
        failure.message
        == "The oai service failed at https://api.example/v1/chat/completions: it answered HTTP 500: internal."
    )


# ---------------------------------------------------------------- 6. 401 / 403


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (
            401,
            openai(f"Incorrect API key provided: {KEY}", "invalid_request_error", "invalid_api_key"),
            "HTTP 401 invalid_request_error",
        ),
        (401, openai("bad key", "", "invalid_api_key"), "HTTP 401 invalid_api_key"),
        (401, anthropic(f"invalid x-api-key {CONFIGURED}", "authentication_error"), "HTTP 401 authentication_error"),
        (403, anthropic("no access", "permission_error"), "HTTP 403 permission_error"),
        (403, "Forbidden", "HTTP 403"),
    ],
)
def test_401_403_are_unauthorized_with_the_body_blanked(status: int, body: str, reason: str) -> None:
    failure = failed(status, body)
    assert failure.kind is FailureKind.UNAUTHORIZED
    assert failure.message == (
        f"The oai service rejected the sidecar's credentials at https://api.example/v1/chat/completions: {reason}. "
        "An operator must fix the configured key."
    )
    assert failure.http is not None
    assert failure.http.body == ""
    assert failure.detail == ProviderDetail(provider="oai", account="acct-main", model="gpt")


# ---------------------------------------------------------------- 7. context overflow


@pytest.mark.parametrize(
    ("status", "body", "said"),
    [
        (
            400,
            openai(
                "This model's maximum context length is 8192 tokens.",
                "invalid_request_error",
                "context_length_exceeded",
            ),
            "This model's maximum context length is 8192 tokens",
        ),
        (400, openai("too long", "invalid_request_error", "context_length_exceeded"), "too long"),  # by the code alone
        (
            400,
            anthropic("prompt is too long: 200001 tokens > 200000 maximum"),
            "prompt is too long: 200001 tokens > 200000 maximum",
        ),
        (400, anthropic("input is too long for the context window"), "input is too long for the context window"),
        (400, openai("Too many tokens in the request"), "Too many tokens in the request"),
        (413, anthropic("Request exceeds the maximum size", "request_too_large"), "Request exceeds the maximum size"),
        (413, "", "HTTP 413"),
        (422, "the maximum context length was exceeded", "the maximum context length was exceeded"),  # not JSON
    ],
)
def test_context_phrases_and_413_are_context_overflow(status: int, body: str, said: str) -> None:
    failure = failed(status, body)
    assert failure.kind is FailureKind.CONTEXT_OVERFLOW
    assert failure.message == f"The oai provider says the conversation is too long for model gpt: {said}."


def test_a_context_phrase_in_a_429_or_5xx_is_still_retried() -> None:
    assert retried(429, openai("too many tokens per minute")).signal is RetrySignal.RATE_LIMIT
    assert retried(503, openai("context window warming up")).signal is RetrySignal.TRANSIENT


# ---------------------------------------------------------------- 8. 404: the model, at the provider


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (
            openai("The model `gpt-4o` does not exist", "invalid_request_error", "model_not_found"),
            "The model `gpt-4o` does not exist",
        ),
        (anthropic("model: gpt-4o", "not_found_error"), "model: gpt-4o"),
        ("", "HTTP 404"),
    ],
)
def test_404_is_model_not_found_at_the_provider(body: str, said: str) -> None:
    failure = failed(404, body)
    assert failure.kind is FailureKind.MODEL_NOT_FOUND
    assert failure.message == (
        f"The oai provider does not serve model 'gpt-4o' (catalog id 'gpt'): {said}. "
        "Fix the catalog entry or choose another model."
    )
    assert failure.detail == ResourceDetail(resource_type="model", identifier="gpt", available=())
    assert failure.http is not None
    assert failure.http.status_code == 404


# ---------------------------------------------------------------- 9-10. other 4xx; anything else


@pytest.mark.parametrize(
    ("status", "body", "said"),
    [
        (400, openai("messages: role must be user", "invalid_request_error"), "messages: role must be user"),
        (400, anthropic("max_tokens: must be positive"), "max_tokens: must be positive"),
        (409, "conflict", "conflict"),
        (422, "not json at all", "not json at all"),
        (400, '{"message": "flat message"}', "flat message"),
        (400, '{"error": "a string error"}', "a string error"),
        (400, "[1, 2, 3]", "[1, 2, 3]"),
        (400, "[" * 50_000, "[" * 199 + "…"),  # nested too deep to parse: the text, capped
    ],
)
def test_other_4xx_are_invalid_input_with_the_providers_words_as_the_rule(status: int, body: str, said: str) -> None:
    failure = failed(status, body)
    assert failure.kind is FailureKind.INVALID_INPUT
    assert failure.correctable
    assert failure.message == (
        f"Invalid value for parameter 'body' (got \"\"): the oai provider rejected the request (HTTP {status}: {said})"
    )


def test_a_4xx_naming_its_parameter_names_it_as_the_provider_wrote_it() -> None:
    body = '{"error": {"message": "Invalid schema", "type": "invalid_request_error", "param": "tools[0].function"}}'
    failure = failed(400, body)
    assert isinstance(failure, InvalidInput)
    assert failure.as_sent
    assert failure.message.startswith("Invalid value for parameter 'tools[0].function' (got \"\"): the oai provider")


@pytest.mark.parametrize(
    ("status", "said_after"), [(302, "it answered HTTP 302."), (200, 'it answered HTTP 200: {"ok": true}.')]
)
def test_anything_else_is_external_service(status: int, said_after: str) -> None:
    failure = failed(status, '{"ok": true}' if status == 200 else "")
    assert failure.kind is FailureKind.EXTERNAL_SERVICE
    assert failure.message == f"The oai service failed at https://api.example/v1/chat/completions: {said_after}"


# ---------------------------------------------------------------- redaction


def test_account_ids_and_secrets_are_redacted_in_the_words_and_the_body() -> None:
    body = json.dumps(
        {
            "error": {
                "message": f"bad role for user_id user-abc123 in org org-AbCdEf12 (key {KEY}, {CONFIGURED})",
                "type": "invalid_request_error",
            },
            "organization_id": "org-ZZZZZZ99",
            "meta": {"project_id": "proj_7"},
        }
    )
    failure = failed(400, body)
    assert failure.http is not None
    expected_words = f"bad role for user_id {REDACTED} in org {REDACTED} (key {REDACTED}, {REDACTED})"
    assert expected_words in failure.message
    assert json.loads(failure.http.body) == {
        "error": {"message": expected_words, "type": "invalid_request_error"},
        "organization_id": REDACTED,
        "meta": {"project_id": REDACTED},
    }


def test_a_secret_in_the_retry_after_is_masked_in_what_is_kept() -> None:
    signal = retried(429, "", {"retry-after": f"10 ({CONFIGURED})"})
    assert signal.http is not None
    assert signal.http.retry_after_raw == f"10 ({REDACTED})"


# ---------------------------------------------------------------- any answer: an outcome, no exception, nothing leaked


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, tuple | list):
        return [s for item in value for s in _strings(item)]
    if hasattr(value, "__slots__"):
        return [s for name in value.__slots__ for s in _strings(getattr(value, name, None))]
    return []


_WORDS = st.sampled_from(
    ["insufficient_quota", "overloaded_error", "context_length_exceeded", "prompt is too long", KEY, CONFIGURED, "x"]
)
_TEXT = st.one_of(st.text(max_size=40), _WORDS)
_BODY = st.one_of(
    st.text(max_size=80),
    st.builds(openai, _TEXT, _TEXT, st.none() | _TEXT),
    st.builds(anthropic, _TEXT, _TEXT),
    st.recursive(
        st.none() | st.booleans() | st.integers() | _TEXT,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
        max_leaves=8,
    ).map(json.dumps),
)
_HEADERS = st.dictionaries(
    st.sampled_from(["retry-after", "Retry-After-Ms", "x-should-retry", "X-Should-Retry", "content-type"]),
    st.one_of(st.text(max_size=30), st.sampled_from(["true", "false", "5", "Thu, 01 Jan 2026 00:00:09 GMT"])),
    max_size=4,
)


@PROPERTY
@given(status=st.integers(min_value=100, max_value=599), body=_BODY, headers=_HEADERS)
def test_any_answer_is_an_outcome_with_no_secret_and_a_blank_401_403_body(
    status: int, body: str, headers: dict[str, str]
) -> None:
    got = outcome(status, body, headers)
    assert isinstance(got, Retry | SidecarFailure)
    http = got.http
    assert http is not None
    assert http.status_code == status
    if status in (401, 403):
        assert http.body == ""
    texts = [http.body, http.retry_after_raw or ""]
    if isinstance(got, Retry):
        texts.append(got.detail)
        assert got.retry_after is None or got.retry_after >= 0
    else:
        texts += [got.message, *_strings(got.detail)]
    for text in texts:
        assert KEY not in text
        assert CONFIGURED not in text


# ---------------------------------------------------------------- an organization OpenAI has not verified

VERIFY = (
    "Your organization must be verified to {what}. Please go to: https://platform.openai.com/settings/organization/"
    "general and click on Verify Organization. If you just verified, it can take up to 15 minutes for access to "
    "propagate."
)


@pytest.mark.parametrize(
    ("status", "what", "param", "code"),
    [
        (400, "stream this model", "stream", "unsupported_value"),
        (400, "generate reasoning summaries", "reasoning.summary", "unsupported_value"),
        (404, "use the model `gpt-5`", None, "model_not_found"),
        (403, "use the model `gpt-image-1`", None, None),
    ],
    ids=["400-stream", "400-reasoning-summary", "404-model", "403-model"],
)
def test_an_unverified_organization_is_for_an_operator_whatever_status_it_comes_with(
    status: int, what: str, param: str | None, code: str | None
) -> None:
    """OpenAI answers an unverified organization with the same words under a 400 (naming the gated parameter),
    a 404 (a gated model) or a 403: each is UNAUTHORIZED with the fix, never a correctable INVALID_INPUT or a
    bare MODEL_NOT_FOUND."""
    error = {"message": VERIFY.format(what=what), "type": "invalid_request_error", "param": param, "code": code}
    got = failed(status, json.dumps({"error": error}))
    assert got.kind is FailureKind.UNAUTHORIZED
    assert not got.correctable
    assert "verify the OpenAI organization of the configured key" in got.message
