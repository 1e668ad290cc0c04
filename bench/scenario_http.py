"""The "http" scenario: the OpenAI-compatible front, against the gRPC path and LiteLLM's proxy.

    bench/.venv/bin/python bench/run.py --only direct,litellm,http

One sidecar process serves both ports (its config is the template's, with ``http.listen`` on a
free port and the MCP front off); at each concurrency of ``HTTP_CONCURRENCIES`` the load
generator sends, to that one process:

    variant   what                                             loadgen mode
    grpc      sidecar.v1.Sidecar/CallModel on the gRPC port     grpc-model
    openai    POST /v1/chat/completions on the HTTP port       http-chat: the very OpenAI-format body it
                                                               sends upstream directly and to LiteLLM

So the two variants differ only in the door: the same process, model, retry policy and upstream.
The report (``report.http_section``) gives each variant's added p50 over the direct path at the
same concurrency and its CPU-s per 1,000 calls, and the HTTP front against the gRPC path and
against LiteLLM's proxy (its points from the ``litellm`` scenario of the same run).
"""

from __future__ import annotations

from typing import Any

__all__ = ["HTTP_CONCURRENCIES", "scenario_http"]

HTTP_CONCURRENCIES = (1, 16)
HTTP_SECTION = '\nhttp:\n  listen: "127.0.0.1:{port}"\n  mcp: false\n'
"""Appended to the template's config: the HTTP port, with only the model fronts on."""


def scenario_http(b: Any) -> list[dict[str, Any]]:
    import run  # bench/run.py: imported here, once it is loaded (it registers this scenario)

    grpc_port, http_port = run.free_port(), run.free_port()
    config = run.write_sidecar_config(b, grpc_port, "sidecar-http")
    config.write_text(config.read_text() + HTTP_SECTION.format(port=http_port))
    argv = [*b.args.sidecar_cmd.split(), "--config", str(config)]
    env = {"BENCH_KEY": b.key, "PYTHONUNBUFFERED": "1", **run.TRACING_OFF_ENV}
    proc = run.start("sidecar-http", argv, env=env)
    target, url = f"127.0.0.1:{grpc_port}", f"http://127.0.0.1:{http_port}/v1/chat/completions"
    out: list[dict[str, Any]] = []
    try:
        for mode, args in (("grpc-model", ["-target", target]), ("http-chat", ["-url", url])):
            error = run.probe(proc, ["-mode", mode, *args, "-probe", "60s", "-timeout", "5s"])
            if error is not None:
                raise RuntimeError(f"the sidecar's {mode} door did not answer: {error}\n{proc.tail()}")
        for c in [c for c in HTTP_CONCURRENCIES if c in b.args.concurrency] or list(HTTP_CONCURRENCIES):
            tag = run._tag("http", "chat", variant="grpc")
            out.append(b.loadgen(f"http-grpc-c{c}", "grpc-model", c, target=target, watch=proc, extra=tag))
            tag = run._tag("http", "chat", variant="openai")
            out.append(b.loadgen(f"http-openai-c{c}", "http-chat", c, url=url, watch=proc, extra=tag))
    finally:
        proc.stop()
    return out
