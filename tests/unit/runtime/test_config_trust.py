"""A config file that came with the repository (inside the workspace) cannot choose where data goes or what
runs; one outside it (the user's own) can; a flag, a variable or FLOWER_TRUST_CONFIG=1 decide otherwise
(issue #30)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flower.runtime.config import SETTINGS, TRUST_ENV, UNTRUSTED, resolve_config

HOSTILE = 'run_dir = "/tmp/elsewhere"\nstore = "postgresql://evil:5432/x"\notlp = "http://127.0.0.1:9"\n' \
          'workspace = "/"\nspill_threshold = 777\n'


def _ws(tmp_path: Path) -> Path:
    ws = tmp_path / "repo"
    (ws / "sub").mkdir(parents=True)
    return ws


def test_a_file_inside_the_workspace_cannot_choose_where_data_goes(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    (ws / "flower.toml").write_text(HOSTILE)
    resolved = resolve_config({}, env={}, start=ws)
    assert resolved.config.run_dir == "runs" and resolved.store is None and resolved.config.otlp is None
    assert resolved.workspace == "." and resolved.sources["run_dir"] == "default"
    assert resolved.config.spill_threshold == 777  # it still tunes the runtime
    assert [i.name for i in resolved.ignored] == ["workspace", "run_dir", "store", "otlp"]
    line = resolved.ignored[1].line()
    assert line.startswith(f"ignored: run_dir from {ws / 'flower.toml'} (a file inside the workspace may not")
    assert "--run-dir or FLOWER_RUN_DIR" in line and "\n" not in line
    # the workspace named by a flag or FLOWER_WORKSPACE counts, from a subfolder too
    for flags, env in (({"workspace": str(ws)}, {}), ({}, {"FLOWER_WORKSPACE": str(ws)})):
        from_sub = resolve_config(flags, env=env, start=ws / "sub")
        assert from_sub.config.run_dir == "runs" and from_sub.config.otlp is None, (flags, env)
        assert from_sub.workspace == str(ws)


def test_pyproject_inside_the_workspace_is_untrusted_too(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    (ws / "pyproject.toml").write_text('[tool.flower]\notlp = "http://127.0.0.1:9"\n')
    resolved = resolve_config({"workspace": str(ws)}, env={}, start=ws / "sub")
    assert resolved.config.otlp is None and [i.name for i in resolved.ignored] == ["otlp"]


def test_a_file_outside_the_workspace_is_trusted(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    (tmp_path / "flower.toml").write_text('run_dir = "/tmp/mine"\notlp = "http://127.0.0.1:4318"\n')
    resolved = resolve_config({}, env={}, start=ws)
    assert resolved.config.run_dir == "/tmp/mine" and resolved.config.otlp == "http://127.0.0.1:4318"
    assert resolved.sources["run_dir"] == str(tmp_path / "flower.toml") and resolved.ignored == ()


def test_a_file_that_names_a_workspace_holding_it_is_inside(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    (tmp_path / "flower.toml").write_text(f'workspace = "{tmp_path}"\nrun_dir = "/tmp/elsewhere"\n')
    resolved = resolve_config({}, env={}, start=ws)
    assert resolved.config.run_dir == "runs" and resolved.workspace == "."
    assert {i.name for i in resolved.ignored} == {"workspace", "run_dir"}


def test_links_are_resolved_on_both_sides(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    outside = tmp_path / "outside.toml"
    outside.write_text('run_dir = "/tmp/elsewhere"\n')
    (ws / "flower.toml").symlink_to(outside)  # a committed link to a file outside is still found inside
    assert resolve_config({}, env={}, start=ws).config.run_dir == "runs"
    (ws / "flower.toml").unlink()
    (ws / "flower.toml").write_text('run_dir = "/tmp/elsewhere"\n')
    link = tmp_path / "link"
    link.symlink_to(ws)  # the workspace reached through a link is its real folder
    resolved = resolve_config({"workspace": str(link)}, env={}, start=link / "sub")
    assert resolved.config.run_dir == "runs" and [i.name for i in resolved.ignored] == ["run_dir"]
    # the file's own folder reached through a link still counts as the start folder
    assert resolve_config({}, env={}, start=link).config.run_dir == "runs"


def test_a_flag_or_variable_wins_and_the_switch_trusts_the_file(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    (ws / "flower.toml").write_text(HOSTILE)
    flagged = resolve_config({"run_dir": "/tmp/flag"}, env={"FLOWER_OTLP": "http://127.0.0.1:4318"}, start=ws)
    assert flagged.config.run_dir == "/tmp/flag" and flagged.sources["run_dir"] == "flag"
    assert flagged.config.otlp == "http://127.0.0.1:4318" and flagged.sources["otlp"] == "env FLOWER_OTLP"
    for value in ("1", "true"):
        trusted = resolve_config({}, env={TRUST_ENV: value}, start=ws)
        assert trusted.config.run_dir == "/tmp/elsewhere" and trusted.store == "postgresql://evil:5432/x"
        assert trusted.config.otlp == "http://127.0.0.1:9" and trusted.workspace == "/" and trusted.ignored == ()
    assert resolve_config({}, env={TRUST_ENV: "0"}, start=ws).config.run_dir == "runs"


@pytest.mark.parametrize("name", sorted(UNTRUSTED))
def test_every_guarded_setting_is_a_setting_with_a_variable(name: str) -> None:
    setting = {s.name: s for s in SETTINGS}[name]
    assert setting.env, name  # the ignored line names the variable that sets it


def test_a_checkouts_top_level_file_is_inside_from_a_subfolder(tmp_path: Path) -> None:
    """Starting in a subfolder of a cloned repository does not make its top-level flower.toml the user's."""
    ws = _ws(tmp_path)
    (ws / "flower.toml").write_text('run_dir = "/tmp/elsewhere"\n')
    assert resolve_config({}, env={}, start=ws / "sub").config.run_dir == "/tmp/elsewhere"  # no checkout: above
    (ws / ".git").mkdir()
    resolved = resolve_config({}, env={}, start=ws / "sub")
    assert resolved.config.run_dir == "runs" and [i.name for i in resolved.ignored] == ["run_dir"]
    (tmp_path / "flower.toml").write_text('run_dir = "/tmp/mine"\n')  # above the checkout: the user's own
    (ws / "flower.toml").unlink()
    assert resolve_config({}, env={}, start=ws / "sub").config.run_dir == "/tmp/mine"
