"""Every FailureKind round-trips: core class -> proto -> gRPC status details -> the client's exception."""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio
import sidecar_client
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from sidecar_client import AsyncSidecarClient, pb
from sidecar_contract.v1 import sidecar_pb2_grpc as pb_grpc

from sidecar.core import correctability
from sidecar.core import taxonomy as t
from sidecar.core.correctability import CORRECTABLE_LINE, UNCORRECTABLE_LINE
from sidecar.core.details import HttpInfo, Trigger
from sidecar.core.kinds import (
    CORRECTABLE_KINDS,
    CircuitState,
    FailureKind,
    FinishReason,
    RetrySignal,
    Role,
    TransportFault,
)
from sidecar.server import convert
from sidecar.server.grpc.status import GRPC_CODE, to_status

HTTP = HttpInfo(503, "docs", "http://h/x", '{"error":"down"}', "7")

EXAMPLES: dict[str, t.SidecarFailure] = {
    "INVALID_INPUT": t.InvalidInput("query", "", "must not be blank"),
    "RESOURCE_NOT_FOUND": t.ResourceNotFound("document", "doc-99"),
    "GUARDRAIL": t.Guardrail("pii", "the input holds an email address", "a@b.c"),
    "JSON_PARSE": t.JsonParse("Expecting value at line 1 column 1", '{"name": string}', model="gpt"),
    "RESPONSE_VALIDATION": t.ResponseValidation([("name", "is required but empty"), ("age", "is required")]),
    "EXTERNAL_SERVICE": t.ExternalService("docs", "http://h/x", "down", http=HTTP, retry_after=7.0),
    "UPSTREAM_THROTTLE": t.UpstreamThrottle("docs", "http://h/x", "slow down", http=HTTP, retry_after=7.0),
    "UNAUTHORIZED": t.Unauthorized("docs", "HTTP 401"),
    "PERMISSION_DENIED": t.PermissionDenied("The user may not read this folder.", "folder:1"),
    "SYSTEM": t.SystemFailure("the tool runner"),
    "CIRCUIT_OPEN": t.CircuitOpen(
        "docs", remaining=29.6, since=datetime(2026, 1, 1, tzinfo=UTC), cooldown=30, trigger=Trigger(503, "down", "7")
    ),
    "UPSTREAM_RETRIES_EXHAUSTED": t.UpstreamRetriesExhausted(
        "Model gpt (oai)", 3, RetrySignal.RATE_LIMIT, "slow down", http=HTTP, retry_after=None
    ),
    "QUOTA_EXHAUSTED": t.QuotaExhausted("oai", "team-a", "gpt", "insufficient_quota", http=HTTP),
    "SPEND_CAP_EXCEEDED": t.SpendCapExceeded("wf-1", 1.5, 1.0),
    "MODEL_NOT_FOUND": t.ModelNotFound("gpt-9", ["claude", "gpt"]),
    "PROVIDER_REFUSAL": t.ProviderRefusal("gpt", "refusal", "I can't help with that."),
    "TOKEN_ESTIMATE_EXCEEDS_LIMIT": t.TokenEstimateExceedsLimit("gpt", 9000, 8000),
    "CONTEXT_OVERFLOW": t.ContextOverflow("oai", "gpt", "maximum context length is 8000", http=HTTP),
    "OUTPUT_TRUNCATED": t.OutputTruncated("gpt", 2048, 2048),
    "JOB_TIMEOUT": t.JobTimeout(
        "model gpt", "the next retry would wait 20 s", signal=RetrySignal.OVERLOAD, http=HTTP, retry_after=20.0
    ),
    "JOB_CANCELLED": t.JobCancelled("model gpt"),
    "STREAM_INTERRUPTED": t.StreamInterrupted("gpt", "overloaded_error mid-stream", "Once upon", 3),
}
CORRECTABLE = {"INVALID_INPUT", "RESOURCE_NOT_FOUND", "GUARDRAIL", "JSON_PARSE", "RESPONSE_VALIDATION"}


def test_every_kind_of_the_contract_has_an_example_a_class_and_a_code() -> None:
    kinds = {v.name.removeprefix("FAILURE_KIND_") for v in pb.FailureKind.DESCRIPTOR.values if v.number}
    assert set(EXAMPLES) == kinds
    assert {k.name for k in FailureKind if k is not FailureKind.UNSPECIFIED} == kinds
    assert {k.name for k in GRPC_CODE} == kinds
    for name, failure in EXAMPLES.items():
        assert failure.kind_name == name
        assert failure.correctable is (name in CORRECTABLE)


