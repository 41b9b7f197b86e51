"""The context economics of a run, computed from its stored transcripts (B-10).

`analyze(main, subagents, ...)` is a pure function over transcript entries (dicts as a `SessionStore`
returns them) plus a few records read beside them (the spill log, workbench statistics, the manifest's
cost). It returns a frozen `Report`; `report_json()` turns it into plain data. Loading a run from disk
and printing it live elsewhere (`flower.report.rundata`, `flower.cli`).

Invariants:
- Usage is counted once per API message. One reply is stored as several entries (thinking, text, each
  tool_use) that repeat the same usage; entries are grouped by `message.id`, else by `requestId`, and the
  last entry of a group gives the usage (streamed output tokens only grow). A fork's copied history
  repeats the same ids, so it is not counted twice either.
- Main and subagent are told apart by structure only: what the caller passes as a main transcript (a store
  key without subpath) is main, except entries marked `isSidechain` (old CLIs kept subagent turns inline);
  every subagent transcript (a key with `subpath`) is a subagent. Never by a substring of a key or path.
- Characters are the model-visible content of user and assistant messages: prompts, text, thinking, tool
  inputs (as JSON) and tool results. Each tool call and result is counted once (by its id).
- Synthetic messages the CLI writes itself (API errors, "No response requested.") are not turns.
- Expiries and denials pruned come from running the same pure rewrite a resume runs
  (`flower.stores.rewrite.rewrite`, the runtime's defaults) on each stored transcript.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from flower.report.entries import (
    Entry,
    TokenUsage,
    add_usage,
    api_messages,
    cost_state,
    dedupe_across,
    fallbacks,
    last_model,
    tool_uses,
    usage_of,
    visible_chars,
)

if TYPE_CHECKING:
    from flower.workbench.stats import WorkbenchStats

__all__ = [
    "Generation",
    "PruneStats",
    "Report",
    "SpillStats",
    "ThreadStats",
    "TokenUsage",
    "analyze",
    "api_messages",
    "least_squares_slope",
    "report_json",
    "visible_chars",
]


@dataclass(frozen=True)
class ThreadStats:
    """One thread (the main thread, one subagent, or all subagents together)."""

    turns: int = 0
    """Distinct API messages (model replies)."""
    chars: int = 0
    """Model-visible characters of its messages."""
    usage: TokenUsage = field(default_factory=TokenUsage)
    tool_calls: Mapping[str, int] = field(default_factory=dict)
    """Tool calls by tool name, each `tool_use` id once, most used first."""
    tool_errors: int = 0
    """Tool results that came back as errors (refused, denied or failed), each `tool_use` id once."""

    @property
    def calls(self) -> int:
        return sum(self.tool_calls.values())


@dataclass(frozen=True)
class Generation:
    """One main session of the run and where its context curve starts."""

    session_id: str
    first_turn: int
    """Index into `Report.contexts` of this session's first API message."""
    turns: int
    """Its main-thread API messages that reported tokens."""
    kind: Literal["start", "handoff", "session"]
    """`start`: the first session; `handoff`: a generation after a retired one; `session`: another step."""
    slope: float | None
    """Least-squares growth of its main-thread context, tokens per turn (None below two points)."""
    usage: TokenUsage = field(default_factory=TokenUsage)
    """Its main-thread input and output, summed over its API messages: `usage.prompt` is the context it
    carried in all, `cache_creation` what it wrote to the cache (its first message: what starting it cost)."""
    opening_write: int = 0
    """Cache-write tokens of its first API message: what the handoff or resume that started it cost."""
    priced: float = 0.0
    """Its main-thread input priced as the API prices it, in input-token equivalents (cache read and write at
    the model's ratios, `flower.runtime.economics`)."""
    refreshes: int = 0
    """Refreshes of this session the run recorded (the manifest's `cache_costs`)."""
    refresh_write: int = 0
    """Cache-write tokens of their first requests."""
    refresh_priced: float = 0.0
    """What their first requests cost, input-token equivalents."""
    refresh_saved: float = 0.0
    """What they saved net of that cost (`economics.refresh_saving`, summed; negative: they did not pay)."""


@dataclass(frozen=True)
class SpillStats:
    """Tool outputs the spill guard moved to disk during the run (from `spill/log.jsonl`)."""

    count: int = 0
    chars: int = 0
    """Characters of the outputs moved (whole outputs; the pointer left behind is a few hundred)."""
    main: int = 0
    subagents: int = 0
    main_chars: int = 0
    by_tool: Mapping[str, int] = field(default_factory=dict)
    unattributed: int = 0
    """Log lines naming no tool call of this run (another run's, or no id); not counted above."""


