"""The conformance cases: loading, setting up the fakes, and judging what a client observed.

Every language's runner does the same three things per case (README.md is the spec):
reset and script the fakes, make the call through its client, and compare the *observation*
(a language-neutral dict built from the client's own types) with the case's ``expect``.
This module is the Python side of that, shared by ``test_conformance.py`` (the Python
client's runner) and ``harness.py record``.

Loading also checks that the cases cannot lean on each other's state::

    a case whose provider script answers with an error    its models (those it calls and those it
    (429, 529, 5xx, 4xx, a fault, a mid-stream fault)     scripts: a route's deployments) are called
    presses those models                                  and scripted by no other case

A Build case (``"rpc": "Build"``) calls nothing: the client builds a request with its own message
builders and options from a language-neutral ``build`` (README: "A Build case"), and the
observation is that request (``request``, compared as the proto it parses to) or ``refused``.

A CallModel or StreamModel case's observation holds the route's story (``served_by``, ``hops``, each
hop's ``hedge`` and ``cancelled``) and what the sidecar compacted (README: "A compacted conversation")::

    compaction    None, or trigger (no COMPACTION_TRIGGER_), tokens_before, tokens_after, summarizer_calls,
                  steps (strategy without COMPACTION_STRATEGY_, turns, tokens_before, tokens_after) and
                  messages (each as canonical proto3 JSON, compared as such)

A StreamModel case's observation adds what the stream showed (README: "A StreamModel case")::

    events        the kinds in order: text, tool_call, restart, final
    restarts      each restart's cause (no RESTART_CAUSE_), reason, attempt
    stream_text   the client's accumulated text at the end (since the last restart)
    final         the final event's attempts, corrections, output_budget_raised, finish_reason; or None
    provider_disconnected   (cancel_after_events) the fake provider saw the sidecar leave
"""

from __future__ import annotations

import json
import math
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance_build import build_problems, check_build, observe_build_python

__all__ = [
    "BUILD",
    "DEFAULT_DEADLINE_MS",
    "RPCS",
    "Case",
    "check",
    "expand",
    "isolation_problems",
    "load_cases",
    "model_kwargs",
    "post_json",
    "prepare_fakes",
]

RPCS = ("ExecuteTool", "CallModel", "ClassifyFailure", "StreamModel")
BUILD = "Build"
"""A case that calls nothing: the client builds a CallModelRequest (README: "A Build case")."""
MODEL_RPCS = ("CallModel", "StreamModel")
PLACEHOLDERS = ("FAKE_PROVIDER_URL", "TOOL_BACKEND_URL")
"""``${NAME}`` in an expected string stands for the fake's URL of this run (its port changes)."""
DEFAULT_DEADLINE_MS = 15_000
_HTTP_KEYS = ("status_code", "service", "endpoint", "body", "retry_after_raw")
_HOP_KEYS = ("deployment", "kind", "attempts", "skipped", "reason", "hedge", "cancelled")
_COMPACTION_KEYS = ("trigger", "tokens_before", "tokens_after", "summarizer_calls", "messages")
_STEP_KEYS = ("strategy", "turns", "tokens_before", "tokens_after")
_RESTART_KEYS = ("cause", "reason", "attempt")
_FINAL_KEYS = ("attempts", "corrections", "output_budget_raised", "finish_reason")
_STREAM_KEYS = ("partial_text", "reason", "deltas_sent")
DISCONNECT_WAIT_S = 5.0
"""How long a runner polls the fake provider for ``client_disconnected`` after it cancels a stream."""
DISCONNECT_POLL_S = 0.02
QUIET_STREAM_FAULTS = ("unknown_event", "truncated")
"""Stream faults after which the stream still ends well: they press no model (every other one does)."""
REPLY_PRESETS = ("reply", "truncated", "bad_json", "missing_fields", "refusal")
"""The fake provider's presets that answer 200 (sidecar/fakes): a step of these, with no error
``status`` and no ``fault``, presses no model."""


