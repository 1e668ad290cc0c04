"""A client that re-sends a failure does not multiply the provider's calls (server/http/resends.py).

Clients that ignore ``x-should-retry`` (the Vercel AI SDK, LlamaIndex, smolagents) re-send a failure
the sidecar already retried or judged final. The same caller's same request inside the failure's
window gets the same answer at once (``x-sidecar-replayed: true``), with no call: the fake provider
counts the sidecar's own attempts only. The sidecar runs on the fake clock, so each window is
stepped exactly; the clients are plain httpx (and the Vercel AI SDK, a real peer, at the end).
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from sidecar.server.http.resends import FINAL_FAILURE_WINDOW_S, REPLAYED_HEADER
from sidecar.telemetry import names as n
from sidecar.telemetry.testing import InMemoryTelemetry, install_in_memory
from tests.conftest import Running, Start, base_config
from tests.processes.test_telemetry import attrs, tree

HTTP = {"listen": "127.0.0.1:0"}
UPSTREAM = "fake-gpt"
BUDGET = 3
"""tests/conftest.py's policy.upstream_retries: a call makes at most 1 + 3 attempts."""
CHAT = "/v1/chat/completions"
QUOTA = [{"preset": "insufficient_quota", "repeat": 50}]
RATE_LIMIT_S = 7
RATE_LIMITS = [{"preset": "rate_limit", "retry_after": str(RATE_LIMIT_S), "repeat": 50}]
OVERHEAD = "x-sidecar-overhead-ms"
"""Every answer's own time (envelope.Overhead): the one header a replay does not repeat."""
PEER = Path(__file__).resolve().parents[1] / "peers" / "vercel"


def chat(text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"model": "gpt", "messages": [{"role": "user", "content": text}], **extra}


def port_of(r: Running) -> int:
    assert r.app.http is not None
    return r.app.http.port


async def post(
    r: Running, body: dict[str, Any], path: str = CHAT, headers: dict[str, str] | None = None
) -> httpx.Response:
    """One request on a connection of its own, as a client's re-send may be."""
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port_of(r)}", timeout=30) as c:
        return await c.post(path, content=json.dumps(body).encode(), headers=headers or {})


def upstream(r: Running) -> int:
    return len(r.provider.requests(model=UPSTREAM))


def same_answer(first: httpx.Response, again: httpx.Response) -> None:
    """``again`` is ``first`` byte for byte (status, headers, body), replayed."""
    assert again.status_code == first.status_code
    assert again.content == first.content
    assert again.headers[REPLAYED_HEADER] == "true"
    ours = {k: v for k, v in first.headers.items() if k not in (OVERHEAD, "date", "server")}
    theirs = {k: v for k, v in again.headers.items() if k not in (OVERHEAD, "date", "server", REPLAYED_HEADER)}
    assert theirs == ours


async def test_a_quota_error_re_sent_three_times_reaches_the_provider_once(start_sidecar: Start) -> None:
    r = await start_sidecar(http=HTTP)
    r.provider.script(UPSTREAM, QUOTA)
    first = await post(r, chat())
    assert first.status_code == 429
    assert first.json()["error"]["sidecar"]["kind"] == "QUOTA_EXHAUSTED"
    assert REPLAYED_HEADER not in first.headers
    assert upstream(r) == 1  # quota is final: one attempt
    for _ in range(3):
        same_answer(first, await post(r, chat()))
    assert upstream(r) == 1  # not 4


