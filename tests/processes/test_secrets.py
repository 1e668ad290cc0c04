"""Configured secrets leave the process nowhere: no response, status, log line, span or metric label.

Every secret here starts with ``Zq9`` and holds characters that JSON, URLs and Python escape
(``"``, ``\\``, ``/``, ``%``, spaces, ``+``), so "nothing leaked" is checked two ways: no form of
any secret (``redact.secret_forms``) appears, and the marker ``Zq9`` itself appears nowhere, in
whatever encoding a part of a secret might have gone out in.

The sidecar under test is configured the only way secrets may come in: ``${NAME}`` from the
environment, in keys, a provider's ``base_url`` path, a tool's URL path and headers, a service
name. The provider and tool backend are scripted to echo them back in bodies and Retry-After.
"""

from __future__ import annotations

import io
import json
import logging
import random
import re
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, cast

import grpc
import httpx
import pytest
import pytest_asyncio
import yaml
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import status_pb2
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sidecar_client import AsyncSidecarClient, SidecarError, pb, user

from sidecar.config import AWS_ENVIRONMENT, Config, parse_config
from sidecar.core.clock import FakeClock
from sidecar.core.redact import REDACTED, mask_keys, mask_secrets, redact_body, secret_forms
from sidecar.core.split_secrets import HOLD_FROM
from sidecar.core.text import endpoint_of
from sidecar.core.tool_failures import Observation, classify
from sidecar.fakes import FakeProvider, FakeToolBackend, ThreadedServer
from sidecar.providers.errors import Target, classify_response
from sidecar.providers.formats.bedrock_converse.fake import FAKE_ACCESS_KEY, FAKE_SECRET_KEY
from sidecar.providers.formats.bedrock_converse.upstream import BedrockUpstream
from sidecar.server.app import SidecarApp, running
from sidecar.server.grpc.masking import SecretMaskingInterceptor
from sidecar.server.grpc.spans import ServerSpanInterceptor
from sidecar.telemetry.logs import JsonFormatter
from sidecar.telemetry.testing import InMemoryTelemetry, install_in_memory

MARK = "Zq9"
SECRETS = {
    "OAI_KEY": 'Zq9Oai"k\\e/y%41 +x',
    "ANT_KEY": "Zq9Ant'q\"\\u00e9%zz",
    "PATH_TOKEN": 'Zq9Path"t\\k/n%zz sp',
    "TOOL_TOKEN": 'Zq9Tool"t\\k n%2F+q',
    "TOOL_KEY": 'Zq9Hdr"k\\y/%25 z',
    "SERVICE_NAME": "Zq9Svc-name",
}
LITERAL_HEADER_KEY = "Zq9Lit-literal-key"
"""A credential written in the file (a tool header): still one of ``Config.secrets``."""
ALL = [*SECRETS.values(), LITERAL_HEADER_KEY]
PROPERTY = settings(max_examples=300, deadline=None, derandomize=True, database=None)


# ---------------------------------------------------------------- what "leaked" means


def leaks(text: str, secrets: list[str] = ALL) -> list[str]:
    """Every form of a configured secret in ``text``, and the marker itself if it is there."""
    found = [form for secret in secrets for form in secret_forms(secret) if form in text]
    return found + ([MARK] if MARK in text else [])


def assert_clean(text: str, where: str, secrets: list[str] = ALL) -> None:
    found = leaks(text, secrets)
    assert not found, f"{where} leaked {found[:3]}: {text[:300]!r}"


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from strings(v)


def assert_message_clean(msg: Message, where: str) -> None:
    """Every string in the message (packed details unpacked), and its bytes on the wire."""
    for text in strings(json_format.MessageToDict(msg)):
        assert_clean(text, where)
    assert MARK.encode() not in msg.SerializeToString(), where


def assert_rpc_error_clean(rpc: grpc.aio.AioRpcError) -> status_pb2.Status | None:
    assert_clean(rpc.details() or "", "status message")
    status = None
    for key, value in rpc.trailing_metadata() or ():
        if isinstance(value, bytes):
            assert MARK.encode() not in value, key
            if key == "grpc-status-details-bin":
                status = status_pb2.Status.FromString(value)
                assert_message_clean(status, "grpc-status-details-bin")
        else:
            assert_clean(value, key)
    return status


# ---------------------------------------------------------------- the sidecar, configured from the environment


class Lines:
    """Every log line written while attached, through the production formatter."""

    def __init__(self, secrets: tuple[str, ...]) -> None:
        self.stream = io.StringIO()
        self.handler = logging.StreamHandler(self.stream)
        self.handler.setFormatter(JsonFormatter(secrets))

    @property
    def text(self) -> str:
        return self.stream.getvalue()


@dataclass
class Leaky:
    app: SidecarApp
    client: AsyncSidecarClient
    provider: FakeProvider
    backend: FakeToolBackend
    otel: InMemoryTelemetry
    lines: Lines
    config: Config

    async def fails(self, model: str, **kwargs: Any) -> tuple[SidecarError, grpc.aio.AioRpcError]:
        with pytest.raises(SidecarError) as caught:
            await self.client.call_model(model, [user("hello")], **kwargs)
        rpc = caught.value.__cause__
        assert isinstance(rpc, grpc.aio.AioRpcError)
        return caught.value, rpc

    def assert_telemetry_clean(self) -> None:
        assert_telemetry_clean(self.lines, self.otel)


