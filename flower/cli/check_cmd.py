"""`flower check TARGET`: a spec or a workflow checked without running it (issue #28 item 8).

It loads the target as `flower run` does, checks it (`flower.flow.check.problems`) and the settings (the config
file and the environment, `flower.runtime.config.config_problems`), and prints one line per problem and exits
1, or prints one `ok` line. It never starts a session or sends a request: it needs neither a key nor a network.
"""

from __future__ import annotations

import click

from flower.errors import FlowerError
from flower.util.oneline import first_line

__all__ = ["check"]


@click.command(short_help="Check a spec or workflow without running it.")
@click.argument("target")
def check(target: str) -> None:
    """Check TARGET (FILE.py:ATTR or module:attr: an AgentSpec, a Workflow, or a callable returning one)
    and the settings, without any model request: tool names against the bundled Claude Code CLI, workers,
    output types, the config file and FLOWER_* variables. One line per problem and exit status 1, or one
    ok line."""
    from flower.agent.spec import AgentSpec
    from flower.flow.check import problems, summary
    from flower.flow.workflow import Workflow
    from flower.runtime.config import config_problems, find_config
    from flower.util.loader import call, load_target

    found = config_problems()
    try:
        loaded, _ = load_target(target)
        if not isinstance(loaded, (AgentSpec, Workflow)) and callable(loaded):
            loaded = call(loaded, target, "a Workflow, an AgentSpec")
    except FlowerError as exc:
        loaded = None
        found.append(first_line(exc))
    value = loaded if isinstance(loaded, (AgentSpec, Workflow)) else None
    if value is not None:
        found += problems(value)
    elif loaded is not None:
        found.append(f"{target} is a {type(loaded).__name__}, not a Workflow or an AgentSpec "
                     "(or a callable returning one)")
    for line in found:
        click.echo(line)
    if found:
        click.echo(f"{target}: {len(found)} problem{'s' if len(found) != 1 else ''}")
        raise SystemExit(1)
    assert value is not None
    try:
        where = find_config()
    except FlowerError:  # reported above already
        where = None
    click.echo(f"{target}: ok ({summary(value)}; settings {'from ' + str(where[0]) if where else 'default'})")

