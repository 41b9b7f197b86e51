"""`flower go "request"`: one sentence to a judged result, woken again by running it again (L-11, L-12).

    flower go "make the CSV importer handle quoted newlines"
    flower go                      # asks for the request on one line (or, in a run's workspace, wakes it)

clarify (questions on the terminal) -> goal -> work (a coordinator with a coder, judged in rounds) ->
bequest (CLAUDE.md and AGENTS.md). The run is a durable workflow (`flower.flow`) in WORKSPACE/runs:
running `flower go` again in the same workspace wakes it: a banner says what is resumed, what the human
types on waking is appended to the brief and re-derives the goal, and the step in flight resumes its own
session. `--new` archives brief, goal and the run's notes into notes/archive/<time>/ and starts over.

On a terminal the last line is an input line (`flower.cli.console`): a typed line answers the pending
question (a number picks an option) or goes to the inbox; Ctrl-C once asks for a remark and interrupts,
twice stops and prints how to continue. On a pipe the output is plain lines and questions are answered
with `flower answer` from elsewhere; `--json` prints the events as JSON lines.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console

from flower.agent.events import Event
from flower.cli import options
from flower.cli.launch import check_credentials, event_json, runtime_config
from flower.errors import ConfigError
from flower.report.text import fit, sanitize, wrap
from flower.util.confined import read_note

if TYPE_CHECKING:
    from flower.flow.workflow import Workflow
    from flower.go.flow import GoOptions
    from flower.go.wake import Wake
    from flower.human.channel import HumanChannel
    from flower.runtime.runtime import Runtime

__all__ = ["go"]


def _fail(message: str) -> None:
    raise ConfigError(message)


def _ask_line(prompt: str) -> str:
    try:
        return input(prompt)
    except (EOFError, KeyboardInterrupt):
        raise ConfigError("cancelled") from None


class _Screen:
    """Where the run's events go: the live view's lines, questions set apart, or JSON lines."""

    def __init__(self, *, as_json: bool, threshold: int | None, interactive: bool) -> None:
        from flower.cli.live import LiveView

        self.as_json = as_json
        # On a terminal the status sits in the input line's toolbar (the view is never entered, so no rich
        # Live competes with the prompt); on a pipe it follows each reply as a plain line.
        self.view = LiveView(threshold=threshold, console=Console(highlight=False), live=interactive)
        self.cost = 0.0

    def width(self) -> int:
        return max(40, min(shutil.get_terminal_size((80, 24)).columns, 160))

    def say(self, text: str) -> None:
        if self.as_json:
            click.echo(json.dumps({"kind": "notice", "text": text}, ensure_ascii=False))
        else:
            for line in wrap(sanitize(text), self.width(), hang="  "):
                click.echo(line)

    def __call__(self, event: Event) -> None:
        if event.kind == "step" and event.payload.get("phase") == "end":
            cost = event.payload.get("cost_usd")
            self.cost += float(cost) if isinstance(cost, (int, float)) else 0.0
        if self.as_json:
            click.echo(event_json(event))
            return
        if event.kind == "ask":
            self._question(event)
        elif event.kind == "mail" and event.payload.get("phase") == "delivered":
            self.say(f"+ the agent read your message: {event.text}")
        else:
            self.view.update(event)

    def _question(self, event: Event) -> None:
        state = event.payload.get("state", "asked")
        qid = event.payload.get("id", "")
        if state == "asked":
            width = self.width()
            for line in wrap(sanitize(event.text), width, first=f"? {qid} ", hang="    "):
                click.echo(line)
            for number, option in enumerate(event.payload.get("options") or (), 1):
                for line in wrap(sanitize(str(option)), width, first=f"    {number}) ", hang="       "):
                    click.echo(line)
        elif state == "answered":
            self.say(f"+ {qid} answered: {event.payload.get('answer', '')}")
        elif state == "timeout":
            self.say(f"! {qid}: nobody answered; it decides and records the assumption")
        elif state == "over_budget":
            self.say(f"! {qid}: no questions left in this run")
        elif state == "declined":
            self.say(f". {qid} skipped")


@click.command(short_help="From a one-line request to a judged result.")
@click.argument("request", nargs=-1)
@options.workspace(help="The project the agents work in.")
@options.run_dir(default=None, help="The run's state (default: WORKSPACE/runs).")
@options.new(help="Archive brief, goal and run state, and start over.")
@click.option("--clarify-only", is_flag=True, help="Stop once the brief is confirmed.")
@click.option("--no-goal", is_flag=True, help="Work without a goal and a judge.")
@click.option("--rounds", type=click.IntRange(min=1), default=3, show_default=True, metavar="N",
              help="Work rounds, each judged.")
@click.option("--asks", type=click.IntRange(min=0), default=None, metavar="N",
              help="At most this many questions from the agents (default: no limit; 0: none).")
@click.option("--timeout", type=float, default=1800.0, show_default=True, metavar="SECONDS",
              help="Seconds a question waits for an answer; 0 = never wait (fully automatic).")
@click.option("--isolate", is_flag=True, help="Each coder dispatch in its own git worktree (a git workspace).")
@click.option("--judge-can-run", is_flag=True, help="Let the judge run commands to check the goal.")
@options.model(help="Model for the coordinator (workers inherit it).")
@click.option("--window", default=None, metavar="TOKENS", help="Context window, e.g. 200000 or 200k.")
@options.budget(help="Stop cleanly once the run costs this many dollars (the run is kept).", per_query=False)
@options.json_output(help="Print the events as JSON lines.")
@options.verbose()
def go(request: tuple[str, ...], workspace: str, run_dir: str | None, new: bool, clarify_only: bool,
       no_goal: bool, rounds: int, asks: int | None, timeout: float, isolate: bool, judge_can_run: bool,
       model: str | None, window: str | None, budget: float | None, as_json: bool, verbose: bool) -> None:
    """From a one-line REQUEST to a judged result: clarify, goal, work, bequest."""
    ws = Path(workspace).expanduser()
    if not ws.is_dir():
        _fail(f"workspace {workspace} is not a directory")
    ws = ws.resolve()
    runs = Path(run_dir).expanduser().resolve() if run_dir else ws / "runs"
    if not run_dir and not runs.resolve().is_relative_to(ws):
        _fail(f"{runs} leads out of the workspace (a symlink): the run's state stays inside it; "
              "remove it, or name a run dir with -r")
    if window is not None and (not re.fullmatch(r"\d+[kKmM]?", window.strip()) or window.strip()[0] == "0"):
        _fail(f"--window must be a token count like 200000 or 200k, not {window!r}")
    if not math.isfinite(timeout):
        _fail(f"--timeout must be a number of seconds (0 = never wait), not {timeout}")
    check_credentials(os.environ)
    text = " ".join(request).strip()
    _run(text, ws, runs, new=new, clarify_only=clarify_only, no_goal=no_goal, rounds=rounds, asks=asks,
         timeout=timeout, isolate=isolate, judge_can_run=judge_can_run, model=model, budget=budget,
         as_json=as_json, verbose=verbose, window=window)


def wake_run(run_id: str, runs: Path, workspace: str, *, model: str | None, as_json: bool, verbose: bool) -> None:
    """`flower resume RUN` of a go run: what `flower go -w WORKSPACE -r RUNS` does, with the flags the run
    was started with; refused in one line when RUN is not the run that would wake there."""
    from flower.go.wake import read_state

    ws = Path(workspace)
    if not ws.is_dir():
        _fail(f"run {run_id}: its workspace {workspace} is gone")
    flags = read_state(runs).get("options")
    flags = flags if isinstance(flags, dict) else {}
    check_credentials(os.environ)
    _run("", ws, runs, new=False, clarify_only=bool(flags.get("clarify_only")), no_goal=bool(flags.get("no_goal")),
         rounds=int(flags.get("rounds") or 3), asks=None, timeout=1800.0, isolate=bool(flags.get("isolate")),
         judge_can_run=bool(flags.get("judge_can_run")), model=model, budget=None, as_json=as_json,
         verbose=verbose, expect=run_id)


def _run(text: str, ws: Path, runs: Path, *, new: bool, clarify_only: bool, no_goal: bool, rounds: int,
         asks: int | None, timeout: float, isolate: bool, judge_can_run: bool, model: str | None,
         budget: float | None, as_json: bool, verbose: bool, window: str | None = None,
         expect: str | None = None) -> None:
    from dataclasses import replace

    from flower.agent.options import check_isolation, require_git
    from flower.go import wake as waking
    from flower.go.flow import GoOptions, lead_spec, starter_flow
    from flower.human.channel import HumanChannel
    from flower.runtime.runtime import Runtime

    tty = sys.stdin.isatty() and sys.stdout.isatty() and not as_json
    # the run's model and budget are the go flow's own (GoOptions), not an override of every spec
    config = replace(runtime_config(run_dir=str(runs), window=window), model=None, budget=None)
    runtime = Runtime(ws, config=config)
    options = GoOptions(rounds=rounds, no_goal=no_goal, clarify_only=clarify_only, isolate=isolate,
                        judge_can_run=judge_can_run, model=model, budget=budget)
    screen = _Screen(as_json=as_json, threshold=None, interactive=tty)
    if isolate:  # before the first step: the brief and the goal live where the isolated coders can write
        require_git(ws, ["coder"])  # refused before anything is made
        runtime.isolate_workbench(screen)
    notes = Path(runtime.workbench.notes) if runtime.workbench is not None else runs
    decided = waking.plan(runs, ws, notes, waking.shape(options), new=new, text=text)
    if decided.archived is not None:
        screen.say(f"archived the earlier brief, goal and run state to {decided.archived}")
    wake = decided.wake
    if expect is not None and (wake is None or wake.run_id != expect):
        _fail(f"run {expect} is not the run flower go would wake in {ws}"
              + (f" (that is {wake.run_id})" if wake is not None else " (there is none)"))
    if wake is None and not text:
        text = _ask_request(tty)
    channel = HumanChannel(max_asks=asks, timeout_s=timeout, on_event=screen).bind(runtime)
    lead = lead_spec(channel, options)
    check_isolation(lead, ws)
    screen.view.threshold = runtime.threshold(lead)
    request = wake.request if wake is not None else text
    waking.record(runs, ws, waking.shape(options), wake, request)
    if wake is not None:
        _greet(wake, text, channel, screen, notes, runs)
    regoal = wake is not None and bool(text) and not no_goal and (notes / "goal.md").exists()
    # `waking.plan` decided: a run to wake, or a fresh one (whatever an earlier go run of the same request did)
    job = _Go(runtime, screen, channel, starter_flow(request, channel, options), options, tty=tty,
              new=new or wake is None, verbose=verbose, regoal=regoal,
              run_id=wake.run_id if wake is not None and wake.failed else None)
    again = f"flower go -w {ws}" + ("" if runs == ws / "runs" else f" -r {runs}")
    started = time.time()
    ctx = _execute(job, notes, again)
    _summary(ctx, screen, runtime, ws, notes, started)


def _ask_request(tty: bool) -> str:
    """The request typed on one line, when none was given and there is no run to wake."""
    if not tty:
        _fail("give the request as an argument: flower go \"what should be done\"")
    text = _ask_line("what should be done? (one sentence, Enter to start) > ").strip()
    if not text:
        _fail("an empty request: say in one sentence what should be done")
    return text


def _greet(wake: Wake, text: str, channel: HumanChannel, screen: _Screen, notes: Path, runs: Path) -> None:
    """The wake banner, and what the human typed on waking sent as mail."""
    from flower.go.wake import banner

    for line in banner(wake, notes, runs):
        screen.say(line)
    # Mail: appended to the brief at once, and the coordinator reads it at its next inbox call.
    if text and channel.send(text, source="terminal") is not None:
        screen.say("+ appended to the brief; the goal is derived again from it")


@dataclass
class _Go:
    """One `flower go` process's run, ready to start: what `_main` needs."""

    runtime: Runtime
    screen: _Screen
    channel: HumanChannel
    workflow: Workflow
    options: GoOptions
    tty: bool
    new: bool
    verbose: bool
    regoal: bool
    """Derive the goal again first: the human added to the brief on waking a run that has a goal."""
    run_id: str | None = None
    """The failed run to retry (None: the workflow engine finds the run to continue, or starts one)."""
    stopped: dict[str, float] = field(default_factory=dict)
    """"budget": the cost at which the run was stopped for going past `options.budget`."""


