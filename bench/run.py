"""Run every benchmark scenario in one go and write the results.

    bench/.venv/bin/python bench/run.py            # everything (what `make bench` runs)
    bench/.venv/bin/python bench/run.py --quick    # 2 s per point: a smoke test of the harness
    bench/.venv/bin/python bench/run.py --only direct,litellm

One upstream (bench/cmd/upstream) serves every path, so the paths differ only in
what sits between the load generator (bench/cmd/loadgen) and that upstream:

    direct     loadgen --HTTP--> upstream                       the floor
    sidecar    loadgen --gRPC--> sidecar --HTTP--> upstream     CallModel, ExecuteTool
    traced     the same, with 100 % of traces batch-exported to a local OTLP sink
    tracing_ab the same build twice, traced beside untraced, in alternating bursts (bench/ab.py
               --traced): the paired throughput ratio, the figure the tracing target reads
    litellm    loadgen --HTTP--> LiteLLM proxy --HTTP--> upstream

Every point runs at a fixed concurrency for a fixed time (closed loop). For the
process under test (sidecar, LiteLLM proxy, upstream) CPU seconds come from
/proc/PID/stat (utime + stime, the process and its descendants) before and after
the point, and peak RSS from VmHWM in /proc/PID/status, reset before each point
by writing 5 to /proc/PID/clear_refs.

Outputs, in bench/results/: one JSON file per group of scenarios, `summary.md`
(the tables, with the targets), and `latency_vs_concurrency.png`. Raw loadgen
output, the generated configs and the processes' logs go to bench/results/raw/.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, Unpack

from report import GROUPS, TRACING_AB, closed, fmt, write_results
from scenario_hedge import scenario_hedge
from scenario_http import scenario_http
from scenario_image import scenario_image
from scenario_stream import scenario_stream

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
BIN = BENCH / ".bin"
RESULTS = BENCH / "results"
RAW = RESULTS / "raw"

CONCURRENCIES = (1, 16, 64, 256)
FAULT_MIX = {"p429": 0.20, "p500": 0.05}
FAULT_CONCURRENCY = 16
RSS_IN_FLIGHT = 1000
RSS_UPSTREAM_DELAY_MS = 200  # keeps the 1,000 calls in flight inside the sidecar, awaiting the upstream
PACED_CONCURRENCY = 16
PACED_RATE = 500.0  # requests per second for the paced points ...
PACED_FRACTION = 0.5  # ... or this share of the path's closed-loop throughput at that concurrency, if lower
TRACED_POINTS = (("grpc-model", 1), ("grpc-model", 16), ("grpc-model", 64), ("grpc-tool", 64))
AB_ROUNDS, AB_BURST_S = 10, 3.0  # the paired tracing A/B (bench/ab.py): about two minutes
AB_QUICK_ROUNDS, AB_QUICK_BURST_S = 2, 2.0
IDLE_CPU_SHARE = 0.05  # after a point, wait until the watched process is this idle ...
IDLE_SAMPLE_S = 0.5  # ... over this long ...
IDLE_LIMIT_S = 60.0  # ... or this long has passed
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


# Tracing off: the sidecar sets no SDK up at all (its OpenTelemetry API calls stay no-ops).
TRACING_OFF_ENV = {"OTEL_SDK_DISABLED": "true"}


def tracing_on_env(sink_port: int) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink_port}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_TRACES_SAMPLER": "always_on",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_SERVICE_NAME": "sidecar-bench",
    }


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read() or b"null")


def wait_http(url: str, limit: float) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            urllib.request.urlopen(url, timeout=2).read()
            return True
        time.sleep(0.2)
    return False


# --------------------------------------------------------------------------- processes


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def process_tree(pid: int) -> list[int]:
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(_children(p))
    return tree


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process and its live descendants, in seconds."""
    total = 0
    for p in process_tree(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat)
    return total / CLK_TCK


