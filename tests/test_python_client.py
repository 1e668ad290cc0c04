"""The Python client: sync and async calls, typed failures, tool-result messages."""

from __future__ import annotations

import asyncio

import pytest
import sidecar_client as sc
from sidecar_client import SidecarClient, anthropic_tool_result, openai_tool_message, pb, user

from tests.conftest import Running


def test_public_surface_is_complete() -> None:
    exported = set(sc.__all__)
    errors = {name for name in dir(sc) if name.endswith("Error") and not name.startswith("_")}
    assert errors <= exported
    assert len([e for e in errors if e not in ("SidecarError", "CorrectableError", "UncorrectableError")]) == 21


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
