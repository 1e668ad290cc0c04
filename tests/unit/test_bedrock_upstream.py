"""The Bedrock upstream's signing: where the region comes from, what SigV4 signs, the bearer key instead.

``BedrockUpstream.sign`` is the one step of ``ProviderClient.request`` that sees the whole request; these
check what it adds (botocore's ``SigV4Auth`` does the signing) without a server: the fake provider's
process tests (``tests/formats/test_bedrock.py``) check that the signature verifies.
"""

from __future__ import annotations

import re

import pytest

from sidecar.config import ProviderConfig
from sidecar.providers.formats.bedrock_converse.upstream import BedrockUpstream, converse_path

BODY = b'{"messages":[]}'
HEADERS = {"content-type": "application/json", "accept": "application/json", "traceparent": "00-abc-def-01"}


@pytest.fixture(autouse=True)
def aws(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    for name in ("AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def upstream(base_url: str = "https://bedrock-runtime.eu-central-1.amazonaws.com", **fields: str) -> BedrockUpstream:
    return BedrockUpstream(ProviderConfig(wire_format="bedrock_converse", base_url=base_url, **fields))  # type: ignore[arg-type]


def scope(headers: dict[str, str]) -> str:
    found = re.search(r"Credential=AKIDEXAMPLE/\d{8}/([a-z0-9-]+)/bedrock/aws4_request", headers["authorization"])
    assert found is not None, headers["authorization"]
    return found.group(1)


def test_the_region_is_the_providers_else_the_base_urls_else_aws_region(aws: pytest.MonkeyPatch) -> None:
    url = "https://bedrock-runtime.eu-central-1.amazonaws.com/model/m/converse"
    assert scope(upstream(region="us-west-2").sign("POST", url, HEADERS, BODY)) == "us-west-2"
    assert scope(upstream().sign("POST", url, HEADERS, BODY)) == "eu-central-1"
    aws.setenv("AWS_REGION", "ap-south-1")
    assert scope(upstream("http://127.0.0.1:9").sign("POST", "http://127.0.0.1:9/model/m/converse", HEADERS,
                                                     BODY)) == "ap-south-1"  # fmt: skip


def test_sigv4_signs_host_content_type_and_date_and_keeps_every_other_header() -> None:
    signed = upstream().sign("POST", "https://bedrock-runtime.eu-central-1.amazonaws.com/model/m/converse", HEADERS,
                             BODY)  # fmt: skip
    assert "SignedHeaders=content-type;host;x-amz-date," in signed["authorization"]
    assert re.fullmatch(r"\d{8}T\d{6}Z", signed["x-amz-date"])
    assert {k: signed[k] for k in HEADERS} == HEADERS
    assert "host" not in signed  # the HTTP client sends it, from the URL signed


def test_a_session_token_is_sent_and_signed(aws: pytest.MonkeyPatch) -> None:
    aws.setenv("AWS_SESSION_TOKEN", "FwoGZXIvYXdzEXAMPLETOKEN")
    signed = upstream().sign("POST", "https://bedrock-runtime.eu-central-1.amazonaws.com/model/m/converse", HEADERS,
                             BODY)  # fmt: skip
    assert signed["x-amz-security-token"] == "FwoGZXIvYXdzEXAMPLETOKEN"
    assert "SignedHeaders=content-type;host;x-amz-date;x-amz-security-token," in signed["authorization"]


def test_a_bedrock_api_key_is_a_bearer_header_and_nothing_is_signed(aws: pytest.MonkeyPatch) -> None:
    aws.setenv("AWS_BEARER_TOKEN_BEDROCK", "ABSK-example-key")
    bearer = upstream()
    assert bearer.headers(None) == {"authorization": "Bearer ABSK-example-key"}
    assert bearer.sign("POST", "https://x/model/m/converse", HEADERS, BODY) == HEADERS
    configured = upstream(api_key="ABSK-configured")
    assert configured.headers("ABSK-configured") == {"authorization": "Bearer ABSK-configured"}


def test_a_model_id_keeps_its_colons_and_escapes_its_slashes() -> None:
    assert converse_path("anthropic.claude-3-haiku-20240307-v1:0", stream=False) == (
        "/model/anthropic.claude-3-haiku-20240307-v1:0/converse"
    )
    arn = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4"
    assert converse_path(arn, stream=True) == (
        "/model/arn:aws:bedrock:us-east-1:123456789012:inference-profile%2Fus.anthropic.claude-sonnet-4/converse-stream"
    )
