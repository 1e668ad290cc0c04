"""Does the sidecar's own overhead figure agree with the latency it adds? One run, ratios.

    .venv/bin/python bench/overhead.py [--calls 300] [--rounds 5] [--concurrency 1] [--nice 0]

One fake provider (``python -m sidecar fake-provider``) and one sidecar (a model on it, the HTTP
port, the Prometheus port). Each round, for each door, ``--calls`` pairs, call by call: a direct
call, then the door's, then a direct one... (so whatever the machine does meets both alike):

    direct     POST /v1/chat/completions to the fake provider itself (httpx)
    http       the same body to the sidecar's Chat Completions front (httpx): x-sidecar-overhead-ms
    grpc       CallModel (grpc.aio): the x-sidecar-overhead-ms trailer

*added, raw* is the door's mean latency less the direct calls'. The two sides' clients differ at
the gRPC door (grpc.aio's C core against httpx, whose Python costs about 2 ms of CPU a call more
on the loaded 2-core machine), so *added* takes each side's client out: per call, the CPU time the
bench process spent in it (``time.process_time``; at c=1 it does nothing else) is subtracted from
its latency. Reported per round: the mean of x-sidecar-overhead-ms, the mean of
``sidecar.overhead.duration`` from the scrape (its _sum / _count deltas), each as a ratio of
*added*; the 1-minute load average; and the time the sidecar's, the fake's and the bench's
threads waited on a run queue per pair (``/proc/PID/task/*/schedstat``): on a busy machine each
wakeup of the sidecar (the request's bytes in, the upstream's reply in) waits for a CPU, time in
*added* that no stopwatch of the sidecar can see.

Results: ``bench/results/overhead.json``. Short by design: the machine may be shared.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import httpx
import yaml
from sidecar_client import pb, user
from sidecar_contract.v1 import sidecar_pb2_grpc as pb_grpc

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "overhead.json"
KEY = "sk-bench-0123456789abcdef"
HEADER = "x-sidecar-overhead-ms"
BODY = {"model": "gpt", "messages": [{"role": "user", "content": "hello"}]}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(fake: str, prom: int) -> dict[str, Any]:
    return {
        "server": {"listen": f"127.0.0.1:{_port()}", "max_in_flight": 1024},
        "http": {"listen": f"127.0.0.1:{_port()}", "mcp": False},
        "providers": {"oai": {"wire_format": "openai", "base_url": fake + "/v1", "api_key": "${BENCH_KEY}"}},
        "models": {
            "gpt": {"provider": "oai", "upstream_model": "fake", "context_window": 8000, "max_output_tokens": 256}
        },
        "telemetry": {"log_level": "WARNING", "prometheus_port": prom},
    }


def _runq_s(pid: int) -> float:
    """Seconds the process's threads have waited on a run queue, runnable but not run (schedstat)."""
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended meanwhile
    return total / 1e9


def _histogram(scrape: str, door: str) -> tuple[float, float]:
    """sidecar_overhead_duration_seconds _sum and _count of one door (every model summed)."""
    total = count = 0.0
    for line in scrape.splitlines():
        if not line.startswith("sidecar_overhead_duration_seconds_") or f'sidecar_door="{door}"' not in line:
            continue
        value = float(line.rsplit(" ", 1)[1])
        if line.startswith("sidecar_overhead_duration_seconds_sum"):
            total += value
        elif line.startswith("sidecar_overhead_duration_seconds_count"):
            count += value
    return total, count


class _Timed:
    """One kind of call's samples: latency, the bench process's CPU time in it, the header's value."""

    def __init__(self) -> None:
        self.latency: list[float] = []
        self.client_cpu: list[float] = []
        self.overhead_ms: list[float] = []

    def add(self, wall: float, cpu: float) -> None:
        self.latency.append(wall)
        self.client_cpu.append(cpu)


