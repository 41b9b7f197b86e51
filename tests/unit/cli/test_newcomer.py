"""Small things a newcomer hit (issue #18), on stored runs without a model."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from flower.util.rundir import make_run_dir
from tests.support.cli import GLANCE_ID, REPO, assert_one_line_error, invoke


def test_report_of_a_missing_name_blames_the_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert_one_line_error(invoke("report", "nosuchdir"), "nosuchdir is neither a run dir nor a session",
                          "no directory nosuchdir")


def test_preview_gives_one_chars_saved_figure(run_dir: Path) -> None:
    out = invoke("preview", GLANCE_ID, "-r", str(run_dir)).stdout
    figures = set(re.findall(r"([\d,]+) chars saved", out))
    assert len(figures) == 1, out
    assert re.search(r"the rewrite breaks\s+even\s+after\s+\d+\s+requests", out)


def test_a_new_run_dir_ignores_itself_and_an_existing_one_is_left_alone(tmp_path: Path) -> None:
    made = make_run_dir(tmp_path / "a" / "runs")
    assert (made / ".gitignore").read_text().splitlines()[-1] == "*"
    existing = tmp_path / "mine"
    existing.mkdir()
    make_run_dir(existing)
    assert not (existing / ".gitignore").exists()


def test_the_licence_is_an_spdx_string() -> None:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"
    assert not any(c.startswith("License ::") for c in project.get("classifiers", []))
