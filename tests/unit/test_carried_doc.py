"""docs/carried.md's table is what each format's ``Upstream.carries`` says, feature for feature.

Every feature ``formats.carried.FEATURES`` names has a row; each registered format has a column; a
cell says "carried" (and as what) exactly when the format's upstream carries the feature, and
"refused" (and why) when it does not. So the table a user reads cannot promise what a format drops.
"""

from __future__ import annotations

import re
from pathlib import Path

from sidecar.config import ProviderConfig
from sidecar.providers.formats.carried import FEATURES
from sidecar.providers.formats.registry import FORMATS

DOC = Path(__file__).resolve().parents[2] / "docs" / "carried.md"


def _table() -> tuple[list[str], dict[str, list[str]]]:
    """The formats of the header (their names in backticks) and each feature's cells."""
    lines = [line for line in DOC.read_text().splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    formats = [re.search(r"`(\w+)`", cell).group(1) for cell in header[2:]]  # type: ignore[union-attr]
    rows: dict[str, list[str]] = {}
    for line in lines[1:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        feature = cells[0].strip("`")
        if feature in FEATURES:
            rows[feature] = cells[2:]
    return formats, rows


def test_the_table_has_a_row_for_every_feature_and_a_column_for_every_format() -> None:
    formats, rows = _table()
    assert sorted(formats) == sorted(FORMATS)
    assert sorted(rows) == sorted(FEATURES)


def test_a_cell_says_carried_exactly_when_the_format_carries_it() -> None:
    formats, rows = _table()
    wrong = []
    for name in formats:
        fmt = FORMATS[name]
        carries = fmt.upstream(ProviderConfig(wire_format=name, base_url="http://provider")).carries  # type: ignore[arg-type]
        for feature, cells in rows.items():
            cell = cells[formats.index(name)]
            said = match.group(0).lower() if (match := re.match(r"\w+", cell)) else ""
            if said != ("carried" if feature in carries else "refused"):
                wrong.append(f"{feature} / {name}: {cell!r} (carries: {feature in carries})")
    assert not wrong, "\n".join(wrong)