def _status_kb(pid: int, key: str) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def peak_rss_mb(pid: int) -> float:
    """VmHWM of the process plus that of its descendants, in MiB."""
    return sum(_status_kb(p, "VmHWM") for p in process_tree(pid)) / 1024


def reset_peak_rss(pid: int) -> bool:
    ok = True
    for p in process_tree(pid):
        try:
            Path(f"/proc/{p}/clear_refs").write_text("5")
        except OSError:
            ok = False
    return ok


def wait_idle(proc: Proc, limit: float = IDLE_LIMIT_S) -> float:
    """Wait until `proc` uses under IDLE_CPU_SHARE of a core; return how long that took.

    A server that does not stop work on a cancelled request (the calls still in flight
    when a point ends) would otherwise carry that backlog into the next point.
    """
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit and proc.alive():
        c0 = cpu_seconds(proc.pid)
        time.sleep(IDLE_SAMPLE_S)
        if cpu_seconds(proc.pid) - c0 < IDLE_CPU_SHARE * IDLE_SAMPLE_S:
            break
    return time.monotonic() - t0


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self) -> None:
        if not self.alive():
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=5)


def start(name: str, argv: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> Proc:
    log_path = RAW / "logs" / f"{name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    full_env = {**inherited, **(env or {})}
    with open(log_path, "wb") as out:
        popen = subprocess.Popen(  # its own process group, so stop() ends it and its children only
            argv, stdout=out, stderr=subprocess.STDOUT, env=full_env, cwd=cwd, start_new_session=True
        )
    return Proc(name, popen, log_path)


# --------------------------------------------------------------------------- points


class LoadgenFlags(TypedDict, total=False):
    """loadgen's flags for what a point aims at and how hard (each given only when set)."""

    url: str
    target: str
    headers: tuple[str, ...]
    rate: float
    conns: int
    model: str
    image_bytes: int


@dataclass
class Bench:
    args: argparse.Namespace
    upstream_port: int
    key: str
    points: list[dict[str, Any]] = field(default_factory=list)

    @property
    def upstream(self) -> str:
        return f"http://127.0.0.1:{self.upstream_port}"

    def set_faults(self, **mix: float) -> None:
        mix = {"p429": 0, "p500": 0, "delay_ms": 0, "p_slow": 0, "slow_ms": 0, **mix}
        query = "&".join(f"{k}={v}" for k, v in mix.items())
        http_get(f"{self.upstream}/_faults?{query}")

    def upstream_stats(self, reset: bool = True) -> dict[str, Any]:
        return dict(http_get(f"{self.upstream}/_stats" + ("?reset=1" if reset else "")))

    def loadgen(
        self,
        name: str,
        mode: str,
        concurrency: int,
        *,
        duration: float | None = None,
        timeout: float = 30.0,
        watch: Proc | None = None,
        extra: dict[str, Any] | None = None,
        **flags: Unpack[LoadgenFlags],
    ) -> dict[str, Any]:
        """One point: loadgen against one endpoint, with the watched process's CPU and peak RSS."""
        duration = self.args.duration if duration is None else duration
        out = RAW / f"{name}.json"
        argv = [
            str(BIN / "loadgen"),
            "-mode",
            mode,
            "-c",
            str(concurrency),
            "-d",
            f"{duration}s",
            "-warmup",
            f"{self.args.warmup}s",
            "-timeout",
            f"{timeout}s",
            "-label",
            name,
            "-o",
            str(out),
        ]
        for flag in ("url", "target", "rate", "conns", "model", "image_bytes"):
            if value := flags.get(flag):
                argv += [f"-{flag.replace('_', '-')}", str(value)]
        for h in flags.get("headers", ()):
            argv += ["-H", h]
        if watch is not None and not watch.alive():
            raise RuntimeError(f"{watch.name} is not running:\n{watch.tail()}")
        up_pid = self.args.upstream_pid
        if watch is not None:
            wait_idle(watch)
        self.upstream_stats(reset=True)
        rss_reset = reset_peak_rss(watch.pid) if watch else False
        cpu0 = cpu_seconds(watch.pid) if watch else 0.0
        up0 = cpu_seconds(up_pid)
        t0 = time.monotonic()
        lg = subprocess.Popen(argv)
        _, status, rusage = os.wait4(lg.pid, 0)
        wall = time.monotonic() - t0
        cpu1 = cpu_seconds(watch.pid) if watch else 0.0
        up1 = cpu_seconds(up_pid)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"loadgen failed for {name}")
        ustats = self.upstream_stats(reset=True)
        settle = wait_idle(watch) if watch else 0.0
        result: dict[str, Any] = json.loads(out.read_text())
        calls = int(result["completed_total"])

        def per_1k(cpu: float) -> float | None:
            return round(cpu / calls * 1000, 4) if calls else None

        result["name"] = name
        result["upstream"] = {
            "attempts": ustats["chat"]["attempts"] + ustats["search"]["attempts"],
            "chat": ustats["chat"],
            "search": ustats["search"],
            "cpu_s": round(up1 - up0, 3),
            "cpu_s_per_1k": per_1k(up1 - up0),
        }
        result["loadgen_cpu_s"] = round(rusage.ru_utime + rusage.ru_stime, 3)
        result["point_wall_s"] = round(wall, 3)
        result["settle_s"] = round(settle, 2)
        if watch is not None:
            result["process"] = {
                "name": watch.name,
                "cpu_s": round(cpu1 - cpu0, 3),
                "cpu_s_per_1k": per_1k(cpu1 - cpu0),
                "peak_rss_mb": round(peak_rss_mb(watch.pid), 1),
                "peak_rss_reset": rss_reset,
                "alive_after": watch.alive(),
            }
        result.update(extra or {})
        lat = result["latency_ms"]
        log(
            f"{name:<34} ok {result['ok']:>7} fail {result['failed']:>5}  "
            f"{result['throughput_rps']:>9.1f}/s  p50 {lat.get('p50', float('nan')):>8.2f}  "
            f"p99 {lat.get('p99', float('nan')):>8.2f} ms"
            + (
                f"  cpu/1k {fmt(result['process']['cpu_s_per_1k'], 3)}s rss {result['process']['peak_rss_mb']:.0f}MB"
                if watch
                else ""
            )
        )
        self.points.append(result)
        return result


