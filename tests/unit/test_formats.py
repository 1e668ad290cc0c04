"""Every registered wire format: its upstream and front halves are each other's inverse.

For each format of ``providers.formats.registry.FORMATS``:

    a request    ChatRequest -> Upstream.body -> Front.parse            is the request the call made
    a reply      ChatReply   -> Front.render -> Upstream.parse          is the reply
    a stream     deltas and a reply -> Front.writer -> SSE text -> Upstream.stream_decoder
                                                                        gives the same deltas and reply
    an error     Front.error_body at a status -> Upstream.classify      the failure the status means

and the configuration, the fake provider and the HTTP doors know every format the registry lists
(``formats/names.py``: derived from its lines, listed nowhere else).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from sidecar.config import Config, ProviderConfig
from sidecar.core.conversation import ToolCall
from sidecar.core.kinds import FailureKind, FinishReason, RetrySignal
from sidecar.core.rate_budget import Allowance, Budget
from sidecar.core.retry import Retry
from sidecar.core.stream import Delta, TextDelta, ToolCallDelta
from sidecar.core.taxonomy import InvalidInput, SidecarFailure
from sidecar.fakes._limits import Taken
from sidecar.fakes.provider import wires
from sidecar.providers.errors import Target
from sidecar.providers.formats.chat import ChatReply, ChatRequest
from sidecar.providers.formats.names import registered
from sidecar.providers.formats.protocol import ReplyHead, Sse, Upstream, WireFormat
from sidecar.providers.formats.registry import FORMATS
from tests.unit.shapes import SHAPES, as_sent, chat, features, read_back

NAMES = sorted(FORMATS)
CALLS = [ToolCall("call_1", "weather", '{"city":"Paris"}'), ToolCall("call_2", "now", "{}")]
REPLIES: dict[str, ChatReply] = {
    "text": ChatReply("Sunny, 18 C.", finish=FinishReason.STOP, input_tokens=12, output_tokens=5),
    "unicode": ChatReply("東京は晴れ。Ünïcode ✓", finish=FinishReason.STOP, input_tokens=3, output_tokens=9),
    "tool calls": ChatReply("", CALLS, FinishReason.TOOL_CALLS, input_tokens=30, output_tokens=14),
    "text and a tool call": ChatReply("Let me look.", CALLS[:1], FinishReason.TOOL_CALLS, input_tokens=8),
    "cut off": ChatReply("The answer is", finish=FinishReason.LENGTH, input_tokens=4, output_tokens=3),
}
HEAD = ReplyHead("reply-1", "model-x", 1_700_000_000)
TARGET = Target("prov", "acct", "m", "up-m", "http://provider/v1/x")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def upstream(fmt: WireFormat) -> Upstream:
    return fmt.upstream(ProviderConfig(wire_format=fmt.name, base_url="http://provider"))


def arguments(calls: list[ToolCall]) -> list[tuple[str, str, Any]]:
    """Tool calls with their arguments as JSON values (a format may re-serialize them)."""
    return [(c.id, c.name, json.loads(c.arguments_json)) for c in calls]


NO_REPLY_HEAD = frozenset({"bedrock_converse"})
"""Formats whose replies name neither their model nor an id (Converse: the request's URL names the model)."""
REFUSED_BY_RULE: dict[str, frozenset[str]] = {
    "bedrock_converse": frozenset({"tool choice: none", "reasoning effort"}),
}
"""Shapes whose features a format carries, but which a rule of its own refuses before sending (``check``):
Converse has no tool choice none, and asks for thinking by a budget, not an effort."""


def same_reply(got: ChatReply | None, want: ChatReply, name: str = "") -> None:
    assert got is not None
    assert (got.text, arguments(got.tool_calls), got.finish) == (want.text, arguments(want.tool_calls), want.finish)
    assert (got.input_tokens, got.output_tokens) == (want.input_tokens, want.output_tokens)
    head = ("", "") if name in NO_REPLY_HEAD else (HEAD.model, HEAD.reply_id)
    assert (got.response_model, got.response_id, got.refusal) == (*head, None)


def deltas_of(reply: ChatReply) -> list[Delta]:
    """A reply as a provider streams it: words of text, then each call's start and argument fragments."""
    words = reply.text.split(" ") if reply.text else []
    out: list[Delta] = [TextDelta(w if i == 0 else " " + w) for i, w in enumerate(words)]
    for i, c in enumerate(reply.tool_calls):
        out.append(ToolCallDelta(i, c.id, c.name, ""))
        out += [ToolCallDelta(i, "", "", c.arguments_json[j : j + 5]) for j in range(0, len(c.arguments_json), 5)]
    return out


def fed(events: list[Sse], fmt: WireFormat) -> tuple[list[Delta], ChatReply | None, bool]:
    """The events as text on the wire, read back by the format's decoder."""
    decoder = upstream(fmt).stream_decoder()
    out: list[Delta] = []
    for name, data in events:
        out += decoder.feed(name, data if isinstance(data, str) else json.dumps(data))
    return out, decoder.reply(), decoder.complete


def joined(deltas: list[Delta]) -> tuple[str, dict[int, tuple[str, str, str]]]:
    text = "".join(d.text for d in deltas if isinstance(d, TextDelta))
    calls: dict[int, tuple[str, str, str]] = {}
    for d in deltas:
        if isinstance(d, ToolCallDelta):
            cid, name, args = calls.get(d.index, ("", "", ""))
            calls[d.index] = (cid or d.id, name or d.name, args + d.arguments_fragment)
    return text, calls


def _shapes(carried: bool) -> list[tuple[str, str]]:
    """(format, shape) for every shape whose features the format carries (or, ``carried`` False, does not)."""
    return [
        (name, shape)
        for name in NAMES
        for shape, request in SHAPES.items()
        if (features(request) <= upstream(FORMATS[name]).carries) is carried
    ]


@pytest.mark.parametrize(("name", "shape"), _shapes(carried=False) or [pytest.param("", "", id="none")])
def test_a_shape_a_format_does_not_carry_is_refused_before_sending(name: str, shape: str) -> None:
    if not name:
        return  # every format carries every shape
    with pytest.raises(InvalidInput, match="does not carry"):
        upstream(FORMATS[name]).check(SHAPES[shape], "m")


def sent(fmt: WireFormat, request: ChatRequest, *, stream: bool = False) -> dict[str, Any]:
    """The body a request goes with, as the format's front reads it: a format whose URL names the model and
    the streaming (Gemini) puts them in the body as its front's ``routed`` says."""
    body = upstream(fmt).body(request, stream=stream)
    routed = getattr(fmt.front, "routed", None)
    if routed is None:
        return body
    found = routed(upstream(fmt).path(request.upstream_model, stream=stream), body)
    assert isinstance(found, dict)
    return found


@pytest.mark.parametrize(("name", "shape"), _shapes(carried=True))
def test_a_request_sent_reads_back_as_the_request(name: str, shape: str) -> None:
    fmt = FORMATS[name]
    original = as_sent(SHAPES[shape])
    if shape in REFUSED_BY_RULE.get(name, ()):
        with pytest.raises(InvalidInput):
            upstream(fmt).check(original, "m")
        return
    ask = fmt.front.parse(sent(fmt, chat(original)))
    assert ask.request == read_back(original, name)
    assert not ask.stream
    assert fmt.front.parse(sent(fmt, chat(original), stream=True)).stream


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("case", list(REPLIES))
def test_a_reply_rendered_reads_back_as_the_reply(name: str, case: str) -> None:
    fmt = FORMATS[name]
    reply = REPLIES[case]
    same_reply(upstream(fmt).parse(fmt.front.render(reply, HEAD, {"attempts": 1})), reply, name)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("case", list(REPLIES))
def test_a_stream_written_reads_back_as_the_same_deltas_and_reply(name: str, case: str) -> None:
    fmt = FORMATS[name]
    reply = REPLIES[case]
    writer = fmt.front.writer(HEAD, include_usage=True)
    events = writer.start(reply.input_tokens)
    sent = deltas_of(reply)
    for delta in sent:
        events += writer.delta(delta)
    events += writer.final(reply, {"attempts": 1})
    got, streamed, complete = fed(events, fmt)
    assert complete
    assert joined(got) == joined(sent)
    same_reply(streamed, reply, name)


@pytest.mark.parametrize("name", NAMES)
def test_a_refusal_rendered_reads_back_as_a_refusal_with_its_words(name: str) -> None:
    fmt = FORMATS[name]
    refusal = ChatReply("", finish=FinishReason.CONTENT_FILTER, refusal="I can't help with that.")
    got = upstream(fmt).parse(fmt.front.render(refusal, HEAD))
    assert got.refusal == "I can't help with that."


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    ("status", "means"),
    [
        (429, RetrySignal.RATE_LIMIT),
        (529, RetrySignal.OVERLOAD),
        (500, RetrySignal.TRANSIENT),
        (503, RetrySignal.TRANSIENT),
        (400, FailureKind.INVALID_INPUT),
        (401, FailureKind.UNAUTHORIZED),
        (404, FailureKind.MODEL_NOT_FOUND),
    ],
)
def test_an_error_a_provider_of_the_format_sends_is_classified_by_its_upstream(
    name: str, status: int, means: RetrySignal | FailureKind
) -> None:
    fmt = FORMATS[name]
    body = fmt.front.error_body("something happened", fmt.front.error_type(status))
    outcome = upstream(fmt).classify(status, {}, json.dumps(body), TARGET, (), NOW)
    if isinstance(means, RetrySignal):
        assert isinstance(outcome, Retry)
        assert outcome.signal is means
    else:
        assert isinstance(outcome, SidecarFailure)
        assert outcome.kind is means


