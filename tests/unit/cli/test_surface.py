"""The `flower` command surface checked against the real click tree (issue #25): docs/cli.md's reference names
every command and option the tree has and nothing it lacks; every --help reads well at 80 columns; the shared
options keep one environment variable everywhere; a wrong argument is one line; --model and --budget mean
what docs/cli.md says on an AgentSpec and on a Workflow.

`python -m tests.unit.cli.test_surface` prints the reference block docs/cli.md must hold."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from flower import AgentSpec, Step, Workflow
from flower.cli import cli, options

DOCS = Path(__file__).resolve().parents[3] / "docs" / "cli.md"
BEGIN, END = "<!-- reference: checked against the click tree by tests/unit/cli/test_surface.py -->", "<!-- /reference -->"


def invoke(*args: str, env: dict[str, str | None] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, terminal_width=80, catch_exceptions=False)


def tree(group: click.Group = cli, path: str = "flower") -> Iterator[tuple[str, click.Command]]:
    yield path, group
    ctx = click.Context(group, info_name=path)
    for name in group.list_commands(ctx):
        command = group.commands[name]
        if isinstance(command, click.Group):
            yield from tree(command, f"{path} {name}")
        else:
            yield f"{path} {name}", command


def _option(param: click.Option, ctx: click.Context) -> str:
    names = "/".join(sorted(param.opts + param.secondary_opts, key=lambda o: (o.startswith("--"), o)))
    shown = names if param.is_flag else f"{names} {param.make_metavar(ctx)}"
    env = f" (`{param.envvar}`)" if isinstance(param.envvar, str) else ""
    return f"`{shown}`{env}"


def reference() -> str:
    """The reference table: each command with its arguments, and its options in the order of its --help."""
    rows = ["| command | options |", "|---|---|"]
    for path, command in tree():
        ctx = click.Context(command, info_name=path)
        arguments = " ".join(p.make_metavar(ctx) for p in command.params if isinstance(p, click.Argument))
        opts = [_option(p, ctx) for p in command.params if isinstance(p, click.Option) and p.name != "help"]
        cells = (f"`{path} {arguments}`".replace(" `", "`"), ", ".join(opts) or "-")
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows)


def test_the_reference_in_docs_is_the_click_tree() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert BEGIN in text and END in text, f"docs/cli.md lost its reference markers {BEGIN} ... {END}"
    documented = text[text.index(BEGIN) + len(BEGIN):text.index(END)].strip()
    assert documented == reference(), "docs/cli.md's reference differs from the click tree; it should read:\n" + reference()


def test_every_command_is_described_in_the_docs_beyond_the_reference() -> None:
    text = DOCS.read_text(encoding="utf-8")
    prose = text[:text.index(BEGIN)] + text[text.index(END):]
    for path, _ in tree():
        assert f"`{path}" in prose, f"`{path}` has no description in docs/cli.md"


def test_every_help_reads_well_at_80_columns() -> None:
    for path, command in tree():
        result = invoke(*path.split()[1:], "--help")
        assert result.exit_code == 0 and result.stdout.startswith(f"Usage: {path} "), path
        wide = [line for line in result.stdout.splitlines() if len(line) > 80]
        assert not wide, f"{path} --help is wider than 80 columns: {wide}"
        if isinstance(command, click.Group):  # the listing of its commands is not cut short
            listing = result.stdout.split("Commands:", 1)[1]
            assert "..." not in listing, f"{path} --help cuts a command's description:{listing}"
        assert command.help and command.help.strip().endswith("."), f"{path} has no help text, or not a sentence"


OTHER_SETTING = {("flower go", "budget")}
"""Options spelled like a shared one that set another setting: `flower go --budget` caps the whole run, so
FLOWER_BUDGET (a per-query cap) must not reach it."""


def test_a_shared_option_has_one_environment_variable_everywhere() -> None:
    seen: dict[str, set[str | None]] = {}
    for path, command in tree():
        for param in command.params:
            if (path, param.name) in OTHER_SETTING:
                assert isinstance(param, click.Option) and param.envvar is None, f"{path} {param.opts}"
                continue
            if isinstance(param, click.Option) and param.name in options.ENV:
                assert param.envvar == options.ENV[param.name], f"{path} {param.opts}: env {param.envvar}"
                seen.setdefault(param.name, set()).add(path)  # type: ignore[arg-type]
    assert set(seen) == set(options.ENV), f"shared options no command uses: {set(options.ENV) - set(seen)}"
    settings = json.loads(invoke("config", "--json").stdout)["settings"]
    for row in settings:  # `flower config` reports the same variable for the same setting
        if row["name"] in options.ENV:
            assert row["env"] == options.ENV[row["name"]], row


def test_runs_honours_flower_run_dir(tmp_path: Path) -> None:
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    result = invoke("runs", env={"FLOWER_RUN_DIR": str(empty)})
    assert result.exit_code == 0 and f"no workflow runs in {empty}" in result.stdout, result.output


@pytest.mark.parametrize(("args", "needle"), [
    (["run", "--modle", "x", "t.py:a"], "No such option '--modle'"),
    (["bogus"], "No such command 'bogus'"),
    (["once", "hi", "--permission-mode", "yolo"], "'yolo' is not one of"),
    (["sessions", "show"], "Missing argument 'SESSION_ID'"),
    (["report", "runs", "--window", "0"], "0 is not in the range"),
])
def test_a_usage_error_is_one_line_naming_the_help(args: list[str], needle: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("flower: ") and needle in lines[0], result.stderr
    assert lines[0].endswith("--help)") and "Usage:" not in result.output


@pytest.mark.parametrize("args", [["run", "t.py:a", "--budget", "0"], ["run", "t.py:a", "--budget", "nan"],
                                  ["once", "hi", "--budget", "-1"], ["go", "--budget", "0", "x"],
                                  ["run", "t.py:a", "--otlp", "ftp://collector"]])
def test_bad_values_of_shared_options_are_refused_before_anything_runs(args: list[str], tmp_path: Path) -> None:
    result = invoke(*args, env={"ANTHROPIC_API_KEY": "k"})
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("flower: --"), result.stderr


# --- what --model and --budget do to a target ------------------------------------------------------------

SPEC = AgentSpec(name="lead", instructions="i")
CAPPED = AgentSpec(name="capped", instructions="i", max_budget_usd=0.5, model="claude-haiku-4-5")


def test_an_agent_spec_target_runs_on_the_model_named_on_the_command_line() -> None:
    from dataclasses import replace

    from flower.cli.flowrun import _flagged

    assert _flagged(CAPPED, "t.py:capped", model="m") == replace(CAPPED, model="m")  # over the spec's own
    assert _flagged(CAPPED, "t.py:capped", model=None) is CAPPED
    assert _flagged(lambda: SPEC, "t.py:make", model="m") == replace(SPEC, model="m")  # a factory is called first
    assert (CAPPED.model, SPEC.model) == ("claude-haiku-4-5", None)  # never changed
    flow = Workflow([Step("a", CAPPED, "x")], name="f")
    assert _flagged(flow, "t.py:flow", model="m") is flow  # its steps get the model from the runtime's config


def test_the_runtime_of_a_run_carries_model_and_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a workflow records and a fleet worker inherits: the flags, else FLOWER_MODEL / FLOWER_BUDGET."""
    from flower.cli.flowrun import _runtime

    monkeypatch.chdir(tmp_path)  # no config file of the checkout
    monkeypatch.setenv("FLOWER_MODEL", "env-model")
    monkeypatch.setenv("FLOWER_BUDGET", "0.5")
    flagged = _runtime(str(tmp_path), str(tmp_path / "runs"), None, model="m", budget=2.0)
    assert (flagged.config.model, flagged.config.budget) == ("m", 2.0)
    assert flagged.config.apply(CAPPED) == CAPPED and flagged.config.apply(SPEC).model == "m"
    plain = _runtime(str(tmp_path), str(tmp_path / "runs"), None)
    assert (plain.config.model, plain.config.budget) == ("env-model", 0.5)


if __name__ == "__main__":
    print(BEGIN, reference(), END, sep="\n")