# --------------------------------------------------------------------------- scenarios


def scenario_direct(b: Bench) -> list[dict[str, Any]]:
    chat = f"{b.upstream}/v1/chat/completions"
    tool = f"{b.upstream}/search?q={{query}}"
    auth = (f"authorization: Bearer {b.key}",)
    out = []
    for c in b.args.concurrency:
        out.append(b.loadgen(f"direct-chat-c{c}", "http-chat", c, url=chat, headers=auth, extra=_tag("direct", "chat")))
    for c in b.args.concurrency:
        out.append(b.loadgen(f"direct-tool-c{c}", "http-tool", c, url=tool, extra=_tag("direct", "tool")))
    out.append(
        b.loadgen(
            f"direct-chat-c{PACED_CONCURRENCY}-paced",
            "http-chat",
            PACED_CONCURRENCY,
            url=chat,
            headers=auth,
            rate=PACED_RATE,
            extra=_tag("direct", "chat", paced=True),
        )
    )
    # The fault mix with no retry layer at all: what a caller sees without one.
    mix = ",".join(f"{k}={v}" for k, v in FAULT_MIX.items())
    out.append(
        b.loadgen(
            f"direct-chat-c{FAULT_CONCURRENCY}-faults",
            "http-chat",
            FAULT_CONCURRENCY,
            url=chat,
            headers=(*auth, f"x-bench-faults: {mix}"),
            extra=_tag("direct", "chat", faults=True),
        )
    )
    return out


