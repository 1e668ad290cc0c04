"""The fleet's numbers (docs/fleet.md): propagation between replicas, and the CPU the redis backend adds.

    .venv/bin/python bench/fleet.py propagation [--trials 100]
        two processes on one redis-server: A's core raises a 429 pause (ModelThrottle.signal) and
        opens a circuit (ServiceGuard.failure), B's local view applies what arrives; the time from
        A's publish to B's refusal (CLOCK_MONOTONIC, the same on one machine), p50 / p95 / max
    .venv/bin/python bench/fleet.py cpu [--calls 1000]
        one `sidecar serve` process against a fake provider process; the server's CPU time
        (/proc/PID/stat, user + system) for N sequential CallModel, memory vs redis, with and
        without a spend cap (a cap publishes every call's cost)
    .venv/bin/python bench/fleet.py cost [--calls 200] [--idle-s 10] [--url redis://... | --cluster]
        what the fleet costs Redis (issue 39 part 3), one `sidecar serve` on redis (through a counting
        proxy, tests/redis_proxy.py), one on the same redis directly, one on memory, the same fakes
        behind all three:
          per kind of call (CallModel, CallModel with a spend cap, ExecuteTool, a run-once ExecuteTool)
            commands    INFO commandstats over N sequential calls (a script's inner commands counted,
                        as Redis counts them), less what the replicas' heartbeats took meanwhile
            trips       round trips the proxy forwarded (the proxied sidecar), heartbeats and the
                        subscriber set apart
            on path     round trips the call awaits: its latency with every trip held HOLD_S, // HOLD_S
            latency     p50 of N calls on redis (direct) and on memory, taken in turns (one run,
                        paired): their ratio, and the median of the pairs' differences in ms
          an idle replica: commands and round trips a second over --idle-s
        the figures also go to bench/results/fleet_cost.json
    .venv/bin/python bench/fleet.py capacity [--requests 100000] [--subscribers 200]
        what one Redis shard takes of the fleet's own operations: redis-benchmark (50 clients, no
        pipelining, as replicas send them) of each script and command a call or a replica sends, and
        a PUBLISH with N subscribers; per operation the rate (wall clock: the machine's load shows) and
        the operations per CPU-second of redis-server (/proc: what a core of its own would take)

Needs redis-server on PATH (`make redis-server`). Not part of `make test`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _redis() -> tuple[subprocess.Popen[bytes], str]:
    port = _port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    time.sleep(0.3)
    return proc, f"redis://127.0.0.1:{port}/0"


# ---------------------------------------------------------------------------------- propagation


async def _receiver(url: str, prefix: str) -> None:
    """B: a replica's view; prints when each change has made it refuse."""
    from sidecar.core.clock import RealClock
    from sidecar.core.fleet_view import FleetView
    from sidecar.core.model_throttle import ModelThrottle
    from sidecar.core.service_guards import ServiceGuards
    from sidecar.core.settings import CircuitConfig
    from sidecar.core.spend import SpendLedger
    from sidecar.state.redis import RedisState

    clock = RealClock()
    models = {f"m{i}": ModelThrottle(f"m{i}", clock) for i in range(1000)}
    guards = ServiceGuards({}, CircuitConfig(), clock, [f"s{i}" for i in range(1000)])
    state = RedisState(url, prefix, 50)
    view = FleetView(models, guards, SpendLedger({}))

    class Timed:
        def apply(self, change: Any) -> None:
            view.apply(change)
            now = time.monotonic()
            name = getattr(change, "model", None) or getattr(change, "service", None)
            if name and name.startswith("m") and models[name].pause_left() > 0:
                print(f"pause {name} {now:.9f}", flush=True)
            elif name and name.startswith("s") and guards.get(name).refusal() is not None:
                print(f"open {name} {now:.9f}", flush=True)

        def snapshot(self) -> list[Any]:
            return []

    await state.start(Timed())
    print("ready", flush=True)
    await asyncio.sleep(3600)


