"""Spend per workflow (usage x catalog prices) against its configured cap.

cost  = (input_tokens x input_price_per_mtok + output_tokens x output_price_per_mtok) / 1,000,000   (US dollars)
check = SPEND_CAP_EXCEEDED when the workflow's recorded spend has reached its cap (the workflow's own,
        else the ``"*"`` cap); the call is then not sent

Shared by a fleet (``state``, a ``core.state`` backend; the memory default shares nothing)::

    record    adds to the local view at once, then publishes SpendAdded with the cap (only for a
              workflow that has a cap: nothing else is ever checked); the backend adds it to the
              fleet's total, and may tell the others only at each step of the cap and at the cap
    a total   SpendTotal from the backend (the sum every replica added): spent = max(view, total)
    check     the local view alone (no await): the fleet's total as last pushed, plus this
              replica's own spend since; stale by at most the backend's propagation delay, and
              during an outage by the other replicas' spend since it began
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Protocol

from sidecar.core.conversation import Usage
from sidecar.core.state import MEMORY, SpendAdded, SpendReset, SpendTotal, StateBackend
from sidecar.core.taxonomy import SpendCapExceeded

__all__ = ["Prices", "SpendLedger", "SpendSnapshot", "cost_of"]

TOKENS_PER_PRICE_UNIT = 1_000_000
"""Catalog prices are per million tokens."""


class Prices(Protocol):
    """A catalog entry's prices (US dollars per million tokens)."""

    @property
    def input_price_per_mtok(self) -> float: ...

    @property
    def output_price_per_mtok(self) -> float: ...

    @property
    def cache_read_price_per_mtok(self) -> float | None: ...

    @property
    def cache_write_price_per_mtok(self) -> float | None: ...


def cost_of(prices: Prices, usage: Usage) -> float:
    """US dollars for this usage at the catalog's prices.

    ``usage.input_tokens`` counts every input token; those the provider read from or wrote to its
    prompt cache are priced at the cache's prices (the input price when the catalog names none),
    the rest at the input price.
    """
    base = prices.input_price_per_mtok
    read = base if prices.cache_read_price_per_mtok is None else prices.cache_read_price_per_mtok
    write = base if prices.cache_write_price_per_mtok is None else prices.cache_write_price_per_mtok
    cache_read, cache_write = usage.cache_read_input_tokens, usage.cache_write_input_tokens
    uncached = max(usage.input_tokens - cache_read - cache_write, 0)
    output = usage.output_tokens * prices.output_price_per_mtok
    spent = uncached * base + cache_read * read + cache_write * write + output
    return spent / TOKENS_PER_PRICE_UNIT


@dataclass(frozen=True, slots=True)
class SpendSnapshot:
    """One workflow's spend against its cap (None: no cap), read-only (the admin state view)."""

    workflow: str
    spent_usd: float
    cap_usd: float | None


class SpendLedger:
    """Recorded spend per workflow id, in this process."""

    __slots__ = ("_caps", "_spent", "_state")

    def __init__(self, caps: dict[str, float], *, state: StateBackend = MEMORY) -> None:
        self._caps = caps
        self._state = state
        self._spent: defaultdict[str, float] = defaultdict(float)

    def __repr__(self) -> str:
        return f"<SpendLedger {len(self._spent)} workflows, caps for {sorted(self._caps)}>"

    def recap(self, caps: dict[str, float]) -> None:
        """A reload's caps (``policy.spend_caps``): every workflow's recorded spend is kept."""
        self._caps = caps

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
            cap = self.cap_for(workflow_id)
            if cap is not None:
                self._state.publish(SpendAdded(workflow_id, usd, cap))

    def spent(self, workflow_id: str) -> float:
        """The workflow's recorded spend as this replica knows it."""
        return self._spent.get(workflow_id, 0.0)

    def snapshot(self) -> list[SpendSnapshot]:
        """Every workflow with recorded spend, and every capped one, sorted by name."""
        names = set(self._spent) | {w for w in self._caps if w != "*"}
        return [SpendSnapshot(w, self._spent.get(w, 0.0), self.cap_for(w)) for w in sorted(names)]

    def reset(self, workflow_id: str) -> float:
        """An operator reset the workflow's spend; what it was here. Published (SpendReset): with a shared
        backend the fleet's total is reset too, and every replica's view."""
        was = self._spent.pop(workflow_id, 0.0)
        self._state.publish(SpendReset(workflow_id, was))
        return was

    def reset_elsewhere(self, workflow_id: str) -> None:
        """An operator reset the workflow's spend on another replica."""
        self._spent.pop(workflow_id, None)

    def total_elsewhere(self, workflow_id: str, usd: float) -> None:
        """The fleet's total for a workflow (a capped one only: nothing else is checked)."""
        if self.cap_for(workflow_id) is not None and usd > self._spent.get(workflow_id, 0.0):
            self._spent[workflow_id] = usd

    def shared_state(self) -> list[SpendTotal]:
        """Every capped workflow's spend as this replica knows it (pushed again after an outage)."""
        return [SpendTotal(w, usd) for w, usd in self._spent.items() if usd > 0 and self.cap_for(w) is not None]
