"""`flower init [DIR]`: a project that runs offline at once (issue #28 item 8).

It writes three files and nothing else: `flow.py` (a coordinator with two workers and a two-step workflow),
`flower.toml` (every setting of `flower.runtime.config.SETTINGS`, commented out, with its variable and what it
does), and `scripted.py` (a scripted model for that workflow, for `flower testing serve`). A file that exists
is never overwritten: the command refuses in one line naming it, before writing any.
"""

from __future__ import annotations

from pathlib import Path

import click

from flower.errors import ConfigError
from flower.runtime.config import SETTINGS

__all__ = ["init"]

FLOW = '''\
"""A coordinator with two workers, run as a two-step workflow: `flower run flow.py:wf`."""

from flower import Step, Workflow
from flower.agent.roles import coordinator, worker

workers = {
    "reader": worker("reads files and reports what they say", "You read files and report briefly.",
                     tools=["Read", "Grep", "Glob"]),
    "writer": worker("writes and edits files", "You write the file you are asked for and say where it is.",
                     tools=["Read", "Write", "Edit"]),
}
lead = coordinator("lead", "Goal: keep NOTES.md a short, true summary of this folder.", workers)

wf = Workflow([
    Step("survey", lead, "Survey this folder: what is in it?"),
    Step("notes", lead, "Write NOTES.md from the survey.", resume_from="survey"),
], name="starter")
'''

SCRIPTED = '''\
"""A scripted model for flow.py: `flower testing serve scripted.py --until-done > env.sh &`, `. ./env.sh`,
then `flower run flow.py:wf` runs offline. Each Agent call's prompt carries a marker; the worker whose first
request holds it follows the script under that marker (docs/testing.md)."""

from pathlib import Path

from flower.testing import text, tool_use

HERE = Path.cwd()  # serve it from this folder, where `flower run` works too


def agent(kind, marker, task):
    return tool_use("Agent", {"description": task, "subagent_type": kind, "prompt": f"{marker}: {task}",
                              "run_in_background": False})


main = [
    # step 1, survey: the lead dispatches the reader
    agent("reader", "SURVEY-TASK", "list the files of this folder and say what each is for"),
    text("The folder holds flow.py (the workflow), flower.toml (settings) and scripted.py (this model)."),
    # step 2, notes: the same session goes on and dispatches the writer
    agent("writer", "NOTES-TASK", "write NOTES.md: one line per file, from the survey"),
    text("NOTES.md written by the writer: one line per file."),
]
subagents = {
    "SURVEY-TASK": [tool_use("Glob", {"pattern": "*"}), text("flow.py, flower.toml, scripted.py")],
    "NOTES-TASK": [
        tool_use("Write", {"file_path": str(HERE / "NOTES.md"),
                           "content": "- flow.py: the workflow\\n- flower.toml: settings\\n- scripted.py: a scripted model\\n"}),
        text("Wrote NOTES.md."),
    ],
}
'''


def toml_text() -> str:
    """`flower.toml` with every setting commented out: its variable and what it does."""
    lines = ["# flower's settings for this folder; a flag or variable wins over this file (`flower config` shows",
             "# each value and where it comes from). Uncomment to set.", ""]
    for setting in SETTINGS:
        example = {bool: "false", int: "0", float: "0.0"}.get(setting.kind, '""')
        lines += [f"# {setting.help} ({setting.env})" if setting.env else f"# {setting.help}",
                  f"# {setting.name} = {example}", ""]
    return "\n".join(lines)


def _files(folder: Path) -> dict[Path, str]:
    return {folder / "flow.py": FLOW, folder / "flower.toml": toml_text(), folder / "scripted.py": SCRIPTED}


@click.command(short_help="Start a project that runs offline at once.")
@click.argument("folder", default=".", type=click.Path(file_okay=False, path_type=Path))
def init(folder: Path) -> None:
    """Write flow.py (a coordinator, two workers, a two-step workflow), flower.toml (every setting, commented)
    and scripted.py (a scripted model for them) into FOLDER; an existing file is never overwritten."""
    files = _files(folder)
    taken = [path for path in files if path.exists() or path.is_symlink()]
    if taken:
        raise ConfigError(f"{taken[0]} exists; flower init writes only new files (move it, or pick another folder)")
    folder.mkdir(parents=True, exist_ok=True)
    for path, body in files.items():
        with open(path, "x", encoding="utf-8") as out:  # "x": never through a link or over a file made meanwhile
            out.write(body)
    click.echo(f"wrote {', '.join(p.name for p in files)} in {folder}")
    click.echo("run it offline:")
    click.echo(f"  cd {folder} && flower testing serve scripted.py --until-done > env.sh &")
    click.echo("  . ./env.sh && flower run flow.py:wf")
