"""The reading commands: `flower report`, `preview`, `sessions`, `logs` and `flower config`.

Invariant: reading never creates or changes a store (an SQLite store is opened read-only).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console

from flower.cli import options

if TYPE_CHECKING:
    from flower.report.analysis import Report
    from flower.report.rundata import RunData

__all__ = ["config", "logs", "preview", "report", "sessions"]


@click.command(short_help="The context economics of a run dir or of one session.")
@click.argument("target", metavar="RUN_DIR|SESSION_ID")
@options.json_output()
@click.option("--html", "html_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Also write a self-contained HTML report with charts.")
@options.store()
@options.run_dir()
@click.option("--window", type=click.IntRange(min=1), default=None, metavar="TOKENS",
              help="Context window for the threshold (tokens).")
@click.option("--by", type=click.Choice(["worker", "model", "day", "step"]), default=None,
              help="Tokens and cost per worker, model, day or step instead of the economics.")
def report(target: str, as_json: bool, html_path: str | None, store: str | None, run_dir: str,
           window: int | None, by: str | None = None) -> None:
    """The context economics of a run dir or of one session: threads, context per turn, tool calls,
    spills, what the next resume saves, workbench reuse, cache hits and cost."""
    from flower.report.rundata import load_target
    from flower.stores.opening import close_store

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
        result, stats = _analyze(data, window)
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
        from flower.report.analysis import report_json

        payload = {"target": data.label, "workbench_source": data.workbench_source, **report_json(result)}
        click.echo(json.dumps(payload, indent=1, default=str))
        return
    from flower.report.terminal import print_report

    source = {"manifest": "from the manifest", "cwd": "from the entries' cwd", "none": ""}[data.workbench_source]
    note = f"{data.workbench_root} ({source})" if data.workbench_root else "not found"
    if data.workbench_root is not None and stats is None:
        note += ", missing on disk"
    print_report(Console(highlight=False), result, label=data.label, workbench_note=note)
    if html_path:
        click.echo(f"wrote {html_path}")


def _analyze(data: RunData, window: int | None) -> tuple[Report, object]:
    from flower.report.analysis import analyze
    from flower.report.rundata import recorded_threshold, workbench_stats_of

    stats = workbench_stats_of(data)
    result = analyze(data.main, data.subagents, retired=data.retired, threshold=recorded_threshold(data, window),
                     spill_log=data.spill_log, workbench=stats, cost_usd=data.cost_usd,
                     workbench_root=str(data.workbench_root) if data.workbench_root else None,
                     cache_costs=data.cache_costs)
    return result, stats


@click.command(short_help="What the next resume of a session would feed back.")
@click.argument("session_id")
@options.run_dir()
@options.store()
@options.json_output()
@click.option("--full", is_flag=True, help="Show whole blocks in the diff (default: 12 lines each).")
def preview(session_id: str, run_dir: str, store: str | None, as_json: bool, full: bool) -> None:
    """What the next resume of SESSION_ID would feed back, as a diff against the stored history, and what
    the rewrite costs and saves in cache."""
    from flower.report.preview import build_preview, preview_json
    from flower.report.rundata import load_session
    from flower.report.terminal import print_preview
    from flower.stores.opening import close_store, open_store

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


@click.group(invoke_without_command=True, short_help="The sessions a store holds.")
@options.run_dir(default=None, help="As for `sessions list`.")
@options.store(help="As for `sessions list`.")
@options.workspace(default=None, help="As for `sessions list`.")
@options.json_output(help="As for `sessions list`.")
@click.pass_context
def sessions(ctx: click.Context, run_dir: str | None = None, store: str | None = None,
             workspace: str | None = None, as_json: bool = False) -> None:
    """The sessions a store holds: `list` (the default) or `show ID`."""
    if ctx.invoked_subcommand is None:
        given = {"run_dir": run_dir, "store": store, "workspace": workspace}
        defaults = (ctx.default_map or {}).get("list", {})  # the config file's values for `sessions list`
        ctx.invoke(sessions_list, **{**defaults, **{k: v for k, v in given.items() if v is not None}},
                   as_json=as_json)


@sessions.command("list")
@options.run_dir()
@options.store()
@options.workspace(help="Also list the sessions of this workspace's project.")
@options.json_output()
def sessions_list(run_dir: str = "runs", store: str | None = None, workspace: str = ".",
                  as_json: bool = False) -> None:
    """Every main session of the run dir's projects, oldest first."""
    from flower.report.rundata import session_rows
    from flower.report.terminal import print_sessions
    from flower.stores.opening import close_store, open_store

    base = open_store(store, Path(run_dir))
    try:
        rows = session_rows(base, Path(run_dir), Path(workspace).resolve())
    finally:
        close_store(base)
    if as_json:
        click.echo(json.dumps(rows, indent=1))
    else:
        print_sessions(Console(highlight=False), rows)


