"""Request bytes that are not the method's message get INVALID_ARGUMENT naming the type, never UNKNOWN."""

from __future__ import annotations

import asyncio
import logging

import grpc
import pytest
import sidecar_client as sc
from google.rpc import error_details_pb2, status_pb2
from sidecar_client import pb

from sidecar.server.grpc.handlers import SIDECAR_SERVICE_NAME
from tests.conftest import Running

GARBAGE = b"\xff\xff\xff\xff"  # a field tag whose varint never ends: "Wire format was corrupt"
METHODS = [m.name for m in pb.DESCRIPTOR.services_by_name["Sidecar"].methods]


@pytest.mark.parametrize("method", METHODS)
async def test_undecodable_bytes_are_invalid_argument_naming_the_request_type(sidecar: Running, method: str) -> None:
    request_type = pb.DESCRIPTOR.services_by_name["Sidecar"].methods_by_name[method].input_type.full_name
    async with grpc.aio.insecure_channel(sidecar.app.address) as channel:
        call = channel.unary_unary(f"/{SIDECAR_SERVICE_NAME}/{method}", request_serializer=None)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(GARBAGE, timeout=30)
    rpc = caught.value
    assert rpc.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"could not be decoded as {request_type}" in (rpc.details() or "")
    status = status_pb2.Status.FromString(dict(rpc.trailing_metadata() or ())["grpc-status-details-bin"])
    assert status.message == rpc.details()
    err = sc.from_rpc_error(rpc)
    assert isinstance(err, sc.InvalidInputError)
    assert err.detail.parameter == "request"
    assert err.detail.value == f"{len(GARBAGE)} bytes"
    bad = error_details_pb2.BadRequest()
    assert next(d for d in status.details if d.Is(error_details_pb2.BadRequest.DESCRIPTOR)).Unpack(bad)
    assert bad.field_violations[0].field == "request"


async def test_a_valid_request_sent_as_raw_bytes_still_works(sidecar: Running) -> None:
    async with grpc.aio.insecure_channel(sidecar.app.address) as channel:
        call = channel.unary_unary(
            f"/{SIDECAR_SERVICE_NAME}/ListModels", request_serializer=None, response_deserializer=None
        )
        raw = await call(pb.ListModelsRequest().SerializeToString(), timeout=30)
    assert {m.id for m in pb.ListModelsResponse.FromString(raw).models} == {"gpt", "claude"}


@pytest.mark.parametrize("policy", [4, 99, -1])  # 3 is MID_STREAM_POLICY_CONTINUE
async def test_a_mid_stream_policy_the_contract_does_not_name_is_invalid_argument(
    sidecar: Running, policy: int
) -> None:
    request = pb.CallModelRequest(model="gpt", messages=[sc.user("hi")], mid_stream=policy)  # type: ignore[arg-type]
    async with grpc.aio.insecure_channel(sidecar.app.address) as channel:
        call = channel.unary_stream(
            f"/{SIDECAR_SERVICE_NAME}/StreamModel", request_serializer=None, response_deserializer=None
        )
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for _ in call(request.SerializeToString(), timeout=30):
                pass
    rpc = caught.value
    assert rpc.code() == grpc.StatusCode.INVALID_ARGUMENT
    err = sc.from_rpc_error(rpc)
    assert isinstance(err, sc.InvalidInputError)
    assert err.detail.parameter == "mid_stream"
    assert err.detail.value == str(policy)
    assert "MID_STREAM_POLICY_FAIL" in err.detail.rule
    assert sidecar.provider.requests() == []


async def test_calls_cut_at_the_end_of_the_grace_period_say_the_sidecar_is_shutting_down(
    sidecar: Running, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sidecar.failures")  # a call the shutdown stopped: INFO (failure_log)
    sidecar.provider.script("fake-gpt", [{"fault": "hang"}, {"fault": "hang"}])
    whole = asyncio.ensure_future(sidecar.client.call_model("gpt", [sc.user("hi")]))

    async def streamed() -> None:
        async for _ in sidecar.client.stream_model("gpt", [sc.user("hi")]):
            pass

    stream = asyncio.ensure_future(streamed())
    admission = sidecar.app.admission
    assert admission is not None
    for _ in range(2000):
        if admission.in_flight == 2 and len(sidecar.provider.requests(model="fake-gpt")) == 2:
            break
        await asyncio.sleep(0.005)
    await sidecar.app.stop(grace=0.2)
    for call in (whole, stream):
        with pytest.raises(sc.SidecarError) as caught:
            await call
        err = caught.value
        assert err.grpc_code == grpc.StatusCode.UNAVAILABLE
        assert err.kind_name == "UPSTREAM_THROTTLE"
        assert "The sidecar is shutting down" in str(err)
        assert "grace period" in str(err)
    assert any("the sidecar is shutting down" in r.getMessage() for r in caplog.records)
    assert any("2 gRPC calls in flight" in r.getMessage() for r in caplog.records)
    said = [r.getMessage() for r in caplog.records]
    assert not [m for m in said if "cancelled by the caller" in m]  # the sidecar stopped them, and says so
    assert any("The call to model gpt was stopped: the sidecar is shutting down" in m for m in said)
