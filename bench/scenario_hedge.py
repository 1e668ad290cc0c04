"""The hedging scenario: p99 time to first token with one slow deployment, without and with a hedge.

    bench/.venv/bin/python bench/run.py --only hedge           # registered in run.py's SCENARIOS

One sidecar serves two routes over the same two deployments (sidecar.yaml.tmpl): ``bench-route``
(``bench-slow`` then ``bench-fast``, no hedge) and ``bench-hedged`` (the same, ``hedge_after_s:
HEDGE_AFTER_S``). The upstream (bench/cmd/upstream) streams every reply at once, but a reply of
``bench-slow`` holds its first content delta SLOW_MS on a fraction SLOW_FRACTION of calls (its head
and role chunk go out at once: the deployment answers, its first token is slow)::

    plain    loadgen -mode grpc-stream -model bench-route  --gRPC StreamModel--> sidecar --SSE--> upstream
    hedged   loadgen -mode grpc-stream -model bench-hedged --gRPC StreamModel--> sidecar --SSE--> upstream

The two take turns in HEDGE_ROUNDS rounds, each offered HEDGE_RATE streams per second by up to
HEDGE_CONCURRENCY workers (open loop: in a closed loop the plain route's workers sit out the slow
calls, so it would be offered less load than the hedged one; and this machine's speed drifts over
minutes: one long point each would compare one moment with another). Each point's ``ttft_ms`` is
loadgen's (sending to the first ``text`` event). Points are tagged ``op: "hedge"`` (report.py writes
them to results/hedge.json); ``hedge_section`` renders them as summary.md's Hedging section: TTFT p50
and p99 of each, the median over the rounds, and the p99 ratio hedged / plain.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from report import fmt

HEDGE_ROUNDS = 3
HEDGE_CONCURRENCY = 8
HEDGE_RATE = 20.0  # streams per second offered to each route: the same load, whatever the slow calls hold
SLOW_FRACTION = 0.05  # of bench-slow's streams: more than 1 in 100, so that the plain p99 is a slow one
SLOW_MS = 1000.0
HEDGE_AFTER_S = 0.1  # sidecar.yaml.tmpl's bench-hedged: keep the two equal
TRACING_OFF_ENV = {"OTEL_SDK_DISABLED": "true"}
PATHS = ("plain", "hedged")
MODEL = {"plain": "bench-route", "hedged": "bench-hedged"}
LABEL = {"plain": "route, no hedge", "hedged": f"route, hedge_after_s: {HEDGE_AFTER_S:g}"}

Start = Callable[[Any, str, dict[str, str]], tuple[Any, str]]
Tag = Callable[..., dict[str, Any]]


def scenario_hedge(b: Any, start_sidecar: Start, tag: Tag) -> list[dict[str, Any]]:
    """The two routes in turn, HEDGE_ROUNDS rounds; the slow first tokens set on the upstream for them alone."""
    b.set_faults(p_slow=SLOW_FRACTION, slow_ms=SLOW_MS)
    fields = {"slow_fraction": SLOW_FRACTION, "slow_ms": SLOW_MS, "hedge_after_s": HEDGE_AFTER_S}
    duration = max(b.args.duration / HEDGE_ROUNDS, 2.0)
    out = []
    sidecar, target = start_sidecar(b, "sidecar-hedge", TRACING_OFF_ENV)
    try:
        for r in range(HEDGE_ROUNDS):
            for path in PATHS:
                extra = tag(path, "hedge", **fields, round=r)
                name = f"{path}-hedge-c{HEDGE_CONCURRENCY}-r{r}"
                out.append(
                    b.loadgen(
                        name,
                        "grpc-stream",
                        HEDGE_CONCURRENCY,
                        target=target,
                        rate=HEDGE_RATE,
                        model=MODEL[path],
                        watch=sidecar,
                        duration=duration,
                        extra=extra,
                    )
                )
    finally:
        sidecar.stop()
        b.set_faults()
    return out


def _ttft(p: dict[str, Any], q: str) -> float | None:
    value = p.get("ttft_ms", {}).get(q)
    return None if value is None else float(value)


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def hedge_figures(points: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Per path: TTFT p50 and p99 (medians over the rounds), calls per second, and failures."""
    out: dict[str, dict[str, float | None]] = {}
    for path in PATHS:
        pts = [p for p in points if p["op"] == "hedge" and p["path"] == path]
        if pts:
            out[path] = {
                "p50": _median([_ttft(p, "p50") for p in pts]),
                "p99": _median([_ttft(p, "p99") for p in pts]),
                "rps": _median([p["throughput_rps"] for p in pts]),
                "ok": float(sum(p["ok"] for p in pts)),
                "failed": float(sum(p["failed"] for p in pts)),
            }
    return out


def hedge_section(points: list[dict[str, Any]]) -> list[str]:
    """The Hedging section: TTFT p50 and p99 of each route, and the p99 ratio."""
    figures = hedge_figures(points)
    if not figures:
        return []
    first = next(p for p in points if p["op"] == "hedge")
    lines = [
        "",
        "## Hedging",
        "",
        f"Two routes over the same deployments, bench-slow then bench-fast: {first.get('slow_fraction', '?'):g} of "
        f"bench-slow's streams hold their first token {first.get('slow_ms', '?'):g} ms. *TTFT* is the time from "
        f"sending a StreamModel to its first text event, {HEDGE_RATE:g} streams/s offered to each route by up to "
        f"{first.get('concurrency', '?')} workers; each figure "
        f"is the median of {HEDGE_ROUNDS} rounds in which the two took turns. "
        f"Points measured from {first.get('started_at', '?')[:19]} UTC.",
        "",
        "| route | streams/s | TTFT p50 | TTFT p99 | ok | failed |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for path, f in figures.items():
        lines.append(
            f"| {LABEL[path]} | {fmt(f['rps'], 0)} | {fmt(f['p50'])} | {fmt(f['p99'])} | {f['ok'] or 0:,.0f} | "
            f"{f['failed'] or 0:,.0f} |"
        )
    plain, hedged = figures.get("plain", {}).get("p99"), figures.get("hedged", {}).get("p99")
    if plain and hedged:
        lines += ["", f"TTFT p99 hedged / plain: {hedged / plain:.2f} ({fmt(hedged)} ms against {fmt(plain)} ms)."]
    return lines