def assert_telemetry_clean(lines: Lines, otel: InMemoryTelemetry, secrets: list[str] = ALL) -> None:
    """No log line, span (name, attribute, event, link, status) or metric label holds a secret."""
    for line in lines.text.splitlines():
        assert_clean(line, "log line", secrets)
        for text in strings(json.loads(line)):
            assert_clean(text, "log field", secrets)
    spans = otel.spans()
    assert spans
    for s in spans:
        assert_clean(s.name, "span name", secrets)
        assert_clean(s.status.description or "", f"status of {s.name}", secrets)
        for k, v in (s.attributes or {}).items():
            for text in strings(v):
                assert_clean(text, f"{s.name} {k}", secrets)
        for e in s.events:
            assert_clean(e.name, f"event of {s.name}", secrets)
            for k, v in (e.attributes or {}).items():
                for text in strings(v):
                    assert_clean(text, f"{s.name} event {e.name} {k}", secrets)
        for link in s.links:
            for text in strings(dict(link.attributes or {})):
                assert_clean(text, f"link of {s.name}", secrets)
    for name, points in otel.metrics().items():
        for point in points:
            for text in strings(dict(point.attributes or {})):
                assert_clean(text, f"metric {name} label", secrets)


def leaky_config(provider_url: str, backend_url: str) -> str:
    fetch_params = {
        "type": "object",
        "properties": {"id": {"type": "string", "minLength": 1}},
        "required": ["id"],
    }
    model = {"context_window": 8000, "max_output_tokens": 2048, "default_output_tokens": 256}
    cfg = {
        "server": {"listen": "127.0.0.1:0", "grace_period_s": 5},
        "policy": {"upstream_retries": 1, "tool_retries": 1},
        "telemetry": {"record_content": True},
        "providers": {
            "oai": {"wire_format": "openai", "base_url": provider_url + "/v1", "api_key": "${OAI_KEY}"},
            "pathy": {"wire_format": "openai", "base_url": provider_url + "/${PATH_TOKEN}/v1", "api_key": "${OAI_KEY}"},
            "ant": {"wire_format": "anthropic", "base_url": provider_url, "api_key": "${ANT_KEY}"},
        },
        "models": {
            "gpt": {"provider": "oai", "upstream_model": "fake-gpt", **model},
            "lost": {"provider": "pathy", "upstream_model": "fake-lost", **model},
            "claude": {"provider": "ant", "upstream_model": "fake-claude", **model},
        },
        "services": {"leaky": {"circuit": {"failures_to_open": 1, "max_throttle": 1.0}}},
        "tools": {
            "leaky_fetch": {
                "description": "fetch a document with a token in the path",
                "kind": "fetch",
                "service": "leaky",
                "url": backend_url + "/docs/${TOOL_TOKEN}/{id}",
                "headers": {"authorization": "Bearer ${TOOL_KEY}", "x-api-key": LITERAL_HEADER_KEY},
                "parameters": fetch_params,
                "resource_type": "document",
            },
            "hidden": {
                "description": "a tool of the ${SERVICE_NAME} service",
                "kind": "fetch",
                "service": "${SERVICE_NAME}",
                "url": backend_url + "/docs/{id}",
                "parameters": fetch_params,
            },
        },
    }
    return yaml.safe_dump(cfg)


@pytest.fixture(scope="session")
def otel() -> InMemoryTelemetry:
    return install_in_memory()


@pytest_asyncio.fixture
async def leaky(
    provider: ThreadedServer[FakeProvider],
    backend: ThreadedServer[FakeToolBackend],
    otel: InMemoryTelemetry,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Leaky]:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    cfg = parse_config(leaky_config(provider.url, backend.url), "leaky.yaml")
    assert set(ALL) <= set(cfg.secrets)
    lines = Lines(cfg.secrets)
    root = logging.getLogger()
    level = root.level
    root.addHandler(lines.handler)
    root.setLevel(logging.DEBUG)
    otel.clear()
    try:
        async with running(
            cfg, listen="127.0.0.1:0", clock=FakeClock(), rng=random.Random(7), interceptors=[ServerSpanInterceptor()]
        ) as app:
            client = AsyncSidecarClient(app.address)
            yield Leaky(app, client, provider.server, backend.server, otel, lines, cfg)
            await client.close()
    finally:
        root.removeHandler(lines.handler)
        root.setLevel(level)


# ---------------------------------------------------------------- through the real sidecar


async def test_a_key_a_provider_echoes_in_its_body_and_retry_after_appears_nowhere(leaky: Leaky) -> None:
    key = SECRETS["OAI_KEY"]
    said = f"bad key {key}, also {urllib.parse.quote(key, safe='')} and {json.dumps(key)}"
    step = {"preset": "server_error", "message": said, "retry_after": key}
    leaky.provider.script("fake-gpt", [step, step])
    err, rpc = await leaky.fails("gpt")
    assert err.kind_name == "UPSTREAM_RETRIES_EXHAUSTED"
    assert err.http is not None
    assert err.http.retry_after_raw == REDACTED  # kept verbatim for the host, but masked
    assert "bad key «redacted»" in err.http.body
    assert "bad key «redacted»" in err.message
    status = assert_rpc_error_clean(rpc)
    assert status is not None
    assert status.details
    assert_message_clean(err.failure, "failure")
    leaky.assert_telemetry_clean()


