"""Does the sidecar's own overhead figure agree with the latency it adds? One run, ratios.

    .venv/bin/python bench/overhead.py [--calls 500] [--rounds 3] [--concurrency 1,16]

One fake provider (``python -m sidecar fake-provider``) and one sidecar (a model on it, the HTTP
port, the Prometheus port). Each round, at each concurrency, the batches interleaved (a direct one before each door's):

    direct     POST /v1/chat/completions to the fake provider itself (httpx)
    http       the same body to the sidecar's Chat Completions front (httpx): x-sidecar-overhead-ms
    grpc       CallModel (grpc.aio): the x-sidecar-overhead-ms trailer

*added* is a door's mean latency less the mean of the direct batch sent just before it (so the httpx client's
own cost cancels for the HTTP door; for gRPC the grpc client's cost replaces it). Reported: the
mean of x-sidecar-overhead-ms over each batch, the mean of ``sidecar.overhead.duration`` from the
scrape (its _sum / _count deltas), and each as a ratio of the added latency. The overhead excludes
what the sidecar does not see (the bytes in the kernel, the server library's parsing before the
handler, the client), so the ratio is below 1; the gap is that part, in ms.

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


async def _http(url: str, calls: int, concurrency: int, headers: dict[str, str]) -> tuple[list[float], list[float]]:
    latencies: list[float] = []
    overheads: list[float] = []
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=60) as http:

        async def one() -> None:
            async with gate:
                start = time.perf_counter()
                r = await http.post(url, json=BODY, headers=headers)
                latencies.append(time.perf_counter() - start)
                r.raise_for_status()
                if HEADER in r.headers:
                    overheads.append(float(r.headers[HEADER]))

        await asyncio.gather(*(one() for _ in range(calls)))
    return latencies, overheads


async def _grpc(address: str, calls: int, concurrency: int) -> tuple[list[float], list[float]]:
    latencies: list[float] = []
    overheads: list[float] = []
    gate = asyncio.Semaphore(concurrency)
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.SidecarStub(channel)

        async def one() -> None:
            async with gate:
                start = time.perf_counter()
                call = stub.CallModel(pb.CallModelRequest(model="gpt", messages=[user("hello")]), timeout=60)
                await call
                latencies.append(time.perf_counter() - start)
                for key, value in await call.trailing_metadata() or ():
                    if key == HEADER:
                        overheads.append(float(value))

        await asyncio.gather(*(one() for _ in range(calls)))
    return latencies, overheads


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", default="1,16")
    args = ap.parse_args(argv)
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
            asyncio.run(_http(front, 100, 4, auth))  # warm up: connections, caches
            asyncio.run(_grpc(address, 100, 4))
            for c in levels:
                for _ in range(args.rounds):
                    for door in ("http", "grpc"):
                        d_lat, _ = asyncio.run(_http(direct, args.calls, c, auth))  # paired: just before
                        before = _histogram(httpx.get(scrape_url, timeout=5).text, door)
                        if door == "http":
                            lat, heads = asyncio.run(_http(front, args.calls, c, auth))
                        else:
                            lat, heads = asyncio.run(_grpc(address, args.calls, c))
                        after = _histogram(httpx.get(scrape_url, timeout=5).text, door)
                        count = after[1] - before[1]
                        rows.append(
                            {
                                "door": door,
                                "concurrency": c,
                                "calls": args.calls,
                                "direct_mean_ms": statistics.fmean(d_lat) * 1000,
                                "door_mean_ms": statistics.fmean(lat) * 1000,
                                "added_ms": (statistics.fmean(lat) - statistics.fmean(d_lat)) * 1000,
                                "header_mean_ms": statistics.fmean(heads) if heads else None,
                                "header_count": len(heads),
                                "histogram_mean_ms": (after[0] - before[0]) / count * 1000 if count else None,
                                "histogram_count": count,
                            }
                        )
        finally:
            proc.terminate()
            proc.wait(30)
            fake.terminate()
            fake.wait(30)
    summary = _summary(rows, levels)
    RESULTS.write_text(json.dumps({"rounds": args.rounds, "rows": rows, "summary": summary}, indent=2) + "\n")
    print("| door | conc. | added ms | header mean ms | histogram mean ms | header ÷ added | histogram ÷ added |")
    print("|---|---|---|---|---|---|---|")
    for s in summary:
        print(
            f"| {s['door']} | {s['concurrency']} | {s['added_ms']:.3f} | {s['header_mean_ms']:.3f} | "
            f"{s['histogram_mean_ms']:.3f} | {s['header_ratio']:.2f} | {s['histogram_ratio']:.2f} |"
        )
    return 0


def _summary(rows: list[dict[str, Any]], levels: list[int]) -> list[dict[str, Any]]:
    """Per door and concurrency: the medians over the rounds, and the ratios of the medians."""
    out: list[dict[str, Any]] = []
    for door in ("http", "grpc"):
        for c in levels:
            mine = [r for r in rows if r["door"] == door and r["concurrency"] == c]
            added = statistics.median(r["added_ms"] for r in mine)
            head = statistics.median(r["header_mean_ms"] or 0.0 for r in mine)
            hist = statistics.median(r["histogram_mean_ms"] or 0.0 for r in mine)
            out.append(
                {
                    "door": door,
                    "concurrency": c,
                    "added_ms": added,
                    "header_mean_ms": head,
                    "histogram_mean_ms": hist,
                    "header_ratio": head / added if added > 0 else float("nan"),
                    "histogram_ratio": hist / added if added > 0 else float("nan"),
                }
            )
    return out


if __name__ == "__main__":
    raise SystemExit(main())
