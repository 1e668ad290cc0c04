"""The in-flight limit over real gRPC: calls past server.max_in_flight are shed, the rest stay responsive."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

import grpc
import pytest
import pytest_asyncio
import sidecar_client as sc
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sidecar_client import pb, user

from sidecar.server.admission import SHED_LOG_WINDOW_S, SHED_RETRY_AFTER_S
from tests.conftest import Running, Start

LIMIT = 2


async def until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` (the calls cross real sockets); fail naming ``what`` if it never holds."""
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


@pytest_asyncio.fixture
async def saturated(start_sidecar: Start) -> AsyncIterator[tuple[Running, list[asyncio.Future[object]]]]:
    """A sidecar whose LIMIT slots are held by CallModel calls the provider never answers."""
    r = await start_sidecar(server={"max_in_flight": LIMIT})
    r.provider.script("fake-gpt", [{"fault": "hang", "repeat": LIMIT}])
    held = [asyncio.ensure_future(r.client.call_model("gpt", [user("hold")])) for _ in range(LIMIT)]
    await until(lambda: len(r.provider.requests(model="fake-gpt")) == LIMIT, "both calls reach the provider")
    assert r.app.admission is not None
    assert r.app.admission.in_flight == LIMIT
    yield r, held
    for call in held:
        call.cancel()
    await asyncio.gather(*held, return_exceptions=True)


def _status(exc: grpc.aio.AioRpcError) -> status_pb2.Status:
    return status_pb2.Status.FromString(dict(exc.trailing_metadata() or ())["grpc-status-details-bin"])


async def test_a_call_past_the_limit_gets_resource_exhausted_with_retry_info(
    saturated: tuple[Running, list[asyncio.Future[object]]],
) -> None:
    r, _ = saturated
    with pytest.raises(sc.UpstreamThrottleError) as caught:
        await r.client.call_model("gpt", [user("one more")], timeout=30)
    err = caught.value
    assert err.grpc_code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert err.retry_after == SHED_RETRY_AFTER_S
    assert not err.correctable
    assert f"limit of {LIMIT} calls at once (server.max_in_flight)" in err.message
    rpc = err.__cause__
    assert isinstance(rpc, grpc.aio.AioRpcError)
    status = _status(rpc)
    assert status.code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
    retry = [d for d in status.details if d.Is(error_details_pb2.RetryInfo.DESCRIPTOR)]
    assert len(retry) == 1
    info = error_details_pb2.RetryInfo()
    retry[0].Unpack(info)
    assert info.retry_delay.ToTimedelta().total_seconds() == SHED_RETRY_AFTER_S
    errinfo = error_details_pb2.ErrorInfo()
    assert next(d for d in status.details if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR)).Unpack(errinfo)
    assert (errinfo.reason, errinfo.domain, errinfo.metadata["service"]) == ("UPSTREAM_THROTTLE", "sidecar", "sidecar")
    assert len(r.provider.requests(model="fake-gpt")) == LIMIT  # the shed call never reached the provider


async def test_execute_tool_is_limited_too(saturated: tuple[Running, list[asyncio.Future[object]]]) -> None:
    r, _ = saturated
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await r.client.execute_tool("search", {"query": "retries"}, timeout=30)
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert sc.from_rpc_error(caught.value).retry_after == SHED_RETRY_AFTER_S


async def test_health_lists_and_classify_answer_while_the_limit_is_saturated(
    saturated: tuple[Running, list[asyncio.Future[object]]],
) -> None:
    r, _ = saturated
    async with grpc.aio.insecure_channel(r.app.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "sidecar.v1.Sidecar"):
            reply = await health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
    assert {m.id for m in await r.client.list_models()} == {"gpt", "claude"}
    assert "search" in {t.definition.name for t in await r.client.list_tools()}
    classified = await r.client.classify_failure(
        pb.ClassifyFailureRequest(service="docs", response=pb.ObservedResponse(status_code=503))
    )
    assert classified.kind == pb.FAILURE_KIND_EXTERNAL_SERVICE
    assert r.app.admission is not None
    assert r.app.admission.shed == 0


async def test_a_slot_freed_admits_the_next_call(saturated: tuple[Running, list[asyncio.Future[object]]]) -> None:
    r, held = saturated
    held[0].cancel()
    await asyncio.gather(held[0], return_exceptions=True)
    assert r.app.admission is not None
    admission = r.app.admission
    await until(lambda: admission.in_flight == LIMIT - 1, "the cancelled call gives its slot back")
    reply = await r.client.call_model("gpt", [user("now there is room")], timeout=30)
    assert reply.message.text == "You said: now there is room"
    assert admission.shed == 0


async def test_shed_calls_are_logged_once_then_counted_per_window(
    saturated: tuple[Running, list[asyncio.Future[object]]], caplog: pytest.LogCaptureFixture
) -> None:
    r, _ = saturated
    with caplog.at_level(logging.WARNING, logger="sidecar.server"):
        for _ in range(5):
            with pytest.raises(sc.UpstreamThrottleError):
                await r.client.call_model("gpt", [user("shed me")], timeout=30)
        lines = [rec for rec in caplog.records if rec.name == "sidecar.server"]
        assert len(lines) == 1, [rec.getMessage() for rec in lines]
        assert "shed a call to sidecar.v1.Sidecar/CallModel" in lines[0].getMessage()
        r.clock.advance(SHED_LOG_WINDOW_S)
        lines = [rec for rec in caplog.records if rec.name == "sidecar.server"]
        assert len(lines) == 2
        assert lines[1].getMessage().startswith("shed 4 more calls in the last")
        assert getattr(lines[1], "shed", None) == 4
        r.clock.advance(SHED_LOG_WINDOW_S)  # a quiet window writes nothing
        assert len([rec for rec in caplog.records if rec.name == "sidecar.server"]) == 2
    assert r.app.admission is not None
    assert r.app.admission.shed == 5
