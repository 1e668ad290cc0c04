"""Issue 40's figures, each a ratio measured in one run beside its target (``make bench-lean``).

    .venv/bin/python bench/lean.py                    # every figure, about 3 minutes on 2 cores
    .venv/bin/python bench/lean.py --only start       # idle RSS and time to serving only (no Go tools)
    .venv/bin/python bench/lean.py --profile          # each package imported alone: its ms and MB

| figure | how it is measured | target |
|---|---|---|
| idle RSS | ``python -m sidecar serve`` on the embedded default (``make run``'s: its fakes in process), | ≤ 70 MB |
|  | VmRSS 2 s after it first answers health SERVING; its threads beside it | |
| time to serving | spawn to the first health SERVING ÷ a process importing grpc.aio, pydantic, aiohttp and | ≤ 2× |
|  | the OpenTelemetry SDK alone (spawn to exit); the median of ``--starts`` alternating pairs; | |
|  | the health poller retries a refused connection every 10-20 ms (``PROBE_RECONNECT_MS``) | |
| CallModel CPU | CPU per call at c=64 of the sidecar (bench/sidecar.yaml.tmpl, tracing off) ÷ | ≤ 1.25× |
|  | bench/relay_floor.py's (grpc.aio + aiohttp, no policy) | |
| StreamModel CPU | CPU per stream at c=1, the same two processes | ≤ 1.25× |
| traced ÷ untraced | CallModel throughput at c=64 of the same build traced (100 %, OTLP/HTTP to | ≥ 0.9 |
|  | bench/cmd/otlpsink) ÷ untraced | |

The paired figures run their processes at once against one upstream (bench/cmd/upstream) and send
short bursts (``--burst`` s) to each in turn, the order reversed every round; a figure is the median
of the rounds' ratios, with its quartiles (as bench/ab.py). CPU is utime + stime of the process and
its children, from /proc. Writes bench/results/lean.json and prints the table.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from run import (
    BENCH,
    BIN,
    RAW,
    RESULTS,
    ROOT,
    TRACING_OFF_ENV,
    Bench,
    Proc,
    cpu_seconds,
    free_port,
    peak_rss_mb,
    probe,
    process_tree,
    start,
    tracing_on_env,
    wait_http,
    wait_idle,
    write_sidecar_config,
)

PYTHON = str(ROOT / ".venv/bin/python")
FLOOR_IMPORTS = "import grpc.aio, pydantic.main, aiohttp, opentelemetry.sdk.trace"
TARGETS = {
    "idle_rss_mb": ("≤", 70.0),
    "serving_over_floor": ("≤", 2.0),
    "callmodel_cpu_over_floor": ("≤", 1.25),
    "stream_cpu_over_floor": ("≤", 1.25),
    "traced_over_untraced": ("≥", 0.9),
}
SETTLE_S = 2.0  # after SERVING, before the idle RSS is read
PROBE_RECONNECT_MS = 10
"""How soon the health poller's channel tries again after a refused connection. gRPC's default waits 1 s, then
1.6 s more (20 % jitter): a start that served at 0.7 s read as about 1.0 s, one at 1.25 s as about 2.6 s."""
STREAM_DELTAS, STREAM_GAP_MS = 20, 1.0  # the streaming scenario's shape (bench/scenario_stream.py)


def _status(pid: int, key: str) -> int:
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:  # gone since it was listed
        return 0
    for line in lines:
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def _serving(port: int, limit: float = 60.0) -> bool:
    """Poll the gRPC health service on ``port`` until it answers SERVING."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    end = time.monotonic() + limit
    backoff = [
        ("grpc.initial_reconnect_backoff_ms", PROBE_RECONNECT_MS),
        ("grpc.min_reconnect_backoff_ms", PROBE_RECONNECT_MS),
        ("grpc.max_reconnect_backoff_ms", 2 * PROBE_RECONNECT_MS),
    ]
    with grpc.insecure_channel(f"127.0.0.1:{port}", options=backoff) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < end:
            try:
                if stub.Check(health_pb2.HealthCheckRequest(), timeout=0.5).status == 1:
                    return True
            except grpc.RpcError:
                time.sleep(0.005)
    return False


def _tree_rss_mb(pid: int) -> float:
    """VmRSS of the process and its children (the traced sidecar's export child), in MB."""
    return sum(_status(p, "VmRSS") for p in process_tree(pid)) / 1024


def one_start() -> dict[str, float]:
    """One ``sidecar serve`` on the embedded default: spawn to SERVING (s), then its idle RSS and threads."""
    port = free_port()
    argv = [PYTHON, "-m", "sidecar", "serve", "--listen", f"127.0.0.1:{port}"]
    t0 = time.monotonic()
    proc = start("lean-serve", argv, env=TRACING_OFF_ENV)
    try:
        if not _serving(port):
            raise RuntimeError(f"the sidecar did not serve:\n{proc.tail()}")
        took = time.monotonic() - t0
        time.sleep(SETTLE_S)
        return {
            "serving_s": took,
            "rss_mb": _status(proc.pid, "VmRSS") / 1024,
            "threads": _status(proc.pid, "Threads"),
        }
    finally:
        proc.stop()


