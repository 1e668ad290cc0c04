"""The client's version and its pin on the contract, both the contract's own version: one version source.

The version is written once, in protos/python/pyproject.toml (the ``sidecar-contract`` distribution,
the stubs this client is built against). Built from the repository, this hatchling metadata hook
reads it and sets this distribution's version to it and its dependencies to those of
``[tool.hatch.metadata.hooks.custom]`` plus ``sidecar-contract==<that version>``: a versioned
dependency a package index accepts, where a path to the contract is refused. Built from the sdist
(where ../../protos is absent), hatchling takes both fields from the sdist's PKG-INFO, which this
hook wrote, and does not run it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from hatchling.metadata.plugin.interface import MetadataHookInterface

CONTRACT = Path("..") / ".." / "protos" / "python" / "pyproject.toml"
"""The contract's project file, from this one's folder."""


class ContractVersion(MetadataHookInterface):
    def update(self, metadata: dict[str, Any]) -> None:
        contract = tomllib.loads((Path(self.root) / CONTRACT).read_text(encoding="utf-8"))["project"]
        version = contract["version"]
        metadata["version"] = version
        metadata["dependencies"] = [f"{contract['name']}=={version}", *self.config["runtime-dependencies"]]
