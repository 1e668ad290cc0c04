"""The "image" scenario: what a 1 MB image part costs a CallModel, against the same call in text.

    bench/.venv/bin/python bench/run.py --only image

One sidecar process (the template's config, tracing off) and the upstream. The load generator sends
CallModel with the same conversation, once as text and once with a 1 MB inline PNG part beside the
text (``loadgen -image-bytes``): each at c=1 for the CPU a call costs, and the image at c=64 for the
process's peak RSS with 64 of them in flight. The upstream answers both alike, so the difference is
the image's path through the sidecar: the gRPC decode, the part checks and token estimate, the
base64 data URL in the OpenAI body, and the body's send.
"""

from __future__ import annotations

from typing import Any

__all__ = ["IMAGE_BYTES", "image_section", "scenario_image"]

IMAGE_BYTES = 1_000_000
IN_FLIGHT = 64
MESSAGE_BYTES = 8 * 1024 * 1024
"""The gRPC message limit the point's sidecar takes (the default 4 MiB holds one image; 64 are spread over calls)."""


def scenario_image(b: Any) -> list[dict[str, Any]]:
    import run  # bench/run.py: imported here, once it is loaded (it registers this scenario)

    port = run.free_port()
    config = run.write_sidecar_config(b, port, "sidecar-image")
    argv = [*b.args.sidecar_cmd.split(), "--config", str(config)]
    proc = run.start("sidecar-image", argv, env={"BENCH_KEY": b.key, "PYTHONUNBUFFERED": "1", **run.TRACING_OFF_ENV})
    target = f"127.0.0.1:{port}"
    out: list[dict[str, Any]] = []
    try:
        error = run.probe(proc, ["-mode", "grpc-model", "-target", target, "-probe", "60s", "-timeout", "5s"])
        if error is not None:
            raise RuntimeError(f"the sidecar did not answer: {error}\n{proc.tail()}")
        for name, image, c in (("text", 0, 1), ("image", IMAGE_BYTES, 1), ("image", IMAGE_BYTES, IN_FLIGHT)):
            tag = run._tag("image", "chat", variant=name)
            flags = {"image_bytes": image} if image else {}
            out.append(b.loadgen(f"image-{name}-c{c}", "grpc-model", c, target=target, watch=proc, extra=tag, **flags))
    finally:
        proc.stop()
    return out


def image_section(points: list[dict[str, Any]]) -> list[str]:
    """CPU per call with and without the image (c=1), and the peak RSS with 64 image calls in flight."""
    from report import find, fmt, lat

    mine = [p for p in points if p["path"] == "image"]
    if not mine:
        return []
    lines = [
        "",
        "## A 1 MB image part",
        "",
        "The same CallModel conversation as text, and with a 1 MB inline PNG part beside the text "
        "(`loadgen -image-bytes 1000000`), through one sidecar process.",
        "",
        "| request | conc. | calls/s | p50 | CPU s/1k | CPU ms/call | peak RSS MB |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, c in (("text", 1), ("image", 1), ("image", IN_FLIGHT)):
        p = find(mine, variant=name, concurrency=c)
        if p is None:
            continue
        process = p.get("process") or {}
        cpu = process.get("cpu_s_per_1k")
        lines.append(
            f"| {name} | {c} | {fmt(p['throughput_rps'], 0)} | {fmt(lat(p, 'p50'))} | {fmt(cpu, 3)} | "
            f"{fmt(cpu, 2) if cpu is not None else '—'} | {fmt(process.get('peak_rss_mb'), 0)} |"
        )
    return lines