@dataclass(frozen=True)
class PruneStats:
    """What the next resume's rewrite would change, summed over every transcript of the run."""

    expired: int = 0
    denials_dropped: int = 0
    trimmed: int = 0
    api_errors_dropped: int = 0
    interrupts_neutralised: int = 0
    orphans_healed: int = 0
    chars_saved: int = 0
    main_chars_saved: int = 0
    skipped: int = 0
    """Things the rewrite left as stored because it could not understand them (odd stored shapes)."""


@dataclass(frozen=True)
class Report:
    """The context-economics numbers of one run or session (B-10)."""

    sessions: tuple[str, ...]
    """Main sessions, in order."""
    main: ThreadStats
    subagents: ThreadStats
    """All subagent transcripts together."""
    per_agent: Mapping[str, ThreadStats]
    """Each subagent transcript, by agent id."""
    contexts: tuple[int, ...]
    """Main-thread context (input + cache read + cache creation tokens) per API message, in order."""
    generations: tuple[Generation, ...]
    model: str | None
    """The model of the last main-thread reply."""
    threshold: int | None
    """Main-thread context at which a handoff starts."""
    slope: float | None
    """Context growth of the current (last) generation, tokens per turn."""
    turns_to_threshold: float | None
    """Turns until the current generation reaches the threshold at that slope (None when it does not grow)."""
    spills: SpillStats
    pruned: PruneStats
    workbench: WorkbenchStats | None
    """The workbench's statistics, when the workbench was found."""
    workbench_root: str | None
    cost_usd: float | None
    cost_source: Literal["manifest", "cost-state", "unknown"]
    fallbacks: tuple[Mapping[str, str], ...] = ()
    """Each switch of a main thread to its fallback model (`model`, `fallback_model`, `trigger`, `timestamp`);
    `--by model` shows what the replies on each model cost."""

    @property
    def subagent_turn_share(self) -> float | None:
        return _share(self.subagents.turns, self.main.turns)

    @property
    def subagent_char_share(self) -> float | None:
        return _share(self.subagents.chars, self.main.chars)

    @property
    def usage(self) -> TokenUsage:
        return add_usage(self.main.usage, self.subagents.usage)

    @property
    def cache_hit_rate(self) -> float | None:
        return self.usage.cache_hit_rate


def _share(part: int, other: int) -> float | None:
    return part / (part + other) if part + other else None


# --- threads --------------------------------------------------------------------------------------


def _thread(entries: Sequence[Entry]) -> ThreadStats:
    messages = api_messages(entries)
    tools = Counter(tool_uses(entries).values())
    return ThreadStats(
        turns=len(messages),
        chars=visible_chars(entries),
        usage=add_usage(*(usage_of(entry) for _, entry in messages)),
        tool_calls=dict(tools.most_common()),
        tool_errors=len(_failed_calls(entries)),
    )


def _failed_calls(entries: Sequence[Entry]) -> set[str]:
    """Ids of the tool calls whose result is an error."""
    failed: set[str] = set()
    for entry in entries:
        message = entry.get("message") if isinstance(entry, Mapping) else None
        content = message.get("content") if isinstance(message, Mapping) else None
        if entry.get("type") != "user" or not isinstance(content, list):
            continue
        failed.update(str(b.get("tool_use_id")) for b in content
                      if isinstance(b, Mapping) and b.get("type") == "tool_result" and b.get("is_error"))
    return failed


def _merge(parts: Iterable[ThreadStats]) -> ThreadStats:
    parts = list(parts)
    tools: Counter[str] = Counter()
    for part in parts:
        tools.update(part.tool_calls)
    return ThreadStats(
        turns=sum(p.turns for p in parts),
        chars=sum(p.chars for p in parts),
        usage=add_usage(*(p.usage for p in parts)),
        tool_calls=dict(tools.most_common()),
        tool_errors=sum(p.tool_errors for p in parts),
    )


def _split_inline(
    sessions: Mapping[str, Sequence[Entry]],
) -> tuple[dict[str, list[Entry]], dict[str, list[Entry]]]:
    """Main entries per session, and inline sidechain entries (old CLIs) per agent id."""
    main: dict[str, list[Entry]] = {}
    inline: dict[str, list[Entry]] = {}
    for session, entries in sessions.items():
        main[session] = []
        for entry in entries:
            if entry.get("isSidechain") is True:
                agent = entry.get("agentId")
                inline.setdefault(
                    agent if isinstance(agent, str) and agent else f"sidechain-{session[:8]}", []
                ).append(entry)
            else:
                main[session].append(entry)
    return main, inline


