"""A py-spy profile of one sidecar under closed-loop load (what BENCHMARKS.md's profile comes from).

    bench/.venv/bin/python bench/profile.py                       # CallModel, c=64, 20 s
    bench/.venv/bin/python bench/profile.py --mode grpc-tool --seconds 30 --native
    bench/.venv/bin/python bench/profile.py --top 40              # also print the top entries
    bench/.venv/bin/python bench/profile.py --traced --top 40     # tracing on: 100 %, OTLP/HTTP to a sink

One upstream (bench/cmd/upstream), one sidecar (bench/sidecar.yaml.tmpl, tracing off), the load
generator at ``--concurrency``; py-spy samples the sidecar for ``--seconds`` while the load runs
and writes its collapsed stacks (``--format raw``: one line per stack and its count; flamegraph.pl
or speedscope read it) to bench/results/raw/. ``--top`` prints the functions with the most samples: "self" (the
function itself running) and "total" (it or what it called), as shares of all samples.
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import time
from pathlib import Path

from run import (
    BIN,
    RAW,
    ROOT,
    TRACING_OFF_ENV,
    Bench,
    Proc,
    free_port,
    probe,
    start,
    start_sidecar,
    tracing_on_env,
    wait_http,
    write_sidecar_config,
)

PY_SPY = Path(sys.executable).parent / "py-spy"
DEFAULT_SECONDS = 20.0
DEFAULT_CONCURRENCY = 64
DEFAULT_RATE_HZ = 200  # py-spy's samples per second


def top(collapsed: Path, n: int) -> None:
    """Print the n frames with the most samples (self and total) from a collapsed-stack file."""
    self_count: collections.Counter[str] = collections.Counter()
    total_count: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        samples += count
        frames = stack.split(";")
        self_count[frames[-1]] += count
        for frame in set(frames):
            total_count[frame] += count
    print(f"{samples} samples")
    print("self %   frame")
    for frame, count in self_count.most_common(n):
        print(f"{count / samples * 100:6.1f}   {frame}")
    print("total %  frame")
    for frame, count in total_count.most_common(n):
        print(f"{count / samples * 100:6.1f}   {frame}")


def _own_config(b: Bench, template: Path) -> tuple[Proc, str]:
    port = free_port()
    cfg = write_sidecar_config(b, port, "profiled")
    text = template.read_text().replace("{{SIDECAR_PORT}}", str(port))
    cfg.write_text(text.replace("{{UPSTREAM_PORT}}", str(b.upstream_port)).replace("{{LOG_LEVEL}}", "WARNING"))
    argv = [*b.args.sidecar_cmd.split(), "--config", str(cfg)]
    proc = start("profiled", argv, env={"BENCH_KEY": b.key, "PYTHONUNBUFFERED": "1", **TRACING_OFF_ENV})
    target = f"127.0.0.1:{port}"
    if probe(proc, ["-mode", "grpc-model", "-target", target, "-probe", "60s", "-timeout", "5s"]) is not None:
        proc.stop()
        raise RuntimeError(f"the sidecar did not answer:\n{proc.tail()}")
    return proc, target


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", default="grpc-model", help="loadgen mode: grpc-model or grpc-tool")
    ap.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY)
    ap.add_argument("--seconds", type=float, default=DEFAULT_SECONDS, help="seconds sampled")
    ap.add_argument("--native", action="store_true", help="py-spy --native: C frames too (slower to sample)")
    ap.add_argument("--gil", action="store_true", help="py-spy --gil: only the thread holding the GIL (where CPU goes)")
    ap.add_argument("--top", type=int, default=0, help="print this many top frames")
    ap.add_argument("--sidecar-cmd", default=f"{ROOT / '.venv/bin/python'} -m sidecar serve")
    ap.add_argument("--traced", action="store_true", help="trace 100 %% of calls, batch-exported to an OTLP sink")
    ap.add_argument("--config", type=Path, help="a config template (default bench/sidecar.yaml.tmpl)")
    args = ap.parse_args(argv)
    RAW.mkdir(parents=True, exist_ok=True)
    key = "sk-bench-profile"
    port = free_port()
    upstream = start("upstream", [str(BIN / "upstream"), "-listen", f"127.0.0.1:{port}", "-key", key])
    procs = [upstream]
    try:
        if not wait_http(f"http://127.0.0.1:{port}/healthz", 10):
            print(f"the upstream did not start:\n{upstream.tail()}", file=sys.stderr)
            return 1
        args.sidecar_log_level, args.upstream_pid = "WARNING", upstream.pid
        b = Bench(args=args, upstream_port=port, key=key)
        if args.config is not None:  # the operator's template: only the listen address and upstream are filled in
            b.args.sidecar_cmd = args.sidecar_cmd
            sidecar, target = _own_config(b, args.config)
        else:
            b.args.sidecar_cmd = args.sidecar_cmd
            env = TRACING_OFF_ENV
            if args.traced:
                sink_port = free_port()
                procs.append(start("otlpsink", [str(BIN / "otlpsink"), "-listen", f"127.0.0.1:{sink_port}"]))
                env = tracing_on_env(sink_port)
            sidecar, target = start_sidecar(b, "profiled", env)
        procs.insert(0, sidecar)
        load = subprocess.Popen(
            [
                *(str(BIN / "loadgen"), "-mode", args.mode, "-c", str(args.concurrency), "-target", target),
                *("-d", f"{args.seconds + 4}s", "-warmup", "1s", "-o", str(RAW / "profile-load.json")),
            ],
            stdout=subprocess.DEVNULL,
        )
        time.sleep(2.0)
        out = RAW / f"profile-{args.mode}-c{args.concurrency}{'-traced' if args.traced else ''}"
        common = ["--pid", str(sidecar.pid), "--duration", str(int(args.seconds)), "--rate", str(DEFAULT_RATE_HZ)]
        common += ["--native"] if args.native else []
        common += ["--gil"] if args.gil else []
        record = [str(PY_SPY), "record", *common, "--threads"] + ([] if args.native else ["--nonblocking"])
        spy = subprocess.run(
            [*record, "--format", "raw", "-o", f"{out}.txt"], capture_output=True, text=True, check=False
        )
        load.wait()
        if spy.returncode != 0:
            print(spy.stderr, file=sys.stderr)
            return 1
        print(f"wrote {out}.txt (collapsed stacks)")
        if args.top:
            top(Path(f"{out}.txt"), args.top)
    finally:
        for p in procs:
            p.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
