"""The Python client: sync and async calls, streams, typed failures, tool-result messages.

The streaming tests run the client against a scripted in-process gRPC server (``Scripted``): it
answers StreamModel by the request's model id, so each test reads one exact wire sequence.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
import pytest_asyncio
import sidecar_client as sc
from google.protobuf import duration_pb2
from google.rpc import error_details_pb2, status_pb2
from sidecar_client import SidecarClient, anthropic_tool_result, assistant, openai_tool_message, pb, tool_results, user
from sidecar_contract.v1 import sidecar_pb2_grpc as pb_grpc

from tests.conftest import Running


def test_public_surface_is_complete() -> None:
    exported = set(sc.__all__)
    errors = {name for name in dir(sc) if name.endswith("Error") and not name.startswith("_")}
    assert errors <= exported
    assert len([e for e in errors if e not in ("SidecarError", "CorrectableError", "UncorrectableError")]) == 22


def test_the_client_pins_the_contract_at_the_contracts_version() -> None:
    """One version source (protos/python/pyproject.toml): the client carries it and pins the contract to it, by
    version, as a package index takes it (a path to the contract is a direct reference an index refuses)."""
    root = Path(__file__).resolve().parents[2]
    contract = tomllib.loads((root / "protos/python/pyproject.toml").read_text())["project"]
    client = tomllib.loads((root / "clients/python/pyproject.toml").read_text())["project"]
    assert "version" not in client
    assert "dependencies" not in client
    assert importlib.metadata.version("sidecar-client") == contract["version"]
    requires = importlib.metadata.requires("sidecar-client") or []
    assert f"sidecar-contract=={contract['version']}" in requires
    assert not [r for r in requires if "@" in r]


async def test_sync_client_against_the_running_sidecar(sidecar: Running) -> None:
    def work() -> tuple[pb.ExecuteToolResponse, pb.CallModelResponse, str]:
        with SidecarClient(sidecar.app.address) as client:
            tool = client.execute_tool("fetch", {"id": "doc-404"}, call_id="c1")
            reply = client.call_model("gpt", [user("hi")])
            try:
                client.call_model("nope", [user("hi")])
            except sc.ModelNotFoundError as err:
                return tool, reply, err.kind_name
            raise AssertionError("no error")

    tool, reply, kind = await asyncio.to_thread(work)
    assert tool.failure.kind == pb.FAILURE_KIND_RESOURCE_NOT_FOUND
    assert reply.message.text == "You said: hi"
    assert kind == "MODEL_NOT_FOUND"


async def test_tool_result_messages_for_both_chat_formats(sidecar: Running) -> None:
    ok = await sidecar.client.execute_tool("fetch", {"id": "doc-1"}, call_id="call_ok")
    bad = await sidecar.client.execute_tool("fetch", {"id": "doc-404"}, call_id="call_bad")
    assert openai_tool_message(ok) == {"role": "tool", "tool_call_id": "call_ok", "content": ok.model_text}
    assert openai_tool_message(bad)["content"].endswith(
        "you can retry with different parameters or try a different approach]"
    )
    assert anthropic_tool_result(ok) == {"type": "tool_result", "tool_use_id": "call_ok", "content": ok.model_text}
    assert anthropic_tool_result(bad) == {
        "type": "tool_result",
        "tool_use_id": "call_bad",
        "content": bad.model_text,
        "is_error": True,
    }


def test_a_misspelt_model_option_is_refused_before_anything_is_sent() -> None:
    """The options are typed (``ModelOptions``) for mypy, and checked at run time: a misspelt one is never dropped."""
    client = SidecarClient("127.0.0.1:1")
    try:
        with pytest.raises(TypeError, match=r"takes no temprature .*temperature"):
            client.call_model("gpt", [user("hi")], temprature=0.2)  # type: ignore[call-arg]
        with pytest.raises(TypeError, match="takes no stop_sequences"):
            client.stream_model("gpt", [user("hi")], stop_sequences=["\n"])  # type: ignore[call-arg]
    finally:
        client.close()


def test_a_status_without_details_still_becomes_a_typed_error() -> None:
    import grpc
    from google.rpc import status_pb2

    err = sc.errors.from_status(status_pb2.Status(code=4, message="deadline"), grpc.StatusCode.DEADLINE_EXCEEDED)
    assert isinstance(err, sc.JobTimeoutError)
    assert err.explanation == "deadline\n[This error is not correctable - consider an alternative approach]"


@pytest.mark.parametrize("kind", [k for k in pb.FailureKind.values() if k])
def test_every_kind_has_its_own_exception_class(kind: int) -> None:
    cls = sc.error_class(kind)
    assert cls.kind == kind
    assert issubclass(cls, sc.CorrectableError) is (kind in sc.CORRECTABLE_KINDS)


# ---------------------------------------------------------------- StreamModel, scripted

UNCORRECTABLE_LINE = "[This error is not correctable - consider an alternative approach]"
WAIT_FOR_CANCEL_S = 5.0  # how long a test waits for the server to see a cancellation


def _failure(kind: int, message: str, **fields: object) -> pb.Failure:
    failure = pb.Failure(message=message, explanation=f"{message}\n{UNCORRECTABLE_LINE}", **fields)
    failure.kind = kind
    return failure


def _interrupted() -> pb.Failure:
    return _failure(
        pb.FAILURE_KIND_STREAM_INTERRUPTED,
        "The stream of fast was cut after 2 deltas: connection dropped.",
        attempts=1,
        stream=pb.StreamDetail(partial_text="Hello, wo", reason="connection dropped", deltas_sent=2),
        hops=[
            pb.Hop(deployment="fast-a", kind=pb.FAILURE_KIND_CIRCUIT_OPEN, reason="circuit open", skipped=True),
            pb.Hop(deployment="fast-b", kind=pb.FAILURE_KIND_STREAM_INTERRUPTED, attempts=1, reason="cut"),
        ],
    )


def _quota() -> pb.Failure:
    return _failure(
        pb.FAILURE_KIND_QUOTA_EXHAUSTED,
        "The provider account of openai is out of credit.",
        attempts=1,
        http=pb.HttpDetail(status_code=429, service="openai", endpoint="/v1/chat/completions"),
        retry_after=duration_pb2.Duration(seconds=7),
        provider=pb.ProviderDetail(provider="openai", account="default", model="fast"),
    )


# The status code the sidecar sends each scripted failure with (docs/failures.md).
_CODES = {
    pb.FAILURE_KIND_STREAM_INTERRUPTED: grpc.StatusCode.ABORTED,
    pb.FAILURE_KIND_QUOTA_EXHAUSTED: grpc.StatusCode.RESOURCE_EXHAUSTED,
}
_FAILURES = {"interrupted": _interrupted, "quota": _quota}


async def _abort(context: grpc.aio.ServicerContext[object, object], failure: pb.Failure) -> None:
    """Ends the call as the sidecar does: code, message, and the rich status in the trailer."""
    code = _CODES[failure.kind]
    status = status_pb2.Status(code=code.value[0], message=failure.message)
    status.details.add().Pack(failure)
    reason = pb.FailureKind.Name(failure.kind).removeprefix("FAILURE_KIND_")
    status.details.add().Pack(error_details_pb2.ErrorInfo(reason=reason, domain="sidecar"))
    if failure.HasField("retry_after"):
        status.details.add().Pack(error_details_pb2.RetryInfo(retry_delay=failure.retry_after))
    await context.abort(
        code, failure.message, trailing_metadata=(("grpc-status-details-bin", status.SerializeToString()),)
    )


def _text(text: str) -> pb.StreamModelEvent:
    return pb.StreamModelEvent(text=pb.TextDelta(text=text))


def _final(text: str, **fields: object) -> pb.StreamModelEvent:
    reply = pb.CallModelResponse(message=pb.Message(role=pb.ROLE_ASSISTANT, text=text), **fields)
    return pb.StreamModelEvent(final=reply)


_HEDGED_HOPS = [
    pb.Hop(deployment="slow-a", kind=pb.FAILURE_KIND_JOB_CANCELLED, attempts=1, reason="lost the race", cancelled=True),
    pb.Hop(deployment="fast-b", attempts=1, reason="served", hedge=True),
]
_COMPACTION = pb.Compaction(
    trigger=pb.COMPACTION_TRIGGER_PROVIDER,
    tokens_before=900,
    tokens_after=300,
    steps=[
        pb.CompactionStep(strategy=pb.COMPACTION_STRATEGY_TOOL_RESULTS, turns=[2], tokens_before=900, tokens_after=300)
    ],
    messages=[pb.Message(role=pb.ROLE_USER, text="compacted")],
    summarizer_calls=0,
)


class Scripted(pb_grpc.SidecarServicer):
    """A sidecar whose StreamModel answers are scripted by model id."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.requests: list[pb.CallModelRequest] = []

    async def CallModel(
        self, request: pb.CallModelRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.CallModelResponse:
        await _abort(context, _FAILURES[request.model]())
        raise AssertionError("unreachable")

    async def StreamModel(
        self, request: pb.CallModelRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> AsyncIterator[pb.StreamModelEvent]:
        self.requests.append(request)
        if request.model == "deltas":
            yield _text("Hel")
            yield _text("lo")
            yield pb.StreamModelEvent(
                tool_call=pb.ToolCallDelta(index=0, id="call_1", name="search", arguments_fragment='{"q":')
            )
            yield pb.StreamModelEvent(tool_call=pb.ToolCallDelta(index=0, arguments_fragment='"x"}'))
            yield _final(
                "Hello",
                served_by="fast-b",
                hops=[
                    pb.Hop(deployment="fast-a", kind=pb.FAILURE_KIND_CIRCUIT_OPEN, skipped=True),
                    pb.Hop(deployment="fast-b", attempts=1, reason="served"),
                ],
            )
        elif request.model == "restart":
            yield _text("Hel")
            yield pb.StreamModelEvent(
                tool_call=pb.ToolCallDelta(index=0, id="call_0", name="old", arguments_fragment="{")
            )
            yield pb.StreamModelEvent(
                restart=pb.StreamRestart(cause=pb.RESTART_CAUSE_UPSTREAM_FAULT, reason="connection dropped", attempt=2)
            )
            yield _text("Good")
            yield _text("bye")
            yield _final("Goodbye")
        elif request.model in _FAILURES:
            yield _text("Hello, ")
            yield _text("wo")
            await _abort(context, _FAILURES[request.model]())
        elif request.model == "no-final":
            yield _text("Hel")
        elif request.model == "policy":
            yield _text(pb.MidStreamPolicy.Name(request.mid_stream))
            yield _final("")
        elif request.model == "compact":
            strategies = [pb.CompactionStrategy.Name(s) for s in request.on_overflow.strategies]
            yield _text(" ".join([pb.OverflowAction.Name(request.on_overflow.action), *strategies]))
            yield _final("ok", served_by="fast-b", hops=_HEDGED_HOPS, compaction=_COMPACTION)
        elif request.model == "slow":
            try:
                yield _text("Hel")
                self.started.set()
                await asyncio.Event().wait()  # until the client cancels
            except (asyncio.CancelledError, GeneratorExit):
                # Wherever the cancellation finds the handler: at the wait, or still in the yield while
                # grpc sends "Hel" (then grpc is cancelled and closes this generator at the yield).
                self.cancelled.set()
                raise


class ScriptedServer:
    def __init__(self, servicer: Scripted, address: str) -> None:
        self.servicer = servicer
        self.address = address
        self.client = sc.AsyncSidecarClient(address)


@pytest_asyncio.fixture
async def scripted() -> AsyncIterator[ScriptedServer]:
    servicer = Scripted()
    server = grpc.aio.server()
    pb_grpc.add_SidecarServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    running = ScriptedServer(servicer, f"127.0.0.1:{port}")
    try:
        yield running
    finally:
        await running.client.close()
        await server.stop(None)


async def _read_texts(stream: sc.AsyncModelStream, texts: list[str]) -> None:
    async for event in stream:
        texts.append(event.text.text)


async def test_a_stream_delivers_its_deltas_then_the_final_reply(scripted: ScriptedServer) -> None:
    stream = scripted.client.stream_model("deltas", [user("hi")])
    kinds = [event.WhichOneof("event") async for event in stream]
    assert kinds == ["text", "text", "tool_call", "tool_call", "final"]
    assert stream.text == "Hello"
    assert [(c.id, c.name, c.arguments_json) for c in stream.tool_calls] == [("call_1", "search", '{"q":"x"}')]
    assert stream.final is not None
    assert stream.final.served_by == "fast-b"
    assert [h.deployment for h in stream.final.hops] == ["fast-a", "fast-b"]
    assert stream.restarts == 0


async def test_collect_returns_the_final_reply(scripted: ScriptedServer) -> None:
    stream = scripted.client.stream_model("deltas", [user("hi")])
    reply = await stream.collect()
    assert reply.message.text == "Hello"
    assert reply.served_by == "fast-b"
    assert stream.text == "Hello"


async def test_a_restart_voids_what_came_before_it(scripted: ScriptedServer) -> None:
    stream = scripted.client.stream_model("restart", [user("hi")])
    seen: list[str] = []
    async for event in stream:
        if event.HasField("restart"):
            assert event.restart.cause == pb.RESTART_CAUSE_UPSTREAM_FAULT
            assert event.restart.attempt == 2
            assert stream.text == ""
            assert stream.tool_calls == []
        seen.append(event.WhichOneof("event") or "")
    assert seen == ["text", "tool_call", "restart", "text", "text", "final"]
    assert stream.text == "Goodbye"
    assert stream.tool_calls == []
    assert stream.restarts == 1


async def test_a_failure_after_deltas_raises_stream_interrupted_with_its_detail(scripted: ScriptedServer) -> None:
    stream = scripted.client.stream_model("interrupted", [user("hi")])
    texts: list[str] = []
    with pytest.raises(sc.StreamInterruptedError) as caught:
        await _read_texts(stream, texts)
    assert texts == ["Hello, ", "wo"]
    err = caught.value
    assert isinstance(err, sc.UncorrectableError)
    assert not err.correctable
    assert err.kind_name == "STREAM_INTERRUPTED"
    assert err.grpc_code == grpc.StatusCode.ABORTED
    assert err.partial_text == "Hello, wo"
    assert err.stream.reason == "connection dropped"
    assert err.stream.deltas_sent == 2
    assert err.detail == err.stream
    assert [(h.deployment, h.kind, h.skipped) for h in err.hops] == [
        ("fast-a", pb.FAILURE_KIND_CIRCUIT_OPEN, True),
        ("fast-b", pb.FAILURE_KIND_STREAM_INTERRUPTED, False),
    ]
    assert stream.text == "Hello, wo"


async def test_a_stream_failure_is_the_error_call_model_raises(scripted: ScriptedServer) -> None:
    with pytest.raises(sc.SidecarError) as unary:
        await scripted.client.call_model("quota", [user("hi")])
    stream = scripted.client.stream_model("quota", [user("hi")])
    with pytest.raises(sc.SidecarError) as streamed:
        await stream.collect()
    assert type(streamed.value) is type(unary.value) is sc.QuotaExhaustedError
    assert streamed.value.failure == unary.value.failure == _quota()
    assert streamed.value.retry_after == 7.0
    assert streamed.value.http is not None
    assert streamed.value.http.status_code == 429
    assert streamed.value.grpc_code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert stream.text == "Hello, wo"


async def test_collect_without_a_final_event_is_a_system_failure(scripted: ScriptedServer) -> None:
    with pytest.raises(sc.SystemFailureError, match="without its final event"):
        await scripted.client.stream_model("no-final", [user("hi")]).collect()


async def test_the_mid_stream_policy_reaches_the_sidecar(scripted: ScriptedServer) -> None:
    stream = scripted.client.stream_model("policy", [user("hi")], mid_stream=pb.MID_STREAM_POLICY_FAIL)
    await stream.collect()
    assert stream.text == "MID_STREAM_POLICY_FAIL"


async def test_the_overflow_policy_reaches_the_sidecar_and_the_compaction_and_hedge_come_back(
    scripted: ScriptedServer,
) -> None:
    history = [user("hi"), user("again")]
    stream = scripted.client.stream_model("compact", history, on_overflow=["tool_results", "summarize"])
    reply = await stream.collect()
    assert stream.text == "OVERFLOW_ACTION_COMPACT COMPACTION_STRATEGY_TOOL_RESULTS COMPACTION_STRATEGY_SUMMARIZE"
    assert reply.compaction == _COMPACTION
    assert sc.compacted(history, reply) == [pb.Message(role=pb.ROLE_USER, text="compacted")]
    assert [(h.deployment, h.hedge, h.cancelled) for h in reply.hops] == [
        ("slow-a", False, True),
        ("fast-b", True, False),
    ]


async def test_breaking_out_of_the_iteration_cancels_the_rpc(scripted: ScriptedServer) -> None:
    async for event in scripted.client.stream_model("slow", [user("hi")]):
        assert event.text.text == "Hel"
        break
    await asyncio.wait_for(scripted.servicer.cancelled.wait(), WAIT_FOR_CANCEL_S)


async def test_breaking_out_of_a_stream_the_caller_holds_cancels_the_rpc_at_the_break(
    scripted: ScriptedServer,
) -> None:
    """The loop, not the stream, owns the cancellation: the caller's name keeps the stream (to read its
    text after the loop), and the RPC is cancelled as the loop is left, before anything else runs."""
    stream = scripted.client.stream_model("slow", [user("hi")])
    async for event in stream:
        assert event.text.text == "Hel"
        break
    assert not stream.cancel()  # True would mean this call cancelled it: the break had not
    assert stream.text == "Hel"
    await asyncio.wait_for(scripted.servicer.cancelled.wait(), WAIT_FOR_CANCEL_S)
    with pytest.raises(sc.JobCancelledError):
        await stream.collect()


async def _fail_inside_the_loop(stream: sc.AsyncModelStream) -> None:
    async for _ in stream:
        raise LookupError("the caller's own")


async def test_an_exception_out_of_the_loop_cancels_the_rpc(scripted: ScriptedServer) -> None:
    stream = scripted.client.stream_model("slow", [user("hi")])
    with pytest.raises(LookupError, match="the caller's own"):
        await _fail_inside_the_loop(stream)
    assert not stream.cancel()
    await asyncio.wait_for(scripted.servicer.cancelled.wait(), WAIT_FOR_CANCEL_S)


async def test_a_loop_that_reads_to_the_end_cancels_nothing(scripted: ScriptedServer) -> None:
    stream = scripted.client.stream_model("deltas", [user("hi")])
    async for _ in stream:
        pass
    assert stream.final is not None
    assert [e async for e in stream] == []  # a second loop over an ended stream: its end, not a failure


async def test_leaving_the_async_with_block_cancels_the_rpc(scripted: ScriptedServer) -> None:
    async with scripted.client.stream_model("slow", [user("hi")]) as stream:
        await stream.__anext__()
    await asyncio.wait_for(scripted.servicer.cancelled.wait(), WAIT_FOR_CANCEL_S)
    assert not stream.cancel()  # already ended


async def test_cancel_ends_a_pending_read_with_job_cancelled(scripted: ScriptedServer) -> None:
    stream = scripted.client.stream_model("slow", [user("hi")])
    reading = asyncio.create_task(stream.collect())
    await asyncio.wait_for(scripted.servicer.started.wait(), WAIT_FOR_CANCEL_S)
    assert stream.cancel()
    with pytest.raises(sc.JobCancelledError) as caught:
        await reading
    assert caught.value.grpc_code == grpc.StatusCode.CANCELLED
    await asyncio.wait_for(scripted.servicer.cancelled.wait(), WAIT_FOR_CANCEL_S)


async def test_cancelling_the_task_cancels_the_rpc(scripted: ScriptedServer) -> None:
    task = asyncio.create_task(scripted.client.stream_model("slow", [user("hi")]).collect())
    await asyncio.wait_for(scripted.servicer.started.wait(), WAIT_FOR_CANCEL_S)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(scripted.servicer.cancelled.wait(), WAIT_FOR_CANCEL_S)


async def test_the_blocking_stream_reads_restarts_failures_and_cancels(scripted: ScriptedServer) -> None:
    def work() -> tuple[pb.CallModelResponse, str, list[str], sc.SidecarError]:
        with SidecarClient(scripted.address) as client:
            restarted = client.stream_model("restart", [user("hi")])
            reply = restarted.collect()
            interrupted = client.stream_model("interrupted", [user("hi")])
            texts: list[str] = []
            try:
                for event in interrupted:
                    texts.append(event.text.text)
            except sc.SidecarError as err:
                failure = err
            else:
                raise AssertionError("no error")
            with client.stream_model("slow", [user("hi")]) as slow:
                next(slow)
            return reply, restarted.text, texts, failure

    reply, text, texts, failure = await asyncio.to_thread(work)
    assert reply.message.text == text == "Goodbye"
    assert texts == ["Hello, ", "wo"]
    assert isinstance(failure, sc.StreamInterruptedError)
    assert failure.partial_text == "Hello, wo"
    assert [h.deployment for h in failure.hops] == ["fast-a", "fast-b"]
    await asyncio.wait_for(scripted.servicer.cancelled.wait(), WAIT_FOR_CANCEL_S)


async def test_breaking_out_of_a_blocking_stream_cancels_the_rpc(scripted: ScriptedServer) -> None:
    def work() -> None:
        with SidecarClient(scripted.address) as client:
            for _ in client.stream_model("slow", [user("hi")]):
                break

    await asyncio.to_thread(work)
    await asyncio.wait_for(scripted.servicer.cancelled.wait(), WAIT_FOR_CANCEL_S)


async def test_breaking_out_of_a_blocking_stream_the_caller_holds_cancels_the_rpc_at_the_break(
    scripted: ScriptedServer,
) -> None:
    def work() -> tuple[bool, str]:
        with SidecarClient(scripted.address) as client:
            stream = client.stream_model("slow", [user("hi")])
            for _ in stream:
                break
            return stream.cancel(), stream.text

    cancelled_here, text = await asyncio.to_thread(work)
    assert not cancelled_here  # the break had cancelled it
    assert text == "Hel"
    await asyncio.wait_for(scripted.servicer.cancelled.wait(), WAIT_FOR_CANCEL_S)


def test_a_failure_carries_its_route_hops() -> None:
    err = sc.from_failure(_interrupted())
    assert type(err) is sc.StreamInterruptedError
    assert [h.reason for h in err.hops] == ["circuit open", "cut"]
    assert sc.from_failure(_quota()).hops == []


# ---------------------------------------------------------------- content parts, reasoning, request options

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63f8cfc0f01f0005000201a0e5a8ff0000000049454e44ae426082"
)
PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"


def test_a_text_turn_is_still_plain_text() -> None:
    assert user("hi") == user("hi", cache=False) == pb.Message(role=pb.ROLE_USER, text="hi")


def test_an_image_file_becomes_an_image_part_before_the_question(tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    shot.write_bytes(PNG)
    message = user("what is this?", image=shot)
    assert not message.text
    assert [p.WhichOneof("kind") for p in message.parts] == ["image", "text"]
    assert message.parts[0].image == pb.ImagePart(data=PNG, media_type="image/png")
    assert message.parts[1].text == "what is this?"


def test_images_as_bytes_urls_and_parts_keep_their_order(tmp_path: Path) -> None:
    jpeg = b"\xff\xd8\xff\xe0" + b"\x00" * 16
    gif = b"GIF89a" + b"\x00" * 8
    webp = b"RIFF\x00\x00\x00\x00WEBPVP8 "
    message = user(
        "compare them",
        image=[jpeg, gif, webp, "https://example.com/b.png", sc.image_part(PNG, detail="low", cache="5m")],
    )
    images = [p.image for p in message.parts[:-1]]
    assert [i.media_type for i in images] == ["image/jpeg", "image/gif", "image/webp", "", "image/png"]
    assert images[3].url == "https://example.com/b.png"
    assert images[4].detail == pb.IMAGE_DETAIL_LOW
    assert message.parts[4].cache.ttl == pb.CACHE_TTL_5M


def test_an_image_whose_media_type_nothing_tells_is_refused_before_sending(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no PNG, JPEG, GIF or WebP; pass media_type"):
        user("what is this?", image=b"not an image")
    with pytest.raises(ValueError, match="a str is a URL"):
        user("what is this?", image="shot.png")
    assert sc.image_part(b"raw", media_type="image/png").image.media_type == "image/png"
    odd = tmp_path / "odd.webp"  # no signature it knows: the suffix says
    odd.write_bytes(b"\x00\x01")
    assert sc.image_part(odd).image.media_type == "image/webp"


def test_documents_as_pdf_files_bytes_urls_and_text(tmp_path: Path) -> None:
    report = tmp_path / "report.pdf"
    report.write_bytes(PDF)
    notes = tmp_path / "notes.md"
    notes.write_text("# notes\nshipped")
    message = user(
        "summarise",
        document=[report, PDF, "https://example.com/r.pdf", notes, sc.document_part(text="a b", title="ab")],
    )
    docs = [p.document for p in message.parts[:-1]]
    assert docs[0] == docs[1] == pb.DocumentPart(data=PDF, media_type="application/pdf")
    assert docs[2] == pb.DocumentPart(url="https://example.com/r.pdf")
    assert docs[3] == pb.DocumentPart(text="# notes\nshipped", media_type="text/plain")
    assert docs[4] == pb.DocumentPart(text="a b", media_type="text/plain", title="ab")
    with pytest.raises(ValueError, match="no PDF"):
        sc.document_part(b"plain bytes")
    with pytest.raises(ValueError, match=r"a source .* or text="):
        sc.document_part()


def test_documents_come_before_images_and_the_cache_marks_the_last_part() -> None:
    message = user("look", image=PNG, document=PDF, parts=[sc.text_part("context")], cache=True)
    assert [p.WhichOneof("kind") for p in message.parts] == ["document", "image", "text", "text"]
    assert [p.HasField("cache") for p in message.parts] == [False, False, False, True]
    assert message.parts[-1] == pb.Part(text="look", cache=pb.CacheBreakpoint())
    cached = user("a long prompt", cache="1h")
    assert cached.parts == [pb.Part(text="a long prompt", cache=pb.CacheBreakpoint(ttl=pb.CACHE_TTL_1H))]
    with pytest.raises(ValueError, match="cache is True"):
        sc.text_part("x", cache="10m")  # type: ignore[arg-type]


def test_a_reply_goes_back_with_its_reasoning_byte_identical() -> None:
    thinking = pb.ReasoningPart(text="Let me think…\n", signature="EqQBCgIYAhIM+/=", format="anthropic")
    redacted = pb.ReasoningPart(redacted_data="EmwKAhgBEgy3va3pzix/LafPsn4a", format="anthropic")
    call = pb.ToolCall(id="toolu_1", name="get_weather", arguments_json='{"city": "Paris"}')
    reply = pb.CallModelResponse(
        message=pb.Message(role=pb.ROLE_ASSISTANT, text="checking", tool_calls=[call], reasoning=[thinking, redacted]),
        served_by="claude",
    )
    for given in (reply, reply.message):
        turn = assistant(given)
        assert turn.role == pb.ROLE_ASSISTANT
        assert turn.SerializeToString(deterministic=True) == reply.message.SerializeToString(deterministic=True)
        assert [r.signature for r in turn.reasoning] == ["EqQBCgIYAhIM+/=", ""]


def test_a_tool_result_carries_images_after_its_text() -> None:
    call = pb.ToolCall(id="call_1", name="screenshot")
    failed = pb.ExecuteToolResponse(model_text="boom", failure=pb.Failure(kind=pb.FAILURE_KIND_EXTERNAL_SERVICE))
    message = tool_results(
        [
            sc.tool_result(call, "the page", image=PNG),
            (pb.ToolCall(id="call_2", name="fetch"), failed),
            sc.tool_result(call, failed, image=[PNG]),
        ]
    )
    shot, fetched, again = message.tool_results
    assert message.role == pb.ROLE_TOOL
    assert (shot.call_id, shot.name, shot.content, shot.is_error) == ("call_1", "screenshot", "", False)
    assert [p.WhichOneof("kind") for p in shot.parts] == ["text", "image"]
    assert shot.parts[0].text == "the page"
    assert (fetched.content, fetched.is_error, list(fetched.parts)) == ("boom", True, [])
    assert again.is_error
    assert [p.WhichOneof("kind") for p in again.parts] == ["text", "image"]


def test_every_request_option_lands_in_its_field() -> None:
    request = sc.model_request(
        "claude",
        [user("hi")],
        system="be brief",
        reasoning=2048,
        tool_choice="get_weather",
        parallel_tool_calls=False,
        stop="\n",
        top_p=0.9,
        top_k=40,
        seed=7,
        presence_penalty=0.5,
        frequency_penalty=-0.5,
        end_user="user-42",
        system_cache="1h",
        provider_options={"anthropic": {"metadata": {"user_id": "u"}}},
    )
    assert request.reasoning == pb.Reasoning(budget_tokens=2048)
    assert request.tool_choice == pb.ToolChoice(mode=pb.TOOL_CHOICE_MODE_TOOL, name="get_weather")
    assert request.HasField("parallel_tool_calls")
    assert not request.parallel_tool_calls
    assert list(request.stop) == ["\n"]
    assert (request.top_p, request.top_k, request.seed) == (0.9, 40, 7)
    assert (request.presence_penalty, request.frequency_penalty, request.end_user) == (0.5, -0.5, "user-42")
    assert request.system_cache == pb.CacheBreakpoint(ttl=pb.CACHE_TTL_1H)
    assert request.provider_options_json == '{"anthropic":{"metadata":{"user_id":"u"}}}'
    plain = sc.model_request("gpt", [user("hi")])
    unset = ("reasoning", "tool_choice", "parallel_tool_calls", "top_p", "top_k", "seed", "system_cache")
    assert not [name for name in unset if plain.HasField(name)]
    assert not plain.stop
    assert not plain.provider_options_json


@pytest.mark.parametrize(
    ("choice", "mode"),
    [
        ("auto", pb.TOOL_CHOICE_MODE_AUTO),
        ("none", pb.TOOL_CHOICE_MODE_NONE),
        ("required", pb.TOOL_CHOICE_MODE_REQUIRED),
    ],
)
def test_a_tool_choice_mode_by_its_name(choice: str, mode: int) -> None:
    assert sc.tool_choice(choice) == pb.ToolChoice(mode=mode)  # type: ignore[arg-type]


def test_reasoning_by_effort_or_budget_and_what_it_refuses() -> None:
    assert sc.reasoning("high") == pb.Reasoning(effort=pb.REASONING_EFFORT_HIGH)
    assert sc.reasoning("minimal") == pb.Reasoning(effort=pb.REASONING_EFFORT_MINIMAL)
    assert sc.reasoning(0).WhichOneof("amount") == "budget_tokens"  # the sidecar refuses it, naming it
    with pytest.raises(ValueError, match="reasoning is one of minimal, low, medium, high"):
        sc.model_request("m", [user("hi")], reasoning="hard")  # type: ignore[typeddict-item]
    with pytest.raises(TypeError, match=r"an effort .* or a token budget"):
        sc.reasoning(True)
    with pytest.raises(ValueError, match="tool_choice is"):
        sc.tool_choice("")


def test_on_overflow_by_its_action_or_its_strategies_and_what_it_refuses() -> None:
    assert sc.model_request("m", [user("hi")], on_overflow="compact").on_overflow == pb.OverflowPolicy(
        action=pb.OVERFLOW_ACTION_COMPACT
    )
    assert sc.overflow_policy("fail") == pb.OverflowPolicy(action=pb.OVERFLOW_ACTION_FAIL)
    assert sc.overflow_policy(["summarize", "tool_results"]) == pb.OverflowPolicy(
        action=pb.OVERFLOW_ACTION_COMPACT,
        strategies=[pb.COMPACTION_STRATEGY_SUMMARIZE, pb.COMPACTION_STRATEGY_TOOL_RESULTS],
    )
    own = pb.OverflowPolicy(action=pb.OVERFLOW_ACTION_COMPACT, strategies=[pb.COMPACTION_STRATEGY_REASONING])
    assert sc.overflow_policy(own) is own
    assert not sc.model_request("m", [user("hi")]).HasField("on_overflow")
    with pytest.raises(ValueError, match="on_overflow is one of fail, compact"):
        sc.overflow_policy("shrink")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="on_overflow's strategies are some of tool_results, reasoning, summarize"):
        sc.overflow_policy(["tool_results", "drop"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="on_overflow's strategies"):
        sc.overflow_policy([])


def test_a_reply_without_compaction_keeps_the_callers_history() -> None:
    history = [user("hi")]
    reply = pb.CallModelResponse(message=pb.Message(role=pb.ROLE_ASSISTANT, text="hello"))
    assert sc.compacted(history, reply) == history
    assert sc.compacted(history, reply) is not history  # a list of its own, to append to


def test_the_stream_assembles_reasoning_and_a_restart_voids_it() -> None:
    acc = sc.StreamAccumulator()
    for event in (
        pb.ReasoningDelta(index=0, text="Let me "),
        pb.ReasoningDelta(index=0, text="think."),
        pb.ReasoningDelta(index=0, signature="sig-0"),
        pb.ReasoningDelta(index=1, redacted_data="opaque"),
    ):
        acc.absorb(pb.StreamModelEvent(reasoning=event))
    assert acc.reasoning == [
        pb.ReasoningPart(text="Let me think.", signature="sig-0"),
        pb.ReasoningPart(redacted_data="opaque"),
    ]
    acc.absorb(pb.StreamModelEvent(restart=pb.StreamRestart(attempt=2)))
    assert acc.reasoning == []
    acc.absorb(pb.StreamModelEvent(reasoning=pb.ReasoningDelta(index=0, text="Again.")))
    assert [r.text for r in acc.reasoning] == ["Again."]
