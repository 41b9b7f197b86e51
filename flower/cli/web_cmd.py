"""`flower web`: the local web app that watches and steers every run of a run dir or store (`flower.web`)."""

from __future__ import annotations

import click

from flower.cli import options
from flower.cli.human import schema_option

__all__ = ["web"]


@click.command(short_help="Watch and steer every run from a browser, live.")
@click.argument("run_dir", metavar="[RUN_DIR]", required=False, default="runs", type=click.Path(file_okay=False))
@options.store(metavar="DSN", help="A fleet's PostgreSQL store (sessions, runs, mailbox); RUN_DIR may then be "
               "left out.")
@schema_option
@click.option("--port", type=click.IntRange(0, 65535), default=8420, show_default=True, metavar="N",
              help="The port to listen on (0: any free one; the address is printed).")
@click.option("--host", default="127.0.0.1", show_default=True, metavar="HOST",
              help="The address to bind; anything but a loopback address needs --token.")
@click.option("--token", envvar="FLOWER_WEB_TOKEN", show_envvar=True, default=None, metavar="TOKEN",
              help="A secret every request must carry (the printed address holds it).")
def web(run_dir: str, store: str | None, schema: str, port: int, host: str, token: str | None) -> None:
    """Serve a web app (on 127.0.0.1 by default) showing every run of RUN_DIR (default: runs) or of the
    --store: the runs list, each run's steps, context curve, cost and log, live; and answer questions,
    mail the inbox or cancel a run from it."""
    from flower.web import Source, serve
    from flower.web.guard import check_bind

    check_bind(host, token)  # the bind rule before anything is read
    serve(Source.checked(run_dir, store, schema=schema), host=host, port=port, token=token,
          say=lambda line: click.echo(line, err=True))
