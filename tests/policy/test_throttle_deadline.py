"""A call whose turn in a throttle cannot come before its deadline fails at once, as JOB_TIMEOUT.

Through the real sidecar over gRPC, on the fake clock, the fake provider scripted with 429s: the
call is refused before it waits (no sleep on the clock), with RetryDetail and RetryInfo, and the
log says JOB_TIMEOUT, not that the caller cancelled.
"""

from __future__ import annotations

import logging
from typing import Any

import grpc
import pytest
import sidecar_client as sc
from google.rpc import error_details_pb2, status_pb2
from sidecar_client import job, pb, user

from tests.conftest import Start, base_config

SLOW_GPT = {"requests_per_minute": 2}  # a burst of 2, then one every 30 s


def slow_models() -> dict[str, Any]:
    models = base_config("http://x", "http://y")["models"]
    return {**models, "gpt": {**models["gpt"], **SLOW_GPT}}


def retry_info(err: sc.SidecarError) -> error_details_pb2.RetryInfo:
    rpc = err.__cause__
    assert isinstance(rpc, grpc.aio.AioRpcError)
    status = status_pb2.Status.FromString(dict(rpc.trailing_metadata() or ())["grpc-status-details-bin"])
    for detail in status.details:
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            return info
    raise AssertionError("no RetryInfo in the status details")


def logged_kinds(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [str(getattr(r, "failure_kind", "")) for r in caplog.records if hasattr(r, "failure_kind")]


async def test_a_call_queued_behind_the_model_throttle_past_its_deadline_fails_at_once(
    start_sidecar: Start, caplog: pytest.LogCaptureFixture
) -> None:
    sidecar = await start_sidecar(models=slow_models())
    sidecar.provider.script("fake-gpt", [{"preset": "rate_limit", "retry_after": "0"}])
    with pytest.raises(sc.UpstreamRetriesExhaustedError):  # the 429 raises the throttle to 0.5: one every 45 s
        await sidecar.client.call_model("gpt", [user("one")], job=job(upstream_retries=0))
    throttle = sidecar.app.models.throttle("gpt")  # type: ignore[union-attr]
    others = [throttle.reserve() for _ in range(2)]  # two callers queued ahead: the burst's last, and +45 s
    assert [t.at - sidecar.clock.now for t in others] == pytest.approx([0, 45])
    caplog.clear()
    with caplog.at_level(logging.INFO), pytest.raises(sc.JobTimeoutError) as caught:
        await sidecar.client.call_model("gpt", [user("two")], timeout=60)  # its turn: +90 s, behind them
    err = caught.value
    assert err.grpc_code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert "the model is throttled for 90.0 s, but only " in err.message
    assert " s remain" in err.message
    assert isinstance(err.detail, pb.RetryDetail)
    assert err.detail.target == "model gpt"
    assert err.detail.next_wait.ToTimedelta().total_seconds() == pytest.approx(90, abs=0.01)
    assert err.retry_after == pytest.approx(90, abs=0.01)
    assert retry_info(err).retry_delay.ToTimedelta().total_seconds() == pytest.approx(90, abs=0.01)
    assert sidecar.clock.sleeps == []  # refused before any wait
    assert len(sidecar.provider.requests(model="fake-gpt")) == 1  # and never sent
    assert logged_kinds(caplog) == ["JOB_TIMEOUT"]
    assert not any("cancelled by the caller" in r.getMessage() for r in caplog.records)
    for ticket in others:  # they give up; the one at +45 s gives its slot back (the one due now was spent)
        throttle.settle(ticket)
    await sidecar.client.call_model("gpt", [user("three")], timeout=60)  # its turn, +45 s, fits: it waits
    assert sidecar.clock.sleeps == pytest.approx([45])


async def test_a_call_behind_a_retry_after_pause_past_its_deadline_fails_at_once(
    start_sidecar: Start, caplog: pytest.LogCaptureFixture
) -> None:
    sidecar = await start_sidecar()
    sidecar.provider.script("fake-gpt", [{"preset": "rate_limit", "retry_after": "20"}])
    with pytest.raises(sc.UpstreamRetriesExhaustedError):  # pauses the model for every caller for 20 s
        await sidecar.client.call_model("gpt", [user("one")], job=job(upstream_retries=0))
    caplog.clear()
    with caplog.at_level(logging.INFO), pytest.raises(sc.JobTimeoutError) as caught:
        await sidecar.client.call_model("gpt", [user("two")], timeout=5)
    err = caught.value
    assert "the model is paused by the provider's Retry-After for 20.0 s" in err.message
    assert isinstance(err.detail, pb.RetryDetail)
    assert err.detail.next_wait.ToTimedelta().total_seconds() == pytest.approx(20, abs=0.01)
    assert sidecar.clock.sleeps == []
    assert logged_kinds(caplog) == ["JOB_TIMEOUT"]


async def test_a_tool_call_behind_the_service_throttle_past_its_deadline_fails_at_once(
    start_sidecar: Start, caplog: pytest.LogCaptureFixture
) -> None:
    sidecar = await start_sidecar(services={"docs": {"rate": 1, "per_s": 30}})
    first = await sidecar.client.execute_tool("fetch", {"id": "doc-1"})
    assert first.WhichOneof("outcome") == "result"
    with caplog.at_level(logging.INFO):
        late = await sidecar.client.execute_tool("fetch", {"id": "doc-2"}, timeout=10)
    assert late.WhichOneof("outcome") == "failure"
    assert late.failure.kind == pb.FAILURE_KIND_JOB_TIMEOUT
    assert "the docs service is throttled for 30.0 s, but only " in late.failure.message
    assert late.failure.retry_after.ToTimedelta().total_seconds() == pytest.approx(30)
    assert sidecar.clock.sleeps == []
    assert len(sidecar.backend.requests()) == 1
    assert "JOB_CANCELLED" not in logged_kinds(caplog)
    assert not any("cancelled by the caller" in r.getMessage() for r in caplog.records)
