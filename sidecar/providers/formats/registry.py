"""Every wire format the sidecar speaks, by its name in the configuration (``providers[].wire_format``).

A new format is its folder beside these (``vocab``, ``upstream``, ``front``, ``fake``: a
``protocol.WireFormat`` as ``FORMAT`` in its ``__init__.py``) and one line of ``names.py``;
docs/architecture.md says what it implements, and ``tests/unit/test_formats.py`` round-trips a request
and a reply through the halves of every format registered.

    FORMATS          every registered format by name (each loaded the first time it is looked up)
    format_named     the format a provider's ``wire_format`` names (the configuration allows only these)
    register         a format kept outside this folder (``names.register``): before the config is read
    check_options    ``provider_options_json`` naming only registered formats
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib import import_module

from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.formats.names import register, registered
from sidecar.providers.formats.options import FIELD, options_by_format
from sidecar.providers.formats.protocol import WireFormat

__all__ = ["FORMATS", "check_options", "format_named", "register"]

_LOADED: dict[str, WireFormat] = {}


def format_named(name: str) -> WireFormat:
    """The format a provider's ``wire_format`` names: its package's ``FORMAT``, loaded once (KeyError: not
    registered; the configuration allows only registered names)."""
    found = _LOADED.get(name)
    if found is None:
        package = registered()[name].package
        found = import_module(package).FORMAT
        if found.name != name:
            raise ValueError(f"{package}.FORMAT is named {found.name!r}, registered as {name!r}")
        _LOADED[name] = found
    return found


class _Formats(Mapping[str, WireFormat]):
    """The registered formats by name: the names as registered, each format loaded when looked up."""

    def __getitem__(self, name: str) -> WireFormat:
        return format_named(name)

    def __iter__(self) -> Iterator[str]:
        return iter(registered())

    def __len__(self) -> int:
        return len(registered())


FORMATS: Mapping[str, WireFormat] = _Formats()


def check_options(raw: str) -> None:
    """InvalidInput when ``provider_options_json`` names something other than a registered format."""
    names = registered()
    for name in options_by_format(raw):
        if name not in names:
            raise InvalidInput(f"{FIELD}.{name}", name, f"must name a wire format: {', '.join(sorted(names))}")
