"""`flower run` and `flower once` (agents and workflows), `flower runs`, `resume`, `cancel` and `worker`.

    flower run FILE.py:ATTR        a Workflow (or a callable returning one), or an AgentSpec (one step)
    flower once PROMPT             an ad-hoc, non-delegating agent
    flower runs                    the runs of a run dir (or store): state, steps done / total, cost
    flower resume RUN              continue an unfinished run; retry a failed one from its failed step
    flower cancel RUN              stop a run for good (its finished steps stay recorded)
    flower worker --store URL      take queued parallel steps of any run on that PostgreSQL database

Invariants:
- Running the same target again in the same workspace and run dir continues its unfinished run; when that
  run has ended it says how (finished: exit 0; failed, cancelled: exit 1) and runs nothing, and when the run
  dir holds a run its system database lost it says so and runs nothing (`flower.flow.previous`); `--new`
  starts a fresh one. Notices (continuing, a run of another workspace) go to stderr, one line each.
- An AgentSpec with `--resume SESSION` is a plain session resume (`flower.cli.launch.execute`), not a run.
- `--json` prints one JSON object on stdout when the run ends (run id, state, the final text never cut, cost,
  tokens, session ids, each step's whole result) and nothing else; `--events` prints every event as one JSON
  line, then a summary line per step carrying its whole result, then one line for the run.
- The live view prints the final answer whole, in a pipe and on a terminal (`flower.cli.live`).
- `-c/--continue` resumes the session the AgentSpec last ended with in this workspace and run dir (the run
  dir's manifest), the way `--resume SESSION` resumes a named one.
- Ctrl-C twice or SIGTERM/SIGHUP leave the run unfinished; the command to continue it is printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console

from flower.agent.events import Event
from flower.cli import options
from flower.cli.launch import (
    check_credentials,
    event_json,
    execute,
    read_prompt,
    resolve_target,
    runtime_config,
)
from flower.errors import ConfigError, FlowerError, FlowError, RunEnded
from flower.util.loader import call

if TYPE_CHECKING:
    from flower.flow.workflow import Context, Workflow
    from flower.runtime.runtime import Runtime
    from flower.runtime.steps import StepResult

__all__ = ["cancel", "once", "resume", "run", "runs", "worker"]

PERMISSION_MODES = ("default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto")


def _call_factory(factory: Any, source: str) -> Any:
    return call(factory, source, "a Workflow, an AgentSpec")


def _flagged(value: Any, source: str, *, model: str | None, fallback_model: str | None = None) -> Any:
    """The target (a factory called first), an AgentSpec on `model` and `fallback_model` when given: the one
    agent named on the command line runs on the models named there. A workflow's steps get the models and the
    budget from the runtime's config instead, which a fleet worker inherits. Anything else is returned as it
    is, for `as_workflow` to refuse in one line."""
    from flower.agent.spec import AgentSpec
    from flower.flow.workflow import Workflow

    if not isinstance(value, (AgentSpec, Workflow)) and callable(value):
        value = _call_factory(value, source)
    if isinstance(value, AgentSpec):
        given = {"model": model, "fallback_model": fallback_model}
        changes: dict[str, Any] = {name: chosen for name, chosen in given.items() if chosen is not None}
        value = dataclasses.replace(value, **changes) if changes else value
    return value


def _session_store(store: str | None) -> Any:
    from flower.stores.opening import open_store

    return open_store(store, None, create=True) if store else None


def _print_notice(event: Event) -> None:
    if event.kind == "system" and event.payload.get("subtype") == "workflow":
        click.echo(f"flower: {event.text}", err=True)


def _print_json(event: Event) -> None:
    _print_notice(event)
    click.echo(event_json(event))


def _results(ctx: Context) -> list[StepResult]:
    return [one for result in ctx.results.values() for one in (result if isinstance(result, list) else [result])]


def _leave_to_workers(workflow: Workflow, runtime: Runtime, store: str | None, verbose: bool) -> None:
    """`--on-workers`: launch DBOS listening to none of the runs' queues, and say so when no worker is alive
    and the workflow has a parallel step to wait with."""
    from flower.flow import engine, fleet
    from flower.flow.step import Parallel

    current = engine.launch(runtime.run_dir, store=store, verbose=verbose, branches=False)
    try:
        beats = fleet.heartbeats(current.url)
    except BaseException:
        engine.destroy()
        raise
    fans_out = any(isinstance(step, Parallel) or getattr(step, "over", None) is not None for step in workflow.steps)
    if fans_out and not any(b.role == "worker" and not b.silent for b in beats.values()):
        click.echo("flower: no flower worker is alive on this store: the parallel steps wait for one", err=True)


def _drive(workflow: Workflow, runtime: Runtime, *, store: str | None, run_id: str | None, new: bool,
           verbose: bool, as_json: bool = False, events: bool = False, otlp: str | None = None,
           on_workers: bool = False) -> Context:
    from flower.cli.launch import _summary
    from flower.cli.live import LiveView, answer_target
    from flower.cli.otel import otlp_tracing
    from flower.flow.signals import guard

    threshold = runtime.threshold(workflow.steps[0].spec) if hasattr(workflow.steps[0], "spec") else None
    ctx = None
    if on_workers:  # before the live view, whose status line would swallow the notice
        _leave_to_workers(workflow, runtime, store, verbose)
    with contextlib.ExitStack() as stack:
        if events:
            on_event = _print_json
        elif as_json:
            on_event = _print_notice  # stdout holds the one object at the end, nothing else
        else:
            view = stack.enter_context(LiveView(threshold=threshold, console=Console(highlight=False),
                                               answer_to=answer_target(runtime)))

            def on_event(event: Event) -> None:
                _print_notice(event)
                view.update(event)

        async def main() -> Context:
            return await workflow.run(runtime, on_event=on_event, new=new, store=store, run_id=run_id,
                                      verbose=verbose)

        stack.enter_context(guard())
        try:
            with otlp_tracing(otlp, runtime.run_id, workflow.name):  # flushed also when the run fails
                ctx = asyncio.run(main())
        except KeyboardInterrupt:
            ctx = None
        finally:
            from flower.flow import engine

            if engine.current() is not None:
                engine.destroy()
    if ctx is None:
        hint = f"flower resume {runtime.run_id} -r {runtime.run_dir}" + (" --store ..." if store else "")
        click.echo(f"flower: stopped; the run is kept. Continue it with: {hint}", err=True)
        raise SystemExit(130)
    for one in _results(ctx) if not as_json else ():
        if events:
            summary = {"kind": "summary", "run_dir": str(runtime.run_dir), **one.to_dict()}
            click.echo(json.dumps(summary, default=str, ensure_ascii=False))
        else:
            click.echo(_summary(one, threshold, runtime.run_dir))
    return ctx


def _finish(ctx: Context, runtime: Runtime, workflow: Workflow, *, as_json: bool = False,
            events: bool = False) -> None:
    from flower.cli.launch import run_json

    cost = sum(r.cost_usd for r in _results(ctx))
    done = len(ctx.results)
    state = f"failed at {ctx.failed_at}" if ctx.failed_at else "finished"
    why = None
    if ctx.failed_at:
        result = ctx.results.get(ctx.failed_at)
        why = ctx.aborted or (getattr(result, "error", None) if result is not None else None) or "its gate said no"
    if as_json:
        click.echo(run_json(runtime.run_id, _results(ctx), state="failed" if ctx.failed_at else "finished",
                            run_dir=runtime.run_dir, error=why))
    elif events:
        click.echo(json.dumps({"kind": "run", "run_id": runtime.run_id, "workflow": workflow.name,
                               "state": "failed" if ctx.failed_at else "finished", "failed_at": ctx.failed_at,
                               "steps": done, "total": workflow.total, "cost_usd": round(cost, 6)}))
    elif len(workflow.steps) > 1 or ctx.failed_at:
        click.echo(f"run {runtime.run_id}: {state}, {done}/{workflow.total} steps, ${cost:.4f}", err=True)
    if ctx.failed_at:
        raise FlowError(f"run {runtime.run_id} failed at step {ctx.failed_at}: {why}")


def _runtime(workspace: str, run_dir: str, store: str | None, run_id: str | None = None, *,
             model: str | None = None, fallback_model: str | None = None, budget: float | None = None) -> Runtime:
    """The run's runtime; its config carries `--model` and `--fallback-model` (for each step whose spec names
    none) and `--budget` (a cap on each query), and is recorded with the run, so a branch a `flower worker`
    takes runs under them."""
    from flower.runtime.runtime import Runtime

    config = runtime_config(run_dir=run_dir, model=model, fallback_model=fallback_model, budget=budget)
    return Runtime(workspace, config=config, store=_session_store(store), run_id=run_id)




def _outputs(as_json: bool, events: bool) -> None:
    if as_json and events:
        raise ConfigError("--json prints one object at the end, --events a line per event: choose one")


def _continued(value: Any, workspace: str, run_dir: str, resume: str | None) -> str:
    """The session `-c/--continue` resumes: the one the AgentSpec `value` last ended with in this workspace
    and run dir (`flower.report.rundata.last_session`); one line when there is none or it cannot apply."""
    from flower.agent.spec import AgentSpec
    from flower.report.rundata import last_session

    if resume:
        raise ConfigError("--continue resumes the last session, --resume SESSION the one named: give one of them")
    if not isinstance(value, AgentSpec):
        raise ConfigError("--continue continues an AgentSpec's last session; a workflow continues its unfinished "
                          "run when run again (or flower resume RUN)")
    found = last_session(Path(run_dir), Path(workspace), value.name)
    if found is None:
        raise ConfigError(f"no session of {value.name!r} in {Path(workspace).resolve()} (run dir "
                          f"{Path(run_dir).resolve()}) to continue: run it once without --continue")
    return found


@click.command(short_help="Run a Workflow or an AgentSpec with live progress.")
@click.argument("target", metavar="TARGET")
@options.workspace()
@options.run_dir()
@click.option("--prompt", "-p", default=None, help="The task of an AgentSpec; read from stdin when absent ('-').")
@options.store()
@options.model(help="Model id or alias: the AgentSpec's, or of each workflow step that names none.")
@options.fallback_model(help="Model to switch to when the model is overloaded or unavailable: the AgentSpec's, "
                             "or of each workflow step that names none.")
@options.budget(help="Spend cap in dollars of each query: the spec's max_budget_usd, or a lower one.")
@options.json_output(help="Print one JSON object at the end: run id, state, final text, cost, tokens, sessions.")
@options.events_output()
@options.otlp()
@click.option("--resume", default=None, metavar="SESSION", help="AgentSpec only: continue this session.")
@options.continue_last(help="AgentSpec only: continue its last session in this workspace and run dir.")
@options.new()
@options.on_workers()
@options.verbose()
def run(target: str, workspace: str, run_dir: str, prompt: str | None, store: str | None, model: str | None,
        fallback_model: str | None, budget: float | None, as_json: bool, events: bool, otlp: str | None,
        resume: str | None, continue_: bool, new: bool, on_workers: bool, verbose: bool) -> None:
    """Run a Workflow or an AgentSpec (or a callable returning one) with live progress.

    TARGET is FILE.py:ATTR or module:attr. An AgentSpec runs as a one-step workflow on the prompt. Running
    the same target again in the same workspace and run dir continues its unfinished run (--new starts a
    fresh one). -c continues the AgentSpec's last session here with a new prompt.

    --model, --fallback-model and --budget apply to an AgentSpec and to every step of a Workflow, except
    that a step whose spec names its own model (or fallback) keeps it, and a spec's own lower cap stays.
    """
    from flower.agent.spec import AgentSpec
    from flower.flow.workflow import as_workflow

    _outputs(as_json, events)
    value, canonical = resolve_target(target)
    source = canonical or target
    value = _flagged(value, source, model=model, fallback_model=fallback_model)
    if continue_:
        resume = _continued(value, workspace, run_dir, resume)
    if isinstance(value, AgentSpec) and resume:
        from flower.runtime.config import RuntimeConfig

        if on_workers:
            raise ConfigError("--on-workers leaves a workflow's parallel steps to workers; a session resume "
                              "(--resume, -c) runs here, not as a workflow")

        again = f"flower run {shlex.quote(target)} -w {shlex.quote(workspace)} -r {shlex.quote(run_dir)} -p 'continue'"
        spec = RuntimeConfig(budget=budget).apply(value)  # a session resume runs the spec as it is given
        execute(spec, read_prompt(prompt), workspace=workspace, run_dir=run_dir, store=store, resume=resume,
                otlp=otlp, as_json=as_json, events=events, again=again)
        return
    text = read_prompt(prompt) if isinstance(value, AgentSpec) else None
    workflow = as_workflow(value, source, prompt=text)
    if resume:
        raise ConfigError("--resume SESSION continues an AgentSpec's session; to continue a workflow run use "
                          "flower resume RUN")
    check_credentials(os.environ)
    runtime = _runtime(workspace, run_dir, store, model=model, fallback_model=fallback_model, budget=budget)
    try:
        ctx = _drive(workflow, runtime, store=store, run_id=None, new=new, verbose=verbose, as_json=as_json,
                     events=events, otlp=otlp, on_workers=on_workers)
    except RunEnded as exc:
        if exc.state != "finished":
            raise  # failed or cancelled: one line, exit status 1
        click.echo(f"flower: {exc}", err=True)  # finished: nothing to do, and nothing went wrong
        return
    _finish(ctx, runtime, workflow, as_json=as_json, events=events)


@click.command(short_help="Run one ad-hoc, non-delegating agent.")
@click.argument("prompt")
@click.option("--tools", "-t", default="Read,Glob,Grep", show_default=True, metavar="LIST",
              help="Comma list of allowed tools.")
@click.option("--instructions", "-i", default="", metavar="TEXT", help="Appended to the system prompt.")
@click.option("--permission-mode", type=click.Choice(PERMISSION_MODES), default=None, metavar="MODE",
              help=f"The CLI's permission mode: {', '.join(PERMISSION_MODES)}.")
@options.budget(help="Spend cap in dollars of the query (max_budget_usd).")
@click.option("--resume", default=None, metavar="SESSION", help="Continue this session.")
@options.continue_last(help="Continue the last flower once session in this workspace and run dir.")
@options.workspace()
@options.run_dir()
@options.store()
@options.model(help="Model id or alias (default: the CLI's choice).")
@options.fallback_model()
@options.json_output(help="Print one JSON object at the end: run id, state, final text, cost, tokens, sessions.")
@options.events_output(help="Print every event as one JSON line, then the step's whole result.")
@options.otlp()
def once(prompt: str, tools: str, instructions: str, permission_mode: str | None, budget: float | None,
         resume: str | None, continue_: bool, workspace: str, run_dir: str, store: str | None,
         model: str | None = None, fallback_model: str | None = None, as_json: bool = False, events: bool = False,
         otlp: str | None = None) -> None:
    """Run one ad-hoc agent on PROMPT ('-' reads stdin) that does the work itself, walled to its --tools."""
    from flower.agent.spec import AgentSpec

    _outputs(as_json, events)
    allowed = [name.strip() for name in tools.split(",") if name.strip()]
    if not allowed:
        raise ConfigError("--tools needs at least one tool name")
    spec = AgentSpec(name="once", instructions=instructions, allowed_tools=allowed,
                     permission_mode=permission_mode,  # type: ignore[arg-type]  # click.Choice checked it
                     max_budget_usd=budget, model=model, fallback_model=fallback_model)
    if continue_:
        resume = _continued(spec, workspace, run_dir, resume)
    again = f"flower once 'continue' -t {shlex.quote(tools)} -w {shlex.quote(workspace)} -r {shlex.quote(run_dir)}"
    execute(spec, read_prompt(prompt), workspace=workspace, run_dir=run_dir, store=store, resume=resume,
            otlp=otlp, as_json=as_json, events=events, again=again)


@click.command(short_help="The workflow runs of a run dir (or store).")
@options.run_dir()
@options.store()
@options.json_output(help="Print JSON instead of a table.")
def runs(run_dir: str, store: str | None, as_json: bool) -> None:
    """The workflow runs of a run dir (or store): state, steps done / total, cost."""
    from flower.flow.runs import list_runs, stall_reason

    rows = list_runs(run_dir, store)
    if as_json:
        click.echo(json.dumps([row.as_dict() for row in rows], indent=1))
        return
    if not rows:
        click.echo(f"no workflow runs in {Path(run_dir).resolve()}")
        return
    from rich.cells import cell_len
    from rich.table import Table

    cells = [(row.run_id, row.workflow, f"{row.state} at {row.failed_at}" if row.failed_at else row.state,
              f"{row.done}/{row.total}", f"${row.cost_usd:.4f}", row.started, row.workspace) for row in rows]
    columns = ("run", "workflow", "state", "steps", "cost", "started", "workspace")
    wide = sum(max(cell_len(c[i]) for c in [columns, *cells]) for i in range(len(columns))) + 2 * len(columns)
    console = Console(highlight=False, width=max(wide, 80))
    if sys.stdout.isatty() and wide > shutil.get_terminal_size().columns:
        # too wide for this terminal: two lines a run, the run id whole (it is what the next command needs)
        for run, workflow, state, steps, cost, started, workspace in cells:
            click.echo(f"{run}  {state}  {steps}  {cost}  {started[:16].replace('T', ' ')}")
            click.echo(f"  {workflow} in {workspace}")
    else:
        table = Table(box=None, highlight=False)
        for column in columns:
            table.add_column(column, justify="right" if column in ("steps", "cost") else "left", no_wrap=True)
        for cell in cells:
            table.add_row(*cell)
        console.print(table)
    for row in rows:
        reason = stall_reason(row)
        if reason is not None:
            click.echo(reason)


@click.command(short_help="Continue an unfinished run or retry a failed one.")
@click.argument("run_id", metavar="RUN")
@options.run_dir()
@options.store()
@options.model(help="As for `flower run` (not recorded with the run: give it again).")
@options.fallback_model(help="As for `flower run` (not recorded with the run: give it again).")
@options.budget(help="As for `flower run` (not recorded with the run: give it again).")
@options.json_output(help="Print one JSON object at the end: run id, state, final text, cost, tokens, sessions.")
@options.events_output()
@options.otlp()
@options.on_workers()
@options.verbose()
def resume(run_id: str, run_dir: str, store: str | None, model: str | None, fallback_model: str | None,
           budget: float | None, as_json: bool, events: bool, otlp: str | None, on_workers: bool,
           verbose: bool) -> None:
    """Continue an unfinished run: finished steps are replayed, the step in flight resumes its session.

    A failed run is retried from its failed step as a new run; a flower go run wakes as `flower go` would.
    """
    from flower.flow.durable import load_source
    from flower.flow.previous import ended
    from flower.flow.runs import run_meta
    from flower.flow.workflow import as_workflow

    _outputs(as_json, events)
    meta, status, output = run_meta(run_dir, store, run_id)
    refused = ended(run_id, status, output)
    if refused is not None and refused.state != "failed":
        raise refused  # a finished run has nothing to resume; a cancelled one stays stopped
    if meta.get("workflow") == "go" and not meta.get("source"):
        from flower.cli.go import wake_run

        if store:
            raise ConfigError("a flower go run keeps its state in its run dir: give -r, not --store")
        # --budget here is a per-query cap (FLOWER_BUDGET); a go run's is the whole run's: `flower go --budget`
        wake_run(run_id, Path(run_dir).resolve(), str(meta.get("workspace")), model=model,
                 as_json=as_json or events, verbose=verbose)
        return
    if not meta.get("source"):
        raise FlowError(f"run {run_id} was started from Python, not from a file: run that program again")
    value = _flagged(load_source(str(meta["source"])), str(meta["source"]), model=model,
                     fallback_model=fallback_model)
    workflow = as_workflow(value, str(meta["source"]), prompt=(meta.get("context") or {}).get("prompt"))
    if not Path(str(meta.get("workspace"))).is_dir():
        raise FlowError(f"run {run_id}: its workspace {meta.get('workspace')} is gone")
    check_credentials(os.environ)
    runtime = _runtime(str(meta["workspace"]), run_dir, store, run_id=run_id, model=model,
                       fallback_model=fallback_model, budget=budget)
    ctx = _drive(workflow, runtime, store=store, run_id=run_id, new=False, verbose=verbose, as_json=as_json,
                 events=events, otlp=otlp, on_workers=on_workers)
    _finish(ctx, runtime, workflow, as_json=as_json, events=events)


@click.command(short_help="Cancel an unfinished workflow run.")
@click.argument("run_id", metavar="RUN")
@options.run_dir()
@options.store()
def cancel(run_id: str, run_dir: str, store: str | None) -> None:
    """Cancel an unfinished run (and its queued parallel steps); its record stays."""
    from flower.flow.runs import cancel_run

    was = cancel_run(run_dir, store, run_id)
    click.echo(f"cancelled run {run_id} (it was {was.lower()})")


@click.command(short_help="Take queued parallel steps of a fleet's runs.")
@options.store(required=True, metavar="DSN", help="The fleet's PostgreSQL (sessions and the runs' state).")
@options.run_dir()
@click.option("--id", "executor_id", default=None, metavar="NAME",
              help="This worker's name (default worker-HOSTNAME); restarting under the same name puts the steps "
              "it was running when it died back in the queue.")
@click.option("--heartbeat-timeout", "timeout", type=click.FloatRange(min=1.0), default=30.0, show_default=True,
              metavar="SECONDS", help="When this worker is silent that long (killed, frozen, cut off), another "
              "process of the fleet puts the steps it holds back in the queue.")
@options.verbose()
def worker(store: str, run_dir: str, executor_id: str | None, timeout: float, verbose: bool) -> None:
    """Take queued parallel steps of any run on the fleet's PostgreSQL until stopped (Ctrl-C, SIGTERM)."""
    from flower.flow import durable, engine, fleet
    from flower.flow.signals import TERMINATING, record_interrupted

    if not engine.database_url(run_dir, store).startswith("postgresql"):
        raise ConfigError("flower worker needs a PostgreSQL --store (a SQLite run dir has a single process)")
    check_credentials(os.environ)
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    durable.set_worker(store=store, run_dir=run_dir)

    async def main() -> None:
        import signal
        import socket

        name = executor_id or f"worker-{socket.gethostname()}"
        current = engine.launch(run_dir, store=store, verbose=verbose, executor_id=name)
        click.echo(f"worker {current.executor_id} on {current.where}: taking queued steps (Ctrl-C to stop)",
                   err=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (*TERMINATING, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        with fleet.beating(current.url, current.executor_id, "worker", timeout, on_lost=durable.fence,
                           on_back=durable.unfence) as heart:
            await stop.wait()
            if heart.cut_off:  # recording the stop, DBOS's shutdown would wait on the database: not now
                durable.fence()
                click.echo(f"worker {current.executor_id}: stopped while cut off from the database; the fleet "
                           "puts the steps it held back in the queue", err=True)
                sys.stderr.flush()
                os._exit(1)
        record_interrupted(durable.live_runs(), "worker stopped")

    try:
        asyncio.run(main())
    except FlowerError:
        raise
    finally:
        if engine.current() is not None:
            engine.destroy()
