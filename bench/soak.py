"""`make soak`: the sidecar as a real process under sustained faults, a SIGTERM drain and a kill -9.

    .venv/bin/python bench/soak.py                 # what `make soak` runs (a few minutes on 2 cores)
    .venv/bin/python bench/soak.py --calls 1000    # a quicker pass: every phase, a tenth of the calls
    .venv/bin/python bench/soak.py --only model,drain

Three processes of the project, each its own, on loopback: ``sidecar fake-provider``,
``sidecar tool-backend`` and ``sidecar serve`` with a generated config (bench/results/raw/).
The client is this program: grpc.aio on the generated stubs, ``--concurrency`` calls in flight.

    phase   what is done                                            what is counted
    model   CallModel x --calls; 30 % of the upstream attempts      ok, failed by gRPC code and Failure kind,
            fail: 429 with Retry-After: 1, 429 without, 529, 500,   lost, upstream attempts
            a reset connection
    tool    ExecuteTool x --calls of a non-idempotent POST, each    ... and sent twice: the backend received
            with a unique text; 30 % of the POSTs fail: 500, 503,   one call's text in more than one POST
            429 with Retry-After, a reset, a body cut short
    drain   --drain slow calls (the provider holds each 3 s) in     completed vs lost, calls refused after
            flight, then SIGTERM                                    the signal, exit code, seconds to exit
    kill    CallModel and ExecuteTool under load (50 ms upstream);  lost, re-sent, sent twice, seconds until
            kill -9 at a third of the calls, restart on the same    it serves again
            port; the client re-sends each call that got
            UNAVAILABLE with no Failure (no answer: the process
            died) until its budget ends

    lost          no answer by the call's deadline + LOST_GRACE_S, or DEADLINE_EXCEEDED with no Failure
    sent twice    texts the tool backend received more than once (GET /_fake/notes)
    RSS           VmRSS of the sidecar process (/proc/PID/status) before and after each phase

The faults are scripted, not drawn: a seeded shuffle of exactly FAULT_SHARE faults per upstream
attempt, queued FIFO on the fake (every attempt, first or retry, takes the next step). The
config keeps retry windows short so the run takes minutes, and gives the model a configured
rate and the notes service a circuit that does not open: the soak measures delivery (every call
answered once, nothing sent twice), not the throttle's pacing or the circuit, which
tests/policy/test_model_throttle.py and tests/policy/test_circuit.py pin on a fake clock.

Output: one table on stdout and bench/results/soak.json; the config and the processes' logs in
bench/results/raw/ (logs/soak-*.log).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import signal
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.rpc import status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from run import RAW, RESULTS, Proc, _status_kb, free_port, http_get, machine_info, start, wait_http
from sidecar_client import pb
from sidecar_contract.v1 import sidecar_pb2_grpc as pb_grpc

CALLS = 10_000
CONCURRENCY = 200
DRAIN_CALLS = 100
FAULT_SHARE = 0.30
MODEL_FAULTS: dict[str, tuple[float, dict[str, Any]]] = {
    "429 retry-after 1": (0.08, {"preset": "rate_limit", "retry_after": "1"}),
    "429": (0.07, {"preset": "rate_limit"}),
    "529": (0.05, {"preset": "overloaded"}),
    "500": (0.05, {"preset": "server_error"}),
    "reset": (0.05, {"fault": "reset"}),
}
TOOL_FAULTS: dict[str, tuple[float, dict[str, Any]]] = {
    "500": (0.08, {"status": 500}),
    "503": (0.07, {"status": 503}),
    "429 retry-after 1": (0.05, {"status": 429, "headers": {"retry-after": "1"}}),
    "reset": (0.05, {"fault": "reset"}),
    "cut body": (0.05, {"fault": "drop_mid_body"}),
}
STEPS_PER_CALL = 3
"""Fault steps queued per call: more than the attempts a call can make at this share."""
CALL_TIMEOUT_S = 30.0
"""Every call's gRPC deadline."""
LOST_GRACE_S = 5.0
"""A call with no answer this long after its deadline is lost."""
DRAIN_DELAY_MS = 3000
"""How long the provider holds each drain call: long enough to SIGTERM them all in flight."""
GRACE_PERIOD_S = 15.0
"""The sidecar's server.grace_period_s: in-flight calls get this long after SIGTERM."""
KILL_UPSTREAM_DELAY_MS = 50
"""Each kill-phase reply is held this long, so that the kill finds calls in flight."""
KILL_AT = 1 / 3
"""The kill -9 comes when this share of the kill phase's calls has an answer."""
RESEND_WAIT_S = 0.2
"""The client waits this long before re-sending a call whose process died."""
START_TIMEOUT_S = 60.0
SEED = 10
MODEL = "soak-model"
UPSTREAM_MODEL = "soak"
TOOL = "create_note"
PHASES = ("model", "tool", "drain", "kill")


