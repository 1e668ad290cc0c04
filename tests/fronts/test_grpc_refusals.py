"""The gRPC port's own refusals, through a real ``sidecar serve`` process: each a precise status, no traceback.

    StreamModel with no token, a wrong one, an admin's      UNAUTHENTICATED (kind UNAUTHORIZED), as CallModel
    bytes that are not the request, to every Admin method   INVALID_ARGUMENT naming the request type, with no
      (no token, an agent's, an operator's)                   token, an agent's or an operator's
    the same to grpc.health.v1.Health and to reflection      INVALID_ARGUMENT naming the request type

and after each, the process log holds no traceback and no coroutine left unawaited (an exception
that escapes to gRPC is answered UNKNOWN and logged with its traceback: a log any local caller
could flood). One process for the module, with ``server.auth`` and ``server.admin`` tokens from
its environment, the project's fakes behind it.

Then the sweep of the whole chain, in process (the server span needs an in-memory exporter): every
refusal the port makes (the token, undecodable bytes at every service, the unnamed enum, shedding,
draining), in every shape it has (unary, server-streaming, bidi), with the span and masking
interceptors on, keeps its code, and its SERVER span records that code.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
import sidecar_client as sc
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2
from opentelemetry import trace
from sidecar_client import pb
from sidecar_contract.v1 import admin_pb2 as apb

from sidecar.config import Config
from sidecar.core.clock import FakeClock
from sidecar.fakes import FakeProvider, FakeToolBackend, ThreadedServer
from sidecar.server.app import running
from sidecar.server.grpc.spans import ServerSpanInterceptor
from sidecar.telemetry.testing import InMemoryTelemetry, install_in_memory
from tests.conftest import base_config, until
from tests.fronts.test_fuzz import Served, failure_of, fuzz_config

AGENT = "agent-token-0123456789abcdef"
ADMIN = "admin-token-0123456789abcdef"
ENV = {"REFUSALS_AGENT_TOKEN": AGENT, "REFUSALS_ADMIN_TOKEN": ADMIN}
MALFORMED = bytes.fromhex("0a056162")  # field 1, length 5, two bytes: "Wire format was corrupt"
DEADLINE_S = 20.0
ADMIN_METHODS = [m.name for m in apb.DESCRIPTOR.services_by_name["Admin"].methods]
WITH = {
    "no token": (),
    "a wrong token": (("authorization", "Bearer wrong-token-0123456789abcdef"),),
    "an agent's token": (("authorization", f"Bearer {AGENT}"),),
    "an operator's token": (("authorization", f"Bearer {ADMIN}"),),
}


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("grpc-refusals")
    with ThreadedServer(FakeProvider()) as provider, ThreadedServer(FakeToolBackend()) as backend:
        cfg = fuzz_config(provider.url, backend.url)
        cfg["server"]["auth"] = {"tokens": ["${REFUSALS_AGENT_TOKEN}"]}
        cfg["server"]["admin"] = {"tokens": ["${REFUSALS_ADMIN_TOKEN}"]}
        cfg["telemetry"] = {"log_level": "WARNING"}
        config_path = tmp / "refusals.yaml"
        config_path.write_text(yaml.safe_dump(cfg))
        served = Served(config_path, tmp / "sidecar.log", env=ENV)
        served.start()
        try:
            yield served
        finally:
            served.stop()
        served.assert_no_traceback(what="the whole run", strict=True)


def _refused(call: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value


def _stream(served: Served, path: str, data: bytes, metadata: tuple[tuple[str, str], ...]) -> None:
    assert served.channel is not None
    for _ in served.channel.unary_stream(path)(data, timeout=DEADLINE_S, metadata=metadata):
        pass


@pytest.mark.parametrize("who", ["no token", "a wrong token", "an operator's token"])
def test_stream_model_without_an_agents_token_is_unauthenticated(guarded: Served, who: str) -> None:
    since = guarded.log_mark()
    request = pb.CallModelRequest(model="local-gpt", messages=[sc.user("hi")]).SerializeToString()
    err = _refused(lambda: _stream(guarded, "/sidecar.v1.Sidecar/StreamModel", request, WITH[who]))
    assert err.code() == grpc.StatusCode.UNAUTHENTICATED, err  # type: ignore[attr-defined]
    refusal = sc.from_rpc_error(err)
    assert isinstance(refusal, sc.UnauthorizedError)
    assert "server.auth.tokens" in refusal.message
    for token in (AGENT, ADMIN, "wrong-token"):
        assert token not in str(err)
    guarded.assert_no_traceback(since, f"StreamModel with {who}", strict=True)


def test_stream_model_with_an_agents_token_streams(guarded: Served) -> None:
    request = pb.CallModelRequest(model="local-gpt", messages=[sc.user("hi")]).SerializeToString()
    _stream(guarded, "/sidecar.v1.Sidecar/StreamModel", request, WITH["an agent's token"])


@pytest.mark.parametrize("method", ADMIN_METHODS)
def test_undecodable_bytes_to_every_admin_method_are_invalid_argument(guarded: Served, method: str) -> None:
    request_type = apb.DESCRIPTOR.services_by_name["Admin"].methods_by_name[method].input_type.full_name
    assert guarded.channel is not None
    call = guarded.channel.unary_unary(f"/sidecar.v1.Admin/{method}")
    for who in ("no token", "an agent's token", "an operator's token"):
        since = guarded.log_mark()
        err = _refused(lambda: call(MALFORMED, timeout=DEADLINE_S, metadata=WITH[who]))  # noqa: B023
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (who, err)  # type: ignore[attr-defined]
        assert f"could not be decoded as {request_type}" in err.details(), err  # type: ignore[attr-defined]
        failure = failure_of(err)
        assert failure is not None
        assert failure.kind == pb.FAILURE_KIND_INVALID_INPUT
        assert failure.invalid_input.parameter == "request"
        guarded.assert_no_traceback(since, f"Admin/{method} with {who}", strict=True)


def test_undecodable_bytes_to_health_and_reflection_are_invalid_argument(guarded: Served) -> None:
    assert guarded.channel is not None
    since = guarded.log_mark()
    check = guarded.channel.unary_unary("/grpc.health.v1.Health/Check")
    for err in (
        _refused(lambda: check(MALFORMED, timeout=DEADLINE_S)),
        _refused(lambda: _stream(guarded, "/grpc.health.v1.Health/Watch", MALFORMED, ())),
    ):
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err  # type: ignore[attr-defined]
        assert health_pb2.HealthCheckRequest.DESCRIPTOR.full_name in err.details()  # type: ignore[attr-defined]
    reflect = guarded.channel.stream_stream("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
    listed = reflection_pb2.ServerReflectionRequest(list_services="").SerializeToString()
    err = _refused(
        lambda: list(reflect(iter([listed, MALFORMED]), timeout=DEADLINE_S, metadata=WITH["an agent's token"]))
    )
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err  # type: ignore[attr-defined]
    assert reflection_pb2.ServerReflectionRequest.DESCRIPTOR.full_name in err.details()  # type: ignore[attr-defined]
    guarded.assert_no_traceback(since, "health and reflection", strict=True)


def test_health_watch_still_streams_through_the_lenient_registration(guarded: Served) -> None:
    """Watch writes with ``context.write`` (gRPC's writer API); its registration runs it inside a generator."""
    assert guarded.channel is not None
    watch = health_pb2_grpc.HealthStub(guarded.channel).Watch(
        health_pb2.HealthCheckRequest(service="sidecar.v1.Sidecar"), timeout=DEADLINE_S
    )
    try:
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
    finally:
        watch.cancel()


# ---------------------------------------------------------------- every refusal through every interceptor

SIDECAR = pb.DESCRIPTOR.services_by_name["Sidecar"]
REFLECTION = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
AGENT_MD = (("authorization", f"Bearer {AGENT}"),)
INVALID = grpc.StatusCode.INVALID_ARGUMENT


async def _answer(channel: grpc.aio.Channel, path: str, shape: str, data: bytes, md: Any = ()) -> grpc.StatusCode:
    """The code a call of ``shape`` (unary, stream: server-streaming, bidi) ended with."""
    try:
        if shape == "unary":
            await channel.unary_unary(path)(data, timeout=DEADLINE_S, metadata=md)
        elif shape == "stream":
            async for _ in channel.unary_stream(path)(data, timeout=DEADLINE_S, metadata=md):
                pass
        else:
            async for _ in channel.stream_stream(path)(iter([data]), timeout=DEADLINE_S, metadata=md):
                pass
    except grpc.aio.AioRpcError as err:
        return err.code()
    return grpc.StatusCode.OK


def _shape(method: Any) -> str:
    return "bidi" if method.client_streaming else "stream" if method.server_streaming else "unary"


SPAN_POLLS, SPAN_POLL_S = 1000, 0.01
"""How long a test waits for a SERVER span to end (10 s: an event, never a bound on speed)."""


def _server_span(otel: InMemoryTelemetry, path: str) -> Any:
    """The one SERVER span of the call to ``path`` since ``otel.clear()``, or None."""
    spans = [s for s in otel.spans() if s.kind == trace.SpanKind.SERVER]
    assert len(spans) <= 1, [s.name for s in spans]
    if spans:
        assert spans[0].name == path.lstrip("/")
    return spans[0] if spans else None


async def test_every_refusal_passes_every_interceptor_in_both_shapes(
    provider: ThreadedServer[FakeProvider],
    backend: ThreadedServer[FakeToolBackend],
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With the server span and masking on (OTLP export, a configured key), each refusal of each shape
    (unary, server-streaming, bidi) keeps its own code through every wrapper, and the SERVER span says
    that code (a call refused for its token has none: the token is checked before the span; health
    and reflection are not traced); nothing is logged with a traceback."""
    otel = install_in_memory()
    sections = {"server": {"auth": {"tokens": [AGENT]}, "admin": {"tokens": [ADMIN]}, "max_in_flight": 1}}
    cfg = Config.model_validate(base_config(provider.url, backend.url, **sections))
    spans = ServerSpanInterceptor(otel.tracer_provider)
    unnamed = pb.CallModelRequest(model="gpt", messages=[sc.user("hi")])
    unnamed.mid_stream = 4  # type: ignore[assignment]
    whole = pb.CallModelRequest(model="gpt", messages=[sc.user("hi")]).SerializeToString()
    call_model, stream_model = f"/{SIDECAR.full_name}/CallModel", f"/{SIDECAR.full_name}/StreamModel"
    cases: list[tuple[str, str, bytes, Any, grpc.StatusCode]] = [
        (call_model, "unary", whole, (), grpc.StatusCode.UNAUTHENTICATED),
        (stream_model, "stream", whole, (), grpc.StatusCode.UNAUTHENTICATED),
        (REFLECTION, "bidi", b"", (), grpc.StatusCode.UNAUTHENTICATED),
        (REFLECTION, "bidi", MALFORMED, AGENT_MD, INVALID),
        ("/grpc.health.v1.Health/Check", "unary", MALFORMED, (), INVALID),
        ("/grpc.health.v1.Health/Watch", "stream", MALFORMED, (), INVALID),
        (stream_model, "stream", unnamed.SerializeToString(), AGENT_MD, INVALID),
    ]
    for service, md in ((SIDECAR, AGENT_MD), (apb.DESCRIPTOR.services_by_name["Admin"], ())):
        cases += [(f"/{service.full_name}/{m.name}", _shape(m), MALFORMED, md, INVALID) for m in service.methods]
    async with (
        running(cfg, listen="127.0.0.1:0", clock=clock, rng=random.Random(7), interceptors=[spans]) as app,
        grpc.aio.insecure_channel(app.address) as channel,
    ):

        async def judged(path: str, shape: str, data: bytes, md: Any, code: grpc.StatusCode) -> None:
            otel.clear()
            assert await _answer(channel, path, shape, data, md) == code, (path, shape, md)
            untraced = code is grpc.StatusCode.UNAUTHENTICATED or path.startswith(("/grpc.health", "/grpc.refl"))
            if untraced:  # refused before the span interceptor: no span is ever begun
                assert _server_span(otel, path) is None, (path, code)
                return
            for _ in range(SPAN_POLLS):  # the server span ends after the status is on its way to the caller
                if (span := _server_span(otel, path)) is not None:
                    break
                await asyncio.sleep(SPAN_POLL_S)
            assert span is not None, (path, code)
            assert span.attributes["rpc.grpc.status_code"] == code.value[0], (path, span.attributes)

        for case in cases:
            await judged(*case)
        provider.server.script("fake-gpt", [{"fault": "hang", "repeat": 3}])
        held = asyncio.ensure_future(_answer(channel, call_model, "unary", whole, AGENT_MD))
        await until(lambda: len(provider.server.requests(model="fake-gpt")) == 1, "the held call reaching the provider")
        for path, shape in ((call_model, "unary"), (stream_model, "stream")):
            await judged(path, shape, whole, AGENT_MD, grpc.StatusCode.RESOURCE_EXHAUSTED)
        assert app.admission is not None
        drained = asyncio.ensure_future(app.admission.drain())
        for path, shape in ((call_model, "unary"), (stream_model, "stream")):
            await judged(path, shape, whole, AGENT_MD, grpc.StatusCode.UNAVAILABLE)
        held.cancel()
        await drained
    for record in caplog.records:
        assert "raised by servicer method" not in record.getMessage()
        assert record.exc_info is None or record.name == "sidecar.failures", record.getMessage()