# --- the context curve ----------------------------------------------------------------------------


def least_squares_slope(values: Sequence[float]) -> float | None:
    """Slope of the least-squares line through `(i, values[i])`; None below two points."""
    n = len(values)
    if n < 2:
        return None
    mean_x, mean_y = (n - 1) / 2, sum(values) / n
    spread = sum((i - mean_x) ** 2 for i in range(n))
    return sum((i - mean_x) * (v - mean_y) for i, v in enumerate(values)) / spread


def _contexts(entries: Sequence[Entry]) -> list[int]:
    return [u.prompt for u in (usage_of(e) for _, e in api_messages(entries)) if u.prompt > 0]


def _number(record: Mapping[str, Any], name: str) -> int:
    value = record.get(name)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _refreshes(entries: Sequence[Entry], records: Sequence[Mapping[str, Any]], prices: Any) -> dict[str, Any]:
    """The refreshes of one session (`cache_costs` records of kind `refresh`): their count, cache writes,
    priced first requests and net saving, found by the message id of each one's first request."""
    from flower.runtime.economics import refresh_saving

    keys = [key for key, entry in api_messages(entries) if usage_of(entry).prompt > 0]
    position = {key: index for index, key in enumerate(keys)}
    done = {"refreshes": 0, "refresh_write": 0, "refresh_priced": 0.0, "refresh_saved": 0.0}
    for record in records:
        before, after, write, priced = (_number(record, name) for name in ("before", "context", "cache_write",
                                                                            "priced"))
        done["refreshes"] += 1
        done["refresh_write"] += write
        done["refresh_priced"] += priced
        index = position.get(str(record.get("message_id")))
        if index is not None:
            done["refresh_saved"] += refresh_saving(before, after, priced, len(keys) - index, prices)
    return done


def _generations(
    main: Mapping[str, list[Entry]], retired: frozenset[str], model: str | None = None,
    cache_costs: Sequence[Mapping[str, Any]] = (),
) -> tuple[list[int], list[Generation]]:
    from flower.runtime.economics import Prices, request_cost

    prices = Prices.of(model)
    contexts: list[int] = []
    generations: list[Generation] = []
    previous: str | None = None
    for session, entries in main.items():
        points = _contexts(entries)
        usages = [u for u in (usage_of(e) for _, e in api_messages(entries)) if u.prompt > 0]
        total = TokenUsage(*(sum(getattr(u, f) for u in usages) for f in ("input", "cache_read", "cache_creation",
                                                                             "output")))
        priced = request_cost({"input_tokens": total.input, "cache_read_input_tokens": total.cache_read,
                               "cache_creation_input_tokens": total.cache_creation}, prices)
        kind: Literal["start", "handoff", "session"] = (
            "start" if previous is None else "handoff" if previous in retired else "session"
        )
        refreshes = _refreshes(entries, [r for r in cache_costs if r.get("kind") == "refresh"
                                         and r.get("session_id") == session], prices)
        generations.append(Generation(session, len(contexts), len(points), kind, least_squares_slope(points),
                                      total, usages[0].cache_creation if usages else 0, priced, **refreshes))
        contexts.extend(points)
        previous = session
    return contexts, generations


def _projection(contexts: Sequence[int], current: Generation | None, threshold: int | None) -> float | None:
    if current is None or current.slope is None or current.slope <= 0 or threshold is None or not contexts:
        return None
    return max(0.0, (threshold - contexts[-1]) / current.slope)


# --- spills, rewrites, cost -----------------------------------------------------------------------


def _spills(records: Iterable[Mapping[str, Any]], calls: Mapping[str, str]) -> SpillStats:
    count = chars = main = main_chars = unattributed = 0
    tools: Counter[str] = Counter()
    for record in records:
        if record.get("tool_use_id") not in calls:
            unattributed += 1
            continue
        raw = record.get("chars")
        size = raw if isinstance(raw, int) else 0
        count, chars = count + 1, chars + size
        tools[str(record.get("tool") or "?")] += 1
        if record.get("agent", "main") == "main":
            main, main_chars = main + 1, main_chars + size
    return SpillStats(count, chars, main, count - main, main_chars, dict(tools.most_common()), unattributed)


_PRUNE_FIELDS = ("expired", "denials_dropped", "trimmed", "api_errors_dropped", "interrupts_neutralised",
                 "orphans_healed", "chars_saved", "skipped")


