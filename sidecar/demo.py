"""``sidecar demo``: a short scripted agent session against a running sidecar, as a timeline.

It scripts the local provider the embedded default uses (``make run``), then plays an agent:
a model call that meets a 429 the sidecar waits out, a tool call that fails and that the model
recovers from, a structured answer that is corrected once, and a streamed reply that the
provider breaks off with an overload: the sidecar restarts it, and the agent sees a ``restart``.

``--http`` plays the same session through the HTTP port instead: the model calls with the
official ``openai`` SDK (``base_url`` the port's ``/v1``, its own retries off), the tool calls
with the official MCP client at ``/mcp``; the restart arrives as the sidecar's extension chunk,
asked for with ``x-sidecar-mid-stream: restart``.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import grpc
import httpx
from sidecar_client import SidecarClient, SidecarError, assistant, pb, tool_results, user

__all__ = ["run_demo"]

MODEL = "local-gpt"
UPSTREAM = "fake-gpt"
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "source": {"type": "string"}},
    "required": ["answer", "source"],
}
ONE_LINE = "Back off with jitter, honour Retry-After, and stop once the budget is spent."
BROKEN_AFTER = 5
"""The streamed reply's first attempt is cut by an overload after this many deltas."""


class Timeline:
    def __init__(self) -> None:
        self.start = time.monotonic()

    def say(self, what: str) -> None:
        print(f"[{time.monotonic() - self.start:6.2f}s] {what}", flush=True)


def _scripted(provider: str) -> bool:
    """The local provider scripted with the demo's steps; False (and why, printed) when it cannot be reached."""
    try:
        with httpx.Client(timeout=5, trust_env=False) as http:
            http.post(f"{provider}/_fake/reset").raise_for_status()
            http.post(f"{provider}/_fake/script", json={"model": UPSTREAM, "steps": _steps()}).raise_for_status()
    except httpx.HTTPError as exc:
        print(f"sidecar demo: cannot reach the local provider at {provider} ({exc}); is `make run` running?")
        return False
    return True


def _attempts(reply: pb.CallModelResponse) -> str:
    extra = []
    if reply.attempts > 1:
        extra.append(f"{reply.attempts} attempts")
    if reply.corrections:
        extra.append(f"{reply.corrections} correction{'s' * (reply.corrections > 1)}")
    return f" ({', '.join(extra)})" if extra else ""


def run_demo(target: str, provider: str, http: str | None = None) -> int:
    """Play the session (over gRPC at ``target``, or through the HTTP port at ``http``); with
    OTEL_EXPORTER_OTLP_ENDPOINT set, it is one trace under "agent.demo"."""
    import os

    from opentelemetry import trace

    from sidecar.telemetry.setup import setup_telemetry

    os.environ.setdefault("OTEL_SERVICE_NAME", "sidecar-demo-agent")
    os.environ.setdefault("OTEL_METRICS_EXPORTER", "none")
    telemetry = setup_telemetry()
    try:
        with trace.get_tracer("sidecar.demo").start_as_current_span("agent.demo"):
            if http is not None:
                import asyncio

                return asyncio.run(_play_http(http.rstrip("/"), provider))
            return _play(target, provider)
    finally:
        telemetry.shutdown()


def _steps() -> list[dict[str, Any]]:
    return [
        {"preset": "rate_limit", "retry_after": "1"},
        {"preset": "reply", "text": "", "tool_calls": [{"name": "fetch_doc", "arguments": {"doc_id": "doc-99"}}]},
        {"preset": "reply", "text": "", "tool_calls": [{"name": "search_docs", "arguments": {"query": "retries"}}]},
        {
            "preset": "reply",
            "text": "Retry with exponential backoff and jitter, and honour Retry-After (doc-2, doc-5).",
        },
        {"preset": "bad_json"},
        {
            "preset": "reply",
            "text": json.dumps({"answer": "Back off with jitter; honour Retry-After.", "source": "doc-2"}),
        },
        {"preset": "reply", "text": ONE_LINE, "stream_fault": "overloaded", "after_deltas": BROKEN_AFTER},
        {"preset": "reply", "text": ONE_LINE},
    ]