async def _sender(url: str, prefix: str, trials: int) -> dict[str, float]:
    from sidecar.core.clock import RealClock
    from sidecar.core.details import Trigger
    from sidecar.core.kinds import RetrySignal
    from sidecar.core.model_throttle import ModelThrottle
    from sidecar.core.service_guards import ServiceGuards
    from sidecar.core.settings import CircuitConfig
    from sidecar.state.redis import RedisState

    clock = RealClock()
    state = RedisState(url, prefix, 50)

    class Nothing:
        def apply(self, change: Any) -> None:
            pass

        def snapshot(self) -> list[Any]:
            return []

    await state.start(Nothing())
    circuit = CircuitConfig(max_throttle=1.0, failures_to_open=1)
    guards = ServiceGuards({}, circuit, clock, [f"s{i}" for i in range(trials)], state=state)
    sent: dict[str, float] = {}
    for i in range(trials):
        throttle = ModelThrottle(f"m{i}", clock)
        throttle.share(state)
        ticket = throttle.reserve()
        await throttle.wait(ticket)
        sent[f"pause m{i}"] = time.monotonic()
        throttle.signal(ticket, RetrySignal.RATE_LIMIT, 30.0)  # publishes the raise and the pause
        guard = guards.get(f"s{i}")
        guard.failure(None, Trigger(500, "down"), None)
        sent[f"open s{i}"] = time.monotonic()
        guard.failure(None, Trigger(500, "down"), None)  # the second at max: opens, published
        await asyncio.sleep(0.02 + random.random() * 0.01)
    await asyncio.sleep(1.0)
    await state.close()
    return sent


def propagation(trials: int) -> None:
    redis, url = _redis()
    prefix = f"bench{os.getpid()}"
    try:
        receiver = subprocess.Popen(
            [sys.executable, __file__, "_receive", url, prefix], stdout=subprocess.PIPE, text=True
        )
        assert receiver.stdout is not None
        assert receiver.stdout.readline().strip() == "ready"
        lines: list[str] = []

        def read() -> None:
            assert receiver.stdout is not None
            lines.extend(receiver.stdout)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        sent = asyncio.run(_sender(url, prefix, trials))
        receiver.terminate()
        reader.join(5)
    finally:
        redis.terminate()
    got: dict[str, list[float]] = {"pause": [], "open": []}
    for line in lines:
        kind, name, at = line.split()
        if f"{kind} {name}" in sent:
            got[kind].append((float(at) - sent.pop(f"{kind} {name}")) * 1000)
    for kind, values in got.items():
        values.sort()
        p95 = values[int(len(values) * 0.95) - 1] if values else float("nan")
        print(
            f"{kind:6} n={len(values)}  p50={statistics.median(values):.2f} ms  "
            f"p95={p95:.2f} ms  max={max(values):.2f} ms"
        )


# ---------------------------------------------------------------------------------- cpu


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime


def _serve(config: dict[str, Any], tmp: Path) -> tuple[subprocess.Popen[str], str]:
    path = tmp / f"cfg{random.random()}.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.Popen(
        [sys.executable, "-m", "sidecar", "serve", "--config", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "BENCH_KEY": "sk-bench-0123456789abcdef", "OTEL_SDK_DISABLED": "true"},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    return proc, line.split("listening on ")[1].split()[0]


