"""The health probe has one name everywhere: the one ``go install`` gives it (its module path's last element)."""

from __future__ import annotations

import re
from pathlib import Path

from sidecar.cli import BANNER

ROOT = Path(__file__).resolve().parents[2]


def test_the_start_up_line_and_the_image_name_the_probe_go_install_installs() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    found = re.search(r"go install (\S+)@", dockerfile)
    assert found, "the Dockerfile installs the probe with go install"
    binary = found.group(1).rsplit("/", 1)[-1]
    assert binary == "grpc-health-probe"
    assert f"health:  {binary} -addr={{address}} -service=sidecar.v1.Sidecar" in BANNER
    assert f'CMD ["{binary}", ' in dockerfile
    assert f"/usr/local/bin/{binary}\n" in dockerfile