async def test_an_anthropic_key_echoed_in_a_rejection_appears_nowhere(leaky: Leaky) -> None:
    key = SECRETS["ANT_KEY"]
    leaky.provider.script("fake-claude", [{"status": 400, "body": {"type": "error", "error": {
        "type": "invalid_request_error", "message": f"x-api-key {key} is malformed"}}}])  # fmt: skip
    err, rpc = await leaky.fails("claude")
    assert err.kind_name == "INVALID_INPUT"
    assert "x-api-key «redacted» is malformed" in err.message
    assert_rpc_error_clean(rpc)
    leaky.assert_telemetry_clean()


async def test_a_token_in_the_base_url_path_appears_nowhere(leaky: Leaky) -> None:
    err, rpc = await leaky.fails("lost")  # the fake answers 404, echoing the path it was sent
    assert err.kind_name == "MODEL_NOT_FOUND"
    assert err.http is not None
    assert err.http.endpoint == f"{leaky.provider.url}/{REDACTED}/v1/chat/completions"
    assert "Unknown request URL" in err.message
    assert_rpc_error_clean(rpc)
    posts = [s for s in leaky.otel.spans() if s.name == "POST"]
    assert posts
    assert {(s.attributes or {}).get("url.full") for s in posts} == {err.http.endpoint}
    leaky.assert_telemetry_clean()


async def test_a_reply_that_echoes_a_key_is_masked_in_the_response(leaky: Leaky) -> None:
    key = SECRETS["OAI_KEY"]
    leaky.provider.script("fake-gpt", [{"preset": "reply", "text": f"your key is {key}"}])
    reply = await leaky.client.call_model("gpt", [user(f"is {key} my key?")])
    assert reply.message.text == "your key is «redacted»"
    assert_message_clean(reply, "CallModel response")
    leaky.assert_telemetry_clean()


async def test_a_tool_url_token_header_key_and_retry_after_appear_nowhere(leaky: Leaky) -> None:
    token, key = SECRETS["TOOL_TOKEN"], SECRETS["TOOL_KEY"]
    busy = {
        "status": 429,
        "headers": {"retry-after": f"{key} sk-abcdefghijklmnopqrst"},
        "body": {"error": f"slow down, {key} ({LITERAL_HEADER_KEY}) at /docs/{token}"},
    }
    leaky.backend.script("*", [{**busy, "repeat": 2}])  # the attempt and its retry: the circuit opens
    first = await leaky.client.execute_tool("leaky_fetch", {"id": "doc-1"})
    failure = first.failure
    assert failure.kind == pb.FAILURE_KIND_UPSTREAM_THROTTLE
    assert failure.http.retry_after_raw == "«redacted» «redacted»"
    assert failure.http.endpoint == f"{leaky.backend.url}/docs/{REDACTED}/doc-1"
    assert "slow down, «redacted» («redacted»)" in failure.http.body
    refused = await leaky.client.execute_tool("leaky_fetch", {"id": "doc-1"})
    assert refused.failure.kind == pb.FAILURE_KIND_CIRCUIT_OPEN  # quoting the response that opened it
    assert "Retry-After: «redacted» «redacted»" in refused.failure.message
    for response in (first, refused):
        assert_message_clean(response, "ExecuteTool response")
    sent = leaky.backend.requests()[-1]
    assert sent["headers"]["authorization"] == f"Bearer {key}"  # the key still goes where it belongs
    leaky.assert_telemetry_clean()


async def test_a_tool_result_that_echoes_a_secret_is_masked(leaky: Leaky) -> None:
    leaky.backend.script("*", [{"status": 200, "body": {"echo": SECRETS["TOOL_KEY"], "id": "doc-1"}}])
    done = await leaky.client.execute_tool("leaky_fetch", {"id": "doc-1"})
    assert done.HasField("result")
    assert json.loads(done.result.content) == {"echo": REDACTED, "id": "doc-1"}
    assert_message_clean(done, "ExecuteTool response")
    leaky.assert_telemetry_clean()


async def test_a_service_named_from_the_environment_is_masked_in_metric_labels(leaky: Leaky) -> None:
    leaky.backend.script("/docs/doc-9", [{"status": 503, "body": "down", "repeat": 2}])
    out = await leaky.client.execute_tool("hidden", {"id": "doc-9"})
    assert out.failure.kind == pb.FAILURE_KIND_EXTERNAL_SERVICE
    labels = [dict(p.attributes) for points in leaky.otel.metrics().values() for p in points]
    assert {"sidecar.service": REDACTED} in [{k: v for k, v in la.items() if k == "sidecar.service"} for la in labels]
    tools = await leaky.client.list_tools()
    hidden = next(t for t in tools if t.definition.name == "hidden")
    assert hidden.service == REDACTED
    assert hidden.definition.description == f"a tool of the {REDACTED} service"
    for t in tools:
        assert_message_clean(t, "ListTools")
    assert_message_clean(out, "ExecuteTool response")
    leaky.assert_telemetry_clean()


