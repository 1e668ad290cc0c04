"""MODEL_NOT_FOUND names a large catalog in part: its failure rides in trailers a client bounds."""

from __future__ import annotations

from sidecar.core.taxonomy import ModelNotFound
from sidecar.core.uncorrectable_failures import MAX_MODELS_LISTED


def test_a_small_catalog_is_named_whole_in_its_order() -> None:
    err = ModelNotFound("gpt-9", ["claude", "gpt"])
    assert "Models that exist: claude, gpt." in err.message


def test_a_large_catalog_is_named_in_part_the_closest_first() -> None:
    catalog = [f"model-{i:03d}" for i in range(200)] + ["gpt-4o"]
    err = ModelNotFound("gpt-4", catalog)
    assert err.message.count(", ") == MAX_MODELS_LISTED - 1
    assert "Models that exist: gpt-4o, " in err.message
    assert f"and {201 - MAX_MODELS_LISTED} more (ListModels lists every one)." in err.message
    assert len(err.message) < 1000
