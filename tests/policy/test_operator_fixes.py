"""The 400s no corrected call can fix: uncorrectable, explained for an operator, and a route moves on.

Each provider's own answer (the fake provider's ``account_blocked`` and ``model_unavailable`` presets:
Gemini's "User location is not supported", Bedrock's "on-demand throughput isn't supported", OpenAI's
organization not verified, Anthropic's organization disabled, Azure's OperationNotSupported) goes through
a real sidecar, over gRPC CallModel and StreamModel and the OpenAI front with the ``openai`` SDK. The model reads an
uncorrectable failure that says what an operator must change (``providers.errors.OPERATOR_FIXES``), never
to retry with different parameters; on a route the call moves on to the fallback, which answers, and the
deployment's circuit is charged until it opens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import openai
import pytest
import sidecar_client as sc
from sidecar_client import pb, user

from sidecar.core.correctability import CORRECTABLE_LINE, UNCORRECTABLE_LINE
from sidecar.fakes import FakeProvider, ThreadedServer
from tests.conftest import Running, Start

HTTP = {"listen": "127.0.0.1:0"}
UNDER_V1 = {"openai", "openai_responses"}
"""The formats whose base URL ends in ``/v1``, as OpenAI's does."""
BILLING = (
    "Gemini API free tier is not available in your country. Please enable billing on your project in Google AI Studio."
)
"""Gemini's other 400 FAILED_PRECONDITION of an account (as it answers a free-tier key from such a country)."""
COUNTRY = {
    "error": {
        "code": "unsupported_country_region_territory",
        "message": "Country, region, or territory not supported",
        "param": None,
        "type": "request_forbidden",
    }
}
"""OpenAI's 403 to a request from a country it does not serve."""


@dataclass(frozen=True)
class Case:
    """One provider's 400 that only an operator can fix."""

    format: str
    step: dict[str, Any]
    error: type[sc.SidecarError]
    kind: str
    said: str
    fix: str
    azure: bool = False
    status: int = 400


CASES = [
    pytest.param(
        Case("gemini", {"preset": "account_blocked"}, sc.UnauthorizedError, "UNAUTHORIZED",
             "User location is not supported for the API use",
             "run the sidecar (its egress) in a region Gemini serves"),
        id="gemini-location",
    ),
    pytest.param(
        Case("gemini", {"preset": "account_blocked", "message": BILLING}, sc.UnauthorizedError, "UNAUTHORIZED",
             "Gemini API free tier is not available in your country",
             "enable billing on the project of the configured key"),
        id="gemini-billing",
    ),
    pytest.param(
        Case("bedrock_converse", {"preset": "model_unavailable"}, sc.ModelNotFoundError, "MODEL_NOT_FOUND",
             "Invocation of model ID up-bedrock_converse with on-demand throughput isn\u2019t supported",
             "set the catalog's upstream_model to the ID or ARN of an inference profile that contains the model"),
        id="bedrock-inference-profile",
    ),
    pytest.param(
        Case("openai", {"preset": "account_blocked"}, sc.UnauthorizedError, "UNAUTHORIZED",
             "Your organization must be verified to use the model `up-openai`",
             "verify the OpenAI organization of the configured key", status=404),
        id="openai-verification",
    ),
    pytest.param(
        Case("openai_responses", {"preset": "account_blocked"}, sc.UnauthorizedError, "UNAUTHORIZED",
             "Your organization must be verified to use the model `up-openai_responses`",
             "verify the OpenAI organization of the configured key", status=404),
        id="responses-verification",
    ),
    pytest.param(
        Case("anthropic", {"preset": "account_blocked"}, sc.UnauthorizedError, "UNAUTHORIZED",
             "This organization has been disabled", "re-enable the Anthropic organization of the configured key"),
        id="anthropic-disabled",
    ),
    pytest.param(
        Case("openai", {"preset": "model_unavailable"}, sc.ModelNotFoundError, "MODEL_NOT_FOUND",
             "The chatCompletion operation does not work with the specified model, up-openai",
             "point the catalog's upstream_model at a deployment of a model that serves this API", azure=True),
        id="azure-operation",
    ),
    pytest.param(
        Case("bedrock_converse", {"preset": "account_blocked"}, sc.UnauthorizedError, "UNAUTHORIZED",
             "You don't have access to the model with the specified model ID",
             "enable the model for the account (Bedrock's model access, in the provider's region)", status=403),
        id="bedrock-model-access",
    ),
    pytest.param(
        Case("openai", {"status": 403, "body": COUNTRY}, sc.UnauthorizedError, "UNAUTHORIZED",
             "Country, region, or territory not supported",
             "run the sidecar (its egress) in a country or region OpenAI serves", status=403),
        id="openai-country",
    ),
]  # fmt: skip
FRONT_STATUS = {"UNAUTHORIZED": (openai.InternalServerError, 502), "MODEL_NOT_FOUND": (openai.NotFoundError, 404)}
"""What the OpenAI front answers each kind with (docs/http.md)."""


def provider_of(case: Case, url: str) -> dict[str, Any]:
    if case.azure:
        return {"wire_format": "openai", "base_url": url, "api_key": "azure-test-KEY-1234567890", "azure": {}}
    extra: dict[str, Any] = {"region": "us-east-1"} if case.format == "bedrock_converse" else {}
    return {
        "wire_format": case.format,
        "base_url": url + ("/v1" if case.format in UNDER_V1 else ""),
        "api_key": f"key-{case.format}-1234567890abcdef",
        **extra,
    }


def upstream(case: Case) -> str:
    return f"up-{case.format}"