async def test_classify_failure_masks_what_the_caller_reports(leaky: Leaky) -> None:
    key, token = SECRETS["OAI_KEY"], SECRETS["TOOL_TOKEN"]
    url = str(httpx.URL(f"{leaky.backend.url}/docs/{token}/x?api_key={urllib.parse.quote(key)}"))
    request = pb.ClassifyFailureRequest(service="leaky", endpoint=url, tool_kind=pb.TOOL_KIND_FETCH, attempts=1)
    request.response.status_code = 503
    request.response.headers["retry-after"] = key
    request.response.body = json.dumps({"error": {"message": f"down; key {key}"}, "user_id": "user-42"})
    failure = await leaky.client.classify_failure(request)
    assert failure.kind == pb.FAILURE_KIND_EXTERNAL_SERVICE
    assert failure.http.endpoint == f"{leaky.backend.url}/docs/{REDACTED}/x"
    assert failure.http.retry_after_raw == REDACTED
    assert "down; key «redacted»" in failure.message
    assert "user-42" not in failure.http.body
    assert_message_clean(failure, "ClassifyFailure response")
    leaky.assert_telemetry_clean()


# ---------------------------------------------------------------- the interceptor, on its own server


async def test_an_exception_or_abort_that_carries_a_secret_is_masked_on_the_wire() -> None:
    secret = SECRETS["OAI_KEY"]

    async def boom(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        raise RuntimeError(f"the key was {secret}")

    async def abort(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        status = status_pb2.Status(code=5, message=f"no {secret}")
        await context.abort_with_status(
            _Status(
                grpc.StatusCode.NOT_FOUND, f"no {secret}", (("grpc-status-details-bin", status.SerializeToString()),)
            )
        )
        raise AssertionError

    async def echo(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        return request

    handlers = {
        "Boom": grpc.unary_unary_rpc_method_handler(boom),
        "Abort": grpc.unary_unary_rpc_method_handler(abort),
        "Echo": grpc.unary_unary_rpc_method_handler(echo),
    }
    server = grpc.aio.server(interceptors=[SecretMaskingInterceptor([secret])])
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("t.T", handlers)])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as boomed:
                await channel.unary_unary("/t.T/Boom")(b"")
            assert boomed.value.code() == grpc.StatusCode.UNKNOWN
            assert boomed.value.details() == "Unexpected <class 'RuntimeError'>: the key was «redacted»"
            with pytest.raises(grpc.aio.AioRpcError) as aborted:
                await channel.unary_unary("/t.T/Abort")(b"")
            assert aborted.value.code() == grpc.StatusCode.NOT_FOUND
            status = assert_rpc_error_clean(aborted.value)
            assert status is not None
            assert status.message == "no «redacted»"
            assert await channel.unary_unary("/t.T/Echo")(secret.encode()) == secret.encode()  # bytes: not ours
    finally:
        await server.stop(0)


@dataclass(frozen=True)
class _Status(grpc.Status):
    code: grpc.StatusCode
    details: str
    trailing_metadata: tuple[tuple[str, str | bytes], ...]


# ---------------------------------------------------------------- the forms, as properties

_SPECIAL = st.sampled_from(list("\"\\/%+ ?#&='{}:@é€\u2028\t"))
_SECRET = st.text(
    alphabet=st.one_of(st.characters(codec="utf-8", exclude_characters="«»"), _SPECIAL), min_size=4, max_size=24
)
_AROUND = st.text(max_size=40)


def _httpx_path(s: str) -> str:
    """``s`` as httpx writes it in a URL path (as it is, where httpx refuses it or it would end the path)."""
    if "?" in s or "#" in s:
        return s
    try:
        return httpx.URL("http://h/" + s).raw_path.decode()[1:]
    except httpx.InvalidURL:
        return s


ENCODINGS = {
    "verbatim": lambda s: s,
    "json": lambda s: json.dumps(s)[1:-1],
    "json-unicode": lambda s: json.dumps(s, ensure_ascii=False)[1:-1],
    "json-twice": lambda s: json.dumps(json.dumps(s)[1:-1])[1:-1],
    "json-slash": lambda s: json.dumps(s)[1:-1].replace("/", "\\/"),
    "repr": lambda s: repr(s)[1:-1],
    "percent": lambda s: urllib.parse.quote(s, safe=""),
    "percent-lower": lambda s: re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), urllib.parse.quote(s, safe="")),
    "percent-path": urllib.parse.quote,
    "percent-plus": urllib.parse.quote_plus,
    "httpx-path": _httpx_path,
    "percent-in-json": lambda s: json.dumps(urllib.parse.quote(s))[1:-1],
}


def _masks_cleanly(secret: str, encoded: str) -> bool:
    """Whether a masked occurrence can be told from the marker (a secret inside «redacted» cannot)."""
    return len(encoded) >= 4 and encoded not in REDACTED and "«" not in encoded and "»" not in encoded


