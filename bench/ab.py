"""CPU per 1,000 calls of two sidecar builds, measured side by side in one run (a paired A/B).

    bench/.venv/bin/python bench/ab.py --a "OLD_PYTHON -P -m sidecar serve" --b ".venv/bin/python -P -m sidecar serve"
    bench/.venv/bin/python bench/ab.py --b-config bench/ab-redis.yaml ...        # the same build, another config
    bench/.venv/bin/python bench/ab.py --traced                                  # the same build, B traced
    bench/.venv/bin/python bench/ab.py --traced --b-env SIDECAR_TRACES_OFFLOAD=true    # B exports in a child
    bench/.venv/bin/python bench/ab.py --traced --a-traced --b-env SIDECAR_TRACES_OFFLOAD=true  # both traced

``--traced`` runs B with 100 % of its spans batch-exported over OTLP/HTTP to a sink
(bench/cmd/otlpsink, ``run.tracing_on_env``) and A with tracing off (``OTEL_SDK_DISABLED``):
the throughput ratio B/A is then what tracing costs (BENCHMARKS.md, the tracing rows).

Both sidecars run at once against one upstream (bench/cmd/upstream); the load generator sends
short bursts (``--burst`` seconds at ``--concurrency``) to A and B in turn, the order flipped
every round, and each burst's CPU seconds (utime + stime of the process and its children, from
/proc) are divided by the calls it completed. Whatever else runs on the machine meets both
builds alike, so the paired ratio B/A (median over the rounds) is the figure to read; the
per-build medians and minimums are printed too, and so are calls per second and their ratio.
On a 2-core machine shared with other work the
spread of one build's rounds is easily ±15 %; the ratio's spread is what the report states.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from run import (
    BIN,
    RAW,
    ROOT,
    TRACING_OFF_ENV,
    Bench,
    Proc,
    cpu_seconds,
    free_port,
    start,
    tracing_on_env,
    wait_http,
    wait_idle,
    write_sidecar_config,
)

DEFAULT_ROUNDS = 10
DEFAULT_BURST_S = 3.0
DEFAULT_CONCURRENCY = 64


def _burst(target: str, mode: str, concurrency: int, seconds: float, out: Path) -> tuple[int, float]:
    """One burst: the calls it completed and its calls per second."""
    argv = [str(BIN / "loadgen"), "-mode", mode, "-c", str(concurrency), "-d", f"{seconds}s", "-warmup", "0.3s"]
    argv += ["-timeout", "30s", "-target", target, "-label", out.stem, "-o", str(out)]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    result = json.loads(out.read_text())
    return int(result["completed_total"]), float(result["throughput_rps"])


def _per_1k(proc: Proc, target: str, args: argparse.Namespace, label: str) -> tuple[float, float]:
    """CPU seconds per 1,000 calls and calls per second of one burst."""
    wait_idle(proc)
    before = cpu_seconds(proc.pid)
    calls, rps = _burst(target, args.mode, args.concurrency, args.burst, RAW / f"ab-{label}.json")
    return (cpu_seconds(proc.pid) - before) / max(calls, 1) * 1000, rps


def _sidecar(b: Bench, name: str, cmd: str, config: Path | None, env: dict[str, str]) -> tuple[Proc, str]:
    port = free_port()
    cfg = write_sidecar_config(b, port, name)
    if config is not None:  # the operator's own config: only the listen address and upstream are filled in
        text = (
            config.read_text().replace("{{SIDECAR_PORT}}", str(port)).replace("{{UPSTREAM_PORT}}", str(b.upstream_port))
        )
        cfg.write_text(text)
    proc = start(name, [*cmd.split(), "--config", str(cfg)], env={"BENCH_KEY": b.key, "PYTHONUNBUFFERED": "1", **env})
    target = f"127.0.0.1:{port}"
    _burst(target, "grpc-model", 1, 1.0, RAW / f"{name}-warm.json")  # up and answering
    return proc, target


def main(argv: list[str] | None = None) -> int:
    default_cmd = f"{ROOT / '.venv/bin/python'} -P -m sidecar serve"
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", default=default_cmd, help="how to start build A (--config FILE is appended)")
    ap.add_argument("--b", default=default_cmd, help="how to start build B")
    ap.add_argument("--a-config", type=Path, help="a config template for A (default bench/sidecar.yaml.tmpl)")
    ap.add_argument("--b-config", type=Path, help="a config template for B")
    ap.add_argument("--mode", default="grpc-model", help="loadgen mode: grpc-model or grpc-tool")
    ap.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS)
    ap.add_argument("--burst", type=float, default=DEFAULT_BURST_S, help="seconds of load per burst")
    ap.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY)
    ap.add_argument("--traced", action="store_true", help="B traced (100 %% sampled, OTLP/HTTP to a sink), A not")
    ap.add_argument("--a-traced", action="store_true", help="with --traced: A traced too (compare two ways of tracing)")
    ap.add_argument("--out", type=Path, help="write the rounds and the ratios as JSON here")
    ap.add_argument("--b-env", action="append", default=[], metavar="NAME=VALUE", help="an extra variable for B")
    args = ap.parse_args(argv)
    RAW.mkdir(parents=True, exist_ok=True)
    args.sidecar_log_level, args.upstream_pid = "WARNING", 0
    key = "sk-bench-ab"
    port = free_port()
    upstream = start("upstream", [str(BIN / "upstream"), "-listen", f"127.0.0.1:{port}", "-key", key])
    procs: list[Proc] = []
    env_a: dict[str, str] = {}
    env_b: dict[str, str] = {}
    if args.traced:
        sink_port = free_port()
        procs.append(start("otlpsink", [str(BIN / "otlpsink"), "-listen", f"127.0.0.1:{sink_port}"]))
        env_a, env_b = TRACING_OFF_ENV, tracing_on_env(sink_port)
        if args.a_traced:
            env_a = tracing_on_env(sink_port)
    env_b = {**env_b, **dict(kv.split("=", 1) for kv in args.b_env)}
    try:
        if not wait_http(f"http://127.0.0.1:{port}/healthz", 10):
            print(f"the upstream did not start:\n{upstream.tail()}", file=sys.stderr)
            return 1
        b = Bench(args=args, upstream_port=port, key=key)
        a, a_target = _sidecar(b, "ab-a", args.a, args.a_config, env_a)
        procs.append(a)
        bb, b_target = _sidecar(b, "ab-b", args.b, args.b_config, env_b)
        procs.append(bb)
        cpu_a: list[float] = []
        cpu_b: list[float] = []
        rps_a: list[float] = []
        rps_b: list[float] = []
        for r in range(args.rounds):
            order = [("a", a, a_target, cpu_a, rps_a), ("b", bb, b_target, cpu_b, rps_b)]
            for label, proc, target, cpu, rps in order if r % 2 == 0 else reversed(order):
                per_1k, per_s = _per_1k(proc, target, args, f"{label}{r}")
                cpu.append(per_1k)
                rps.append(per_s)
            print(
                f"round {r + 1}: A {cpu_a[-1]:.3f}  B {cpu_b[-1]:.3f} CPU-s per 1,000;"
                f" A {rps_a[-1]:,.0f}  B {rps_b[-1]:,.0f} calls/s",
                flush=True,
            )
        _summary("CPU-s per 1,000", cpu_a, cpu_b, f"({args.mode}, c={args.concurrency})")
        _summary("calls/s", rps_a, rps_b, "(B traced, A not)" if args.traced else "")
        if args.out is not None:
            _write(args, cpu_a, cpu_b, rps_a, rps_b)
    finally:
        for p in [*procs, upstream]:
            p.stop()
    return 0


def _ratios(a: list[float], b: list[float]) -> dict[str, float]:
    ratios = [y / x for x, y in zip(a, b, strict=True) if x]
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return {"median": statistics.median(ratios), "q1": quartiles[0], "q3": quartiles[2]}


def _write(
    args: argparse.Namespace, cpu_a: list[float], cpu_b: list[float], rps_a: list[float], rps_b: list[float]
) -> None:
    """The rounds and the paired ratios B/A, as JSON."""
    out = {
        "argv": sys.argv[1:],
        "mode": args.mode,
        "concurrency": args.concurrency,
        "burst_s": args.burst,
        "traced": args.traced,
        "b_env": args.b_env,
        "rounds": [
            {"cpu_per_1k_a": ca, "cpu_per_1k_b": cb, "rps_a": ra, "rps_b": rb}
            for ca, cb, ra, rb in zip(cpu_a, cpu_b, rps_a, rps_b, strict=True)
        ],
        "rps_median_a": statistics.median(rps_a),
        "rps_median_b": statistics.median(rps_b),
        "rps_ratio_b_over_a": _ratios(rps_a, rps_b),
        "cpu_ratio_b_over_a": _ratios(cpu_a, cpu_b),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")


def _summary(unit: str, a: list[float], b: list[float], note: str) -> None:
    """Each build's median and minimum, and the paired ratio B/A: its median and quartiles."""
    ratios = [y / x for x, y in zip(a, b, strict=True) if x]
    print(f"A: median {statistics.median(a):,.3f}, min {min(a):,.3f} {unit} {note}".rstrip())
    print(f"B: median {statistics.median(b):,.3f}, min {min(b):,.3f} {unit}")
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    print(f"B/A ({unit}): median {statistics.median(ratios):.3f} (quartiles {quartiles[0]:.3f}-{quartiles[2]:.3f})")


if __name__ == "__main__":
    sys.exit(main())
