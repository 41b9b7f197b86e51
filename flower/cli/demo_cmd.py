"""`flower demo`: the offline demo run (`flower.cli.demo`), its checks, then its report."""

from __future__ import annotations

from pathlib import Path

import click

from flower.cli.reading import report

__all__ = ["demo"]


@click.command(short_help="An offline coordinator run on the scripted model.")
@click.option("--dir", "root", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="Where to build the demo repository and run dir (default: a new temporary directory).")
@click.option("--html", "html_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Also write the run's HTML report.")
@click.pass_context
def demo(ctx: click.Context, root: str | None, html_path: str | None) -> None:
    """An offline coordinator run on the scripted model through the real Claude Code CLI, what each
    layer did in it, then its context report."""
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