def _tag(path: str, op: str, **kw: Any) -> dict[str, Any]:
    return {
        "path": path,
        "op": op,
        "paced": False,
        "faults": False,
        "traced": False,
        "rss_probe": False,
        "variant": "",
        **kw,
    }


def write_sidecar_config(b: Bench, port: int, name: str) -> Path:
    text = (BENCH / "sidecar.yaml.tmpl").read_text()
    text = text.replace("{{SIDECAR_PORT}}", str(port)).replace("{{UPSTREAM_PORT}}", str(b.upstream_port))
    text = text.replace("{{LOG_LEVEL}}", b.args.sidecar_log_level)
    path = RAW / f"{name}.yaml"
    path.write_text(text)
    return path


def start_sidecar(b: Bench, name: str, env: dict[str, str]) -> tuple[Proc, str]:
    port = free_port()
    cfg = write_sidecar_config(b, port, name)
    argv = [*b.args.sidecar_cmd.split(), "--config", str(cfg)]
    return _serving(b, name, argv, port, env)


def start_relay(b: Bench, name: str, client: str) -> tuple[Proc, str]:
    """bench/relay_floor.py (the streaming scenario's runtime floor) in the sidecar's virtualenv, its
    provider read with ``client`` (aiohttp | httpx-sse)."""
    port = free_port()
    python = b.args.sidecar_cmd.split()[0]
    argv = [python, str(BENCH / "relay_floor.py"), "--listen", f"127.0.0.1:{port}", "--upstream", b.upstream]
    return _serving(b, name, [*argv, "--client", client], port, {})


def _serving(b: Bench, name: str, argv: list[str], port: int, env: dict[str, str]) -> tuple[Proc, str]:
    """``argv`` started, once a CallModel through it on ``port`` has succeeded: the process and its target."""
    proc = start(name, argv, env={"BENCH_KEY": b.key, "PYTHONUNBUFFERED": "1", **env})
    target = f"127.0.0.1:{port}"
    error = probe(proc, ["-mode", "grpc-model", "-target", target, "-probe", "60s", "-timeout", "5s"])
    if error is not None:
        proc.stop()
        raise RuntimeError(f"{name} did not answer CallModel: {error}\n{proc.tail()}")
    return proc, target


def probe(proc: Proc, loadgen_args: list[str]) -> str | None:
    """Wait until one call through `proc` succeeds; None when it did, else why not."""
    with subprocess.Popen([str(BIN / "loadgen"), *loadgen_args], stderr=subprocess.PIPE, text=True) as p:
        while p.poll() is None:
            if not proc.alive():
                p.kill()
                p.wait()
                return f"{proc.name} exited with status {proc.popen.returncode}"
            time.sleep(0.2)
        err = p.stderr.read().strip() if p.stderr else ""
    return None if p.returncode == 0 and proc.alive() else err


