"""The streaming scenario: time to first token and CPU per streamed call, direct vs StreamModel.

    bench/.venv/bin/python bench/run.py --only stream          # registered in run.py's SCENARIOS

The upstream streams every chat reply that asks for one as OpenAI SSE (bench/cmd/upstream:
STREAM_DELTAS content deltas, STREAM_GAP_MS apart, the first at once). At each concurrency the
two paths take turns on the same upstream:

    direct    loadgen -mode http-stream --HTTP SSE--> upstream
    sidecar   loadgen -mode grpc-stream --gRPC StreamModel--> sidecar --HTTP SSE--> upstream

Each point's ``ttft_ms`` is the time from sending to the first content delta (direct: the first
``data:`` line with ``delta.content``; sidecar: the first ``text`` event), ``latency_ms`` the
stream's whole time; *added TTFT* is the sidecar's percentile minus the direct path's at the
same concurrency, and the sidecar's CPU per 1,000 streams comes from /proc like every point's.
Points are tagged ``op: "stream"`` (report.py writes them to results/stream.json);
``stream_section`` renders them as summary.md's Streaming section, with the issue's target:

    added TTFT p50 at c=1 (StreamModel − direct SSE)   ≤ TARGET_STREAM_ADDED_TTFT_P50_MS
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from typing import Any

from report import check, find, fmt, label_of, lat, sub, verdict

STREAM_CONCURRENCIES = (1, 16)
STREAM_DELTAS = 20  # content deltas per streamed reply
STREAM_GAP_MS = 1.0  # between two deltas (the first goes at once): each delta arrives on its own
TRACING_OFF_ENV = {"OTEL_SDK_DISABLED": "true"}  # as run.py's sidecar points: no SDK at all
TARGET_STREAM_ADDED_TTFT_P50_MS = 2.0  # at c=1: StreamModel's first delta − the direct stream's

StartSidecar = Callable[[Any, str, dict[str, str]], tuple[Any, str]]
Tag = Callable[..., dict[str, Any]]


def scenario_stream(b: Any, start_sidecar: StartSidecar, tag: Tag) -> list[dict[str, Any]]:
    """Direct and sidecar streams at each concurrency, the sidecar's point right after the direct one.

    ``start_sidecar`` and ``tag`` are run.py's (passed in, so this module imports nothing of it).
    """
    shape = _set_stream_shape(b.upstream, STREAM_DELTAS, STREAM_GAP_MS)
    levels = [c for c in STREAM_CONCURRENCIES if c in b.args.concurrency] or list(STREAM_CONCURRENCIES)
    chat = f"{b.upstream}/v1/chat/completions"
    auth = (f"authorization: Bearer {b.key}",)
    fields = {"deltas": shape["deltas"], "gap_ms": shape["gap_ms"]}
    out = []
    proc, target = start_sidecar(b, "sidecar-stream", TRACING_OFF_ENV)
    try:
        for c in levels:
            out.append(
                b.loadgen(
                    f"direct-stream-c{c}",
                    "http-stream",
                    c,
                    url=chat,
                    headers=auth,
                    extra=tag("direct", "stream", **fields),
                )
            )
            out.append(
                b.loadgen(
                    f"sidecar-stream-c{c}",
                    "grpc-stream",
                    c,
                    target=target,
                    watch=proc,
                    extra=tag("sidecar", "stream", **fields),
                )
            )
    finally:
        proc.stop()
    return out


def _set_stream_shape(upstream: str, deltas: int, gap_ms: float) -> dict[str, Any]:
    """Every later streamed reply of the upstream: ``deltas`` deltas, ``gap_ms`` apart; the shape it set."""
    with urllib.request.urlopen(f"{upstream}/_stream?deltas={deltas}&gap_ms={gap_ms:g}", timeout=5) as resp:
        return dict(json.loads(resp.read()))


def ttft(p: dict[str, Any] | None, q: str) -> float | None:
    if not p or q not in p.get("ttft_ms", {}):
        return None
    return float(p["ttft_ms"][q])


def stream_section(points: list[dict[str, Any]]) -> list[str]:
    """The Streaming section: TTFT and total per point, added TTFT, CPU per 1,000 streams, the target."""
    streams = [p for p in points if p["op"] == "stream"]
    if not streams:
        return []
    first = streams[0]
    lines = [
        "",
        "## Streaming",
        "",
        f"Each reply streams {first.get('deltas', '?')} content deltas {first.get('gap_ms', '?')} ms apart "
        "(the first at once) as OpenAI SSE; *TTFT* is the time from sending to the first delta, *total* the "
        "whole stream's. *Added* is the sidecar's StreamModel minus the direct SSE read at the same concurrency. "
        "CPU s/1k is the sidecar's per 1,000 streams (direct rows: the upstream's). Points measured from "
        f"{first.get('started_at', '?')[:19]} UTC.",
        "",
        "| path | conc. | streams/s | TTFT p50 | TTFT p99 | total p50 | total p99 | ok | failed | added TTFT p50 | "
        "added TTFT p99 | CPU s/1k |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in sorted(streams, key=lambda p: (p["concurrency"], p["path"] != "direct")):
        floor = find(streams, path="direct", concurrency=p["concurrency"]) if p["path"] != "direct" else None
        added50 = sub(ttft(p, "p50"), ttft(floor, "p50")) if floor else None
        added99 = sub(ttft(p, "p99"), ttft(floor, "p99")) if floor else None
        cpu = (p.get("process") or {}).get("cpu_s_per_1k") if p["path"] != "direct" else p["upstream"]["cpu_s_per_1k"]
        lines.append(
            f"| {label_of(p)} | {p['concurrency']} | {fmt(p['throughput_rps'], 0)} | {fmt(ttft(p, 'p50'))} | "
            f"{fmt(ttft(p, 'p99'))} | {fmt(lat(p, 'p50'))} | {fmt(lat(p, 'p99'))} | {p['ok']:,} | {p['failed']:,} | "
            f"{'—' if added50 is None else fmt(added50)} | {'—' if added99 is None else fmt(added99)} | "
            f"{fmt(cpu, 3) if cpu is not None else '—'} |"
        )
    s1, d1 = (find(streams, path=path, concurrency=1) for path in ("sidecar", "direct"))
    added = sub(ttft(s1, "p50"), ttft(d1, "p50"))
    met = check(added, TARGET_STREAM_ADDED_TTFT_P50_MS)
    lines += [
        "",
        f"Target: added TTFT p50 at c=1 ≤ {TARGET_STREAM_ADDED_TTFT_P50_MS:g} ms: {fmt(added)} ms, {verdict(met)}.",
    ]
    return lines