@pytest.mark.parametrize("encoding", list(ENCODINGS))
@PROPERTY
@given(secret=_SECRET, before=_AROUND, after=_AROUND)
def test_a_secret_never_survives_masking_whatever_surrounds_it(
    encoding: str, secret: str, before: str, after: str
) -> None:
    encoded = ENCODINGS[encoding](secret)
    assume(_masks_cleanly(secret, encoded))
    masked = mask_secrets(before + encoded + after, [secret])
    assert encoded not in masked
    assert REDACTED in masked
    assert encoded not in mask_keys(before + encoded + after, ["unrelated-secret", secret])


def test_a_json_writer_escaping_both_slash_and_control_characters_is_masked() -> None:
    """The property above found it (json-slash, secret '00/\\x7f'): a writer escaping "/" as "\\/" and
    DEL as "\\u007f" at once was no form of the secret."""
    secret = "00/\x7f"
    written = json.dumps(secret)[1:-1].replace("/", "\\/")
    assert written == "00\\/\\u007f"
    assert mask_secrets(f"x{written}y", [secret]) == f"x{REDACTED}y"


@PROPERTY
@given(secret=_SECRET, before=_AROUND, after=_AROUND, status=st.sampled_from([400, 404, 429, 500, 503]))
def test_a_secret_never_survives_redaction_of_a_json_or_text_body(
    secret: str, before: str, after: str, status: int
) -> None:
    assume(all(_masks_cleanly(secret, enc(secret)) for enc in ENCODINGS.values()))
    as_json = json.dumps({"error": {"message": before + secret + after, "path": [urllib.parse.quote(secret)]}})
    as_text = f"{before}{secret}{after} (escaped: {json.dumps(secret)})"
    for body in (as_json, as_text):
        out = redact_body(body, status, [secret])
        for enc in ENCODINGS.values():
            assert enc(secret) not in out, (enc(secret), out)
    assert redact_body(as_json, 401, [secret]) == ""


@pytest.mark.parametrize("secret", ALL)
def test_what_httpx_puts_on_the_wire_is_one_of_the_forms(secret: str) -> None:
    assert _httpx_path(secret) in secret_forms(secret)


def test_an_ordinary_key_has_one_form() -> None:
    assert secret_forms("sk-live-abcdefghijklmnop") == ("sk-live-abcdefghijklmnop",)


# ---------------------------------------------------------------- where secrets come in


def test_endpoint_of_masks_the_path_the_credentials_and_cuts_the_query() -> None:
    token = SECRETS["PATH_TOKEN"]
    url = str(httpx.URL(f"https://user:pa%40ss@api.example:8443/{token}/v1/chat?key=x#frag"))
    assert endpoint_of(url, [token]) == f"https://{REDACTED}@api.example:8443/{REDACTED}/v1/chat"
    assert endpoint_of("https://h/a?b=sk-abcdefghijklmnop") == "https://h/a"
    assert endpoint_of("https://h/x/sk-abcdefghijklmnop/y") == f"https://h/x/{REDACTED}/y"
    assert endpoint_of("https://h/ab?cd/v1", ["ab?cd"]) == f"https://h/{REDACTED}/v1"  # no half of it left


def test_the_retry_after_a_tool_or_provider_sends_is_kept_raw_but_masked() -> None:
    key = SECRETS["TOOL_KEY"]
    headers = {"Retry-After": f"in 3 s (key {key}, token ghp_abcdefghijklmnopqrstu)"}
    obs = Observation("svc", "https://h/x", "fetch", status=429, headers=headers, body="busy")
    failure = classify(obs, (), [key])
    assert failure is not None
    assert failure.http is not None
    assert failure.http.retry_after_raw == f"in 3 s (key {REDACTED}, token {REDACTED})"
    target = Target("oai", "", "gpt", "fake-gpt", "https://h/v1")
    signal = classify_response(429, headers, "{}", target, [key], __import__("datetime").datetime.now())
    assert signal.http is not None
    assert signal.http.retry_after_raw == f"in 3 s (key {REDACTED}, token {REDACTED})"
    assert (
        classify(
            Observation("svc", "e", "fetch", status=429, headers={"retry-after": "7"}), (), [key]
        ).http.retry_after_raw
        == "7"
    )  # type: ignore[union-attr]


def test_the_secrets_include_credential_headers_and_url_passwords() -> None:
    cfg = Config.model_validate(
        {
            "providers": {
                "p": {
                    "wire_format": "openai",
                    "base_url": "https://me:hunter22@api.example/v1",
                    "headers": {"Authorization": "Basic dXNlcjpwYXNz", "Accept": "application/json"},
                }
            },
            "tools": {
                "t": {
                    "description": "d",
                    "kind": "fetch",
                    "service": "s",
                    "url": "https://h/x",
                    "headers": {"X-Auth-Token": "tok-12345", "User-Agent": "sidecar-agent"},
                }
            },
        }
    )
    assert set(cfg.secrets) == {"Basic dXNlcjpwYXNz", "dXNlcjpwYXNz", "hunter22", "tok-12345"}


