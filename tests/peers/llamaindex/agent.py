"""LlamaIndex's function agent as a peer of the sidecar's OpenAI-compatible front (docs/peers.md).

    .venv-peers/llamaindex/bin/python agent.py <sidecar HTTP url> stream|whole

Runs in a venv of its own (``make peers-deps``, the pins in requirements.txt beside it): LlamaIndex's
OpenAI LLM requires ``openai<3``, and the project's venv pins ``openai`` 3 for the other peers.
tests/peers/test_peer_llamaindex.py drives it and reads the one JSON line it prints last.

| mode | what runs: ``FunctionAgent(tools, llm)``, ``agent.run("read doc-1")``, its events read |
| --- | --- |
| ``stream`` | the agent at its defaults (``streaming=True``: every model call streamed) |
| ``whole`` | ``streaming=False`` (one ``achat_with_tools`` per step) |

The JSON line: ``text``, ``deltas`` (the text's ``AgentStream`` deltas) and ``tools`` (each ``ToolCallResult``:
its name, ``is_error``, the text the model reads); or, when the sidecar answered a model call with a failure
(``OpenAILike``'s retries at their defaults, ``max_retries=3``, having given up), ``error`` (the SDK's
exception class), ``status`` and ``replayed`` (the last answer's ``x-sidecar-replayed``).

The model is ``OpenAILike`` (``llama-index-llms-openai-like``) on ``<url>/v1`` with the model ``gpt``: LlamaIndex's
``OpenAI`` LLM takes only OpenAI's own model names (it refuses ``gpt``, ``local-gpt``: "Unknown model"), so a
gateway's models go through ``OpenAILike``, told that the model chats and calls functions (both off by default,
and a ``FunctionAgent`` needs them). The tools are the sidecar's own, called over its MCP front (``<url>/mcp``,
JSON-RPC ``tools/call``): ``fetch`` answers, ``fail_fetch`` fails. A failed call raises, and the agent hands
the exception's text back to the model as the tool's result (``ToolOutput(is_error=True)``): the sidecar's
``model_text``, byte for byte.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from typing import Any

import httpx
import openai
from llama_index.core.agent.workflow import AgentStream, FunctionAgent, ToolCallResult
from llama_index.llms.openai_like import OpenAILike

MODES = ("stream", "whole")
ids = itertools.count(1)


class ToolFailed(Exception):
    """A tool call the sidecar answered with ``isError``: its text is the sidecar's ``model_text``."""


async def mcp(base: str, name: str, arguments: dict[str, Any]) -> str:
    """One ``tools/call`` on the sidecar's MCP front; raises ToolFailed with the text of a failed call."""
    body = {"jsonrpc": "2.0", "id": next(ids), "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    headers = {"accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(timeout=30) as client:
        answer = (await client.post(f"{base}/mcp", json=body, headers=headers)).json()
    if "error" in answer:
        raise RuntimeError(f"MCP tools/call: {json.dumps(answer['error'])}")
    result = answer["result"]
    text = "".join(c["text"] for c in result["content"])
    if result["isError"]:
        raise ToolFailed(text)
    return text


def tools_of(base: str) -> list[Any]:
    async def fail_fetch(mode: str) -> str:
        """Fetch from the flaky service."""
        return await mcp(base, "fail_fetch", {"mode": mode})

    async def fetch(id: str) -> str:
        """Fetch a document by its id."""
        return await mcp(base, "fetch", {"id": id})

    return [fail_fetch, fetch]


async def run(base: str, mode: str) -> dict[str, Any]:
    llm = OpenAILike(
        model="gpt",
        api_base=f"{base}/v1",
        api_key="unused-by-the-sidecar",
        is_chat_model=True,
        is_function_calling_model=True,
        context_window=8000,  # the test's model: sizes LlamaIndex's memory of the conversation
    )
    agent = FunctionAgent(tools=tools_of(base), llm=llm, streaming=mode != "whole")
    handler = agent.run("read doc-1")
    deltas: list[str] = []
    tools: list[dict[str, Any]] = []
    async for event in handler.stream_events():
        if isinstance(event, AgentStream) and event.delta:
            deltas.append(event.delta)
        elif isinstance(event, ToolCallResult):
            output = event.tool_output
            tools.append({"name": event.tool_name, "is_error": output.is_error, "content": output.content})
    result = await handler
    return {"text": str(result), "deltas": len(deltas), "tools": tools}


def status_error(error: BaseException) -> openai.APIStatusError | None:
    """The SDK's error for the answer, wherever the workflow wrapped it."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, openai.APIStatusError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


async def answer(base: str, mode: str) -> dict[str, Any]:
    """The run, or the failure the sidecar answered it with."""
    try:
        return await run(base, mode)
    except Exception as error:
        failure = status_error(error)
        if failure is None:
            raise
        return {
            "error": type(failure).__name__,
            "status": failure.status_code,
            "replayed": failure.response.headers.get("x-sidecar-replayed"),
        }


def main() -> None:
    if len(sys.argv) != 3 or sys.argv[2] not in MODES:
        sys.exit(f"usage: agent.py <sidecar HTTP url> {'|'.join(MODES)}")
    base, mode = sys.argv[1], sys.argv[2]
    value = asyncio.run(answer(base, mode))
    print(json.dumps(value))


if __name__ == "__main__":
    main()
