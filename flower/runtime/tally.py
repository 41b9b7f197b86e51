"""A step's running totals over its sessions: cost, tokens, turns, errors, handoffs, retries, tool failures,
fallbacks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flower.agent.eventinfo import USAGE_KEYS, usage_of
from flower.agent.events import Event
from flower.runtime.outcome import Outcome

__all__ = ["Tally"]

_SAMPLES = 5


@dataclass
class Tally:
    """What a step adds up across its sessions, for its `StepResult`."""

    cost: float = 0.0
    turns: int = 0
    errors: list[str] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)
    handoffs: list[str] = field(default_factory=list)
    refreshes: int = 0
    next_refresh: int = 0
    """Main-thread context at which the next refresh check may say yes (RefreshPolicy.next_check)."""
    retries: list[dict[str, Any]] = field(default_factory=list)
    attempts: int = 0
    tool_errors: int = 0
    tool_error_samples: list[str] = field(default_factory=list)
    calls: dict[str, str] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=lambda: dict.fromkeys(USAGE_KEYS, 0))
    """Tokens of every API message seen (main thread and subagents), each message counted once."""
    counted: set[str] = field(default_factory=set)
    fallbacks: list[dict[str, str]] = field(default_factory=list)
    """Each switch to the fallback model: `model`, `fallback_model`, `trigger`."""
    pending: dict[str, Any] | None = None
    """A refresh or handoff whose first request is not answered yet (its `cache_cost` comes with it)."""
    cache_costs: list[dict[str, Any]] = field(default_factory=list)
    """What each refresh and handoff paid to write the cache again (the `cache_cost` events' payloads)."""

    def add(self, outcome: Outcome) -> None:
        self.attempts += 1
        self.cost += outcome.cost
        self.turns += outcome.turns
        if outcome.error:
            self.errors.append(outcome.error)
        self.errors.extend(outcome.worker_errors)

    def observe(self, event: Event) -> None:
        """Count tokens per API message and failed tool calls (main thread and subagents), keeping the last
        few failures for the result, and note each switch to the fallback model."""
        message_id = event.payload.get("message_id")
        if isinstance(message_id, str) and message_id not in self.counted and "usage" in event.payload:
            self.counted.add(message_id)
            for key, value in usage_of(event.payload).items():
                self.usage[key] += value
        if event.kind == "system" and event.payload.get("subtype") == "model_fallback":
            self.fallbacks.append({key: str(event.payload.get(key) or "")
                                   for key in ("model", "fallback_model", "trigger")})
        if event.kind == "tool_call":
            self.calls[str(event.payload.get("id"))] = event.tool or "?"
        elif event.kind == "tool_result" and event.payload.get("is_error"):
            self.tool_errors += 1
            tool = self.calls.get(str(event.payload.get("id")), "tool")
            first = next((line.strip() for line in event.text.splitlines() if line.strip()), "")
            self.tool_error_samples = [*self.tool_error_samples[-(_SAMPLES - 1):], f"{tool}: {first[:200]}"]
