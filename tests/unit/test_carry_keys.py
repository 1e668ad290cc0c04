"""Keys a front does not interpret (issue 37): carried to a deployment of the same wire format, refused on another.

The mechanism (``core.conversation.Carried``, ``formats.carried``) through the Anthropic format's halves: its
front gathers each element's unknown keys, its upstream merges them back where they were, and every other
format's ``check`` refuses them by name. tests/formats/test_carry_keys.py proves the same over real processes.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sidecar.core.conversation import Carried, Message, TextPart
from sidecar.core.kinds import Role
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.formats.anthropic_messages.front import parse_request
from sidecar.providers.formats.anthropic_messages.upstream import AnthropicUpstream
from sidecar.providers.formats.carried import Unknown, merge_carried
from sidecar.providers.formats.registry import FORMATS
from tests.unit.shapes import chat
from tests.unit.test_formats import upstream

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "x-unknown": {"deep": [1, 2]}}
TOOL = {"name": "search", "description": "d", "input_schema": SCHEMA, "eager_input_streaming": True}
BODY: dict[str, Any] = {
    "model": "m",
    "max_tokens": 2048,
    "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
    "thinking": {"type": "enabled", "budget_tokens": 1024, "display": "omitted"},
    "tools": [TOOL],
    "messages": [
        {
            "role": "user",
            "x_message": {"a": 1},
            "content": [
                {"type": "text", "text": "hi", "x_block": [1, "two"]},
                {"type": "image", "source": {"type": "url", "url": "https://e.com/a.png", "x_source": 3}},
            ],
        },
    ],
}


def test_unknown_keys_at_every_depth_reach_the_upstream_body_where_they_were() -> None:
    request = parse_request(copy.deepcopy(BODY))
    body = AnthropicUpstream().body(chat(request))
    assert body["context_management"] == BODY["context_management"]
    assert body["thinking"] == BODY["thinking"]
    assert body["tools"][0]["eager_input_streaming"] is True
    assert body["tools"][0]["input_schema"] == SCHEMA
    (message,) = body["messages"]
    assert message["x_message"] == {"a": 1}
    assert message["content"][0] == {"type": "text", "text": "hi", "x_block": [1, "two"]}
    assert message["content"][1]["source"] == {"type": "url", "url": "https://e.com/a.png", "x_source": 3}


def test_a_text_block_that_carries_a_key_stays_a_block() -> None:
    request = parse_request(
        {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi", "z": 1}]}]}
    )
    (message,) = request.messages
    assert message.text == ""
    assert message.parts == (TextPart("hi", carried=Carried("anthropic", {"z": 1}, "messages[0].content[0]", ("z",))),)


@pytest.mark.parametrize("name", sorted(set(FORMATS) - {"anthropic"}))
def test_every_other_format_refuses_the_first_carried_key_by_its_path(name: str) -> None:
    request = parse_request(copy.deepcopy(BODY))
    with pytest.raises(InvalidInput) as caught:
        upstream(FORMATS[name]).check(request, "other")
    detail = caught.value.detail
    assert detail.parameter == "context_management"  # type: ignore[union-attr]
    assert f"carried only to a deployment of the anthropic wire format; model other speaks {name}" in detail.rule  # type: ignore[union-attr]
    tool_only = parse_request({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [TOOL]})
    with pytest.raises(InvalidInput) as caught:
        upstream(FORMATS[name]).check(tool_only, "other")
    assert caught.value.detail.parameter == "tools[0].eager_input_streaming"  # type: ignore[union-attr]
    nested = parse_request({**BODY, "context_management": None, "messages": [{"role": "user", "content": "hi"}]})
    with pytest.raises(InvalidInput) as caught:
        upstream(FORMATS[name]).check(nested, "other")
    assert caught.value.detail.parameter == "thinking.display"  # type: ignore[union-attr]


def test_a_key_under_a_system_block_is_still_refused_by_name() -> None:
    system = [{"type": "text", "text": "be brief", "x": 1}]
    with pytest.raises(InvalidInput) as caught:
        parse_request({"model": "m", "messages": [{"role": "user", "content": "q"}], "system": system})
    assert caught.value.detail.parameter == "system[0].x"  # type: ignore[union-attr]


def test_a_carried_key_the_upstream_also_renders_is_refused_by_name() -> None:
    unknown = Unknown("anthropic")
    unknown.take({"tool_choice": {"type": "any"}}, ())
    with pytest.raises(InvalidInput) as caught:
        merge_carried({"tool_choice": {"type": "auto"}}, unknown.carried(""), "anthropic")
    assert caught.value.detail.parameter == "tool_choice.type"  # type: ignore[union-attr]


def test_objects_merge_key_by_key_and_another_formats_keys_are_not_merged() -> None:
    rendered = {"thinking": {"type": "enabled"}}
    merge_carried(rendered, Carried("anthropic", {"thinking": {"display": "x"}, "y": [1]}), "anthropic")
    assert rendered == {"thinking": {"type": "enabled", "display": "x"}, "y": [1]}
    assert merge_carried({}, Carried("gemini", {"y": 1}), "anthropic") == {}


def test_message_level_keys_ride_on_the_first_message_a_request_message_becomes() -> None:
    content = [
        {"type": "tool_result", "tool_use_id": "t1", "content": "18 C"},
        {"type": "text", "text": "and now?"},
    ]
    request = parse_request({"model": "m", "messages": [{"role": "user", "content": content, "k": True}]})
    first, second = request.messages
    assert first.role is Role.TOOL
    assert first.carried == Carried("anthropic", {"k": True}, "messages[0]", ("k",))
    assert second == Message(Role.USER, "and now?")
    body = AnthropicUpstream().body(chat(request))
    assert body["messages"][0]["k"] is True  # the two are one user turn again