@dataclass(frozen=True)
class Case:
    """One case file: ``cases/<file>.json``."""

    path: Path
    data: Mapping[str, Any]

    @property
    def name(self) -> str:
        return str(self.data["name"])

    @property
    def rpc(self) -> str:
        return str(self.data["rpc"])

    @property
    def request(self) -> Mapping[str, Any]:
        return self.data.get("request") or {}

    @property
    def expect(self) -> Mapping[str, Any]:
        return self.data["expect"]  # type: ignore[no-any-return]

    @property
    def before(self) -> list[Mapping[str, Any]]:
        return list(self.data.get("before") or [])

    @property
    def deadline_ms(self) -> int:
        return int(self.data.get("deadline_ms") or DEFAULT_DEADLINE_MS)

    @property
    def cancel_after_events(self) -> int | None:
        """StreamModel: the runner cancels the stream after reading this many events."""
        value = self.data.get("cancel_after_events")
        return None if value is None else int(value)


def load_cases(directory: str | Path) -> list[Case]:
    """Every case, in file-name order; a malformed file raises ValueError naming it."""
    out = []
    for path in sorted(Path(directory).glob("*.json")):
        data = json.loads(path.read_text())
        problems = _validate(data)
        if problems:
            raise ValueError(f"{path}: " + "; ".join(problems))
        out.append(Case(path, data))
    names = [c.name for c in out]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise ValueError(f"duplicate case names: {sorted(duplicates)}")
    shared = isolation_problems(out)
    if shared:
        raise ValueError("cases that share a model they press: " + "; ".join(shared))
    return out


def isolation_problems(cases: list[Case]) -> list[str]:
    """Every model a case presses (its provider script answers with an error) that another case also uses.

    A model's throttle, pause and pacing are shared by every call to it and outlive the case, so
    a case that presses a model must be the only one calling or scripting it (sidecar.yaml gives
    each such case its own catalog model): then no case's waits depend on the cases before it.
    """
    problems = []
    for case in cases:
        if not _presses(case):
            continue
        pressed = _called(case) | _scripted(case)  # a route's deployments are pressed through it
        for other in cases:
            if other is not case and (common := pressed & (_called(other) | _scripted(other))):
                problems.append(f"{case.path.name} presses {sorted(common)}, which {other.path.name} also uses")
    return problems


def _called(case: Case) -> set[str]:
    calls = [{"rpc": case.rpc, "request": case.request}, *case.before]
    return {str(c["request"]["model"]) for c in calls if c["rpc"] in MODEL_RPCS and c["request"].get("model")}


def _scripted(case: Case) -> set[str]:
    return {str(s["model"]) for s in (case.data.get("setup") or {}).get("provider") or [] if "model" in s}


def _presses(case: Case) -> bool:
    for script in (case.data.get("setup") or {}).get("provider") or []:
        for step in script.get("steps") or []:
            preset = step.get("preset")
            error_preset = preset is not None and preset not in REPLY_PRESETS
            stream_fault = step.get("stream_fault") not in (None, *QUIET_STREAM_FAULTS)
            if error_preset or stream_fault or "fault" in step or step.get("status", 200) >= 400:
                return True
    return False


