"""`flower testing serve SCRIPT.py`: the scripted fake Messages API as a server (B-15).

SCRIPT.py is plain Python that builds the script with `flower.testing`'s constructors and names it:

    from flower.testing import text, tool_use
    main = [tool_use("Bash", {"command": "echo hi"}), text("said hi")]
    subagents = {"JOB-1": [text("report")]}      # optional
    handler = None                                # optional: handler(request) -> Step | None

(`script` is accepted for `main`.) The command starts the server on 127.0.0.1, prints the environment to
export (`export NAME=value` lines on stdout, ready for `eval`), and serves until Ctrl-C, or with
`--until-done` until every scripted step was used. Then it prints what was served and exits 1 if the script
was violated, exhausted or not used up.

Invariant: the printed environment points the Claude Code CLI at the server and a throwaway config dir,
and never changes HOME or the proxy of the shell that evaluates it (only NO_PROXY gains 127.0.0.1).
"""

from __future__ import annotations

import shlex
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from flower.errors import ConfigError

if TYPE_CHECKING:
    from flower.testing import ScriptedAPI

__all__ = ["serve_env", "testing"]

_KEEP = ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "CLAUDE_CONFIG_DIR", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
         "DISABLE_AUTOUPDATER", "DISABLE_TELEMETRY", "DISABLE_ERROR_REPORTING", "NO_PROXY")


def serve_env(api: ScriptedAPI, home: Path) -> dict[str, str]:
    """The variables a shell should export to use `api` (no HOME, no proxy change)."""
    env = api.cli_env(home)
    return {name: env[name] for name in _KEEP if name in env}


def _load(path: Path, port: int = 0) -> ScriptedAPI:
    from flower.testing import ScriptedAPI
    from flower.util.loader import import_file as _import_file

    module = _import_file(path)
    main = getattr(module, "main", None)
    main = getattr(module, "script", None) if main is None or callable(main) else main
    subagents = getattr(module, "subagents", None)
    handler = getattr(module, "handler", None)
    if main is None and handler is None:
        raise ConfigError(f"{path} defines neither `main` (a list of steps) nor `handler`")
    try:
        return ScriptedAPI(list(main or []), subagents, handler=handler, port=port)
    except TypeError as exc:
        raise ConfigError(f"{path}: not a script ({exc})") from None


@click.group()
def testing() -> None:
    """Offline tools: the scripted fake Messages API."""


@testing.command(short_help="Serve a scripted model; print the environment to use it.")
@click.argument("script_file", metavar="SCRIPT.py", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--port", type=click.IntRange(0, 65535), default=0, metavar="PORT", help="Port on 127.0.0.1 (default: any free one).")
@click.option("--home", type=click.Path(file_okay=False, path_type=Path), default=None, metavar="DIR",
              help="The CLI's config dir parent (default: a new temporary directory).")
@click.option("--until-done", is_flag=True, help="Stop once every scripted step has been used.")
def serve(script_file: Path, port: int, home: Path | None, until_done: bool) -> None:
    """Serve SCRIPT.py's scripted model and print the environment that points any CLI or SDK program at it."""
    api = _load(script_file, port).start()
    home = home or Path(tempfile.mkdtemp(prefix="flower-serve-"))
    for name, value in serve_env(api, home).items():
        click.echo(f"export {name}={shlex.quote(value)}")
    sys.stdout.flush()  # the exports must reach a pipe before the server blocks
    click.echo(f"# flower testing: serving {script_file} on {api.base_url}; Ctrl-C stops", err=True)
    stop = threading.Event()
    try:
        while not stop.wait(0.1):
            if until_done and api.requests and not api.remaining():
                time.sleep(0.5)  # let the last answer finish streaming
                break
    except KeyboardInterrupt:
        pass
    finally:
        api.stop()
    problems = api.failures + [f"{n} step(s) never used in thread {t}" for t, n in api.remaining().items()]
    click.echo(f"# served {len(api.requests)} requests" + (f"; {'; '.join(problems)}" if problems else ""),
               err=True)
    if problems:
        raise SystemExit(1)
