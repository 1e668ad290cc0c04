"""The streaming scenario: time to first token and CPU per streamed call, direct vs StreamModel.

    bench/.venv/bin/python bench/run.py --only stream          # registered in run.py's SCENARIOS

The upstream streams every chat reply that asks for one as OpenAI SSE (bench/cmd/upstream:
STREAM_DELTAS content deltas, STREAM_GAP_MS apart, the first at once). Three paths take turns on
the same upstream:

    direct     loadgen -mode http-stream --HTTP SSE--> upstream
    relay      loadgen -mode grpc-stream --gRPC--> bench/relay_floor.py --aiohttp SSE--> upstream
    relay_sse  loadgen -mode grpc-stream --gRPC--> bench/relay_floor.py --httpx, httpx-sse--> upstream
    sidecar    loadgen -mode grpc-stream --gRPC StreamModel--> sidecar --HTTP SSE--> upstream

The relays are the runtime's floor: the sidecar's contract over grpc.aio and the provider read in
one Python process, with no policy at all; ``relay`` with aiohttp alone, ``relay_sse`` with what the
sidecar reads with (httpx over the sidecar's transport, httpx-sse). The sidecar minus ``relay_sse``
is what its policy costs.

Each point's ``ttft_ms`` is the time from sending to the first content delta (direct: the first
``data:`` line with ``delta.content``; the gRPC paths: the first ``text`` event), ``latency_ms`` the
stream's whole time. At c=1 the paths take turns in STREAM_C1_ROUNDS short rounds (this machine's
speed drifts over minutes: one long point per path compared one moment with another), and a path's
*added TTFT* is the median over the rounds of its p50 minus the direct p50 of the same round; at
c=16 there is one point per path. Points are tagged ``op: "stream"`` (report.py writes them to
results/stream.json); ``stream_section`` renders them as summary.md's Streaming section, with the
issue's target:

    added TTFT p50 at c=1 (StreamModel − direct SSE)   ≤ TARGET_STREAM_ADDED_TTFT_P50_MS
"""

from __future__ import annotations

import json
import statistics
import urllib.request
from collections.abc import Callable
from typing import Any

from report import check, find, fmt, lat, sub, verdict

STREAM_CONCURRENCIES = (1, 16)
STREAM_C1_ROUNDS = 5  # c=1: rounds of the four paths in turn, each a fifth of a point's duration
STREAM_DELTAS = 20  # content deltas per streamed reply
STREAM_GAP_MS = 1.0  # between two deltas (the first goes at once): each delta arrives on its own
TRACING_OFF_ENV = {"OTEL_SDK_DISABLED": "true"}  # as run.py's sidecar points: no SDK at all
TARGET_STREAM_ADDED_TTFT_P50_MS = 2.0  # at c=1: StreamModel's first delta − the direct stream's
PATHS = ("direct", "relay", "relay_sse", "sidecar")
LABEL = {
    "direct": "direct SSE",
    "relay": "relay floor: grpc.aio + aiohttp",
    "relay_sse": "relay floor: grpc.aio + httpx + httpx-sse",
    "sidecar": "sidecar StreamModel",
}

RELAY_CLIENT = {"relay": "aiohttp", "relay_sse": "httpx-sse"}

Start = Callable[[Any, str, dict[str, str]], tuple[Any, str]]
StartRelay = Callable[[Any, str, str], tuple[Any, str]]
Tag = Callable[..., dict[str, Any]]


def scenario_stream(b: Any, start_sidecar: Start, start_relay: StartRelay, tag: Tag) -> list[dict[str, Any]]:
    """The four paths at each concurrency: at c=1 in interleaved rounds, at c=16 once each.

    ``start_sidecar``, ``start_relay`` and ``tag`` are run.py's (passed in, so this module imports
    nothing of it).
    """
    shape = _set_stream_shape(b.upstream, STREAM_DELTAS, STREAM_GAP_MS)
    levels = [c for c in STREAM_CONCURRENCIES if c in b.args.concurrency] or list(STREAM_CONCURRENCIES)
    chat = f"{b.upstream}/v1/chat/completions"
    auth = (f"authorization: Bearer {b.key}",)
    fields = {"deltas": shape["deltas"], "gap_ms": shape["gap_ms"]}
    out = []
    sidecar, sidecar_target = start_sidecar(b, "sidecar-stream", TRACING_OFF_ENV)
    relays = {path: start_relay(b, f"{path}-stream", client) for path, client in RELAY_CLIENT.items()}

    def point(path: str, c: int, name: str, duration: float | None, **more: Any) -> dict[str, Any]:
        extra = tag(path, "stream", **fields, **more)
        if path == "direct":
            return b.loadgen(name, "http-stream", c, url=chat, headers=auth, duration=duration, extra=extra)
        proc, target = (sidecar, sidecar_target) if path == "sidecar" else relays[path]
        return b.loadgen(name, "grpc-stream", c, target=target, watch=proc, duration=duration, extra=extra)

    try:
        for c in levels:
            if c == 1:
                duration = max(b.args.duration / STREAM_C1_ROUNDS, 1.0)
                for r in range(STREAM_C1_ROUNDS):
                    for path in PATHS:
                        out.append(point(path, c, f"{path}-stream-c1-r{r}", duration, round=r))
            else:
                out += [point(path, c, f"{path}-stream-c{c}", None) for path in PATHS]
    finally:
        for proc, _ in relays.values():
            proc.stop()
        sidecar.stop()
    return out


