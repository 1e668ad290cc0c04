"""The report of a benchmark run: summary.md (tables and targets) and the plot.

    bench/.venv/bin/python bench/report.py     # rebuild both from bench/results/*.json

bench/run.py calls write_results() at the end of a run; this module only reads the
points it measured (each a loadgen result plus the runner's fields: path, op,
concurrency, paced, faults, traced, rss_probe, variant, process, upstream).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
TRACING_AB = RESULTS / "tracing_ab.json"
"""The paired tracing A/B of the run (run.py's ``tracing_ab``: bench/ab.py --traced --out)."""
GROUPS = ("direct", "sidecar", "litellm", "sidecar_traced", "faults", "rss_in_flight", "http", "stream", "image", "hedge")

# The targets of the issue, checked in summary.md.
TARGET_ADDED_P50_MS = 0.5
TARGET_ADDED_P99_MS = 2.0
TARGET_RPS_C64 = 3000.0
TARGET_VS_LITELLM = 5.0
TARGET_CPU_S_PER_1K = 0.5
TARGET_RSS_MB = 150.0
TARGET_TRACING_COST = 0.15


def find(points: list[dict[str, Any]], **want: Any) -> dict[str, Any] | None:
    for p in points:
        if all(p.get(k) == v for k, v in want.items()):
            return p
    return None


def closed(points: list[dict[str, Any]], path: str, op: str, c: int, traced: bool = False) -> dict[str, Any] | None:
    return find(points, path=path, op=op, concurrency=c, paced=False, faults=False, traced=traced, rss_probe=False)


def fmt(v: float | None, digits: int = 2) -> str:
    if v is None:
        return "n/a"
    return f"{v:,.{digits}f}"


def lat(p: dict[str, Any] | None, q: str) -> float | None:
    if not p or q not in p.get("latency_ms", {}):
        return None
    return float(p["latency_ms"][q])


def sub(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def div(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("**met**" if ok else "**missed**")


def check(value: float | None, limit: float, below: bool = True) -> bool | None:
    if value is None:
        return None
    return value <= limit if below else value >= limit


def _added(p: dict[str, Any] | None, floor: dict[str, Any] | None, q: str) -> float | None:
    return sub(lat(p, q), lat(floor, q))


def targets(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each target of the issue: what was measured against it and whether it was met."""
    d16, s16, l16 = (closed(points, p, "chat", 16) for p in ("direct", "sidecar", "litellm"))
    s64, l64 = (closed(points, p, "chat", 64) for p in ("sidecar", "litellm"))
    t64 = closed(points, "sidecar", "chat", 64, traced=True)
    rss = find(points, path="sidecar", rss_probe=True)
    added_p50, added_p99 = _added(s16, d16, "p50"), _added(s16, d16, "p99")
    ll_p50, ll_p99 = _added(l16, d16, "p50"), _added(l16, d16, "p99")
    rps64 = s64["throughput_rps"] if s64 else None
    ratio = div(rps64, l64["throughput_rps"] if l64 else None)
    lat_ratio = div(added_p50, ll_p50) if (ll_p50 or 0) > 0 else None
    cpu = s64["process"]["cpu_s_per_1k"] if s64 else None
    peak = rss["process"]["peak_rss_mb"] if rss else None
    in_flight = rss["concurrency"] if rss else 1000
    cost = None
    cost_note = ""
    ab = tracing_ab()
    if ab is not None and ab.get("concurrency") == 64 and ab.get("mode") == "grpc-model":
        r = ab["rps_ratio_b_over_a"]  # paired: what the machine's other load does meets both alike
        cost = 1 - r["median"]
        cost_note = f" (paired A/B: traced ÷ untraced {r['median']:.3f}, quartiles {r['q1']:.3f}–{r['q3']:.3f})"
    elif s64 and t64 and s64["throughput_rps"]:
        cost = 1 - t64["throughput_rps"] / s64["throughput_rps"]

    def target(name: str, limit: str, value: str, met: bool | None) -> dict[str, Any]:
        return {"target": name, "limit": limit, "value": value, "met": met}

    return [
        target("added p50 at c=16 (CallModel − direct)", f"≤ {TARGET_ADDED_P50_MS} ms", f"{fmt(added_p50)} ms",
               check(added_p50, TARGET_ADDED_P50_MS)),
        target("added p99 at c=16", f"≤ {TARGET_ADDED_P99_MS} ms", f"{fmt(added_p99)} ms",
               check(added_p99, TARGET_ADDED_P99_MS)),
        target("CallModel throughput at c=64", f"≥ {TARGET_RPS_C64:,.0f}/s", f"{fmt(rps64, 0)}/s",
               check(rps64, TARGET_RPS_C64, below=False)),
        target("CallModel throughput ÷ LiteLLM proxy's at c=64", f"≥ {TARGET_VS_LITELLM:g}", fmt(ratio),
               check(ratio, TARGET_VS_LITELLM, below=False)),
        target("added p50 ÷ LiteLLM proxy's added p50 at c=16", f"≤ {1 / TARGET_VS_LITELLM:.2f}",
               f"{fmt(lat_ratio)} ({fmt(added_p50)} vs {fmt(ll_p50)} ms; p99 {fmt(added_p99)} vs {fmt(ll_p99)} ms)",
               check(lat_ratio, 1 / TARGET_VS_LITELLM)),
        target("sidecar CPU per 1,000 CallModel at c=64", f"≤ {TARGET_CPU_S_PER_1K} s", f"{fmt(cpu, 3)} s",
               check(cpu, TARGET_CPU_S_PER_1K)),
        target(f"sidecar peak RSS with {in_flight:,} calls in flight", f"≤ {TARGET_RSS_MB:g} MB",
               f"{fmt(peak, 1)} MB", check(peak, TARGET_RSS_MB)),
        target("CallModel throughput lost to tracing (100 % sampled) at c=64", f"≤ {TARGET_TRACING_COST:.0%}",
               "n/a" if cost is None else f"{cost:.1%}{cost_note}", check(cost, TARGET_TRACING_COST)),
    ]  # fmt: skip


PATH_LABEL = {
    ("direct", "chat"): "direct HTTP chat",
    ("sidecar", "chat"): "sidecar CallModel",
    ("litellm", "chat"): "LiteLLM proxy chat",
    ("direct", "tool"): "direct HTTP tool",
    ("sidecar", "tool"): "sidecar ExecuteTool",
    ("direct", "stream"): "direct HTTP stream",
    ("sidecar", "stream"): "sidecar StreamModel",
    ("relay", "stream"): "relay floor StreamModel (aiohttp)",
    ("relay_sse", "stream"): "relay floor StreamModel (httpx-sse)",
}


def label_of(p: dict[str, Any]) -> str:
    base = PATH_LABEL[(p["path"], p["op"])]
    if p.get("traced"):
        base += " (traced)"
    if p.get("paced"):
        base += f" (paced {p.get('rate_rps', 0):g}/s)"
    return base


def row(p: dict[str, Any], floor: dict[str, Any] | None) -> str:
    proc = p.get("process") or {}
    added50 = sub(lat(p, "p50"), lat(floor, "p50")) if p["path"] != "direct" else None
    added99 = sub(lat(p, "p99"), lat(floor, "p99")) if p["path"] != "direct" else None
    cpu = proc.get("cpu_s_per_1k")
    if p["path"] == "direct":
        cpu = p["upstream"]["cpu_s_per_1k"]
    rss = proc.get("peak_rss_mb")
    return (
        f"| {label_of(p)} | {p['concurrency']} | {fmt(p['throughput_rps'], 0)} | {fmt(lat(p, 'p50'))} | "
        f"{fmt(lat(p, 'p90'))} | {fmt(lat(p, 'p99'))} | {fmt(lat(p, 'max'))} | {p['ok']:,} | {p['failed']:,} | "
        f"{'—' if added50 is None else fmt(added50)} | {'—' if added99 is None else fmt(added99)} | "
        f"{fmt(cpu, 3) if cpu is not None else '—'} | {fmt(rss, 0) if rss is not None else '—'} |"
    )


def summary_md(points: list[dict[str, Any]], meta: dict[str, Any], skipped: dict[str, str]) -> str:
    m = meta["machine"]
    lines = [
        "# Benchmark results",
        "",
        f"Run {meta['started']} – {meta['finished']} ({meta['wall_s']:.0f} s), commit `{m['git_commit']}`"
        f"{' (sidecar/ had uncommitted changes)' if m.get('sidecar_dirty') else ''}, "
        f"{m['cpus']} CPUs ({m['cpu_model']}), {m['mem_gib']} GiB, Linux {m['kernel']}, Python {m['python']}, "
        f"{m['go']}, LiteLLM {m['litellm'] or 'n/a'}.",
        f"Each point: {meta['warmup_s']:g} s warm-up, then {meta['duration_s']:g} s measured, closed loop at the "
        f"given concurrency. Load average before the run: {meta['loadavg_before']}; after: {meta['loadavg_after']}.",
        "",
    ]
    argv = list(meta.get("argv", []))
    if "--only" in argv[:-1]:  # a partial run: the other sections are what an earlier run committed
        only = argv[argv.index("--only") + 1]
        lines[-1:-1] = [
            f"This run measured only `{only}`; every other section shows the points an earlier run left in "
            "bench/results/ (each point's `started_at` in its JSON file says when; BENCHMARKS.md names the runs).",
        ]
    if skipped:
        lines += ["Skipped scenarios:", ""]
        lines += [f"- **{k}**: {v.splitlines()[0][:300]}" for k, v in skipped.items()]
        lines.append("")
    lines += ["## Targets", "", "| target | limit | measured | verdict |", "|---|---|---|---|"]
    for t in targets(points):
        lines.append(f"| {t['target']} | {t['limit']} | {t['value']} | {verdict(t['met'])} |")
    lines += [
        "",
        "## Paths side by side",
        "",
        "Latency in ms. *Added* is this path's percentile minus the direct path's at the same concurrency "
        "(and the same pacing). *CPU s/1k* and *peak RSS* are those of the process in the middle (sidecar or "
        "LiteLLM proxy); on the direct rows, CPU is the upstream's own.",
        "",
        "| path | conc. | calls/s | p50 | p90 | p99 | max | ok | failed | added p50 | added p99 | CPU s/1k | "
        "peak RSS MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    order = [("chat", "direct"), ("chat", "sidecar"), ("chat", "litellm"), ("tool", "direct"), ("tool", "sidecar")]
    for op, path in order:
        for traced in (False, True):
            for p in points:
                if p["op"] != op or p["path"] != path or p["traced"] != traced or p["faults"] or p["rss_probe"]:
                    continue
                floor = find(
                    points,
                    path="direct",
                    op=op,
                    concurrency=p["concurrency"],
                    paced=p["paced"],
                    faults=False,
                    traced=False,
                    rss_probe=False,
                )
                lines.append(row(p, floor))
    mix = meta.get("fault_mix", {})
    fault_c = next((p["concurrency"] for p in points if p["faults"]), "n/a")
    lines += [
        "",
        "## Fault mix",
        "",
        f"Every upstream attempt draws a 429 (`retry-after: 0`, OpenAI `rate_limit_exceeded`) with probability "
        f"{mix.get('p429', 0):.0%} and a 500 with {mix.get('p500', 0):.0%}; concurrency {fault_c}. "
        "Retry budget 3 for the sidecar and LiteLLM alike; the direct path has no retries. "
        "*Upstream attempts* are counted by the upstream itself.",
        "",
        "| path | calls ok | failed | success | upstream attempts | attempts per call | calls/s | p50 | p99 | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for p in sorted(
        (p for p in points if p["faults"]), key=lambda p: ("direct", "sidecar", "litellm").index(p["path"])
    ):
        path = p["path"]
        name = PATH_LABEL[(path, "chat")]
        if p.get("variant") == "rpm":
            name += " (model with a configured rate)"
        done = p["ok"] + p["failed"]
        att = p["upstream"]["attempts"]
        calls = max(p["completed_total"], 1)
        errors = ", ".join(f"{k}: {v}" for k, v in sorted(p["errors"].items())) or "—"
        lines.append(
            f"| {name} | {p['ok']:,} | {p['failed']:,} | "
            f"{fmt(100 * p['ok'] / done if done else None, 1)} % | {att:,} | {fmt(att / calls)} | "
            f"{fmt(p['throughput_rps'], 0)} | {fmt(lat(p, 'p50'))} | {fmt(lat(p, 'p99'))} | {errors} |"
        )
    rss = find(points, path="sidecar", rss_probe=True)
    if rss:
        lines += [
            "",
            f"## {rss['concurrency']:,} calls in flight",
            "",
            f"CallModel at concurrency {rss['concurrency']:,}, the upstream holding each reply "
            f"{rss.get('upstream_delay_ms', 0)} ms: peak RSS of the sidecar {fmt(rss['process']['peak_rss_mb'], 1)} "
            f"MB, {fmt(rss['throughput_rps'], 0)} calls/s, p50 {fmt(lat(rss, 'p50'))} ms, p99 "
            f"{fmt(lat(rss, 'p99'))} ms, {rss['ok']:,} ok, {rss['failed']:,} failed.",
        ]
    traced = [p for p in points if p.get("traced")]
    if traced:
        lines += [
            "",
            "## Tracing on",
            "",
            "| point | calls/s | untraced calls/s | cost | spans exported (requests, bytes) |",
            "|---|---:|---:|---:|---|",
        ]
        for p in traced:
            base = closed(points, "sidecar", p["op"], p["concurrency"])
            cost = None
            if base and base["throughput_rps"]:
                cost = 1 - p["throughput_rps"] / base["throughput_rps"]
            sink = p.get("otlp_sink", {}).get("traces", {})
            lines.append(
                f"| {label_of(p)} c={p['concurrency']} | {fmt(p['throughput_rps'], 0)} | "
                f"{fmt(base['throughput_rps'] if base else None, 0)} | "
                f"{'n/a' if cost is None else f'{cost:.1%}'} | {sink.get('requests', 0):,}, {sink.get('bytes', 0):,} |"
            )
    lines += tracing_ab_section()
    ups = [p for p in points if p["path"] == "direct" and not p["faults"] and not p["paced"]]
    if ups:
        best = max(ups, key=lambda p: p["throughput_rps"])
        lines += [
            "",
            "## The upstream is not the bottleneck",
            "",
            f"Alone, the upstream served {fmt(best['throughput_rps'], 0)} calls/s ({label_of(best)}, c="
            f"{best['concurrency']}) with the load generator on the same 2 cores, at "
            f"{fmt(best['upstream']['cpu_s_per_1k'], 3)} CPU-s per 1,000 calls. The CPU it spent in each point is in "
            "the JSON files (`upstream.cpu_s`).",
            "",
        ]
        for p in (closed(points, "sidecar", "chat", 64), closed(points, "litellm", "chat", 64)):
            if p and p.get("process"):
                lines.append(
                    f"While {label_of(p)} ran at c=64 ({fmt(p['throughput_rps'], 0)} calls/s), the upstream used "
                    f"{fmt(p['upstream']['cpu_s'], 2)} CPU-s, the load generator {fmt(p['loadgen_cpu_s'], 2)} and "
                    f"the {p['process']['name']} process {fmt(p['process']['cpu_s'], 2)} "
                    f"(over {fmt(p['point_wall_s'], 1)} s of wall time)."
                )
    lines += http_section(points)
    from scenario_stream import stream_section  # it imports this module's helpers

    lines += stream_section(points)
    from scenario_image import image_section

    lines += image_section(points)
    from scenario_hedge import hedge_section

    lines += hedge_section(points)
    lines += ["", "![latency against concurrency](latency_vs_concurrency.png)", ""]
    return "\n".join(lines)


def tracing_ab() -> dict[str, Any] | None:
    """The run's paired tracing A/B (``TRACING_AB``), if it ran."""
    return json.loads(TRACING_AB.read_text()) if TRACING_AB.exists() else None


def tracing_ab_section() -> list[str]:
    """Traced beside untraced, one build, alternating bursts: the paired ratios and each round."""
    ab = tracing_ab()
    if ab is None:
        return []
    rps, cpu = ab["rps_ratio_b_over_a"], ab["cpu_ratio_b_over_a"]
    rounds = ab["rounds"]
    lines = [
        "",
        "## Tracing, traced beside untraced (paired A/B)",
        "",
        f"`bench/ab.py --traced`: two sidecars of one build at once, B with 100 % of spans batch-exported over "
        f"OTLP/HTTP to the sink, A with tracing off; {len(rounds)} rounds of {ab['burst_s']:g} s bursts at "
        f"c={ab['concurrency']} ({ab['mode']}) to each in turn, the order flipped every round. The ratios are "
        "per round (B ÷ A), so the machine's other load meets both alike.",
        "",
        "| figure | untraced (A, median) | traced (B, median) | B ÷ A median | quartiles |",
        "|---|---:|---:|---:|---|",
        f"| calls/s | {fmt(ab['rps_median_a'], 0)} | {fmt(ab['rps_median_b'], 0)} | **{rps['median']:.3f}** | "
        f"{rps['q1']:.3f}–{rps['q3']:.3f} |",
        f"| CPU-s per 1,000 calls | {fmt(statistics.median(r['cpu_per_1k_a'] for r in rounds), 3)} | "
        f"{fmt(statistics.median(r['cpu_per_1k_b'] for r in rounds), 3)} | {cpu['median']:.3f} | "
        f"{cpu['q1']:.3f}–{cpu['q3']:.3f} |",
        "",
        "Rounds, calls/s (A / B): "
        + ", ".join(f"{fmt(r['rps_a'], 0)} / {fmt(r['rps_b'], 0)}" for r in rounds)
        + f". Raw: `bench/results/{TRACING_AB.name}`.",
    ]
    return lines


def http_section(points: list[dict[str, Any]]) -> list[str]:
    """The OpenAI-compatible front (scenario "http"): against the gRPC door of the same process and
    LiteLLM's proxy, added p50 over the direct path and CPU per call."""
    mine = [p for p in points if p["path"] == "http"]
    if not mine:
        return []
    lines = [
        "",
        "## The HTTP front",
        "",
        "One sidecar serving both ports; the same OpenAI-format request the direct and LiteLLM points send "
        "(`POST /v1/chat/completions`), against CallModel on its gRPC port. *Added* is over the direct path at "
        "the same concurrency; *HTTP − gRPC* is what the OpenAI door costs on top of the gRPC door.",
        "",
        "| door | conc. | calls/s | p50 | p99 | added p50 | added p99 | CPU s/1k | HTTP − gRPC p50 | "
        "HTTP − gRPC CPU s/1k |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    names = {"grpc": "sidecar CallModel (gRPC)", "openai": "sidecar OpenAI front (HTTP)"}
    for c in sorted({p["concurrency"] for p in mine}):
        floor = closed(points, "direct", "chat", c)
        grpc = find(mine, concurrency=c, variant="grpc")
        rows = [(names[p["variant"]], p) for p in mine if p["concurrency"] == c]
        litellm = closed(points, "litellm", "chat", c)
        if litellm:
            rows.append(("LiteLLM proxy (same run)", litellm))
        for name, p in rows:
            cpu = (p.get("process") or {}).get("cpu_s_per_1k")
            front = p.get("variant") == "openai"
            grpc_cpu = (grpc.get("process") or {}).get("cpu_s_per_1k") if grpc else None
            lines.append(
                f"| {name} | {c} | {fmt(p['throughput_rps'], 0)} | {fmt(lat(p, 'p50'))} | {fmt(lat(p, 'p99'))} | "
                f"{fmt(_added(p, floor, 'p50'))} | {fmt(_added(p, floor, 'p99'))} | {fmt(cpu, 3)} | "
                f"{fmt(sub(lat(p, 'p50'), lat(grpc, 'p50'))) if front else '—'} | "
                f"{fmt(sub(cpu, grpc_cpu), 3) if front else '—'} |"
            )
    return lines


def plot(points: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_lat, ax_rps) = plt.subplots(1, 2, figsize=(12, 4.8))
    colors = {"direct": "tab:green", "sidecar": "tab:blue", "litellm": "tab:red"}
    for path_name in ("direct", "sidecar", "litellm"):
        series = sorted(
            (
                p
                for p in points
                if p["path"] == path_name
                and p["op"] == "chat"
                and not p["paced"]
                and not p["faults"]
                and not p["traced"]
                and not p["rss_probe"]
            ),
            key=lambda p: p["concurrency"],
        )
        if not series:
            continue
        xs = [p["concurrency"] for p in series]
        label = PATH_LABEL[(path_name, "chat")]
        col = colors[path_name]
        ax_lat.plot(xs, [lat(p, "p50") for p in series], "o-", color=col, label=f"{label} p50")
        ax_lat.plot(xs, [lat(p, "p99") for p in series], "s--", color=col, alpha=0.7, label=f"{label} p99")
        ax_rps.plot(xs, [p["throughput_rps"] for p in series], "o-", color=col, label=label)
    for ax in (ax_lat, ax_rps):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrency (calls in flight)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    ax_lat.set_yscale("log")
    ax_rps.set_yscale("log")
    ax_lat.set_ylabel("latency (ms, log)")
    ax_lat.set_title("Latency against concurrency")
    ax_rps.set_ylabel("successful calls per second (log)")
    ax_rps.set_title("Throughput against concurrency")
    fig.suptitle("Chat call: direct vs sidecar CallModel vs LiteLLM proxy (same upstream, 2 cores)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_results(points: list[dict[str, Any]], meta: dict[str, Any], skipped: dict[str, str]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    groups: dict[str, list[dict[str, Any]]] = {}
    for p in points:
        if p["faults"]:
            group = "faults"
        elif p["rss_probe"]:
            group = "rss_in_flight"
        elif p["traced"]:
            group = "sidecar_traced"
        elif p["op"] in ("stream", "hedge"):
            group = p["op"]
        else:
            group = p["path"]
        groups.setdefault(group, []).append(p)
    for group, pts in groups.items():
        (RESULTS / f"{group}.json").write_text(json.dumps(pts, indent=2) + "\n")
    for group in GROUPS:  # a partial run (--only): the other groups' committed points stay in the summary
        path = RESULTS / f"{group}.json"
        if group not in groups and path.exists():
            points = [*points, *json.loads(path.read_text())]
    meta = {**meta, "skipped": skipped, "targets": targets(points)}
    (RESULTS / "run.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
    (RESULTS / "summary.md").write_text(summary_md(points, meta, skipped))
    if points:
        plot(points, RESULTS / "latency_vs_concurrency.png")


def load_points() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    points: list[dict[str, Any]] = []
    for group in GROUPS:
        path = RESULTS / f"{group}.json"
        if path.exists():
            points.extend(json.loads(path.read_text()))
    return points, json.loads((RESULTS / "run.json").read_text())


def main() -> int:
    points, meta = load_points()
    write_results(points, meta, meta.get("skipped", {}))
    print(f"wrote {RESULTS / 'summary.md'} from {len(points)} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
