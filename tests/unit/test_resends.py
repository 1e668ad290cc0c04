"""server.http.resends: which failures are remembered and for how long, the memo's key and bounds (fake clock)."""

from __future__ import annotations

import pytest
from opentelemetry.trace import INVALID_SPAN
from starlette.requests import Request
from starlette.responses import Response

from sidecar.core.clock import FakeClock
from sidecar.core.kinds import RetrySignal
from sidecar.core.taxonomy import (
    InvalidInput,
    JobCancelled,
    JobTimeout,
    QuotaExhausted,
    SidecarFailure,
    SystemFailure,
    UpstreamRetriesExhausted,
)
from sidecar.server.http.resends import (
    FINAL_FAILURE_WINDOW_S,
    MAX_WINDOW_S,
    REPLAYED_HEADER,
    Resend,
    Resends,
    window_of,
)
from sidecar.server.refusals import draining_failure, overloaded_failure

ROUTE = "/v1/chat/completions"
BODY = b'{"model":"gpt","messages":[{"role":"user","content":"hi"}]}'


def quota() -> SidecarFailure:
    return QuotaExhausted("oai", "", "gpt", "You exceeded your current quota", http=None)


def exhausted(wait: float | None) -> SidecarFailure:
    return UpstreamRetriesExhausted("gpt", 3, RetrySignal.RATE_LIMIT, "rate limited", http=None, retry_after=wait)


def request(headers: dict[str, str] | None = None, peer: str = "127.0.0.1", port: int = 50000) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    scope = {"type": "http", "method": "POST", "path": ROUTE, "headers": raw, "client": (peer, port)}
    return Request(scope)


def answer(status: int = 429, body: bytes = b'{"error":{}}', wait: float | None = None) -> Response:
    headers = {"x-sidecar-attempts": "4", "x-should-retry": "false"}
    if wait is not None:
        headers |= {"retry-after": str(int(wait)), "retry-after-ms": str(int(wait * 1000))}
    return Response(body, status_code=status, headers=headers, media_type="application/json")


@pytest.mark.parametrize(
    ("failure", "window"),
    [
        (quota(), FINAL_FAILURE_WINDOW_S),
        (InvalidInput("messages", "[]", "must not be empty"), FINAL_FAILURE_WINDOW_S),
        (exhausted(None), FINAL_FAILURE_WINDOW_S),
        (exhausted(7.0), 7.0),
        (exhausted(10 * MAX_WINDOW_S), MAX_WINDOW_S),
        (exhausted(0.0), None),  # "retry now": nothing to hold
        (JobTimeout("gpt", "the deadline", retry_after=30.0), 30.0),  # paused past the deadline
        (JobTimeout("gpt", "the deadline"), None),  # a slow upstream may answer the next deadline in time
        (JobCancelled("gpt"), None),  # the caller went away
        (SystemFailure("the HTTP front"), None),  # a fault of ours
        (overloaded_failure("POST /v1/chat/completions", 64, 1.0), None),  # shed: a retry costs nothing upstream
        (draining_failure("POST /v1/chat/completions", 1.0), None),
    ],
    ids=lambda v: v.kind_name if isinstance(v, SidecarFailure) else str(v),
)
def test_which_failures_are_remembered_and_for_how_long(failure: SidecarFailure, window: float | None) -> None:
    assert window_of(failure) == window


