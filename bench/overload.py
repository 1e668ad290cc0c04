"""Overload: N CallModel calls at once against a slow provider, and how health fares meanwhile.

    .venv/bin/python bench/overload.py                          # 5,000 calls, provider holds each 5 s
    .venv/bin/python bench/overload.py --max-in-flight 0        # the sidecar's in-flight limit off
    .venv/bin/python bench/overload.py --max-connections 6000   # a huge httpx pool

It starts the fake provider and ``sidecar serve`` as processes (no Docker, no network), scripts
the provider to hold every reply ``--delay-ms``, fires ``--calls`` CallModel calls at once from
``--channels`` channels (each call with a ``--deadline-s`` deadline), and meanwhile probes
``grpc.health.v1`` from a separate process every 0.25 s with a 1 s deadline. It prints one JSON
object: the status codes the calls got, how soon each code came back, the health probes that
failed during the load and how long after the last call health took to answer again, and the
sidecar's log lines about shed calls. Not part of the test suite (timing on a shared machine).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sidecar_client import pb
from sidecar_contract.v1 import sidecar_pb2_grpc as pb_grpc

PROBE_EVERY_S = 0.25
PROBE_DEADLINE_S = 1.0
RECOVERY_WATCH_S = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(provider_url: str, port: int, args: argparse.Namespace) -> str:
    server = [f"  listen: 127.0.0.1:{port}", "  grace_period_s: 0"]
    if args.max_in_flight is not None:
        server.append(f"  max_in_flight: {args.max_in_flight}")
    provider = [
        "    wire_format: openai",
        f"    base_url: {provider_url}/v1",
        f"    timeout_s: {args.deadline_s + 30}",
    ]
    if args.max_connections is not None:
        provider.append(f"    max_connections: {args.max_connections}")
        provider.append(f"    max_keepalive_connections: {min(args.max_connections, 50)}")
    return "\n".join(
        [
            "server:",
            *server,
            "policy: {upstream_retries: 0}",
            "providers:",
            "  slow:",
            *provider,
            "models:",
            "  slow-gpt: {provider: slow, upstream_model: fake-gpt, context_window: 8000, max_output_tokens: 256}",
            "telemetry: {log_format: json, log_level: INFO}",
            "",
        ]
    )


def probe_main(address: str, out: str) -> None:
    """The health prober (a process of its own, so the load's event loop cannot delay it)."""
    with grpc.insecure_channel(address) as channel, open(out, "a", buffering=1) as sink:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            start = time.time()
            try:
                stub.Check(health_pb2.HealthCheckRequest(), timeout=PROBE_DEADLINE_S)
                ok = True
            except grpc.RpcError:
                ok = False
            sink.write(json.dumps({"t": start, "ok": ok, "s": time.time() - start}) + "\n")
            time.sleep(max(0.0, PROBE_EVERY_S - (time.time() - start)))


async def _load(
    address: str, args: argparse.Namespace, samples: dict[str, str]
) -> tuple[list[tuple[str, float]], float, float]:
    channels = [grpc.aio.insecure_channel(address) for _ in range(args.channels)]
    for ch in channels:
        await ch.channel_ready()
    stubs = [pb_grpc.SidecarStub(ch) for ch in channels]
    request = pb.CallModelRequest(model="slow-gpt", messages=[pb.Message(role=pb.ROLE_USER, text="hello")])

    async def one(i: int) -> tuple[str, float]:
        start = time.perf_counter()
        try:
            await stubs[i % len(stubs)].CallModel(request, timeout=args.deadline_s)
            code = "OK"
        except grpc.aio.AioRpcError as exc:
            code = exc.code().name
            samples.setdefault(code, exc.details() or "")
        return code, time.perf_counter() - start

    t0 = time.time()
    results = await asyncio.gather(*(one(i) for i in range(args.calls)))
    t1 = time.time()
    for ch in channels:
        await ch.close()
    return list(results), t0, t1


def _cpu_s(pid: int) -> float:
    """utime + stime of a process, in seconds (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return round(s[min(len(s) - 1, int(q * len(s)))], 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--delay-ms", type=int, default=5000)
    parser.add_argument("--deadline-s", type=float, default=60.0)
    parser.add_argument("--channels", type=int, default=8)
    parser.add_argument("--max-in-flight", type=int, default=None, help="server.max_in_flight (unset: default)")
    parser.add_argument("--max-connections", type=int, default=None, help="providers.slow.max_connections")
    parser.add_argument("--probe", nargs=2, metavar=("ADDRESS", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        probe_main(*args.probe)
        return 0

    work = Path(tempfile.mkdtemp(prefix="overload-"))
    py = sys.executable
    provider = subprocess.Popen(
        [py, "-m", "sidecar", "fake-provider", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    procs: list[subprocess.Popen[Any]] = [provider]
    try:
        url = provider.stdout.readline().strip() if provider.stdout else ""
        body = json.dumps({"model": "*", "steps": [{"delay_ms": args.delay_ms, "repeat": args.calls * 2}]})
        urllib.request.urlopen(
            urllib.request.Request(url + "/_fake/script", body.encode(), {"content-type": "application/json"}),
            timeout=10,
        ).read()
        port = _free_port()
        cfg = work / "sidecar.yaml"
        cfg.write_text(_config(url, port, args))
        log = (work / "sidecar.log").open("w")
        sidecar = subprocess.Popen([py, "-m", "sidecar", "serve", "--config", str(cfg)], stdout=log, stderr=log)
        procs.append(sidecar)
        address = f"127.0.0.1:{port}"
        with grpc.insecure_channel(address) as ch:
            grpc.channel_ready_future(ch).result(timeout=60)
        probes = work / "probes.jsonl"
        prober = subprocess.Popen([py, __file__, "--probe", address, str(probes)])
        procs.append(prober)
        time.sleep(1.0)
        samples: dict[str, str] = {}
        cpu0 = {"sidecar": _cpu_s(sidecar.pid), "provider": _cpu_s(provider.pid)}
        results, t0, t1 = asyncio.run(_load(address, args, samples))
        cpu = {k: round(_cpu_s(p.pid) - cpu0[k], 2) for k, p in (("sidecar", sidecar), ("provider", provider))}
        watch_until = time.time() + RECOVERY_WATCH_S
        recovered_at = None
        while time.time() < watch_until:
            time.sleep(PROBE_EVERY_S)
            rows = [json.loads(x) for x in probes.read_text().splitlines() if x.strip()]
            after = [r for r in rows if r["t"] >= t1]
            if len(after) >= 3 and all(r["ok"] for r in after[-3:]):
                ok_from = [r for r in after if r["ok"] and all(x["ok"] for x in after if x["t"] >= r["t"])]
                recovered_at = ok_from[0]["t"]
                break
        rows = [json.loads(x) for x in probes.read_text().splitlines() if x.strip()]
        during = [r for r in rows if t0 <= r["t"] <= t1]
        by_code: dict[str, list[float]] = collections.defaultdict(list)
        for code, took in results:
            by_code[code].append(took)
        log.flush()
        lines = (work / "sidecar.log").read_text().splitlines()
        shed_lines = [x for x in lines if "SIDECAR_OVERLOADED" in x or "shed" in x]
        report = {
            "calls": args.calls,
            "delay_ms": args.delay_ms,
            "deadline_s": args.deadline_s,
            "max_in_flight": args.max_in_flight,
            "max_connections": args.max_connections,
            "load_wall_s": round(t1 - t0, 2),
            "cpu_s_during_load": cpu,
            "load_average_1m": round(os.getloadavg()[0], 2),
            "codes": {
                c: {
                    "n": len(v),
                    "p50_s": _pct(v, 0.5),
                    "p99_s": _pct(v, 0.99),
                    "within_0.3s": sum(x <= 0.3 for x in v),
                    "sample": samples.get(c, "")[:200],
                }
                for c, v in sorted(by_code.items())
            },
            "health_during_load": {
                "probes": len(during),
                "failed": sum(not r["ok"] for r in during),
                "max_s": round(max((r["s"] for r in during), default=0.0), 3),
            },
            "health_recovered_after_load_s": None if recovered_at is None else round(max(0.0, recovered_at - t1), 2),
            "sidecar_log_lines": len(lines),
            "shed_log_lines": len(shed_lines),
            "shed_log_sample": shed_lines[:1],
            "work_dir": str(work),
        }
        print(json.dumps(report, indent=2))
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
