"""The fleet's numbers (docs/fleet.md): propagation between replicas, and the CPU the redis backend adds.

    .venv/bin/python bench/fleet.py propagation [--trials 100]
        two processes on one redis-server: A's core raises a 429 pause (ModelThrottle.signal) and
        opens a circuit (ServiceGuard.failure), B's local view applies what arrives; the time from
        A's publish to B's refusal (CLOCK_MONOTONIC, the same on one machine), p50 / p95 / max
    .venv/bin/python bench/fleet.py cpu [--calls 1000]
        one `sidecar serve` process against a fake provider process; the server's CPU time
        (/proc/PID/stat, user + system) for N sequential CallModel, memory vs redis, with and
        without a spend cap (a cap publishes every call's cost)

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
    args = parser.parse_args()
    if args.what == "propagation":
        propagation(args.trials)
    else:
        cpu(args.calls, args.rounds)


if __name__ == "__main__":
    main()