def _validate(data: Any) -> list[str]:
    if not isinstance(data, dict):
        return ["a case is a JSON object"]
    problems = []
    for key in ("name", "rpc", "request", "expect"):
        if key not in data:
            problems.append(f"missing {key!r}")
    if data.get("rpc") == BUILD:
        return problems + build_problems(data)
    if "build" in data:
        problems.append(f"build is a {BUILD} case's")
    if data.get("rpc") not in RPCS:
        problems.append(f"rpc must be one of {(*RPCS, BUILD)}")
    for entry in data.get("before") or []:
        if entry.get("rpc") not in RPCS or "request" not in entry:
            problems.append("each 'before' entry needs an rpc and a request")
    expect = data.get("expect") or {}
    if "grpc_code" not in expect:
        problems.append("expect needs grpc_code")
    if expect.get("outcome") not in (None, "result", "failure"):
        problems.append("expect.outcome must be 'result' or 'failure'")
    cancel = data.get("cancel_after_events")
    if cancel is not None and (data.get("rpc") != "StreamModel" or not isinstance(cancel, int) or cancel < 0):
        problems.append("cancel_after_events is a StreamModel case's count of events (an integer >= 0)")
    if "compaction" in expect and data.get("rpc") not in MODEL_RPCS:
        problems.append("expect.compaction is a CallModel or StreamModel case's")
    stream_keys = {"events", "restarts", "stream_text", "final", "provider_disconnected"} & set(expect)
    if stream_keys and data.get("rpc") != "StreamModel":
        problems.append(f"expect.{sorted(stream_keys)} are a StreamModel case's")
    keys = {"name", "description", "rpc", "setup", "before", "request", "deadline_ms", "cancel_after_events", "expect"}
    unknown = set(data) - keys
    if unknown:
        problems.append(f"unknown keys {sorted(unknown)}")
    return problems


def post_json(url: str, body: Any) -> Any:
    """POST a JSON body and return the parsed JSON answer (an HTTP error raises)."""
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST", headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        text = resp.read().decode() or "null"
    return json.loads(text)


def prepare_fakes(case: Case, provider_url: str, tool_backend_url: str) -> None:
    """Reset both fakes, then script them with the case's setup."""
    post_json(f"{provider_url}/_fake/reset", {})
    post_json(f"{tool_backend_url}/_fake/reset", {})
    setup = case.data.get("setup") or {}
    for entry in setup.get("tool_backend") or []:
        post_json(f"{tool_backend_url}/_fake/script", entry)
    for entry in setup.get("provider") or []:
        post_json(f"{provider_url}/_fake/script", entry)


def expand(value: Any, urls: Mapping[str, str]) -> Any:
    """``value`` with every ``${FAKE_PROVIDER_URL}`` / ``${TOOL_BACKEND_URL}`` in its strings replaced."""
    if isinstance(value, str):
        for name in PLACEHOLDERS:
            value = value.replace("${" + name + "}", urls[name])
        return value
    if isinstance(value, list):
        return [expand(v, urls) for v in value]
    if isinstance(value, dict):
        return {k: expand(v, urls) for k, v in value.items()}
    return value


def check(expect: Mapping[str, Any], observed: Mapping[str, Any], urls: Mapping[str, str]) -> list[str]:
    """Every way ``observed`` differs from ``expect`` (placeholders expanded with ``urls``); empty when it passes."""
    expect = expand(expect, urls)
    if "grpc_code" not in expect:  # a Build case
        return check_build(expect, observed)
    problems: list[str] = []

    def differ(what: str, want: Any, got: Any) -> None:
        problems.append(f"{what}: want {want!r}, got {got!r}")

    if observed.get("grpc_code") != expect["grpc_code"]:
        differ("grpc_code", expect["grpc_code"], observed.get("grpc_code"))
    if "outcome" in expect and observed.get("outcome") != expect["outcome"]:
        differ("outcome", expect["outcome"], observed.get("outcome"))
    if "failure" in expect:
        want = expect["failure"]
        got = observed.get("failure")
        if want is None:
            if got is not None:
                differ("failure", None, got)
        elif got is None:
            differ("failure", want, None)
        else:
            problems.extend(_check_failure(want, got))
    for key, field in (("result_contains", "result_text"), ("model_text_contains", "model_text")):
        if key in expect and expect[key] not in (observed.get(field) or ""):
            problems.append(f"{field}: want it to contain {expect[key]!r}, got {observed.get(field)!r}")
    if "model_text" in expect and observed.get("model_text") != expect["model_text"]:
        differ("model_text", expect["model_text"], observed.get("model_text"))
    problems.extend(_check_route(expect, observed))
    problems.extend(_check_compaction(expect, observed))
    problems.extend(_check_stream(expect, observed))
    return problems


