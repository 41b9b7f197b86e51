"""The demo's context report: what each layer did in the demo run, with the numbers measured in it.

Figures come from three independent records: the scripted API (every request the CLI really sent), the
step results (cost, turns, contexts, handoffs), and the store (what a resume rewrote).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from claude_agent_sdk import project_key_for_directory
from rich.console import Console
from rich.table import Table
from rich.text import Text

from flower.report.tables import number_tables

if TYPE_CHECKING:
    from flower.cli.demo import DemoRun

__all__ = ["DemoFigures", "demo_figures", "print_demo_report"]


@dataclass(frozen=True)
class DemoFigures:
    """The numbers the demo report shows (and its test asserts)."""

    main_requests: int
    sub_requests: int
    main_chars_last: int
    sub_chars_total: int
    main_tool_calls: int
    sub_tool_calls: int
    denials: int
    glances: int
    spills: int
    spilled_chars: int
    shown_chars: int
    expired: int
    denials_pruned: int
    chars_saved_on_resume: int
    handoffs: int
    retired: int
    script_runs: int
    relay_seen: bool
    system_prompt_stable: bool
    cost_usd: float
    turns: int
    contexts: tuple[int, ...]
    sub_chars_last: int = 0
    """Each subagent's last request (its whole transcript), summed."""
    main_messages: int = 0
    """Main-thread API messages: the one turn count the demo and `flower report` both use."""

    first_step_context: int = 0
    """The main thread's context at the end of the first step, in tokens."""

    @property
    def baseline_tokens(self) -> int:
        """The first step's main-thread context without flower: the same, plus every subagent's transcript
        and the spilled test log inline (about 4 characters a token, as the scripted API counts)."""
        inline = self.sub_chars_last + max(0, self.spilled_chars - self.shown_chars)
        return self.first_step_context + inline // 4


def _spill_log(workbench: Path) -> list[dict[str, Any]]:
    log = workbench / "spill" / "log.jsonl"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def demo_figures(run: DemoRun) -> DemoFigures:
    api, events = run.api, run.events
    main = api.main_requests
    subs = api.subagent_requests()
    calls = [e for e in events if e.kind == "tool_call"]
    wb = run.runtime.workbench
    assert wb is not None
    spills = _spill_log(wb.root)
    resumed = {"project_key": project_key_for_directory(run.repo), "session_id": run.steps[0].session_id}
    report = run.runtime.store.last_report(resumed)  # type: ignore[attr-defined]
    spill_dir = str(wb.spill)
    shown = [e for e in events if e.kind == "tool_result" and spill_dir in e.text]
    check = str(wb.scripts / "check_mean.py")
    script_runs = sum(1 for e in calls if e.tool == "Bash" and check in str(e.payload.get("input", {})))
    denied = [e for e in events if e.kind == "tool_result" and e.on_main and "Dispatch a subagent" in e.text]
    glances = [e for e in calls if e.on_main and e.tool == "Bash"]
    return DemoFigures(
        main_requests=len(main), sub_requests=len(subs),
        main_chars_last=max((r.chars for r in main), default=0), sub_chars_total=sum(r.chars for r in subs),
        main_tool_calls=sum(1 for e in calls if e.on_main), sub_tool_calls=sum(1 for e in calls if not e.on_main),
        denials=len(denied), glances=len(glances) - len(denied),
        spills=len(spills), spilled_chars=sum(int(s.get("chars", 0)) for s in spills),
        shown_chars=sum(len(e.text) for e in shown),
        expired=getattr(report, "expired", 0), denials_pruned=getattr(report, "denials_dropped", 0),
        chars_saved_on_resume=getattr(report, "chars_saved", 0),
        handoffs=sum(len(s.handoffs) for s in run.steps), retired=sum(len(s.retired) for s in run.steps),
        script_runs=script_runs,
        relay_seen=any(wb.relay_line() in r.text for r in subs),
        system_prompt_stable=len(main) > 1 and len({r.system_text for r in main}) == 1,
        cost_usd=round(sum(s.cost_usd for s in run.steps), 4), turns=sum(s.num_turns for s in run.steps),
        contexts=tuple(c for s in run.steps for c in s.contexts),
        sub_chars_last=sum(max(r.chars for r in subs if r.thread == t) for t in {r.thread for r in subs}),
        main_messages=sum(main_messages_per_step(list(events))),
        first_step_context=run.steps[0].context,
    )


