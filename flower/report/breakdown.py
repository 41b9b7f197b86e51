"""`flower report --by worker|model|day|step`: tokens and cost broken down ccusage-style (B-10).

Every API message of the run counts once (grouped by message id, as the report does), priced with the
bundled CLI's own price table (`flower.agent.usage`). A subagent's messages count under its worker type,
read from the CLI's record of the dispatch (`agentType` beside `agentId` in the Agent call's result).

By step, a message belongs to the step its session was started (or last resumed) for, as the manifest's
session rows record it when the session starts (`flower.runtime.steps`); a subagent's, to its parent
session's. One session serves several steps only one after another (a judged round resumes the work's
session), so within a session the latest row started before the message names its step; parallel branches
are separate sessions and never mix. A run recorded before session rows existed falls back to its step rows
(their session ids and start times); a session neither names is its own row, `session <id>`.

Invariants: every API message counts once (a fork's copied history under the session that made it), and
the rows add up to the whole run (the `total` row), whatever the grouping.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from flower.agent.usage import message_cost
from flower.report.entries import api_messages, dedupe_across, message_of, usage_of
from flower.report.rundata import RunData, row_sessions

__all__ = ["BY", "Attempts", "Bucket", "attempts", "breakdown", "breakdown_json", "step_of", "worker_types"]

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


Attempts = dict[str, list[tuple[str, str]]]
"""Session id -> `(started, step label)` of each start or resume of it, in time order."""


def attempts(data: RunData) -> Attempts:
    """Which step each session worked for and from when: the manifest's session rows; a session they do not
    name gets its step rows' (a run recorded before session rows existed)."""
    found: Attempts = {}
    for row in data.started:
        found.setdefault(row["session_id"], []).append((str(row.get("started") or ""), row["step"]))
    recorded = set(found)
    for row in data.steps:
        for session in row_sessions(row):
            if session not in recorded:
                found.setdefault(session, []).append((str(row.get("started") or ""), str(row.get("step"))))
    return {session: sorted(rows, key=lambda r: r[0]) for session, rows in found.items()}


def step_of(session: str, timestamp: str | None, known: Attempts) -> str:
    """The step a message of `session` stamped `timestamp` was made for (module docstring)."""
    rows = known.get(session)
    if not rows:
        return f"session {session[:8]}"
    step = rows[0][1]
    for started, label in rows[1:]:
        if timestamp and started and started[:23] <= timestamp[:23]:  # both UTC ISO 8601, milliseconds
            step = label
    return step


def _threads(data: RunData) -> Iterable[tuple[str, str, list[Any]]]:
    """(worker, session, entries) of every transcript, each API message once; sessions in the order they
    started, so a fork's copies count under its parent."""
    types = worker_types(data)
    first = {session: rows[0][0] for session, rows in attempts(data).items()}
    order = sorted(data.main, key=lambda s: (s not in first, first.get(s, "")))
    unique = dedupe_across({**{s: data.main[s] for s in order},
                            **{f"\0{label}": entries for label, entries in data.subagents.items()}})
    for session in order:
        yield "main", session, list(unique[session])
    for label in data.subagents:
        agent = label.rsplit("/", 1)[-1]
        yield types.get(agent, "subagent"), data.parents.get(label, ""), list(unique[f"\0{label}"])


def breakdown(data: RunData, by: By) -> list[Bucket]:
    """Buckets in a stable order (worker: main first; day and step: by time; model: by cost), then `total`."""
    buckets: dict[str, Bucket] = {}
    total = Bucket("total")
    known = attempts(data) if by == "step" else {}
    begun: dict[str, str] = {}
    for worker, session, entries in _threads(data):
        for _, entry in api_messages(entries):
            message = message_of(entry) or {}
            model = message.get("model") if isinstance(message.get("model"), str) else None
            stamp = entry.get("timestamp") if isinstance(entry.get("timestamp"), str) else None
            key = step_of(session, stamp, known) if by == "step" else \
                {"worker": worker, "model": model or "?", "day": (stamp or "?")[:10]}[by]
            usage = usage_of(entry)
            buckets.setdefault(key, Bucket(key)).add(model, usage)
            total.add(model, usage)
            begun[key] = min(begun.get(key, "~"), stamp or "~")
    rows = list(buckets.values())
    if by == "model":
        rows.sort(key=lambda b: -b.cost_usd)
    elif by == "day":
        rows.sort(key=lambda b: b.key)
    elif by == "step":
        rows.sort(key=lambda b: _in_time(b.key, begun))
    return [*rows, total]


_ITEM = re.compile(r"^(?P<step>.*?)\[(?P<index>\d+)\]")


def _in_time(label: str, begun: Mapping[str, str]) -> tuple[str, int, str]:
    """Steps by their first message; a fan-out's items together, in item order (they start at once)."""
    item = _ITEM.match(label)
    if item is None:
        return begun[label], -1, begun[label]
    group = [begun[k] for k in begun if (m := _ITEM.match(k)) is not None and m["step"] == item["step"]]
    return min(group), int(item["index"]), begun[label]


def breakdown_json(buckets: Sequence[Bucket], by: By) -> dict[str, Any]:
    def row(b: Bucket) -> dict[str, Any]:
        return {by: b.key, "messages": b.messages, "input_tokens": b.input, "cache_read_tokens": b.cache_read,
                "cache_write_tokens": b.cache_write, "output_tokens": b.output, "cost_usd": round(b.cost_usd, 6),
                "models": sorted(b.models)}

    return {"by": by, "rows": [row(b) for b in buckets[:-1]], "total": row(buckets[-1])}