def test_client_and_server_agree_on_correctable_kinds() -> None:
    assert {FailureKind(k).name for k in sidecar_client.CORRECTABLE_KINDS} == CORRECTABLE
    assert {k.name for k in CORRECTABLE_KINDS} == CORRECTABLE


FAILURE_KINDS_FILE = Path(__file__).resolve().parents[1] / "conformance" / "failure_kinds.json"
"""What the contract says of each kind, as data (tools/protogen.py): the Go, TypeScript and Java clients' own
tests compare their answers with it."""


def test_the_contract_is_the_one_source_of_correctability() -> None:
    """The correctable kinds and the two retry lines are written once, as options of FailureKind in sidecar.proto.
    The core (through its generated table), the Python client, and the data every other client's tests read all
    say what the stubs' options say (tools/protogen.py --check proves the stubs say what the proto says)."""
    kinds = pb.FailureKind.DESCRIPTOR
    options: Any = kinds.GetOptions()
    marked = {value.number for value in kinds.values if _options(value).Extensions[pb.correctable]}
    lines = (options.Extensions[pb.correctable_line], options.Extensions[pb.uncorrectable_line])
    assert {FailureKind(n).name for n in marked} == CORRECTABLE
    assert marked == correctability.CORRECTABLE_KIND_NUMBERS
    assert {int(k) for k in CORRECTABLE_KINDS} == marked
    assert set(sidecar_client.CORRECTABLE_KINDS) == marked
    assert lines == (CORRECTABLE_LINE, UNCORRECTABLE_LINE)
    assert lines == (sidecar_client.CORRECTABLE_LINE, sidecar_client.UNCORRECTABLE_LINE)
    facts = json.loads(FAILURE_KINDS_FILE.read_text(encoding="utf-8"))
    assert (facts["correctable_line"], facts["uncorrectable_line"]) == lines
    assert [(k["number"], f"FAILURE_KIND_{k['name']}", k["correctable"]) for k in facts["kinds"]] == [
        (value.number, value.name, value.number in marked) for value in kinds.values
    ]


def _options(descriptor: Any) -> Any:
    return descriptor.GetOptions()


def test_a_failure_class_under_the_branch_the_contract_does_not_name_is_refused() -> None:
    with pytest.raises(TypeError, match="the contract says INVALID_INPUT is correctable"):

        class _Misplaced(t.UncorrectableFailure):
            kind = FailureKind.INVALID_INPUT

    with pytest.raises(TypeError, match="the contract says QUOTA_EXHAUSTED is not correctable"):

        class _AlsoMisplaced(t.CorrectableFailure):
            kind = FailureKind.QUOTA_EXHAUSTED


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_explanation_is_the_message_and_the_exact_retry_line(name: str) -> None:
    failure = EXAMPLES[name]
    message, line = failure.explain_to_llm().rsplit("\n", 1)
    assert message == failure.message
    if name in CORRECTABLE:
        assert (
            line
            == "[This error may be correctable - you can retry with different parameters or try a different approach]"
        )
    else:
        assert line == "[This error is not correctable - consider an alternative approach]"
    assert line in (CORRECTABLE_LINE, UNCORRECTABLE_LINE)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_proto_keeps_every_field(name: str) -> None:
    failure = EXAMPLES[name].with_attempts(4)
    msg = convert.failure(failure)
    assert msg.kind == failure.kind
    assert FailureKind(msg.kind).name == name
    assert t.failure_class(FailureKind(msg.kind)) is type(failure)
    assert (msg.message, msg.explanation, msg.attempts) == (failure.message, failure.explain_to_llm(), 4)
    assert msg.correctable is failure.correctable
    assert msg.HasField("http") is (failure.http is not None)
    assert msg.HasField("retry_after") is (failure.retry_after is not None)
    assert (msg.WhichOneof("detail") is not None) is (failure.detail is not None)
    if failure.detail is not None:  # every field of the detail lands in the message's oneof
        sent = getattr(msg, str(msg.WhichOneof("detail")))
        for field in dataclasses.fields(failure.detail):
            assert _PB_FIELD.get(field.name, field.name) in sent.DESCRIPTOR.fields_by_name