@sessions.command("show", short_help="One session: key, size, turns, context, subagents.")
@click.argument("session_id")
@options.run_dir()
@options.store()
@options.json_output()
def sessions_show(session_id: str, run_dir: str, store: str | None, as_json: bool) -> None:
    """One session: its key, size, turns, context, subagents and manifest steps."""
    from flower.report.rundata import load_session
    from flower.report.terminal import print_session
    from flower.stores.opening import close_store, open_store

    base = open_store(store, Path(run_dir))
    try:
        data = load_session(session_id, base, Path(run_dir))
    finally:
        close_store(base)
    info = _session_info(data)
    if as_json:
        click.echo(json.dumps(info, indent=1))
    else:
        print_session(Console(highlight=False), info)


def _session_info(data: RunData) -> dict[str, object]:
    from flower.report.analysis import analyze
    from flower.report.breakdown import worker_types
    from flower.report.rundata import first_prompt

    session_id = data.label  # the full id, when a prefix was given
    workers = worker_types(data)
    result = analyze(data.main, data.subagents, cost_usd=data.cost_usd)
    entries = data.main[session_id]
    return {
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


@click.command(short_help="A run's conversation as a person reads it.")
@click.argument("target", metavar="SESSION|RUN_DIR")
@options.json_output(help="Print the conversation as JSON.")
@click.option("--full", is_flag=True, help="Whole texts, briefs and replies (default: the first lines of each).")
@click.option("-n", "last", type=click.IntRange(min=1), default=None, metavar="N", help="Only the last N items.")
@options.run_dir()
@options.store()
def logs(target: str, as_json: bool, full: bool, last: int | None, run_dir: str, store: str | None) -> None:
    """A run's conversation as a person reads it: prompt, replies, dispatches, tool calls, handoffs."""
    from flower.report.logs import conversation, logs_json, render_logs
    from flower.report.rundata import load_target
    from flower.stores.opening import close_store

    base, data = load_target(target, store, run_dir)
    try:
        items = conversation(data)
    finally:
        close_store(base)
    if as_json:
        click.echo(logs_json(items[-last:] if last else items))
        return
    render_logs(Console(highlight=False), items, full=full, last=last)


@click.command(short_help="Each setting's value and where it comes from.")
@options.json_output(help="Print the settings as JSON.")
def config(as_json: bool) -> None:
    """Each setting's value and where it comes from: flag > env > config file > default."""
    import json

    from rich import box
    from rich.table import Table

    from flower.runtime.config import resolve_config

    resolved = resolve_config()
    rows, found = resolved.rows(), resolved.file
    if as_json:
        click.echo(json.dumps({"file": str(found) if found else None, "settings": rows,
                               "ignored": [item.to_dict() for item in resolved.ignored]}, indent=1, default=str))
        return
    console = Console(highlight=False)
    click.echo(f"config file: {found or 'none (flower.toml or [tool.flower] in pyproject.toml)'}")
    table = Table(show_edge=False, pad_edge=False, box=box.SIMPLE_HEAD)
    for column in ("setting", "value", "from"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(row["name"], "-" if row["value"] is None else str(row["value"]), row["source"])
    console.print(table)
    for item in resolved.ignored:
        click.echo(item.line())