HWM = "; print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')][0])"
"""Appended to a timed import: the child prints its own peak RSS (kB). The kernel's ru_maxrss of a child
counts the pages of the process it was forked from, before it ran Python."""


def timed_import(code: str) -> tuple[float, float]:
    """A fresh interpreter running ``code``: spawn to exit (s), and its peak RSS (MB)."""
    t0 = time.monotonic()
    done = subprocess.run([PYTHON, "-c", code + HWM], capture_output=True, text=True, check=True)
    return time.monotonic() - t0, int(done.stdout.split()[-1]) / 1024


def startup(starts: int) -> dict[str, Any]:
    """Starts of the sidecar, the import floor and the app's import, alternating; their medians."""
    timed_import(FLOOR_IMPORTS)
    one_start()  # the first start writes what the others read
    serve: list[dict[str, float]] = []
    floor: list[tuple[float, float]] = []
    app: list[tuple[float, float]] = []
    for _ in range(starts):
        floor.append(timed_import(FLOOR_IMPORTS))
        app.append(timed_import("import sidecar.server.app"))
        serve.append(one_start())
    med = statistics.median
    out = {
        "starts": starts,
        "serving_s": med(s["serving_s"] for s in serve),
        "idle_rss_mb": med(s["rss_mb"] for s in serve),
        "threads": med(s["threads"] for s in serve),
        "floor_import_s": med(f[0] for f in floor),
        "floor_rss_mb": med(f[1] for f in floor),
        "app_import_s": med(a[0] for a in app),
        "app_import_rss_mb": med(a[1] for a in app),
        "serving_over_floor": med(s["serving_s"] / f[0] for s, f in zip(serve, floor, strict=True)),
    }
    return out


# --------------------------------------------------------------------------- paired CPU


def _burst(target: str, mode: str, concurrency: int, seconds: float, label: str) -> tuple[int, float]:
    out = RAW / f"lean-{label}.json"
    argv = [str(BIN / "loadgen"), "-mode", mode, "-c", str(concurrency), "-d", f"{seconds}s", "-warmup", "0.3s"]
    argv += ["-timeout", "30s", "-target", target, "-label", label, "-o", str(out)]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    result = json.loads(out.read_text())
    if result.get("failed"):
        raise RuntimeError(f"{label}: {result['failed']} calls failed: {result.get('failures')}")
    return int(result["completed_total"]), float(result["throughput_rps"])


def _measured(proc: Proc, target: str, mode: str, c: int, seconds: float, label: str) -> tuple[float, float]:
    """CPU ms per call and calls per second of one burst."""
    wait_idle(proc)
    before = cpu_seconds(proc.pid)
    calls, rps = _burst(target, mode, c, seconds, label)
    return (cpu_seconds(proc.pid) - before) / max(calls, 1) * 1000, rps


def _started(name: str, argv: list[str], env: dict[str, str], key: str) -> tuple[Proc, str]:
    port = argv[argv.index("--listen") + 1].rsplit(":", 1)[1] if "--listen" in argv else ""
    proc = start(name, argv, env={"BENCH_KEY": key, "PYTHONUNBUFFERED": "1", **env})
    target = f"127.0.0.1:{port}"
    error = probe(proc, ["-mode", "grpc-model", "-target", target, "-probe", "120s", "-timeout", "5s"])
    if error is not None:
        proc.stop()
        raise RuntimeError(f"{name} did not answer CallModel: {error}\n{proc.tail()}")
    try:
        _burst(target, "grpc-model", 1, 1.0, f"{name}-warm")  # warm
    except (RuntimeError, subprocess.CalledProcessError):
        proc.stop()  # not yet the caller's to stop
        raise
    return proc, target


def _ratio(a: list[float], b: list[float]) -> dict[str, float]:
    """The paired ratios b/a: median and quartiles."""
    ratios = [y / x for x, y in zip(a, b, strict=True) if x]
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return {"median": statistics.median(ratios), "q1": q[0], "q3": q[2]}


