"""A run's threads over time, for the HTML report's timeline (B-10, issue #18).

One lane per main session (generation) and per subagent, from its first to its last stored entry, named
by worker type; one dispatch arrow from the main thread to each subagent lane at the time of its Agent call;
tokens per lane (each API message once); the user's prompt and the outcome.

Invariant: pure over `RunData`; an entry without a readable timestamp is skipped, never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from flower.report.entries import api_messages, blocks_of, is_reply, usage_of
from flower.report.rundata import RunData, first_prompt

__all__ = ["Arrow", "Lane", "Timeline", "build_timeline"]


@dataclass(frozen=True)
class Lane:
    label: str
    kind: str
    """"main" or "worker"."""
    start: float
    """Seconds since the epoch."""
    end: float
    tokens: int
    """Input (with cache) plus output tokens over its API messages, each once."""
    messages: int
    key: str
    """The session id or the agent id."""


@dataclass(frozen=True)
class Arrow:
    at: float
    source: int
    """Index of the main lane that dispatched."""
    target: int
    label: str


@dataclass
class Timeline:
    lanes: list[Lane] = field(default_factory=list)
    arrows: list[Arrow] = field(default_factory=list)
    prompt: str = ""
    outcome: str = ""
    ok: bool | None = None

    @property
    def start(self) -> float:
        return min((lane.start for lane in self.lanes), default=0.0)

    @property
    def end(self) -> float:
        return max((lane.end for lane in self.lanes), default=0.0)


def _when(entry: Mapping[str, Any]) -> float | None:
    stamp = entry.get("timestamp")
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _span(entries: Sequence[Mapping[str, Any]]) -> tuple[float, float] | None:
    times = [t for t in (_when(e) for e in entries) if t is not None]
    return (min(times), max(times)) if times else None


def _tokens(entries: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    total, count = 0, 0
    for _, entry in api_messages(entries):
        u = usage_of(entry)
        total += u.prompt + u.output
        count += 1
    return total, count


def build_timeline(data: RunData) -> Timeline:
    timeline = Timeline()
    agents: dict[str, tuple[str, int, float | None]] = {}  # agent id -> (worker type, main lane, dispatched at)
    calls: dict[str, float | None] = {}
    for session, entries in data.main.items():
        span = _span(entries)
        if span is None:
            continue
        tokens, count = _tokens(entries)
        index = len(timeline.lanes)
        generation = sum(1 for lane in timeline.lanes if lane.kind == "main") + 1
        timeline.lanes.append(Lane(f"main {generation} ({session[:8]})", "main", *span, tokens, count, session))
        for entry in entries:
            for block in blocks_of(entry):
                if isinstance(block, Mapping) and block.get("type") == "tool_use" and block.get("name") in (
                        "Agent", "Task"):
                    calls[str(block.get("id"))] = _when(entry)
            result = entry.get("toolUseResult")
            if isinstance(result, Mapping) and isinstance(result.get("agentId"), str):
                call = next((str(b.get("tool_use_id")) for b in blocks_of(entry)
                             if isinstance(b, Mapping) and b.get("type") == "tool_result"), "")
                agents[result["agentId"]] = (str(result.get("agentType") or "subagent"), index, calls.get(call))
    for label, entries in data.subagents.items():
        span = _span(entries)
        if span is None:
            continue
        agent = label.rsplit("/", 1)[-1]
        worker, source, dispatched = agents.get(agent, ("subagent", -1, None))
        tokens, count = _tokens(entries)
        timeline.lanes.append(Lane(worker, "worker", *span, tokens, count, agent))
        if source >= 0:
            timeline.arrows.append(Arrow(dispatched if dispatched is not None else span[0], source,
                                         len(timeline.lanes) - 1, worker))
    first = next(iter(data.main.values()), [])
    timeline.prompt = first_prompt(first)
    last = list(data.main.values())[-1] if data.main else []
    for entry in reversed(last):
        if is_reply(entry):
            said = "".join(str(b.get("text", "")) for b in blocks_of(entry)
                           if isinstance(b, Mapping) and b.get("type") == "text").strip()
            if said:
                timeline.outcome = said
                break
    oks = [row.get("ok") for row in data.steps if isinstance(row.get("ok"), bool)]
    timeline.ok = all(oks) if oks else None
    return timeline
