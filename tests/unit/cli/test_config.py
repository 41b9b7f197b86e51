"""Settings: flag > env > config file > default, shown by `flower config` (issue #18)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flower.cli.config import ENVIRONMENT, SETTINGS
from tests.support.cli import REPO, assert_one_line_error, invoke


def settings(env: dict[str, str | None] | None = None) -> dict[str, dict[str, object]]:
    result = invoke("config", "--json", env=env)
    assert result.exit_code == 0, result.output
    return {row["name"]: row for row in json.loads(result.stdout)["settings"]}


def test_precedence_flag_env_file_default(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        f'[project]\nname = "x"\n[tool.flower]\nrun_dir = "{run_dir}"\nspill_threshold = 9000\n')
    monkeypatch.chdir(project / "sub")  # found in the nearest parent
    rows = settings(env={"FLOWER_RUN_DIR": None, "FLOWER_SPILL_THRESHOLD": None})
    assert rows["run_dir"]["value"] == str(run_dir) and rows["run_dir"]["source"] == str(project / "pyproject.toml")
    assert rows["spill_threshold"]["value"] == 9000 and rows["trim"]["source"] == "default"
    # the file feeds the commands: no -r needed
    listed = json.loads(invoke("sessions", "list", "--json", env={"FLOWER_RUN_DIR": None}).stdout)
    assert len(listed) == 2
    # env beats the file
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {"FLOWER_RUN_DIR": str(empty), "FLOWER_SPILL_THRESHOLD": "123"}
    rows = settings(env=env)
    assert rows["run_dir"]["source"] == "env FLOWER_RUN_DIR" and rows["spill_threshold"]["value"] == 123
    assert_one_line_error(invoke("sessions", "list", env=env), str(empty / "sessions.db"))
    # a flag beats both
    assert len(json.loads(invoke("sessions", "list", "-r", str(run_dir), "--json", env=env).stdout)) == 2
    # flower.toml wins over pyproject.toml in the same folder
    (project / "sub" / "flower.toml").write_text('model = "claude-haiku-4-5"\n')
    rows = settings(env={"FLOWER_MODEL": None})
    assert rows["model"]["value"] == "claude-haiku-4-5" and rows["run_dir"]["source"] == "default"
    shown = invoke("config", env={"FLOWER_MODEL": None}).stdout
    assert "claude-haiku-4-5" in shown and str(project / "sub" / "flower.toml") in shown


def test_a_bad_config_file_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "flower.toml").write_text("spill_threshold = \"big\"\n")
    assert_one_line_error(invoke("config"), "flower.toml: spill_threshold must be a whole number")
    (tmp_path / "flower.toml").write_text("colour = 1\n")
    assert_one_line_error(invoke("sessions"), "unknown flower setting 'colour'")
    (tmp_path / "flower.toml").write_text("run_dir = [\n")
    assert_one_line_error(invoke("config"), "is not valid TOML")


def test_every_environment_variable_is_documented() -> None:
    docs = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    for name, _ in ENVIRONMENT:
        assert f"`{name}`" in docs, name
    for s in SETTINGS:
        assert f"`{s.name}`" in docs, s.name
    assert "_FLOWER_COMPLETE" in docs  # shell completion


def test_the_handoff_threshold_setting_reaches_the_runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`handoff_at` in flower.toml (or FLOWER_HANDOFF_AT) becomes HandoffPolicy(at=) for run and once."""
    from dataclasses import replace

    from flower.runtime.config import resolve_config

    (tmp_path / "flower.toml").write_text("handoff_at = 35000\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLOWER_HANDOFF_AT", raising=False)
    rows = settings(env={"FLOWER_HANDOFF_AT": None})
    assert rows["handoff_at"]["value"] == 35000 and rows["handoff_at"]["source"] == str(tmp_path / "flower.toml")
    policy = replace(resolve_config({}, env={}).config, window=200_000).handoff_policy()
    assert policy is not None and policy.threshold() == 35_000
    env_rows = settings(env={"FLOWER_HANDOFF_AT": "30k"})
    assert env_rows["handoff_at"]["source"] == "env FLOWER_HANDOFF_AT"
    (tmp_path / "flower.toml").write_text('handoff_at = "soon"\n')
    assert_one_line_error(invoke("config", env={"FLOWER_HANDOFF_AT": None}), "handoff_at")


def test_a_config_file_inside_the_workspace_shows_what_it_may_not_set(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`flower config` names each ignored setting with why, in text and JSON; the commands do not use it."""
    ws = tmp_path / "repo"
    ws.mkdir()
    (ws / "flower.toml").write_text(f'run_dir = "{run_dir}"\notlp = "http://127.0.0.1:9"\nspill_threshold = 9\n')
    monkeypatch.chdir(ws)
    env: dict[str, str | None] = {"FLOWER_RUN_DIR": None, "FLOWER_OTLP": None, "FLOWER_TRUST_CONFIG": None}
    result = invoke("config", "--json", env=env)
    data = json.loads(result.stdout)
    rows = {row["name"]: row for row in data["settings"]}
    assert rows["run_dir"]["source"] == "default" and rows["otlp"]["value"] is None
    assert rows["spill_threshold"]["value"] == 9  # the rest of the file still counts
    assert [(i["name"], i["file"]) for i in data["ignored"]] == [("run_dir", str(ws / "flower.toml")),
                                                                  ("otlp", str(ws / "flower.toml"))]
    assert "may not choose" in data["ignored"][0]["reason"] and "FLOWER_RUN_DIR" in data["ignored"][0]["reason"]
    lines = [line for line in invoke("config", env=env).stdout.splitlines() if line.startswith("ignored: ")]
    assert lines == [i["line"] for i in data["ignored"]]
    assert_one_line_error(invoke("sessions", "list", env=env), "no session store at runs/sessions.db")  # not run_dir
    trusted = json.loads(invoke("config", "--json", env={**env, "FLOWER_TRUST_CONFIG": "1"}).stdout)
    assert trusted["ignored"] == [] and {r["name"]: r for r in trusted["settings"]}["run_dir"]["value"] == str(run_dir)
    assert len(json.loads(invoke("sessions", "list", "--json", env={**env, "FLOWER_TRUST_CONFIG": "1"}).stdout)) == 2