def paired(args: argparse.Namespace, key: str, upstream_port: int) -> dict[str, Any]:
    """The relay floor, the sidecar and the sidecar traced at once; CallModel c=64 and StreamModel c=1 bursts."""
    bench = Bench(args=args, upstream_port=upstream_port, key=key)
    sink_port = free_port()
    procs = [start("lean-otlpsink", [str(BIN / "otlpsink"), "-listen", f"127.0.0.1:{sink_port}"])]
    try:
        port = free_port()
        relay_argv = [PYTHON, str(BENCH / "relay_floor.py"), "--listen", f"127.0.0.1:{port}"]
        relay, relay_t = _started("lean-relay", [*relay_argv, "--upstream", bench.upstream], {}, key)
        procs.append(relay)
        sidecars = []
        for name, env in (("lean-sidecar", TRACING_OFF_ENV), ("lean-traced", tracing_on_env(sink_port))):
            port = free_port()
            cfg = write_sidecar_config(bench, port, name)
            argv = [PYTHON, "-P", "-m", "sidecar", "serve", "--config", str(cfg), "--listen", f"127.0.0.1:{port}"]
            proc, target = _started(name, argv, env, key)
            procs.append(proc)
            sidecars.append((proc, target))
        (side, side_t), (traced, traced_t) = sidecars
        idle_rss = {p.name: _tree_rss_mb(p.pid) for p in procs[1:]}  # after one call each: the production config
        with __import__("urllib.request").request.urlopen(
            f"{bench.upstream}/_stream?deltas={STREAM_DELTAS}&gap_ms={STREAM_GAP_MS:g}", timeout=5
        ):
            pass
        runs: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
        units = [
            ("model_relay", relay, relay_t, "grpc-model", 64),
            ("model_sidecar", side, side_t, "grpc-model", 64),
            ("model_traced", traced, traced_t, "grpc-model", 64),
            ("stream_relay", relay, relay_t, "grpc-stream", 1),
            ("stream_sidecar", side, side_t, "grpc-stream", 1),
        ]
        for r in range(args.rounds):
            for label, proc, target, mode, c in units if r % 2 == 0 else reversed(units):
                runs[label].append(_measured(proc, target, mode, c, args.burst, f"{label}{r}"))
            print(
                f"round {r + 1}: "
                + "  ".join(f"{k} {v[-1][0]:.3f} ms/call {v[-1][1]:,.0f}/s" for k, v in runs.items()),
                flush=True,
            )
        peak_rss = {p.name: peak_rss_mb(p.pid) for p in procs[1:]}
    finally:
        for p in procs:
            p.stop()

    def cpu(k: str) -> list[float]:
        return [x[0] for x in runs[k]]

    def rps(k: str) -> list[float]:
        return [x[1] for x in runs[k]]

    return {
        "rounds": args.rounds,
        "burst_s": args.burst,
        "idle_rss_mb": idle_rss,
        "peak_rss_mb": peak_rss,
        "runs": {k: [{"cpu_ms": c, "rps": r} for c, r in v] for k, v in runs.items()},
        "cpu_ms": {k: statistics.median(cpu(k)) for k in runs},
        "rps": {k: statistics.median(rps(k)) for k in runs},
        "callmodel_cpu_over_floor": _ratio(cpu("model_relay"), cpu("model_sidecar")),
        "stream_cpu_over_floor": _ratio(cpu("stream_relay"), cpu("stream_sidecar")),
        "traced_over_untraced": _ratio(rps("model_sidecar"), rps("model_traced")),
        "traced_cpu_over_untraced": _ratio(cpu("model_sidecar"), cpu("model_traced")),
    }


# --------------------------------------------------------------------------- the profile


PROFILED = (
    ("the import floor", FLOOR_IMPORTS.removeprefix("import ")),
    ("grpc.aio", "grpc.aio"),
    ("pydantic", "pydantic.main"),
    ("aiohttp", "aiohttp"),
    ("OpenTelemetry SDK", "opentelemetry.sdk.trace"),
    ("httpx (+ rich, click: httpx's CLI)", "httpx"),
    ("jsonschema", "jsonschema"),
    ("PyYAML", "yaml"),
    ("the contract's stubs", "sidecar_contract.v1.sidecar_pb2, sidecar_contract.v1.admin_pb2"),
    ("the configuration", "sidecar.config"),
    ("the MCP SDK", "mcp, mcp.client.streamable_http"),
    ("botocore (event stream, SigV4)", "botocore.eventstream, botocore.auth"),
    ("the HTTP doors (uvicorn, Starlette, the fronts)", "sidecar.server.http.doors"),
    ("rich alone", "rich.console"),
    ("the embedded fakes", "sidecar.fakes"),
    ("sidecar.server.app", "sidecar.server.app"),
    ("sidecar.server.app + the fakes (the embedded default)", "sidecar.server.app, sidecar.fakes"),
)


