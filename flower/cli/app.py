"""The `flower` group: one explicit list of its commands, and the one place errors become one line.

Invariants:
- A user error is one line on stderr (`flower: ...`) and exit status 1, never a traceback: every
  `FlowerError`, every expected OS error (missing file, permission, ...) and a full disk under any library's
  error is caught in `FlowerGroup`.
- A usage error (an unknown option, a bad value for a choice) is one line too, naming the command's
  `--help`, with click's exit status 2.
- `flower --help` lists the commands in the order of `COMMANDS`, grouped by what they are for.
- Importing this module registers nothing anywhere: the group is built from the list below.
"""

from __future__ import annotations

import os
import sys
from typing import IO, Any

import click

from flower.cli.check_cmd import check
from flower.cli.demo_cmd import demo
from flower.cli.flowrun import cancel, once, resume, run, runs, worker
from flower.cli.go import go
from flower.cli.human import answer, asks, handoff, say
from flower.cli.init_cmd import init
from flower.cli.reading import config, logs, preview, report, sessions
from flower.cli.rewind_cmd import rewind
from flower.cli.testing_cmd import testing
from flower.cli.web_cmd import web
from flower.errors import FlowerError
from flower.util.oneline import disk_full, first_line

__all__ = ["COMMANDS", "cli", "main"]

COMMANDS: tuple[click.Command, ...] = (
    go, run, once,                        # running agents
    report, preview, sessions, logs,      # reading a run back
    rewind,                               # going back in a run
    runs, resume, cancel, worker,         # durable workflow runs
    asks, answer, say, handoff, web,      # talking to a running agent
    config, init, check, testing, demo,   # settings, offline tools
)
"""Every command of `flower`, in the order `flower --help` lists them."""


_RUNNING = frozenset({"run", "once", "go", "resume", "worker"})
"""The commands that run agents: they say on stderr which config file settings they ignored."""


class UserError(click.ClickException):
    """One line on stderr, exit status 1."""

    exit_code = 1

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"flower: {self.format_message()}", err=True)


class OneLineUsage(click.UsageError):
    """click's usage error as one line that says where the help is, exit status 2."""

    def show(self, file: IO[Any] | None = None) -> None:
        where = self.ctx.command_path if self.ctx is not None else "flower"
        click.echo(f"flower: {self.format_message()} (see {where} --help)", err=True)


def _one_line(exc: click.UsageError) -> click.UsageError:
    if isinstance(exc, (OneLineUsage, click.exceptions.NoArgsIsHelpError)):
        return exc  # already one line, or a bare `flower` asking for the help
    return OneLineUsage(exc.format_message(), exc.ctx)


def _os_message(exc: OSError) -> str:
    what = exc.strerror or type(exc).__name__
    return f"{what}: {exc.filename}" if exc.filename else str(exc).splitlines()[0] if str(exc) else what


class FlowerGroup(click.Group):
    """Turns flower's own errors, expected OS errors and usage errors into one line."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)  # the order of COMMANDS, not the alphabet

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:
            raise _one_line(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise _one_line(exc) from None
        except BrokenPipeError:
            # The reader went away (`flower report | head`): stop quietly, like any Unix filter.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise SystemExit(1) from None
        except FlowerError as exc:
            raise UserError(disk_full(exc) or first_line(exc)) from None
        except OSError as exc:
            raise UserError(disk_full(exc) or _os_message(exc)) from None
        except Exception as exc:
            full = disk_full(exc)  # a full disk under a library's own error (DBOS's SQLAlchemy, SQLite)
            if full is None:
                raise
            raise UserError(full) from None


@click.group("flower", cls=FlowerGroup, commands=COMMANDS)
@click.version_option(package_name="flower-runtime")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """flower: long Claude agent runs with a clean coordinator context."""
    from flower.cli.config import default_map, trusted_config

    # flag > env > config file (flower.toml or [tool.flower]) > default: click's default_map sits below both.
    # A file inside the workspace does not feed the settings that choose where data goes.
    try:
        _, values, ignored = trusted_config()
    except FlowerError:
        if ctx.resilient_parsing or "--help" in sys.argv[1:] or ctx.invoked_subcommand == "check":
            return  # help, shell completion and `flower check` (which reports it) work beside a broken config file
        raise
    ctx.default_map = {**default_map(values), **(ctx.default_map or {})}
    if ctx.invoked_subcommand in _RUNNING and not ctx.resilient_parsing and "--help" not in sys.argv[1:]:
        for item in ignored:
            click.echo(f"flower: {item.line()}", err=True)


def main() -> None:
    cli(prog_name="flower")
