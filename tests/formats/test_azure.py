"""Azure OpenAI (``providers[].azure`` on ``wire_format: openai``) through the running sidecar.

gRPC in, the fake provider's Azure mode out (``sidecar/providers/formats/openai_chat/fake_azure.py``), on
loopback: deployment
URLs with ``api-version`` and the v1 path; the key in ``api-key``, or an Entra token as a bearer;
a 429's ``x-ms-retry-after-ms`` and ``retry-after-ms`` waited to the millisecond on the fake clock;
Azure's content filter (a 400 ``content_filter`` / ResponsibleAIPolicyViolation, a reply and a
stream that finish ``content_filter``) as PROVIDER_REFUSAL with the filter's categories, never
retried; Azure's 401 and DeploymentNotFound; and pacing by Azure's remaining-requests header (it
tells no reset: the hold is ``UNKNOWN_RESET_S``) so that a steady caller meets no 429.
"""

from __future__ import annotations

from typing import Any

import pytest
import sidecar_client as sc
from sidecar_client import pb, user

from sidecar.config import Config
from sidecar.config.catalog import AZURE_API_VERSION
from sidecar.config.errors import ConfigError
from sidecar.config.loading import parse_config
from sidecar.core.rate_budget import UNKNOWN_RESET_S
from sidecar.fakes._threaded import ThreadedServer
from sidecar.fakes.provider import FakeProvider
from sidecar.providers.formats.openai_chat.fake_azure import RETRY_AFTER_MS
from tests.conftest import Running, Start, base_config

KEY = "azure-test-SECRETKEY-1234567890"
TOKEN = "eyJ0eXAiOiJKV1QiLCJhbGciOi.entra-SECRET-token-0987654321"
DEPLOYMENT = "gpt4o-prod"
AZ = {
    "provider": "az",
    "upstream_model": DEPLOYMENT,
    "context_window": 8000,
    "max_output_tokens": 2048,
    "default_output_tokens": 256,
}
CHAT = f"/openai/deployments/{DEPLOYMENT}/chat/completions"
FILTER_WORDS = "The response was filtered due to the prompt triggering Azure OpenAI's content management policy"


async def azure(start: Start, url: str, *, key: bool = True, **azure_options: Any) -> Running:
    provider: dict[str, Any] = {"wire_format": "openai", "base_url": url, "azure": azure_options}
    if key:
        provider["api_key"] = KEY
    return await start(providers={"az": provider}, models={"az": AZ})


@pytest.fixture
async def az(start_sidecar: Start, provider: ThreadedServer[FakeProvider]) -> Running:
    return await azure(start_sidecar, provider.url)


def script(r: Running, *steps: dict[str, Any]) -> None:
    r.provider.script(DEPLOYMENT, list(steps))


def sent(r: Running) -> list[dict[str, Any]]:
    return r.provider.requests(model=DEPLOYMENT)


async def read_into(into: list[Any], stream: Any) -> None:
    async for item in stream:
        into.append(item)


async def failed(r: Running) -> sc.SidecarError:
    with pytest.raises(sc.SidecarError) as caught:
        await r.client.call_model("az", [user("hello")])
    return caught.value


# ---------------------------------------------------------------- URLs and credentials


async def test_a_call_goes_to_the_deployment_url_with_the_api_version_and_the_key_in_api_key(az: Running) -> None:
    reply = await az.client.call_model("az", [user("hello there")])
    assert reply.message.text == "You said: hello there"
    assert (reply.attempts, reply.provider) == (1, "az")
    (record,) = sent(az)
    assert (record["path"], record["query"], record["wire"]) == (CHAT, {"api-version": AZURE_API_VERSION}, "azure")
    assert record["headers"]["api-key"] == KEY
    assert "authorization" not in record["headers"]
    assert KEY not in reply.SerializeToString().decode("utf-8", "replace")


async def test_a_stream_goes_to_the_deployment_url_too(az: Running) -> None:
    events = [e async for e in az.client.stream_model("az", [user("one two three")])]
    assert events[-1].final.message.text == "You said: one two three"
    (record,) = sent(az)
    assert (record["path"], record["stream"]) == (CHAT, True)
    assert record["query"] == {"api-version": AZURE_API_VERSION}