def profile(out: Path, repeats: int = 2) -> list[tuple[str, float, float]]:
    """Each of PROFILED imported alone in a fresh interpreter: spawn to exit (s) and peak RSS (MB), less a
    bare interpreter's (medians of ``repeats``, alternating)."""
    timed_import("import sidecar.server.app, sidecar.fakes")  # the bytecode written once
    bare: list[tuple[float, float]] = []
    each: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
    for _ in range(repeats):
        bare.append(timed_import("pass"))
        for name, modules in PROFILED:
            each[name].append(timed_import(f"import {modules}"))
    base_s, base_mb = statistics.median(b[0] for b in bare), statistics.median(b[1] for b in bare)
    rows = [
        (
            name,
            statistics.median(t for t, _ in each[name]) - base_s,
            statistics.median(m for _, m in each[name]) - base_mb,
        )
        for name, _ in PROFILED
    ]
    rows.insert(0, ("a bare interpreter (subtracted below)", base_s, base_mb))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=1) + "\n")
    return rows


# --------------------------------------------------------------------------- report


def table(figures: dict[str, Any]) -> str:
    """The issue's table: each figure, its ratio, its target, met or not."""
    rows = ["| figure | measured | target | verdict |", "|---|---|---|---|"]
    start_ = figures.get("start")
    pair = figures.get("paired")

    def verdict(key: str, value: float) -> tuple[str, str]:
        op, limit = TARGETS[key]
        ok = value <= limit if op == "≤" else value >= limit
        return f"{op} {limit:g}{' MB' if key == 'idle_rss_mb' else ''}", "met" if ok else "missed"

    if start_:
        t, v = verdict("idle_rss_mb", start_["idle_rss_mb"])
        rss = f"{start_['idle_rss_mb']:.1f} MB, {start_['threads']:.0f} threads"
        rows.append(f"| idle RSS, embedded default | {rss} | {t} | {v} |")
        t, v = verdict("serving_over_floor", start_["serving_over_floor"])
        rows.append(
            f"| time to serving ÷ import floor | {start_['serving_over_floor']:.2f}× ({start_['serving_s']:.2f} s ÷ "
            f"{start_['floor_import_s']:.2f} s; importing sidecar.server.app {start_['app_import_s']:.2f} s)"
            f" | {t} | {v} |"
        )
    if pair:
        for key, name, unit in (
            ("callmodel_cpu_over_floor", "CallModel CPU/call ÷ relay floor, c=64", ("model_sidecar", "model_relay")),
            ("stream_cpu_over_floor", "StreamModel CPU/stream ÷ relay floor, c=1", ("stream_sidecar", "stream_relay")),
        ):
            r = pair[key]
            t, v = verdict(key, r["median"])
            rows.append(
                f"| {name} | {r['median']:.2f}× ({r['q1']:.2f}–{r['q3']:.2f}; {pair['cpu_ms'][unit[0]]:.3f} vs "
                f"{pair['cpu_ms'][unit[1]]:.3f} CPU-ms) | {t} | {v} |"
            )
        r = pair["traced_over_untraced"]
        t, v = verdict("traced_over_untraced", r["median"])
        rows.append(
            f"| traced ÷ untraced throughput, c=64 | {r['median']:.3f} ({r['q1']:.3f}–{r['q3']:.3f}; "
            f"{pair['rps']['model_traced']:,.0f} vs {pair['rps']['model_sidecar']:,.0f}/s) | {t} | {v} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="start,paired", help="start, paired, or both (comma-separated)")
    ap.add_argument("--starts", type=int, default=5, help="sidecar starts (each beside an import floor)")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--burst", type=float, default=3.0, help="seconds of load per burst")
    ap.add_argument("--profile", action="store_true", help="print the import profile (ms, MB per package) only")
    args = ap.parse_args(argv)
    RAW.mkdir(parents=True, exist_ok=True)
    # bytecode written and read, as in the image (its pip install compiled every module): with
    # PYTHONDONTWRITEBYTECODE set, as in some shells, every start compiles the editable checkout again
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if args.profile:
        rows = profile(RESULTS / "lean-profile.json")
        print("| imported alone | ms | MB (peak RSS) |\n|---|---:|---:|")
        for name, took, mb in rows:
            print(f"| {name} | {took * 1000:.0f} | {mb:.1f} |")
        return 0
    args.sidecar_log_level, args.upstream_pid = "WARNING", 0
    parts = set(args.only.split(","))
    figures: dict[str, Any] = {"loadavg_before": Path("/proc/loadavg").read_text().split()[:3]}
    if "start" in parts:
        figures["start"] = startup(args.starts)
    if "paired" in parts:
        key = "sk-bench-lean"
        port = free_port()
        upstream = start("lean-upstream", [str(BIN / "upstream"), "-listen", f"127.0.0.1:{port}", "-key", key])
        try:
            if not wait_http(f"http://127.0.0.1:{port}/healthz", 10):
                print(f"the upstream did not start:\n{upstream.tail()}", file=sys.stderr)
                return 1
            figures["paired"] = paired(args, key, port)
        finally:
            upstream.stop()
    figures["loadavg_after"] = Path("/proc/loadavg").read_text().split()[:3]
    figures["table"] = table(figures)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "lean.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(figures["table"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
