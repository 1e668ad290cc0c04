"""TLS, mTLS and bearer tokens on the gRPC port, over real gRPC, with certificates made at test time."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
import sidecar_client as sc
import trustme
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from sidecar_client import AsyncSidecarClient, Tls, user

from sidecar.config import Config, ConfigError
from sidecar.server.app import SidecarApp
from sidecar.server.auth import bearer_token
from sidecar.server.grpc.auth import BearerTokenInterceptor
from tests.conftest import Start, base_config

TOKEN_A = "agent-a-token-0123456789abcdef"
TOKEN_B = "agent-b-token-fedcba9876543210"


@dataclass
class Pki:
    ca: Path
    cert: Path
    key: Path
    client_cert: Path
    client_key: Path
    other_client_cert: Path
    other_client_key: Path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A throwaway CA, a server certificate for 127.0.0.1 / localhost, a client certificate, and a stranger's."""
    d = tmp_path_factory.mktemp("pki")
    ca, stranger = trustme.CA(), trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    client = ca.issue_cert("agent-a.example")
    other = stranger.issue_cert("agent-x.example")
    paths = Pki(*(d / n for n in ("ca.pem", "cert.pem", "key.pem", "c.pem", "c-key.pem", "x.pem", "x-key.pem")))
    ca.cert_pem.write_to_path(str(paths.ca))
    server.cert_chain_pems[0].write_to_path(str(paths.cert))
    server.private_key_pem.write_to_path(str(paths.key))
    client.cert_chain_pems[0].write_to_path(str(paths.client_cert))
    client.private_key_pem.write_to_path(str(paths.client_key))
    other.cert_chain_pems[0].write_to_path(str(paths.other_client_cert))
    other.private_key_pem.write_to_path(str(paths.other_client_key))
    return paths


def _tls(pki: Pki, **extra: str) -> dict[str, str]:
    return {"cert": str(pki.cert), "key": str(pki.key), **extra}


# ---------------------------------------------------------------- TLS and mTLS


async def test_tls_serves_a_client_that_trusts_the_ca_and_refuses_plaintext(start_sidecar: Start, pki: Pki) -> None:
    r = await start_sidecar(server={"tls": _tls(pki)})
    async with AsyncSidecarClient(r.app.address, tls=Tls.from_files(ca=pki.ca)) as client:
        assert {m.id for m in await client.list_models()} == {"gpt", "claude"}
        reply = await client.call_model("gpt", [user("over tls")], timeout=30)
        assert reply.message.text == "You said: over tls"
    async with AsyncSidecarClient(r.app.address) as plain:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await plain.list_models()
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_mtls_refuses_a_client_without_a_certificate_or_with_a_strangers(start_sidecar: Start, pki: Pki) -> None:
    r = await start_sidecar(server={"tls": _tls(pki, client_ca=str(pki.ca))})
    mine = Tls.from_files(ca=pki.ca, cert=pki.client_cert, key=pki.client_key)
    async with AsyncSidecarClient(r.app.address, tls=mine) as client:
        assert await client.list_models()
    for refused in (
        Tls.from_files(ca=pki.ca),
        Tls.from_files(ca=pki.ca, cert=pki.other_client_cert, key=pki.other_client_key),
    ):
        async with AsyncSidecarClient(r.app.address, tls=refused) as client:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await client.list_models()
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE


@pytest.mark.parametrize(
    ("key", "bad", "says"),
    [
        ("cert", "missing", "server.tls.cert: cannot read"),
        ("key", "not-pem", "server.tls.key: "),
        ("key", "other-key", "server.tls.cert / server.tls.key: "),
        ("client_ca", "not-pem", "server.tls.client_ca: "),
    ],
)
async def test_unusable_tls_files_are_a_config_error_naming_the_key(
    pki: Pki, tmp_path: Path, key: str, bad: str, says: str
) -> None:
    tls = _tls(pki, client_ca=str(pki.ca))
    if bad == "missing":
        tls[key] = str(tmp_path / "nope.pem")
    elif bad == "not-pem":
        (tmp_path / "junk.pem").write_text("not a certificate\n")
        tls[key] = str(tmp_path / "junk.pem")
    else:
        tls[key] = str(pki.client_key)  # a real key, of another certificate
    cfg = Config.model_validate(base_config("http://127.0.0.1:1", "http://127.0.0.1:1", server={"tls": tls}))
    app = SidecarApp(cfg, listen="127.0.0.1:0")
    with pytest.raises(ConfigError) as caught:
        await app.start()
    assert says in str(caught.value)
    assert app.server is None  # nothing was started


