"""``sidecar demo``: a short scripted agent session against a running sidecar, as a timeline.

It scripts the local provider of the sidecar it plays against, the embedded default's (``make run``),
then plays an agent:
a model call that meets a 429 the sidecar waits out, a tool call that fails and that the model
recovers from, a structured answer that is corrected once, and a streamed reply that the
provider breaks off with an overload: the sidecar restarts it, and the agent sees a ``restart``.

``--http`` plays the same session through the HTTP port instead: the model calls with the
official ``openai`` SDK (``base_url`` the port's ``/v1``, its own retries off), the tool calls
with the official MCP client at ``/mcp``; the restart arrives as the sidecar's extension chunk,
asked for with ``x-sidecar-mid-stream: restart``.

Which provider: the one the sidecar itself names. Its admin view (``GetState`` on the gRPC port, or
``GET /admin/state`` on the HTTP port) tells the URL of each embedded fake it runs
(``x-sidecar-embedded-provider``); the embedded default lets a loopback caller read that view with no
token (``server.admin.read_on_loopback``), an operator elsewhere sends ``$SIDECAR_ADMIN_TOKEN``. The fakes
listen on free ports, so a second sidecar's demo never scripts the first's provider. ``--provider URL``
names one instead (a config of your own pointing at ``sidecar fake-provider``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import grpc
import httpx
from sidecar_client import SidecarClient, SidecarError, assistant, pb, tool_results, user
from sidecar_contract.v1 import admin_pb2 as apb
from sidecar_contract.v1 import admin_pb2_grpc as apb_grpc

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
        print(f"sidecar demo: cannot reach the local provider at {provider} ({exc})")
        return False
    return True


def _provider_of(target: str, http: str | None) -> str | None:
    """The URL of the embedded provider of the sidecar at ``target`` (the gRPC port) or ``http`` (the HTTP
    port), as its admin view tells it; None, and why printed, when it does not."""
    from sidecar.server.admin import EMBEDDED_HEADER
    from sidecar.status import TOKEN_ENV

    key = EMBEDDED_HEADER.format(name="provider")
    token = os.environ.get(TOKEN_ENV, "")
    where = http or target
    refusal: str | None = None
    try:
        if http is not None:
            with httpx.Client(timeout=5, trust_env=False) as client:
                headers = {"authorization": f"Bearer {token}"} if token else {}
                answer = client.get(f"{http}/admin/state", headers=headers)
            told = answer.headers.get(key)
            if answer.status_code != 200:
                refusal = f"HTTP {answer.status_code}: {answer.text[:300]}"
        else:
            metadata = (("authorization", f"Bearer {token}"),) if token else ()
            with grpc.insecure_channel(target) as channel:
                _, call = apb_grpc.AdminStub(channel).GetState.with_call(
                    apb.GetStateRequest(), metadata=metadata, timeout=5
                )
            told = next((str(v) for k, v in call.trailing_metadata() or () if k == key), None)
    except grpc.RpcError as exc:
        if not isinstance(exc, grpc.Call) or exc.code() == grpc.StatusCode.UNAVAILABLE:
            print(f"sidecar demo: cannot reach the sidecar at {where}; is `make run` running?")
            return None
        told, refusal = None, f"{exc.code().name}: {exc.details()}"
    except httpx.HTTPError as exc:
        print(f"sidecar demo: cannot reach the sidecar at {where} ({exc}); is `make run` running?")
        return None
    if refusal is not None:
        print(
            f"sidecar demo: the sidecar at {where} did not say where its local provider is ({refusal}); the demo "
            "plays against the embedded default (make run), whose state view answers a caller on loopback; "
            f"else set ${TOKEN_ENV} to an operator token, or give --provider URL"
        )
    elif told is None:
        print(
            f"sidecar demo: the sidecar at {where} runs no embedded local provider (it serves a config of its "
            "own); give --provider URL: the fake provider (sidecar fake-provider) that config names"
        )
    return told if refusal is None else None


def _attempts(reply: pb.CallModelResponse) -> str:
    extra = []
    if reply.attempts > 1:
        extra.append(f"{reply.attempts} attempts")
    if reply.corrections:
        extra.append(f"{reply.corrections} correction{'s' * (reply.corrections > 1)}")
    return f" ({', '.join(extra)})" if extra else ""


def run_demo(target: str, provider: str | None = None, http: str | None = None) -> int:
    """Play the session (over gRPC at ``target``, or through the HTTP port at ``http``) with the provider
    at ``provider`` scripted (None: the one that sidecar names); with OTEL_EXPORTER_OTLP_ENDPOINT set, it is
    one trace under "agent.demo"."""
    from opentelemetry import trace

    from sidecar.telemetry.setup import setup_telemetry

    if http is not None:
        http = http.rstrip("/")
    if provider is None and (provider := _provider_of(target, http)) is None:
        return 1
    os.environ.setdefault("OTEL_SERVICE_NAME", "sidecar-demo-agent")
    os.environ.setdefault("OTEL_METRICS_EXPORTER", "none")
    telemetry = setup_telemetry()
    try:
        with trace.get_tracer("sidecar.demo").start_as_current_span("agent.demo"):
            if http is not None:
                import asyncio

                return asyncio.run(_play_http(http, provider))
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
    sys.exit(run_demo(*(sys.argv[1:3] or ["127.0.0.1:50051"])))