async def _timed(kind: _Timed, call: Callable[[], Awaitable[str | None]]) -> None:
    """One call, its wall time and the CPU time the bench process spent in it (its client's work)."""
    cpu, start = time.process_time(), time.perf_counter()
    header = await call()
    kind.add(time.perf_counter() - start, time.process_time() - cpu)
    if header is not None:
        kind.overhead_ms.append(float(header))


async def _paired(
    direct: str, door: str, target: str, calls: int, concurrency: int, headers: dict[str, str]
) -> tuple[_Timed, _Timed]:
    """``calls`` pairs: each worker sends a direct call, then the door's, then a direct one, ... (at c=1 the
    two alternate call by call, so whatever the machine does meets both alike)."""
    base, through = _Timed(), _Timed()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with (
        httpx.AsyncClient(limits=limits, timeout=60) as plain,
        httpx.AsyncClient(limits=limits, timeout=60) as front,
        grpc.aio.insecure_channel(target) as channel,
    ):
        stub = pb_grpc.SidecarStub(channel)

        async def straight() -> str | None:
            (await plain.post(direct, json=BODY, headers=headers)).raise_for_status()
            return None

        async def http() -> str | None:
            r = await front.post(door, json=BODY, headers=headers)
            r.raise_for_status()
            return r.headers.get(HEADER)

        async def rpc() -> str | None:
            call = stub.CallModel(pb.CallModelRequest(model="gpt", messages=[user("hello")]), timeout=60)
            await call
            return dict(await call.trailing_metadata() or ()).get(HEADER)

        through_call = http if door else rpc
        left = [calls]

        async def worker() -> None:
            while left[0] > 0:
                left[0] -= 1
                await _timed(base, straight)
                await _timed(through, through_call)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return base, through


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--concurrency", default="1")
    ap.add_argument(
        "--nice",
        type=int,
        default=0,
        help="the niceness of the bench, the fake and the sidecar (inherited); below 0 (root), other work's "
        "processes no longer keep them waiting for a CPU when they wake",
    )
    args = ap.parse_args(argv)
    if args.nice:
        os.setpriority(os.PRIO_PROCESS, 0, args.nice)
    levels = [int(c) for c in args.concurrency.split(",")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update({"BENCH_KEY": KEY, "OTEL_TRACES_EXPORTER": "none"})
    fake_port, prom = _port(), _port()
    fake_url = f"http://127.0.0.1:{fake_port}"
    fake = subprocess.Popen(
        [sys.executable, "-m", "sidecar", "fake-provider", "--port", str(fake_port)], stdout=subprocess.DEVNULL
    )
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        cfg = _config(fake_url, prom)
        path = Path(tmp) / "sidecar.yaml"
        path.write_text(yaml.safe_dump(cfg))
        proc = subprocess.Popen(
            [sys.executable, "-m", "sidecar", "serve", "--config", str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        try:
            assert proc.stdout is not None
            address = proc.stdout.readline().split("listening on ")[1].split()[0]
            front = "http://" + cfg["http"]["listen"] + "/v1/chat/completions"
            direct = fake_url + "/v1/chat/completions"
            auth = {"authorization": f"Bearer {KEY}"}
            scrape_url = f"http://127.0.0.1:{prom}/metrics"
            pids = [proc.pid, fake.pid, os.getpid()]
            for door in ("http", "grpc"):  # warm up: connections, caches
                asyncio.run(_paired(direct, front if door == "http" else "", address, 100, 1, auth))
            for c in levels:
                for _ in range(args.rounds):
                    for door in ("http", "grpc"):
                        before = _histogram(httpx.get(scrape_url, timeout=5).text, door)
                        load = float(Path("/proc/loadavg").read_text().split()[0])
                        waited = [_runq_s(p) for p in pids]
                        base, through = asyncio.run(
                            _paired(direct, front if door == "http" else "", address, args.calls, c, auth)
                        )
                        waited = [_runq_s(p) - w for p, w in zip(pids, waited, strict=True)]
                        after = _histogram(httpx.get(scrape_url, timeout=5).text, door)
                        row = _row(door, c, args.calls, base, through, before, after)
                        row["loadavg_1m"] = load
                        for name, w in zip(("sidecar", "fake", "bench"), waited, strict=True):
                            row[f"{name}_runq_ms_per_pair"] = w / args.calls * 1000
                        rows.append(row)
        finally:
            proc.terminate()
            proc.wait(30)
            fake.terminate()
            fake.wait(30)
    summary = _summary(rows, levels)
    RESULTS.write_text(json.dumps({"rounds": args.rounds, "rows": rows, "summary": summary}, indent=2) + "\n")
    print(
        "| door | conc. | added ms, raw | added ms, clients' CPU out | header mean ms | histogram mean ms |"
        " header ÷ added (median of rounds) | rounds | histogram ÷ added |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for s in summary:
        rounds = ", ".join(f"{x:.2f}" for x in s["header_ratios"])
        print(
            f"| {s['door']} | {s['concurrency']} | {s['added_raw_ms']:.3f} | {s['added_ms']:.3f} | "
            f"{s['header_mean_ms']:.3f} | {s['histogram_mean_ms']:.3f} | {s['header_ratio']:.2f} | {rounds} | "
            f"{s['histogram_ratio']:.2f} |"
        )
    return 0


def _row(
    door: str,
    c: int,
    calls: int,
    base: _Timed,
    through: _Timed,
    before: tuple[float, float],
    after: tuple[float, float],
) -> dict[str, Any]:
    """One round of one door: the means, the added latency raw and with each side's client CPU taken out."""
    count = after[1] - before[1]
    direct_ms, door_ms = statistics.fmean(base.latency) * 1000, statistics.fmean(through.latency) * 1000
    direct_cpu, door_cpu = statistics.fmean(base.client_cpu) * 1000, statistics.fmean(through.client_cpu) * 1000
    return {
        "door": door,
        "concurrency": c,
        "calls": calls,
        "direct_mean_ms": direct_ms,
        "door_mean_ms": door_ms,
        "direct_client_cpu_ms": direct_cpu,
        "door_client_cpu_ms": door_cpu,
        "added_raw_ms": door_ms - direct_ms,
        "added_ms": (door_ms - door_cpu) - (direct_ms - direct_cpu),
        "header_mean_ms": statistics.fmean(through.overhead_ms) if through.overhead_ms else None,
        "header_count": len(through.overhead_ms),
        "histogram_mean_ms": (after[0] - before[0]) / count * 1000 if count else None,
        "histogram_count": count,
    }


def _summary(rows: list[dict[str, Any]], levels: list[int]) -> list[dict[str, Any]]:
    """Per door and concurrency: the ratios of each round, their median and range, and the medians."""
    out: list[dict[str, Any]] = []
    for door in ("http", "grpc"):
        for c in levels:
            mine = [r for r in rows if r["door"] == door and r["concurrency"] == c]
            ratios = [(r["header_mean_ms"] or 0.0) / r["added_ms"] for r in mine if r["added_ms"] > 0]
            hist = [(r["histogram_mean_ms"] or 0.0) / r["added_ms"] for r in mine if r["added_ms"] > 0]
            out.append(
                {
                    "door": door,
                    "concurrency": c,
                    "added_raw_ms": statistics.median(r["added_raw_ms"] for r in mine),
                    "added_ms": statistics.median(r["added_ms"] for r in mine),
                    "header_mean_ms": statistics.median(r["header_mean_ms"] or 0.0 for r in mine),
                    "histogram_mean_ms": statistics.median(r["histogram_mean_ms"] or 0.0 for r in mine),
                    "header_ratio": statistics.median(ratios) if ratios else float("nan"),
                    "header_ratios": ratios,
                    "histogram_ratio": statistics.median(hist) if hist else float("nan"),
                }
            )
    return out


if __name__ == "__main__":
    raise SystemExit(main())
