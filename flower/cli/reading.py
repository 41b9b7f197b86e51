"""`flower logs` (read a run's conversation back) and `flower config` (issue #18).

Defined apart from `flower.cli.commands` (which registers it), so the command modules stay small.
"""

from __future__ import annotations

import os

import click
from rich.console import Console

__all__ = ["config", "logs"]


@click.command()
@click.argument("target", metavar="SESSION|RUN_DIR")
@click.option("--json", "as_json", is_flag=True, help="Print the conversation as JSON.")
@click.option("--full", is_flag=True, help="Whole texts, briefs and replies (default: the first lines of each).")
@click.option("-n", "last", type=click.IntRange(min=1), default=None, metavar="N", help="Only the last N items.")
@click.option("--run-dir", "-r", default="runs", show_default=True, type=click.Path(file_okay=False),
              help="Where the manifest and sessions.db live.")
@click.option("--store", envvar="FLOWER_STORE", default=None, metavar="DSN|PATH",
              help="Session store: a postgresql:// DSN or a SQLite file (default <run-dir>/sessions.db; "
              "env FLOWER_STORE).")
def logs(target: str, as_json: bool, full: bool, last: int | None, run_dir: str, store: str | None) -> None:
    """A run's conversation as a person reads it: prompt, replies, dispatches, tool calls, handoffs."""
    from flower.report.logs import conversation, logs_json, render_logs
    from flower.report.rundata import close_store, load_target

    base, data = load_target(target, store or os.environ.get("FLOWER_STORE") or None, run_dir)
    try:
        items = conversation(data)
    finally:
        close_store(base)
    if as_json:
        click.echo(logs_json(items[-last:] if last else items))
        return
    render_logs(Console(highlight=False), items, full=full, last=last)




@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the settings as JSON.")
def config(as_json: bool) -> None:
    """Each setting's value and where it comes from: flag > env > config file > default."""
    import json

    from rich import box
    from rich.table import Table

    from flower.runtime.config import resolve_config

    resolved = resolve_config()
    rows, found = resolved.rows(), resolved.file
    if as_json:
        click.echo(json.dumps({"file": str(found) if found else None, "settings": rows}, indent=1, default=str))
        return
    console = Console(highlight=False)
    click.echo(f"config file: {found or 'none (flower.toml or [tool.flower] in pyproject.toml)'}")
    table = Table(show_edge=False, pad_edge=False, box=box.SIMPLE_HEAD)
    for column in ("setting", "value", "from"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(row["name"], "-" if row["value"] is None else str(row["value"]), row["source"])
    console.print(table)