def _check_compaction(expect: Mapping[str, Any], observed: Mapping[str, Any]) -> Iterator[str]:
    """``compaction``: ``null`` absent; an object, present with each given key equal; ``steps`` as many as
    listed, each given key equal; ``messages`` equal as canonical proto3 JSON."""
    if "compaction" not in expect:
        return
    want, got = expect["compaction"], observed.get("compaction")
    if want is None:
        if got is not None:
            yield f"compaction: want none, got {got!r}"
        return
    if got is None:
        yield f"compaction: want {want!r}, got none"
        return
    for key in _COMPACTION_KEYS:
        if key in want and got.get(key) != want[key]:
            yield f"compaction.{key}: want {want[key]!r}, got {got.get(key)!r}"
    if "steps" in want:
        steps = got.get("steps") or []
        if len(want["steps"]) != len(steps):
            yield f"compaction.steps: want {len(want['steps'])} steps, got {len(steps)}: {steps!r}"
            return
        for i, (w, g) in enumerate(zip(want["steps"], steps, strict=True)):
            for key in _STEP_KEYS:
                if key in w and g.get(key) != w[key]:
                    yield f"compaction.steps[{i}].{key}: want {w[key]!r}, got {g.get(key)!r}"


def _check_stream(expect: Mapping[str, Any], observed: Mapping[str, Any]) -> Iterator[str]:
    """A StreamModel case's ``events``, ``restarts``, ``stream_text``, ``final`` and ``provider_disconnected``."""
    for key in ("events", "stream_text", "provider_disconnected"):
        if key in expect and observed.get(key) != expect[key]:
            yield f"{key}: want {expect[key]!r}, got {observed.get(key)!r}"
    if "restarts" in expect:
        want, got = expect["restarts"], observed.get("restarts") or []
        if len(want) != len(got):
            yield f"restarts: want {len(want)} restarts, got {len(got)}: {got!r}"
        else:
            for i, (w, g) in enumerate(zip(want, got, strict=True)):
                for key in _RESTART_KEYS:
                    if key in w and g.get(key) != w[key]:
                        yield f"restarts[{i}].{key}: want {w[key]!r}, got {g.get(key)!r}"
                if "reason_contains" in w and w["reason_contains"] not in (g.get("reason") or ""):
                    yield f"restarts[{i}].reason: want it to contain {w['reason_contains']!r}, got {g.get('reason')!r}"
    if "final" in expect:
        want, got = expect["final"], observed.get("final")
        if want is None:
            if got is not None:
                yield f"final: want none, got {got!r}"
        elif got is None:
            yield f"final: want {want!r}, got none"
        else:
            for key in _FINAL_KEYS:
                if key in want and got.get(key) != want[key]:
                    yield f"final.{key}: want {want[key]!r}, got {got.get(key)!r}"


def _check_route(expect: Mapping[str, Any], observed: Mapping[str, Any]) -> Iterator[str]:
    """``served_by`` equal; ``hops`` as many as listed, each given key equal (``reason_contains``: a substring)."""
    if "served_by" in expect and observed.get("served_by") != expect["served_by"]:
        yield f"served_by: want {expect['served_by']!r}, got {observed.get('served_by')!r}"
    if "hops" not in expect:
        return
    want, got = expect["hops"], observed.get("hops") or []
    if len(want) != len(got):
        yield f"hops: want {len(want)} hops, got {len(got)}: {got!r}"
        return
    for i, (w, g) in enumerate(zip(want, got, strict=True)):
        for key in _HOP_KEYS:
            if key in w and g.get(key) != w[key]:
                yield f"hops[{i}].{key}: want {w[key]!r}, got {g.get(key)!r}"
        if "reason_contains" in w and w["reason_contains"] not in (g.get("reason") or ""):
            yield f"hops[{i}].reason: want it to contain {w['reason_contains']!r}, got {g.get('reason')!r}"


