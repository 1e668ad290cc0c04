"""``server/http/params.py``: the core's parameter paths in each door's names (the doors' tests run it whole)."""

from __future__ import annotations

from typing import Any

import pytest

from sidecar.core.details import InvalidInputDetail
from sidecar.core.taxonomy import InvalidInput, NotCarried
from sidecar.providers.formats.anthropic_messages.front import AnthropicFront
from sidecar.providers.formats.anthropic_messages.request import KEYS as ANTHROPIC_KEYS
from sidecar.providers.formats.openai_chat.front import REQUEST_KEYS as CHAT_KEYS
from sidecar.providers.formats.openai_chat.front import OpenAIFront
from sidecar.providers.formats.openai_responses.front import REQUEST_KEYS as RESPONSES_KEYS
from sidecar.providers.formats.openai_responses.front import ResponsesFront
from sidecar.providers.formats.protocol import Front
from sidecar.server.http.params import caller_path, callers_failure

CORE_PATHS = (
    "model",
    "messages",
    "max_output_tokens",
    "temperature",
    "tools[2].name",
    "tools[2].parameters_json",
    "tools[2].cache",
    "tools[2].strict",
    "response_schema_json",
    "reasoning",
    "reasoning.budget_tokens",
    "reasoning.effort",
    "tool_choice.mode",
    "tool_choice.name",
    "parallel_tool_calls",
    "stop[1]",
    "top_p",
    "end_user",
    "system",
    "system_cache",
)
"""The paths the core (providers/schemas.py, core/content.py, the upstreams' checks) names outside messages."""
DOORS: list[tuple[Front, frozenset[str]]] = [
    (AnthropicFront(), ANTHROPIC_KEYS),
    (OpenAIFront(), CHAT_KEYS),
    (ResponsesFront(), RESPONSES_KEYS),
]
UNSET = {"/v1/responses": {"stop[1]"}}
"""What a door's callers cannot ask (the Responses API has no stop sequences): the core never names it there."""


@pytest.mark.parametrize(
    ("front", "keys", "path"),
    [
        pytest.param(front, keys, path, id=f"{front.path}-{path}")
        for front, keys in DOORS
        for path in CORE_PATHS
        if path not in UNSET.get(front.path, set())
    ],
)
def test_every_core_path_is_a_key_the_door_reads(front: Front, keys: frozenset[str], path: str) -> None:
    named = caller_path(front, path, {})
    assert named.split(".")[0].split("[")[0] in keys, named


@pytest.mark.parametrize(
    ("front", "path", "body", "named"),
    [
        (AnthropicFront(), "max_output_tokens", {}, "max_tokens"),
        (OpenAIFront(), "max_output_tokens", {"max_completion_tokens": 5}, "max_completion_tokens"),
        (OpenAIFront(), "max_output_tokens", {"max_tokens": 5}, "max_tokens"),
        (AnthropicFront(), "stop[1]", {}, "stop_sequences[1]"),
        (AnthropicFront(), "tools[2].parameters_json", {}, "tools[2].input_schema"),
        (ResponsesFront(), "end_user", {"user": "u"}, "user"),
        (ResponsesFront(), "messages", {}, "input"),
        (OpenAIFront(), "job.upstream_retries", {}, "header x-sidecar-upstream-retries"),
    ],
    ids=lambda v: getattr(v, "path", str(v)),  # a front by its route: the same id in every xdist worker
)
def test_a_name_the_front_declares(front: Front, path: str, body: dict[str, Any], named: str) -> None:
    assert caller_path(front, path, body) == named


def chat_turn() -> dict[str, Any]:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    call2 = {**call, "id": "c2"}
    return {
        "model": "m",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [call, call2]},
            {"role": "tool", "tool_call_id": "c1", "content": "one"},
            {"role": "tool", "tool_call_id": "c2", "content": "two"},
            {"role": "user", "content": [{"type": "text", "text": "and"}, {"type": "text", "text": "then"}]},
        ],
    }


@pytest.mark.parametrize(
    ("path", "named"),
    [
        ("messages[0]", "messages[1]"),  # the system message is not one of the core's
        ("messages[1].tool_calls[1]", "messages[2]"),
        ("messages[2].tool_results[1]", "messages"),  # two tool messages made it: no one of them is it
        ("messages[3].parts[1].text", "messages[5].content[1]"),
        ("messages[9]", "messages"),  # no such message: the list
    ],
)
def test_a_message_is_the_callers_it_was_read_from(path: str, named: str) -> None:
    assert caller_path(OpenAIFront(), path, chat_turn()) == named


def test_a_renamed_failure_keeps_its_class_attempts_and_words() -> None:
    refused = NotCarried.of(InvalidInput("tools[0].parameters_json", "{}", "must be a schema"))
    refused.attempts = 2
    renamed = callers_failure(AnthropicFront(), refused, {})
    assert type(renamed) is NotCarried
    assert renamed.attempts == 2
    assert renamed.message == "Invalid value for parameter 'tools[0].input_schema' (got {}): must be a schema"
    assert isinstance(renamed.detail, InvalidInputDetail)
    assert renamed.detail.parameter == "tools[0].input_schema"