async def test_a_rate_limit_that_outlasted_the_retries_is_replayed_for_its_retry_after(start_sidecar: Start) -> None:
    r = await start_sidecar(http=HTTP)
    r.provider.script(UPSTREAM, RATE_LIMITS)
    first = await post(r, chat())
    assert first.status_code == 429
    assert first.json()["error"]["sidecar"]["kind"] == "UPSTREAM_RETRIES_EXHAUSTED"
    assert first.headers["x-sidecar-attempts"] == str(1 + BUDGET)
    assert first.headers["retry-after"] == str(RATE_LIMIT_S)
    assert upstream(r) == 1 + BUDGET
    for _ in range(3):
        same_answer(first, await post(r, chat()))
    assert upstream(r) == 1 + BUDGET  # the sidecar's own attempts, not 4 times them

    r.clock.advance(2.0)  # the wait counts down, honestly
    later = await post(r, chat())
    assert later.content == first.content
    assert later.headers[REPLAYED_HEADER] == "true"
    assert later.headers["retry-after"] == str(RATE_LIMIT_S - 2)
    assert later.headers["retry-after-ms"] == str((RATE_LIMIT_S - 2) * 1000)
    assert upstream(r) == 1 + BUDGET

    r.clock.advance(RATE_LIMIT_S - 2)  # the wait is over: the call is made again
    again = await post(r, chat())
    assert REPLAYED_HEADER not in again.headers
    assert upstream(r) == 2 * (1 + BUDGET)


async def test_after_a_final_failures_window_the_request_goes_upstream_and_a_success_is_never_replayed(
    start_sidecar: Start,
) -> None:
    r = await start_sidecar(http=HTTP)
    r.provider.script(UPSTREAM, [{"preset": "insufficient_quota"}])  # then the fake's default reply
    first = await post(r, chat())
    assert "retry-after" not in first.headers  # no wait told: the final window, FINAL_FAILURE_WINDOW_S
    r.clock.advance(FINAL_FAILURE_WINDOW_S - 0.01)
    same_answer(first, await post(r, chat()))
    assert upstream(r) == 1
    r.clock.advance(0.02)
    for tries in (2, 3):  # the quota was raised: answered, and a success is not remembered
        again = await post(r, chat())
        assert again.status_code == 200
        assert REPLAYED_HEADER not in again.headers
        assert upstream(r) == tries


async def test_another_body_another_job_or_another_callers_token_is_not_replayed(start_sidecar: Start) -> None:
    mine, theirs = "agent-token-mine-0123456789", "agent-token-theirs-0123456789"
    r = await start_sidecar(http=HTTP, server={"auth": {"tokens": [mine, theirs]}})
    r.provider.script(UPSTREAM, QUOTA)
    as_me = {"authorization": f"Bearer {mine}"}
    await post(r, chat("hi"), headers=as_me)
    assert upstream(r) == 1
    await post(r, chat("hi again"), headers=as_me)  # another body
    assert upstream(r) == 2
    await post(r, chat("hi"), headers={"authorization": f"Bearer {theirs}"})  # another caller
    assert upstream(r) == 3
    await post(r, chat("hi"), headers={**as_me, "x-sidecar-job-id": "job-2"})  # another job
    assert upstream(r) == 4
    replayed = await post(r, chat("hi"), headers={"x-api-key": mine})  # the same token, as the Anthropic SDK sends it
    assert replayed.headers[REPLAYED_HEADER] == "true"
    assert upstream(r) == 4


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (CHAT, chat(stream=True)),
        ("/v1/responses", {"model": "gpt", "input": "hi"}),
        ("/v1/messages", {"model": "gpt", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}),
    ],
    ids=["chat-stream", "responses", "messages"],
)
async def test_every_model_front_replays_and_a_stream_failed_before_its_head_too(
    start_sidecar: Start, path: str, body: dict[str, Any]
) -> None:
    r = await start_sidecar(http=HTTP)
    r.provider.script(UPSTREAM, QUOTA)
    first = await post(r, body, path)
    assert first.status_code in (402, 429)  # the Anthropic front's quota is 402
    same_answer(first, await post(r, body, path))
    assert upstream(r) == 1


@pytest.fixture
def otel() -> InMemoryTelemetry:
    telemetry = install_in_memory()
    telemetry.clear()
    return telemetry