def _check_failure(want: Mapping[str, Any], got: Mapping[str, Any]) -> Iterator[str]:
    for key in ("kind", "correctable", "message", "explanation", "attempts", "detail"):
        if key in want and got.get(key) != want[key]:
            yield f"failure.{key}: want {want[key]!r}, got {got.get(key)!r}"
    for key in ("message", "explanation"):
        part = want.get(f"{key}_contains")
        if part is not None and part not in (got.get(key) or ""):
            yield f"failure.{key}: want it to contain {part!r}, got {got.get(key)!r}"
    if "http" in want:
        w, g = want["http"], got.get("http")
        if w is None:
            if g is not None:
                yield f"failure.http: want absent, got {g!r}"
        elif g is None:
            yield f"failure.http: want {w!r}, got absent"
        else:
            for key in _HTTP_KEYS:
                if key in w and g.get(key) != w[key]:
                    yield f"failure.http.{key}: want {w[key]!r}, got {g.get(key)!r}"
    if "stream" in want:
        w, g = want["stream"], got.get("stream")
        if w is None:
            if g is not None:
                yield f"failure.stream: want absent, got {g!r}"
        elif g is None:
            yield f"failure.stream: want {w!r}, got absent"
        else:
            for key in _STREAM_KEYS:
                if key in w and g.get(key) != w[key]:
                    yield f"failure.stream.{key}: want {w[key]!r}, got {g.get(key)!r}"
            if "reason_contains" in w and w["reason_contains"] not in (g.get("reason") or ""):
                yield f"failure.stream.reason: want it to contain {w['reason_contains']!r}, got {g.get('reason')!r}"
    if "retry_after_seconds" in want:
        w, g = want["retry_after_seconds"], got.get("retry_after_seconds")
        if w is None:
            if g is not None:
                yield f"failure.retry_after_seconds: want absent, got {g!r}"
        elif g is None or not math.isclose(float(g), float(w), abs_tol=1e-3):
            yield f"failure.retry_after_seconds: want {w!r}, got {g!r}"


# ---------------------------------------------------------------- the Python client's observation


def observe_python(target: str, case: Case, provider_url: str) -> dict[str, Any]:
    """Run the case's ``before`` calls, then its call, through ``sidecar_client``; the observation.

    ``provider_url``: the fake provider, asked whether the sidecar left a cancelled stream's request.
    """
    import grpc
    from google.protobuf import json_format
    from sidecar_client import SidecarClient, SidecarError, from_rpc_error, pb

    def call(client: SidecarClient, rpc: str, request: Mapping[str, Any], timeout: float) -> dict[str, Any]:
        try:
            if rpc == "ExecuteTool":
                req = json_format.ParseDict(request, pb.ExecuteToolRequest())
                try:
                    resp = client.execute_tool(
                        req.tool,
                        req.arguments_json,
                        call_id=req.call_id,
                        job=req.job if req.HasField("job") else None,
                        timeout=timeout,
                    )
                except grpc.RpcError as exc:
                    raise from_rpc_error(exc) from exc
                return _tool_observation(resp)
            if rpc == "CallModel":
                req = json_format.ParseDict(request, pb.CallModelRequest())
                reply = client.call_model(req.model, list(req.messages), timeout=timeout, **model_kwargs(req))
                observed = {"grpc_code": "OK", "outcome": "result", "failure": None, "result_text": reply.message.text}
                return {**observed, **_route_observation(reply.served_by, reply.hops), **_compaction_observation(reply)}
            if rpc == "StreamModel":
                req = json_format.ParseDict(request, pb.CallModelRequest())
                kwargs = model_kwargs(req)
                if req.mid_stream:
                    kwargs["mid_stream"] = req.mid_stream
                stream = client.stream_model(req.model, list(req.messages), timeout=timeout, **kwargs)
                return _stream_observation(stream, case.cancel_after_events, req.model, provider_url)
            req = json_format.ParseDict(request, pb.ClassifyFailureRequest())
            try:
                failure = client.classify_failure(req, timeout=timeout)
            except grpc.RpcError as exc:
                raise from_rpc_error(exc) from exc
            kind = failure.kind != pb.FAILURE_KIND_UNSPECIFIED
            return {"grpc_code": "OK", "outcome": "failure" if kind else "result", "failure": _failure(failure)}
        except SidecarError as err:
            code = err.grpc_code.name if err.grpc_code is not None else "UNKNOWN"
            observed = {"grpc_code": code, "outcome": "failure", "failure": _failure(err.failure)}
            return {**observed, **_route_observation("", err.hops), "compaction": None}

    if case.rpc == "Build":
        return observe_build_python(case.path, case.request, case.data["build"])
    with SidecarClient(target) as client:
        for entry in case.before:
            call(client, entry["rpc"], entry["request"], case.deadline_ms / 1000)
        return call(client, case.rpc, case.request, case.deadline_ms / 1000)


