"""Reading the file: the hardened YAML loader, ``${NAME}`` expanded, every problem one ConfigError.

What the loader refuses before any validation (each a ConfigError, never a traceback)::

    a file larger than MAX_CONFIG_BYTES (1 MiB)           read no further
    bytes that are not UTF-8                              line, column and the key whose value holds them
    mappings or lists nested deeper than MAX_CONFIG_DEPTH the key where it goes too deep (PyYAML recurses)
    more than MAX_CONFIG_NODES nodes, aliases expanded    the key where it went past (a "billion laughs")
    an alias inside the node it names                     the key of the alias (it would never end)
    a value YAML cannot construct (2001-13-45, 5000 digits) its line and column

and, for a file (``load_config``), one that serves nothing: no model and no tool (``serving``).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from sidecar.config.bounds import DEFAULT_CONFIG, MAX_CONFIG_BYTES, MAX_CONFIG_DEPTH, MAX_CONFIG_NODES
from sidecar.config.document import Config
from sidecar.config.errors import ConfigError
from sidecar.config.secrets import FROM_ENVIRONMENT, expand, literal_secrets
from sidecar.config.serving import check_serves_something
from sidecar.config.tools import TOOL_TAGS
from sidecar.core.redact import mask_keys

__all__ = ["load_config", "load_default_config", "parse_config"]


def _describe(exc: ValidationError, secrets: list[str]) -> str:
    lines = []
    for err in exc.errors():
        parts = [str(p) for p in err["loc"] if not str(p).startswith("function-")]
        if parts[:1] == ["routes"]:  # a route is written as a models: entry (a file has no routes: section)
            parts[0] = "models"
        tool = parts[:1] == ["tools"]
        if tool and len(parts) > 2 and parts[2] in TOOL_TAGS:
            del parts[2]  # the kind pydantic chose to validate the tool as: the file has no such key
        loc = ".".join(parts)
        msg = err["msg"].removeprefix("Value error, ")
        if tool and err["type"] in ("union_tag_invalid", "union_tag_not_found"):
            msg = "kind must be search, fetch or mcp"
        given = err.get("input")
        shown = "" if isinstance(given, dict) else f" (got {_shown(given)})"
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        lines.append(f"{loc or '(top level)'}: {msg}{shown}")
    return mask_keys("\n".join(lines), secrets)


LOG10_2 = 0.30103
"""Decimal digits per bit."""
SHOWN_VALUE_CHARS = 200
"""A wrong value is quoted in a ConfigError up to this many characters."""


def _shown(value: object) -> str:
    """``repr(value)`` cut to SHOWN_VALUE_CHARS; an integer too long to print is described instead."""
    try:
        text = repr(value)
    except ValueError:  # an int past Python's 4,300-digit printing limit
        if isinstance(value, int):
            return f"an integer of about {round(value.bit_length() * LOG10_2)} digits"
        return "a value that cannot be shown"
    return text if len(text) <= SHOWN_VALUE_CHARS else text[: SHOWN_VALUE_CHARS - 1] + "…"


def _label(index: object) -> str:
    """A node's place in its parent: the key of a mapping value, ``[i]`` of a list item."""
    if isinstance(index, yaml.ScalarNode):
        return str(index.value)
    if isinstance(index, int):
        return f"[{index}]"
    return ""


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader, refusing what would exhaust the stack or the memory (see the module docstring).

    It counts on PyYAML's composer: ``compose_node`` is called once per node (an alias included),
    with the key node (or list index) it is the value of, and ``anchors`` holds every anchored node
    from the moment its composition starts.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._path: list[str] = []
        self._nodes = 0
        self._sizes: dict[str, int] = {}
        """Anchor -> the nodes its node stands for, aliases inside it expanded."""

    def _where(self) -> str:
        parts = [p for p in self._path if p]
        shown = parts[:8]
        text = "".join(p if p.startswith("[") else f".{p}" for p in shown).lstrip(".")
        return (text + (".…" if len(parts) > len(shown) else "")) or "(top level)"

    def _count(self, nodes: int) -> None:
        self._nodes += nodes
        if self._nodes > MAX_CONFIG_NODES:
            raise ConfigError(
                f"{self._where()}: the document has more than {MAX_CONFIG_NODES} values with its aliases "
                "expanded (a config needs a few hundred); use fewer aliases"
            )

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self._path.append(_label(index))
        try:
            event: yaml.NodeEvent = self.peek_event()  # type: ignore[no-untyped-call]  # untyped in the stubs
            if isinstance(event, yaml.AliasEvent):
                size = self._sizes.get(str(event.anchor))
                if size is None and event.anchor in self.anchors:
                    raise ConfigError(f"{self._where()}: the alias *{event.anchor} is inside the node it names")
                node = super().compose_node(parent, index)  # an undefined alias is PyYAML's ComposerError
                self._count(size or 0)
                return node
            if isinstance(event, yaml.CollectionStartEvent) and len(self._path) > MAX_CONFIG_DEPTH:
                raise ConfigError(
                    f"{self._where()}: nested more than {MAX_CONFIG_DEPTH} levels deep (a config needs about 10)"
                )
            before = self._nodes
            self._count(1)
            node = super().compose_node(parent, index)
            if event.anchor is not None:
                self._sizes[str(event.anchor)] = self._nodes - before
            return node
        finally:
            self._path.pop()

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as exc:  # e.g. the date 2001-13-45, an int of 5000 digits
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read this value: {exc}", node.start_mark
            ) from None


