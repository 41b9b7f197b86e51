"""Whether a new `flower go` in a workspace wakes the last run, starts over, or refuses.

A go run keeps a small state file in its run dir (`go.json`): the request it started from, how many times it
was woken and the flags that shape its steps. From that file and the workspace's go runs in the run dir:
- a run still running in another process: refuse (never archive, cancel or append under a live process);
- `--new`: brief, goal, judge rounds and the state move to notes/archive/<time>/, and the interrupted runs
  are cancelled, so a later `flower go` does not wake one of them again; then a fresh run;
- the last run failed: wake it by retrying its failed step (`flower.flow.durable`: a DBOS fork that keeps
  the finished steps, the brief and the answers), given the same step-shaping flags;
- the last interrupted run: wake it, given the same step-shaping flags (other flags refuse);
- no run to wake, but an earlier run's brief on disk: refuse, and say how to start over;
- otherwise: a fresh run.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from flower.errors import ConfigError
from flower.flow.runs import RunRow, cancel_run, list_runs
from flower.go.flow import NAME, GoOptions
from flower.human.documents import Brief, Goal
from flower.util.confined import read_note, replace_text

__all__ = ["ARCHIVED", "STATE", "Wake", "archive", "banner", "decide", "go_runs", "plan", "read_state",
           "record", "refuse_live", "shape", "start_over"]

STATE = "go.json"
"""In the run dir: the request the run started from, how many times it was woken, and its flags."""
ARCHIVED = ("brief.md", "goal.md", "go-questions.md", "human-questions.md")
"""The notes `--new` moves into the archive (the judge's `*-round*.md` verdicts go with them)."""


@dataclass(frozen=True)
class Wake:
    """The interrupted run a `flower go` continues: its id, which wake this is, and its first request."""

    run_id: str
    number: int
    request: str
    failed: bool = False
    """The run failed: waking it retries its failed step as a new run."""


def shape(options: GoOptions) -> dict[str, Any]:
    """The flags that shape the workflow's steps: a woken run must be given the same ones."""
    return {"rounds": options.rounds, "no_goal": options.no_goal, "clarify_only": options.clarify_only,
            "isolate": options.isolate, "judge_can_run": options.judge_can_run}


def read_state(run_dir: Path) -> dict[str, Any]:
    """The run dir's go state; {} when absent, unreadable or not a JSON object."""
    try:
        data = json.loads(read_note(run_dir / STATE) or "")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def record(run_dir: Path, workspace: Path, flags: dict[str, Any], wake: Wake | None, request: str) -> None:
    """Write the state the next `flower go` decides from (a fresh temp file, renamed over the old one)."""
    data = {"request": request, "wakes": wake.number if wake is not None else 0, "workspace": str(workspace),
            "options": flags}
    replace_text(run_dir / STATE, json.dumps(data, ensure_ascii=False, indent=1))


def go_runs(run_dir: Path, workspace: Path) -> list[RunRow]:
    """This workspace's go runs in `run_dir`, oldest first."""
    if not (run_dir / "dbos.sqlite").exists():
        return []
    return [r for r in list_runs(run_dir) if r.workflow == NAME and Path(r.workspace or ".") == workspace]


def refuse_live(history: Sequence[RunRow], run_dir: Path) -> None:
    """One line when a run is running in another process: never archive or cancel under it, nor append to
    its brief."""
    live = [r for r in history if r.state == "running"]
    if live:
        raise ConfigError(f"run {live[-1].run_id} is running in another process; talk to it with "
                          f"`flower say {run_dir} TEXT` or `flower answer {run_dir} TEXT`")


def archive(notes: Path, run_dir: Path) -> Path | None:
    """Move brief, goal, judge rounds and the run state under notes/archive/<time>/; None when nothing was there."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    folder = notes / "archive"
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise ConfigError(f"{folder} is a symlink or not a folder: flower moves the brief only into a real folder "
                          "there")
    target = folder / stamp
    moved = False
    for path in [notes / name for name in ARCHIVED] + sorted(notes.glob("*-round*.md")) + [run_dir / STATE]:
        if path.is_file() and not path.is_symlink():
            target.mkdir(parents=True, exist_ok=True)
            shutil.move(str(path), target / path.name)
            moved = True
    return target if moved else None


def start_over(notes: Path, run_dir: Path, history: Sequence[RunRow]) -> Path | None:
    """`--new`: archive the notes and state, and cancel the interrupted runs so no later `flower go` wakes one
    of them again. The archive folder, or None when there was nothing to move."""
    where = archive(notes, run_dir)
    for row in history:
        if row.state == "interrupted":
            cancel_run(run_dir, None, row.run_id)
    return where


def decide(history: Sequence[RunRow], state: dict[str, Any], flags: dict[str, Any], *, text: str,
           brief: Path) -> Wake | None:
    """The run this `flower go` wakes (the last interrupted one), or None for a fresh run; a `ConfigError`
    when the flags differ from the ones the run was started with, or when an earlier run's brief is on disk
    with no run left to wake."""
    failed = bool(history) and history[-1].state == "failed"
    prior = history[-1].run_id if failed else next((r.run_id for r in reversed(history)
                                                    if r.state == "interrupted"), None)
    if prior is None:
        if history and brief.exists():
            ended = history[-1]
            raise ConfigError(f"the last run ({ended.run_id}) {ended.state}; its brief is in {brief}: start over "
                              "with --new" + (f' "{text}"' if text else ' "what to do"'))
        return None
    if state.get("options") not in (None, flags):
        raise ConfigError(f"run {prior} was started with other flags ({state['options']}); wake it with the same "
                          "flags, or start over with --new")
    wakes = state.get("wakes", 0)
    return Wake(prior, (wakes if isinstance(wakes, int) else 0) + 1, str(state.get("request") or text), failed)


@dataclass(frozen=True)
class Plan:
    """What `plan` decided: the run to wake (None: a fresh run), and where `--new` archived the notes."""

    wake: Wake | None
    archived: Path | None = None


def plan(run_dir: Path, workspace: Path, notes: Path, flags: dict[str, Any], *, new: bool, text: str) -> Plan:
    """The whole decision for a `flower go` in `workspace`: refuse under a live run, start over on `new`,
    else wake the last interrupted run or start fresh (see `decide`)."""
    history = go_runs(run_dir, workspace)
    refuse_live(history, run_dir)
    if new:
        return Plan(None, start_over(notes, run_dir, history))
    return Plan(decide(history, read_state(run_dir), flags, text=text, brief=notes / "brief.md"))


def banner(wake: Wake, notes: Path, run_dir: Path) -> list[str]:
    """The lines that say what a wake resumes: the run, the brief, the goal and the work session."""
    brief = Brief.load(notes / "brief.md")
    goal = Goal.load(notes / "goal.md")
    lines = [f"<- waking run {wake.run_id} (wake {wake.number})"
             + (": retrying its failed step" if wake.failed else "")]
    lines.append("   brief: " + ("confirmed" if brief is not None and brief.complete else "not yet confirmed"))
    lines.append(f"   goal: {len(goal.checks)} items" if goal is not None else "   goal: not set yet")
    work = _last_work_row(run_dir)
    if work:
        context = work.get("context")
        where = f" at {context:,} tokens of context" if isinstance(context, int) else ""
        lines.append(f"   work session {str(work.get('session_id') or '?')[:8]}{where}")
    return lines


def _last_work_row(run_dir: Path) -> dict[str, Any]:
    try:
        rows = json.loads(read_note(run_dir / "manifest.json", limit=64 << 20) or "")
    except ValueError:
        return {}
    work = [r for r in rows if isinstance(r, dict) and str(r.get("step", "")).startswith("work")] \
        if isinstance(rows, list) else []
    return work[-1] if work else {}
