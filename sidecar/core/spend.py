"""Spend per workflow (usage x catalog prices) against its configured cap.

cost  = (input_tokens x input_price_per_mtok + output_tokens x output_price_per_mtok) / 1,000,000   (US dollars)
check = SPEND_CAP_EXCEEDED when the workflow's recorded spend has reached its cap (the workflow's own,
        else the ``"*"`` cap); the call is then not sent
"""

from __future__ import annotations

from collections import defaultdict
from typing import Protocol

from sidecar.core.taxonomy import SpendCapExceeded

__all__ = ["Prices", "SpendLedger", "cost_of"]

TOKENS_PER_PRICE_UNIT = 1_000_000
"""Catalog prices are per million tokens."""


class Prices(Protocol):
    """A catalog entry's prices (US dollars per million tokens)."""

    @property
    def input_price_per_mtok(self) -> float: ...

    @property
    def output_price_per_mtok(self) -> float: ...


def cost_of(prices: Prices, input_tokens: int, output_tokens: int) -> float:
    """US dollars for this usage at the catalog's prices."""
    spent = input_tokens * prices.input_price_per_mtok + output_tokens * prices.output_price_per_mtok
    return spent / TOKENS_PER_PRICE_UNIT


class SpendLedger:
    """Recorded spend per workflow id, in this process."""

    __slots__ = ("_caps", "_spent")

    def __init__(self, caps: dict[str, float]) -> None:
        self._caps = caps
        self._spent: defaultdict[str, float] = defaultdict(float)

    def __repr__(self) -> str:
        return f"<SpendLedger {len(self._spent)} workflows, caps for {sorted(self._caps)}>"

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