def model_kwargs(req: Any) -> dict[str, Any]:
    """What ``call_model`` / ``stream_model`` take besides the model and messages, from a parsed request
    (every field the client's ``ModelOptions`` sets, so a case's request goes through them)."""
    kwargs: dict[str, Any] = {"system": req.system, "tools": list(req.tools)}
    if req.response_schema_json:
        kwargs["response_schema"] = json.loads(req.response_schema_json)
    for name in ("max_output_tokens", "temperature", "job", "reasoning", "tool_choice", "parallel_tool_calls"):
        if req.HasField(name):
            kwargs[name] = getattr(req, name)
    for name in ("top_p", "top_k", "seed", "presence_penalty", "frequency_penalty", "system_cache"):
        if req.HasField(name):
            kwargs[name] = getattr(req, name)
    if req.stop:
        kwargs["stop"] = list(req.stop)
    if req.end_user:
        kwargs["end_user"] = req.end_user
    if req.provider_options_json:
        kwargs["provider_options"] = req.provider_options_json
    if req.HasField("on_overflow"):
        kwargs["on_overflow"] = req.on_overflow
    return kwargs


def _stream_observation(stream: Any, cancel_after: int | None, model: str, provider_url: str) -> dict[str, Any]:
    """Read the stream (cancelling it after ``cancel_after`` events); what it showed, and how it ended."""
    from sidecar_client import SidecarError, pb

    events: list[Any] = []
    observed: dict[str, Any] = {"grpc_code": "OK", "outcome": "result", "failure": None}
    try:
        for event in stream:
            events.append(event)
            if cancel_after is not None and len(events) == cancel_after:
                stream.cancel()
    except SidecarError as err:
        code = err.grpc_code.name if err.grpc_code is not None else "UNKNOWN"
        observed = {"grpc_code": code, "outcome": "failure", "failure": _failure(err.failure)}
        observed.update(_route_observation("", err.hops), compaction=None)
    kinds = [str(e.WhichOneof("event")) for e in events]
    final = stream.final
    observed.update(
        events=kinds,
        restarts=[
            {
                "cause": pb.RestartCause.Name(e.restart.cause).removeprefix("RESTART_CAUSE_"),
                "reason": e.restart.reason,
                "attempt": e.restart.attempt,
            }
            for e in events
            if e.WhichOneof("event") == "restart"
        ],
        stream_text=stream.text,
        final=None,
    )
    if final is not None:
        observed.update(
            result_text=final.message.text,
            **_route_observation(final.served_by, final.hops),
            **_compaction_observation(final),
        )
        observed["final"] = {
            "attempts": final.attempts,
            "corrections": final.corrections,
            "output_budget_raised": final.output_budget_raised,
            "finish_reason": pb.FinishReason.Name(final.finish_reason).removeprefix("FINISH_REASON_"),
        }
    if cancel_after is not None:
        observed["provider_disconnected"] = provider_disconnected(provider_url, model)
    return observed