async def blocked_sidecar(start_sidecar: Start, fake: ThreadedServer[FakeProvider], case: Case) -> Running:
    """A sidecar whose model ``blocked`` is the case's deployment, and route ``r`` falls back to ``gpt``."""
    blocked = {
        "provider": "blocked",
        "upstream_model": upstream(case),
        "context_window": 8000,
        "max_output_tokens": 2048,
        "default_output_tokens": 256,
    }
    return await start_sidecar(
        http=HTTP,
        providers={"blocked": provider_of(case, fake.url)},
        models={"blocked": blocked, "r": {"route": {"fallbacks": ["blocked", "gpt"]}}},
    )


def assert_for_operator(case: Case, explanation: str) -> None:
    assert case.said in explanation
    assert f"An operator must {case.fix}" in explanation
    assert explanation.endswith(UNCORRECTABLE_LINE)
    assert CORRECTABLE_LINE not in explanation
    assert "different parameters" not in explanation


@pytest.mark.parametrize("case", CASES)
async def test_the_providers_400_is_uncorrectable_and_says_what_an_operator_must_change(
    start_sidecar: Start, provider: ThreadedServer[FakeProvider], case: Case
) -> None:
    r = await blocked_sidecar(start_sidecar, provider, case)
    r.provider.script(upstream(case), [case.step])
    with pytest.raises(sc.SidecarError) as caught:
        await r.client.call_model("blocked", [user("hello")])
    err = caught.value
    assert isinstance(err, case.error), err
    assert not err.correctable
    assert err.http is not None
    assert err.http.status_code == case.status
    assert_for_operator(case, err.explanation)
    assert len(r.provider.requests(model=upstream(case))) == 1  # never retried


@pytest.mark.parametrize("case", CASES)
async def test_the_openai_front_answers_it_as_the_sdks_own_error_with_the_operators_words(
    start_sidecar: Start, provider: ThreadedServer[FakeProvider], case: Case
) -> None:
    r = await blocked_sidecar(start_sidecar, provider, case)
    r.provider.script(upstream(case), [case.step])
    assert r.app.http is not None
    cls, status = FRONT_STATUS[case.kind]
    async with openai.AsyncOpenAI(
        base_url=f"http://127.0.0.1:{r.app.http.port}/v1", api_key="unused", max_retries=0
    ) as client:
        with pytest.raises(cls) as caught:
            await client.chat.completions.create(model="blocked", messages=[{"role": "user", "content": "hello"}])
    error = caught.value
    assert error.status_code == status
    assert isinstance(error.body, dict)
    ext = error.body["sidecar"]
    assert ext["kind"] == case.kind
    assert ext["correctable"] is False
    assert_for_operator(case, ext["explanation"])


@pytest.mark.parametrize("case", CASES)
async def test_a_route_moves_on_and_the_fallback_answers_and_the_circuit_opens(
    start_sidecar: Start, provider: ThreadedServer[FakeProvider], case: Case
) -> None:
    r = await blocked_sidecar(start_sidecar, provider, case)
    r.provider.script(upstream(case), [{**case.step, "repeat": 3}])
    kind = getattr(pb, f"FAILURE_KIND_{case.kind}")
    for _ in range(3):  # the deployment's own fault: each hop charges its circuit (DEPLOYMENT_FAULTS)
        reply = await r.client.call_model("r", [user("hello")])
        assert reply.served_by == "gpt"
        assert [(h.deployment, h.kind, h.attempts) for h in reply.hops] == [
            ("blocked", kind, 1),
            ("gpt", pb.FAILURE_KIND_UNSPECIFIED, 1),
        ]
        assert reply.message.text
    reply = await r.client.call_model("r", [user("hello")])  # the third charged hop opened it: no attempt
    assert reply.served_by == "gpt"
    assert [(h.deployment, h.kind, h.attempts) for h in reply.hops] == [
        ("blocked", pb.FAILURE_KIND_CIRCUIT_OPEN, 0),
        ("gpt", pb.FAILURE_KIND_UNSPECIFIED, 1),
    ]
    assert len(r.provider.requests(model=upstream(case))) == 3


@pytest.mark.parametrize(
    ("fmt", "step"),
    [
        pytest.param("gemini", {"preset": "account_blocked", "message": "Precondition check failed."}, id="gemini"),
        pytest.param("bedrock_converse", {"preset": "model_unavailable", "message": "Malformed input request."},
                     id="bedrock"),
        pytest.param("anthropic", {"preset": "account_blocked", "message": "max_tokens: Field required"},
                     id="anthropic"),
    ],
)  # fmt: skip
async def test_the_same_error_names_with_other_words_stay_the_callers_to_correct(
    start_sidecar: Start, provider: ThreadedServer[FakeProvider], fmt: str, step: dict[str, Any]
) -> None:
    case = Case(fmt, step, sc.InvalidInputError, "INVALID_INPUT", "", "")
    r = await blocked_sidecar(start_sidecar, provider, case)
    r.provider.script(upstream(case), [step])
    with pytest.raises(sc.InvalidInputError) as caught:
        await r.client.call_model("blocked", [user("hello")])
    assert caught.value.correctable
    assert step["message"] in caught.value.explanation


@pytest.mark.parametrize("case", CASES)
async def test_a_stream_fails_the_same_before_its_first_delta(
    start_sidecar: Start, provider: ThreadedServer[FakeProvider], case: Case
) -> None:
    r = await blocked_sidecar(start_sidecar, provider, case)
    r.provider.script(upstream(case), [case.step])
    with pytest.raises(sc.SidecarError) as caught:
        await r.client.stream_model("blocked", [user("hello")]).collect()
    assert isinstance(caught.value, case.error), caught.value
    assert not caught.value.correctable
    assert_for_operator(case, caught.value.explanation)
