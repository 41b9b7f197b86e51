"""The generation cost model (flower.runtime.economics): its optimum against brute force, its bounds."""

from __future__ import annotations

import math

import pytest

from flower.runtime.economics import (
    Prices,
    best_length,
    cost_threshold,
    handoff_cost,
    refresh_saving,
    request_cost,
)
from flower.runtime.handoff import ContextMeter


def _per_turn(n: int, start: int, growth: float, cost: float, prices: Prices) -> float:
    """Carried context over n turns plus one handoff, per turn, summed turn by turn (no formula)."""
    return (sum(prices.read * (start + growth * i) for i in range(n)) + cost) / n


@pytest.mark.parametrize(("start", "growth", "cost"), [(6_000, 150, 18_000), (34_000, 400, 55_000), (2_000, 40, 5_000)])
def test_the_optimum_is_the_cheapest_length_turn_by_turn(start: int, growth: float, cost: float) -> None:
    prices = Prices()
    best = min(range(1, 5_000), key=lambda n: _per_turn(n, start, growth, cost, prices))
    assert abs(best_length(cost, growth, prices) - best) <= 1.5


def test_prices_are_the_models_ratios() -> None:
    sonnet = Prices.of("claude-sonnet-4-5")
    assert (sonnet.read, sonnet.write, sonnet.output) == pytest.approx((0.1, 1.25, 5.0))
    assert Prices.of("claude-sonnet-5-5").read == pytest.approx(0.05)
    usage = {"input_tokens": 10, "cache_read_input_tokens": 1_000, "cache_creation_input_tokens": 100}
    assert request_cost(usage, Prices()) == pytest.approx(10 + 100 + 125)
    assert handoff_cost(8_000, 30_000, Prices(), output=1_000) == pytest.approx(3_000 + 5_000 + 8_000)


def test_the_threshold_follows_the_start_and_the_growth() -> None:
    prices = Prices()
    contexts = [6_000 + 150 * i for i in range(10)]
    threshold = cost_threshold(contexts, 8_000, prices, min_turns=1)
    assert threshold is not None
    n = best_length(handoff_cost(8_000, contexts[-1], prices), 150, prices)
    assert threshold == int(6_000 + 150 * n)
    heavier = cost_threshold([c + 28_000 for c in contexts], 43_000, prices, min_turns=1)
    assert heavier is not None and heavier > threshold + 28_000  # a dearer start hands over later, not only higher
    assert cost_threshold(contexts, 8_000, prices, min_turns=200) == 6_000 + 150 * 200  # recall's floor


def test_no_threshold_before_the_sample_or_without_growth() -> None:
    prices = Prices()
    assert cost_threshold([6_000 + 150 * i for i in range(7)], 8_000, prices, min_turns=1) is None
    assert cost_threshold([6_000] * 20, 8_000, prices, min_turns=1) is None
    assert cost_threshold([9_000 - 10 * i for i in range(20)], 8_000, prices, min_turns=1) is None  # refreshes won
    assert math.isinf(best_length(1_000, 0, prices))
    free = Prices(read=0.0)
    assert cost_threshold([6_000 + 150 * i for i in range(10)], 8_000, free, min_turns=1) is None


def test_the_meter_measures_each_generation_from_its_own_first_message() -> None:
    meter = ContextMeter()
    first = {"input_tokens": 5, "cache_creation_input_tokens": 6_000}
    meter.observe("a", first)
    for k in range(1, 12):
        meter.observe(f"a{k}", {"input_tokens": 5, "cache_read_input_tokens": 6_000 + 200 * k})
    one = meter.cost_threshold(30)
    assert one is not None and one >= 6_005 + 200 * 30  # never a generation shorter than 30 turns
    meter.new_generation()
    meter.observe("b", {"input_tokens": 5, "cache_creation_input_tokens": 9_000})
    assert meter.cost_threshold(30) is None  # one message of the new generation: nothing measured yet
    assert meter.first_request == pytest.approx(5 + 1.25 * 9_000)


def _carried(contexts: list[int], first: float, prices: Prices) -> float:
    """Requests priced turn by turn: the first at `first`, the rest read from the cache."""
    return first + sum(prices.read * c for c in contexts[1:])


def test_a_refresh_saves_what_its_later_requests_do_not_read_less_its_extra_write() -> None:
    prices = Prices()
    # The last request before the refresh read 20k; the refresh drops 7,900 of it for the rest of the
    # generation (an unrefreshed turn counted as reading what the refreshed one read, plus those 7,900).
    refreshed = [12_100 + 100 * i for i in range(40)]
    kept = [c + 20_000 - refreshed[0] for c in refreshed]
    written = 1.25 * 10_000 + prices.read * 2_100  # the changed suffix written again, the rest read
    expected = _carried(kept, prices.read * kept[0], prices) - _carried(refreshed, written, prices)
    assert refresh_saving(20_000, refreshed[0], written, len(refreshed), prices) == pytest.approx(expected)


def test_a_refresh_too_late_in_its_generation_costs_more_than_it_saves() -> None:
    assert refresh_saving(20_000, 12_100, 1.25 * 10_000 + 210, 3, Prices()) < 0
    assert refresh_saving(12_000, 12_500, 200, 50, Prices()) == pytest.approx(0.1 * 12_500 - 200)
