"""A broken stream continued: ``mid_stream: continue`` over StreamModel and both HTTP fronts.

The fake provider continues a prefill deterministically (the rest of the reply it would have
written), so the text a caller reads across the seam is compared with the whole reply exactly:
no word lost, none repeated. Faults: a cut (``drop``, ``reset``, ``end_early``), an error event
(``overloaded``, ``server_error``), a stall on the fake clock; on one model (the next attempt) and
on a route (the next deployment). A deployment that takes no prefill, or refuses one with a 400,
ends the call as before: STREAM_INTERRUPTED with the partial text and the original fault.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic
import openai
import pytest
import pytest_asyncio
import sidecar_client as sc
from sidecar_client import job, pb, user

from sidecar.telemetry import names as n
from sidecar.telemetry.testing import InMemoryTelemetry, install_in_memory
from tests.conftest import Running, Start, timer_set
from tests.policy.test_stream_model import DELTAS, REPLY, TEXT, failing, kinds, restarts, texts, until
from tests.processes.test_telemetry import events as span_events
from tests.processes.test_telemetry import settled

CONTINUE = pb.MID_STREAM_POLICY_CONTINUE
HTTP = {"listen": "127.0.0.1:0"}
UPSTREAM = {
    "gpt": "fake-gpt",
    "gpt-pf": "fake-gpt-pf",
    "claude": "fake-claude",
    "claude-a": "fake-claude-a",
    "claude-b": "fake-claude-b",
    "gpt-b": "fake-gpt-b",
}


def _model(provider: str, name: str, **extra: Any) -> dict[str, Any]:
    return {"provider": provider, "upstream_model": UPSTREAM[name], "context_window": 8000, "max_output_tokens": 2048,
            "default_output_tokens": 256, **extra}  # fmt: skip


MODELS = {
    "gpt-pf": _model("oai", "gpt-pf", prefill=True),  # an OpenAI-compatible server that continues a prefill
    "claude-a": _model("ant", "claude-a", upstream_retries=0),  # broken once, it is done: the route moves on
    "claude-b": _model("ant", "claude-b"),
    "gpt-b": _model("oai", "gpt-b", prefill=False),  # declared: no prefill
    "r-continue": {"route": {"fallbacks": ["claude-a", "claude-b"]}},
    "r-noprefill": {"route": {"fallbacks": ["claude-a", "gpt-b"]}},
    "r-stall": {"route": {"fallbacks": ["gpt-pf", "claude-b"]}},  # gpt-pf has retries left: not spent by a stall
}
HELD = "".join(DELTAS[:3])  # "You said: one"
prefilling = pytest.mark.parametrize("model", ["gpt-pf", "claude"])


@pytest_asyncio.fixture
async def sidecar(start_sidecar: Start) -> Running:
    return await start_sidecar(http=HTTP, models=MODELS)


def script(r: Running, model: str, *steps: dict[str, Any]) -> None:
    r.provider.script(UPSTREAM[model], list(steps))


def sent(r: Running, model: str) -> list[dict[str, Any]]:
    return r.provider.requests(model=UPSTREAM[model])


def prefill_of(request: dict[str, Any]) -> str | None:
    """The text of a request's last message when it is the assistant's (either wire), else None."""
    last = request["body"]["messages"][-1]
    if last["role"] != "assistant":
        return None
    content = last["content"]
    return content if isinstance(content, str) else "".join(b["text"] for b in content)


def continued(events: list[pb.StreamModelEvent]) -> list[pb.StreamContinued]:
    return [e.continued for e in events if e.WhichOneof("event") == "continued"]


async def stream(r: Running, model: str, **kwargs: Any) -> tuple[list[pb.StreamModelEvent], Any]:
    call = r.client.stream_model(model, [user(TEXT)], mid_stream=CONTINUE, **kwargs)
    events = [event async for event in call]
    assert kinds(events)[-1] == "final"
    return events, call


# ---------------------------------------------------------------- StreamModel: the same deployment


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        ("drop", "transient fault"),
        ("reset", "transient fault"),
        ("end_early", "transient fault"),
        ("overloaded", "overload"),
        ("server_error", "transient fault"),
    ],
)
@prefilling
async def test_a_broken_stream_is_continued_with_no_word_lost_or_repeated(
    sidecar: Running, model: str, fault: str, words: str
) -> None:
    script(sidecar, model, {"stream_fault": fault, "after_deltas": 3}, {})
    events, call = await stream(sidecar, model)
    assert kinds(events) == ["text"] * 3 + ["continued"] + ["text"] * (len(DELTAS) - 3) + ["final"]
    assert texts(events) == DELTAS
    (cont,) = continued(events)
    assert cont.attempt == 2
    assert cont.cause == pb.RESTART_CAUSE_UPSTREAM_FAULT
    assert cont.chars_delivered == len(HELD)
    assert cont.reason.startswith(f"{words} after 3 deltas: ")
    final = events[-1].final
    assert call.text == final.message.text == REPLY
    assert restarts(events) == []
    assert call.restarts == 0
    assert list(call.continuations) == [cont]
    assert final.attempts == 2
    first, second = sent(sidecar, model)
    assert prefill_of(first) is None
    assert prefill_of(second) == HELD
    assert final.total_usage.output_tokens > final.usage.output_tokens  # the broken attempt counts too
    assert final.total_usage.input_tokens > final.usage.input_tokens


@prefilling
async def test_the_whitespace_at_the_seam_is_neither_lost_nor_doubled(sidecar: Running, model: str) -> None:
    # 5-char deltas: "You s", "aid: " -- the caller holds a trailing space, which no prefill may end with
    script(sidecar, model, {"stream_fault": "drop", "after_deltas": 2, "delta_chars": 5}, {"delta_chars": 5})
    events, call = await stream(sidecar, model)
    assert "".join(texts(events)) == call.text == events[-1].final.message.text == REPLY
    assert prefill_of(sent(sidecar, model)[1]) == "You said:"
    assert continued(events)[0].chars_delivered == len("You said: ")


@prefilling
async def test_a_stream_cut_after_its_last_word_is_continued_by_nothing_more(sidecar: Running, model: str) -> None:
    script(sidecar, model, {"stream_fault": "drop", "after_deltas": len(DELTAS)}, {})
    events, call = await stream(sidecar, model)
    assert kinds(events) == ["text"] * len(DELTAS) + ["continued", "final"]  # announced before the final
    assert call.text == events[-1].final.message.text == REPLY
    assert continued(events)[0].chars_delivered == len(REPLY)


@prefilling
async def test_a_stall_is_continued_on_the_fake_clock(sidecar: Running, model: str) -> None:
    script(sidecar, model, {"stream_fault": "stall", "after_deltas": 2}, {})
    call = sidecar.client.stream_model(model, [user(TEXT)], mid_stream=CONTINUE)
    events = [await call.__anext__(), await call.__anext__()]
    assert texts(events) == DELTAS[:2]  # held by the caller: the sidecar handed them on and reads on
    await timer_set(sidecar.clock, "the stream's idle watch", 30)
    sidecar.clock.advance(30)  # stream_idle_timeout_s: 30 s without a byte
    events += [event async for event in call]
    (cont,) = continued(events)
    assert cont.reason == "transient fault after 2 deltas: no bytes for 30 s"
    assert texts(events) == DELTAS
    assert call.text == REPLY
    assert prefill_of(sent(sidecar, model)[1]) == "".join(DELTAS[:2])


@pytest.mark.parametrize("policy", [CONTINUE, pb.MID_STREAM_POLICY_RESTART])
async def test_a_stall_on_a_route_goes_on_with_the_next_deployment_not_the_stalled_one(
    sidecar: Running, policy: Any
) -> None:
    """A stalled deployment stalls again: the route's next deployment continues (or restarts) the stream at
    once, though the stalled one had retries left."""
    script(sidecar, "gpt-pf", {"stream_fault": "stall", "after_deltas": 2}, {})
    call = sidecar.client.stream_model("r-stall", [user(TEXT)], mid_stream=policy)
    events = [await call.__anext__(), await call.__anext__()]
    assert texts(events) == DELTAS[:2]
    await timer_set(sidecar.clock, "the stream's idle watch", 30)
    sidecar.clock.advance(30)  # gRPC's batch preset: 30 s without a byte
    events += [event async for event in call]
    final = events[-1].final
    assert final.served_by == "claude-b"
    assert call.text == final.message.text == REPLY
    assert len(sent(sidecar, "gpt-pf")) == 1  # not sent again
    if policy == CONTINUE:
        (cont,) = continued(events)
        assert cont.cause == pb.RESTART_CAUSE_FAILOVER
        assert texts(events) == DELTAS
        assert prefill_of(sent(sidecar, "claude-b")[0]) == "".join(DELTAS[:2])
    else:
        assert [r.cause for r in restarts(events)] == [pb.RESTART_CAUSE_FAILOVER]
        assert prefill_of(sent(sidecar, "claude-b")[0]) is None


@prefilling
async def test_a_continuation_broken_again_is_continued_again_within_the_budget(sidecar: Running, model: str) -> None:
    script(
        sidecar,
        model,
        {"stream_fault": "overloaded", "after_deltas": 2},
        {"preset": "rate_limit", "retry_after": "1"},  # the continuation waits like any attempt
        {"stream_fault": "drop", "after_deltas": 3},
        {},
    )
    events, call = await stream(sidecar, model)
    assert [(c.attempt, c.chars_delivered) for c in continued(events)] == [
        (3, len("".join(DELTAS[:2]))),
        (4, len("".join(DELTAS[:5]))),
    ]
    assert texts(events) == DELTAS
    assert call.text == REPLY
    assert [prefill_of(r) for r in sent(sidecar, model)] == [None, "You said:", "You said:", "".join(DELTAS[:5])]


@prefilling
async def test_no_attempt_left_is_stream_interrupted_with_the_partial_text(sidecar: Running, model: str) -> None:
    script(sidecar, model, {"stream_fault": "overloaded", "after_deltas": 3}, {"preset": "server_error"})
    events, err = await failing(
        sidecar, model, sc.StreamInterruptedError, mid_stream=CONTINUE, job=job(upstream_retries=1)
    )
    assert texts(events) == DELTAS[:3]
    assert continued(events) == []
    assert err.partial_text == HELD
    assert "overload after 3 deltas" in err.stream.reason
    assert "retry budget of 1 is spent" in err.stream.reason


# ---------------------------------------------------------------- StreamModel: what cannot continue


async def test_a_deployment_without_prefill_ends_with_stream_interrupted(sidecar: Running) -> None:
    script(sidecar, "gpt-b", {"stream_fault": "overloaded", "after_deltas": 3}, {})
    events, err = await failing(sidecar, "gpt-b", sc.StreamInterruptedError, mid_stream=CONTINUE)
    assert texts(events) == DELTAS[:3]
    assert err.partial_text == HELD
    assert err.stream.deltas_sent == 3
    assert "overload after 3 deltas" in err.stream.reason
    assert "model gpt-b takes no prefill to continue it" in err.stream.reason
    assert len(sent(sidecar, "gpt-b")) == 1  # nothing re-sent behind the caller's back
    assert sidecar.app.models.throttle("gpt-b").throttle > 0  # type: ignore[union-attr]  # it heard the overload


async def test_a_deployment_that_declares_nothing_is_tried_with_a_prefill(sidecar: Running) -> None:
    """``gpt`` (an OpenAI-compatible server, no ``prefill`` key): the continuation is tried, and it continues."""
    script(sidecar, "gpt", {"stream_fault": "drop", "after_deltas": 3})
    events, call = await stream(sidecar, "gpt")
    assert texts(events) == DELTAS
    assert call.text == REPLY
    assert [prefill_of(r) for r in sent(sidecar, "gpt")] == [None, HELD]


async def test_a_prefill_refused_by_a_deployment_that_declares_nothing_is_learned(sidecar: Running) -> None:
    """The 400 to its prefilled request ends the first call as a refusal; the next broken stream on it is
    not sent a prefill again: the deployment is taken as one with none (``streaming/prefills.py``)."""
    script(sidecar, "gpt", {"stream_fault": "drop", "after_deltas": 3}, {"refuse_prefill": True})
    _, first = await failing(sidecar, "gpt", sc.StreamInterruptedError, mid_stream=CONTINUE)
    assert "model gpt refused to continue it (400: " in first.stream.reason
    assert [prefill_of(r) for r in sent(sidecar, "gpt")] == [None, HELD]
    script(sidecar, "gpt", {"stream_fault": "drop", "after_deltas": 3}, {})
    _, second = await failing(sidecar, "gpt", sc.StreamInterruptedError, mid_stream=CONTINUE)
    assert "model gpt takes no prefill to continue it" in second.stream.reason
    assert [prefill_of(r) for r in sent(sidecar, "gpt")] == [None, HELD, None]  # no second refused prefill


def test_openais_own_api_is_never_sent_a_prefill() -> None:
    """api.openai.com answers a trailing assistant message afresh (no 400 to learn from): declared no."""
    from sidecar.config import ModelConfig, ProviderConfig
    from sidecar.providers.streaming.prefills import declared_prefill

    model = ModelConfig(provider="o", upstream_model="gpt-4o", context_window=8000, max_output_tokens=100)
    own = ProviderConfig(wire_format="openai", base_url="https://api.openai.com/v1")
    compatible = ProviderConfig(wire_format="openai", base_url="http://vllm.internal:8000/v1")
    assert declared_prefill(model, own) is False
    assert declared_prefill(model, compatible) is None
    assert declared_prefill(model, compatible.model_copy(update={"prefill": True})) is True


async def test_a_prefill_refused_with_a_400_reports_the_original_fault(sidecar: Running) -> None:
    script(sidecar, "claude", {"stream_fault": "drop", "after_deltas": 3}, {"refuse_prefill": True})
    events, err = await failing(sidecar, "claude", sc.StreamInterruptedError, mid_stream=CONTINUE)
    assert texts(events) == DELTAS[:3]
    assert err.partial_text == HELD
    assert err.stream.reason.startswith("transient fault after 3 deltas: ")
    assert "model claude refused to continue it (400: " in err.stream.reason
    assert err.attempts == 2
    assert [prefill_of(r) for r in sent(sidecar, "claude")] == [None, HELD]


async def test_tool_call_deltas_are_not_continued(sidecar: Running) -> None:
    reply = {"preset": "reply", "text": "", "tool_calls": [{"name": "search", "arguments": {"query": "jitter"}}]}
    script(sidecar, "claude", {**reply, "stream_fault": "overloaded", "after_deltas": 2}, reply)
    events, err = await failing(sidecar, "claude", sc.StreamInterruptedError, mid_stream=CONTINUE)
    assert "tool_call" in kinds(events)
    assert "which no prefill continues" in err.stream.reason
    assert len(sent(sidecar, "claude")) == 1


# ---------------------------------------------------------------- StreamModel: a route's next deployment


async def test_a_route_continues_on_its_next_deployment(sidecar: Running) -> None:
    script(sidecar, "claude-a", {"stream_fault": "drop", "after_deltas": 3})
    events, call = await stream(sidecar, "r-continue")
    assert kinds(events) == ["text"] * 3 + ["continued"] + ["text"] * (len(DELTAS) - 3) + ["final"]
    assert texts(events) == DELTAS
    (cont,) = continued(events)
    assert cont.cause == pb.RESTART_CAUSE_FAILOVER
    assert cont.attempt == 1  # numbered within the new hop, as a FAILOVER restart is (tests/conformance)
    assert cont.chars_delivered == len(HELD)
    assert "continued on claude-b" in cont.reason
    final = events[-1].final
    assert call.text == final.message.text == REPLY
    assert final.served_by == "claude-b"
    assert [h.deployment for h in final.hops] == ["claude-a", "claude-b"]
    assert prefill_of(sent(sidecar, "claude-b")[0]) == HELD
    assert final.total_usage.output_tokens > final.usage.output_tokens


async def test_a_cut_stream_whose_fallback_refuses_a_prefill_ends_cleanly(sidecar: Running) -> None:
    script(sidecar, "claude-a", {"stream_fault": "drop", "after_deltas": 3})
    script(sidecar, "claude-b", {"refuse_prefill": True})
    events, err = await failing(sidecar, "r-continue", sc.StreamInterruptedError, mid_stream=CONTINUE)
    assert texts(events) == DELTAS[:3]
    assert err.partial_text == HELD
    assert "transient fault after 3 deltas" in err.message
    assert "refused to continue it (400" in err.message
    assert len(sent(sidecar, "claude-b")) == 1


async def test_a_route_whose_fallback_takes_no_prefill_does_not_try_it(sidecar: Running) -> None:
    script(sidecar, "claude-a", {"stream_fault": "overloaded", "after_deltas": 3})
    events, err = await failing(sidecar, "r-noprefill", sc.StreamInterruptedError, mid_stream=CONTINUE)
    assert texts(events) == DELTAS[:3]
    assert err.partial_text == HELD
    assert sent(sidecar, "gpt-b") == []


# ---------------------------------------------------------------- malformed events


@pytest.mark.parametrize("model", ["gpt", "claude"])
async def test_an_unreadable_event_is_skipped_with_a_warning(sidecar: Running, model: str) -> None:
    script(sidecar, model, {"stream_fault": "garbled", "after_deltas": 3})
    events, _ = await stream(sidecar, model)
    final = events[-1].final
    assert final.attempts == 1
    assert restarts(events) == continued(events) == []
    assert texts(events) == DELTAS[:3] + DELTAS[4:]  # the skipped event's word is what is missing
    (warning,) = final.warnings
    assert "not JSON after 3 deltas; it was skipped" in warning
    assert len(sent(sidecar, model)) == 1


async def test_more_unreadable_events_than_are_skipped_are_a_fault_that_is_continued(sidecar: Running) -> None:
    from sidecar.providers.streaming.sender import MAX_SKIPPED_EVENTS

    garbled = MAX_SKIPPED_EVENTS + 1
    one_char = {"delta_chars": 1}  # 37 deltas: room for the garbled events and more
    script(sidecar, "claude", {"stream_fault": "garbled", "after_deltas": 3, "garbled_events": garbled, **one_char},
           one_char)  # fmt: skip
    events, call = await stream(sidecar, "claude")
    final = events[-1].final
    assert call.text == final.message.text == REPLY  # what the skipped events held was written again
    assert len(final.warnings) == MAX_SKIPPED_EVENTS
    (cont,) = continued(events)
    assert "unreadable events skipped before it" in cont.reason
    assert prefill_of(sent(sidecar, "claude")[1]) == "You"


@pytest.mark.parametrize("model", ["gpt", "claude"])
async def test_a_stream_without_its_end_marker_finishes_at_once_with_its_usage(sidecar: Running, model: str) -> None:
    script(sidecar, model, {"stream_fault": "no_end_marker"})
    events, call = await stream(sidecar, model)
    final = events[-1].final
    assert call.text == final.message.text == REPLY
    assert final.attempts == 1
    assert final.usage.output_tokens > 0
    assert final.usage.input_tokens > 0
    assert sidecar.clock.sleeps == []  # no wait, no retry: the body's end is the reply's end


# ---------------------------------------------------------------- the trace


@pytest.fixture
def otel() -> InMemoryTelemetry:
    telemetry = install_in_memory()
    telemetry.clear()
    return telemetry


async def test_the_continuation_and_a_skipped_event_are_span_events(sidecar: Running, otel: InMemoryTelemetry) -> None:
    script(sidecar, "claude", {"stream_fault": "garbled", "after_deltas": 1}, {})
    await stream(sidecar, "claude")
    script(sidecar, "claude", {"stream_fault": "drop", "after_deltas": 3}, {})
    await stream(sidecar, "claude")
    await settled(otel, "chat claude")
    chats = [s for s in otel.spans() if s.name == "chat claude"]
    assert len(chats) == 2
    skipped = [e for s in otel.spans() for e in span_events(s) if e[0] == n.EVENT_STREAM_EVENT_SKIPPED]
    assert len(skipped) == 1
    assert skipped[0][1][n.ATTEMPT] == 1
    (cont,) = [e for s in chats for e in span_events(s) if e[0] == n.EVENT_STREAM_CONTINUED]
    assert cont[1][n.CONTINUED_CHARS] == len(HELD)
    assert cont[1][n.RESTART_CAUSE] == "upstream_fault"
    assert cont[1][n.ATTEMPT] == 2


# ---------------------------------------------------------------- the HTTP fronts, with the official SDKs


def http_url(r: Running, suffix: str = "") -> str:
    assert r.app.http is not None
    return f"http://127.0.0.1:{r.app.http.port}{suffix}"


@pytest.mark.parametrize("fault", ["drop", "overloaded", "reset"])
@pytest.mark.parametrize("model", ["gpt-pf", "claude", "r-continue"])
async def test_a_plain_openai_client_reads_one_complete_answer(sidecar: Running, model: str, fault: str) -> None:
    broken = "claude-a" if model == "r-continue" else model
    script(sidecar, broken, {"stream_fault": fault, "after_deltas": 3}, {})
    async with openai.AsyncOpenAI(base_url=http_url(sidecar, "/v1"), api_key="unused", max_retries=0) as client:
        chunks = [c async for c in await client.chat.completions.create(model=model, messages=[
            {"role": "user", "content": TEXT}], stream=True)]  # fmt: skip
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == REPLY
    ext = (chunks[-1].model_extra or {})["sidecar"]
    (cont,) = ext["continued"]
    assert cont["chars_delivered"] == len(HELD)
    assert cont["cause"] == ("failover" if model == "r-continue" else "upstream_fault")
    assert ext["attempts"] == 2


@pytest.mark.parametrize("fault", ["drop", "overloaded", "server_error"])
@pytest.mark.parametrize("model", ["claude", "gpt-pf", "r-continue"])
async def test_a_plain_anthropic_client_reads_one_complete_answer(sidecar: Running, model: str, fault: str) -> None:
    broken = "claude-a" if model == "r-continue" else model
    script(sidecar, broken, {"stream_fault": fault, "after_deltas": 3}, {})
    pieces: list[str] = []
    extra: dict[str, Any] = {}
    async with anthropic.AsyncAnthropic(base_url=http_url(sidecar), api_key="unused", max_retries=0) as client:
        messages: Any = [{"role": "user", "content": TEXT}]
        async with client.messages.stream(model=model, max_tokens=100, messages=messages) as events:
            async for event in events:
                if event.type == "text":
                    pieces.append(event.text)
                elif event.type == "message_delta":
                    extra = (event.model_extra or {})["sidecar"]
            message = await events.get_final_message()
    assert "".join(pieces) == REPLY
    assert [b.text for b in message.content if b.type == "text"] == [REPLY]  # one text block, not two
    (cont,) = extra["continued"]
    assert cont["chars_delivered"] == len(HELD)


async def test_a_stall_through_the_openai_front_is_continued(sidecar: Running) -> None:
    script(sidecar, "claude", {"stream_fault": "stall", "after_deltas": 2}, {})
    pieces: list[str] = []
    async with openai.AsyncOpenAI(base_url=http_url(sidecar, "/v1"), api_key="unused", max_retries=0) as client:
        stream = await client.chat.completions.create(
            model="claude", messages=[{"role": "user", "content": TEXT}], stream=True
        )

        async def read() -> None:
            async for chunk in stream:
                if chunk.choices:
                    pieces.append(chunk.choices[0].delta.content or "")

        reading = asyncio.ensure_future(read())
        await until(lambda: "".join(pieces) == "".join(DELTAS[:2]), "the first two deltas were read")
        await timer_set(sidecar.clock, "the stream's idle watch", 30)  # the caller holds them: read on
        sidecar.clock.advance(30)
        await asyncio.wait_for(reading, 30)
    assert "".join(pieces) == REPLY


async def test_an_openai_deployment_without_prefill_still_ends_with_the_error_event(sidecar: Running) -> None:
    script(sidecar, "gpt-b", {"stream_fault": "drop", "after_deltas": 3}, {})
    pieces: list[str] = []
    async with openai.AsyncOpenAI(base_url=http_url(sidecar, "/v1"), api_key="unused", max_retries=0) as client:
        stream = await client.chat.completions.create(
            model="gpt-b", messages=[{"role": "user", "content": TEXT}], stream=True
        )

        async def read() -> None:
            async for chunk in stream:
                if chunk.choices:
                    pieces.append(chunk.choices[0].delta.content or "")

        with pytest.raises(openai.APIError) as caught:
            await read()
    body = caught.value.body
    assert isinstance(body, dict)
    failure = body["sidecar"]["failure"] if "sidecar" in body else body["error"]["sidecar"]["failure"]
    assert failure["stream"]["partial_text"] == "".join(pieces) == HELD
    assert len(sent(sidecar, "gpt-b")) == 1


async def test_the_header_chooses_another_policy_and_refuses_a_bad_one(sidecar: Running) -> None:
    import httpx

    body = {"model": "claude", "max_tokens": 50, "messages": [{"role": "user", "content": TEXT}], "stream": True}
    async with httpx.AsyncClient(base_url=http_url(sidecar)) as raw:
        bad = await raw.post("/v1/messages", json=body, headers={"x-sidecar-mid-stream": "resume"})
        assert bad.status_code == 400
        assert "must be continue, fail or restart" in bad.text
        script(sidecar, "claude", {"stream_fault": "drop", "after_deltas": 3}, {})
        failed = await raw.post("/v1/messages", json=body, headers={"x-sidecar-mid-stream": "fail"})
    assert "event: error" in failed.text
    assert "STREAM_INTERRUPTED" in failed.text
    assert len(sent(sidecar, "claude")) == 1
