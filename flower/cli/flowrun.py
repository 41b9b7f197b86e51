"""`flower run` for workflows, `flower runs`, `resume`, `cancel` and `worker` (L-6, L-7, B-13).

    flower run FILE.py:ATTR        a Workflow (or a callable returning one), or an AgentSpec (one step)
    flower runs                    the runs of a run dir (or store): state, steps done / total, cost
    flower resume RUN              continue an unfinished run
    flower cancel RUN              stop a run for good (its finished steps stay recorded)
    flower worker --store URL      take queued parallel steps of any run on that PostgreSQL database

Invariants:
- Running the same target again in the same workspace and run dir continues its unfinished run; `--new`
  starts a fresh one. Notices (continuing, a run of another workspace) go to stderr, one line each.
- An AgentSpec with `--resume SESSION` is a plain session resume (`flower.cli.launch.execute`), not a run.
- Ctrl-C twice or SIGTERM/SIGHUP leave the run unfinished; the command to continue it is printed.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from flower.cli.launch import check_credentials, execute, read_prompt, resolve_target, runtime_config
from flower.agent.events import Event
from flower.errors import ConfigError, FlowError, FlowerError
from flower.util.loader import call

__all__ = ["cancel", "resume", "run", "runs", "worker"]

_workspace = click.option("--workspace", "-w", default=".", show_default=True, type=click.Path(file_okay=False),
                          help="The agents' working directory.")
_run_dir = click.option("--run-dir", "-r", default="runs", show_default=True, type=click.Path(file_okay=False),
                        help="Where the manifest, sessions.db and dbos.sqlite (the runs' state) live.")
_store = click.option("--store", envvar="FLOWER_STORE", default=None, metavar="DSN|PATH",
                      help="Session store; a postgresql:// DSN also holds the runs' state, shared by a fleet "
                      "(env FLOWER_STORE).")
_verbose = click.option("--verbose", "-v", is_flag=True, help="Show DBOS's own log lines.")


def _call_factory(factory: Any, source: str) -> Any:
    return call(factory, source, "a Workflow, an AgentSpec")


def _session_store(store: str | None) -> Any:
    from flower.stores.opening import open_store

    return open_store(store, None, create=True) if store else None


def _print_notice(event: Event) -> None:
    if event.kind == "system" and event.payload.get("subtype") == "workflow":
        click.echo(f"flower: {event.text}", err=True)


def _drive(workflow: Any, runtime: Any, *, store: str | None, run_id: str | None, new: bool, verbose: bool) -> Any:
    from flower.cli.live import LiveView
    from flower.cli.launch import _summary
    from flower.flow.signals import guard

    threshold = runtime.threshold(workflow.steps[0].spec) if hasattr(workflow.steps[0], "spec") else None
    ctx = None
    with LiveView(threshold=threshold, console=Console(highlight=False)) as view:

        def on_event(event: Event) -> None:
            _print_notice(event)
            view.update(event)

        async def main() -> Any:
            return await workflow.run(runtime, on_event=on_event, new=new, store=store, run_id=run_id,
                                      verbose=verbose)

        with guard():
            try:
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
    for result in ctx.results.values():
        for one in result if isinstance(result, list) else [result]:
            click.echo(_summary(one, threshold, runtime.run_dir))
    return ctx


def _finish(ctx: Any, runtime: Any, workflow: Any) -> None:
    cost = sum(r.cost_usd for v in ctx.results.values() for r in (v if isinstance(v, list) else [v]))
    done = len(ctx.results)
    if len(workflow.steps) > 1 or ctx.failed_at:
        state = f"failed at {ctx.failed_at}" if ctx.failed_at else "finished"
        click.echo(f"run {runtime.run_id}: {state}, {done}/{workflow.total} steps, ${cost:.4f}", err=True)
    if ctx.failed_at:
        result = ctx.results.get(ctx.failed_at)
        why = ctx.aborted or (getattr(result, "error", None) if result is not None else None) or "its gate said no"
        raise FlowError(f"run {runtime.run_id} failed at step {ctx.failed_at}: {why}")


def _runtime(workspace: str, run_dir: str, store: str | None, run_id: str | None = None) -> Any:
    from dataclasses import replace

    from flower.runtime.runtime import Runtime

    config = replace(runtime_config(run_dir=run_dir), model=None, budget=None)  # model, budget: the specs'
    return Runtime(workspace, config=config, store=_session_store(store), run_id=run_id)


@click.command()
@click.argument("target", metavar="FILE.py:ATTR|module:attr")
@_workspace
@_run_dir
@click.option("--prompt", "-p", default=None, help="The task of an AgentSpec; read from stdin when absent ('-').")
@_store
@click.option("--resume", default=None, metavar="SESSION", help="AgentSpec only: continue this session.")
@click.option("--new", is_flag=True, help="Start a fresh run even if this workflow has an unfinished one here.")
@_verbose
def run(target: str, workspace: str, run_dir: str, prompt: str | None, store: str | None, resume: str | None,
        new: bool, verbose: bool) -> None:
    """Run a Workflow or an AgentSpec (or a callable returning one); an unfinished run here continues."""
    from flower.agent.spec import AgentSpec
    from flower.flow.workflow import Workflow, as_workflow

    value, canonical = resolve_target(target)
    source = canonical or target
    if not isinstance(value, (AgentSpec, Workflow)) and callable(value):
        value = _call_factory(value, source)
    if isinstance(value, AgentSpec) and resume:
        execute(value, read_prompt(prompt), workspace=workspace, run_dir=run_dir, store=store, resume=resume)
        return
    text = read_prompt(prompt) if isinstance(value, AgentSpec) else None
    workflow = as_workflow(value, source, prompt=text)
    if resume:
        raise ConfigError("--resume SESSION continues an AgentSpec's session; to continue a workflow run use "
                          "flower resume RUN")
    check_credentials(os.environ)
    runtime = _runtime(workspace, run_dir, store)
    ctx = _drive(workflow, runtime, store=store, run_id=None, new=new, verbose=verbose)
    _finish(ctx, runtime, workflow)


@click.command()
@_run_dir
@_store
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def runs(run_dir: str, store: str | None, as_json: bool) -> None:
    """The workflow runs of a run dir (or store): state, steps done / total, cost."""
    from flower.flow.runs import list_runs

    rows = list_runs(run_dir, store)
    if as_json:
        click.echo(json.dumps([row.as_dict() for row in rows], indent=1))
        return
    if not rows:
        click.echo(f"no workflow runs in {Path(run_dir).resolve()}")
        return
    from rich.table import Table

    table = Table(box=None, highlight=False)
    for column in ("run", "workflow", "state", "steps", "cost", "started", "workspace"):
        table.add_column(column, justify="right" if column in ("steps", "cost") else "left", no_wrap=True)
    for row in rows:
        state = f"{row.state} at {row.failed_at}" if row.failed_at else row.state
        table.add_row(row.run_id, row.workflow, state, f"{row.done}/{row.total}", f"${row.cost_usd:.4f}",
                      row.started, row.workspace)
    Console(highlight=False, width=200).print(table)


@click.command()
@click.argument("run_id", metavar="RUN")
@_run_dir
@_store
@_verbose
def resume(run_id: str, run_dir: str, store: str | None, verbose: bool) -> None:
    """Continue an unfinished run: finished steps are replayed, the step in flight resumes its session."""
    from flower.flow.durable import load_source
    from flower.flow.runs import run_meta
    from flower.flow.workflow import as_workflow

    meta, status = run_meta(run_dir, store, run_id)
    if status == "SUCCESS":
        raise FlowError(f"run {run_id} has already finished: nothing to resume")
    if meta.get("workflow") == "go" and not meta.get("source"):
        raise FlowError(f"run {run_id} is a flower go run: continue it with flower go -w {meta.get('workspace')}"
                        + ("" if Path(run_dir).resolve() == Path(str(meta.get("workspace"))) / "runs" else
                           f" -r {run_dir}"))
    if not meta.get("source"):
        raise FlowError(f"run {run_id} was started from Python, not from a file: run that program again")
    workflow = as_workflow(load_source(str(meta["source"])), str(meta["source"]),
                           prompt=(meta.get("context") or {}).get("prompt"))
    if not Path(str(meta.get("workspace"))).is_dir():
        raise FlowError(f"run {run_id}: its workspace {meta.get('workspace')} is gone")
    check_credentials(os.environ)
    runtime = _runtime(str(meta["workspace"]), run_dir, store, run_id=run_id)
    ctx = _drive(workflow, runtime, store=store, run_id=run_id, new=False, verbose=verbose)
    _finish(ctx, runtime, workflow)


@click.command()
@click.argument("run_id", metavar="RUN")
@_run_dir
@_store
def cancel(run_id: str, run_dir: str, store: str | None) -> None:
    """Cancel an unfinished run (and its queued parallel steps); its record stays."""
    from flower.flow.runs import cancel_run

    was = cancel_run(run_dir, store, run_id)
    click.echo(f"cancelled run {run_id} (it was {was.lower()})")


@click.command()
@click.option("--store", envvar="FLOWER_STORE", required=True, metavar="DSN",
              help="The fleet's PostgreSQL (sessions and runs' state; env FLOWER_STORE).")
@_run_dir
@click.option("--id", "executor_id", default=None, metavar="NAME",
              help="This worker's name (default worker-HOSTNAME); restarting under the same name puts the steps "
              "it was running when it died back in the queue.")
@_verbose
def worker(store: str, run_dir: str, executor_id: str | None, verbose: bool) -> None:
    """Take queued parallel steps of any run on the fleet's PostgreSQL until stopped (Ctrl-C, SIGTERM)."""
    from flower.flow import durable, engine
    from flower.flow.signals import record_interrupted

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
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        record_interrupted(durable.live_runs(), "worker stopped")

    try:
        asyncio.run(main())
    except FlowerError:
        raise
    finally:
        if engine.current() is not None:
            engine.destroy()