def test_the_credentials_a_url_carries_are_secrets_wherever_the_url_is_configured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SEARCH_URL", "https://search.example/v1?key=qk-from-env-7890")
    params = {"type": "object", "properties": {"token": {"type": "string"}}, "required": ["token"]}
    tool = {"description": "d", "kind": "search", "service": "s", "parameters": params}
    cfg = parse_config(
        yaml.safe_dump(
            {
                "providers": {
                    "p": {"wire_format": "openai", "base_url": "https://api.example/v1?api-key=qk-prov-1234"}
                },
                "tools": {
                    "t": {**tool, "url": "${SEARCH_URL}&q={token}"},  # a placeholder is the agent's, not ours
                    "u": {**tool, "url": "https://h/x?token={token}&n=1"},
                },
                "mcp_servers": {
                    "m": {"command": ["mcp-db"], "env": {"DATABASE_URL": "postgres://app:pg-pass-9012@db/x"}},
                },
                "state": {"backend": "redis", "url": "redis://app@redis:6379/0?password=rd-pass-3456"},
            }
        )
    )
    assert set(cfg.secrets) == {"qk-from-env-7890", "qk-prov-1234", "pg-pass-9012", "rd-pass-3456"}


def test_every_credential_the_bedrock_format_signs_with_is_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """The access key id, the secret key and a session token under either of botocore's names, and the
    bearer key: read from the environment by the format itself, each one of ``Config.secrets``, and
    nothing the format sends is left unmasked by them."""
    for name in AWS_ENVIRONMENT.names:
        monkeypatch.delenv(name, raising=False)
    config = {"providers": {"bed": {"wire_format": "bedrock_converse", "base_url": "https://h", "region": "us-east-1"}}}
    assert Config.model_validate(config).secrets == ()
    for token_name in AWS_ENVIRONMENT.tokens:
        values = {AWS_ENVIRONMENT.access_key: "AKIDEXAMPLE", AWS_ENVIRONMENT.secret_key: FAKE_SECRET_KEY}
        for name, value in {**values, token_name: SESSION_TOKEN}.items():
            monkeypatch.setenv(name, value)
        cfg = Config.model_validate(config)
        assert set(cfg.secrets) == {"AKIDEXAMPLE", FAKE_SECRET_KEY, SESSION_TOKEN}
        headers = BedrockUpstream(cfg.providers["bed"]).sign("POST", "https://h/model/m/converse", {}, b"{}")
        assert headers["x-amz-security-token"] == SESSION_TOKEN  # the format read the token by that name
        assert "Credential=AKIDEXAMPLE/" in headers["authorization"]
        shown = mask_secrets(json.dumps(headers), cfg.secrets)
        assert not [v for v in (*values.values(), SESSION_TOKEN) if v in shown], shown
        monkeypatch.delenv(token_name)
    monkeypatch.setenv(AWS_ENVIRONMENT.bearer, "ABSKQmVkcm9ja0FQSUtleS1example")
    assert "ABSKQmVkcm9ja0FQSUtleS1example" in Config.model_validate(config).secrets


def test_the_secrets_are_found_once_at_load_and_kept_by_a_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONCE_KEY", "sk-once-0123456789")
    cfg = parse_config(
        "providers: {p: {wire_format: openai, base_url: 'https://api.example/v1', api_key: '${ONCE_KEY}'}}\n"
        "tools: {t: {description: d, kind: fetch, service: s, url: 'https://h/x', headers: {X-Token: tok-12345}}}\n"
    )
    monkeypatch.delenv("ONCE_KEY")  # read at load: the environment changing later changes nothing
    assert cfg.secrets == ("sk-once-0123456789", "tok-12345")  # longest first
    assert cfg.secrets is cfg.secrets  # one value, not recomputed per caller
    assert cfg.model_copy(update={"http": None}).secrets == cfg.secrets  # `sidecar serve --http` copies


# ---------------------------------------------------------------- account ids in free text


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        ("the user_id user-abc123 was denied", "user-abc123"),
        ("user_id: user-abc123", "user-abc123"),
        ('{"error": "user_id=abc123 over limit"}', "abc123"),
        ("project proj_AbCdEf123456 is archived", "proj_AbCdEf123456"),
        ("for user-9f8e7d6c5b4a3210ZZyy", "user-9f8e7d6c5b4a3210ZZyy"),
        ("org org-AbCdEfGh12 has no credit", "org-AbCdEfGh12"),
        ("user-abcdefghijklmnopqrstuvwx (all letters, long)", "user-abcdefghijklmnopqrstuvwx"),
        ("project_id 42_alpha", "42_alpha"),
    ],
)
def test_free_text_account_ids_are_redacted(text: str, gone: str) -> None:
    out = redact_body(text, 500)
    assert gone not in out
    assert REDACTED in out


@pytest.mark.parametrize(
    "text",
    ["a user-friendly message", "the user_id is missing", "an org-wide outage", "the organization was notified"],
)
def test_ordinary_words_near_id_names_are_kept(text: str) -> None:
    assert redact_body(text, 500) == text


# ---------------------------------------------------------------- linear time on hostile bodies