def _decode(data: bytes, source: str) -> str:
    """The file's bytes as text: UTF-8 (a BOM allowed), at most MAX_CONFIG_BYTES."""
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{source}: the file is larger than {MAX_CONFIG_BYTES} bytes (a config is a few KiB)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        start = data.rfind(b"\n", 0, exc.start) + 1
        line = data.count(b"\n", 0, exc.start) + 1
        before = data[start : exc.start].decode("utf-8", errors="replace")
        key, colon, _ = before.partition(":")
        where = f"in the value of {key.strip().lstrip('- ')!r}" if colon and key.strip() else "in a key"
        raise ConfigError(
            f"{source}: line {line}, column {len(before) + 1} ({where}): byte 0x{data[exc.start]:02x} "
            f"at offset {exc.start} is not UTF-8; the config must be UTF-8 text"
        ) from None


def parse_config(text: str, source: str = "<config>") -> Config:
    """Parse and validate YAML text; raise ConfigError with every problem found."""
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{source}: the text is longer than {MAX_CONFIG_BYTES} characters (a config is a few KiB)")
    try:
        loader = _BoundedLoader(text)  # the reader checks every character here
        try:
            raw = loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from None
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    except Exception as exc:  # only reading and building YAML values runs in this block
        # PyYAML's own constructors raise plain Python errors on a tagged value they cannot build
        # (``!!float ''``, ``!!bool ''``, an empty ``!!timestamp``): the file is at fault.
        raise ConfigError(f"{source}: not valid YAML: a value cannot be built as its tag says ({exc!r})") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of sections, got {type(raw).__name__}")
    if "routes" in raw:
        raise ConfigError(
            f"{source}: routes: unknown key; a route is an entry of models: "
            "({ID: {route: {...}}}, docs/routing.md)"
        )
    literal = literal_secrets(raw)
    if literal:
        where = ", ".join(literal)
        raise ConfigError(
            f"{source}: {where}: secrets come only from the environment; write ${{NAME}} (value not shown)"
        )
    found: list[str] = []
    try:
        config = Config.model_validate(expand(raw, "", found), context={FROM_ENVIRONMENT: found})
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    except ValidationError as exc:
        raise ConfigError(f"{source}: invalid configuration:\n{_describe(exc, found)}") from None
    except RecursionError:  # the depth bound keeps this from happening; never a traceback if it does
        raise ConfigError(f"{source}: a value is nested too deeply to validate (e.g. a tool's JSON schema)") from None
    return config


def load_config(path: str | Path) -> Config:
    """The config file at ``path``, validated whole (``parse_config``) and serving something: a file
    with no model and no tool is refused (``serving``), whoever reads it (check-config, serve, a reload).
    ``parse_config`` alone takes any valid text, a fragment included."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the config file: {exc.strerror}") from None
    return check_serves_something(parse_config(_decode(data, str(p)), str(p)), str(p))


def load_default_config() -> Config:
    """The embedded default: the bundled local provider and tool backend, no keys, no network."""
    return parse_config(resources.files("sidecar").joinpath(DEFAULT_CONFIG).read_text(), "embedded default")
