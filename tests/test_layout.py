"""The layout is the architecture: each layer imports only what docs/architecture.md says it may.

    core/       policy, no I/O       no grpc, no generated code, no OpenTelemetry, no httpx, nothing above it
    net/        the HTTP client      httpx over aiohttp (net alone), and core
    providers/  adapters to models   httpx through net, core, config; no gRPC, no generated code, no OpenTelemetry
    tools/      adapters to tools    the same, and the MCP SDK as a client (MCP tool backends)
    telemetry/  the observer         OpenTelemetry, core; never the adapters or the server
    state/      shared state         redis, core; no gRPC, no OpenTelemetry, no other adapter
    server/     the gRPC boundary    everything; the only layer that touches the generated contract (with telemetry's
                                     server spans), and the only one that serves HTTP (starlette, uvicorn)

Read from the source with ``ast``, so a lazy import inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "sidecar"

FOREIGN = ("grpc", "grpc_status", "grpc_health", "grpc_reflection", "sidecar_contract", "opentelemetry", "httpx",
           "mcp", "starlette", "uvicorn")  # fmt: skip
HTTP_SERVING = ("starlette", "uvicorn")
"""The HTTP port's stack: the server's alone (an adapter speaks MCP as a client, never serves)."""
RULES: dict[str, tuple[str, ...]] = {
    "core": (*FOREIGN, "httpcore", "aiohttp", "sidecar.config", "sidecar.net", "sidecar.providers", "sidecar.tools",
             "sidecar.server", "sidecar.telemetry", "sidecar.fakes", "sidecar.cli"),
    "net": ("grpc", "sidecar_contract", "opentelemetry", "sidecar.providers", "sidecar.tools", "sidecar.server",
            "sidecar.telemetry", "mcp", *HTTP_SERVING),
    "providers": ("grpc", "grpc_status", "sidecar_contract", "opentelemetry", "sidecar.server", "sidecar.telemetry",
                  "sidecar.tools", "aiohttp", *HTTP_SERVING),
    "tools": ("grpc", "grpc_status", "sidecar_contract", "opentelemetry", "sidecar.server", "sidecar.telemetry",
              "sidecar.providers", "aiohttp", *HTTP_SERVING),
    "telemetry": ("sidecar.providers", "sidecar.tools", "sidecar.server", "httpx", "mcp", *HTTP_SERVING),
    "state": (*FOREIGN, "httpcore", "aiohttp", "sidecar.config", "sidecar.net", "sidecar.providers", "sidecar.tools",
              "sidecar.server", "sidecar.telemetry", "sidecar.fakes", "sidecar.cli"),
}  # fmt: skip


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _forbidden(name: str, banned: tuple[str, ...]) -> bool:
    return any(name == b or name.startswith(b + ".") for b in banned)


@pytest.mark.parametrize("layer", sorted(RULES))
def test_a_layer_imports_only_what_it_may(layer: str) -> None:
    found = {
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((PACKAGE / layer).rglob("*.py"))
        for name in _imports(path)
        if _forbidden(name, RULES[layer])
    }
    assert not found, "\n".join(sorted(found))


def test_every_layer_is_checked() -> None:
    layers = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert layers - set(RULES) == {"server", "fakes"}  # the boundary may import anything; the fakes are apart


def test_nothing_imports_a_private_module_of_another_distribution() -> None:
    paths = [
        *PACKAGE.rglob("*.py"),
        *(ROOT / "clients/python/sidecar_client").rglob("*.py"),
        *ROOT.glob("tests/**/*.py"),
    ]
    found = {
        f"{path.relative_to(ROOT)} imports {name}"
        for path in paths
        for name in _imports(path)
        if any(part.startswith("_") for part in name.split(".")[1:])
        and name.split(".")[0] in ("sidecar_client", "sidecar_contract", "grpc", "httpx", "httpcore", "aiolimiter")
    }
    assert not found, "\n".join(sorted(found))


def test_the_fakes_are_not_part_of_the_sidecar() -> None:
    """The bundled fakes are started by the app for the embedded default, never imported by the policy."""
    found = {
        f"{path.relative_to(ROOT)} imports {name}"
        for layer in ("core", "net", "providers", "tools", "telemetry", "state")
        for path in (PACKAGE / layer).rglob("*.py")
        for name in _imports(path)
        if _forbidden(name, ("sidecar.fakes",))
    }
    assert not found, "\n".join(sorted(found))