def provider_disconnected(provider_url: str, model: str) -> bool:
    """Whether the fake provider's last request for ``model`` records the client leaving (polled a while)."""
    url = f"{provider_url}/_fake/requests?" + urllib.parse.urlencode({"model": model})
    deadline = time.monotonic() + DISCONNECT_WAIT_S
    while True:
        with urllib.request.urlopen(url, timeout=10) as resp:
            records = json.loads(resp.read().decode() or "[]")
        if records and records[-1].get("client_disconnected"):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(DISCONNECT_POLL_S)


def _route_observation(served_by: str, hops: Any) -> dict[str, Any]:
    """``served_by`` and ``hops`` of a CallModel reply or failure (README: a route's story)."""
    from sidecar_client import pb

    listed = [
        {
            "deployment": h.deployment,
            "kind": pb.FailureKind.Name(h.kind).removeprefix("FAILURE_KIND_"),
            "attempts": h.attempts,
            "skipped": h.skipped,
            "reason": h.reason,
            "hedge": h.hedge,
            "cancelled": h.cancelled,
        }
        for h in hops
    ]
    return {"served_by": served_by, "hops": listed}


def _compaction_observation(reply: Any) -> dict[str, Any]:
    """``compaction`` of a CallModel reply (a stream's final): None when the sidecar compacted nothing."""
    from google.protobuf import json_format
    from sidecar_client import pb

    if not reply.HasField("compaction"):
        return {"compaction": None}
    c = reply.compaction
    steps = [
        {
            "strategy": pb.CompactionStrategy.Name(s.strategy).removeprefix("COMPACTION_STRATEGY_"),
            "turns": list(s.turns),
            "tokens_before": s.tokens_before,
            "tokens_after": s.tokens_after,
        }
        for s in c.steps
    ]
    return {
        "compaction": {
            "trigger": pb.CompactionTrigger.Name(c.trigger).removeprefix("COMPACTION_TRIGGER_"),
            "tokens_before": c.tokens_before,
            "tokens_after": c.tokens_after,
            "steps": steps,
            "messages": [json_format.MessageToDict(m) for m in c.messages],
            "summarizer_calls": c.summarizer_calls,
        }
    }


def _tool_observation(resp: Any) -> dict[str, Any]:
    if resp.HasField("failure"):
        return {
            "grpc_code": "OK",
            "outcome": "failure",
            "failure": _failure(resp.failure),
            "result_text": None,
            "model_text": resp.model_text,
        }
    return {
        "grpc_code": "OK",
        "outcome": "result",
        "failure": None,
        "result_text": resp.result.content,
        "model_text": resp.model_text,
    }


def _failure(f: Any) -> dict[str, Any]:
    from sidecar_client import pb

    http = None
    if f.HasField("http"):
        http = {
            "status_code": f.http.status_code,
            "service": f.http.service,
            "endpoint": f.http.endpoint,
            "body": f.http.body,
            "retry_after_raw": f.http.retry_after_raw if f.http.HasField("retry_after_raw") else None,
        }
    retry = f.retry_after.ToTimedelta().total_seconds() if f.HasField("retry_after") else None
    stream = None
    if f.HasField("stream"):
        stream = {"partial_text": f.stream.partial_text, "reason": f.stream.reason, "deltas_sent": f.stream.deltas_sent}
    return {
        "kind": pb.FailureKind.Name(f.kind).removeprefix("FAILURE_KIND_"),
        "correctable": f.correctable,
        "message": f.message,
        "explanation": f.explanation,
        "http": http,
        "retry_after_seconds": retry,
        "attempts": f.attempts,
        "detail": f.WhichOneof("detail"),
        "stream": stream,
    }
