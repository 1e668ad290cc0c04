"""Every fenced block of README.md and docs/*.md a user would paste runs here, read from the file as written.

A ``python`` block runs in a fresh interpreter against one running sidecar (the embedded default with
the HTTP port, started once for the module), its addresses replaced by the sidecar's and nothing else;
a ``sh`` block's commands run against the same sidecar; a ``yaml`` block is validated by the sidecar's
own loader as ``sidecar check-config`` does (a block with models or tools must serve something; a
fragment must be valid), with the environment variables it names set to dummy values. A block that is
not run says so: the info string ``text`` (an output sample, a diagram, a listing), or an HTML comment
``<!-- not run: why -->`` on the line before its fence. Any other block fails here, naming its file and line.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sidecar.config.errors import ConfigError
from sidecar.config.loading import load_config, parse_config
from tests.processes.test_server_process import Proc, _free_port

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DOC_GRPC = "127.0.0.1:50051"
DOC_HTTP = "127.0.0.1:8080"
"""Where the docs' sidecar listens: the test's own ports take their places, and nothing else changes."""
NOT_RUN = re.compile(r"^<!-- not run: (?P<why>\S.*\S) -->$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+)(?P<info>[^`]*)$")
RUN = ("python", "sh", "yaml")
SNIPPET_S = 120.0
"""A snippet's whole run: each makes a few calls to the local fakes (seconds); far past any slow machine."""


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    info: str
    text: str
    not_run: str | None  # the reason, when the line before the fence gives one

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> Iterator[Block]:
    lines = path.read_text(encoding="utf-8").split("\n")
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if opened is None:
            i += 1
            continue
        indent, fence = opened["indent"], opened["fence"]
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        assert end < len(lines), f"{path.relative_to(ROOT)}:{i + 1}: a fence never closed"
        body = [line.removeprefix(indent) for line in lines[i + 1 : end]]
        marked = NOT_RUN.match(lines[i - 1].strip()) if i > 0 else None
        yield Block(path, i + 1, opened["info"].strip(), "\n".join(body) + "\n", marked["why"] if marked else None)
        i = end + 1


ALL = [b for path in DOCS for b in blocks(path)]


def run(info: str) -> list[Block]:
    return [b for b in ALL if b.info == info and b.not_run is None]


def test_every_block_is_run_or_says_why_not() -> None:
    assert len(ALL) > 50  # the reader finds the blocks
    unmarked = [f"{b.where} ```{b.info}" for b in ALL if b.not_run is None and b.info not in (*RUN, "text")]
    assert not unmarked, "run it here, or mark it ```text or <!-- not run: why -->: " + ", ".join(unmarked)
    pointless = [b.where for b in ALL if b.not_run is not None and b.info == "text"]
    assert not pointless, "a ```text block is not run by its info string alone: " + ", ".join(pointless)


# ---------------------------------------------------------------- the configs


DUMMY = {"REDIS_URL": "redis://127.0.0.1:6379/0"}
"""A variable whose value the loader checks gets a dummy of the right shape; any other a dummy string."""


@pytest.mark.parametrize("block", run("yaml"), ids=lambda b: b.where)
def test_the_config_block_is_valid(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", block.text):
        monkeypatch.setenv(name, DUMMY.get(name, f"dummy-{name.lower()}"))
    whole = re.search(r"^(models|tools):", block.text, re.MULTILINE) is not None
    try:
        if whole:  # a config that serves: exactly what `sidecar check-config` reads
            file = tmp_path / "config.yaml"
            file.write_text(block.text, encoding="utf-8")
            load_config(file)
        else:  # a section of one: valid as written
            parse_config(block.text, block.where)
    except ConfigError as exc:
        pytest.fail(f"{block.where}: {exc}")


# ---------------------------------------------------------------- a running sidecar


@dataclass(frozen=True)
class Served:
    grpc: str
    http: str


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    grpc, http = f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"
    proc = Proc("--listen", grpc, "--http", http)  # the embedded default, as make run serves it
    try:
        assert proc.popen.stdout is not None
        banner = [proc.banner, *(proc.popen.stdout.readline() for _ in range(8))]
        assert any(f"http://{http}/" in line for line in banner), banner
        yield Served(grpc, http)
    finally:
        proc.stop()


def placed(text: str, served: Served) -> str:
    return text.replace(DOC_GRPC, served.grpc).replace(DOC_HTTP, served.http)


RUNNER = """
import ast, asyncio, inspect, sys
where, line = sys.argv[1], int(sys.argv[2])
source = "\\n" * line + sys.stdin.read()  # a traceback names the doc's own lines
code = compile(source, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
ran = eval(code, {"__name__": "__main__"})
if inspect.iscoroutine(ran):  # top-level awaits, as in `python -m asyncio`
    asyncio.run(ran)
"""


@pytest.mark.parametrize("block", run("python"), ids=lambda b: b.where)
def test_the_python_block_runs_against_a_running_sidecar(block: Block, served: Served, tmp_path: Path) -> None:
    assert DOC_GRPC in block.text or DOC_HTTP in block.text, f"{block.where}: it names no sidecar to run against"
    (tmp_path / "error.png").write_bytes(PNG)  # the README's screenshot: a file of the user's own
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(block.path), str(block.line)],
        input=placed(block.text, served),
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=SNIPPET_S,
    )
    assert done.returncode == 0, f"{block.where}: the snippet failed:\n{done.stderr}"


PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000b49444154789c6360000200000500017a5eab3f0000000049454e44ae426082"
)
"""A 1x1 PNG."""


@pytest.mark.parametrize("block", run("sh"), ids=lambda b: b.where)
def test_the_shell_block_runs_against_a_running_sidecar(block: Block, served: Served, tmp_path: Path) -> None:
    for command in commands(block.text):
        words = shlex.split(placed(command, served))
        if words[0].endswith("bin/sidecar") and "--target" not in words:
            words += ["--target", served.grpc]  # the default address, 127.0.0.1:50051, is the test's sidecar
        if words[0].startswith(".venv/"):
            words[0] = str(Path(sys.executable).parent / Path(words[0]).name)
        done = subprocess.run(words, check=False, capture_output=True, text=True, cwd=tmp_path, timeout=SNIPPET_S)
        assert done.returncode == 0, f"{block.where}: `{command}` failed:\n{done.stdout}\n{done.stderr}"


def commands(text: str) -> list[str]:
    """The block's commands, one a line, their comments left out (a line that is only a comment too)."""
    found = []
    for line in text.splitlines():
        command = line.split(" #", 1)[0].strip()
        if command and not command.startswith("#"):
            found.append(command)
    return found
