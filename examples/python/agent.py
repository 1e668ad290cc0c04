"""A minimal agent loop on the sidecar: call the model, run each tool call it makes through
ExecuteTool, hand model_text back, repeat until the model answers.

    SIDECAR_ADDR=127.0.0.1:50051 python examples/python/agent.py "How does the sidecar retry rate limits?"
    SIDECAR_ADDR=127.0.0.1:50051 python examples/python/agent.py --stream "..."   # the reply as it is written

What reaches the loop, and what it does with it:

    the model's reply            the loop
    tool calls                   each one through ExecuteTool; every outcome's model_text goes back
    a tool's failure             an outcome like any other (is_error): the model reads it and decides
    text, no tool call           the answer: the loop ends
    a model call's failure       the end: the typed SidecarError (kind, correctable, message) is raised
    (--stream) a restart event   what was shown since the last one is void; the final reply is used
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable, Sequence

import grpc
from sidecar_client import AsyncSidecarClient, SidecarError, assistant, job, pb, tool_results, user

__all__ = ["NoAnswerError", "print_event", "run_agent", "run_cli"]

DEFAULT_ADDR = "127.0.0.1:50051"
DEFAULT_TASK = "Find what the documentation says about retries and summarise it."
MAX_TURNS = 8
MODEL_TIMEOUT_S = 60.0  # each model call's deadline; retries beneath it stay within it
TOOL_TIMEOUT_S = 60.0  # each tool call's deadline

Trace = Callable[[str], None]
ShowEvent = Callable[[pb.StreamModelEvent], None]


class NoAnswerError(Exception):
    """The loop ended without an answer, no model call having failed: no model, or out of turns."""


def _ignore(_: object) -> None:
    pass


async def run_agent(
    client: AsyncSidecarClient,
    task: str,
    *,
    model: str | None = None,
    max_turns: int = MAX_TURNS,
    trace: Trace = _ignore,
    show: ShowEvent | None = None,
) -> str:
    """The model's answer to ``task``. ``model``: a catalog id (None: the catalog's first).

    ``trace`` gets one line per tool call's outcome. With ``show``, each reply is streamed
    (StreamModel) and every event goes to ``show`` as it arrives. A failed model call raises its
    ``SidecarError`` subclass, noted with the turn; a failed tool call is not an exception.
    """
    tools = await client.list_tools()
    if model is None:
        models = await client.list_models()
        if not models:
            raise NoAnswerError("the sidecar's catalog has no model")
        model = models[0].id
    this_job = job(f"example-{time.time_ns()}")
    messages = [user(task)]
    for turn in range(1, max_turns + 1):
        try:
            reply = await _reply(client, model, messages, tools, this_job, show)
        except SidecarError as err:
            err.add_note(f"turn {turn}")
            raise
        calls = list(reply.message.tool_calls)
        if not calls:
            return reply.message.text
        messages.append(assistant(reply.message))
        outcomes: list[tuple[pb.ToolCall, pb.ExecuteToolResponse]] = []
        for call in calls:
            outcome = await client.execute_tool(
                call.name, call.arguments_json, call_id=call.id, job=this_job, timeout=TOOL_TIMEOUT_S
            )  # a tool's failure is an outcome, not an exception
            trace(f"turn {turn}: {call.name} -> {_outcome_name(outcome)}")
            outcomes.append((call, outcome))
        messages.append(tool_results(outcomes))  # each model_text goes back as it is
    raise NoAnswerError(f"no answer after {max_turns} turns")


def _outcome_name(outcome: pb.ExecuteToolResponse) -> str:
    if not outcome.HasField("failure"):
        return "result"
    return "failure " + pb.FailureKind.Name(outcome.failure.kind).removeprefix("FAILURE_KIND_")


async def _reply(
    client: AsyncSidecarClient,
    model: str,
    messages: Sequence[pb.Message],
    tools: Sequence[pb.ToolInfo],
    this_job: pb.Job,
    show: ShowEvent | None,
) -> pb.CallModelResponse:
    """One model call: CallModel, or StreamModel with each event shown as it comes."""
    if show is None:
        return await client.call_model(model, messages, tools=tools, job=this_job, timeout=MODEL_TIMEOUT_S)
    async with client.stream_model(model, messages, tools=tools, job=this_job, timeout=MODEL_TIMEOUT_S) as stream:
        async for event in stream:
            show(event)
        return stream.result()  # the whole reply, whatever restarts came before it


def print_event(event: pb.StreamModelEvent) -> None:
    """A streamed event on the terminal: text as it comes; a restart voids what was printed."""
    if event.HasField("text"):
        print(event.text.text, end="", flush=True)
    elif event.HasField("restart"):
        print(f"\n--- restarted ({event.restart.reason}): discard the text above ---", flush=True)
    elif event.HasField("final") and event.final.message.text:
        print(flush=True)  # the answer's last line ends


async def run_cli(argv: Sequence[str]) -> int:
    """The command: the answer on stdout, the trace on stderr; 1 when the loop ends without one."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", nargs="?", default=DEFAULT_TASK, help="what to ask")
    parser.add_argument(
        "--addr",
        default=os.environ.get("SIDECAR_ADDR") or DEFAULT_ADDR,
        help="the sidecar: host:port or unix:/path (default $SIDECAR_ADDR, else %(default)s)",
    )
    parser.add_argument(
        "--model", default=os.environ.get("SIDECAR_MODEL"), help="a catalog model id (default: the first)"
    )
    parser.add_argument("--stream", action="store_true", help="stream each reply (StreamModel) as it is written")
    args = parser.parse_args(argv)

    def trace(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    async with AsyncSidecarClient(args.addr, token=os.environ.get("SIDECAR_TOKEN")) as client:
        try:
            answer = await run_agent(
                client, args.task, model=args.model, trace=trace, show=print_event if args.stream else None
            )
        except SidecarError as err:
            where = ", ".join(getattr(err, "__notes__", []))
            print(
                f"{where}: the model call failed ({err.kind_name}, correctable={err.correctable}): {err.message}",
                file=sys.stderr,
            )
            return 1
        except NoAnswerError as err:
            print(err, file=sys.stderr)
            return 1
        except grpc.aio.AioRpcError as err:  # the sidecar itself did not answer (ListTools, ExecuteTool)
            print(f"the sidecar at {args.addr}: {err.code().name}: {err.details()}", file=sys.stderr)
            return 1
    if not args.stream:  # streamed, it has been printed as it came
        print(answer)
    return 0


def main() -> int:
    return asyncio.run(run_cli(sys.argv[1:]))


if __name__ == "__main__":
    sys.exit(main())
