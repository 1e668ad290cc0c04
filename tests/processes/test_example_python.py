"""The Python example agent loop (examples/python/agent.py), loaded from its path.

    scripted   an in-process gRPC server (``Scripted``): one tool call whose tool fails, then an
               answer that quotes what the tool said; StreamModel the same, with a restart in it
    real       a real sidecar: $SIDECAR_ADDR when set (``make clients-examples``: a sidecar process
               on tests/conformance/sidecar.yaml), else this suite's sidecar on real gRPC (conftest)

The example lives beside the Go, TypeScript and Java ones, outside any package; it is loaded here
by path so that it is tested in the main run with the suite's fixtures, without putting a
top-level ``agent`` module on every test's import path.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType

import grpc
import pytest
import pytest_asyncio
import sidecar_client as sc
from google.rpc import error_details_pb2, status_pb2
from sidecar_client import pb
from sidecar_contract.v1 import sidecar_pb2_grpc as pb_grpc

from tests.conftest import Running

AGENT_PATH = Path(__file__).resolve().parents[2] / "examples" / "python" / "agent.py"
CORRECTABLE_LINE = (
    "[This error may be correctable - you can retry with different parameters or try a different approach]"
)
NOT_FOUND = f"No document 'doc-404' exists.\n{CORRECTABLE_LINE}"
ANSWER = f"answer after call_7 is_error=True: {NOT_FOUND}"
QUOTA = "The provider account of openai is out of credit."
REAL_TURNS = 6


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


agent = _load(AGENT_PATH, "examples_python_agent")


# ---------------------------------------------------------------- the scripted sidecar


def _tool_call_reply(text: str = "") -> pb.CallModelResponse:
    call = pb.ToolCall(id="call_7", name="fetch_doc", arguments_json='{"doc_id":"doc-404"}')
    return pb.CallModelResponse(message=pb.Message(role=pb.ROLE_ASSISTANT, text=text, tool_calls=[call]))


def _answer_to(request: pb.CallModelRequest) -> str | None:
    """What the scripted model answers once a tool result is in: what the tool said, quoted."""
    last = request.messages[-1]
    if last.role != pb.ROLE_TOOL:
        return None
    result = last.tool_results[0]
    return f"answer after {result.call_id} is_error={result.is_error}: {result.content}"


async def _abort_quota(context: grpc.aio.ServicerContext[object, object]) -> None:
    """Ends the call as the sidecar does a QUOTA_EXHAUSTED: code, message, rich status in the trailer."""
    failure = pb.Failure(
        kind=pb.FAILURE_KIND_QUOTA_EXHAUSTED, message=QUOTA, explanation=QUOTA, correctable=False, attempts=1
    )
    code = grpc.StatusCode.RESOURCE_EXHAUSTED
    status = status_pb2.Status(code=code.value[0], message=QUOTA)
    status.details.add().Pack(failure)
    status.details.add().Pack(error_details_pb2.ErrorInfo(reason="QUOTA_EXHAUSTED", domain="sidecar"))
    await context.abort(code, QUOTA, trailing_metadata=(("grpc-status-details-bin", status.SerializeToString()),))


class Scripted(pb_grpc.SidecarServicer):
    """Asks for one tool call, then answers with what the tool said; ``quota-later`` fails the answer."""

    def __init__(self) -> None:
        self.model_requests: list[pb.CallModelRequest] = []
        self.tool_requests: list[pb.ExecuteToolRequest] = []

    async def ListTools(
        self, request: pb.ListToolsRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.ListToolsResponse:
        return pb.ListToolsResponse(tools=[pb.ToolInfo(definition=pb.ToolDefinition(name="fetch_doc"))])

    async def ListModels(
        self, request: pb.ListModelsRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.ListModelsResponse:
        return pb.ListModelsResponse(models=[pb.ModelInfo(id="scripted"), pb.ModelInfo(id="quota-later")])

    async def CallModel(
        self, request: pb.CallModelRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.CallModelResponse:
        self.model_requests.append(request)
        answer = _answer_to(request)
        if answer is None:
            return _tool_call_reply()
        if request.model == "quota-later":
            await _abort_quota(context)
        return pb.CallModelResponse(message=pb.Message(role=pb.ROLE_ASSISTANT, text=answer))

    async def StreamModel(
        self, request: pb.CallModelRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> AsyncIterator[pb.StreamModelEvent]:
        self.model_requests.append(request)
        answer = _answer_to(request)
        if answer is None:  # a false start, restarted, then the tool call in two fragments
            yield pb.StreamModelEvent(text=pb.TextDelta(text="Let me "))
            yield pb.StreamModelEvent(
                restart=pb.StreamRestart(cause=pb.RESTART_CAUSE_UPSTREAM_FAULT, reason="connection dropped", attempt=2)
            )
            yield pb.StreamModelEvent(text=pb.TextDelta(text="Looking it up."))
            yield pb.StreamModelEvent(
                tool_call=pb.ToolCallDelta(index=0, id="call_7", name="fetch_doc", arguments_fragment='{"doc_id":')
            )
            yield pb.StreamModelEvent(tool_call=pb.ToolCallDelta(index=0, arguments_fragment='"doc-404"}'))
            yield pb.StreamModelEvent(final=_tool_call_reply("Looking it up."))
            return
        half = len(answer) // 2
        yield pb.StreamModelEvent(text=pb.TextDelta(text=answer[:half]))
        yield pb.StreamModelEvent(text=pb.TextDelta(text=answer[half:]))
        yield pb.StreamModelEvent(final=pb.CallModelResponse(message=pb.Message(role=pb.ROLE_ASSISTANT, text=answer)))

    async def ExecuteTool(
        self, request: pb.ExecuteToolRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.ExecuteToolResponse:
        self.tool_requests.append(request)
        failure = pb.Failure(
            kind=pb.FAILURE_KIND_RESOURCE_NOT_FOUND, correctable=True, message="not found", explanation=NOT_FOUND
        )
        return pb.ExecuteToolResponse(failure=failure, model_text=NOT_FOUND, call_id=request.call_id)


class ScriptedServer:
    def __init__(self, servicer: Scripted, address: str) -> None:
        self.servicer = servicer
        self.address = address
        self.client = sc.AsyncSidecarClient(address)


@pytest_asyncio.fixture
async def scripted(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[ScriptedServer]:
    for name in ("SIDECAR_ADDR", "SIDECAR_MODEL", "SIDECAR_TOKEN"):  # the command's defaults
        monkeypatch.delenv(name, raising=False)
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


class Screen:
    """What a terminal would keep of each streamed reply: its text since its last restart."""

    def __init__(self) -> None:
        self.replies: list[str] = []
        self.restarts: list[str] = []
        self._current: list[str] = []

    def show(self, event: pb.StreamModelEvent) -> None:
        if event.HasField("text"):
            self._current.append(event.text.text)
        elif event.HasField("restart"):
            self.restarts.append(event.restart.reason)
            self._current.clear()
        elif event.HasField("final"):
            self.replies.append("".join(self._current))
            self._current.clear()


# ---------------------------------------------------------------- the loop, scripted


async def test_the_loop_hands_a_tool_failure_back_to_the_model(scripted: ScriptedServer) -> None:
    trace: list[str] = []
    answer = await agent.run_agent(scripted.client, "read doc-404", trace=trace.append)
    assert answer == ANSWER
    assert trace == ["turn 1: fetch_doc -> failure RESOURCE_NOT_FOUND"]
    first, second = scripted.servicer.model_requests
    assert first.model == second.model == "scripted"  # the catalog's first
    assert [t.name for t in first.tools] == ["fetch_doc"]
    assert first.job.job_id == second.job.job_id == scripted.servicer.tool_requests[0].job.job_id != ""
    tool = scripted.servicer.tool_requests[0]
    assert (tool.tool, tool.arguments_json, tool.call_id) == ("fetch_doc", '{"doc_id":"doc-404"}', "call_7")
    asked, called, results = second.messages
    assert (asked.role, asked.text) == (pb.ROLE_USER, "read doc-404")
    assert (called.role, [c.id for c in called.tool_calls]) == (pb.ROLE_ASSISTANT, ["call_7"])
    assert [(r.call_id, r.name, r.is_error, r.content) for r in results.tool_results] == [
        ("call_7", "fetch_doc", True, NOT_FOUND)
    ]


async def test_the_streamed_loop_shows_each_event_and_voids_what_a_restart_voids(scripted: ScriptedServer) -> None:
    trace: list[str] = []
    screen = Screen()
    answer = await agent.run_agent(scripted.client, "read doc-404", trace=trace.append, show=screen.show)
    assert answer == ANSWER
    assert trace == ["turn 1: fetch_doc -> failure RESOURCE_NOT_FOUND"]
    assert screen.restarts == ["connection dropped"]
    assert screen.replies == ["Looking it up.", ANSWER]
    called = scripted.servicer.model_requests[1].messages[1]
    assert (called.text, [(c.id, c.arguments_json) for c in called.tool_calls]) == (
        "Looking it up.",
        [("call_7", '{"doc_id":"doc-404"}')],
    )


async def test_a_failed_model_call_ends_the_loop_with_its_typed_error(scripted: ScriptedServer) -> None:
    trace: list[str] = []
    with pytest.raises(sc.QuotaExhaustedError) as info:
        await agent.run_agent(scripted.client, "read doc-404", model="quota-later", trace=trace.append)
    assert (info.value.kind_name, info.value.correctable, info.value.message) == ("QUOTA_EXHAUSTED", False, QUOTA)
    assert info.value.__notes__ == ["turn 2"]
    assert trace == ["turn 1: fetch_doc -> failure RESOURCE_NOT_FOUND"]  # the tool's failure did not end it


async def test_the_command_prints_the_answer_and_the_trace(
    scripted: ScriptedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await agent.run_cli(["--addr", scripted.address, "read doc-404"]) == 0
    out, err = capsys.readouterr()
    assert (out, err) == (f"{ANSWER}\n", "turn 1: fetch_doc -> failure RESOURCE_NOT_FOUND\n")


async def test_the_streamed_command_prints_deltas_as_they_come_and_marks_a_restart(
    scripted: ScriptedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await agent.run_cli(["--addr", scripted.address, "--stream", "read doc-404"]) == 0
    out, err = capsys.readouterr()
    restarted = "\n--- restarted (connection dropped): discard the text above ---\n"
    assert out == f"Let me {restarted}Looking it up.\n{ANSWER}\n"
    assert err == "turn 1: fetch_doc -> failure RESOURCE_NOT_FOUND\n"


async def test_the_command_prints_a_failed_model_calls_kind_correctable_and_message(
    scripted: ScriptedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await agent.run_cli(["--addr", scripted.address, "--model", "quota-later", "read doc-404"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "turn 1: fetch_doc -> failure RESOURCE_NOT_FOUND",
        f"turn 2: the model call failed (QUOTA_EXHAUSTED, correctable=False): {QUOTA}",
    ]


# ---------------------------------------------------------------- the loop, against a real sidecar


@pytest.fixture
def real_sidecar(request: pytest.FixtureRequest) -> str:
    """$SIDECAR_ADDR when set (make clients-examples), else this suite's sidecar on real gRPC.

    Synchronous, so that it may set up the async ``sidecar`` fixture only when it is needed.
    """
    addr = os.environ.get("SIDECAR_ADDR")
    if addr:
        return addr
    running: Running = request.getfixturevalue("sidecar")
    return running.app.address


@pytest.mark.parametrize("stream", [False, True])
async def test_the_loop_against_a_real_sidecar(real_sidecar: str, stream: bool) -> None:
    screen = Screen()
    trace: list[str] = []
    async with sc.AsyncSidecarClient(real_sidecar) as client:
        answer = await agent.run_agent(
            client,
            "Find what the documentation says about retries.",
            model=os.environ.get("SIDECAR_MODEL"),
            max_turns=REAL_TURNS,
            trace=trace.append,
            show=screen.show if stream else None,
        )
    assert answer, f"no answer after trace {trace}"
    assert trace, "the model ran no tool"
    assert trace[0].startswith("turn 1: "), trace
    if stream:
        assert screen.replies[-1] == answer