# ---------------------------------------------------------------- bearer tokens


async def test_a_call_without_a_valid_token_is_unauthenticated_and_never_echoes_it(start_sidecar: Start) -> None:
    r = await start_sidecar(server={"auth": {"tokens": [TOKEN_A, TOKEN_B]}})
    wrong = "agent-z-token-not-configured-000"
    for token in (None, wrong, TOKEN_A[:-1]):
        async with AsyncSidecarClient(r.app.address, token=token) as client:
            with pytest.raises(sc.UnauthorizedError) as caught:
                await client.call_model("gpt", [user("hi")], timeout=30)
            with pytest.raises(grpc.aio.AioRpcError) as listed:
                await client.list_models()
        err = caught.value
        assert err.grpc_code == grpc.StatusCode.UNAUTHENTICATED
        assert listed.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "server.auth.tokens" in err.message
        if token is not None:
            assert token not in err.message
            assert token not in err.failure.SerializeToString().decode("utf-8", "replace")
    assert r.provider.requests() == []  # nothing reached the provider


async def test_each_configured_token_is_let_through(start_sidecar: Start) -> None:
    r = await start_sidecar(server={"auth": {"tokens": [TOKEN_A, TOKEN_B]}})
    for token in (TOKEN_A, TOKEN_B):
        async with AsyncSidecarClient(r.app.address, token=token) as client:
            reply = await client.call_model("gpt", [user("with a token")], timeout=30)
            assert reply.message.text == "You said: with a token"
            outcome = await client.execute_tool("search", {"query": "retries"}, timeout=30)
            assert outcome.HasField("result")


async def test_health_needs_no_token_but_reflection_does(start_sidecar: Start) -> None:
    r = await start_sidecar(server={"auth": {"tokens": [TOKEN_A]}})
    async with grpc.aio.insecure_channel(r.app.address) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        ask = [reflection_pb2.ServerReflectionRequest(list_services="")]
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for _ in stub.ServerReflectionInfo(iter(ask), timeout=10):
                pass
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        answers = [
            a
            async for a in stub.ServerReflectionInfo(
                iter(ask), timeout=10, metadata=(("authorization", f"Bearer {TOKEN_A}"),)
            )
        ]
    assert "sidecar.v1.Sidecar" in {s.name for s in answers[0].list_services_response.service}


async def test_tls_and_a_token_together_through_the_python_client(start_sidecar: Start, pki: Pki) -> None:
    r = await start_sidecar(server={"tls": _tls(pki), "auth": {"tokens": [TOKEN_A]}})
    async with AsyncSidecarClient(r.app.address, tls=Tls.from_files(ca=pki.ca), token=TOKEN_A) as client:
        assert (await client.call_model("gpt", [user("both")], timeout=30)).message.text == "You said: both"
    async with AsyncSidecarClient(r.app.address, tls=Tls.from_files(ca=pki.ca)) as client:
        with pytest.raises(sc.UnauthorizedError):
            await client.call_model("gpt", [user("no token")], timeout=30)


def test_the_blocking_client_takes_tls_and_a_token_too(pki: Pki) -> None:
    with pytest.raises(ValueError, match="tls or channel"):
        sc.SidecarClient("127.0.0.1:1", tls=True, channel=grpc.insecure_channel("127.0.0.1:1"))
    with pytest.raises(ValueError, match="needs its key"):
        Tls(cert=pki.client_cert.read_bytes())
    with pytest.raises(ValueError, match="token"):
        sc.SidecarClient("127.0.0.1:1", token=" spaced ")


def test_bearer_token_parsing_and_constant_time_match() -> None:
    assert bearer_token([("authorization", f"Bearer {TOKEN_A}")]) == TOKEN_A
    assert bearer_token([("authorization", f"bearer   {TOKEN_A} ")]) == TOKEN_A
    assert bearer_token([("authorization", f"Basic {TOKEN_A}")]) is None
    assert bearer_token([("x-other", "Bearer x")]) is None
    assert bearer_token(None) is None
    check = BearerTokenInterceptor([TOKEN_A, TOKEN_B])
    assert check.authorized(TOKEN_A)
    assert check.authorized(TOKEN_B)
    assert not check.authorized(None)
    assert not check.authorized("")
    assert not check.authorized(TOKEN_A + "x")


async def test_reflection_can_be_turned_off(start_sidecar: Start) -> None:
    r = await start_sidecar(server={"reflection": False})
    async with grpc.aio.insecure_channel(r.app.address) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for _ in stub.ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10
            ):
                pass
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