async def test_a_replay_is_counted_and_told_on_its_server_span(start_sidecar: Start, otel: InMemoryTelemetry) -> None:
    r = await start_sidecar(http=HTTP)
    r.provider.script(UPSTREAM, QUOTA)
    for _ in range(3):
        await post(r, chat())
    server = f"POST {CHAT}"
    for _ in range(400):  # a span ends as its answer is written: give the loop that moment
        if len(tree(otel).named(server)) == 3:
            break
        await asyncio.sleep(0.005)
    t = tree(otel)
    first, *again = sorted(t.named(server), key=lambda s: s.start_time or 0)
    assert [c.name for c in t.children(first)] == ["chat gpt"]
    assert not [e for e in first.events if e.name == n.EVENT_REPLAYED]
    for span in again:
        assert t.children(span) == []  # no call
        (event,) = [e for e in span.events if e.name == n.EVENT_REPLAYED]
        assert event.attributes is not None
        assert event.attributes[n.FAILURE_KIND] == "QUOTA_EXHAUSTED"
        assert event.attributes[n.REPLAYED_ATTEMPTS] == 1
        assert attrs(span)[n.HTTP_STATUS] == 429
    points = otel.metrics()[n.METRIC_REPLAYED]
    assert [(dict(p.attributes), p.value) for p in points] == [
        ({n.HTTP_ROUTE: CHAT, n.FAILURE_KIND: "QUOTA_EXHAUSTED"}, 2)
    ]


# ---------------------------------------------------------------- the Vercel AI SDK, a client that re-sends


async def run_vercel(r: Running) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None, "node is missing"
    assert (PEER / "node_modules" / "ai").is_dir(), "tests/peers/vercel is not installed: make peers-deps"
    url = f"http://127.0.0.1:{port_of(r)}"
    proc = await asyncio.create_subprocess_exec(
        node, "agent.mjs", url, "resend", cwd=PEER, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()
    value = json.loads(out.decode().strip().splitlines()[-1])
    assert isinstance(value, dict)
    return value


@pytest.mark.timeout(90)
async def test_the_vercel_ai_sdks_default_re_sends_reach_the_provider_once(start_sidecar: Start) -> None:
    r = await start_sidecar(http=HTTP)
    r.provider.script(UPSTREAM, QUOTA)
    run = await run_vercel(r)  # generateText with the SDK's default retries (2), 2 s and 4 s apart
    assert run["statuses"] == [429, 429, 429]  # it re-sent twice ...
    assert run["replayed"] == [None, "true", "true"]  # ... and got the first answer again
    assert upstream(r) == 1


async def test_a_reload_forgets_every_failure_answered_under_the_config_before(
    start_sidecar: Start, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator who fixed the cause and reloaded (a key, a quota's provider, a route) is not answered
    from memory: the re-send after the reload goes upstream."""
    r = await start_sidecar(http=HTTP)
    r.provider.script(UPSTREAM, QUOTA)
    first = await post(r, chat())
    assert first.status_code == 429
    same_answer(first, await post(r, chat()))
    assert upstream(r) == 1
    assert r.app.reloader is not None
    path = tmp_path / "config.yaml"
    monkeypatch.setenv("SIDECAR_TEST_KEY", "sk-test-SECRETKEY1234567890")
    cfg = base_config(r.provider.url, r.backend.url, http=HTTP)
    for provider in cfg["providers"].values():  # a file read at reload takes its keys from the environment
        provider["api_key"] = "${SIDECAR_TEST_KEY}"
    path.write_text(yaml.safe_dump(cfg))
    r.app.reloader.path = str(path)
    outcome = await r.app.reload()
    assert outcome.applied, outcome.error
    again = await post(r, chat())
    assert REPLAYED_HEADER not in again.headers
    assert upstream(r) == 2
    same_answer(again, await post(r, chat()))  # remembered again, under the config now serving
    assert upstream(r) == 2