async def test_the_v1_path_names_the_deployment_in_the_body_and_an_api_version_only_when_set(
    start_sidecar: Start, provider: ThreadedServer[FakeProvider]
) -> None:
    r = await azure(start_sidecar, provider.url, path="v1")
    assert (await r.client.call_model("az", [user("hi")])).message.text == "You said: hi"
    (record,) = sent(r)
    assert (record["path"], record["query"], record["body"]["model"]) == ("/openai/v1/chat/completions", {}, DEPLOYMENT)
    preview = await azure(start_sidecar, provider.url, path="v1", api_version="preview")
    await preview.client.call_model("az", [user("hi")])
    assert sent(r)[-1]["query"] == {"api-version": "preview"}


async def test_an_entra_token_goes_as_a_bearer_and_no_api_key(
    start_sidecar: Start, provider: ThreadedServer[FakeProvider]
) -> None:
    r = await azure(start_sidecar, provider.url, key=False, entra_token=TOKEN, api_version="2025-01-01-preview")
    await r.client.call_model("az", [user("hi")])
    (record,) = sent(r)
    assert record["headers"]["authorization"] == f"Bearer {TOKEN}"
    assert "api-key" not in record["headers"]
    assert record["query"] == {"api-version": "2025-01-01-preview"}
    assert TOKEN in r.app.config.secrets  # masked wherever text leaves the sidecar


async def test_no_credential_is_azures_401_unauthorized_at_once(
    start_sidecar: Start, provider: ThreadedServer[FakeProvider]
) -> None:
    r = await azure(start_sidecar, provider.url, key=False)
    err = await failed(r)
    assert isinstance(err, sc.UnauthorizedError)
    assert f"{CHAT}: HTTP 401. An operator must fix the configured key." in err.message  # the code is the status
    assert err.http is not None
    assert err.http.status_code == 401
    assert len(sent(r)) == 1


# ---------------------------------------------------------------- Retry-After to the millisecond


async def test_a_429_waits_x_ms_retry_after_ms_on_the_fake_clock(az: Running) -> None:
    script(az, {"preset": "rate_limit"})
    reply = await az.client.call_model("az", [user("hi")])
    assert reply.attempts == 2
    assert RETRY_AFTER_MS / 1000 in az.clock.sleeps  # 1.25 s, not the retry-after's whole 2 s
    assert 2.0 not in az.clock.sleeps


async def test_retry_after_ms_is_read_before_x_ms_retry_after_ms(az: Running) -> None:
    script(az, {"preset": "rate_limit", "retry_after_ms": "750"})
    assert (await az.client.call_model("az", [user("hi")])).attempts == 2
    assert 0.75 in az.clock.sleeps
    assert RETRY_AFTER_MS / 1000 not in az.clock.sleeps


async def test_a_429_pauses_the_model_for_every_caller_and_gives_up_after_the_budget(az: Running) -> None:
    script(az, *[{"preset": "rate_limit"}] * 4)
    err = await failed(az)
    assert isinstance(err, sc.UpstreamRetriesExhaustedError)
    assert err.detail.last_signal == pb.RETRY_SIGNAL_RATE_LIMIT
    assert len(sent(az)) == 4
    assert az.clock.sleeps.count(RETRY_AFTER_MS / 1000) == 3


# ---------------------------------------------------------------- the content filter


@pytest.mark.parametrize(
    ("step", "category", "words"),
    [
        ({"preset": "content_filter"}, "hate", FILTER_WORDS),
        ({"preset": "content_filter", "categories": ["self_harm", "violence"]}, "self_harm,violence", FILTER_WORDS),
        ({"preset": "reply", "finish": "content_filter", "categories": ["sexual"]}, "sexual", ""),
        ({"preset": "reply", "finish": "content_filter"}, "", ""),
    ],
)
async def test_the_content_filter_is_provider_refusal_with_its_categories_never_retried(
    az: Running, step: dict[str, Any], category: str, words: str
) -> None:
    script(az, step, step, step)
    err = await failed(az)
    assert isinstance(err, sc.ProviderRefusalError)
    assert err.correctable is False
    assert err.attempts == 1
    if category:
        assert err.detail.category == category
    assert words in err.detail.explanation
    assert len(sent(az)) == 1
    if step["preset"] == "content_filter":
        assert err.http is not None
        assert err.http.status_code == 400
        assert '"ResponsibleAIPolicyViolation"' in err.http.body
    assert KEY not in str(err.failure)


