"""What an API message costs, priced the way the bundled Claude Code CLI prices it (B-10, B-12).

The CLI prices each API message from its model catalog's tiers (USD per million tokens: input, output,
5-minute cache write, cache read); a model it does not know gets its default tier, the Opus 4.5 rates. The
table below is that catalog, so a live view can show cost during a step, per message, before the step's
`ResultMessage` brings the CLI's own total (which then wins).

Invariants:
- `message_cost` is exact for the CLI's pricing of a tier (the e2e test compares the sum over a run's
  messages with the CLI's `total_cost_usd`); an unknown model costs what the CLI's default costs.
- A model name matches the longest catalog id it contains (`claude-opus-5-5` before `claude-opus-5`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CATALOG", "CONTEXT_FIELDS", "DEFAULT_TIER", "Tier", "message_context", "message_cost", "tier_for"]


@dataclass(frozen=True)
class Tier:
    """USD per million tokens."""

    input: float
    output: float
    cache_write: float
    cache_read: float


DEFAULT_TIER = Tier(5, 25, 6.25, 0.5)
"""The CLI's default tier, for a model its catalog does not know."""

_T = {
    "haiku_35": Tier(0.8, 4, 1, 0.08), "haiku_45": Tier(1, 5, 1.25, 0.1), "haiku_55": Tier(0.1, 0.5, 0.125, 0.01),
    "tier_2_10": Tier(2, 10, 2.5, 0.2), "tier_2_10_cr_0_10": Tier(2, 10, 2.5, 0.1),
    "tier_3_15": Tier(3, 15, 3.75, 0.3), "tier_5_25": Tier(5, 25, 6.25, 0.5), "tier_15_75": Tier(15, 75, 18.75, 1.5),
    "tier_4_20_cr_0_20": Tier(4, 20, 5, 0.2), "tier_10_50": Tier(10, 50, 12.5, 1),
    "tier_10_50_cr_0_25": Tier(10, 50, 12.5, 0.25), "tier_8_40_cr_0_20": Tier(8, 40, 10, 0.2),
}
# The bundled CLI's model catalog (2.1.332): model id -> pricing tier.
CATALOG: dict[str, Tier] = {
    "claude-3-5-haiku": _T["haiku_35"], "claude-haiku-4-5": _T["haiku_45"], "claude-haiku-5-5": _T["haiku_55"],
    "claude-3-5-sonnet": _T["tier_3_15"], "claude-3-7-sonnet": _T["tier_3_15"], "claude-sonnet-4-0": _T["tier_3_15"],
    "claude-sonnet-4-5": _T["tier_3_15"], "claude-sonnet-4-6": _T["tier_3_15"], "claude-sonnet-5": _T["tier_2_10"],
    "claude-sonnet-5-5": _T["tier_2_10_cr_0_10"],
    "claude-opus-4-0": _T["tier_15_75"], "claude-opus-4-1": _T["tier_15_75"], "claude-opus-4-5": _T["tier_5_25"],
    "claude-opus-4-6": _T["tier_5_25"], "claude-opus-4-7": _T["tier_5_25"], "claude-opus-4-8": _T["tier_5_25"],
    "claude-opus-5": _T["tier_5_25"], "claude-opus-5-5": _T["tier_4_20_cr_0_20"],
    "claude-fable-5": _T["tier_10_50"], "claude-fable-5-1": _T["tier_10_50_cr_0_25"],
    "claude-fable-5-2": _T["tier_8_40_cr_0_20"], "claude-mythos-5": _T["tier_10_50"],
    "claude-mythos-5-1": _T["tier_10_50_cr_0_25"], "claude-mythos-5-2": _T["tier_8_40_cr_0_20"],
}


def tier_for(model: str | None) -> Tier:
    """The tier of the longest catalog id the model name contains (`claude-opus-4-5-20251101` is
    `claude-opus-4-5`), else the CLI's default."""
    name = (model or "").lower()
    found = [key for key in CATALOG if key in name]
    return CATALOG[max(found, key=len)] if found else DEFAULT_TIER


def message_cost(model: str | None, usage: Mapping[str, int]) -> float:
    """USD of one API message's usage (`input_tokens`, `output_tokens`, `cache_read_input_tokens`,
    `cache_creation_input_tokens`)."""
    tier = tier_for(model)
    return (
        usage.get("input_tokens", 0) * tier.input
        + usage.get("output_tokens", 0) * tier.output
        + usage.get("cache_creation_input_tokens", 0) * tier.cache_write
        + usage.get("cache_read_input_tokens", 0) * tier.cache_read
    ) / 1_000_000


CONTEXT_FIELDS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def message_context(usage: Mapping[str, Any] | None) -> int:
    """Tokens of context one API message saw: input + cache read + cache creation (S-24). The one
    definition: the runtime, the stores' `last_context`, the live view and the report all use it."""
    if not isinstance(usage, Mapping):
        return 0
    return sum(value for value in (usage.get(k) for k in CONTEXT_FIELDS) if isinstance(value, int))
