"""The cost model of a generation: when a handoff is cheaper than carrying the context on (S-22..S-24).

Concept. Every main-thread turn re-reads the whole context, mostly from the prompt cache. A generation that
starts at `start` tokens and grows by `growth` tokens a turn pays, over n turns, about

    read * (start * n + growth * n**2 / 2)

in carried context (`read` is the cache-read price). A handoff ends it at a one-off cost H: the handoff
turn (its context read once more, its reply at the output price) and the next generation's first request
(what the current generation's first request cost, as the API reported it: mostly cache writes). Per turn,
a cycle of n turns costs read * start + read * growth * n / 2 + H / n, which is least at

    n* = sqrt(2 * H / (read * growth))

so the threshold is start + growth * n*: relative to where the generation started and to how fast it
grows, not to the window. It is bounded below by `min_turns` (a generation that short would lose the
recall a long one keeps, and the estimate of the growth needs turns) and above by the window's own
threshold (`HandoffPolicy.threshold`). Prices are the model's tier (`flower.agent.usage`), as multiples
of its input price, so the model's dollar figures never matter, only their ratios.

Invariants.
- Pure: no I/O, no clock; the runtime feeds it what the API reported.
- `refresh_saving` is what carrying the dropped tokens on would have cost minus what the refresh's first
  request paid above a cache read of its context (negative: the refresh did not pay for itself).
- `cost_threshold` is None until `min_sample` turns of the generation were measured (no guess from one turn)
  and when the context does not grow.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from flower.agent.usage import Tier, tier_for

__all__ = [
    "HANDOFF_OUTPUT", "MIN_SAMPLE", "Prices", "best_length", "cost_threshold", "handoff_cost", "refresh_saving",
    "request_cost",
]

HANDOFF_OUTPUT = 1_500
"""Tokens a handoff reply is taken to have (five sections of a few lines each)."""
MIN_SAMPLE = 8
"""Turns of a generation measured before its growth is trusted."""


@dataclass(frozen=True)
class Prices:
    """A model's prices as multiples of its input price."""

    read: float = 0.1
    """A cache read (5-minute cache)."""
    write: float = 1.25
    """A cache write."""
    output: float = 5.0
    """An output token."""

    @classmethod
    def of(cls, model: str | None) -> Prices:
        tier: Tier = tier_for(model)
        return cls(read=tier.cache_read / tier.input, write=tier.cache_write / tier.input,
                   output=tier.output / tier.input)


def request_cost(usage: Mapping[str, object], prices: Prices) -> float:
    """One API request's input side in input-token equivalents (input 1x, cache read and write at their prices)."""
    def count(key: str) -> int:
        value = usage.get(key)
        return value if isinstance(value, int) else 0

    return (count("input_tokens") + prices.read * count("cache_read_input_tokens")
            + prices.write * count("cache_creation_input_tokens"))


def handoff_cost(first_request: float, context: int, prices: Prices, output: int = HANDOFF_OUTPUT) -> float:
    """H: the handoff turn (the context read once more, the reply written) and the next generation's first
    request (taken to cost what this generation's first request cost)."""
    return prices.read * context + prices.output * output + first_request


def best_length(cost: float, growth: float, prices: Prices) -> float:
    """n*: the generation length, in turns, that makes carried context plus one handoff cheapest per turn."""
    return math.sqrt(2 * cost / (prices.read * growth)) if growth > 0 and prices.read > 0 else math.inf


def cost_threshold(contexts: Sequence[int], first_request: float, prices: Prices, *, min_turns: int,
                   min_sample: int = MIN_SAMPLE) -> int | None:
    """The handoff threshold of a generation whose turns had `contexts` (in order) and whose first request
    cost `first_request`: start + growth * max(n*, min_turns); None before `min_sample` turns or when the
    context did not grow (net of what refreshes dropped)."""
    if len(contexts) < max(min_sample, 2):
        return None
    start, now = contexts[0], contexts[-1]
    growth = (now - start) / (len(contexts) - 1)
    if growth <= 0:
        return None
    turns = max(best_length(handoff_cost(first_request, now, prices), growth, prices), min_turns)
    return int(start + growth * turns) if math.isfinite(turns) else None  # a free cache read: never cheaper


def refresh_saving(before: int, after: int, first_request: float, turns: int, prices: Prices) -> float:
    """What a refresh saved, in input-token equivalents: the context fell from `before` (the last request
    before it) to `after` (its first request, which cost `first_request`), and the generation made `turns`
    requests from that one on. Each later request read `before - after` fewer tokens from the cache; the first
    one paid `first_request` where an unrefreshed request would have read its whole context from the cache."""
    dropped = max(0, before - after)
    return prices.read * dropped * max(0, turns - 1) - (first_request - prices.read * (after + dropped))
