"""The `flower` command: thin click commands over the library (B-10, B-11, B-12).

    flower run FILE.py:ATTR | module:attr   run a spec (an AgentSpec, or a callable returning one)
    flower once PROMPT                       an ad-hoc, non-delegating agent
    flower report RUN_DIR | SESSION_ID       the context economics of a run (--json, --html FILE)
    flower preview SESSION_ID                what the next resume would feed back, as a diff
    flower sessions [list | show ID]         the sessions a store holds

Invariants:
- A user error is one line on stderr (`flower: ...`) and exit status 1, never a traceback: every
  `FlowerError` and every expected OS error (missing file, permission, ...) is caught in `FlowerGroup`.
- The CLI honours its own environment (ANTHROPIC_*, CLAUDE_*, HOME, proxies) and hands it to the runtime.
- A real run refuses to start without credentials, unless ANTHROPIC_BASE_URL points at a local fake API.
- Reading commands (report, preview, sessions) never create a store.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console

from flower.cli.launch import execute, load_spec, read_prompt
from flower.errors import FlowerError
from flower.util.oneline import first_line

__all__ = ["cli", "main"]

PERMISSION_MODES = ("default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto")


class UserError(click.ClickException):
    """One line on stderr, exit status 1."""

    exit_code = 1

    def show(self, file: Any = None) -> None:
        click.echo(f"flower: {self.format_message()}", err=True)


def _os_message(exc: OSError) -> str:
    what = exc.strerror or type(exc).__name__
    return f"{what}: {exc.filename}" if exc.filename else str(exc).splitlines()[0] if str(exc) else what


class FlowerGroup(click.Group):
    """Turns flower's own errors and expected OS errors into one line and exit status 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            # The reader went away (`flower report | head`): stop quietly, like any Unix filter.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise SystemExit(1) from None
        except FlowerError as exc:
            raise UserError(first_line(exc)) from None
        except OSError as exc:
            raise UserError(_os_message(exc)) from None


def _fail(message: str) -> NoReturn:
    raise UserError(message)