def _pruned(main: Mapping[str, Sequence[Entry]], subs: Mapping[str, Sequence[Entry]]) -> PruneStats:
    from flower.stores.rewrite import rewrite  # the rewrite layer pulls in glance/bashlex: load on use

    totals: Counter[str] = Counter()
    main_saved = 0
    for is_main, transcripts in ((True, main), (False, subs)):
        for entries in transcripts.values():
            _, report = rewrite([dict(e) if isinstance(e, Mapping) else e for e in entries])
            totals.update({name: getattr(report, name) for name in _PRUNE_FIELDS})
            main_saved += report.chars_saved if is_main else 0
    return PruneStats(**{name: totals[name] for name in _PRUNE_FIELDS}, main_chars_saved=main_saved)


# --- the analysis ---------------------------------------------------------------------------------


def analyze(
    main_entries: Sequence[Entry] | Mapping[str, Sequence[Entry]],
    sub_entries_by_agent: Mapping[str, Sequence[Entry]] | None = None,
    *,
    retired: Iterable[str] = (),
    threshold: int | None = None,
    spill_log: Iterable[Mapping[str, Any]] = (),
    workbench: WorkbenchStats | None = None,
    workbench_root: str | None = None,
    cost_usd: float | None = None,
    cache_costs: Iterable[Mapping[str, Any]] = (),
) -> Report:
    """The report of one run: `main_entries` is one main transcript, or several by session id in order.

    `retired` names sessions that handed over to a new generation; `threshold` defaults to
    `HandoffPolicy().threshold(model)` for the model of the last main reply; `cost_usd` (from the manifest)
    wins over the transcripts' own `cost-state` lines; `cache_costs` (the manifest's records of what each
    refresh and handoff paid) give each generation its refreshes' cost and saving.
    """
    sessions = dict(main_entries) if isinstance(main_entries, Mapping) else {"": list(main_entries)}
    main, inline = _split_inline(sessions)
    main = dedupe_across(main)
    subs: dict[str, Sequence[Entry]] = {**inline, **(sub_entries_by_agent or {})}
    per_agent = {agent: _thread(entries) for agent, entries in subs.items()}
    all_main = [e for entries in main.values() for e in entries]
    model = last_model(all_main)
    contexts, generations = _generations(main, frozenset(retired), model,
                                         [r for r in cache_costs if isinstance(r, Mapping)])
    if threshold is None:
        from flower.runtime.handoff import HandoffPolicy

        threshold = HandoffPolicy().threshold(model)
    current = generations[-1] if generations else None
    calls = {**tool_uses(all_main), **{k: v for e in subs.values() for k, v in tool_uses(e).items()}}
    state_cost = cost_state(sessions)
    return Report(
        sessions=tuple(s for s in sessions if s),
        main=_thread(all_main),
        subagents=_merge(per_agent.values()),
        per_agent=per_agent,
        contexts=tuple(contexts),
        generations=tuple(generations),
        model=model,
        threshold=threshold,
        slope=current.slope if current else None,
        turns_to_threshold=_projection(contexts, current, threshold),
        spills=_spills(spill_log, calls),
        pruned=_pruned(sessions, subs),
        workbench=workbench,
        workbench_root=workbench_root,
        fallbacks=tuple(fallbacks(all_main)),
        cost_usd=cost_usd if cost_usd is not None else state_cost,
        cost_source="manifest"
        if cost_usd is not None
        else "cost-state"
        if state_cost is not None
        else "unknown",
    )


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None or math.isnan(value) else round(value, digits)


def report_json(report: Report) -> dict[str, Any]:
    """Plain data for `--json`: every field, plus the derived shares and rates."""
    data = asdict(report)
    for name in ("main", "subagents"):
        thread: ThreadStats = getattr(report, name)
        data[name]["calls"] = thread.calls
        data[name]["usage"]["prompt"] = thread.usage.prompt
    data.update(
        subagent_turn_share=_round(report.subagent_turn_share),
        subagent_char_share=_round(report.subagent_char_share),
        cache_hit_rate=_round(report.cache_hit_rate),
        slope=_round(report.slope, 1),
        turns_to_threshold=_round(report.turns_to_threshold, 1),
        subagent_count=len(report.per_agent),
    )
    for generation in data["generations"]:
        generation["slope"] = _round(generation["slope"], 1)
        generation["refresh_saved"] = round(generation["refresh_saved"])
        generation["refresh_priced"] = round(generation["refresh_priced"])
        generation["priced"] = round(generation["priced"])
    plain: dict[str, Any] = json.loads(json.dumps(data, default=str))  # tuples become lists, as printed
    return plain