async def _main(go: _Go, notes: Path) -> Any:
    from flower.human.judge import GoalStep

    if go.regoal:
        # The brief file as written, with what was added to it (a `Brief` keeps its four sections only).
        brief = read_note(notes / "brief.md") or ""
        await GoalStep(always_set=True, can_run=go.options.judge_can_run).run(go.runtime, brief, on_event=go.screen)
    loop = asyncio.get_running_loop()
    work: asyncio.Future[Any] = loop.create_future()
    budget = go.options.budget

    def on_event(event: Event) -> None:
        go.screen(event)
        if budget is not None and go.screen.cost >= budget and "budget" not in go.stopped:
            go.stopped["budget"] = go.screen.cost
            loop.call_soon_threadsafe(work.cancel)

    work = asyncio.ensure_future(go.workflow.run(go.runtime, on_event=on_event, new=go.new, run_id=go.run_id,
                                                 verbose=go.verbose))
    line = reader = None
    if go.tty:
        from flower.cli.console import InputLine

        screen = go.screen
        line = InputLine(go.channel, interrupt=go.runtime.interrupt, stop=partial(_cancel, work),
                         status=lambda: fit(screen.view.status_line(), screen.width() - 1), say=screen.say)
        reader = asyncio.ensure_future(_patched(line))
    try:
        return await work
    finally:
        if line is not None and reader is not None:
            line.close()
            await asyncio.gather(reader, return_exceptions=True)