def _common(*options: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def apply(function: Any) -> Any:
        for option in reversed(options):
            function = option(function)
        return function

    return apply


workspace_option = click.option(
    "--workspace",
    "-w",
    envvar="FLOWER_WORKSPACE",
    default=".",
    show_default=True,
    type=click.Path(file_okay=False),
    help="The agent's working directory.",
)
run_dir_option = click.option(
    "--run-dir",
    "-r",
    envvar="FLOWER_RUN_DIR",
    default="runs",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where the manifest and sessions.db live.",
)
store_option = click.option(
    "--store",
    envvar="FLOWER_STORE",
    default=None,
    metavar="DSN|PATH",
    help="Session store: a postgresql:// DSN or a SQLite file (default <run-dir>/sessions.db; "
    "env FLOWER_STORE).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")


@click.group(cls=FlowerGroup)
@click.version_option(package_name="flower-runtime")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """flower: long Claude agent runs with a clean coordinator context."""
    from flower.cli.config import default_map, load_config

    # flag > env > config file (flower.toml or [tool.flower]) > default: click's default_map sits below both.
    try:
        values = load_config()[1]
    except FlowerError:
        if ctx.resilient_parsing or "--help" in sys.argv[1:]:
            return  # help and shell completion still work beside a broken config file
        raise
    ctx.default_map = {**default_map(values), **(ctx.default_map or {})}


@cli.command()
@click.argument("target", metavar="FILE.py:ATTR|module:attr")
@_common(workspace_option, run_dir_option)
@click.option("--prompt", "-p", default=None, help="The task; read from stdin when absent (or '-').")
@store_option
@click.option("--resume", default=None, metavar="SESSION", help="Continue this session.")
@click.option("--model", "-m", default=None, envvar="FLOWER_MODEL",
              help="Model id or alias (overrides the spec's; env FLOWER_MODEL).")
@click.option("--budget", type=float, default=None, metavar="USD",
              help="Stop cleanly once a query has spent this much (the spec's max_budget_usd).")
@click.option("--json", "as_json", is_flag=True, help="Print the events as JSON lines instead of the live view.")
@click.option("--otlp", default=None, metavar="URL", envvar="FLOWER_OTLP",
              help="Send OpenTelemetry spans to this OTLP/HTTP collector (needs the otel extra; env FLOWER_OTLP).")
def run(
    target: str, workspace: str, run_dir: str, prompt: str | None, store: str | None, resume: str | None,
    model: str | None = None, budget: float | None = None, as_json: bool = False, otlp: str | None = None,
) -> None:
    """Run an AgentSpec (or a zero-argument callable returning one) with live progress."""
    import dataclasses

    spec = load_spec(target)
    if budget is not None and budget <= 0:
        _fail(f"--budget must be positive, not {budget}")
    changes = {k: v for k, v in (("model", model), ("max_budget_usd", budget)) if v is not None}
    spec = dataclasses.replace(spec, **changes) if changes else spec
    again = f"flower run {shlex.quote(target)} -w {shlex.quote(workspace)} -r {shlex.quote(run_dir)} -p 'continue'"
    execute(spec, read_prompt(prompt), workspace=workspace, run_dir=run_dir, store=store, resume=resume,
            otlp=otlp, as_json=as_json, again=again)


@cli.command()
@click.argument("prompt")
@click.option(
    "--tools", "-t", default="Read,Glob,Grep", show_default=True, help="Comma list of allowed tools."
)
@click.option("--instructions", "-i", default="", help="Appended to the system prompt.")
@click.option(
    "--permission-mode", type=click.Choice(PERMISSION_MODES), default=None, help="The CLI's permission mode."
)
@click.option(
    "--budget", type=float, default=None, metavar="USD", help="Spend cap of the query (max_budget_usd)."
)
@click.option("--resume", default=None, metavar="SESSION", help="Continue this session.")
@_common(workspace_option, run_dir_option, store_option)
@click.option("--model", "-m", default=None, envvar="FLOWER_MODEL",
              help="Model id or alias (default: the CLI's choice; env FLOWER_MODEL).")
@click.option("--json", "as_json", is_flag=True, help="Print the events as JSON lines instead of the live view.")
@click.option("--otlp", default=None, metavar="URL", envvar="FLOWER_OTLP",
              help="Send OpenTelemetry spans to this OTLP/HTTP collector (needs the otel extra; env FLOWER_OTLP).")
def once(
    prompt: str,
    tools: str,
    instructions: str,
    permission_mode: str | None,
    budget: float | None,
    resume: str | None,
    workspace: str,
    run_dir: str,
    store: str | None,
    model: str | None = None,
    as_json: bool = False,
    otlp: str | None = None,
) -> None:
    """Run one ad-hoc, non-delegating agent on PROMPT ('-' reads stdin)."""
    from flower.agent.spec import AgentSpec

    allowed = [name.strip() for name in tools.split(",") if name.strip()]
    if not allowed:
        _fail("--tools needs at least one tool name")
    if budget is not None and budget <= 0:
        _fail(f"--budget must be positive, not {budget}")
    spec = AgentSpec(
        name="once",
        instructions=instructions,
        allowed_tools=allowed,
        permission_mode=permission_mode,  # type: ignore[arg-type]  # click.Choice checked it
        max_budget_usd=budget,
        model=model,
    )
    again = f"flower once 'continue' -t {shlex.quote(tools)} -w {shlex.quote(workspace)} -r {shlex.quote(run_dir)}"
    execute(spec, read_prompt(prompt), workspace=workspace, run_dir=run_dir, store=store, resume=resume,
            otlp=otlp, as_json=as_json, again=again)


# --- reading runs ---------------------------------------------------------------------------------


@cli.command()
@click.argument("target", metavar="RUN_DIR|SESSION_ID")
@json_option
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="Also write a self-contained HTML report with charts.",
)
@_common(store_option, run_dir_option)
@click.option(
    "--window", type=click.IntRange(min=1), default=None, help="Context window for the threshold (tokens)."
)
@click.option("--by", type=click.Choice(["worker", "model", "day", "step"]), default=None,
              help="Tokens and cost per worker, model, day or step instead of the economics.")