@pytest.mark.parametrize("name", NAMES)
def test_the_budget_a_fake_of_the_format_tells_reads_back_through_its_upstream(name: str) -> None:
    told = wires().by_name[name].budget_headers(Taken(True, 5, 3, 42.5), NOW)
    got = upstream(FORMATS[name]).budget(told, NOW)
    assert got == (Budget(Allowance(3, 42.5)) if told else Budget())  # a format whose fake tells none: nothing
    assert upstream(FORMATS[name]).budget({}, NOW) == Budget()


def test_the_configuration_the_fake_and_the_doors_know_every_format() -> None:
    """All derived from the registry's lines (``formats/names.py``): nothing else lists the formats."""
    for name in NAMES:  # the configuration takes every registered name, and names them all when refusing one
        assert ProviderConfig(wire_format=name, base_url="http://provider").wire_format == name
    with pytest.raises(ValueError, match="must be a wire format: 'openai', 'anthropic', 'gemini'") as refused:
        ProviderConfig(wire_format="cohere", base_url="http://provider")
    assert all(repr(name) in str(refused.value) for name in NAMES)
    fakes = wires().by_name  # ... the fake provider has each format's wire (its ``fakes``), over its front
    assert sorted(fakes) == NAMES
    assert all(fakes[n].front is FORMATS[n].front for n in NAMES)
    paths = [FORMATS[n].front.path for n in NAMES]
    assert len(set(paths)) == len(paths)  # one route each, at the fake and at the HTTP port
    assert {n: FORMATS[n].door for n in NAMES} == {
        "openai": "openai",
        "openai_responses": "openai",
        "anthropic": "anthropic",
        "gemini": None,
        "bedrock_converse": None,
    }


@pytest.mark.parametrize("name", [n for n in NAMES if registered()[n].environment])
def test_what_a_format_reads_from_the_environment_is_a_secret_where_it_is_configured(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its registry line's ``environment`` (Bedrock's AWS credentials): masked with a provider of the format, and
    only then."""
    values = {var: f"{name}-credential-{i}-value" for i, var in enumerate(registered()[name].environment)}
    for var, value in values.items():
        monkeypatch.setenv(var, value)
    other = next(n for n in NAMES if not registered()[n].environment)
    for wire_format, masked in ((name, set(values.values())), (other, set())):
        config = Config.model_validate({"providers": {"p": {"wire_format": wire_format, "base_url": "https://h"}}})
        assert set(config.secrets) == masked