def _execute(go: _Go, notes: Path, again: str) -> Any:
    """Run the workflow to its end; a stop (Ctrl-C twice, a signal, the budget) says how to continue."""
    from flower.flow import engine
    from flower.flow.signals import guard

    try:
        with guard(interactive=False):  # SIGTERM/SIGHUP record the step in flight; on a pipe Ctrl-C interrupts
            return asyncio.run(_main(go, notes))
    except (KeyboardInterrupt, asyncio.CancelledError):
        if "budget" in go.stopped:
            click.echo(f"flower: stopped at ${go.stopped['budget']:.4f}, past the budget of "
                       f"${go.options.budget or 0:.2f}; the run is kept. Continue it with: {again} --budget MORE",
                       err=True)
            raise SystemExit(1) from None
        click.echo(f"flower: stopped; the run is kept. Continue it with: {again}", err=True)
        raise SystemExit(130) from None
    finally:
        if engine.current() is not None:
            engine.destroy()


def _cancel(task: asyncio.Future[Any]) -> None:
    task.cancel()


async def _patched(line: Any) -> None:
    from prompt_toolkit.patch_stdout import patch_stdout

    with patch_stdout(raw=True):
        await line.run()


def _summary(ctx: Any, screen: _Screen, runtime: Any, ws: Path, notes: Path, started: float) -> None:
    results = ctx.results if hasattr(ctx, "results") else {}
    # One verdict file per judged round; those of earlier runs are older than this process's start.
    rounds = len([p for p in notes.glob("*-round*.md") if p.stat().st_mtime >= started - 1])
    files = [p for p in (notes / "brief.md", notes / "goal.md", ws / "CLAUDE.md", ws / "AGENTS.md") if p.exists()]
    if ctx.failed_at:
        why = ctx.aborted or getattr(results.get(ctx.failed_at), "error", None) or "its gate said no"
        screen.say(f"x stopped at {ctx.failed_at}: {why}")
    shown = [str(p.relative_to(ws)) if p.is_relative_to(ws) else str(p) for p in files]
    screen.say(f"= run {runtime.run_id}: ${screen.cost:.4f} in this process"
               + (f", {rounds} judged round(s)" if rounds else "") + "; files: " + ", ".join(shown))
    if ctx.failed_at:
        raise SystemExit(1)
