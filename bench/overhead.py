"""Does the sidecar's own overhead figure agree with the latency it adds? One run, ratios.

    .venv/bin/python bench/overhead.py [--calls 300] [--rounds 5] [--concurrency 1] [--nice 0] [--out PATH]

One fake provider (``python -m sidecar fake-provider``), one sidecar (a model on it, the HTTP port,
the Prometheus port) and one null hop (``bench/null_hop.py``: the sidecar's own stack, both doors,
nothing but the forward, timed with the same stopwatch at the same edges). Each round, for each
door, ``--calls`` triples, call by call: a direct call, then the door's through the null hop and
through the sidecar (which first alternates), then a direct one... (so whatever the machine does
meets all alike):

    direct     POST /v1/chat/completions to the fake provider itself (httpx)
    http       the same body to the sidecar's Chat Completions front, and to the null hop's (httpx)
    grpc       CallModel (grpc.aio) to the sidecar and to the null hop: the x-sidecar-overhead-ms trailer

The baseline, the same at both doors: *added, less the hop* = the sidecar's latency over the direct
call, less what the hop costs outside the stopwatch (the null hop's latency over the direct call
less its own figure), each call's latency with the CPU time the bench process spent in it taken
out (``time.process_time``; at c=1 the bench does nothing else): that is, the sidecar's latency
over the null hop's plus the null hop's figure. The direct call cancels out of it, and so do the
clients (the null hop is called with the door's own client; what is left of them, reading the
sidecar's longer answer, is their CPU time). What the hop costs outside the clock: the kernel
both ways, the event loop's wakeup before uvicorn or gRPC hand the bytes to Python, the answer's
write syscall, the client's wakeup. The null hop's answers carry where its stopwatch began and
when it answered (``perf_counter``: CLOCK_MONOTONIC, one clock across processes): its way in and
way out (with the client's work), in the results.

Also reported: *added, raw* (the door's mean latency less the direct calls'), *added, clients' CPU
out* (the hop left in), and the time the sidecar's threads waited on a run queue over the null
hop's, per triple (``/proc/PID/task/*/schedstat``): on a busy machine the process that used more
CPU may wait longer at each wakeup (a guess: the scheduler favours sleepers), a wait outside both stopwatches
that the null hop cannot calibrate.

Per round: the mean of x-sidecar-overhead-ms, the mean of ``sidecar.overhead.duration`` from the
scrape (its _sum / _count deltas), each as a ratio of *added, less the hop*; the 1-minute load
average.

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
import null_hop
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
    """One kind of call's samples: latency, the bench process's CPU time in it, the header's value, and
    (the null hop's) the ways in and out: its arrival less the call's start, the call's end less its answer."""

    def __init__(self) -> None:
        self.latency: list[float] = []
        self.client_cpu: list[float] = []
        self.overhead_ms: list[float] = []
        self.way_in: list[float] = []
        self.way_out: list[float] = []

    def add(self, wall: float, cpu: float) -> None:
        self.latency.append(wall)
        self.client_cpu.append(cpu)


Answer = tuple[str | None, str | None, str | None]
"""What one call's answer says: x-sidecar-overhead-ms, and the null hop's x-null-arrived and x-null-answered."""


async def _timed(kind: _Timed, call: Callable[[], Awaitable[Answer]]) -> None:
    """One call, its wall time and the CPU time the bench process spent in it (its client's work)."""
    cpu, start = time.process_time(), time.perf_counter()
    header, arrived, answered = await call()
    end = time.perf_counter()
    kind.add(end - start, time.process_time() - cpu)
    if header is not None:
        kind.overhead_ms.append(float(header))
    if arrived is not None and answered is not None:
        kind.way_in.append(float(arrived) - start)
        kind.way_out.append(end - float(answered))


def _said(headers: Any) -> Answer:
    return headers.get(HEADER), headers.get(null_hop.ARRIVED), headers.get(null_hop.ANSWERED)


async def _paired(
    direct: str, doors: tuple[str, str], targets: tuple[str, str], calls: int, concurrency: int, headers: dict[str, str]
) -> tuple[_Timed, _Timed, _Timed]:
    """``calls`` triples: each worker sends a direct call, then the door's through the null hop and through
    the sidecar (in turn first), then a direct one, ... (at c=1 they alternate call by call, so whatever the
    machine does meets all alike). ``doors`` are the HTTP fronts (sidecar, null; empty: the gRPC door),
    ``targets`` the gRPC addresses (sidecar, null)."""
    base, through, hop = _Timed(), _Timed(), _Timed()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with (
        httpx.AsyncClient(limits=limits, timeout=60) as plain,
        httpx.AsyncClient(limits=limits, timeout=60) as front,
        httpx.AsyncClient(limits=limits, timeout=60) as null_front,
        grpc.aio.insecure_channel(targets[0]) as channel,
        grpc.aio.insecure_channel(targets[1]) as null_channel,
    ):
        stubs = pb_grpc.SidecarStub(channel), pb_grpc.SidecarStub(null_channel)
        request = pb.CallModelRequest(model="gpt", messages=[user("hello")])

        async def straight() -> Answer:
            (await plain.post(direct, json=BODY, headers=headers)).raise_for_status()
            return None, None, None

        def http(client: httpx.AsyncClient, url: str) -> Callable[[], Awaitable[Answer]]:
            async def call() -> Answer:
                r = await client.post(url, json=BODY, headers=headers)
                r.raise_for_status()
                return _said(r.headers)

            return call

        def rpc(stub: pb_grpc.SidecarStub) -> Callable[[], Awaitable[Answer]]:
            async def call() -> Answer:
                answer = stub.CallModel(request, timeout=60)
                await answer
                return _said(dict(await answer.trailing_metadata() or ()))

            return call

        if doors[0]:
            sidecar_call, null_call = http(front, doors[0]), http(null_front, doors[1])
        else:
            sidecar_call, null_call = rpc(stubs[0]), rpc(stubs[1])
        left = [calls]

        async def worker() -> None:
            while left[0] > 0:
                left[0] -= 1
                await _timed(base, straight)
                if left[0] % 2:
                    await _timed(hop, null_call)
                    await _timed(through, sidecar_call)
                else:
                    await _timed(through, sidecar_call)
                    await _timed(hop, null_call)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return base, through, hop


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
    ap.add_argument("--out", type=Path, default=RESULTS)
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
    null_grpc, null_http = f"127.0.0.1:{_port()}", f"127.0.0.1:{_port()}"
    hop_script = str(Path(__file__).with_name("null_hop.py"))
    null = subprocess.Popen(
        [sys.executable, hop_script, "--upstream", fake_url, "--grpc", null_grpc, "--http", null_http],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
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
            assert null.stdout is not None
            address = proc.stdout.readline().split("listening on ")[1].split()[0]
            assert null.stdout.readline().startswith("serving")
            fronts = (
                "http://" + cfg["http"]["listen"] + "/v1/chat/completions",
                f"http://{null_http}/v1/chat/completions",
            )
            targets = address, null_grpc
            direct = fake_url + "/v1/chat/completions"
            auth = {"authorization": f"Bearer {KEY}"}
            scrape_url = f"http://127.0.0.1:{prom}/metrics"
            pids = [proc.pid, fake.pid, os.getpid(), null.pid]
            for door in ("http", "grpc"):  # warm up: connections, caches
                asyncio.run(_paired(direct, fronts if door == "http" else ("", ""), targets, 100, 1, auth))
            for c in levels:
                for _ in range(args.rounds):
                    for door in ("http", "grpc"):
                        before = _histogram(httpx.get(scrape_url, timeout=5).text, door)
                        load = float(Path("/proc/loadavg").read_text().split()[0])
                        waited = [_runq_s(p) for p in pids]
                        base, through, hop = asyncio.run(
                            _paired(direct, fronts if door == "http" else ("", ""), targets, args.calls, c, auth)
                        )
                        waited = [_runq_s(p) - w for p, w in zip(pids, waited, strict=True)]
                        after = _histogram(httpx.get(scrape_url, timeout=5).text, door)
                        row = _row(door, c, args.calls, base, through, hop, before, after)
                        row["loadavg_1m"] = load
                        for name, w in zip(("sidecar", "fake", "bench", "null"), waited, strict=True):
                            row[f"{name}_runq_ms_per_triple"] = w / args.calls * 1000
                        row["extra_runq_ms"] = row["sidecar_runq_ms_per_triple"] - row["null_runq_ms_per_triple"]
                        rows.append(row)
        finally:
            for child in (proc, null, fake):
                child.terminate()
                child.wait(30)
    summary = _summary(rows, levels)
    args.out.write_text(json.dumps({"rounds": args.rounds, "rows": rows, "summary": summary}, indent=2) + "\n")
    print(
        "| door | conc. | added ms, raw | added ms, clients' CPU out | null hop: added ms (CPU out) | its figure ms |"
        " hop outside its clock ms | added less the hop ms | header ms | histogram ms |"
        " header ÷ (added less the hop): median (rounds) | histogram ÷ it | header ÷ added, CPU out |"
        " sidecar's run-queue wait over the null hop's, ms per triple | load | by medians: header ÷ it (rounds) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s in summary:
        rounds = ", ".join(f"{x:.2f}" for x in s["header_ratios"])
        print(
            f"| {s['door']} | {s['concurrency']} | {s['added_raw_ms']:.3f} | {s['added_ms']:.3f} | "
            f"{s['null_added_ms']:.3f} | {s['null_header_ms']:.3f} | {s['hop_ms']:.3f} | {s['added_net_ms']:.3f} | "
            f"{s['header_mean_ms']:.3f} | {s['histogram_mean_ms']:.3f} | {s['header_ratio']:.2f} ({rounds}) | "
            f"{s['histogram_ratio']:.2f} | {s['cpu_out_ratio']:.2f} | {s['extra_runq_ms']:.2f} | "
            f"{s['loadavg_1m']:.1f} | {s['median_ratio']:.2f} ({', '.join(f'{x:.2f}' for x in s['median_ratios'])}) |"
        )
    for s in summary:
        if "ratio_at_no_extra_wait" in s:
            print(
                f"{s['door']}, c={s['concurrency']}: the gap left against the sidecar's extra run-queue wait, round by "
                f"round: r = {s['gap_vs_wait_correlation']:.2f}, {s['gap_per_wait_ms']:.2f} ms per ms; at none, "
                f"{s['gap_at_no_extra_wait_ms']:.3f} ms: header ÷ (added less the hop) = "
                f"{s['ratio_at_no_extra_wait']:.2f}"
            )
    return 0


def _mean_ms(values: list[float]) -> float:
    return statistics.fmean(values) * 1000 if values else float("nan")


def _row(
    door: str,
    c: int,
    calls: int,
    base: _Timed,
    through: _Timed,
    hop: _Timed,
    before: tuple[float, float],
    after: tuple[float, float],
) -> dict[str, Any]:
    """One round of one door: the means; the added latency raw, with each side's client CPU taken out, and
    less the null hop's cost outside its clock (its latency over the direct call less its own figure)."""
    count = after[1] - before[1]
    direct_ms, door_ms, null_ms = _mean_ms(base.latency), _mean_ms(through.latency), _mean_ms(hop.latency)
    direct_cpu, door_cpu = _mean_ms(base.client_cpu), _mean_ms(through.client_cpu)
    null_header = statistics.fmean(hop.overhead_ms) if hop.overhead_ms else float("nan")
    null_cpu = _mean_ms(hop.client_cpu)
    hop_ms = (null_ms - null_cpu) - (direct_ms - direct_cpu) - null_header
    return {
        "door": door,
        "concurrency": c,
        "calls": calls,
        "direct_mean_ms": direct_ms,
        "door_mean_ms": door_ms,
        "null_mean_ms": null_ms,
        "direct_client_cpu_ms": direct_cpu,
        "door_client_cpu_ms": door_cpu,
        "null_client_cpu_ms": null_cpu,
        "added_raw_ms": door_ms - direct_ms,
        "added_ms": (door_ms - door_cpu) - (direct_ms - direct_cpu),
        "null_added_raw_ms": null_ms - direct_ms,
        "null_added_ms": (null_ms - null_cpu) - (direct_ms - direct_cpu),
        "null_header_ms": null_header,
        "null_in_ms": _mean_ms(hop.way_in),
        "null_out_ms": _mean_ms(hop.way_out),
        "null_upstream_ms": null_ms - _mean_ms(hop.way_in) - _mean_ms(hop.way_out) - null_header,
        "hop_ms": hop_ms,
        "added_net_ms": (door_ms - door_cpu) - (direct_ms - direct_cpu) - hop_ms,
        "header_mean_ms": statistics.fmean(through.overhead_ms) if through.overhead_ms else None,
        "header_count": len(through.overhead_ms),
        "histogram_mean_ms": (after[0] - before[0]) / count * 1000 if count else None,
        "histogram_count": count,
        "median_ratio": _median_ratio(through, hop),
    }


def _median_ratio(through: _Timed, hop: _Timed) -> float:
    """The header against the added latency less the hop, by medians rather than means: per triple, the
    sidecar's latency less the null hop's (each less its client's CPU), whose median, plus the median of
    the null hop's figure, is set against the median header. A wait that meets both calls of a triple
    cancels; a long one that meets one is a tail the median does not follow."""
    if len(through.latency) != len(hop.latency) or not through.overhead_ms or not hop.overhead_ms:
        return float("nan")
    over = [
        (s - sc) - (n - nc)
        for s, sc, n, nc in zip(through.latency, through.client_cpu, hop.latency, hop.client_cpu, strict=True)
    ]
    net = statistics.median(over) * 1000 + statistics.median(hop.overhead_ms)
    return statistics.median(through.overhead_ms) / net if net > 0 else float("nan")


def _summary(rows: list[dict[str, Any]], levels: list[int]) -> list[dict[str, Any]]:
    """Per door and concurrency: the ratios of each round, their median, and the medians of the means."""
    out: list[dict[str, Any]] = []

    def median(mine: list[dict[str, Any]], key: str) -> float:
        return statistics.median(r[key] or 0.0 for r in mine)

    for door in ("http", "grpc"):
        for c in levels:
            mine = [r for r in rows if r["door"] == door and r["concurrency"] == c]
            ratios = [(r["header_mean_ms"] or 0.0) / r["added_net_ms"] for r in mine if r["added_net_ms"] > 0]
            hist = [(r["histogram_mean_ms"] or 0.0) / r["added_net_ms"] for r in mine if r["added_net_ms"] > 0]
            cpu_out = [(r["header_mean_ms"] or 0.0) / r["added_ms"] for r in mine if r["added_ms"] > 0]
            keys = ("added_raw_ms", "added_ms", "null_added_ms", "null_header_ms", "null_in_ms", "null_out_ms")
            keys += ("null_upstream_ms", "direct_mean_ms", "hop_ms", "added_net_ms", "header_mean_ms", "extra_runq_ms")
            keys += ("loadavg_1m", "null_added_raw_ms")
            out.append(
                {
                    "door": door,
                    "concurrency": c,
                    **{k: median(mine, k) for k in (*keys, "histogram_mean_ms")},
                    "header_ratio": statistics.median(ratios) if ratios else float("nan"),
                    "header_ratios": ratios,
                    "histogram_ratio": statistics.median(hist) if hist else float("nan"),
                    "histogram_ratios": hist,
                    "cpu_out_ratio": statistics.median(cpu_out) if cpu_out else float("nan"),
                    "median_ratio": statistics.median(r["median_ratio"] for r in mine),
                    **_against_the_wait(mine),
                    "median_ratios": [r["median_ratio"] for r in mine],
                }
            )
    return out


def _against_the_wait(mine: list[dict[str, Any]]) -> dict[str, float]:
    """The gap left (the added latency less the hop, less the header), round by round, against the time the
    sidecar's threads waited on a run queue over the null hop's: the correlation, and the gap and the
    ratio where that extra wait is none (the fit's intercept)."""
    xs = [r["extra_runq_ms"] for r in mine]
    gaps = [r["added_net_ms"] - (r["header_mean_ms"] or 0.0) for r in mine]
    if len(mine) < 3 or len(set(xs)) < 2 or len(set(gaps)) < 2:
        return {}
    fit = statistics.linear_regression(xs, gaps)
    header = statistics.median(r["header_mean_ms"] or 0.0 for r in mine)
    return {
        "gap_vs_wait_correlation": statistics.correlation(xs, gaps),
        "gap_per_wait_ms": fit.slope,
        "gap_at_no_extra_wait_ms": fit.intercept,
        "ratio_at_no_extra_wait": header / (header + fit.intercept),
    }


if __name__ == "__main__":
    raise SystemExit(main())