def _play(target: str, provider: str) -> int:
    if not _scripted(provider):
        return 1
    t = Timeline()
    with SidecarClient(target) as client:
        try:
            tools = client.list_tools()
        except grpc.RpcError as exc:
            print(f"sidecar demo: cannot reach the sidecar at {target}: {exc.code().name}")
            return 1
        usable = [x for x in tools if x.definition.name in ("fetch_doc", "search_docs")]
        conversation = [user("What do the docs say about retries?")]
        t.say(f"agent → CallModel {MODEL}: {conversation[0].text!r}")
        try:
            for _ in range(4):
                reply = client.call_model(MODEL, conversation, tools=usable, timeout=60)
                calls = list(reply.message.tool_calls)
                t.say(
                    f"model ← {', '.join(f'{c.name}({c.arguments_json})' for c in calls) or 'text'}{_attempts(reply)}"
                )
                if reply.attempts > 1:
                    t.say("        the 429 was waited out beneath the agent (Retry-After: 1)")
                if not calls:
                    break
                conversation.append(assistant(reply.message))
                outcomes = []
                for call in calls:
                    out = client.execute_tool(call.name, call.arguments_json, call_id=call.id)
                    verdict = "result" if out.HasField("result") else pb.FailureKind.Name(out.failure.kind)[13:]
                    t.say(f"agent → ExecuteTool {call.name}: {verdict}, {out.attempts} attempt(s)")
                    t.say("        model reads: " + out.model_text.replace("\n", "\n                     ")[:400])
                    outcomes.append((call, out))
                conversation.append(tool_results(outcomes))
            conversation.append(user("Answer in JSON with the answer and the source document id."))
            final = client.call_model(MODEL, conversation, response_schema=ANSWER_SCHEMA, timeout=60)
            t.say(f"model ← JSON{_attempts(final)}: {json.dumps(dict(final.json))}")
            if final.corrections:
                t.say("        the first reply was not JSON; the sidecar sent the model its mistake and asked again")
            conversation.append(assistant(final.message))
            conversation.append(user("Now say it in one line."))
            _stream_turn(client, conversation, t)
        except SidecarError as err:
            t.say(f"call failed: {err.kind_name}: {err.explanation}")
            return 1
    t.say("done: every attempt above is also a span in your traces (see README: See it in Jaeger)")
    return 0


def _stream_turn(client: SidecarClient, conversation: list[pb.Message], t: Timeline) -> None:
    """One StreamModel turn, shown as the agent sees it: deltas, the restart, the final reply."""
    t.say(f"agent → StreamModel {MODEL}: {conversation[-1].text!r}")
    shown: list[str] = []
    with client.stream_model(MODEL, conversation, timeout=60) as stream:
        for event in stream:
            which = event.WhichOneof("event")
            if which == "text":
                shown.append(event.text.text)
            elif which == "restart":
                t.say(f"model ⇢ {''.join(shown)!r} ({len(shown)} deltas, then the provider broke off)")
                t.say(f"        restart, attempt {event.restart.attempt}: {event.restart.reason}")
                t.say("        the agent drops what it showed; the sidecar waited and streams the reply again")
                shown.clear()
            elif which == "final":
                t.say(f"model ⇢ {''.join(shown)!r}{_attempts(event.final)}")


# ---------------------------------------------------------------------------- the same session, through the HTTP port


def _traced() -> dict[str, str]:
    """The current trace context as headers (the OpenAI SDK sends none of its own)."""
    from opentelemetry import propagate

    headers: dict[str, str] = {}
    propagate.inject(headers)
    return headers


def _http_attempts(raw_attempts: str | None, ext: dict[str, Any]) -> str:
    attempts = int(raw_attempts or ext.get("attempts") or 1)
    extra = [f"{attempts} attempts"] if attempts > 1 else []
    if ext.get("corrections"):
        extra.append(f"{ext['corrections']} correction{'s' * (ext['corrections'] > 1)}")
    return f" ({', '.join(extra)})" if extra else ""