def test_the_same_caller_door_envelope_and_body_is_one_key_and_any_other_is_not() -> None:
    memo = Resends(FakeClock())
    key = memo.resend_of(request({"authorization": "Bearer a"}), ROUTE, BODY).key
    again = request({"authorization": "Bearer a"}, port=50001)  # a new connection
    assert memo.resend_of(again, ROUTE, BODY).key == key
    assert memo.resend_of(request({"x-api-key": "a"}), ROUTE, BODY).key == key  # the Anthropic SDK's way
    assert memo.resend_of(request({"authorization": "Bearer a", "traceparent": "00-x"}), ROUTE, BODY).key == key
    others = [
        memo.resend_of(request({"authorization": "Bearer b"}), ROUTE, BODY),
        memo.resend_of(request({"authorization": "Bearer a"}, peer="10.0.0.2"), ROUTE, BODY),
        memo.resend_of(request({"authorization": "Bearer a"}), "/v1/messages", BODY),
        memo.resend_of(request({"authorization": "Bearer a"}), ROUTE, BODY + b" "),
        memo.resend_of(request({"authorization": "Bearer a", "x-sidecar-timeout-s": "30"}), ROUTE, BODY),
    ]
    assert len({o.key for o in others} | {key}) == 1 + len(others)


def test_a_replay_counts_the_wait_down_and_ends_with_its_window() -> None:
    clock, counted = FakeClock(), []
    memo = Resends(clock, counted=lambda route, kind: counted.append((route, kind)))
    resend = memo.resend_of(request(), ROUTE, BODY)
    assert memo.replay(resend, INVALID_SPAN) is None
    first = memo.keep(resend, exhausted(7.0), answer(wait=7.0))
    replay = memo.replay(resend, INVALID_SPAN)
    assert replay is not None
    assert (replay.status_code, replay.body) == (first.status_code, first.body)
    assert replay.headers["retry-after"] == "7"
    assert replay.headers[REPLAYED_HEADER] == "true"
    clock.advance(2.5)
    replay = memo.replay(resend, INVALID_SPAN)
    assert replay is not None
    assert (replay.headers["retry-after"], replay.headers["retry-after-ms"]) == ("5", "4500")
    clock.advance(4.5)
    assert memo.replay(resend, INVALID_SPAN) is None
    assert len(memo) == 0
    assert counted == [(ROUTE, "UPSTREAM_RETRIES_EXHAUSTED")] * 2


def test_what_is_not_remembered_is_answered_as_it_is() -> None:
    memo = Resends(FakeClock())
    resend = memo.resend_of(request(), ROUTE, BODY)
    sent = answer(status=499)
    assert memo.keep(resend, JobCancelled("gpt"), sent) is sent
    assert memo.replay(resend, INVALID_SPAN) is None


def test_the_memo_forgets_the_least_recently_used_past_its_entries() -> None:
    memo = Resends(FakeClock(), max_entries=2)
    a, b, c = (Resend(ROUTE, bytes([i]) * 32) for i in range(3))
    memo.keep(a, quota(), answer())
    memo.keep(b, quota(), answer())
    assert memo.replay(a, INVALID_SPAN) is not None  # a used: b is now the least recent
    memo.keep(c, quota(), answer())
    assert len(memo) == 2
    assert memo.replay(b, INVALID_SPAN) is None
    assert memo.replay(a, INVALID_SPAN) is not None
    assert memo.replay(c, INVALID_SPAN) is not None


def test_the_memo_forgets_past_its_bytes() -> None:
    memo = Resends(FakeClock(), max_bytes=3 * 1024)
    big = b"x" * 1024
    keys = [Resend(ROUTE, bytes([i]) * 32) for i in range(4)]
    for key in keys:
        memo.keep(key, quota(), answer(body=big))
    assert len(memo) == 2  # each entry is its body, its headers and an allowance: two fit in 3 KiB
    assert [memo.replay(k, INVALID_SPAN) is not None for k in keys] == [False, False, True, True]


def test_expired_answers_at_the_old_end_are_swept_as_new_ones_come() -> None:
    clock = FakeClock()
    memo = Resends(clock)
    old, new = Resend(ROUTE, b"o" * 32), Resend(ROUTE, b"n" * 32)
    memo.keep(old, quota(), answer())
    clock.advance(FINAL_FAILURE_WINDOW_S + 1)
    memo.keep(new, quota(), answer())
    assert len(memo) == 1
