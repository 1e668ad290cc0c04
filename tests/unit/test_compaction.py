"""core.compaction: the strategies alone, on plain messages (no server)."""

from __future__ import annotations

from sidecar.core.compaction.cache import SummaryCache
from sidecar.core.compaction.reasoning import REASONING_NOTE, drop_old_reasoning
from sidecar.core.compaction.summary import prefix_end, prefix_key, summary_turns
from sidecar.core.compaction.tool_results import NOTE_PREFIX, shorten_tool_results
from sidecar.core.compaction.turns import last_user_turn
from sidecar.core.conversation import Message, ReasoningPart, ToolCall, ToolCallResult
from sidecar.core.kinds import Role

LONG = "x" * 1000


def asked(i: int) -> Message:
    return Message(Role.ASSISTANT, tool_calls=(ToolCall(f"c{i}", "search", "{}"),))


def answered(i: int, content: str = LONG) -> Message:
    return Message(Role.TOOL, tool_results=(ToolCallResult(f"c{i}", content),))


def loop() -> tuple[Message, ...]:
    return (
        Message(Role.USER, "first"),
        asked(1),
        answered(1),
        asked(2),
        answered(2),
        Message(Role.USER, "second"),
        asked(3),
        answered(3),
    )


def test_the_last_user_turn_is_the_last_user_message_that_says_something() -> None:
    assert last_user_turn(loop()) == 5
    assert last_user_turn((Message(Role.USER, tool_results=(ToolCallResult("c", "r"),)),)) == 0
    assert last_user_turn(()) == 0


def test_tool_results_keep_the_newest_and_note_the_rest_keeping_each_pair() -> None:
    messages, changed = shorten_tool_results(loop(), keep=1)
    assert changed == (2, 4)
    for i in changed:
        (r,) = messages[i].tool_results
        assert r.content.startswith(NOTE_PREFIX)
        assert "tool search" in r.content  # named from its call
        assert "1000 characters" in r.content
        assert r.call_id == f"c{(i // 2)}"
    assert messages[7] == loop()[7]


def test_the_loop_after_the_last_user_turn_is_shortened_but_not_that_turn() -> None:
    messages, changed = shorten_tool_results(loop(), keep=0)
    assert changed == (2, 4, 7)
    assert messages[7].tool_results[0].content.startswith(NOTE_PREFIX)
    said = Message(Role.USER, "and this", tool_results=(ToolCallResult("c3", LONG),))
    kept, changed = shorten_tool_results((*loop()[:7], said), keep=0)
    assert changed == (2, 4)
    assert kept[7] == said


def test_a_short_result_is_left_as_it_is() -> None:
    short = (Message(Role.USER, "q"), asked(1), answered(1, "ok"), Message(Role.USER, "again"))
    assert shorten_tool_results(short, keep=0)[1] == ()


def test_old_reasoning_goes_and_the_current_turns_signed_reasoning_stays() -> None:
    signed = (ReasoningPart("thinking", "sig", format="anthropic"),)
    thought = Message(Role.ASSISTANT, reasoning=signed)
    messages = (
        Message(Role.USER, "a"),
        Message(Role.ASSISTANT, "b", reasoning=signed),
        Message(Role.USER, "c"),
        Message(Role.ASSISTANT, reasoning=signed, tool_calls=(ToolCall("t", "search", "{}"),)),
        answered(9),
    )
    out, changed = drop_old_reasoning(messages)
    assert changed == (1,)
    assert out[1].reasoning == ()
    assert out[1].text == "b"
    assert out[3].reasoning == signed
    only, _ = drop_old_reasoning((Message(Role.USER, "a"), thought, Message(Role.USER, "c")))
    assert only[1].text == REASONING_NOTE  # a provider refuses an empty assistant message


def test_a_summary_replaces_whole_turns_and_the_roles_still_alternate() -> None:
    messages = loop()
    assert prefix_end(messages) == 5  # ends where a user turn begins: every call's result inside it
    user, assistant = summary_turns("it")
    assert (user.role, assistant.role) == (Role.USER, Role.ASSISTANT)
    assert prefix_end((Message(Role.USER, "only"),)) == 0
    assert prefix_end((Message(Role.ASSISTANT, "a"), Message(Role.ASSISTANT, "b"))) == 0


def test_the_cache_key_is_the_prefix_and_the_summarizer() -> None:
    prefix = loop()[:5]
    assert prefix_key(prefix, "cheap", 100) == prefix_key(tuple(prefix), "cheap", 100)
    assert prefix_key(prefix, "cheap", 100) != prefix_key(prefix, "other", 100)
    assert prefix_key(prefix, "cheap", 100) != prefix_key(prefix[:3], "cheap", 100)
    cache = SummaryCache(max_items=2)
    for k in ("a", "b", "c"):
        cache.put(k, k.upper())
    assert cache.get("a") is None
    assert cache.get("c") == "C"
