"""`flower rewind RUN [--to MESSAGE|STEP]`: the points a run can be rewound to, or a rewind to one of them
(`flower.runtime.rewind`).

Invariant: without `--to` it only reads; with it, the original sessions are never changed (the fork is a
new session) and bad input is one line before anything is written.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click
from rich.console import Console
from rich.text import Text

from flower.cli import options

__all__ = ["rewind"]


@click.command(short_help="Fork a run at a message and put its files back.")
@click.argument("target", metavar="RUN_DIR|SESSION")
@click.option("--to", "to", default=None, metavar="MESSAGE|STEP",
              help="A message number or uuid (as listed without --to), or a step name (its start).")
@options.json_output(help="Print the points (or what the rewind did) as JSON.")
@options.run_dir()
@options.store()
def rewind(target: str, to: str | None, as_json: bool, run_dir: str, store: str | None) -> None:
    """Without --to: list the messages the run can be rewound to. With --to: fork the session at that
    message into a new session (the original is never changed) and put back the files the agents
    (workers too) changed after it. Continue the fork with `flower run SPEC -c` or `--resume SESSION`."""
    import anyio

    from flower.report.rundata import load_target
    from flower.report.text import fit, sanitize
    from flower.runtime.rewind import points
    from flower.runtime.rewind import rewind as do_rewind
    from flower.stores.opening import close_store, open_store

    base, data = load_target(target, store, run_dir)
    close_store(base)
    found = points(data.main, data.steps)
    if to is None:
        if as_json:
            click.echo(json.dumps([asdict(p) for p in found], indent=1, ensure_ascii=False))
            return
        console = Console(highlight=False)
        width, session = max(40, console.width), None
        for p in found:
            if p.session != session:
                session = p.session
                head = f"== session {p.session}" + (f" | step {p.step}" if p.step else "")
                console.print(Text(fit(head, width), style="bold"), no_wrap=True, markup=False)
            line = f"{p.index:>4}  {p.time[11:19]}  {p.who}: {sanitize(p.text)}"
            console.print(Text(fit(line, width)), no_wrap=True, overflow="crop", markup=False)
        return
    where = data.run_dir or Path(run_dir)
    writer = open_store(store, where, create=True)
    try:
        done = anyio.run(lambda: do_rewind(where, writer, data.keys, data.main, to, steps=data.steps,
                                           workspace=data.workspace, workbench=data.workbench_root))
    finally:
        close_store(writer)
    if as_json:
        click.echo(json.dumps({"point": asdict(done.point), "session_id": done.session,
                               "files": [asdict(f) for f in done.files]}, indent=1, ensure_ascii=False))
        return
    p = done.point
    click.echo(f"rewound to #{p.index} ({p.time[11:19]} {p.who}: {fit(sanitize(p.text), 50)})")
    click.echo(f"fork: {done.session} (session {p.session[:8]} unchanged)")
    for f in done.files:
        click.echo(f"{f.action} {f.path}" + (" (outside the workspace)" if f.action == "skipped" else ""))
    if not done.files:
        click.echo("no file had changed after it")
    click.echo(f"continue: flower run SPEC --resume {done.session}" + (f" -r {where}" if where != Path("runs") else ""))