def report(
    target: str, as_json: bool, html_path: str | None, store: str | None, run_dir: str, window: int | None,
    by: str | None = None,
) -> None:
    """The context economics of a run dir or of one session."""
    from flower.report.terminal import print_report
    from flower.report.rundata import close_store, load_target, recorded_threshold, workbench_stats_of
    from flower.report.analysis import analyze, report_json

    base, data = load_target(target, store, run_dir)
    if by is not None:
        from flower.report.breakdown import breakdown, breakdown_json
        from flower.report.terminal import print_breakdown

        close_store(base)
        buckets = breakdown(data, by)  # type: ignore[arg-type]  # click.Choice checked it
        if as_json:
            click.echo(json.dumps({"target": data.label, **breakdown_json(buckets, by)}, indent=1))  # type: ignore[arg-type]
        else:
            print_breakdown(Console(highlight=False), buckets, by, label=data.label)
        return
    try:
        stats = workbench_stats_of(data)
        result = analyze(
            data.main,
            data.subagents,
            retired=data.retired,
            threshold=recorded_threshold(data, window),
            spill_log=data.spill_log,
            workbench=stats,
            cost_usd=data.cost_usd,
            workbench_root=str(data.workbench_root) if data.workbench_root else None,
        )
    finally:
        close_store(base)
    if html_path:
        from flower.report.html import render_html

        from flower.report.timeline import build_timeline

        Path(html_path).write_text(
            render_html(result, title=f"flower report: {data.label}", timeline=build_timeline(data)),
            encoding="utf-8",
        )
    if as_json:
        payload = {"target": data.label, "workbench_source": data.workbench_source, **report_json(result)}
        click.echo(json.dumps(payload, indent=1, default=str))
        return
    source = {"manifest": "from the manifest", "cwd": "from the entries' cwd", "none": ""}[
        data.workbench_source
    ]
    note = f"{data.workbench_root} ({source})" if data.workbench_root else "not found"
    if data.workbench_root is not None and stats is None:
        note += ", missing on disk"
    print_report(Console(highlight=False), result, label=data.label, workbench_note=note)
    if html_path:
        click.echo(f"wrote {html_path}")


@cli.command()
@click.argument("session_id")
@_common(run_dir_option, store_option, json_option)
@click.option("--full", is_flag=True, help="Show whole blocks in the diff (default: 12 lines each).")
def preview(session_id: str, run_dir: str, store: str | None, as_json: bool, full: bool) -> None:
    """What the next resume of SESSION_ID would feed back, as a diff against the stored history."""
    from flower.report.terminal import print_preview
    from flower.report.rundata import load_session
    from flower.stores.opening import close_store, open_store
    from flower.report.preview import build_preview, preview_json

    base = open_store(store, Path(run_dir))
    try:
        data = load_session(session_id, base, Path(run_dir))
    finally:
        close_store(base)
    session_id = data.label  # the full id, when a prefix was given
    recorded = next((row.get("policies") for row in reversed(data.steps)
                     if session_id in (row.get("session_id"), *(row.get("retired") or ()))), None)
    result = build_preview(session_id, data.main[session_id], data.subagents, max_lines=None if full else 12,
                           policies=recorded if isinstance(recorded, dict) else None)
    if as_json:
        click.echo(json.dumps(preview_json(result), indent=1, default=str))
    else:
        print_preview(Console(highlight=False), result)


@cli.group(invoke_without_command=True)
@click.option("--run-dir", "-r", default=None, envvar="FLOWER_RUN_DIR", type=click.Path(file_okay=False),
              help="As for `sessions list`.")
@click.option("--store", default=None, envvar="FLOWER_STORE", metavar="DSN|PATH", help="As for `sessions list`.")
@click.option("--workspace", "-w", default=None, envvar="FLOWER_WORKSPACE", type=click.Path(file_okay=False),
              help="As for `sessions list`.")
@click.option("--json", "as_json", is_flag=True, help="As for `sessions list`.")
@click.pass_context
def sessions(
    ctx: click.Context, run_dir: str | None = None, store: str | None = None, workspace: str | None = None,
    as_json: bool = False,
) -> None:
    """The sessions a store holds: `list` (the default) or `show ID`."""
    if ctx.invoked_subcommand is None:
        given = {"run_dir": run_dir, "store": store, "workspace": workspace}
        defaults = (ctx.default_map or {}).get("list", {})  # the config file's values for `sessions list`
        ctx.invoke(sessions_list, **{**defaults, **{k: v for k, v in given.items() if v is not None}},
                   as_json=as_json)


