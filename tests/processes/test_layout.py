"""The layout is the architecture: no folder of ``sidecar/`` imports what its row forbids.

The rules are the tables of docs/architecture.md ("What each folder may not import"); ``GROUPS`` and
``RULES`` are the same tables in Python, and ``test_the_tables_in_the_docs_are_the_rules`` keeps the
two equal, name for name. Imports are read from the source with ``ast``, so a lazy import inside a
function counts too. The tests themselves are held to the table "How tests/ is grouped" there: each
in the folder named for what it proves.
"""

from __future__ import annotations

import ast
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sidecar"
DOC = ROOT / "docs" / "architecture.md"

GRPC = ("grpc", "grpc_status", "grpc_health", "grpc_reflection")
CONTRACT = ("sidecar_contract",)
OTEL = ("opentelemetry",)
HTTP_CLIENT = ("httpx", "httpcore", "aiohttp")
HTTP_SERVING = ("starlette", "uvicorn")
"""The HTTP port's stack: the server's alone (an adapter speaks MCP as a client, never serves)."""
MCP = ("mcp",)
GROUPS: dict[str, tuple[str, ...]] = {
    "gRPC": GRPC,
    "the contract": CONTRACT,
    "OpenTelemetry": OTEL,
    "the HTTP client": HTTP_CLIENT,
    "HTTP serving": HTTP_SERVING,
    "MCP": MCP,
}
_FOREIGN = (*GRPC, *CONTRACT, *OTEL, *HTTP_CLIENT, *HTTP_SERVING, *MCP)
FORMAT_FAKES = "sidecar.providers.formats.*.fake*"
"""A format's fake modules (``fake.py``, ``fake_*.py`` in its folder): the fake provider's, so of the ``fakes``
row and not of the folders around them; a ``*`` in a row's name matches any part of a module's name."""
RULES: dict[str, tuple[str, ...]] = {
    "core": (*_FOREIGN, "sidecar.config", "sidecar.net", "sidecar.providers", "sidecar.tools", "sidecar.telemetry",
             "sidecar.state", "sidecar.server", "sidecar.fakes", "sidecar.cli"),
    "net": (*GRPC, *CONTRACT, *OTEL, *HTTP_SERVING, *MCP, "sidecar.config", "sidecar.providers", "sidecar.tools",
            "sidecar.telemetry", "sidecar.state", "sidecar.server", "sidecar.fakes"),
    "providers": (*GRPC, *CONTRACT, *OTEL, *HTTP_SERVING, *MCP, "aiohttp", "sidecar.tools", "sidecar.telemetry",
                  "sidecar.state", "sidecar.server", "sidecar.fakes", FORMAT_FAKES),
    "providers/formats": (*HTTP_CLIENT, "httpx_sse", "sidecar.net", "sidecar.providers.client",
                          "sidecar.providers.streaming", "sidecar.providers.service", "sidecar.providers.fitting",
                          "sidecar.providers.judging", "sidecar.providers.give_up", "sidecar.providers.routes",
                          "sidecar.providers.pacing"),
    "tools": (*GRPC, *CONTRACT, *OTEL, *HTTP_SERVING, "aiohttp", "sidecar.providers", "sidecar.telemetry",
              "sidecar.state", "sidecar.server", "sidecar.fakes"),
    "telemetry": ("grpc_status", "grpc_health", "grpc_reflection", *CONTRACT, *HTTP_CLIENT, *HTTP_SERVING, *MCP,
                  "sidecar.config", "sidecar.net",
                  "sidecar.providers", "sidecar.tools", "sidecar.state", "sidecar.server", "sidecar.fakes"),
    "state": (*_FOREIGN, "sidecar.config", "sidecar.net", "sidecar.providers", "sidecar.tools", "sidecar.telemetry",
              "sidecar.server", "sidecar.fakes", "sidecar.cli"),
    "config": (*_FOREIGN, "redis", "sidecar.net", "sidecar.providers", "sidecar.tools", "sidecar.telemetry",
               "sidecar.state", "sidecar.server", "sidecar.fakes", "sidecar.cli"),
    "fakes": (*GRPC, *CONTRACT, *OTEL, "sidecar.net", "sidecar.tools", "sidecar.telemetry", "sidecar.state",
              "sidecar.server"),
    "server": (),
    "server/grpc": (*HTTP_SERVING, *MCP, "sidecar.server.http"),
    "server/http": (*GRPC, "sidecar.server.grpc"),
}  # fmt: skip
"""Folder -> what its modules may not import; a folder inside another keeps the outer one's row too."""
BUT: dict[str, tuple[str, ...]] = {"config": ("sidecar.providers.formats.names",)}
"""Folder -> the modules of a package its row names that it may import all the same (each imports nothing of
the sidecar: ``test_what_a_row_allows_imports_nothing_of_the_sidecar``): the registry's lines, which the
configuration reads for the wire formats' names and the credentials each reads from the environment."""


