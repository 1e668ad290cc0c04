"""The fake provider's Azure OpenAI mode, and its request limit with each wire's budget headers."""

from __future__ import annotations

from datetime import datetime, timedelta

import httpx
import pytest

from sidecar.core.clock import FakeClock
from sidecar.fakes import FakeProvider, ThreadedServer
from sidecar.providers.formats.openai_chat.fake_azure import RETRY_AFTER_MS, RETRY_AFTER_S

from .helpers import WIRES, chat, script

Srv = ThreadedServer[FakeProvider]
DEPLOYMENT = "/openai/deployments/dep-1/chat/completions"
BODY = {"messages": [{"role": "user", "content": "hello"}]}


def azure(client: httpx.Client, base: str, path: str = DEPLOYMENT, **headers: str) -> httpx.Response:
    params = {"api-version": "2024-10-21"} if path == DEPLOYMENT else {}
    return client.post(base + path, json=BODY, headers=headers or {"api-key": "az-key-0123456789"}, params=params)


def test_a_deployment_url_is_answered_as_the_deployments_model_with_azures_headers(
    provider: Srv, client: httpx.Client
) -> None:
    resp = azure(client, provider.url)
    assert resp.status_code == 200
    assert resp.json()["model"] == "dep-1"
    assert resp.json()["choices"][0]["message"]["content"] == "You said: hello"
    assert resp.headers["x-ms-region"] == "East US"
    assert resp.headers["x-ratelimit-remaining-requests"] == "119"
    assert "x-ratelimit-reset-requests" not in resp.headers  # Azure tells no reset
    (record,) = provider.server.requests()
    assert (record["wire"], record["model"]) == ("azure", "dep-1")


def test_the_v1_path_reads_the_deployment_from_the_body_and_a_bearer_is_a_credential(
    provider: Srv, client: httpx.Client
) -> None:
    resp = client.post(
        provider.url + "/openai/v1/chat/completions",
        json={**BODY, "model": "dep-2"},
        headers={"authorization": "Bearer entra-token-0123456789"},
    )
    assert resp.status_code == 200
    assert resp.json()["model"] == "dep-2"


def test_no_credential_is_azures_401_and_no_api_version_its_404(provider: Srv, client: httpx.Client) -> None:
    denied = azure(client, provider.url, **{"x-other": "1"})
    assert denied.status_code == 401
    assert denied.json()["error"]["code"] == "401"
    assert "Access denied due to invalid subscription key" in denied.json()["error"]["message"]
    missing = client.post(provider.url + DEPLOYMENT, json=BODY, headers={"api-key": "k" * 16})
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "Resource not found"


def test_a_rate_limit_is_azures_429_with_x_ms_retry_after_ms(provider: Srv, client: httpx.Client) -> None:
    script(client, provider.url, [{"preset": "rate_limit"}, {"preset": "rate_limit", "retry_after_ms": 750}],
           model="dep-1")  # fmt: skip
    first = azure(client, provider.url)
    assert first.status_code == 429
    assert first.json()["error"]["code"] == "429"
    assert "exceeded call rate limit" in first.json()["error"]["message"]
    assert (first.headers["retry-after"], first.headers["x-ms-retry-after-ms"]) == (
        str(RETRY_AFTER_S),
        str(RETRY_AFTER_MS),
    )
    assert "retry-after-ms" not in first.headers
    assert azure(client, provider.url).headers["retry-after-ms"] == "750"


@pytest.mark.parametrize(("preset", "status", "code"), [("invalid_key", 401, "401"),
                                                        ("model_not_found", 404, "DeploymentNotFound")])  # fmt: skip
def test_azures_error_words(provider: Srv, client: httpx.Client, preset: str, status: int, code: str) -> None:
    script(client, provider.url, [{"preset": preset}], model="dep-1")
    resp = azure(client, provider.url)
    assert (resp.status_code, resp.json()["error"]["code"]) == (status, code)


@pytest.mark.parametrize("wire", WIRES)
def test_a_request_limit_tells_its_budget_and_answers_429_past_it(
    provider: Srv, client: httpx.Client, wire: str
) -> None:
    clock = FakeClock()
    provider.server.limit_requests(2, clock, window_s=60)
    first = chat(client, provider.url, wire)
    clock.advance(20)
    second = chat(client, provider.url, wire)
    third = chat(client, provider.url, wire)
    assert [r.status_code for r in (first, second, third)] == [200, 200, 429]
    assert third.headers["retry-after"] == "40"
    assert provider.server.rate_limited == 1
    if wire == "openai":
        told = [(r.headers["x-ratelimit-remaining-requests"], r.headers["x-ratelimit-reset-requests"])
                for r in (first, second, third)]  # fmt: skip
        assert told == [("1", "1m0s"), ("0", "40s"), ("0", "40s")]
        assert first.headers["x-ratelimit-limit-requests"] == "2"
    else:
        at = [datetime.fromisoformat(r.headers["anthropic-ratelimit-requests-reset"]) for r in (first, second, third)]
        assert at == [clock.wall() + timedelta(seconds=40)] * 3  # one window: one reset instant
        assert [r.headers["anthropic-ratelimit-requests-remaining"] for r in (first, second, third)] == ["1", "0", "0"]
    clock.advance(40)
    assert chat(client, provider.url, wire).status_code == 200  # a new window
    provider.server.limit_requests(None)
    assert all(chat(client, provider.url, wire).status_code == 200 for _ in range(3))


def test_azures_request_limit_tells_the_remaining_count_only(provider: Srv, client: httpx.Client) -> None:
    clock = FakeClock()
    provider.server.limit_requests(1, clock, window_s=10)
    ok, limited = azure(client, provider.url), azure(client, provider.url)
    assert (ok.status_code, ok.headers["x-ratelimit-remaining-requests"]) == (200, "0")
    assert "x-ratelimit-reset-requests" not in ok.headers
    assert (limited.status_code, limited.headers["x-ms-retry-after-ms"]) == (429, "10000")


def test_the_limit_is_set_over_http_too(provider: Srv, client: httpx.Client) -> None:
    set_ = client.post(provider.url + "/_fake/limit", json={"requests": 1, "window_s": 30})
    assert set_.json() == {"requests": 1, "window_s": 30.0, "rate_limited": 0}
    assert [chat(client, provider.url, "openai").status_code for _ in range(2)] == [200, 429]
    assert client.get(provider.url + "/_fake/limit").json()["rate_limited"] == 1
    assert client.post(provider.url + "/_fake/limit", json={"requests": "five"}).status_code == 400
    lifted = client.post(provider.url + "/_fake/limit", json={"requests": None})
    assert lifted.json() == {"requests": None, "rate_limited": 0}
    assert chat(client, provider.url, "openai").status_code == 200
