"""sidecar.core.tool_failures: every row of the HTTP -> kind mapping, the quirks, the triggers, what is transient."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from sidecar.core.details import ServiceDetail, Trigger
from sidecar.core.kinds import FailureKind, TransportFault
from sidecar.core.redact import REDACTED
from sidecar.core.settings import Quirk
from sidecar.core.taxonomy import (
    ExternalService,
    InvalidInput,
    PermissionDenied,
    ResourceNotFound,
    SidecarFailure,
    Unauthorized,
    UpstreamThrottle,
)
from sidecar.core.tool_failures import (
    FAULT_WORDS,
    NEVER_REACHED,
    TRIGGER_RETRY_AFTER_CHARS,
    Observation,
    classify,
    is_service_failure,
    is_transient,
    said,
    trigger_of,
)

ENDPOINT = "https://docs.example/v1/doc"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
AT = "The docs service failed at https://docs.example/v1/doc: "
MAY_HAVE_BEEN_DELIVERED = (
    " after the request was sent, so it may have been delivered; the outcome is unknown "
    "— check before repeating this call "
)


def obs(**fields: Any) -> Observation:
    fields.setdefault("kind", "fetch")
    return Observation("docs", ENDPOINT, parameter="id", value="42", **fields)


def failed(
    observation: Observation, quirks: list[Quirk] | None = None, secrets: tuple[str, ...] = ()
) -> SidecarFailure:
    failure = classify(observation, quirks or (), secrets, now=NOW)
    assert failure is not None, "expected a failure, got a success"
    return failure


# ---------------------------------------------------------------- transport faults (no response)


@pytest.mark.parametrize(
    ("fields", "said_after"),
    [
        ({"fault": TransportFault.REFUSED}, "it could not be reached (connection refused)."),
        ({"fault": TransportFault.DNS}, "it could not be reached (the host name did not resolve)."),
        (  # a connect timeout: ExecuteTool knows it never went out
            {"fault": TransportFault.TIMEOUT, "may_have_reached": False, "idempotent": False},
            "it could not be reached (no response in time).",
        ),
        (  # ExecuteTool, idempotent tool: re-sent within the budget, nothing to warn about
            {"fault": TransportFault.RESET, "may_have_reached": True, "idempotent": True},
            "it did not answer (connection reset).",
        ),
        (
            {"fault": TransportFault.RESET, "may_have_reached": True, "idempotent": False},
            "the connection was reset" + MAY_HAVE_BEEN_DELIVERED + "(it is not idempotent).",
        ),
        (
            {"fault": TransportFault.TIMEOUT, "may_have_reached": True, "idempotent": False},
            "no response came in time" + MAY_HAVE_BEEN_DELIVERED + "(it is not idempotent).",
        ),
        (  # a ClassifyFailure report: idempotency not known, judged by the fault
            {"fault": TransportFault.RESET},
            "the connection was reset" + MAY_HAVE_BEEN_DELIVERED + "unless it is idempotent.",
        ),
        (
            {"fault": TransportFault.TIMEOUT},
            "no response came in time" + MAY_HAVE_BEEN_DELIVERED + "unless it is idempotent.",
        ),
        (
            {"fault": TransportFault.UNSPECIFIED},
            "the call failed (transport failure)" + MAY_HAVE_BEEN_DELIVERED + "unless it is idempotent.",
        ),
        (  # a detail of its own is quoted
            {"fault": TransportFault.UNSPECIFIED, "fault_detail": "TLS handshake failed", "idempotent": False},
            "the call failed (TLS handshake failed)" + MAY_HAVE_BEEN_DELIVERED + "(it is not idempotent).",
        ),
        (
            {"fault": TransportFault.REFUSED, "fault_detail": "ECONNREFUSED 10.0.0.1:443"},
            "it could not be reached (ECONNREFUSED 10.0.0.1:443).",
        ),
    ],
)
def test_a_transport_fault_is_external_service_with_no_http_saying_whether_it_was_delivered(
    fields: dict[str, Any], said_after: str
) -> None:
    observation = obs(**fields)
    failure = failed(observation)
    assert isinstance(failure, ExternalService)
    assert failure.message == AT + said_after
    assert failure.http is None
    assert failure.retry_after is None
    assert isinstance(failure.detail, ServiceDetail)
    assert failure.detail.fault == fields["fault"]
    assert is_transient(observation, failure)
    assert is_service_failure(failure)


def test_only_refused_and_dns_certainly_never_went_out() -> None:
    assert frozenset({TransportFault.REFUSED, TransportFault.DNS}) == NEVER_REACHED
    assert set(FAULT_WORDS) == set(TransportFault)


def test_a_fault_the_caller_says_went_out_is_judged_as_sent_even_when_refused() -> None:
    failure = failed(obs(fault=TransportFault.REFUSED, may_have_reached=True))
    assert "may have been delivered" in failure.message


# ---------------------------------------------------------------- 2xx


@pytest.mark.parametrize("status", [200, 201, 204, 299])
@pytest.mark.parametrize("kind", ["search", "fetch"])
def test_2xx_is_a_success(status: int, kind: str) -> None:
    assert classify(obs(kind=kind, status=status, body="")) is None


def test_a_2xx_is_a_success_even_when_a_quirk_would_match_it() -> None:
    quirk = Quirk(body_contains="RobotDetected", kind="UPSTREAM_THROTTLE")
    assert classify(obs(status=200, body="RobotDetected"), [quirk]) is None  # the mapping's order: 2xx first


# ---------------------------------------------------------------- 400 / 413 / 422


@pytest.mark.parametrize(
    ("status", "body", "words"),
    [
        (400, '{"error": {"message": "id must be numeric"}}', "id must be numeric"),
        (413, "payload too large", "payload too large"),
        (422, '{"detail": "x must be an integer"}', "x must be an integer"),
        (400, "", "HTTP 400"),
    ],
)
def test_400_413_422_are_invalid_input_with_the_services_words_as_the_rule(status: int, body: str, words: str) -> None:
    failure = failed(obs(status=status, body=body))
    assert isinstance(failure, InvalidInput)
    assert failure.correctable
    assert failure.message == (
        f"Invalid value for parameter 'id' (got 42): the docs service rejected it at {ENDPOINT} "
        f"(HTTP {status}: {words}); send a corrected value"
    )
    assert failure.http is not None
    assert failure.http.status_code == status
    assert failure.http.body == body  # kept (redacted) for the host
    assert not is_transient(obs(status=status), failure)
    assert not is_service_failure(failure)


def test_invalid_input_without_a_parameter_names_the_arguments() -> None:
    failure = classify(Observation("docs", ENDPOINT, "fetch", status=400, body="bad"))
    assert isinstance(failure, InvalidInput)
    assert failure.message.startswith("Invalid value for parameter 'arguments' (got \"\"):")


# ---------------------------------------------------------------- 401 / 403


@pytest.mark.parametrize("status", [401, 403])
def test_401_403_are_unauthorized_with_the_body_blanked(status: int) -> None:
    failure = failed(obs(status=status, body='{"error": "bad key sk-abcdefghijklmnopqrstu"}'))
    assert isinstance(failure, Unauthorized)
    assert failure.message == (
        f"The docs service rejected the sidecar's credentials at {ENDPOINT}: HTTP {status}. "
        "An operator must fix the configured key."
    )
    assert failure.http is not None
    assert failure.http.body == ""
    assert "sk-" not in failure.message
    assert not is_transient(obs(status=status), failure)
    assert not is_service_failure(failure)


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        ("Rate limit exceeded", {}),
        ("rate-limit reached", {}),
        ('{"error": "Too Many Requests"}', {}),
        ("you are being throttled", {}),
        ("Slow down!", {}),
        ("quota exceeded for today", {}),
        ("request limit hit", {}),
        ("", {"Retry-After": "30"}),
        ("", {"X-RateLimit-Remaining": "0"}),
        ("", {"ratelimit-remaining": " 0 "}),
        ("", {"X-Rate-Limit-Remaining": "0"}),
    ],
)
@pytest.mark.parametrize("status", [401, 403])
def test_a_401_403_that_looks_like_throttling_is_upstream_throttle(
    status: int, body: str, headers: dict[str, str]
) -> None:
    observation = obs(status=status, body=body, headers=headers)
    failure = failed(observation)
    assert isinstance(failure, UpstreamThrottle)
    assert failure.http is not None
    assert failure.http.body == ""  # a 401/403 body is never kept, even when it says throttling
    assert is_transient(observation, failure)
    assert is_service_failure(failure)


def test_a_throttle_looking_403_quotes_what_it_said_redacted_and_keeps_retry_after() -> None:
    failure = failed(
        obs(status=403, body='{"message": "slow down, org org-AbCdEf123456"}', headers={"Retry-After": "30"})
    )
    assert failure.message == (
        f"The docs service is throttling requests at {ENDPOINT} (HTTP 403: slow down, org {REDACTED}). "
        "It asked to retry after 30."
    )
    assert failure.retry_after == 30.0
    assert failure.http is not None
    assert failure.http.retry_after_raw == "30"


@pytest.mark.parametrize(
    "headers", [{"X-RateLimit-Remaining": "5"}, {"x-ratelimit-limit": "0"}, {"Retry-After-Ms": "0"}, {}]
)
def test_a_403_with_remaining_quota_or_unrelated_headers_is_unauthorized(headers: dict[str, str]) -> None:
    assert isinstance(failed(obs(status=403, body="forbidden", headers=headers)), Unauthorized)


# ---------------------------------------------------------------- 404


def test_404_on_a_fetch_is_resource_not_found() -> None:
    failure = failed(obs(status=404, body="no such doc", resource_type="document"))
    assert isinstance(failure, ResourceNotFound)
    assert failure.correctable
    assert failure.message == (
        f"No document '42' exists at the docs service ({ENDPOINT}). Try another identifier or another tool."
    )
    assert failure.http is not None
    assert failure.http.status_code == 404


def test_404_on_a_search_is_an_empty_result() -> None:
    assert classify(obs(kind="search", status=404, body="nothing")) is None


# ---------------------------------------------------------------- 429


def test_429_is_upstream_throttle_with_retry_after_kept_raw_and_read() -> None:
    observation = obs(status=429, body='{"message": "Too many"}', headers={"Retry-After": " 12 "})
    failure = failed(observation)
    assert isinstance(failure, UpstreamThrottle)
    assert failure.message == (
        f"The docs service is throttling requests at {ENDPOINT} (HTTP 429: Too many). It asked to retry after 12."
    )
    assert failure.http is not None
    assert failure.http.retry_after_raw == " 12 "  # verbatim
    assert failure.retry_after == 12.0
    assert is_transient(observation, failure)


def test_an_unreadable_retry_after_is_kept_raw_but_asks_no_wait() -> None:
    failure = failed(obs(status=429, headers={"retry-after": "whenever"}))
    assert failure.retry_after is None
    assert failure.http is not None
    assert failure.http.retry_after_raw == "whenever"


def test_without_a_wall_clock_no_wait_is_read() -> None:
    failure = classify(obs(status=429, headers={"retry-after": "12"}))
    assert failure is not None
    assert failure.retry_after is None


# ---------------------------------------------------------------- 5xx and anything not listed


@pytest.mark.parametrize(
    ("status", "body", "said_after", "transient"),
    [
        (500, "", "it answered HTTP 500.", True),
        (503, "down for maintenance.", "it answered HTTP 503: down for maintenance.", True),
        (599, '{"error": {"message": "odd"}}', "it answered HTTP 599: odd.", True),
        (302, "", "it answered HTTP 302.", False),
        (418, "teapot", "it answered HTTP 418: teapot.", False),
        (409, "conflict", "it answered HTTP 409: conflict.", False),
        (100, "", "it answered HTTP 100.", False),
    ],
)
def test_5xx_and_any_status_not_listed_are_external_service(
    status: int, body: str, said_after: str, transient: bool
) -> None:
    observation = obs(status=status, body=body, headers={"Retry-After": "3"})
    failure = failed(observation)
    assert isinstance(failure, ExternalService)
    assert failure.message == AT + said_after
    assert failure.retry_after == 3.0
    assert is_transient(observation, failure) is transient
    assert is_service_failure(failure)


# ---------------------------------------------------------------- quirks


ROBOT = Quirk(status=403, body_contains="RobotDetected", kind="UPSTREAM_THROTTLE", detail="robot detection")


def test_a_quirk_on_status_and_body_maps_to_its_kind_with_its_detail() -> None:
    failure = failed(obs(status=403, body="<html>robotdetected</html>"), [ROBOT])  # body match ignores case
    assert isinstance(failure, UpstreamThrottle)
    assert failure.message == f"The docs service is throttling requests at {ENDPOINT} (HTTP 403: robot detection)."


def test_every_condition_of_a_quirk_must_match() -> None:
    assert isinstance(failed(obs(status=401, body="RobotDetected"), [ROBOT]), Unauthorized)  # status differs
    assert isinstance(failed(obs(status=403, body="Forbidden"), [ROBOT]), Unauthorized)  # body differs


def test_a_quirk_on_a_header_matches_its_presence_in_any_case() -> None:
    quirk = Quirk(header="X-Captcha", kind="EXTERNAL_SERVICE", detail="a captcha page")
    failure = failed(obs(status=400, headers={"x-captcha": ""}), [quirk])
    assert isinstance(failure, ExternalService)
    assert failure.message == AT + "it answered HTTP 400: a captcha page."
    assert isinstance(failed(obs(status=400, headers={"X-Other": "1"}), [quirk]), InvalidInput)


def test_a_quirk_on_the_body_alone_matches_any_status() -> None:
    quirk = Quirk(body_contains="no such record", kind="RESOURCE_NOT_FOUND")
    failure = failed(obs(status=500, body="Error: No such record"), [quirk])
    assert isinstance(failure, ResourceNotFound)
    assert failure.http is not None
    assert failure.http.status_code == 500


def test_the_first_matching_quirk_wins() -> None:
    first = Quirk(status=503, kind="UPSTREAM_THROTTLE", detail="first")
    second = Quirk(status=503, kind="INVALID_INPUT", detail="second")
    assert isinstance(failed(obs(status=503), [first, second]), UpstreamThrottle)
    assert isinstance(failed(obs(status=503), [second, first]), InvalidInput)


def test_a_quirk_without_a_detail_quotes_what_the_service_said() -> None:
    quirk = Quirk(status=500, kind="UPSTREAM_THROTTLE")
    failure = failed(obs(status=500, body='{"error": {"message": "busy, come back later"}}'), [quirk])
    assert (
        failure.message == f"The docs service is throttling requests at {ENDPOINT} (HTTP 500: busy, come back later)."
    )


@pytest.mark.parametrize(
    ("kind", "cls", "message"),
    [
        (
            "INVALID_INPUT",
            InvalidInput,
            f"Invalid value for parameter 'id' (got 42): the docs service rejected it at {ENDPOINT} (odd); "
            "send a corrected value",
        ),
        (
            "RESOURCE_NOT_FOUND",
            ResourceNotFound,
            f"No resource '42' exists at the docs service ({ENDPOINT}). Try another identifier or another tool.",
        ),
        (
            "UPSTREAM_THROTTLE",
            UpstreamThrottle,
            f"The docs service is throttling requests at {ENDPOINT} (HTTP 500: odd).",
        ),
        (
            "UNAUTHORIZED",
            Unauthorized,
            f"The docs service rejected the sidecar's credentials at {ENDPOINT}: odd. An operator must fix the "
            "configured key.",
        ),
        ("PERMISSION_DENIED", PermissionDenied, f"The docs service denied access at {ENDPOINT}: odd."),
        ("EXTERNAL_SERVICE", ExternalService, AT + "it answered HTTP 500: odd."),
    ],
)
def test_each_quirk_kind_is_that_kind(kind: str, cls: type[SidecarFailure], message: str) -> None:
    quirk = Quirk.model_validate({"status": 500, "kind": kind, "detail": "odd"})
    failure = failed(obs(status=500, body="anything"), [quirk])
    assert type(failure) is cls
    assert failure.kind == FailureKind[kind]
    assert failure.message == message
    assert failure.http is not None
    assert failure.http.status_code == 500


def test_a_quirk_throttle_reads_retry_after() -> None:
    quirk = Quirk(status=503, kind="UPSTREAM_THROTTLE")
    assert failed(obs(status=503, headers={"Retry-After": "9"}), [quirk]).retry_after == 9.0


# ---------------------------------------------------------------- secrets and account ids


def test_a_secret_or_account_id_in_a_body_or_retry_after_is_masked() -> None:
    secret = "s3cr3t-token-value"
    failure = failed(
        obs(
            status=503,
            body=f'{{"error": {{"message": "token {secret} for org-AbCdEf123456"}}, "account_id": "acct-9"}}',
            headers={"Retry-After": f"later ({secret})"},
        ),
        secrets=(secret,),
    )
    assert failure.http is not None
    for text in (failure.message, failure.http.body, failure.http.retry_after_raw or ""):
        assert secret not in text
        assert "org-AbCdEf123456" not in text
        assert "acct-9" not in text
    assert failure.message == AT + f"it answered HTTP 503: token {REDACTED} for {REDACTED}."


# ---------------------------------------------------------------- what the service said


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ('{"error": {"message": " nested "}}', "nested"),
        ('{"error": "flat"}', "flat"),
        ('{"message": "top"}', "top"),
        ('{"detail": "fastapi"}', "fastapi"),
        ('{"error_description": "oauth"}', "oauth"),
        ('{"title": "problem+json"}', "problem+json"),
        ('{"error": {"message": ""}, "message": "second"}', "second"),
        ('{"error": {"message": 5}}', '{"error": {"message": 5}}'),
        ("[1, 2]", "[1, 2]"),
        ("  plain text  ", "plain text"),
        ("[" * 100_000, "[" * 100_000),  # nested too deep to parse: the text itself
    ],
)
def test_said_is_the_error_message_inside_a_json_body_else_the_text(body: str, words: str) -> None:
    assert said(body) == words


# ---------------------------------------------------------------- the circuit's trigger


def test_the_trigger_of_a_transport_fault_has_no_status() -> None:
    observation = obs(fault=TransportFault.RESET)
    assert trigger_of(observation, failed(observation)) == Trigger(None, "connection reset")
    detailed = obs(fault=TransportFault.TIMEOUT, fault_detail="read timed out after 10 s")
    assert trigger_of(detailed, failed(detailed)) == Trigger(None, "read timed out after 10 s")


def test_the_trigger_of_a_response_quotes_what_it_said_and_its_retry_after() -> None:
    observation = obs(status=503, body='{"error": {"message": "overloaded"}}', headers={"retry-after": "7"})
    assert trigger_of(observation, failed(observation)) == Trigger(503, "overloaded", "7")
    bare = obs(status=500)
    assert trigger_of(bare, failed(bare)) == Trigger(500, "HTTP 500", None)


def test_the_trigger_of_a_throttle_looking_403_quotes_no_body() -> None:
    observation = obs(status=403, body="slow down, key sk-abcdefghijklmnopqrstu")
    assert trigger_of(observation, failed(observation)) == Trigger(403, "HTTP 403", None)


def test_the_trigger_keeps_a_bounded_masked_retry_after() -> None:
    secret = "zz-secret-zz"
    observation = obs(status=429, headers={"Retry-After": f"{secret} " + "x" * 500})
    trigger = trigger_of(observation, failed(observation, secrets=(secret,)))
    assert trigger.retry_after_raw is not None
    assert len(trigger.retry_after_raw) == TRIGGER_RETRY_AFTER_CHARS
    assert trigger.retry_after_raw.startswith(REDACTED)


# ---------------------------------------------------------------- transient, and charged to the service


@pytest.mark.parametrize(
    ("observation", "transient", "charged"),
    [
        (obs(status=429), True, True),
        (obs(status=403, body="rate limit"), True, True),
        (obs(status=500), True, True),
        (obs(status=504), True, True),
        (obs(fault=TransportFault.TIMEOUT), True, True),
        (obs(status=418), False, True),  # the service's, but no reason to think a repeat differs
        (obs(status=400), False, False),
        (obs(status=401), False, False),
        (obs(status=404), False, False),
    ],
)
def test_what_is_worth_resending_and_what_the_service_is_charged_with(
    observation: Observation, transient: bool, charged: bool
) -> None:
    failure = failed(observation)
    assert is_transient(observation, failure) is transient
    assert is_service_failure(failure) is charged