MB = 1024 * 1024
HOSTILE_SECRETS = [*ALL, "\\" * 12 + "x" + "\\" * 12, "%" * 12]
HOSTILE = {  # name: (body, what redaction makes of it; None = the body unchanged)
    "account keys then spaces": (("user_id" + " " * 64) * (MB // 71), ("user_id" + " " * 64 + REDACTED + " " * 64) * 3),
    "bearer then spaces": (("bearer" + " " * 64) * (MB // 70), None),
    "an id prefix over and over": ("user-" * (MB // 5), None),
    "one endless key-like word": ("AKIA" + "A" * MB + "a", None),
    "api key names without values": ("api_key= " * (MB // 9), None),
    "backslashes for a secret of backslashes": ("\\" * MB + "x", None),
    "percent runs for a secret of percents": ("%25" * (MB // 3), REDACTED * 3),
    "almost the secret, many times": (SECRETS["PATH_TOKEN"][:-1] * (MB // len(SECRETS["PATH_TOKEN"])), None),
    "deep JSON": ("[" * 100_000 + "]" * 100_000, None),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_megabyte_body_is_redacted(name: str) -> None:
    """Redaction finishes on each (the time is measured apart, never asserted: see the report)."""
    body, expected = HOSTILE[name]
    out = redact_body(body, 500, HOSTILE_SECRETS)
    if expected is None:
        assert out == body
    else:
        assert out.startswith(expected)
    for secret in HOSTILE_SECRETS:
        assert not [form for form in secret_forms(secret) if form in out]


@dataclass
class _Details:
    method: str


async def test_with_no_secret_configured_the_handler_is_left_as_it_is() -> None:
    handler = grpc.unary_unary_rpc_method_handler(lambda r, c: r)

    async def continuation(_: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[Any, Any]:
        return handler

    details = cast(grpc.HandlerCallDetails, _Details("/sidecar.v1.Sidecar/CallModel"))
    assert await SecretMaskingInterceptor([]).intercept_service(continuation, details) is handler
    assert await SecretMaskingInterceptor(["abcd"]).intercept_service(continuation, details) is not handler


@PROPERTY
@given(text=st.text(max_size=200))
def test_text_without_a_secret_is_left_as_it_is(text: str) -> None:
    assume(MARK not in text)
    assert mask_secrets(text, ALL) == text


# ---------------------------------------------------------------- a Bedrock upstream that echoes what it was sent

BEDROCK_MODEL = "anthropic.claude-sonnet-4-20250514-v1:0"
SESSION_TOKEN = "IQoJb3JpZ2luX2VjEXAMPLE/session+token=="
GATEWAY_TOKEN = "gw-token-for-the-bedrock-gateway"
ADMIN_TOKEN = "admin-token-0123456789abcdef"
AWS_CREDENTIALS = [FAKE_ACCESS_KEY, FAKE_SECRET_KEY, SESSION_TOKEN]
BEDROCK_SECRETS = [*AWS_CREDENTIALS, GATEWAY_TOKEN, ADMIN_TOKEN]
ECHOED = [
    re.compile(rf"{head}.{{0,{HOLD_FROM - 1}}}«redacted»{tail}")
    for head, tail in (("Credential=", "/"), ("x-amz-security-token: ", "\n"), ("x-gateway-token: ", "\n"))
]
"""What a reply echoing the signed request's headers says, its credentials masked (in a stream, a
secret's first characters may go out before it is known to be one: ``core.split_secrets``)."""
SPLIT = 7
"""The fake's delta size in a stream: the 20-character access key id comes across three or four deltas."""


@dataclass
class Echoing:
    app: SidecarApp
    client: AsyncSidecarClient
    provider: FakeProvider
    otel: InMemoryTelemetry
    lines: Lines
    http: httpx.AsyncClient

    def echo(self, *, stream: bool = False) -> None:
        step: dict[str, Any] = {"echo_headers": True, **({"delta_chars": SPLIT} if stream else {})}
        self.provider.script(BEDROCK_MODEL, [step])


@pytest_asyncio.fixture(params=["AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"])
async def echoing(
    request: pytest.FixtureRequest,
    provider: ThreadedServer[FakeProvider],
    otel: InMemoryTelemetry,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Echoing]:
    """A sidecar whose Bedrock provider signs with SigV4 from the environment (a session token under
    either name botocore reads), a gateway header from ``${NAME}``, admin tokens, both ports."""
    env = {"AWS_ACCESS_KEY_ID": FAKE_ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": FAKE_SECRET_KEY, request.param: SESSION_TOKEN}
    for name in ("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_BEARER_TOKEN_BEDROCK"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {**env, "GATEWAY_TOKEN": GATEWAY_TOKEN, "ADMIN_TOKEN": ADMIN_TOKEN}.items():
        monkeypatch.setenv(name, value)
    model = {"context_window": 8000, "max_output_tokens": 2048, "default_output_tokens": 256}
    bed = {"wire_format": "bedrock_converse", "base_url": provider.url, "region": "us-west-2"}
    cfg = {
        "server": {"listen": "127.0.0.1:0", "grace_period_s": 5, "admin": {"tokens": ["${ADMIN_TOKEN}"]}},
        "http": {"listen": "127.0.0.1:0"},
        "telemetry": {"record_content": True},
        "providers": {"bed": {**bed, "headers": {"x-gateway-token": "${GATEWAY_TOKEN}"}}},
        "models": {"bed": {"provider": "bed", "upstream_model": BEDROCK_MODEL, **model}},
    }
    config = parse_config(yaml.safe_dump(cfg), "echoing.yaml")
    lines = Lines(config.secrets)
    root = logging.getLogger()
    level = root.level
    root.addHandler(lines.handler)
    root.setLevel(logging.DEBUG)
    otel.clear()
    try:
        spans = [ServerSpanInterceptor()]
        async with running(
            config, listen="127.0.0.1:0", clock=FakeClock(), rng=random.Random(7), interceptors=spans
        ) as app:
            assert app.http is not None
            client = AsyncSidecarClient(app.address)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{app.http.port}", timeout=30) as http:
                yield Echoing(app, client, provider.server, otel, lines, http)
            await client.close()
    finally:
        root.removeHandler(lines.handler)
        root.setLevel(level)


def assert_echoed_clean(text: str, where: str) -> None:
    """``text`` says what the signed request carried, and none of the credentials themselves."""
    for said in ECHOED:
        assert said.search(text), f"{where} does not echo {said.pattern!r}: {text[:600]!r}"
    assert_clean(text, where, BEDROCK_SECRETS)


FRONTS = {  # door: (path, the request's body)
    "openai": ("/v1/chat/completions", {"model": "bed", "messages": [{"role": "user", "content": "hi"}]}),
    "anthropic": ("/v1/messages", {"model": "bed", "max_tokens": 256, "messages": [{"role": "user", "content": "hi"}]}),
    "responses": ("/v1/responses", {"model": "bed", "input": "hi"}),
}


def whole_text(door: str, body: dict[str, Any]) -> str:
    if door == "openai":
        return str(body["choices"][0]["message"]["content"])
    if door == "anthropic":
        return "".join(b["text"] for b in body["content"] if b["type"] == "text")
    return "".join(c["text"] for item in body["output"] if item["type"] == "message" for c in item["content"])


def streamed_text(door: str, raw: str) -> str:
    """The text deltas of a streamed answer, joined."""
    out = []
    for line in raw.splitlines():
        if not line.startswith("data:") or line == "data: [DONE]":
            continue
        data = json.loads(line.removeprefix("data:"))
        if door == "openai" and data.get("choices"):
            out.append(data["choices"][0]["delta"].get("content") or "")
        elif door == "anthropic" and data.get("type") == "content_block_delta":
            out.append(data["delta"].get("text", ""))
        elif door == "responses" and data.get("type") == "response.output_text.delta":
            out.append(data["delta"])
    return "".join(out)


async def test_a_bedrock_reply_echoing_the_signed_headers_shows_no_credential_at_any_door(echoing: Echoing) -> None:
    """The access key id (in SigV4's ``Credential=``), the session token, a gateway header's token: none
    goes out through CallModel, StreamModel (a key split across deltas), any HTTP front whole or
    streamed, a span, a log line, a metric label or the state view."""
    echoing.echo()
    reply = await echoing.client.call_model("bed", [user("hi")])
    assert_echoed_clean(reply.message.text, "CallModel")
    assert_message_clean(reply, "CallModel response")
    for text in strings(json_format.MessageToDict(reply)):
        assert_clean(text, "CallModel response", BEDROCK_SECRETS)
    sent = echoing.provider.requests(model=BEDROCK_MODEL)[-1]["headers"]
    assert f"Credential={FAKE_ACCESS_KEY}/" in sent["authorization"]  # what the fake was sent, and echoed
    assert sent["x-amz-security-token"] == SESSION_TOKEN

    echoing.echo(stream=True)
    events = [e async for e in echoing.client.stream_model("bed", [user("hi")])]
    deltas = [e.text.text for e in events if e.WhichOneof("event") == "text"]
    assert len(deltas) > 1
    assert_echoed_clean("".join(deltas), "StreamModel deltas")
    assert_echoed_clean(events[-1].final.message.text, "StreamModel final")
    for event in events:
        for text in strings(json_format.MessageToDict(event)):
            assert_clean(text, "StreamModel event", BEDROCK_SECRETS)

    for door, (path, body) in FRONTS.items():
        echoing.echo()
        whole = await echoing.http.post(path, json=body)
        assert whole.status_code == 200, whole.text
        assert_echoed_clean(whole_text(door, whole.json()), f"{door} front")
        assert_clean(whole.text + str(whole.headers), f"{door} front", BEDROCK_SECRETS)
        echoing.echo(stream=True)
        streamed = await echoing.http.post(path, json={**body, "stream": True})
        assert streamed.status_code == 200, streamed.text
        assert_echoed_clean(streamed_text(door, streamed.text), f"{door} front, streamed")
        assert_clean(streamed.text + str(streamed.headers), f"{door} front, streamed", BEDROCK_SECRETS)

    view = await echoing.http.get("/admin/state", headers={"authorization": f"Bearer {ADMIN_TOKEN}"})
    assert view.status_code == 200, view.text
    assert_clean(view.text, "the state view", BEDROCK_SECRETS)
    assert_telemetry_clean(echoing.lines, echoing.otel, BEDROCK_SECRETS)
    spoken = [v for s in echoing.otel.spans() for v in (s.attributes or {}).values() if isinstance(v, str)]
    assert any("Credential=«redacted»/" in v for v in spoken)  # the echoed reply is recorded (content on), masked
