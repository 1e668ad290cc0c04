"""The pieces of tool calls that happen once: the call's name, the recorded outcome, the memory record,
the config keys."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from sidecar.config import ConfigError, parse_config
from sidecar.core.clock import FakeClock
from sidecar.core.conversation import ToolOutcome, ToolResult
from sidecar.core.details import HttpInfo, Trigger
from sidecar.core.kinds import RetrySignal, TransportFault
from sidecar.core.state import Claimed, InProgress, MemoryRecords, Recorded
from sidecar.core.taxonomy import (
    CircuitOpen,
    ExternalService,
    Guardrail,
    InvalidInput,
    JobTimeout,
    ResourceNotFound,
    SidecarFailure,
    SystemFailure,
    Unauthorized,
    UpstreamThrottle,
)
from sidecar.tools.once import KEY_PREFIX, call_hash, decode, encode, idempotency_key

SECRET = "sk-test-SECRETKEY1234567890"
HTTP = HttpInfo(503, "notes", "http://x/notes", body="down", retry_after_raw="7")


def _failures() -> list[SidecarFailure]:
    since = datetime(2026, 1, 1, tzinfo=UTC)
    return [
        ExternalService("notes", "http://x/notes", "HTTP 503", http=HTTP, retry_after=7.0),
        ExternalService("notes", "http://x/notes", "connection reset", fault=TransportFault.RESET, sent=True),
        UpstreamThrottle("notes", "http://x/notes", "slow down", http=HTTP, retry_after=7.0),
        Unauthorized("notes", "bad key", endpoint="http://x"),
        CircuitOpen("notes", remaining=12.0, since=since, cooldown=30.0, trigger=Trigger(500, "boom", "3")),
        InvalidInput("text", "x", "must be longer"),
        Guardrail("no-email", "must not contain an email", "a@b"),
        ResourceNotFound("note", "n-1", where="http://x"),
        JobTimeout("tool note", "late", signal=RetrySignal.TRANSIENT, retry_after=2.0, budget=2),
        SystemFailure("the tool runner"),
    ]


@pytest.mark.parametrize("failure", _failures(), ids=lambda f: type(f).__name__)
def test_a_recorded_failure_reads_back_as_itself(failure: SidecarFailure) -> None:
    failure.with_attempts(3)
    back = decode(encode(ToolOutcome(None, failure, 3, "empty"), ()), "empty")
    assert back.result is None
    assert back.failure is not None
    got = back.failure
    assert type(got) is type(failure)
    assert (got.kind, got.message, got.detail, got.http, got.retry_after, got.attempts) == (
        failure.kind,
        failure.message,
        failure.detail,
        failure.http,
        failure.retry_after,
        3,
    )
    assert back.model_text == ToolOutcome(None, failure, 3).model_text
    assert back.attempts == 3


def test_a_recorded_result_reads_back_and_secrets_are_masked() -> None:
    result = ToolResult(
        content=f'{{"id": "n-1", "echo": "{SECRET}"}}', content_type="application/json", status_code=201, empty=False
    )
    text = encode(ToolOutcome(result, None, 1), (SECRET,))
    assert SECRET not in text
    back = decode(text, "The tool returned an empty result.")
    assert back.result is not None
    assert back.result.status_code == 201
    assert "n-1" in back.result.content
    assert SECRET not in back.result.content
    failure = ExternalService("notes", f"http://x/{SECRET}", "HTTP 500", http=HttpInfo(500, "notes", "x", SECRET))
    assert SECRET not in encode(ToolOutcome(None, failure, 1), (SECRET,))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "[]",
        '{"v": 2, "a": 1}',
        '{"v": 1, "a": 1}',
        '{"v": 1, "a": 1, "f": {"k": "NOPE"}}',
        '{"v": 1, "a": 1, "r": {"$d": "Evil", "x": 1}}',
        '{"v": 1, "a": 1, "r": {"$d": "ToolResult"}}',
    ],
)
def test_an_unreadable_record_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011  (the record's reader raises nothing else)
        decode(text, "")


def test_the_call_hash_names_the_same_call_and_only_it() -> None:
    h = call_hash("j", "c", "note", {"a": 1, "b": [1, 2]})
    assert h is not None
    assert len(h) == 64
    assert h == call_hash("j", "c", "note", {"b": [1, 2], "a": 1})  # the same JSON value
    others = [
        call_hash("j2", "c", "note", {"a": 1, "b": [1, 2]}),
        call_hash("j", "c2", "note", {"a": 1, "b": [1, 2]}),
        call_hash("j", "c", "note2", {"a": 1, "b": [1, 2]}),
        call_hash("j", "c", "note", {"a": 2, "b": [1, 2]}),
    ]
    assert h not in others
    assert len(set(others)) == 4
    assert call_hash("", "c", "note", {}) is None
    assert call_hash("j", "", "note", {}) is None
    assert call_hash("j", "c", "note", {"t": "\ud800"}) is not None  # a lone surrogate escape is hashed


def test_the_idempotency_key_is_the_calls_or_its_own() -> None:
    h = call_hash("j", "c", "note", {})
    rng = random.Random(1)
    assert idempotency_key(h, rng) == idempotency_key(h, rng) == KEY_PREFIX + (h or "")[:48]
    fresh = {idempotency_key(None, rng) for _ in range(100)}
    assert len(fresh) == 100
    assert all(k.startswith(KEY_PREFIX) and len(k) == len(KEY_PREFIX) + 48 for k in fresh)


def test_the_memory_record_claims_once_keeps_for_the_window_and_abandons_its_own() -> None:
    clock = FakeClock()
    records = MemoryRecords(clock)

    async def run() -> None:
        first = await records.claim_call("k", 10.0, 1.0)
        assert isinstance(first, Claimed)
        held = await records.claim_call("k", 10.0, 2.0)
        assert isinstance(held, InProgress)
        assert held.since == 1.0
        await records.abandon_call("k", "someone else's")
        assert isinstance(await records.claim_call("k", 10.0, 2.0), InProgress)
        await records.abandon_call("k", first.token)
        second = await records.claim_call("k", 10.0, 3.0)
        assert isinstance(second, Claimed)
        assert await records.finish_call("k", "outcome", 5.0)
        clock.advance(4.9)
        assert await records.claim_call("k", 10.0, 4.0) == Recorded("outcome")
        clock.advance(0.2)
        assert isinstance(await records.claim_call("k", 10.0, 5.0), Claimed)  # past the window

    asyncio.run(run())


def test_the_memory_record_stays_within_its_size() -> None:
    records = MemoryRecords(FakeClock(), max_chars=1000)

    async def run() -> None:
        for i in range(100):
            await records.claim_call(f"k{i}", 60.0, 0.0)
            await records.finish_call(f"k{i}", "x" * 100, 60.0)
        assert len(records) <= 10
        assert records.peek("k99") == Recorded("x" * 100)
        assert records.peek("k0") is None

    asyncio.run(run())


def _config(**note: Any) -> str:
    tool = {
        "description": "notes",
        "kind": "fetch",
        "service": "notes",
        "method": "POST",
        "url": "http://127.0.0.1:1/notes",
        **note,
    }
    return yaml.safe_dump({"tools": {"note": tool}})


@pytest.mark.parametrize(
    ("note", "expected"),
    [
        ({"idempotency_header": "Idem Key"}, ["tools.note.idempotency_header", "HTTP header name"]),
        ({"idempotency_header": "Content-Type"}, ["tools.note.idempotency_header", "sets itself"]),
        (
            {"idempotency_header": "Idempotency-Key", "headers": {"idempotency-key": "x"}},
            ["also in headers", "one key per call"],
        ),
        ({"dedupe_window_s": -1}, ["tools.note.dedupe_window_s", "greater than or equal to 0"]),
        ({"dedupe_window_s": 1e9}, ["tools.note.dedupe_window_s", "less than or equal to 86400"]),
    ],
)
def test_bad_once_keys_are_refused_naming_the_key(note: dict[str, Any], expected: list[str]) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(_config(**note))
    for part in expected:
        assert part in str(caught.value)


def test_an_mcp_tool_takes_no_idempotency_header() -> None:
    text = yaml.safe_dump(
        {
            "mcp_servers": {"docs": {"url": "http://127.0.0.1:1/mcp"}},
            "tools": {"t": {"kind": "mcp", "server": "docs", "idempotency_header": "Idempotency-Key"}},
        }
    )
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    assert "idempotency_header" in str(caught.value)


def test_the_once_defaults() -> None:
    cfg = parse_config(_config(idempotency_header="Idempotency-Key", dedupe_window_s=30))
    note = cfg.http_tools["note"]
    assert note.is_idempotent  # a key makes a POST safe to repeat
    assert note.dedupe_window_s == 30
    assert cfg.policy.dedupe_window_s == 600
    assert (
        not parse_config(_config(idempotency_header="Idempotency-Key", idempotent=False))
        .http_tools["note"]
        .is_idempotent
    )