def _imports(path: Path, *, from_names: bool = True) -> set[str]:
    """Every module ``path`` imports, absolute; ``from a import b`` is ``a``, and ``a.b`` with ``from_names``."""
    package = path.relative_to(ROOT).with_suffix("").parts[:-1]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's own package, up level - 1
                base = ".".join([*package[: len(package) - node.level + 1], *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            names.add(base)
            if from_names:
                names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def _forbidden(name: str, banned: tuple[str, ...], allowed: tuple[str, ...] = ()) -> bool:
    def under(names: tuple[str, ...]) -> bool:
        return any(name == b or name.startswith(b + ".") or fnmatchcase(name, b) for b in names)

    return under(banned) and not under(allowed)


def _banned(layer: str) -> tuple[str, ...]:
    """What a module of ``layer`` may not import: its row and the row of every folder around it."""
    return tuple(
        name for outer, row in RULES.items() if layer == outer or layer.startswith(outer + "/") for name in row
    )


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _modules(layer: str) -> list[Path]:
    """The modules ``layer``'s rows judge: its folder's, a format's fakes going with ``fakes`` (``FORMAT_FAKES``)."""
    fakes = {p for p in (PACKAGE / "providers" / "formats").rglob("*.py") if fnmatchcase(_module(p), FORMAT_FAKES)}
    own = set((PACKAGE / layer).rglob("*.py"))
    return sorted(own | fakes if layer == "fakes" else own - fakes)


@pytest.mark.parametrize("layer", sorted(RULES))
def test_a_layer_imports_only_what_it_may(layer: str) -> None:
    banned, allowed = _banned(layer), BUT.get(layer, ())
    found = {
        f"{path.relative_to(ROOT)} imports {name}"
        for path in _modules(layer)
        for name in _imports(path)
        if _forbidden(name, banned, allowed)
    }
    assert not found, "\n".join(sorted(found))


def test_a_formats_fakes_are_judged_as_the_fakes() -> None:
    fakes = [str(p.relative_to(PACKAGE)) for p in _modules("fakes") if "providers" in p.parts]
    assert "providers/formats/gemini/fake.py" in fakes
    assert "providers/formats/anthropic_messages/fake_answers.py" in fakes
    assert not set(_modules("providers")) & set(_modules("fakes"))


def test_what_a_row_allows_imports_nothing_of_the_sidecar() -> None:
    for module in (m for allowed in BUT.values() for m in allowed):
        path = ROOT / (module.replace(".", "/") + ".py")
        assert [name for name in _imports(path) if name.startswith("sidecar")] == [], module


def test_every_layer_is_checked() -> None:
    """Every package of ``sidecar/`` has a row, and every row is a package (no row outlives its folder)."""
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages == {layer.partition("/")[0] for layer in RULES}
    assert [layer for layer in RULES if not (PACKAGE / layer / "__init__.py").exists()] == []


def _doc_table(header: str) -> dict[str, str]:
    """The table of docs/architecture.md under ``header``: each row's first cell -> its last cell."""
    lines = DOC.read_text().splitlines()
    assert header in lines, f"docs/architecture.md has no table headed {header!r}"
    rows: dict[str, str] = {}
    for line in lines[lines.index(header) + 2 :]:  # past the header and the |---| line
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        rows[cells[0].strip("`")] = cells[-1]
    return rows


def _names(cell: str, groups: dict[str, tuple[str, ...]]) -> set[str]:
    """A cell's modules: a `module` in backticks is itself, a bare name the group it names; — is none; what
    follows "but" is what ``_but`` reads."""
    cell = cell.partition(" but ")[0].rstrip(",")
    if cell == "—":
        return set()
    names: set[str] = set()
    for item in (part.strip() for part in cell.split(",")):
        if item.startswith("`") and item.endswith("`"):
            names.add(item.strip("`"))
        else:
            assert item in groups, f"docs/architecture.md: {item!r} is neither a `module` nor a group"
            names.update(groups[item])
    return names


def _but(cell: str) -> set[str]:
    """The modules a cell allows all the same: "..., but `module`, `module`" (``BUT``)."""
    allowed = cell.partition(" but ")[2]
    return {item.strip().strip("`") for item in allowed.split(",")} if allowed else set()


def test_the_tables_in_the_docs_are_the_rules() -> None:
    groups = {name: tuple(_names(cell, {})) for name, cell in _doc_table("| group | stands for |").items()}
    assert {name: set(group) for name, group in groups.items()} == {name: set(g) for name, g in GROUPS.items()}
    table = _doc_table("| layer | holds | may not import |")
    rows = {layer.removesuffix("/"): _names(cell, groups) for layer, cell in table.items()}
    assert list(rows) == list(RULES)  # the same folders, in the same order
    assert rows == {layer: set(banned) for layer, banned in RULES.items()}
    buts = {layer.removesuffix("/"): _but(cell) for layer, cell in table.items()}
    assert {layer: allowed for layer, allowed in buts.items() if allowed} == {k: set(v) for k, v in BUT.items()}


def test_nothing_imports_a_private_module_of_another_distribution() -> None:
    paths = [
        *PACKAGE.rglob("*.py"),
        *(ROOT / "clients/python/sidecar_client").rglob("*.py"),
        *ROOT.glob("tests/**/*.py"),
    ]
    found = {
        f"{path.relative_to(ROOT)} imports {name}"
        for path in paths
        for name in _imports(path, from_names=False)
        if any(part.startswith("_") for part in name.split(".")[1:])
        and name.split(".")[0] in ("sidecar_client", "sidecar_contract", "grpc", "httpx", "httpcore", "aiolimiter")
    }
    assert not found, "\n".join(sorted(found))


def test_the_fakes_are_not_part_of_the_sidecar() -> None:
    """The bundled fakes (and each format's, in its folder) are started by the app for the embedded default,
    never imported by a layer."""
    apart = {layer for layer in RULES if layer.partition("/")[0] in ("server", "fakes")}
    for fake in ("sidecar.fakes", "sidecar.providers.formats.gemini.fake", "sidecar.providers.formats.x.fake_y"):
        assert [layer for layer in RULES if layer not in apart and not _forbidden(fake, _banned(layer))] == [], fake


MAX_MODULE_LINES = 500
"""Small modules named for what they hold: a module past this is usually two (STYLE.md)."""


def test_no_module_is_over_the_line_limit() -> None:
    lengths = {
        str(path.relative_to(PACKAGE)): len(path.read_text(encoding="utf-8").splitlines())
        for path in PACKAGE.rglob("*.py")
    }
    over = {name: n for name, n in lengths.items() if n > MAX_MODULE_LINES}
    assert not over, f"modules over {MAX_MODULE_LINES} lines: split each by its ideas: {over}"


def test_the_tests_are_grouped_as_the_docs_say() -> None:
    """A test lives in a folder named for what it proves: a row of docs/architecture.md's table each, none loose."""
    tests = ROOT / "tests"
    assert sorted(path.name for path in tests.glob("test_*.py")) == []
    folders = {path.name for path in tests.iterdir() if path.is_dir() and any(path.glob("test_*.py"))}
    assert folders == set(_doc_table("| folder | what its tests prove |"))