def scenario_sidecar(b: Bench) -> list[dict[str, Any]]:
    proc, target = start_sidecar(b, "sidecar", TRACING_OFF_ENV)
    out = []
    try:
        for c in b.args.concurrency:
            out.append(
                b.loadgen(
                    f"sidecar-model-c{c}", "grpc-model", c, target=target, watch=proc, extra=_tag("sidecar", "chat")
                )
            )
        for c in b.args.concurrency:
            out.append(
                b.loadgen(
                    f"sidecar-tool-c{c}", "grpc-tool", c, target=target, watch=proc, extra=_tag("sidecar", "tool")
                )
            )
        rate = paced_rate(b, "sidecar")
        out.append(
            b.loadgen(
                f"sidecar-model-c{PACED_CONCURRENCY}-paced",
                "grpc-model",
                PACED_CONCURRENCY,
                target=target,
                rate=rate,
                watch=proc,
                extra=_tag("sidecar", "chat", paced=True),
            )
        )
        # Peak RSS with 1,000 calls in flight: the upstream holds each reply a while so
        # the calls are really inside the sidecar, waiting, not queued in the client.
        b.set_faults(delay_ms=RSS_UPSTREAM_DELAY_MS)
        try:
            out.append(
                b.loadgen(
                    f"sidecar-model-c{RSS_IN_FLIGHT}-inflight",
                    "grpc-model",
                    RSS_IN_FLIGHT,
                    target=target,
                    duration=b.args.rss_duration,
                    watch=proc,
                    extra=_tag("sidecar", "chat", rss_probe=True, upstream_delay_ms=RSS_UPSTREAM_DELAY_MS),
                )
            )
        finally:
            b.set_faults()
        # Last: the fault mix leaves the faulted model's shared throttle raised for minutes.
        b.set_faults(**FAULT_MIX)
        try:
            for model, variant in (("bench-model", ""), ("bench-model-rpm", "rpm")):
                name = f"sidecar-model-c{FAULT_CONCURRENCY}-faults" + (f"-{variant}" if variant else "")
                out.append(
                    b.loadgen(
                        name,
                        "grpc-model",
                        FAULT_CONCURRENCY,
                        target=target,
                        model=model,
                        watch=proc,
                        extra=_tag("sidecar", "chat", faults=True, variant=variant),
                    )
                )
        finally:
            b.set_faults()
    finally:
        proc.stop()
    return out


def paced_rate(b: Bench, path: str) -> float:
    """PACED_RATE, or half of what the path sustained closed-loop at PACED_CONCURRENCY if that is less."""
    base = closed(b.points, path, "chat", PACED_CONCURRENCY)
    if base is None or not base["throughput_rps"]:
        return PACED_RATE
    return float(min(PACED_RATE, max(round(base["throughput_rps"] * PACED_FRACTION), 1)))


def scenario_traced(b: Bench) -> list[dict[str, Any]]:
    sink_port = free_port()
    sink = start("otlpsink", [str(BIN / "otlpsink"), "-listen", f"127.0.0.1:{sink_port}"])
    out = []
    try:
        if not wait_http(f"http://127.0.0.1:{sink_port}/_stats", 10):
            raise RuntimeError(f"the OTLP sink did not start:\n{sink.tail()}")
        proc, target = start_sidecar(b, "sidecar-traced", tracing_on_env(sink_port))
        try:
            for mode, c in TRACED_POINTS:
                if c not in b.args.concurrency:
                    continue
                http_get(f"http://127.0.0.1:{sink_port}/_stats?reset=1")
                op = "chat" if mode == "grpc-model" else "tool"
                short = "model" if op == "chat" else "tool"
                r = b.loadgen(
                    f"traced-{short}-c{c}", mode, c, target=target, watch=proc, extra=_tag("sidecar", op, traced=True)
                )
                time.sleep(b.args.export_settle)  # let the batch processor flush what it holds
                r["otlp_sink"] = http_get(f"http://127.0.0.1:{sink_port}/_stats?reset=1")
                out.append(r)
        finally:
            proc.stop()
    finally:
        sink.stop()
    return out


