"""sidecar.core.spend: the cost of a usage, the cap that applies, and the check at and over it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidecar.core.conversation import Usage
from sidecar.core.details import SpendDetail
from sidecar.core.kinds import FailureKind
from sidecar.core.spend import SpendLedger, cost_of
from sidecar.core.taxonomy import SpendCapExceeded
from tests.unit.profile import PROPERTY


@dataclass(frozen=True)
class Prices:
    input_price_per_mtok: float
    output_price_per_mtok: float
    cache_read_price_per_mtok: float | None = None
    cache_write_price_per_mtok: float | None = None


@pytest.mark.parametrize(
    ("prices", "tokens_in", "tokens_out", "usd"),
    [
        (Prices(3.0, 15.0), 1_000_000, 0, 3.0),
        (Prices(3.0, 15.0), 0, 1_000_000, 15.0),
        (Prices(3.0, 15.0), 1000, 500, 0.0105),
        (Prices(0.15, 0.60), 2_000_000, 1_000_000, 0.9),
        (Prices(0.0, 0.0), 10**9, 10**9, 0.0),
        (Prices(3.0, 15.0), 0, 0, 0.0),
    ],
)
def test_cost_is_tokens_times_the_price_per_million(
    prices: Prices, tokens_in: int, tokens_out: int, usd: float
) -> None:
    assert cost_of(prices, Usage(tokens_in, tokens_out)) == pytest.approx(usd, rel=1e-12, abs=0)


@pytest.mark.parametrize(
    ("read", "write", "usd"),
    [
        (None, None, 3.0 + 15.0),  # no cache prices: every input token at the input price
        (0.3, 3.75, (200_000 * 3.0 + 500_000 * 0.3 + 300_000 * 3.75) / 1e6 + 15.0),
        (0.0, 0.0, 200_000 * 3.0 / 1e6 + 15.0),
    ],
)
def test_cached_input_tokens_are_priced_at_the_cache_prices(
    read: float | None, write: float | None, usd: float
) -> None:
    """1M input tokens of which 500k read from the cache and 300k written to it, 1M output tokens:
    the reads and writes at their own prices, the other 200k at the input price (LiteLLM has
    shipped this wrong: cached tokens billed at the input price, or counted twice)."""
    prices = Prices(3.0, 15.0, read, write)
    usage = Usage(1_000_000, 1_000_000, cache_read_input_tokens=500_000, cache_write_input_tokens=300_000)
    assert cost_of(prices, usage) == pytest.approx(usd, rel=1e-12, abs=0)


def test_a_workflows_own_cap_comes_before_the_star_cap() -> None:
    ledger = SpendLedger({"wf-a": 5.0, "*": 1.0})
    assert ledger.cap_for("wf-a") == 5.0
    assert ledger.cap_for("wf-b") == 1.0
    assert ledger.cap_for("") == 1.0
    assert SpendLedger({"wf-a": 5.0}).cap_for("wf-b") is None
    assert SpendLedger({}).cap_for("wf-a") is None


def test_a_larger_own_cap_is_not_lowered_by_the_star_cap() -> None:
    ledger = SpendLedger({"wf-a": 5.0, "*": 1.0})
    ledger.record("wf-a", 2.0)
    ledger.check("wf-a")  # over "*" but under its own


def test_below_the_cap_the_call_goes() -> None:
    ledger = SpendLedger({"wf": 1.0})
    ledger.record("wf", 0.999999)
    ledger.check("wf")


@pytest.mark.parametrize("spent", [1.0, 1.000001, 7.5])
def test_at_or_over_the_cap_the_call_is_refused(spent: float) -> None:
    ledger = SpendLedger({"wf": 1.0})
    ledger.record("wf", spent)
    with pytest.raises(SpendCapExceeded) as caught:
        ledger.check("wf")
    failure = caught.value
    assert failure.kind is FailureKind.SPEND_CAP_EXCEEDED
    assert not failure.correctable
    assert failure.message == (
        f"Workflow 'wf' has spent ${spent:.4f} of its $1.0000 cap; the call was not sent. "
        "Raise the cap or end the workflow."
    )
    assert failure.detail == SpendDetail(workflow_id="wf", spent_usd=spent, cap_usd=1.0)


def test_a_zero_cap_refuses_the_first_call() -> None:
    with pytest.raises(SpendCapExceeded):
        SpendLedger({"*": 0.0}).check("wf")


def test_the_star_cap_applies_to_each_workflow_apart() -> None:
    ledger = SpendLedger({"*": 1.0})
    ledger.record("wf-a", 1.0)
    with pytest.raises(SpendCapExceeded):
        ledger.check("wf-a")
    ledger.check("wf-b")


def test_a_workflow_without_an_id_is_named_as_none() -> None:
    ledger = SpendLedger({"*": 0.5})
    ledger.record("", 0.5)
    with pytest.raises(SpendCapExceeded, match=r"^Workflow '\(none\)' has spent \$0\.5000"):
        ledger.check("")


def test_without_a_cap_no_spend_is_refused() -> None:
    ledger = SpendLedger({"other": 1.0})
    ledger.record("wf", 1e12)
    ledger.check("wf")


@pytest.mark.parametrize("usd", [0.0, -0.0, -1.0, -math.inf, math.nan])
def test_record_ignores_what_is_not_a_positive_amount(usd: float) -> None:
    ledger = SpendLedger({"wf": 1.0})
    ledger.record("wf", 0.75)
    ledger.record("wf", usd)
    ledger.record("wf", 0.2)
    ledger.check("wf")  # 0.95: nothing taken off, nothing poisoned
    ledger.record("wf", 0.05)
    with pytest.raises(SpendCapExceeded):
        ledger.check("wf")


def test_the_ledger_says_what_it_holds_and_no_amounts() -> None:
    ledger = SpendLedger({"wf": 1.0, "*": 2.0})
    ledger.record("wf", 0.5)
    assert repr(ledger) == "<SpendLedger 1 workflows, caps for ['*', 'wf']>"


_USD = st.floats(min_value=-10, max_value=10) | st.just(math.nan)


@PROPERTY
@given(cap=st.floats(min_value=0, max_value=20), amounts=st.lists(_USD, max_size=30))
def test_a_call_is_refused_exactly_when_the_recorded_positive_spend_reached_the_cap(
    cap: float, amounts: list[float]
) -> None:
    ledger = SpendLedger({"*": cap})
    spent = 0.0
    for usd in amounts:
        ledger.record("wf", usd)
        if usd > 0:
            spent += usd
        if spent >= cap:
            with pytest.raises(SpendCapExceeded):
                ledger.check("wf")
        else:
            ledger.check("wf")
