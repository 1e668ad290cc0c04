"""A real sidecar with its HTTP port on, the fakes behind it, for an HTTP front's foreign peers.

    .venv/bin/python tests/http_peer.py exec -- CMD...     run CMD with the variables below set

The fake provider and tool backend run in this process on loopback (as tests/conformance/harness.py
runs them); the sidecar is a real ``python -m sidecar serve`` process with ``--http`` on a free
port, serving the config below. CMD gets::

    SIDECAR_HTTP_URL     the HTTP port (an OpenAI SDK's base_url is SIDECAR_HTTP_URL/v1)
    SIDECAR_ADDR         the gRPC port
    FAKE_PROVIDER_URL    the fake provider (POST /_fake/script scripts a model's next answers)

Every model that a peer makes fail has an upstream model of its own (a 429 slows every later call
to its model: no case depends on the one before). The exit code is CMD's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "conformance"))
from harness import _stop, _wait_listening, fakes, free_port  # noqa: E402

CONFIG = """
server: {listen: "127.0.0.1:0", grace_period_s: 1}
policy:
  upstream_retries: 3
  windows: {rate_limit: [0.01, 0.02], overload: [0.01, 0.02], transient: [0.01, 0.02]}
providers:
  oai:
    wire_format: openai
    base_url: "${FAKE_PROVIDER_URL}/v1"
    api_key: "${PEER_OPENAI_KEY:-sk-peer-0123456789abcdef}"
  ant:
    wire_format: anthropic
    base_url: "${FAKE_PROVIDER_URL}"
    api_key: "${PEER_ANTHROPIC_KEY:-sk-ant-peer-0123456789abcdef}"
models:
  gpt: {provider: oai, upstream_model: fake-gpt, context_window: 8000, max_output_tokens: 2048}
  claude: {provider: ant, upstream_model: fake-claude, context_window: 8000, max_output_tokens: 2048}
  gpt-limited: {provider: oai, upstream_model: fake-gpt-limited, context_window: 8000, max_output_tokens: 2048}
  gpt-overloaded: {provider: oai, upstream_model: fake-gpt-overloaded, context_window: 8000, max_output_tokens: 2048}
tools:
  search:
    description: Search the documents
    kind: search
    service: docs
    url: "${TOOL_BACKEND_URL}/search?q={query}"
    parameters: {type: object, properties: {query: {type: string, minLength: 1}}, required: [query]}
"""


def main(argv: list[str]) -> int:
    if argv[:1] != ["exec"] or len(argv) < 2:
        print("usage: http_peer.py exec -- CMD...", file=sys.stderr)
        return 2
    command = argv[2:] if argv[1] == "--" else argv[1:]
    with tempfile.TemporaryDirectory(prefix="http-peer-") as tmp, fakes() as (provider, tools):
        config, log_path = Path(tmp) / "sidecar.yaml", Path(tmp) / "sidecar.log"
        config.write_text(CONFIG)
        grpc_port, http_port = free_port(), free_port()
        env = {**os.environ, "FAKE_PROVIDER_URL": provider, "TOOL_BACKEND_URL": tools}
        serve = [sys.executable, "-m", "sidecar", "serve", "--config", str(config)]
        serve += ["--listen", f"127.0.0.1:{grpc_port}", "--http", f"127.0.0.1:{http_port}"]
        with log_path.open("wb") as log:
            proc = subprocess.Popen(serve, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
            try:
                _wait_listening(proc, http_port, log_path)
                peer = {**env, "SIDECAR_HTTP_URL": f"http://127.0.0.1:{http_port}"}
                code = subprocess.call(command, env={**peer, "SIDECAR_ADDR": f"127.0.0.1:{grpc_port}"})
            finally:
                _stop(proc)
        if code != 0:
            print(f"-- {command[0]} exited {code}; the end of the sidecar's log:")
            print("\n".join(log_path.read_text(errors="replace").splitlines()[-30:]))
        return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