def scenario_tracing_ab(b: Bench) -> list[dict[str, Any]]:
    """Tracing's cost as a paired A/B (bench/ab.py --traced): one build twice, B traced, A not, short
    bursts to each in turn; the ratio B/A and its quartiles go to tracing_ab.json (report.py reads it)."""
    rounds, burst = (AB_QUICK_ROUNDS, AB_QUICK_BURST_S) if b.args.quick else (AB_ROUNDS, AB_BURST_S)
    argv = [sys.executable, str(BENCH / "ab.py"), "--traced", "--rounds", str(rounds), "--burst", f"{burst:g}"]
    argv += ["--a", b.args.sidecar_cmd, "--b", b.args.sidecar_cmd, "--out", str(TRACING_AB)]
    done = subprocess.run(argv, check=False, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    (RAW / "tracing_ab.log").write_text(done.stdout)
    if done.returncode != 0:
        raise RuntimeError(f"bench/ab.py --traced failed ({done.returncode}): {done.stdout[-500:]}")
    for line in done.stdout.splitlines()[-3:]:
        log(f"tracing A/B: {line}")
    return []


def write_litellm_config(b: Bench) -> Path:
    text = (BENCH / "litellm.yaml.tmpl").read_text().replace("{{UPSTREAM_PORT}}", str(b.upstream_port))
    path = RAW / "litellm.yaml"
    path.write_text(text)
    return path


def scenario_litellm(b: Bench) -> list[dict[str, Any]]:
    exe = BENCH / ".venv-litellm" / "bin" / "litellm"
    if not exe.exists():
        raise RuntimeError(f"{exe} is missing: run `make bench-litellm`")
    port = free_port()
    cfg = write_litellm_config(b)
    master = "sk-" + secrets.token_hex(32)
    auth = (f"authorization: Bearer {master}",)
    env = {
        "BENCH_KEY": b.key,
        "LITELLM_MASTER_KEY": master,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # never fetch the cost map from the network
        "LITELLM_LOG": "ERROR",
        "LITELLM_TELEMETRY": "False",
        "DISABLE_SCHEMA_UPDATE": "True",
    }
    argv = [str(exe), "--config", str(cfg), "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"]
    proc = start("litellm", argv, env=env)
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    out = []
    try:
        error = probe(proc, ["-mode", "http-chat", "-url", url, "-H", auth[0], "-probe", "180s", "-timeout", "10s"])
        if error is not None:
            raise RuntimeError(f"LiteLLM did not answer: {error}\n{proc.tail()}")
        for c in b.args.concurrency:
            out.append(
                b.loadgen(
                    f"litellm-chat-c{c}",
                    "http-chat",
                    c,
                    url=url,
                    headers=auth,
                    watch=proc,
                    extra=_tag("litellm", "chat"),
                )
            )
        out.append(
            b.loadgen(
                f"litellm-chat-c{PACED_CONCURRENCY}-paced",
                "http-chat",
                PACED_CONCURRENCY,
                url=url,
                headers=auth,
                rate=paced_rate(b, "litellm"),
                watch=proc,
                extra=_tag("litellm", "chat", paced=True),
            )
        )
        b.set_faults(**FAULT_MIX)
        try:
            out.append(
                b.loadgen(
                    f"litellm-chat-c{FAULT_CONCURRENCY}-faults",
                    "http-chat",
                    FAULT_CONCURRENCY,
                    url=url,
                    headers=auth,
                    watch=proc,
                    extra=_tag("litellm", "chat", faults=True),
                )
            )
        finally:
            b.set_faults()
    finally:
        proc.stop()
    return out


# --------------------------------------------------------------------------- fleet (issue 12 item 5)

FLEET_CONCURRENCY = 64
FLEET_REPEATS = 3  # each variant measured this many times, the variants interleaved round by round
FLEET_WORKERS = 2
FLEET_CONNS = 16  # gRPC connections from the load generator: SO_REUSEPORT spreads connections, not calls
FLEET_STATE = """
state:
  backend: redis
  url: "${{REDIS_URL}}"
  prefix: bench-{variant}
"""


def _fleet_sidecar(b: Bench, variant: str, redis_url: str | None, workers: int) -> tuple[Proc, str]:
    port = free_port()
    cfg = write_sidecar_config(b, port, f"fleet-{variant}")
    if redis_url is not None:
        cfg.write_text(cfg.read_text() + FLEET_STATE.format(variant=variant))
    argv = [*b.args.sidecar_cmd.split(), "--config", str(cfg), "--workers", str(workers)]
    env = {"BENCH_KEY": b.key, "PYTHONUNBUFFERED": "1", **TRACING_OFF_ENV}
    if redis_url is not None:
        env["REDIS_URL"] = redis_url
    proc = start(f"fleet-{variant}", argv, env=env)
    target = f"127.0.0.1:{port}"
    error = probe(proc, ["-mode", "grpc-model", "-target", target, "-probe", "60s", "-timeout", "5s"])
    if error is not None:
        proc.stop()
        raise RuntimeError(f"fleet-{variant} did not answer CallModel: {error}\n{proc.tail()}")
    return proc, target


def _machine_busy_s() -> float:
    """CPU seconds every core has spent busy since boot (/proc/stat: all but idle and iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8]]
    return (sum(fields) - fields[3] - fields[4]) / CLK_TCK


def scenario_fleet(b: Bench) -> list[dict[str, Any]]:
    """CallModel at c=64: one worker on the memory backend, one and FLEET_WORKERS workers on a real Redis;
    then what each call costs Redis (``bench/fleet.py cost``, single and ``--cluster``, and ``capacity``).

    Every sidecar is started first and the variants take turns, FLEET_REPEATS rounds, so that
    whatever else runs on the machine meets them alike; fleet_report.py writes fleet.md and the plot.
    """
    import fleet_report

    exe = shutil.which("redis-server")
    if exe is None:
        raise RuntimeError("redis-server is not on PATH: run `make redis-server`")
    redis_port = free_port()
    redis = start("redis", [exe, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
    url = f"redis://127.0.0.1:{redis_port}/0"
    procs: list[tuple[str, Proc, str]] = []
    out: list[dict[str, Any]] = []
    try:
        for variant, redis_url, workers in (("memory-w1", None, 1), ("redis-w1", url, 1), ("redis-w2", url, 2)):
            procs.append((variant, *_fleet_sidecar(b, variant, redis_url, workers)))
        c = FLEET_CONCURRENCY
        for r in range(FLEET_REPEATS):
            for variant, proc, target in procs if r % 2 == 0 else reversed(procs):
                busy0, t0 = _machine_busy_s(), time.monotonic()
                point = b.loadgen(
                    f"fleet-{variant}-c{c}-r{r}",
                    "grpc-model",
                    c,
                    target=target,
                    conns=FLEET_CONNS,
                    watch=proc,
                    extra=_tag("fleet", "chat", variant=variant, repeat=r, conns=FLEET_CONNS),
                )
                # The cores that processes other than the benchmark's own used meanwhile (a shared machine).
                ours = point["process"]["cpu_s"] + point["upstream"]["cpu_s"] + point["loadgen_cpu_s"]
                point["other_cores"] = round(max(_machine_busy_s() - busy0 - ours, 0.0) / (time.monotonic() - t0), 2)
                out.append(point)
    finally:
        for _, proc, _ in procs:
            proc.stop()
        redis.stop()
    fleet_report.write(out)
    # What the fleet costs Redis per call, on one Redis and on a cluster, and what a shard takes (issue 39
    # part 3): bench/fleet.py in the sidecar's virtualenv, results/fleet_cost*.json and fleet_capacity.json.
    for what in (["cost"], ["cost", "--cluster"], ["capacity"]):
        subprocess.run([str(ROOT / ".venv/bin/python"), str(ROOT / "bench/fleet.py"), *what], check=True)
    return out


SCENARIOS = {
    "direct": scenario_direct,
    "sidecar": scenario_sidecar,
    "traced": scenario_traced,
    "tracing_ab": scenario_tracing_ab,
    "litellm": scenario_litellm,
    "http": scenario_http,
    "image": scenario_image,
    "stream": lambda b: scenario_stream(b, start_sidecar, start_relay, _tag),
    "hedge": lambda b: scenario_hedge(b, start_sidecar, _tag),
    "fleet": scenario_fleet,
}


# --------------------------------------------------------------------------- report


def machine_info() -> dict[str, Any]:
    cpu = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_kb = _meminfo("MemTotal")

    def version(argv: list[str]) -> str:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False).stdout.strip()
        return ""

    return {
        "cpus": os.cpu_count(),
        "cpu_model": cpu,
        "mem_gib": round(mem_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "go": version(["go", "version"]),
        "litellm": version(
            [
                str(BENCH / ".venv-litellm/bin/python"),
                "-c",
                "import importlib.metadata as m; print(m.version('litellm'))",
            ]
        ),
        "git_commit": version(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]),
        "sidecar_dirty": bool(version(["git", "-C", str(ROOT), "status", "--porcelain", "--", "sidecar"])),
    }


def _meminfo(key: str) -> int:
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=10.0, help="measured seconds per point (default 10)")
    ap.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds per point, not counted (default 1)")
    ap.add_argument("--rss-duration", type=float, default=5.0, help="measured seconds of the 1,000-in-flight point")
    ap.add_argument("--concurrency", default=",".join(map(str, CONCURRENCIES)), help="comma-separated levels")
    ap.add_argument("--only", default=",".join(SCENARIOS), help=f"comma-separated subset of {','.join(SCENARIOS)}")
    ap.add_argument("--quick", action="store_true", help="2 s points, 0.5 s warm-up: a smoke test of the harness")
    ap.add_argument(
        "--sidecar-cmd",
        default=f"{ROOT / '.venv/bin/python'} -m sidecar serve",
        help="how to start the sidecar (--config FILE is appended)",
    )
    ap.add_argument("--sidecar-log-level", default="WARNING", help="the sidecar's telemetry.log_level")
    ap.add_argument(
        "--export-settle",
        type=float,
        default=6.0,
        help="seconds to wait after a traced point for the batch exporter to flush",
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.duration, args.warmup, args.rss_duration, args.export_settle = 2.0, 0.5, 2.0, 6.0
    args.concurrency = [int(c) for c in args.concurrency.split(",") if c]
    args.only = [s for s in args.only.split(",") if s]
    unknown = set(args.only) - set(SCENARIOS)
    if unknown:
        ap.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for tool in ("upstream", "loadgen", "otlpsink"):
        if not (BIN / tool).exists():
            print(f"{BIN / tool} is missing: run `make bench-build`", file=sys.stderr)
            return 2
    if RAW.exists():
        shutil.rmtree(RAW)
    RAW.mkdir(parents=True)
    if set(args.only) == set(SCENARIOS):  # a whole run replaces every group; a partial one only its own
        for stale in [*(RESULTS / f"{g}.json" for g in GROUPS), TRACING_AB, RESULTS / "summary.md"]:
            stale.unlink(missing_ok=True)

    started = time.time()
    loadavg_before = Path("/proc/loadavg").read_text().split()[:3]
    key = "sk-bench-" + secrets.token_hex(12)
    port = free_port()
    upstream = start("upstream", [str(BIN / "upstream"), "-listen", f"127.0.0.1:{port}", "-key", key])
    points: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    try:
        if not wait_http(f"http://127.0.0.1:{port}/healthz", 10):
            print(f"the upstream did not start:\n{upstream.tail()}", file=sys.stderr)
            return 1
        args.upstream_pid = upstream.pid
        b = Bench(args=args, upstream_port=port, key=key)
        for name in args.only:
            log(f"scenario {name}")
            try:
                SCENARIOS[name](b)
            except (RuntimeError, OSError, urllib.error.URLError) as exc:
                skipped[name] = str(exc)
                log(f"scenario {name} skipped: {exc}")
                b.set_faults()
        points = b.points
    finally:
        upstream.stop()
        meta = {
            "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started)),
            "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "wall_s": time.time() - started,
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "loadavg_before": " ".join(loadavg_before),
            "loadavg_after": " ".join(Path("/proc/loadavg").read_text().split()[:3]),
            "machine": machine_info(),
            "fault_mix": FAULT_MIX,
            "argv": sys.argv[1:],
        }
        write_results(points, meta, skipped)
    log(f"wrote {RESULTS / 'summary.md'} ({len(points)} points, {time.time() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
