"""CallModel per wire format, and the HTTP fronts against each other, on one sidecar process.

    .venv/bin/python bench/formats.py [--calls 1000] [--rounds 5] [--concurrency 64]

One fake provider (``python -m sidecar fake-provider``, it speaks every registered format) and one
sidecar with a model per format (``fmt-<name>``). Each round sends ``--calls`` CallModel calls per
format at ``--concurrency`` in flight, formats interleaved round by round so a machine's drift
hits them all alike, and reads the sidecar's CPU (utime + stime, /proc) around each batch. Then
the same for the HTTP fronts (the Chat Completions front against the Responses front, when that
format is registered), each calling the same ``fmt-openai`` model.

What it reports is a ratio measured in one run (docs: BENCHMARKS.md): each format's sidecar CPU per
1,000 calls against the Chat Completions row, never an absolute that a 2-3x faster machine would
change. Results: ``bench/results/formats.json``.
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

import httpx
import yaml
from rich.console import Console
from rich.table import Table
from sidecar_client import AsyncSidecarClient, user

from sidecar.providers.formats.registry import FORMATS

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "formats.json"
UNDER_V1 = {"openai", "openai_responses"}
"""The formats whose fake routes sit under ``/v1`` (their base URL ends in it, as OpenAI's does)."""
BASELINE = "openai"
KEY = "sk-bench-0123456789abcdef"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _config(fake: str, formats: list[str]) -> dict[str, Any]:
    providers = {
        f"p-{name}": {
            "wire_format": name,
            "base_url": fake + ("/v1" if name in UNDER_V1 else ""),
            "api_key": "${BENCH_KEY}",
            **({"region": "us-east-1"} if name == "bedrock_converse" else {}),
        }
        for name in formats
    }
    models = {
        f"fmt-{name}": {
            "provider": f"p-{name}",
            "upstream_model": "fake",
            "context_window": 8000,
            "max_output_tokens": 256,
        }
        for name in formats
    }
    return {
        "server": {"listen": f"127.0.0.1:{_port()}", "max_in_flight": 1024},
        "http": {"listen": f"127.0.0.1:{_port()}", "mcp": False},
        "providers": providers,
        "models": models,
        "telemetry": {"log_level": "WARNING"},
    }


async def _grpc_batch(address: str, model: str, calls: int, concurrency: int) -> list[float]:
    latencies: list[float] = []
    gate = asyncio.Semaphore(concurrency)
    async with AsyncSidecarClient(address) as client:

        async def one() -> None:
            async with gate:
                start = time.perf_counter()
                await client.call_model(model, [user("hello")], timeout=60)
                latencies.append(time.perf_counter() - start)

        await asyncio.gather(*(one() for _ in range(calls)))
    return latencies


async def _http_batch(url: str, body: dict[str, Any], calls: int, concurrency: int) -> list[float]:
    latencies: list[float] = []
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=60) as http:

        async def one() -> None:
            async with gate:
                start = time.perf_counter()
                r = await http.post(url, json=body, headers={"authorization": "Bearer unused"})
                r.raise_for_status()
                latencies.append(time.perf_counter() - start)

        await asyncio.gather(*(one() for _ in range(calls)))
    return latencies


def _fronts(http_base: str, formats: list[str]) -> dict[str, tuple[str, dict[str, Any]]]:
    fronts = {
        "chat front": (
            f"{http_base}/v1/chat/completions",
            {"model": f"fmt-{BASELINE}", "messages": [{"role": "user", "content": "hello"}]},
        )
    }
    if "openai_responses" in formats:
        fronts["responses front"] = (f"{http_base}/v1/responses", {"model": f"fmt-{BASELINE}", "input": "hello"})
    return fronts


def _measure(pid: int, batches: dict[str, Any], rounds: int, calls: int) -> dict[str, dict[str, list[float]]]:
    out: dict[str, dict[str, list[float]]] = {label: {"cpu_ms_per_1k": [], "p50_ms": []} for label in batches}
    for _ in range(rounds):
        for label, batch in batches.items():
            before = _cpu_s(pid)
            latencies = asyncio.run(batch(calls))
            out[label]["cpu_ms_per_1k"].append((_cpu_s(pid) - before) * 1000 * 1000 / calls)
            out[label]["p50_ms"].append(statistics.median(latencies) * 1000)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=64)
    args = ap.parse_args(argv)
    formats = sorted(FORMATS)
    env = {**os.environ, "BENCH_KEY": KEY, "OTEL_SDK_DISABLED": "true"}
    env.setdefault("AWS_ACCESS_KEY_ID", "AKIDBENCH")
    env.setdefault("AWS_SECRET_ACCESS_KEY", "bench-secret")
    fake_port = _port()
    fake = subprocess.Popen(
        [sys.executable, "-m", "sidecar", "fake-provider", "--port", str(fake_port)], stdout=subprocess.DEVNULL
    )
    with tempfile.TemporaryDirectory() as tmp:
        cfg = _config(f"http://127.0.0.1:{fake_port}", formats)
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
            http_base = "http://" + cfg["http"]["listen"]
            c, n = args.concurrency, args.calls
            grpc_batches = {name: (lambda k, m=f"fmt-{name}": _grpc_batch(address, m, k, c)) for name in formats}
            fronts = _fronts(http_base, formats)
            http_batches = {
                label: (lambda k, u=url, b=body: _http_batch(u, b, k, c)) for label, (url, body) in fronts.items()
            }
            for batch in (*grpc_batches.values(), *http_batches.values()):
                asyncio.run(batch(100))  # warm up: connections, caches
            grpc = _measure(proc.pid, grpc_batches, args.rounds, n)
            http = _measure(proc.pid, http_batches, args.rounds, n)
        finally:
            proc.terminate()
            proc.wait(30)
            fake.terminate()
    report = {"calls": n, "rounds": args.rounds, "concurrency": c, "grpc": grpc, "http": http}
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    _print(grpc, BASELINE, f"CallModel per format, c={c}, {n} calls x {args.rounds} rounds")
    _print(http, "chat front", f"HTTP fronts on fmt-{BASELINE}, c={c}")
    return 0


def _print(rows: dict[str, dict[str, list[float]]], baseline: str, title: str) -> None:
    table = Table(title=title)
    for column in ("", "CPU ms / 1,000 calls (median)", f"against {baseline}", "rounds", "p50 ms"):
        table.add_column(column, justify="right")
    base = statistics.median(rows[baseline]["cpu_ms_per_1k"])
    for label, row in rows.items():
        cpu = statistics.median(row["cpu_ms_per_1k"])
        table.add_row(
            label,
            f"{cpu:.0f}",
            f"{cpu / base:.2f}",
            ", ".join(f"{v:.0f}" for v in row["cpu_ms_per_1k"]),
            f"{statistics.median(row['p50_ms']):.1f}",
        )
    Console().print(table)


if __name__ == "__main__":
    sys.exit(main())
