"""Spend per workflow (usage x catalog prices) against its configured cap."""

from __future__ import annotations

from collections import defaultdict

from sidecar.config import ModelConfig
from sidecar.core.taxonomy import SpendCapExceeded

__all__ = ["SpendLedger", "cost_of"]


def cost_of(model: ModelConfig, input_tokens: int, output_tokens: int) -> float:
    """US dollars for this usage at the catalog's prices per million tokens."""
    return (input_tokens * model.input_price_per_mtok + output_tokens * model.output_price_per_mtok) / 1_000_000


class SpendLedger:
    """Recorded spend per workflow id, in this process."""

    __slots__ = ("_caps", "_spent")

    def __init__(self, caps: dict[str, float]) -> None:
        self._caps = caps
        self._spent: defaultdict[str, float] = defaultdict(float)

    def cap_for(self, workflow_id: str) -> float | None:
        return self._caps.get(workflow_id, self._caps.get("*"))

    def check(self, workflow_id: str) -> None:
        """Raise SpendCapExceeded when the workflow has reached its cap."""
        cap = self.cap_for(workflow_id)
        if cap is None:
            return
        spent = self._spent[workflow_id]
        if spent >= cap:
            raise SpendCapExceeded(workflow_id or "(none)", spent, cap)

    def record(self, workflow_id: str, usd: float) -> None:
        if usd > 0:
            self._spent[workflow_id] += usd

    def spent(self, workflow_id: str) -> float:
        return self._spent[workflow_id]