async def test_a_streamed_reply_that_finishes_content_filter_names_its_categories(az: Running) -> None:
    script(az, {"preset": "reply", "text": "some words", "finish": "content_filter", "categories": ["violence"]})
    with pytest.raises(sc.ProviderRefusalError) as caught:
        await read_into([], az.client.stream_model("az", [user("hi")]))
    assert caught.value.detail.category == "violence"
    assert len(sent(az)) == 1


async def test_the_filter_mid_stream_is_a_refusal_not_a_restart(az: Running) -> None:
    script(az, {"stream_fault": "content_filter", "after_deltas": 2, "categories": ["jailbreak"]}, {})
    events: list[pb.StreamModelEvent] = []
    with pytest.raises(sc.ProviderRefusalError) as caught:
        await read_into(events, az.client.stream_model("az", [user("one two three four")]))
    assert caught.value.detail.category == "jailbreak"
    assert "restart" not in [e.WhichOneof("event") for e in events]
    assert len(sent(az)) == 1


@pytest.mark.parametrize(
    ("step", "error", "status"),
    [
        ({"preset": "invalid_key"}, sc.UnauthorizedError, 401),
        ({"preset": "model_not_found"}, sc.ModelNotFoundError, 404),
        ({"preset": "context_too_long"}, sc.ContextOverflowError, 400),
    ],
)
async def test_azures_terminal_answers_fail_at_once_with_their_kind(
    az: Running, step: dict[str, Any], error: type[sc.SidecarError], status: int
) -> None:
    script(az, step)
    err = await failed(az)
    assert isinstance(err, error)
    assert err.http is not None
    assert err.http.status_code == status
    assert len(sent(az)) == 1
    assert KEY not in err.message
    assert KEY not in err.http.body


# ---------------------------------------------------------------- pacing by Azure's remaining counts


async def test_azures_remaining_requests_hold_a_steady_caller_before_the_429(az: Running) -> None:
    az.provider.limit_requests(5, az.clock, window_s=UNKNOWN_RESET_S)
    replies = [await az.client.call_model("az", [user(f"call {i}")]) for i in range(12)]
    assert all(r.attempts == 1 for r in replies)
    assert az.provider.rate_limited == 0
    assert [w for w in az.clock.sleeps if w >= 1] == [UNKNOWN_RESET_S] * 2  # 4 calls a window: the 5th kept
    assert [r["headers"].get("api-key") for r in sent(az)] == [KEY] * 12


# ---------------------------------------------------------------- configuration


def provider_config(**azure_options: Any) -> dict[str, Any]:
    return {"wire_format": "openai", "base_url": "https://res.openai.azure.com", "azure": azure_options}


@pytest.mark.parametrize(
    ("provider", "words"),
    [
        ({**provider_config(), "wire_format": "anthropic"}, "Azure OpenAI speaks an OpenAI wire format"),
        ({**provider_config(entra_token=TOKEN), "api_key": KEY}, "set one"),
        (provider_config(api_version="2024-10-21&x=1"), "api_version"),
        (provider_config(path="v2"), "path"),
    ],
)
def test_the_azure_section_is_checked(provider: dict[str, Any], words: str) -> None:
    cfg = base_config("http://127.0.0.1:1", "http://127.0.0.1:2", providers={"az": provider}, models={"az": AZ})
    with pytest.raises(ValueError, match=words):
        Config.model_validate(cfg)


def test_an_entra_token_written_in_the_file_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    text = """
providers:
  az: {wire_format: openai, base_url: "https://res.openai.azure.com", azure: {entra_token: "%s"}}
models:
  az: {provider: az, upstream_model: gpt4o-prod, context_window: 8000, max_output_tokens: 512}
"""
    with pytest.raises(ConfigError, match=r"providers\.az\.azure\.entra_token"):
        parse_config(text % TOKEN)
    monkeypatch.setenv("AZ_TOKEN", TOKEN)
    cfg = parse_config(text % "${AZ_TOKEN}")
    assert TOKEN in cfg.secrets


def test_an_unquoted_api_version_is_the_version_as_written_not_a_date() -> None:
    cfg = parse_config("""
providers:
  az: {wire_format: openai, base_url: "https://res.openai.azure.com", azure: {api_version: 2025-04-01}}
models:
  az: {provider: az, upstream_model: gpt4o-prod, context_window: 8000, max_output_tokens: 512}
""")
    azure = cfg.providers["az"].azure
    assert azure is not None
    assert azure.api_version == "2025-04-01"
