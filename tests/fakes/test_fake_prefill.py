"""A prefilled request (the conversation ends with an assistant message): the fake continues it.

The reply is what follows the prefill in the reply the request would have got without it, whole
or streamed, on both wires; ``refuse_prefill`` makes the fake answer a prefill with a 400, and the
Anthropic wire keeps the API's rule that a prefill may not end in whitespace.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from sidecar.fakes import FakeProvider, ThreadedServer
from sidecar.fakes._brain import Reply, continued

from .helpers import WIRES, chat, error_of, script, text_of
from .sse import assemble, body_for, events

Srv = ThreadedServer[FakeProvider]
TEXT = "one two three four five six"
REPLY = "You said: one two three four five six"


def prefilled(wire: str, prefill: str) -> list[dict[str, Any]]:
    content: Any = prefill if wire == "openai" else [{"type": "text", "text": prefill}]
    return [{"role": "user", "content": TEXT}, {"role": "assistant", "content": content}]


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("cut", [1, 9, 13, len(REPLY) - 1])
def test_a_whole_reply_continues_the_prefill(provider: Srv, client: httpx.Client, wire: str, cut: int) -> None:
    prefill = REPLY[:cut].rstrip()
    answer = chat(client, provider.url, wire, messages=prefilled(wire, prefill))
    assert answer.status_code == 200
    assert prefill + (text_of(wire, answer.json()) or "") == REPLY


@pytest.mark.parametrize("wire", WIRES)
def test_a_streamed_reply_continues_the_prefill_word_by_word(provider: Srv, client: httpx.Client, wire: str) -> None:
    got = assemble(wire, events(client, provider.url, wire, body_for(wire, messages=prefilled(wire, "You said: one"))))
    assert got.deltas == [" two", " three", " four", " five", " six"]
    assert got.done


@pytest.mark.parametrize("wire", WIRES)
def test_refuse_prefill_answers_a_prefill_with_a_400(provider: Srv, client: httpx.Client, wire: str) -> None:
    script(client, provider.url, [{"refuse_prefill": True}, {"refuse_prefill": True}], model="m")
    refused = chat(client, provider.url, wire, messages=prefilled(wire, "You said:"))
    assert refused.status_code == 400
    assert "does not support assistant message prefill" in error_of(wire, refused.json())["message"]
    plain = chat(client, provider.url, wire, TEXT)  # no prefill: the step answers as usual
    assert plain.status_code == 200
    assert text_of(wire, plain.json()) == REPLY


def test_refuse_prefill_must_be_a_boolean(provider: Srv, client: httpx.Client) -> None:
    answer = client.post(provider.url + "/_fake/script", json={"model": "m", "steps": [{"refuse_prefill": "yes"}]})
    assert answer.status_code == 400


def test_an_anthropic_prefill_may_not_end_in_whitespace(provider: Srv, client: httpx.Client) -> None:
    refused = chat(client, provider.url, "anthropic", messages=prefilled("anthropic", "You said: "))
    assert refused.status_code == 400
    assert "trailing whitespace" in error_of("anthropic", refused.json())["message"]


def test_a_reply_that_does_not_begin_with_the_prefill_is_written_whole_after_it() -> None:
    assert continued(Reply(text="abc"), "xy").text == "abc"
    assert continued(Reply(text="abc"), "ab").text == "c"
    assert continued(Reply(text="abc"), None).text == "abc"
    assert continued(Reply(text=None), "ab").text is None