def _set_stream_shape(upstream: str, deltas: int, gap_ms: float) -> dict[str, Any]:
    """Every later streamed reply of the upstream: ``deltas`` deltas, ``gap_ms`` apart; the shape it set."""
    with urllib.request.urlopen(f"{upstream}/_stream?deltas={deltas}&gap_ms={gap_ms:g}", timeout=5) as resp:
        return dict(json.loads(resp.read()))


def ttft(p: dict[str, Any] | None, q: str) -> float | None:
    if not p or q not in p.get("ttft_ms", {}):
        return None
    return float(p["ttft_ms"][q])


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _paired(streams: list[dict[str, Any]], path: str, base: str, q: str) -> float | None:
    """c=1: the median over rounds of ``path``'s TTFT ``q`` minus ``base``'s in the same round."""
    diffs = [
        sub(ttft(p, q), ttft(find(streams, path=base, concurrency=1, round=p.get("round")), q))
        for p in streams
        if p["path"] == path and p["concurrency"] == 1
    ]
    return _median(diffs)


def _cpu(p: dict[str, Any]) -> float | None:
    if p["path"] == "direct":
        return p["upstream"]["cpu_s_per_1k"]  # type: ignore[no-any-return]
    return (p.get("process") or {}).get("cpu_s_per_1k")


def stream_section(points: list[dict[str, Any]]) -> list[str]:
    """The Streaming section: TTFT and total per path, added TTFT, CPU per 1,000 streams, the target."""
    streams = [p for p in points if p["op"] == "stream"]
    if not streams:
        return []
    first = streams[0]
    rounds = len({p.get("round") for p in streams if p["concurrency"] == 1})
    lines = [
        "",
        "## Streaming",
        "",
        f"Each reply streams {first.get('deltas', '?')} content deltas {first.get('gap_ms', '?')} ms apart "
        "(the first at once) as OpenAI SSE; *TTFT* is the time from sending to the first delta, *total* the "
        "whole stream's. The relay floors are a grpc.aio server relaying the upstream with no policy "
        "(bench/relay_floor.py), read with aiohttp, or with httpx and httpx-sse as the sidecar reads. "
        f"At c=1 the four paths took turns in {rounds} rounds: each figure is the median "
        "of the rounds' figures, and *added* the median of each round's difference from the direct read (at "
        "c=16: one point each). CPU s/1k is the process's per 1,000 streams (direct rows: the upstream's). "
        f"Points measured from {first.get('started_at', '?')[:19]} UTC.",
        "",
        "| path | conc. | streams/s | TTFT p50 | TTFT p99 | total p50 | total p99 | ok | failed | added TTFT p50 | "
        "added TTFT p99 | CPU s/1k |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    levels = sorted({p["concurrency"] for p in streams})
    for c in levels:
        for path in PATHS:
            pts = [p for p in streams if p["path"] == path and p["concurrency"] == c]
            if not pts:
                continue
            if c == 1:
                added50 = _paired(streams, path, "direct", "p50") if path != "direct" else None
                added99 = _paired(streams, path, "direct", "p99") if path != "direct" else None
            else:
                floor = find(streams, path="direct", concurrency=c)
                added50 = sub(ttft(pts[0], "p50"), ttft(floor, "p50")) if path != "direct" else None
                added99 = sub(ttft(pts[0], "p99"), ttft(floor, "p99")) if path != "direct" else None
            cells = [
                _median([p["throughput_rps"] for p in pts]),
                _median([ttft(p, "p50") for p in pts]),
                _median([ttft(p, "p99") for p in pts]),
                _median([lat(p, "p50") for p in pts]),
                _median([lat(p, "p99") for p in pts]),
            ]
            cpu = _median([_cpu(p) for p in pts])
            lines.append(
                f"| {LABEL[path]} | {c} | {fmt(cells[0], 0)} | {fmt(cells[1])} | {fmt(cells[2])} | {fmt(cells[3])} | "
                f"{fmt(cells[4])} | {sum(p['ok'] for p in pts):,} | {sum(p['failed'] for p in pts):,} | "
                f"{'—' if added50 is None else fmt(added50)} | {'—' if added99 is None else fmt(added99)} | "
                f"{fmt(cpu, 3) if cpu is not None else '—'} |"
            )
    added = _paired(streams, "sidecar", "direct", "p50")
    floor = _paired(streams, "relay", "direct", "p50")
    libraries = _paired(streams, "relay_sse", "relay", "p50")
    policy = _paired(streams, "sidecar", "relay_sse", "p50")
    met = check(added, TARGET_STREAM_ADDED_TTFT_P50_MS)
    lines += [
        "",
        f"Target: added TTFT p50 at c=1 ≤ {TARGET_STREAM_ADDED_TTFT_P50_MS:g} ms: {fmt(added)} ms, {verdict(met)}. "
        f"Of it (medians of the rounds' differences): {fmt(floor)} ms is the runtime's floor (grpc.aio and "
        f"aiohttp, no policy), {fmt(libraries)} ms more the libraries the sidecar reads with (httpx, httpx-sse), "
        f"and {fmt(policy)} ms the sidecar's policy above them.",
    ]
    return lines