def main_messages_per_step(events: list[Any]) -> list[int]:
    """Distinct main-thread API messages of each step, from its events (the turns `flower report` counts)."""
    counts: list[set[str]] = []
    for event in events:
        if event.kind == "step" and event.payload.get("phase") == "start":
            counts.append(set())
        elif counts and event.on_main and isinstance(event.payload.get("message_id"), str):
            counts[-1].add(event.payload["message_id"])
    return [len(ids) for ids in counts]


def print_demo_report(run: DemoRun, *, elapsed: float, console: Console | None = None) -> DemoFigures:
    console = console or Console()
    f = demo_figures(run)
    console.print(f"\n[bold]flower demo[/bold] — a coordinator run on the scripted model, offline ({elapsed:.1f} s)")
    console.print(f"repository: {run.repo}\nrun dir:    {run.runtime.run_dir}\n")
    turns = main_messages_per_step(run.events)
    rows: list[list[str | Text]] = [
        [s.step, "yes" if s.ok else f"NO: {s.error}", (s.session_id or "")[:8], str(n),
         f"{s.cost_usd:.4f}", str(s.attempts), str(1 + len(s.retired)), f"{s.context:,}"]
        for s, n in zip(run.steps, turns)]
    headers = ("step", "ok", "session", "turns", "cost $", "attempts", "gens", "last context")
    for steps in number_tables("steps (turns: main-thread API messages, as in flower report)", headers, rows,
                               numeric=[False, False, False, True, True, True, True, True], width=console.width):
        console.print(steps)
    table = Table(title="context economics")
    for column in ("layer", "what happened", "measured"):
        table.add_column(column, overflow="fold")
    share = f.sub_chars_total / max(1, f.sub_chars_total + f.main_chars_last)
    table.add_row("1 division of labour", f"{f.main_tool_calls} tool calls on main, {f.sub_tool_calls} in subagents",
                  f"{f.sub_requests} subagent requests; {share:.0%} of request chars in subagents")
    table.add_row("1 walls", f"{f.denials} hands-on calls denied on main, {f.glances} glance commands ran",
                  "denials carry toolDenialKind=permission-rule")
    table.add_row("2 workbench", f"check script run {f.script_runs}x; relay line reached subagents: {f.relay_seen}",
                  f"system prompt identical in every main request: {f.system_prompt_stable}")
    table.add_row("3 spill", f"{f.spills} tool result(s) moved to disk",
                  f"{f.spilled_chars:,} chars on disk, {f.shown_chars:,} shown to the model")
    table.add_row("4 resume rewrite", f"{f.expired} stale glance result(s) expired, {f.denials_pruned} denial(s) pruned",
                  f"{f.chars_saved_on_resume:,} chars not fed back")
    table.add_row("generations", f"{f.handoffs} handoff(s), {f.retired} session(s) retired",
                  "main context per API message: " + ", ".join(f"{c:,}" for c in f.contexts))
    console.print(table)
    with_flower, without = f.first_step_context, f.baseline_tokens
    console.print(f"why it matters: after {run.steps[0].step} the main thread holds {with_flower:,} tokens; "
                  f"the same work in one thread without flower would hold ~{without:,} (the subagents' "
                  f"transcripts and the full test log inline), {without / max(1, with_flower):.1f}x as much, "
                  "and every later request pays for it again", overflow="fold")
    console.print(f"total: {f.main_messages} turns on the main thread (+{f.sub_requests} in subagents), "
                  f"${f.cost_usd:.4f} (scripted usage priced as the CLI prices it)")
    return f