def cpu(calls: int, rounds: int) -> None:
    from sidecar_client import SidecarClient, pb, user

    redis, url = _redis()
    fake_port = _port()
    fake = subprocess.Popen(
        [sys.executable, "-m", "sidecar", "fake-provider", "--port", str(fake_port)], stdout=subprocess.DEVNULL
    )
    time.sleep(1.0)
    results: dict[str, list[float]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(rounds):
                for label, state, caps in (
                    ("memory", {"backend": "memory"}, {}),
                    ("redis", {"backend": "redis", "url": url, "prefix": "cpu"}, {}),
                    ("memory+cap", {"backend": "memory"}, {"*": 1e9}),
                    ("redis+cap", {"backend": "redis", "url": url, "prefix": "cpu"}, {"*": 1e9}),
                ):
                    cfg = {
                        "server": {"listen": f"127.0.0.1:{_port()}"},
                        "policy": {"spend_caps": caps},
                        "state": state,
                        "providers": {
                            "p": {
                                "wire_format": "openai",
                                "base_url": f"http://127.0.0.1:{fake_port}/v1",
                                "api_key": "${BENCH_KEY}",
                            }
                        },
                        "models": {
                            "m": {
                                "provider": "p",
                                "upstream_model": "fake",
                                "context_window": 8000,
                                "max_output_tokens": 256,
                                "input_price_per_mtok": 1.0,
                                "output_price_per_mtok": 1.0,
                            }
                        },
                        "telemetry": {"log_level": "WARNING"},
                    }
                    proc, address = _serve(cfg, Path(tmp))
                    try:
                        with SidecarClient(address) as client:
                            for _ in range(50):  # warm up: connections, caches
                                client.call_model("m", [user("warm")], timeout=10)
                            before = _cpu_seconds(proc.pid)
                            for i in range(calls):
                                job = pb.Job(workflow_id=f"wf{i % 10}")
                                client.call_model("m", [user("hello")], job=job, timeout=10)
                            results.setdefault(label, []).append((_cpu_seconds(proc.pid) - before) * 1000 / calls)
                    finally:
                        proc.terminate()
                        proc.wait(30)
    finally:
        fake.terminate()
        redis.terminate()
    for label, values in results.items():
        print(
            f"{label:11} CPU per 1,000 CallModel: median {statistics.median(values) * 1000:.0f} ms "
            f"(rounds: {', '.join(f'{v * 1000:.0f}' for v in values)})"
        )


# ---------------------------------------------------------------------------------- cost

COST_OUT = ROOT / "bench" / "results" / "fleet_cost.json"
HOLD_S = 0.25
"""The on-path measure: every round trip held this long (a call without Redis takes a few ms)."""
KINDS = ("CallModel", "CallModel, spend cap", "ExecuteTool", "ExecuteTool, run once")
_BEAT = {"zadd", "zremrangebyscore", "pexpire", "zcard"}
"""The heartbeat script's inner commands (and one EVALSHA per beat): a replica's, not a call's."""


def _commandstats(client: Any) -> dict[str, int]:
    """Calls per command; on a cluster, summed over its primaries (a replica's replayed writes not counted)."""
    import redis as redis_py

    if isinstance(client, redis_py.RedisCluster):
        per_node = client.info("commandstats", target_nodes=redis_py.RedisCluster.PRIMARIES)
        out: dict[str, int] = {}
        for stats in per_node.values():
            for k, v in stats.items():
                name = k.removeprefix("cmdstat_").lower()
                out[name] = out.get(name, 0) + int(v["calls"])
        return out
    stats = client.info("commandstats")
    return {k.removeprefix("cmdstat_").lower(): int(v["calls"]) for k, v in stats.items()}


def _less(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: n - before.get(k, 0) for k, n in after.items() if n - before.get(k, 0) > 0 and k != "info"}


def _cost_config(fake_port: int, tools_port: int, state: dict[str, Any]) -> dict[str, Any]:
    tools = f"http://127.0.0.1:{tools_port}"
    return {
        "server": {"listen": f"127.0.0.1:{_port()}"},
        "policy": {"spend_caps": {"capped": 1e9}},
        "state": state,
        "providers": {
            "p": {"wire_format": "openai", "base_url": f"http://127.0.0.1:{fake_port}/v1", "api_key": "${BENCH_KEY}"}
        },
        "models": {
            "m": {
                "provider": "p",
                "upstream_model": "fake",
                "context_window": 8000,
                "max_output_tokens": 256,
                "input_price_per_mtok": 1.0,
                "output_price_per_mtok": 1.0,
            }
        },
        "tools": {
            "fetch": {
                "description": "a document",
                "kind": "fetch",
                "service": "docs",
                "url": tools + "/docs/{id}",
                "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            },
            "note": {
                "description": "a note (not idempotent: run once)",
                "kind": "fetch",
                "service": "notes",
                "method": "POST",
                "url": tools + "/notes",
                "body": "arguments",
                "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            },
        },
        "telemetry": {"log_level": "WARNING"},
    }


def _one(client: Any, kind: str, i: int, run: str) -> None:
    from sidecar_client import job, user

    if kind == "CallModel":
        reply = client.call_model("m", [user(f"hello {i}")], job=job("j-free"), timeout=10)
        assert reply.HasField("message"), reply
    elif kind == "CallModel, spend cap":
        reply = client.call_model("m", [user(f"hello {i}")], job=job("j-cap", "capped"), timeout=10)
        assert reply.HasField("message"), reply
    elif kind == "ExecuteTool":
        out = client.execute_tool("fetch", {"id": "doc-1"}, timeout=10)
        assert out.WhichOneof("outcome") == "result", out
    else:
        out = client.execute_tool("note", {"text": f"n{i}"}, call_id=f"{run}-{i}", job=job("j-once"), timeout=10)
        assert out.WhichOneof("outcome") == "result", out


def cost(calls: int, idle_s: float, url: str | None, out: Path, cluster: bool = False) -> None:
    import json
    from concurrent.futures import ThreadPoolExecutor

    import redis as redis_py
    from sidecar_client import SidecarClient

    from tests.redis_proxy import RedisProxy

    own: Any = None
    nodes: list[str] = []
    if cluster:  # three primaries, three replicas (tests/redis_cluster.py); the proxy stays on a single Redis
        from tests.redis_cluster import Cluster

        own = Cluster(Path(tempfile.mkdtemp(prefix="fleet-cost-cluster-"))).start()
        url, nodes = own.url, own.addresses[1:]
        direct: Any = own.client()
        single, single_url = _redis()
    else:
        if url is None:
            own, url = _redis()
        direct = redis_py.Redis.from_url(url)
        single, single_url = None, url
    port = int(single_url.rsplit(":", 1)[1].split("/")[0])
    proxy = RedisProxy(port).start()
    fake_port, tools_port = _port(), _port()
    fakes = [
        subprocess.Popen([sys.executable, "-m", "sidecar", what, "--port", str(p)], stdout=subprocess.DEVNULL)
        for what, p in (("fake-provider", fake_port), ("tool-backend", tools_port))
    ]
    time.sleep(1.0)
    version = redis_py.Redis.from_url(single_url).info("server")["redis_version"]
    result: dict[str, Any] = {"calls": calls, "redis": version, "mode": "cluster" if cluster else "single", "kinds": {}}
    run = f"r{random.getrandbits(32):08x}"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            direct_state: dict[str, Any] = {"backend": "redis", "url": url, "prefix": f"cost{run}", "timeout_ms": 1000}
            proxied = {**direct_state, "url": proxy.url, "prefix": f"costp{run}"}
            if cluster:
                direct_state.update(mode="cluster", nodes=nodes)
            mem, mem_addr = _serve(_cost_config(fake_port, tools_port, {"backend": "memory"}), Path(tmp))
            red, red_addr = _serve(_cost_config(fake_port, tools_port, direct_state), Path(tmp))
            prx, prx_addr = _serve(_cost_config(fake_port, tools_port, proxied), Path(tmp))
            try:
                with (
                    SidecarClient(mem_addr) as m_client,
                    SidecarClient(red_addr) as r_client,
                    SidecarClient(prx_addr) as p_client,
                ):
                    with ThreadPoolExecutor(8) as pool:  # warm: scripts loaded, 8 pooled connections
                        for kind in KINDS:
                            for tag, c in (("r", r_client), ("m", m_client), ("p", p_client)):
                                list(pool.map(lambda i, k=kind, c=c, t=tag: _one(c, k, -1 - i, run + t), range(8)))
                    time.sleep(1.0)
                    before, start = _commandstats(direct), time.monotonic()
                    time.sleep(idle_s)
                    idle = _less(_commandstats(direct), before)
                    span = time.monotonic() - start
                    shared = 1 if cluster else 2  # replicas idle on `direct`: the proxied one too on one Redis
                    result["idle"] = {
                        "commands_per_s": sum(idle.values()) / span / shared,
                        "commands": {k: n / span / shared for k, n in idle.items()},
                        "trips_per_s": len([t for t in proxy.trips if t.at >= start]) / span,
                    }
                    for kind in KINDS:
                        lat: dict[str, list[float]] = {"redis": [], "memory": []}
                        proxy.clear_trips()
                        before, start = _commandstats(direct), time.monotonic()
                        for i in range(calls):
                            pair = [("redis", r_client), ("memory", m_client)]
                            for name, client in pair if i % 2 else pair[::-1]:
                                t0 = time.perf_counter()
                                _one(client, kind, i, run + name[0])
                                lat[name].append((time.perf_counter() - t0) * 1000)
                        time.sleep(0.3)  # the writer's last flush
                        span = time.monotonic() - start
                        got = _less(_commandstats(direct), before)
                        beat_share = {k: shared * n for k, n in result["idle"]["commands"].items()}
                        per = {
                            k: max(n - beat_share.get(k, 0.0) * span, 0.0) / calls
                            for k, n in got.items()
                            if k not in _BEAT or n - beat_share.get(k, 0.0) * span > calls / 10
                        }
                        per = {k: round(v, 2) for k, v in per.items() if round(v, 2) > 0}
                        proxy.clear_trips()
                        for i in range(calls):  # the same calls through the proxy: their round trips
                            _one(p_client, kind, i, run + "p")
                        time.sleep(0.3)
                        trips = proxy.calls_trips()
                        proxy.delay_s = HOLD_S
                        on_path = []
                        for i in range(5):
                            time.sleep(HOLD_S * 2)
                            t0 = time.monotonic()
                            _one(p_client, kind, 10_000 + i, run + "h")
                            on_path.append(int((time.monotonic() - t0) // HOLD_S))
                        proxy.delay_s = 0.0
                        p_r, p_m = statistics.median(lat["redis"]), statistics.median(lat["memory"])
                        result["kinds"][kind] = {
                            "commands_per_call": per,
                            "commands_total_per_call": round(sum(per.values()), 2),
                            "trips_per_call": round(len(trips) / calls, 2),
                            "trips_on_path": max(on_path),
                            "p50_ms_redis": round(p_r, 3),
                            "p50_ms_memory": round(p_m, 3),
                            "added_ms": round(
                                statistics.median(a - b for a, b in zip(lat["redis"], lat["memory"], strict=True)), 3
                            ),
                            "ratio": round(p_r / p_m, 3),
                        }
            finally:
                for proc in (prx, red, mem):
                    proc.terminate()
                    proc.wait(30)
    finally:
        proxy.stop()
        for proc in fakes:
            proc.terminate()
        if cluster:
            own.stop()
            single.terminate()
        elif own is not None:
            own.terminate()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"redis-server {result['redis']} ({result['mode']}), {calls} calls of each kind, sequential")
    print(f"{'call':24} {'commands':>8} {'trips':>6} {'on path':>7} {'p50 redis':>10} {'p50 memory':>10} {'added':>8}")
    for kind, k in result["kinds"].items():
        print(
            f"{kind:24} {k['commands_total_per_call']:8.2f} {k['trips_per_call']:6.2f} {k['trips_on_path']:7d} "
            f"{k['p50_ms_redis']:8.2f}ms {k['p50_ms_memory']:8.2f}ms {k['added_ms']:+6.2f}ms  x{k['ratio']:.3f}  "
            + " ".join(f"{c}={n:g}" for c, n in sorted(k["commands_per_call"].items()))
        )
    idle_row = result["idle"]
    print(
        f"idle replica: {idle_row['commands_per_s']:.2f} commands/s, {idle_row['trips_per_s']:.2f} round trips/s "
        f"({', '.join(f'{c}={n:.2f}' for c, n in sorted(idle_row['commands'].items()))})"
    )


# ---------------------------------------------------------------------------------- capacity


def capacity(requests: int, subscribers: int) -> None:
    import contextlib
    import json

    import redis as redis_py

    from sidecar.state.redis import scripts

    proc, url = _redis()
    port = url.rsplit(":", 1)[1].split("/")[0]
    client = redis_py.Redis.from_url(url)
    sha = {n: client.script_load(getattr(scripts, n)) for n in ("SPEND", "CALL_CLAIM", "HEARTBEAT")}
    outcome = 'o{"v": 1, "a": 1, "r": {"$d": "ToolResult", "content": "{\\"id\\": \\"note-1\\"}"}}'
    keys = ["b:spend:wf", "b:slife:wf"]
    spend = ["b:none", "r", "wf", "1e7", "1e9", "l1"]  # step, cap (no publish: its fan-out is measured apart), life
    claim = ["b:replicas", 'i{"r": "x", "w": 1}', "600000"]
    message = '{"o": "r", "k": "spend", "n": "wf", "usd": 1}'
    ops: dict[str, list[str]] = {
        "SET (a plain command)": ["SET", "b:k:__rand_int__", "v"],
        "SPEND (a capped call's cost)": ["EVALSHA", sha["SPEND"], "2", *keys, "0.001", "604800000", *spend],
        "CALL_CLAIM (a run-once claim)": ["EVALSHA", sha["CALL_CLAIM"], "2", "b:call:__rand_int__", *claim],
        "SET outcome (a run-once outcome)": ["SET", "b:call:__rand_int__", outcome, "PX", "600000"],
        "HEARTBEAT (a replica, 1/s)": ["EVALSHA", sha["HEARTBEAT"], "1", "b:replicas", "r__rand_int__", "3000"],
        f"PUBLISH to {subscribers} subscribers": ["PUBLISH", "b:events", message],
    }
    listeners: list[socket.socket] = []
    results: dict[str, Any] = {"redis": client.info("server")["redis_version"], "requests": requests, "ops": {}}
    stop = threading.Event()
    try:
        for _ in range(subscribers):
            s = socket.create_connection(("127.0.0.1", int(port)))
            s.sendall(b"*2\r\n$9\r\nSUBSCRIBE\r\n$8\r\nb:events\r\n")
            s.setblocking(False)
            listeners.append(s)

        def drain() -> None:
            import selectors

            sel = selectors.DefaultSelector()
            for s in listeners:
                sel.register(s, selectors.EVENT_READ)
            while not stop.is_set():
                for key, _ in sel.select(0.1):
                    with contextlib.suppress(BlockingIOError):
                        key.fileobj.recv(1 << 16)  # type: ignore[union-attr]

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        for name, argv in ops.items():
            n = requests // 10 if name.startswith("PUBLISH") else requests
            cpu0 = _cpu_seconds(proc.pid)
            run = subprocess.run(
                ["redis-benchmark", "-p", port, "-n", str(n), "-c", "50", "-r", "100000000", "--csv", *argv],
                capture_output=True,
                text=True,
                check=True,
            )
            used = _cpu_seconds(proc.pid) - cpu0
            row = run.stdout.strip().splitlines()[-1].strip('"').split('","')  # the test's name may hold quotes
            rps = float(row[-7])  # rps, then avg, min, p50, p95, p99, max
            results["ops"][name] = {"rps": rps, "redis_cpu_s": used, "per_cpu_s": n / used if used else None}
    finally:
        stop.set()
        for s in listeners:
            s.close()
        proc.terminate()
    out = ROOT / "bench" / "results" / "fleet_capacity.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"redis-server {results['redis']}, redis-benchmark -c 50, {requests} requests each (PUBLISH: a tenth)")
    for name, r in results["ops"].items():
        per = f"{r['per_cpu_s']:9.0f}" if r["per_cpu_s"] else "      n/a"
        print(f"{name:36} {r['rps']:9.0f} /s wall   {per} per CPU-second of redis-server")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_receive":
        asyncio.run(_receiver(sys.argv[2], sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("propagation")
    p.add_argument("--trials", type=int, default=100)
    c = sub.add_parser("cpu")
    c.add_argument("--calls", type=int, default=1000)
    c.add_argument("--rounds", type=int, default=3)
    k = sub.add_parser("cost")
    k.add_argument("--calls", type=int, default=200)
    k.add_argument("--idle-s", type=float, default=10.0)
    k.add_argument("--url", help="a running redis-server (default: one started here)")
    k.add_argument("--out", type=Path, default=COST_OUT)
    k.add_argument("--cluster", action="store_true", help="on a Redis Cluster of 3 primaries and 3 replicas")
    q = sub.add_parser("capacity")
    q.add_argument("--requests", type=int, default=100_000)
    q.add_argument("--subscribers", type=int, default=200)
    args = parser.parse_args()
    if args.what == "capacity":
        capacity(args.requests, args.subscribers)
        return
    if args.what == "propagation":
        propagation(args.trials)
    elif args.what == "cost":
        out = args.out if not args.cluster or args.out != COST_OUT else COST_OUT.with_name("fleet_cost_cluster.json")
        cost(args.calls, args.idle_s, args.url, out, cluster=args.cluster)
    else:
        cpu(args.calls, args.rounds)


if __name__ == "__main__":
    main()