async def _play_http(base: str, provider: str) -> int:
    try:
        import openai
    except ImportError:
        print("sidecar demo --http: it needs the openai package (pip install openai)")
        return 1
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    if not _scripted(provider):
        return 1
    t = Timeline()
    sdk = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)  # the sidecar retries
    try:
        async with (
            httpx2.AsyncClient(timeout=60, headers=_traced(), trust_env=False) as http,
            streamable_http_client(f"{base}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as mcp,
        ):
            await mcp.initialize()
            return await _session_http(sdk, mcp, t)
    except (httpx2.HTTPError, OSError, openai.APIConnectionError) as exc:
        print(f"sidecar demo: cannot reach the sidecar's HTTP port at {base} ({exc}); serve it with --http")
        return 1
    finally:
        await sdk.close()


async def _session_http(sdk: Any, mcp: Any, t: Timeline) -> int:
    import openai

    listed = await mcp.list_tools()
    tools = [
        {"type": "function", "function": {"name": x.name, "description": x.description, "parameters": x.input_schema}}
        for x in listed.tools
        if x.name in ("fetch_doc", "search_docs")
    ]
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "What do the docs say about retries?"}]
    headers = _traced()
    t.say(f"agent → POST /v1/chat/completions {MODEL}: {conversation[0]['content']!r}")
    try:
        for _ in range(4):
            raw = await sdk.chat.completions.with_raw_response.create(
                model=MODEL, messages=conversation, tools=tools, extra_headers=headers
            )
            reply = raw.parse()
            message = reply.choices[0].message
            ext = (reply.model_extra or {}).get("sidecar", {})
            calls = list(message.tool_calls or [])
            made = _http_attempts(raw.headers.get("x-sidecar-attempts"), ext)
            t.say(f"model ← {', '.join(f'{c.function.name}({c.function.arguments})' for c in calls) or 'text'}{made}")
            if int(raw.headers.get("x-sidecar-attempts") or 1) > 1:
                t.say("        the 429 was waited out beneath the SDK (x-sidecar-attempts: 2; its own retries are off)")
            if not calls:
                break
            conversation.append(message.model_dump(exclude_none=True))
            for call in calls:
                result = await mcp.call_tool(call.function.name, json.loads(call.function.arguments or "{}"))
                meta = result.meta or {}
                verdict = meta.get("sidecar/kind", "result") if result.is_error else "result"
                text = result.content[0].text if result.content else ""
                attempts = meta.get("sidecar/attempts")
                t.say(f"agent → MCP tools/call {call.function.name}: {verdict}, {attempts} attempt(s)")
                t.say("        model reads: " + text.replace("\n", "\n                     ")[:400])
                conversation.append({"role": "tool", "tool_call_id": call.id, "content": text})
        conversation.append({"role": "user", "content": "Answer in JSON with the answer and the source document id."})
        fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": ANSWER_SCHEMA}}
        final = await sdk.chat.completions.create(
            model=MODEL, messages=conversation, response_format=fmt, extra_headers=headers
        )
        ext = (final.model_extra or {}).get("sidecar", {})
        content = final.choices[0].message.content or ""
        t.say(f"model ← JSON{_http_attempts(None, ext)}: {content}")
        if ext.get("corrections"):
            t.say("        the first reply was not JSON; the sidecar sent the model its mistake and asked again")
        conversation.append({"role": "assistant", "content": content})
        conversation.append({"role": "user", "content": "Now say it in one line."})
        await _stream_turn_http(sdk, conversation, headers, t)
    except openai.APIStatusError as err:
        failure = err.body.get("sidecar", {}) if isinstance(err.body, dict) else {}
        said = failure.get("explanation", err.message)
        t.say(f"call failed: HTTP {err.status_code} {failure.get('kind', '')}: {said}")
        return 1
    t.say("done: every attempt above is also a span in your traces, each call under its POST SERVER span")
    return 0


async def _stream_turn_http(sdk: Any, conversation: list[dict[str, Any]], headers: dict[str, str], t: Timeline) -> None:
    """One streamed turn through the OpenAI SDK, restarts asked for as the sidecar's extension chunk."""
    t.say(f"agent → POST /v1/chat/completions stream {MODEL}: {conversation[-1]['content']!r}")
    shown: list[str] = []
    stream = await sdk.chat.completions.create(
        model=MODEL,
        messages=conversation,
        stream=True,
        extra_headers={**headers, "x-sidecar-mid-stream": "restart"},
    )
    async for chunk in stream:
        ext = (chunk.model_extra or {}).get("sidecar") or {}
        if "restart" in ext:
            restart = ext["restart"]
            t.say(f"model ⇢ {''.join(shown)!r} ({len(shown)} deltas, then the provider broke off)")
            t.say(f"        restart, attempt {restart['attempt']}: {restart['reason']}")
            t.say("        the agent drops what it showed; the sidecar waited and streams the reply again")
            shown.clear()
        shown.extend(c.delta.content or "" for c in chunk.choices if c.delta.content)
        if "attempts" in ext:
            t.say(f"model ⇢ {''.join(shown)!r}{_http_attempts(None, ext)}")


if __name__ == "__main__":
    sys.exit(run_demo(*(sys.argv[1:3] or ["127.0.0.1:50051", "http://127.0.0.1:8787"])))
