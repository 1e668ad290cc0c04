"""make peers-latest: the peer tests against the newest releases of the SDKs and frameworks (docs/peers.md).

Installs the newest release of every official SDK and agent framework that `make test` pins as a peer
into a scratch venv (.cache/peers-latest/venv, with the project and its test tools), a scratch npm
folder (.cache/peers-latest/vercel, a copy of tests/peers/vercel's package.json and agent.mjs) and, for
LlamaIndex, whose OpenAI LLM requires openai<3, a scratch venv of its own (.cache/peers-latest/llamaindex,
as .venv-peers/llamaindex is), never the project's .venv, .venv-peers or tests/peers. Then runs each
framework's peer tests, at its defaults, with that venv's Python, that npm folder and that LlamaIndex
venv, and prints a table: framework, version tried, pass/fail, the first error line. Exits 1 when any
framework failed. Nothing here moves a pin: the maintainer does that (docs/peers.md, "Moving the pins").
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRATCH = ROOT / ".cache" / "peers-latest"
VENV = SCRATCH / "venv"
NPM = SCRATCH / "vercel"
PY = VENV / "bin" / "python"
LLAMAINDEX = SCRATCH / "llamaindex"
LLAMAINDEX_PY = LLAMAINDEX / "bin" / "python"


@dataclass(frozen=True)
class Peer:
    name: str
    packages: tuple[str, ...]  # the ones whose version the table shows
    tests: tuple[str, ...]
    npm: bool = False
    python: Path = PY  # the venv its versions are read from


PEERS = (
    Peer("OpenAI Python SDK", ("openai",), ("tests/fronts/test_http_openai.py", "tests/formats/test_responses_sdk.py")),
    Peer("Anthropic Python SDK", ("anthropic",), ("tests/fronts/test_http_anthropic.py",)),
    Peer("MCP SDK client", ("mcp",), ("tests/fronts/test_mcp_front.py",)),
    Peer("pydantic-ai", ("pydantic-ai-slim",), ("tests/peers/test_peer_pydantic_ai.py",)),
    Peer("LangChain ChatAnthropic", ("langchain-anthropic", "langchain-core"), ("tests/peers/test_peer_langchain.py",)),
    Peer(
        "LangGraph ReAct agent", ("langgraph", "langchain", "langchain-openai"), ("tests/peers/test_peer_langgraph.py",)
    ),
    Peer("OpenAI Agents SDK", ("openai-agents",), ("tests/peers/test_peer_openai_agents.py",)),
    Peer(
        "Vercel AI SDK",
        ("ai", "@ai-sdk/openai-compatible", "@ai-sdk/openai", "@ai-sdk/anthropic"),
        ("tests/peers/test_peer_vercel_ai.py",),
        npm=True,
    ),
    Peer(
        "LlamaIndex function agent",
        ("llama-index-core", "llama-index-llms-openai", "llama-index-llms-openai-like"),
        ("tests/peers/test_peer_llamaindex.py",),
        python=LLAMAINDEX_PY,
    ),
)
PYPI = (
    "openai",
    "anthropic",
    "mcp",
    "pydantic-ai-slim[openai]",
    "openai-agents",
    "langchain-anthropic",
    "langchain-core",
    "langgraph",
    "langchain",
    "langchain-openai",
)
NPM_PACKAGES = ("ai", "@ai-sdk/openai-compatible", "@ai-sdk/openai", "@ai-sdk/anthropic")
LLAMAINDEX_PYPI = ("llama-index-core", "llama-index-llms-openai", "llama-index-llms-openai-like")
"""Into their own venv: the OpenAI LLM requires openai<3 (tests/peers/llamaindex/requirements.txt)."""


def run(*argv: str | Path, cwd: Path = ROOT) -> None:
    print("+", " ".join(str(a) for a in argv), flush=True)
    subprocess.run([str(a) for a in argv], cwd=cwd, check=True)


def install() -> None:
    """The project and its test tools at the pins (constraints.txt), then the peers' newest releases."""
    shutil.rmtree(SCRATCH, ignore_errors=True)
    run(sys.executable, "-m", "venv", VENV)
    run(PY, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    # every pin but the peers': the sidecar's own dependencies and pytest as `make test` has them
    peers = {re.sub(r"\[.*", "", p) for p in PYPI}
    pins = [
        line
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if line and not line.startswith("#") and line.split("==")[0].lower() not in peers
    ]
    constraints = SCRATCH / "constraints-without-peers.txt"
    constraints.write_text("\n".join(pins) + "\n")
    run(
        PY,
        "-m",
        "pip",
        "install",
        "--quiet",
        "-c",
        constraints,
        "./protos/python",
        "-e",
        "clients/python",
        "-e",
        ".[dev]",
    )
    # newest releases, each resolved with the others (not the project's pins): what a new app gets; pip
    # says the sidecar's dev extra wanted the pinned ones, and installs them all the same
    run(PY, "-m", "pip", "install", "--quiet", "--upgrade", *PYPI)
    NPM.mkdir(parents=True)
    for name in ("agent.mjs",):
        shutil.copy(ROOT / "tests" / "peers" / "vercel" / name, NPM / name)
    package = json.loads((ROOT / "tests" / "peers" / "vercel" / "package.json").read_text())
    package["dependencies"] = {}
    (NPM / "package.json").write_text(json.dumps(package, indent=2) + "\n")
    latest = [f"{name}@latest" for name in NPM_PACKAGES]
    run("npm", "install", "--no-audit", "--no-fund", "--loglevel=error", *latest, cwd=NPM)
    run(sys.executable, "-m", "venv", LLAMAINDEX)
    run(LLAMAINDEX_PY, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    run(LLAMAINDEX_PY, "-m", "pip", "install", "--quiet", *LLAMAINDEX_PYPI)


def versions(python: Path) -> dict[str, str]:
    out = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=json"], capture_output=True, text=True, check=True
    )
    found = {p["name"].lower(): p["version"] for p in json.loads(out.stdout)}
    for name in NPM_PACKAGES:
        manifest = NPM / "node_modules" / name / "package.json"
        if manifest.is_file():
            found[name] = json.loads(manifest.read_text())["version"]
    return found


def first_error(output: str) -> str:
    for line in output.splitlines():
        if line.startswith("E ") and line[1:].strip():
            return line[1:].strip()[:160]
    tail = [line for line in output.splitlines() if line.strip()]
    return tail[-1][:160] if tail else "no output"


def test(peer: Peer) -> tuple[bool, str]:
    env = {**os.environ, "SIDECAR_PEER_VERCEL": str(NPM), "SIDECAR_PEER_LLAMAINDEX": str(LLAMAINDEX)}
    argv = [str(PY), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *peer.tests]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if done.returncode == 0:
        return True, ""
    return False, first_error(done.stdout + done.stderr)


def main() -> int:
    if "--no-install" not in sys.argv[1:]:
        install()
    rows = []
    for peer in PEERS:
        found = versions(peer.python)
        tried = ", ".join(f"{p} {found.get(p.lower(), 'missing')}" for p in peer.packages)
        print(f"testing {peer.name} ({tried})", flush=True)
        passed, error = test(peer)
        rows.append((peer.name, tried, "pass" if passed else "FAIL", error))
    header = ("framework", "version tried", "result", "first error line")
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(3)]
    print()
    for row in (header, *rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)), row[3])
    return 0 if all(r[2] == "pass" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