def say(msg: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def http_post(url: str, body: Any) -> Any:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"null")


def rss_mb(proc: Proc) -> float:
    return round(_status_kb(proc.pid, "VmRSS") / 1024, 1)


# --------------------------------------------------------------------------- faults


def fault_steps(mix: dict[str, tuple[float, dict[str, Any]]], count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` steps, exactly each fault's share of them faulted, in a seeded order; runs of normal steps folded."""
    kinds: list[str | None] = []
    for name, (share, _) in mix.items():
        kinds += [name] * round(share * count)
    kinds += [None] * (count - len(kinds))
    random.Random(seed).shuffle(kinds)
    steps: list[dict[str, Any]] = []
    for kind in kinds:
        if kind is None and steps and steps[-1].get("normal"):
            steps[-1]["repeat"] += 1
        elif kind is None:
            steps.append({"normal": True, "repeat": 1})
        else:
            steps.append(dict(mix[kind][1]))
    for step in steps:  # a step with nothing but a repeat count is the fake's normal answer
        step.pop("normal", None)
    return steps


# --------------------------------------------------------------------------- the processes


@dataclass
class Fakes:
    provider: Proc
    tools: Proc
    provider_url: str
    tools_url: str

    def reset(self) -> None:
        http_post(f"{self.provider_url}/_fake/reset", {})
        http_post(f"{self.tools_url}/_fake/reset", {})

    def script_model(self, steps: list[dict[str, Any]]) -> None:
        http_post(f"{self.provider_url}/_fake/script", {"model": UPSTREAM_MODEL, "steps": steps})

    def script_notes(self, steps: list[dict[str, Any]]) -> None:
        http_post(f"{self.tools_url}/_fake/script", {"path": "/notes", "steps": steps})

    def provider_requests(self) -> int:
        """Requests recorded since the last reset (the fake keeps the last 10,000)."""
        return int(http_get(f"{self.provider_url}/_fake/health")["requests"])

    def model_steps_left(self) -> int:
        """Scripted steps not yet taken: every upstream attempt takes one."""
        return int(http_get(f"{self.provider_url}/_fake/health")["pending_steps"].get(UPSTREAM_MODEL, 0))

    def notes(self) -> dict[str, Any]:
        return dict(http_get(f"{self.tools_url}/_fake/notes"))

    def stop(self) -> None:
        self.provider.stop()
        self.tools.stop()


def start_fakes() -> Fakes:
    ports = free_port(), free_port()
    provider = start("soak-provider", [sys.executable, "-m", "sidecar", "fake-provider", "--port", str(ports[0])])
    tools = start("soak-tools", [sys.executable, "-m", "sidecar", "tool-backend", "--port", str(ports[1])])
    fakes = Fakes(provider, tools, f"http://127.0.0.1:{ports[0]}", f"http://127.0.0.1:{ports[1]}")
    for url, proc in ((fakes.provider_url, provider), (fakes.tools_url, tools)):
        if not wait_http(f"{url}/_fake/health", START_TIMEOUT_S):
            fakes.stop()
            raise RuntimeError(f"{proc.name} did not start:\n{proc.tail()}")
    return fakes


def write_config(port: int, fakes: Fakes) -> Path:
    config = {
        "server": {"listen": f"127.0.0.1:{port}", "grace_period_s": GRACE_PERIOD_S},
        "policy": {
            "upstream_retries": 3,
            "windows": {
                "rate_limit": [0.05, 0.25],
                "overload": [0.1, 0.5],
                "transient": [0.05, 0.25],
                "factor_cap": 4,
                "max_wait_s": 2,
            },
            "tool_retries": 2,
            "tool_window": [0.05, 0.2],
            "tool_max_wait_s": 2,
        },
        "providers": {
            "fake": {"wire_format": "openai", "base_url": f"{fakes.provider_url}/v1", "api_key": "${SOAK_KEY}"}
        },
        "models": {
            MODEL: {
                "provider": "fake",
                "upstream_model": UPSTREAM_MODEL,
                "context_window": 128000,
                "max_output_tokens": 1024,
                "requests_per_minute": 600_000,
            }
        },
        "services": {"notes": {"rate": 100_000, "per_s": 1, "circuit": {"failures_to_open": 1_000_000}}},
        "tools": {
            TOOL: {
                "description": "Save a short note; not idempotent.",
                "kind": "fetch",
                "service": "notes",
                "method": "POST",
                "url": f"{fakes.tools_url}/notes",
                "body": "arguments",
                "resource_type": "note",
                "parameters": {
                    "type": "object",
                    "properties": {"text": {"type": "string", "minLength": 1}},
                    "required": ["text"],
                },
            }
        },
        "telemetry": {"log_level": "ERROR"},
    }
    path = RAW / "soak-sidecar.yaml"
    path.write_text(json.dumps(config, indent=2))  # JSON is YAML
    return path


@dataclass
class Sidecar:
    config: Path
    port: int
    key: str
    proc: Proc | None = None
    starts: int = 0

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> float:
        """Start ``sidecar serve``; the seconds until its health check answered."""
        self.starts += 1
        argv = [sys.executable, "-m", "sidecar", "serve", "--config", str(self.config)]
        env = {"SOAK_KEY": self.key, "OTEL_SDK_DISABLED": "true", "PYTHONUNBUFFERED": "1"}
        t0 = time.monotonic()
        self.proc = start(f"soak-sidecar-{self.starts}", argv, env=env)
        with grpc.insecure_channel(self.target) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            while True:
                if not self.proc.alive():
                    raise RuntimeError(f"the sidecar exited:\n{self.proc.tail()}")
                try:
                    request = health_pb2.HealthCheckRequest(service="sidecar.v1.Sidecar")
                    health.Check(request, timeout=1, wait_for_ready=True)
                    return time.monotonic() - t0
                except grpc.RpcError:
                    if time.monotonic() - t0 > START_TIMEOUT_S:
                        raise RuntimeError(f"the sidecar did not answer:\n{self.proc.tail()}") from None

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()


# --------------------------------------------------------------------------- the client


@dataclass
class Tally:
    """What one phase's calls got."""

    calls: int = 0
    ok: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    lost: int = 0
    resent: int = 0
    attempts: int = 0
    """Upstream attempts, as the sidecar reported them in each answer."""

    @property
    def answered(self) -> int:
        return self.ok + sum(self.failed.values()) + self.lost

    def to_json(self) -> dict[str, Any]:
        return {**{k: v for k, v in vars(self).items() if k != "failed"}, "failed": dict(self.failed)}


def failure_of(err: grpc.aio.AioRpcError) -> pb.Failure | None:
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            for detail in status_pb2.Status.FromString(value).details:
                failure = pb.Failure()
                if detail.Unpack(failure):
                    return failure
    return None


Call = Callable[[float, bool], Awaitable[Any]]
"""One RPC: ``call(timeout, wait_for_ready)``."""


async def one(call: Call, tally: Tally, *, resend: bool = False) -> None:
    """One call judged: ok, failed (by code / kind), or lost; with ``resend``, re-sent while its process is gone."""
    budget_end = time.monotonic() + CALL_TIMEOUT_S * 2
    first = True
    while True:
        try:
            response = await asyncio.wait_for(call(CALL_TIMEOUT_S, not first), CALL_TIMEOUT_S + LOST_GRACE_S)
        except TimeoutError:
            tally.lost += 1
            return
        except grpc.aio.AioRpcError as err:
            failure = failure_of(err)
            code = err.code()
            if failure is None and code == grpc.StatusCode.DEADLINE_EXCEEDED:
                tally.lost += 1
                return
            if failure is None and code == grpc.StatusCode.UNAVAILABLE and resend:
                if time.monotonic() + RESEND_WAIT_S >= budget_end:
                    tally.lost += 1
                    return
                tally.resent += 1
                first = False
                await asyncio.sleep(RESEND_WAIT_S)
                continue
            kind = pb.FailureKind.Name(failure.kind).removeprefix("FAILURE_KIND_") if failure else "no Failure"
            tally.attempts += failure.attempts if failure else 0
            tally.failed[f"{code.name}/{kind}"] += 1
            return
        tally.attempts += response.attempts
        if isinstance(response, pb.ExecuteToolResponse) and response.HasField("failure"):
            tally.failed["OK/" + pb.FailureKind.Name(response.failure.kind).removeprefix("FAILURE_KIND_")] += 1
        else:
            tally.ok += 1
        return


def model_call(stub: pb_grpc.SidecarStub, i: int) -> Call:
    request = pb.CallModelRequest(model=MODEL, messages=[pb.Message(role=pb.ROLE_USER, text=f"soak call {i}")])

    def call(timeout: float, ready: bool) -> Awaitable[Any]:
        return stub.CallModel(request, timeout=timeout, wait_for_ready=ready)

    return call


def tool_call(stub: pb_grpc.SidecarStub, text: str) -> Call:
    request = pb.ExecuteToolRequest(tool=TOOL, arguments_json=json.dumps({"text": text}), call_id=text)

    def call(timeout: float, ready: bool) -> Awaitable[Any]:
        return stub.ExecuteTool(request, timeout=timeout, wait_for_ready=ready)

    return call


def channel(target: str) -> grpc.aio.Channel:
    # Reconnect quickly after a restart: the default backoff starts at 1 s and grows.
    options = [
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.min_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 500),
    ]
    return grpc.aio.insecure_channel(target, options=options)


async def drive(
    calls: list[Call],
    tallies: list[Tally],
    concurrency: int,
    *,
    resend: bool = False,
    answered: Callable[[], None] | None = None,
) -> None:
    """Every call, ``concurrency`` at a time; ``tallies[i]`` counts ``calls[i]``; ``answered()`` after each."""
    todo = iter(range(len(calls)))

    async def worker() -> None:
        for i in todo:
            tallies[i].calls += 1
            await one(calls[i], tallies[i], resend=resend)
            if answered is not None:
                answered()

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def until(predicate: Callable[[], bool], limit_s: float, every_s: float = 0.05) -> bool:
    """Poll ``predicate`` until it holds or ``limit_s`` passed; whether it held."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if predicate():
            return True
        await asyncio.sleep(every_s)
    return predicate()


# --------------------------------------------------------------------------- phases


@dataclass
class Row:
    phase: str
    calls: int
    ok: int
    failed: dict[str, int]
    lost: int
    resent: int | None
    sent_twice: int | None
    upstream: int
    wall_s: float
    rss_before_mb: float
    rss_after_mb: float
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def row(phase: str, tally: Tally, wall: float, rss: tuple[float, float], **kw: Any) -> Row:
    return Row(
        phase=phase,
        calls=tally.calls,
        ok=tally.ok,
        failed=dict(tally.failed.most_common()),
        lost=tally.lost,
        resent=kw.pop("resent", None),
        sent_twice=kw.pop("sent_twice", None),
        upstream=kw.pop("upstream", tally.attempts),
        wall_s=round(wall, 1),
        rss_before_mb=rss[0],
        rss_after_mb=rss[1],
        **kw,
    )


async def phase_model(args: argparse.Namespace, fakes: Fakes, sidecar: Sidecar) -> Row:
    assert sidecar.proc is not None
    fakes.reset()
    queued = args.calls * STEPS_PER_CALL
    fakes.script_model(fault_steps(MODEL_FAULTS, queued, SEED))
    rss0 = rss_mb(sidecar.proc)
    tally = Tally()
    t0 = time.monotonic()
    async with channel(sidecar.target) as ch:
        stub = pb_grpc.SidecarStub(ch)
        await drive([model_call(stub, i) for i in range(args.calls)], [tally] * args.calls, args.concurrency)
    wall = time.monotonic() - t0
    upstream = queued - fakes.model_steps_left()
    mix = ", ".join(f"{k} {v[0]:.0%}" for k, v in MODEL_FAULTS.items())
    return row("model", tally, wall, (rss0, rss_mb(sidecar.proc)), upstream=upstream, notes=f"faults: {mix}")


async def phase_tool(args: argparse.Namespace, fakes: Fakes, sidecar: Sidecar) -> Row:
    assert sidecar.proc is not None
    fakes.reset()
    fakes.script_notes(fault_steps(TOOL_FAULTS, args.calls * STEPS_PER_CALL, SEED + 1))
    rss0 = rss_mb(sidecar.proc)
    tally = Tally()
    t0 = time.monotonic()
    async with channel(sidecar.target) as ch:
        stub = pb_grpc.SidecarStub(ch)
        calls = [tool_call(stub, f"soak-tool-{i}") for i in range(args.calls)]
        await drive(calls, [tally] * args.calls, args.concurrency)
    wall = time.monotonic() - t0
    notes = fakes.notes()
    twice = sum(n - 1 for n in notes["repeated"].values())
    mix = ", ".join(f"{k} {v[0]:.0%}" for k, v in TOOL_FAULTS.items())
    return row(
        "tool",
        tally,
        wall,
        (rss0, rss_mb(sidecar.proc)),
        sent_twice=twice,
        upstream=int(notes["received"]),
        notes=f"faults: {mix}; the backend received {notes['received']} POSTs, {notes['texts']} distinct texts",
        extra={"backend": notes},
    )


async def phase_drain(args: argparse.Namespace, fakes: Fakes, sidecar: Sidecar) -> Row:
    assert sidecar.proc is not None
    fakes.reset()
    fakes.script_model([{"delay_ms": DRAIN_DELAY_MS, "repeat": args.drain}])
    proc = sidecar.proc
    rss0 = rss_mb(proc)
    tally, late = Tally(), Tally()
    t0 = time.monotonic()
    async with channel(sidecar.target) as ch:
        stub = pb_grpc.SidecarStub(ch)
        running = asyncio.create_task(
            drive([model_call(stub, i) for i in range(args.drain)], [tally] * args.drain, args.drain)
        )
        await until(lambda: fakes.provider_requests() >= args.drain, CALL_TIMEOUT_S)
        in_flight = fakes.provider_requests()
        rss_loaded = rss_mb(proc)
        os.kill(proc.pid, signal.SIGTERM)
        signalled = time.monotonic()
        await asyncio.sleep(0.5)  # the server has stopped taking calls: these are refused
        await drive([model_call(stub, -i) for i in range(10)], [late] * 10, 10)
        await running
        code = await asyncio.to_thread(proc.popen.wait, GRACE_PERIOD_S + 30)
        exited = time.monotonic() - signalled
    refused = sum(late.failed.values())
    return row(
        "drain",
        tally,
        time.monotonic() - t0,
        (rss0, rss_loaded),
        notes=(
            f"{in_flight} in flight at SIGTERM; exit code {code} {exited:.1f} s after it; "
            f"{refused}/{late.calls} calls sent after it refused ({', '.join(late.failed) or 'none'})"
        ),
        extra={"in_flight": in_flight, "exit_code": code, "exit_s": round(exited, 2), "late": late.to_json()},
    )


async def phase_kill(args: argparse.Namespace, fakes: Fakes, sidecar: Sidecar) -> Row:
    assert sidecar.proc is not None
    fakes.reset()
    n = args.calls // 5
    fakes.script_model([{"delay_ms": KILL_UPSTREAM_DELAY_MS, "repeat": n * STEPS_PER_CALL}])
    fakes.script_notes([{"delay_ms": KILL_UPSTREAM_DELAY_MS, "repeat": n * STEPS_PER_CALL}])
    rss0 = rss_mb(sidecar.proc)
    model_t, tool_t = Tally(), Tally()
    t0 = time.monotonic()
    info: dict[str, Any] = {}
    async with channel(sidecar.target) as ch:
        stub = pb_grpc.SidecarStub(ch)
        calls: list[Call] = []
        tallies: list[Tally] = []
        for i in range(n):
            calls += [model_call(stub, i), tool_call(stub, f"soak-kill-{i}")]
            tallies += [model_t, tool_t]
        kill_now = asyncio.Event()

        def answered() -> None:
            if model_t.answered + tool_t.answered >= len(calls) * KILL_AT:
                kill_now.set()

        running = asyncio.create_task(drive(calls, tallies, args.concurrency, resend=True, answered=answered))
        await kill_now.wait()
        old = sidecar.proc
        info["answered_at_kill"] = model_t.answered + tool_t.answered
        info["in_flight_at_kill"] = model_t.calls + tool_t.calls - info["answered_at_kill"]
        os.kill(old.pid, signal.SIGKILL)
        killed = time.monotonic()
        await asyncio.to_thread(old.popen.wait, 10)
        info["restart_s"] = round(sidecar.start(), 2)
        info["serving_again_s"] = round(time.monotonic() - killed, 2)  # kill -9 to a health check answered
        await running
    wall = time.monotonic() - t0
    notes = fakes.notes()
    twice = sum(k - 1 for k in notes["repeated"].values())
    tally = Tally(
        calls=model_t.calls + tool_t.calls,
        ok=model_t.ok + tool_t.ok,
        failed=Counter({f"model {k}": v for k, v in model_t.failed.items()})
        + Counter({f"tool {k}": v for k, v in tool_t.failed.items()}),
        lost=model_t.lost + tool_t.lost,
        attempts=model_t.attempts + tool_t.attempts,
    )
    return row(
        "kill",
        tally,
        wall,
        (rss0, rss_mb(sidecar.proc)),
        resent=model_t.resent + tool_t.resent,
        sent_twice=twice,
        notes=(
            f"kill -9 with {info['answered_at_kill']} of {len(calls)} answered, {info['in_flight_at_kill']} "
            f"in flight; serving again {info['serving_again_s']} s after the kill; re-sent: model {model_t.resent}, "
            f"tool {tool_t.resent}; texts received twice: {twice}"
        ),
        extra={**info, "model": model_t.to_json(), "tool": tool_t.to_json(), "backend": notes},
    )


PHASE_FUNCS = {"model": phase_model, "tool": phase_tool, "drain": phase_drain, "kill": phase_kill}


# --------------------------------------------------------------------------- report


def table(rows: list[Row]) -> str:
    head = ("phase", "calls", "ok", "failed", "lost", "re-sent", "sent twice", "upstream", "wall s", "RSS MiB")

    def dash(v: int | None) -> str:
        return "-" if v is None else str(v)

    lines = [head]
    for r in rows:
        lines.append(
            (
                r.phase,
                str(r.calls),
                str(r.ok),
                str(sum(r.failed.values())),
                str(r.lost),
                dash(r.resent),
                dash(r.sent_twice),
                str(r.upstream),
                f"{r.wall_s:.1f}",
                f"{r.rss_before_mb:.0f} -> {r.rss_after_mb:.0f}",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = [
        "  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(line, widths, strict=True)))
        for line in lines
    ]
    out.insert(1, "  ".join("-" * w for w in widths))
    out.append("")
    for r in rows:
        failed = ", ".join(f"{k} {v}" for k, v in r.failed.items()) or "none"
        out.append(f"{r.phase}: failed by code/kind: {failed}")
        if r.notes:
            out.append(f"{' ' * len(r.phase)}  {r.notes}")
    return "\n".join(out)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=CALLS, help=f"calls of the model and tool phases (default {CALLS})")
    ap.add_argument("--concurrency", type=int, default=CONCURRENCY, help=f"calls in flight (default {CONCURRENCY})")
    ap.add_argument("--drain", type=int, default=DRAIN_CALLS, help=f"calls in flight at SIGTERM ({DRAIN_CALLS})")
    ap.add_argument("--only", default=",".join(PHASES), help=f"comma-separated subset of {','.join(PHASES)}")
    args = ap.parse_args(argv)
    args.only = [p for p in args.only.split(",") if p]
    if set(args.only) - set(PHASES):
        ap.error(f"unknown phases: {', '.join(sorted(set(args.only) - set(PHASES)))}")
    return args


async def run_phases(args: argparse.Namespace, fakes: Fakes, sidecar: Sidecar) -> list[Row]:
    rows: list[Row] = []
    for name in args.only:
        if sidecar.proc is None or not sidecar.proc.alive():
            sidecar.start()
        say(f"phase {name}")
        r = await PHASE_FUNCS[name](args, fakes, sidecar)
        say(f"phase {name}: {r.ok}/{r.calls} ok, {sum(r.failed.values())} failed, {r.lost} lost, {r.wall_s} s")
        rows.append(r)
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    RAW.mkdir(parents=True, exist_ok=True)
    started = time.time()
    loadavg_before = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    fakes = start_fakes()
    port = free_port()
    sidecar = Sidecar(write_config(port, fakes), port, "sk-soak-" + secrets.token_hex(12))
    rows: list[Row] = []
    try:
        rows = asyncio.run(run_phases(args, fakes, sidecar))
    finally:
        sidecar.stop()
        fakes.stop()
    machine = machine_info()
    loadavg_after = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    report = table(rows) + (
        f"\n\nmachine: {machine['cpus']} cores ({machine['cpu_model']}), Python {machine['python']}, "
        f"commit {machine['git_commit']}; load average {loadavg_before} before, {loadavg_after} after"
    )
    print("\n" + report, flush=True)
    out = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started)),
        "wall_s": round(time.time() - started, 1),
        "args": dict(vars(args)),
        "machine": machine,
        "loadavg_before": loadavg_before,
        "loadavg_after": loadavg_after,
        "rows": [asdict(r) for r in rows],
        "table": report,
    }
    (RESULTS / "soak.json").write_text(json.dumps(out, indent=2))
    say(f"wrote {RESULTS / 'soak.json'} ({out['wall_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