@sessions.command("list")
@_common(run_dir_option, store_option, workspace_option, json_option)
def sessions_list(
    run_dir: str = "runs", store: str | None = None, workspace: str = ".", as_json: bool = False
) -> None:
    """Every main session of the run dir's projects, oldest first."""
    from flower.report.terminal import print_sessions
    from flower.report.rundata import session_rows
    from flower.stores.opening import close_store, open_store

    store = store if store is not None else os.environ.get("FLOWER_STORE") or None
    base = open_store(store, Path(run_dir))
    try:
        rows = session_rows(base, Path(run_dir), Path(workspace).resolve())
    finally:
        close_store(base)
    if as_json:
        click.echo(json.dumps(rows, indent=1))
    else:
        print_sessions(Console(highlight=False), rows)


@sessions.command("show")
@click.argument("session_id")
@_common(run_dir_option, store_option, json_option)
def sessions_show(session_id: str, run_dir: str, store: str | None, as_json: bool) -> None:
    """One session: its key, size, turns, context, subagents and manifest steps."""
    from flower.report.terminal import print_session
    from flower.report.rundata import first_prompt, load_session
    from flower.stores.opening import close_store, open_store
    from flower.report.analysis import analyze

    base = open_store(store, Path(run_dir))
    try:
        data = load_session(session_id, base, Path(run_dir))
    finally:
        close_store(base)
    session_id = data.label  # the full id, when a prefix was given
    from flower.report.breakdown import worker_types

    workers = worker_types(data)
    result = analyze(data.main, data.subagents, cost_usd=data.cost_usd)
    entries = data.main[session_id]
    info = {
        "session_id": session_id,
        "project_key": data.keys[session_id]["project_key"],
        "entries": len(entries),
        "turns": result.main.turns,
        "chars": result.main.chars,
        "tool_calls": result.main.calls,
        "context": result.contexts[-1] if result.contexts else None,
        "cost_usd": result.cost_usd,
        "first_prompt": first_prompt(entries),
        "subagents": [
            {"agent": agent, "worker": workers.get(agent.rsplit("/", 1)[-1], "subagent"),
             "entries": len(data.subagents[agent]), "turns": stats.turns}
            for agent, stats in result.per_agent.items()
        ],
        "steps": [
            {k: row.get(k) for k in ("step", "ok", "cost_usd", "retired", "session_id", "run_id")}
            for row in data.steps
        ],
    }
    if as_json:
        click.echo(json.dumps(info, indent=1))
    else:
        print_session(Console(highlight=False), info)


@cli.command()
@click.option("--dir", "root", type=click.Path(file_okay=False), default=None,
              help="Where to build the demo repository and run dir (default: a new temporary directory).")
@click.option("--html", "html_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Also write the run's HTML report.")
@click.pass_context
def demo(ctx: click.Context, root: str | None, html_path: str | None) -> None:
    """An offline coordinator run on the scripted model, then its context report."""
    import time

    import anyio

    from flower.cli.demo import run_demo
    from flower.cli.demo_checks import print_demo_report

    started = time.monotonic()
    result = anyio.run(run_demo, Path(root) if root else None)
    print_demo_report(result, elapsed=time.monotonic() - started)
    click.echo()
    ctx.invoke(report, target=str(result.runtime.run_dir), as_json=False, html_path=html_path, store=None,
               run_dir=str(result.runtime.run_dir), window=None)
    if not all(step.ok for step in result.steps):
        raise SystemExit(1)


# --- durable workflows (issue #13): `run` is replaced by the workflow-aware one, which still runs an AgentSpec

from flower.cli import flowrun  # noqa: E402 - registered after the commands above, kept together at the end

cli.add_command(flowrun.run, "run")
cli.add_command(flowrun.runs, "runs")
cli.add_command(flowrun.resume, "resume")
cli.add_command(flowrun.cancel, "cancel")
cli.add_command(flowrun.worker, "worker")


def main() -> None:
    cli(prog_name="flower")


# The human channel's commands (issue #14): asks, answer, say.
from flower.cli.human import answer, asks, say  # noqa: E402

cli.add_command(asks)
cli.add_command(answer)
cli.add_command(say)

# --- commands defined in their own modules --------------------------------------------------------
from flower.cli.reading import config, logs  # noqa: E402  (registered last: it imports nothing from here)

cli.add_command(logs)
cli.add_command(config)

from flower.cli.testing_cmd import testing  # noqa: E402

cli.add_command(testing)

# `flower go` (issue #15): clarify, goal, judged work and bequest as one durable run.
from flower.cli.go import go  # noqa: E402

cli.add_command(go)
