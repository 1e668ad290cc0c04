"""Caller patterns and schemas run on RE2 and within bounds (unit tests of sidecar.core)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import pytest

from sidecar.config import ConfigError, GuardrailConfig, parse_config
from sidecar.core.cpu_budget import TooCostly, checks, timed_by
from sidecar.core.json_depth import TooDeep, loads
from sidecar.core.json_input import depth_over, load_json, nested_over
from sidecar.core.json_schemas import check_schema, errors, validator_for
from sidecar.core.patterns import PatternError, compile_pattern, search
from sidecar.core.redact import redact_body
from sidecar.core.taxonomy import InvalidInput, JsonParse, ModelNotFound
from sidecar.core.tool_failures import said
from sidecar.providers.replies import parse_reply
from sidecar.server.grpc.status import TRAILER_BUDGET_BYTES, _trailer_bytes, to_status
from sidecar.tools.guardrails import Guardrails
from tests.gc_room import collections_with_room

HOSTILE = "a" * 100_000 + "b"  # Python's re would need 2**100000 steps for ^(a+)+$


def test_a_catastrophic_pattern_returns_at_once() -> None:
    assert not search("^(a+)+$", HOSTILE)
    assert search("^(a+)+$", "aaa")


@pytest.mark.parametrize(
    ("pattern", "said"),
    [
        (r"(a)\1", "backreferences"),
        ("(?=a)b", "lookahead"),
        ("(?<=a)b", "lookbehind"),
        ("a{5000}", "counted repetitions"),
    ],
)
def test_a_pattern_re2_cannot_run_says_which_feature(pattern: str, said: str) -> None:
    with pytest.raises(PatternError, match=said):
        compile_pattern(pattern)


def test_the_guardrail_config_refuses_a_backreference_in_words() -> None:
    with pytest.raises(ValueError, match=r"not a regular expression RE2 can run.*backreferences"):
        GuardrailConfig(name="x", deny_pattern=r"(\w)\1", reason="r")


def test_the_documented_pii_guardrail_is_linear() -> None:
    rules = Guardrails([GuardrailConfig(name="pii", deny_pattern=r"[\w.+-]+@[\w-]+\.\w+", reason="no email")])
    rules.check({"text": "x" * 1024 * 1024})  # minutes on Python's re; milliseconds on RE2
    with pytest.raises(Exception, match="no email"):
        rules.check({"text": "x" * 1000 + " bob@example.com"})


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "pattern": "^(a+)+$"},
        {"type": "object", "patternProperties": {"^(a+)+$": {"type": "integer"}}},
        {"type": "object", "patternProperties": {"^(a+)+$": {}}, "additionalProperties": False},
        {"properties": {"a": {"$schema": "http://json-schema.org/draft-07/schema#", "pattern": "^(a+)+$"}}},
    ],
)
def test_schema_patterns_run_on_re2(schema: dict[str, Any]) -> None:
    assert check_schema(schema) is None
    validator = validator_for(schema)
    found = errors(validator, {HOSTILE: 1, "a": HOSTILE} if "pattern" not in schema else HOSTILE)
    assert found  # a violation, found at once


def test_format_regex_is_checked_on_re2() -> None:
    validator = validator_for({"type": "string", "format": "regex"})
    assert errors(validator, r"(a)\1")
    assert not errors(validator, "a+")


@pytest.mark.parametrize(
    ("schema", "said"),
    [
        ({"$dynamicRef": "#nope"}, "cannot resolve #nope"),
        ({"properties": {"a": {"$ref": "#/$defs/nope"}}}, "cannot resolve #/$defs/nope"),
        ({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, "refer to itself"),
        ({"pattern": r"(a)\1"}, "backreferences"),
        ({"patternProperties": {"^a": {}}, "unevaluatedProperties": False}, "unevaluatedProperties"),
    ],
)
def test_a_schema_that_cannot_be_run_is_refused_in_words(schema: dict[str, Any], said: str) -> None:
    problem = check_schema(schema)
    assert problem is not None
    assert said in problem


def _nested_schema(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def test_a_deep_tool_schema_in_the_config_is_a_config_error_naming_the_key() -> None:
    tool = {"description": "d", "kind": "fetch", "service": "s", "url": "http://x/", "parameters": _nested_schema(110)}
    with pytest.raises(ConfigError) as caught:
        parse_config(json.dumps({"tools": {"deep": tool}}))  # JSON is YAML
    said = str(caught.value)  # the loader's own depth bound (64) refuses it first, naming the key's path
    assert "tools.deep.parameters" in said
    assert "nested more than 64 levels deep" in said


def test_depth_is_read_from_the_text_as_from_the_value() -> None:
    values: list[Any] = [[], {"a": [{"b": "[[{"}]}, [[[]]], {"x": [[1, [2]], {"y": {}}]}]
    for value in values:
        for limit in range(5):
            assert nested_over(json.dumps(value), limit) == depth_over(value, limit)


DEEP = '{"query": ' + "[" * 1000 + "]" * 1000 + "}"


@pytest.mark.parametrize(
    "read",
    [
        lambda: load_json(DEEP, "f", max_bytes=1 << 20, expected="JSON"),
        lambda: load_json("[" * 1000 + "x", "f", max_bytes=1 << 20, expected="JSON"),
        lambda: parse_reply(DEEP, {"type": "object"}, "gpt"),
    ],
    ids=["deep JSON", "deep not JSON", "a deep reply"],
)
def test_a_deep_text_is_refused_before_it_takes_the_stack_a_finaliser_needs(read: Callable[[], Any]) -> None:
    # The CI failure: json.loads climbed to the recursion limit on 1,000 levels, a collection that
    # one of its allocations started ran a finaliser there, which failed (an unraisable RecursionError).
    with collections_with_room() as short, pytest.raises((InvalidInput, JsonParse)) as caught:
        read()
    assert "deeper than 64" in str(caught.value) or "nested at most 64 levels deep" in str(caught.value)
    assert short == []


@pytest.mark.parametrize(
    "body", [("[" * 100_000).encode(), '{"a": ' + "[" * 201 + "]" * 201 + "}"], ids=["unclosed", "202 deep"]
)
def test_a_deep_body_is_not_read_and_leaves_a_finaliser_its_room(body: str | bytes) -> None:
    with collections_with_room() as short, pytest.raises(TooDeep) as caught:
        loads(body)
    assert isinstance(caught.value, ValueError)  # what every reader of a body catches already
    assert caught.value.limit == 200
    assert short == []


@pytest.mark.parametrize(
    "read",
    [lambda: redact_body('{"error": ' + "[" * 100_000), lambda: said("[" * 100_000 + "]" * 100_000)],
    ids=["an error body to redact", "a tool service's answer"],
)
def test_a_deep_body_is_kept_as_text_and_leaves_a_finaliser_its_room(read: Callable[[], str]) -> None:
    with collections_with_room() as short:
        assert read().startswith(("[[[", '{"error": [[['))
    assert short == []


def test_a_body_200_deep_is_read() -> None:
    assert loads("[" * 200 + "]" * 200) == json.loads("[" * 200 + "]" * 200)
    assert loads('{"a": [1, {"b": "[[["}]}'.encode("utf-16")) == {"a": [1, {"b": "[[["}]}


@pytest.mark.parametrize(
    "text",
    [
        "[" * 64 + "x",
        "[" * 64 + "]" * 70 + "[" * 64,
        "[" * 53 + '{"a": 1' + "[" * 10,
        '"]]]]' + "[" * 64,
        "[" * 60 + '"a\\\n"' + "[" * 4,
        '{"a": "]]]]' + "[" * 10 + '", "b": ' + "[" * 63 + "1" + "]" * 63 + "}",
        "[" * 30 + "}" + "[" * 34,
        "[1, 2" * 64,
    ],
)
def test_json_loads_never_climbs_deeper_than_the_text_read_says(text: str) -> None:
    assert not nested_over(text, 64)  # JSON or not: none of these is refused as too deep
    depth = 0
    frame = sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + 64 + 10)  # room for these frames, json.loads's own and 64 levels
    try:
        json.loads(text)
    except json.JSONDecodeError:
        pass
    finally:
        sys.setrecursionlimit(limit)


@pytest.mark.parametrize(
    ("text", "max_bytes", "rule"),
    [
        ("[" * 500 + "]" * 500, 1 << 20, "nested at most 64 levels deep"),
        ("[" * 100_000, 1 << 20, "nested at most 64 levels deep"),
        ("1" * 5000, 1 << 20, "more than 4300 digits"),
        ('"' + "x" * 2000 + '"', 1024, "must be at most 1024 bytes of JSON (got 2002)"),
    ],
)
def test_bounded_parsing_names_the_bound(text: str, max_bytes: int, rule: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        load_json(text, "f", max_bytes=max_bytes, expected="JSON")
    assert caught.value.detail.parameter == "f"  # type: ignore[union-attr]
    assert rule in caught.value.detail.rule  # type: ignore[union-attr]


def test_a_check_past_its_time_limit_stops_at_a_checkpoint() -> None:
    many = {"anyOf": [{"type": "string", "pattern": f"^x{i}$"} for i in range(5000)]}
    validator = validator_for(many)
    reads: list[float] = []

    def clock() -> float:  # 1 ms of work between two reads, whatever the machine's speed
        reads.append(len(reads) / 1000)
        return reads[-1]

    with timed_by(clock), pytest.raises(TooCostly) as caught:
        checks(lambda: errors(validator, "y" * 200_000), 0.01)
    assert caught.value.limit_s == 0.01
    assert len(reads) == 12  # the start, then 11 checkpoints of 5000+: it stopped at the first one past 10 ms


@pytest.mark.parametrize("char", ["m", "é", "😀"])
def test_a_long_model_id_keeps_its_details_within_the_trailer_budget(char: str) -> None:
    failure = ModelNotFound(char * 5000, ["gpt", "claude"])
    detail = failure.detail
    assert detail.identifier.endswith("… (5000 characters)")  # type: ignore[union-attr]
    status = to_status(failure)
    assert _trailer_bytes(status) <= TRAILER_BUDGET_BYTES


def test_an_echoed_value_is_bounded_and_says_its_length() -> None:
    failure = InvalidInput("p" * 1000, "v" * 100_000, "r" * 10_000)
    detail = failure.detail
    assert detail.value == "v" * 200 + "… (100000 characters)"  # type: ignore[union-attr]
    assert len(detail.parameter) < 250  # type: ignore[union-attr]
    assert len(failure.message) < 1000
