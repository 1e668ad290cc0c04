"""An ExecuteTool outcome as the tool-result message of the OpenAI and the Anthropic chat formats."""

from __future__ import annotations

from typing import Any

from sidecar_contract.v1 import sidecar_pb2 as pb

__all__ = ["anthropic_tool_result", "openai_tool_message"]


def openai_tool_message(outcome: pb.ExecuteToolResponse, call_id: str | None = None) -> dict[str, Any]:
    """``{"role": "tool", "tool_call_id": ..., "content": model_text}``."""
    return {"role": "tool", "tool_call_id": call_id or outcome.call_id, "content": outcome.model_text}


def anthropic_tool_result(outcome: pb.ExecuteToolResponse, call_id: str | None = None) -> dict[str, Any]:
    """A ``tool_result`` content block; ``is_error`` is set when the tool failed."""
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": call_id or outcome.call_id,
        "content": outcome.model_text,
    }
    if outcome.HasField("failure"):
        block["is_error"] = True
    return block