_PB_FIELD = {"cooldown_s": "cooldown", "next_wait_s": "next_wait"}
"""Detail fields whose proto counterparts carry a Duration under another name."""


def test_system_boundary_hides_the_details() -> None:
    failure = t.as_failure(KeyError("secret internals"), "the tool runner")
    assert failure.explain_to_llm() == (
        "A system error occurred in the tool runner. The operation could not be completed.\n" + UNCORRECTABLE_LINE
    )
    kept = t.InvalidInput("q", "", "must not be blank")
    assert t.as_failure(kept, "x") is kept


class _Aborting(pb_grpc.SidecarServicer):
    async def CallModel(self, request: pb.CallModelRequest, context: Any) -> pb.CallModelResponse:
        await context.abort_with_status(rpc_status.to_status(to_status(EXAMPLES[request.model])))
        raise AssertionError("unreachable")


@pytest_asyncio.fixture
async def aborting() -> AsyncIterator[AsyncSidecarClient]:
    server = grpc.aio.server()
    pb_grpc.add_SidecarServicer_to_server(_Aborting(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    client = AsyncSidecarClient(f"127.0.0.1:{port}")
    yield client
    await client.close()
    await server.stop(0)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
async def test_status_details_round_trip_into_the_clients_exception(name: str, aborting: AsyncSidecarClient) -> None:
    failure = EXAMPLES[name]
    with pytest.raises(sidecar_client.SidecarError) as caught:
        await aborting.call_model(name, [sidecar_client.user("hi")])
    err = caught.value
    assert type(err).__name__.removesuffix("Error").upper().replace("SYSTEMFAILURE", "SYSTEM") == name.replace("_", "")
    assert err.kind == failure.kind
    assert err.correctable is failure.correctable
    assert isinstance(
        err, sidecar_client.CorrectableError if name in CORRECTABLE else sidecar_client.UncorrectableError
    )
    assert err.explanation == failure.explain_to_llm()
    assert err.grpc_code == GRPC_CODE[failure.kind]
    assert (err.http is not None) is (failure.http is not None)
    if failure.http is not None:
        assert err.http.retry_after_raw == "7"
    assert err.retry_after == failure.retry_after
    assert err.failure == convert.failure(failure)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_status_carries_one_error_info_and_the_standard_details(name: str) -> None:
    status = to_status(EXAMPLES[name])
    infos, retry = [], []
    for d in status.details:
        if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            d.Unpack(info)
            infos.append(info)
        if d.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry.append(d)
    assert len(infos) == 1
    assert infos[0].reason == name
    assert infos[0].domain == "sidecar"
    assert infos[0].metadata["kind"] == name
    assert len(retry) == (1 if EXAMPLES[name].retry_after is not None else 0)
    assert len({d.type_url for d in status.details}) == len(status.details)
    if name == "INVALID_INPUT":
        assert any(d.Is(error_details_pb2.BadRequest.DESCRIPTOR) for d in status.details)
    if name in ("QUOTA_EXHAUSTED", "SPEND_CAP_EXCEEDED"):
        assert any(d.Is(error_details_pb2.QuotaFailure.DESCRIPTOR) for d in status.details)
    if name == "MODEL_NOT_FOUND":
        assert any(d.Is(error_details_pb2.ResourceInfo.DESCRIPTOR) for d in status.details)


@pytest.mark.parametrize(
    ("core", "proto", "prefix"),
    [
        (FailureKind, pb.FailureKind, "FAILURE_KIND_"),
        (RetrySignal, pb.RetrySignal, "RETRY_SIGNAL_"),
        (TransportFault, pb.TransportFault, "TRANSPORT_FAULT_"),
        (CircuitState, pb.CircuitState, "CIRCUIT_STATE_"),
        (FinishReason, pb.FinishReason, "FINISH_REASON_"),
        (Role, pb.Role, "ROLE_"),
    ],
)
def test_each_core_enum_has_its_proto_counterparts_names_and_numbers(
    core: type[enum.IntEnum], proto: Any, prefix: str
) -> None:
    """``server.convert`` converts these enums by number: the core's and the contract's must agree exactly."""
    contract = {v.name.removeprefix(prefix): v.number for v in proto.DESCRIPTOR.values}
    assert {k.name: k.value for k in core} == contract
