"""The report of the `fleet` scenario (issue 12 item 5): fleet.md and fleet_cpu_workers.png.

    bench/.venv/bin/python bench/fleet_report.py     # rebuild both from bench/results/fleet.json

Each point of bench/results/fleet.json is one loadgen run of CallModel at one concurrency against
one sidecar variant, tagged ``variant`` and ``repeat``:

    variant      state backend   server processes
    memory-w1    memory          one
    redis-w1     redis           one
    redis-w2     redis           a supervisor and two workers (--workers 2, SO_REUSEPORT)

Per variant: the median and the spread (min-max) over the repeats of the sidecar's CPU seconds
per 1,000 calls (every process of it: utime + stime from /proc) and of calls per second; and the
CPU the upstream and the load generator used beside it, which share the same two cores, and what
other work on the machine took meanwhile (``other_cores``: /proc/stat's busy time less the
benchmark's own processes', per second of the point).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
VARIANTS = ("memory-w1", "redis-w1", "redis-w2")
TARGET_CPU_S_PER_1K = 2.0  # one worker, memory backend, c=64
TARGET_REDIS_EXTRA = 0.10  # redis costs at most this much more CPU per call than memory
TARGET_WORKERS_SPEEDUP = 1.5  # --workers 2 over one worker


def _stats(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def summarize(points: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per variant: medians and spreads of CPU per 1,000 calls and throughput, and the machine's share."""
    out: dict[str, dict[str, Any]] = {}
    for variant in VARIANTS:
        pts = [p for p in points if p.get("variant") == variant and p["process"]["cpu_s_per_1k"] is not None]
        if not pts:
            continue
        busy = [(p["process"]["cpu_s"] + p["upstream"]["cpu_s"] + p["loadgen_cpu_s"]) / p["point_wall_s"] for p in pts]
        out[variant] = {
            "repeats": len(pts),
            "concurrency": pts[0]["concurrency"],
            "cpu_s_per_1k": _stats([p["process"]["cpu_s_per_1k"] for p in pts]),
            "rps": _stats([p["throughput_rps"] for p in pts]),
            "p50_ms": statistics.median(p["latency_ms"]["p50"] for p in pts),
            "failed": sum(p["failed"] for p in pts),
            "cores_busy": statistics.median(busy),
            "sidecar_cores": statistics.median(p["process"]["cpu_s"] / p["point_wall_s"] for p in pts),
            "other_cores": statistics.median(p.get("other_cores", 0.0) for p in pts),
        }
    return out


def verdicts(s: dict[str, dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    rows: list[tuple[str, str, str, str]] = []
    mem, red, w2 = s.get("memory-w1"), s.get("redis-w1"), s.get("redis-w2")
    if mem:
        v = mem["cpu_s_per_1k"][0]
        rows.append(
            (
                "sidecar CPU per 1,000 CallModel, c=64, one worker (memory)",
                f"≤ {TARGET_CPU_S_PER_1K:.1f} s",
                f"{v:.2f} s ({mem['cpu_s_per_1k'][1]:.2f}–{mem['cpu_s_per_1k'][2]:.2f})",
                "met" if v <= TARGET_CPU_S_PER_1K else f"missed by {(v / TARGET_CPU_S_PER_1K - 1) * 100:.0f} %",
            )
        )
    if mem and red:
        extra = red["cpu_s_per_1k"][0] / mem["cpu_s_per_1k"][0] - 1
        rows.append(
            (
                "redis backend's extra CPU per call over memory, c=64",
                f"≤ {TARGET_REDIS_EXTRA * 100:.0f} %",
                f"{extra * 100:+.0f} % ({red['cpu_s_per_1k'][0]:.2f} vs {mem['cpu_s_per_1k'][0]:.2f} s)",
                "met" if extra <= TARGET_REDIS_EXTRA else f"missed by {(extra - TARGET_REDIS_EXTRA) * 100:.0f} points",
            )
        )
    if red and w2:
        ratio = w2["rps"][0] / red["rps"][0]
        rows.append(
            (
                "throughput, --workers 2 ÷ one worker (redis), c=64",
                f"≥ {TARGET_WORKERS_SPEEDUP:.1f}×",
                f"{ratio:.2f}× ({w2['rps'][0]:,.0f} vs {red['rps'][0]:,.0f}/s)",
                "met" if ratio >= TARGET_WORKERS_SPEEDUP else "missed",
            )
        )
    return rows


def fleet_md(s: dict[str, dict[str, Any]]) -> str:
    lines = ["| target | limit | measured (median, min–max) | verdict |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in verdicts(s)]
    lines += [
        "",
        "| variant | conc. | repeats | CPU s / 1k calls | calls/s | p50 ms | failed | sidecar cores "
        "| cores, all its parts | cores, other work |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for variant, v in s.items():
        cpu, rps = v["cpu_s_per_1k"], v["rps"]
        lines.append(
            f"| {variant} | {v['concurrency']} | {v['repeats']} | {cpu[0]:.2f} ({cpu[1]:.2f}–{cpu[2]:.2f}) | "
            f"{rps[0]:,.0f} ({rps[1]:,.0f}–{rps[2]:,.0f}) | {v['p50_ms']:.1f} | {v['failed']} | "
            f"{v['sidecar_cores']:.2f} | {v['cores_busy']:.2f} | {v['other_cores']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def plot(s: dict[str, dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(s)
    fig, (ax_cpu, ax_rps) = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, label in ((ax_cpu, "cpu_s_per_1k", "sidecar CPU s per 1,000 CallModel"), (ax_rps, "rps", "calls/s")):
        med = [s[n][key][0] for n in names]
        low = [s[n][key][0] - s[n][key][1] for n in names]
        high = [s[n][key][2] - s[n][key][0] for n in names]
        ax.bar(names, med, yerr=[low, high], capsize=6, color=["#4c72b0", "#dd8452", "#55a868"][: len(names)])
        ax.set_ylabel(label)
        ax.grid(axis="y", alpha=0.3)
    ax_cpu.axhline(TARGET_CPU_S_PER_1K, color="red", linestyle="--", label=f"target {TARGET_CPU_S_PER_1K:.1f} s")
    if "memory-w1" in s:
        limit = s["memory-w1"]["cpu_s_per_1k"][0] * (1 + TARGET_REDIS_EXTRA)
        ax_cpu.axhline(limit, color="gray", linestyle=":", label="memory + 10 %")
    ax_cpu.legend(fontsize=8)
    if "redis-w1" in s:
        goal = s["redis-w1"]["rps"][0] * TARGET_WORKERS_SPEEDUP
        ax_rps.axhline(goal, color="red", linestyle="--", label="1.5 × redis-w1")
        ax_rps.legend(fontsize=8)
    conc = next(iter(s.values()))["concurrency"]
    fig.suptitle(f"CallModel at c={conc}: median of the repeats, bars = min-max")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(points: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    s = summarize(points)
    (RESULTS / "fleet.md").write_text(fleet_md(s))
    if s:
        plot(s, RESULTS / "fleet_cpu_workers.png")
    return s


def main() -> int:
    points = json.loads((RESULTS / "fleet.json").read_text())
    write(points)
    print((RESULTS / "fleet.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
