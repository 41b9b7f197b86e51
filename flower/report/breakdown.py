"""`flower report --by worker|model|day|step`: tokens and cost broken down ccusage-style (B-10).

Every API message of the run counts once (grouped by message id, as the report does), priced with the
bundled CLI's own price table (`flower.agent.usage`). A subagent's messages count under its worker type,
read from the CLI's record of the dispatch (`agentType` beside `agentId` in the Agent call's result); a
message belongs to the manifest step whose start..end holds its timestamp.

Invariant: the rows add up to the whole run (the `total` row), whatever the grouping.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from flower.agent.usage import message_cost
from flower.report.entries import api_messages, message_of, usage_of
from flower.report.rundata import RunData

__all__ = ["BY", "Bucket", "breakdown", "breakdown_json", "worker_types"]

By = Literal["worker", "model", "day", "step"]
BY: tuple[By, ...] = ("worker", "model", "day", "step")


@dataclass
class Bucket:
    """What one group's API messages add up to."""

    key: str
    messages: int = 0
    input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    cost_usd: float = 0.0
    models: set[str] = field(default_factory=set)

    def add(self, model: str | None, usage: Any) -> None:
        self.messages += 1
        self.input += usage.input
        self.cache_read += usage.cache_read
        self.cache_write += usage.cache_creation
        self.output += usage.output
        self.cost_usd += message_cost(model, {
            "input_tokens": usage.input, "output_tokens": usage.output,
            "cache_read_input_tokens": usage.cache_read, "cache_creation_input_tokens": usage.cache_creation})
        if model:
            self.models.add(model)


def worker_types(data: RunData) -> dict[str, str]:
    """agent id -> worker type, from the CLI's record of each dispatch."""
    found: dict[str, str] = {}
    for entries in data.main.values():
        for entry in entries:
            result = entry.get("toolUseResult")
            if isinstance(result, Mapping) and isinstance(result.get("agentId"), str):
                found[result["agentId"]] = str(result.get("agentType") or "subagent")
    return found


def _step_of(timestamp: str | None, steps: Sequence[Mapping[str, Any]]) -> str:
    if timestamp:  # the latest step that had started by then (steps of one session follow each other)
        for row in reversed(steps):
            start, end = row.get("started"), row.get("ended")
            if isinstance(start, str) and isinstance(end, str) and start[:23] <= timestamp[:23] <= end[:23]:
                return str(row.get("step"))
    return "-"


def _threads(data: RunData) -> Iterable[tuple[str, list[Any]]]:
    types = worker_types(data)
    for entries in data.main.values():
        yield "main", list(entries)
    for label, entries in data.subagents.items():
        agent = label.rsplit("/", 1)[-1]
        yield types.get(agent, "subagent"), list(entries)


def breakdown(data: RunData, by: By) -> list[Bucket]:
    """Buckets in a stable order (worker: main first; day and step: by time; model: by cost), then `total`."""
    buckets: dict[str, Bucket] = {}
    total = Bucket("total")
    for worker, entries in _threads(data):
        for _, entry in api_messages(entries):
            message = message_of(entry) or {}
            model = message.get("model") if isinstance(message.get("model"), str) else None
            stamp = entry.get("timestamp") if isinstance(entry.get("timestamp"), str) else None
            key = {"worker": worker, "model": model or "?", "day": (stamp or "?")[:10],
                   "step": _step_of(stamp, data.steps)}[by]
            usage = usage_of(entry)
            buckets.setdefault(key, Bucket(key)).add(model, usage)
            total.add(model, usage)
    rows = list(buckets.values())
    if by == "model":
        rows.sort(key=lambda b: -b.cost_usd)
    elif by == "day":
        rows.sort(key=lambda b: b.key)
    elif by == "step":
        order = list(dict.fromkeys(str(r.get("step")) for r in data.steps))
        rows.sort(key=lambda b: order.index(b.key) if b.key in order else len(order))
    return [*rows, total]


def breakdown_json(buckets: Sequence[Bucket], by: By) -> dict[str, Any]:
    def row(b: Bucket) -> dict[str, Any]:
        return {by: b.key, "messages": b.messages, "input_tokens": b.input, "cache_read_tokens": b.cache_read,
                "cache_write_tokens": b.cache_write, "output_tokens": b.output, "cost_usd": round(b.cost_usd, 6),
                "models": sorted(b.models)}

    return {"by": by, "rows": [row(b) for b in buckets[:-1]], "total": row(buckets[-1])}
