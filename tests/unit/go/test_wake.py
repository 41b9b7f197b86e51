"""The wake decision of `flower go` (flower.go.wake): wake the interrupted run, start fresh, or refuse."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from flower.errors import ConfigError
from flower.flow.runs import RunRow
from flower.go.flow import GoOptions
from flower.go.wake import (
    STATE,
    Wake,
    archive,
    banner,
    decide,
    plan,
    read_state,
    record,
    refuse_live,
    shape,
    start_over,
)

FLAGS = shape(GoOptions())
BRIEF = ("## Goal\nThe importer reads quoted newlines.\n## Acceptance criteria\n- impl.txt says two\n"
         "## Bounds\nNothing else changes.\n## Unknowns and assumptions\nnone\n")


def _row(run_id: str, state: str) -> RunRow:
    return RunRow(run_id=run_id, workflow="go", state=state, done=1, total=4, cost_usd=0.0, workspace="/ws",
                  started="2026-12-04T00:00:00")


def test_shape_is_the_step_shaping_flags_only() -> None:
    flags = shape(GoOptions(rounds=5, isolate=True, model="opus", budget=2.0))
    assert flags == {"rounds": 5, "no_goal": False, "clarify_only": False, "isolate": True, "judge_can_run": False}


def test_nothing_before_is_a_fresh_run(tmp_path: Path) -> None:
    assert decide([], {}, FLAGS, text="do it", brief=tmp_path / "brief.md") is None


def test_the_last_interrupted_run_is_woken_with_its_first_request(tmp_path: Path) -> None:
    history = [_row("r1", "interrupted"), _row("r2", "interrupted"), _row("r3", "cancelled")]
    state = {"request": "the first sentence", "wakes": 2, "options": FLAGS}
    assert decide(history, state, FLAGS, text="more", brief=tmp_path / "brief.md") == Wake("r2", 3, "the first sentence")


def test_a_wake_without_state_counts_from_one_and_takes_the_new_text(tmp_path: Path) -> None:
    history = [_row("r1", "interrupted")]
    assert decide(history, {"wakes": "x"}, FLAGS, text="now", brief=tmp_path / "b.md") == Wake("r1", 1, "now")


def test_other_flags_refuse_the_wake(tmp_path: Path) -> None:
    state = {"request": "x", "wakes": 0, "options": {**FLAGS, "rounds": 9}}
    with pytest.raises(ConfigError, match="run r1 was started with other flags .*--new"):
        decide([_row("r1", "interrupted")], state, FLAGS, text="", brief=tmp_path / "brief.md")


def test_an_ended_run_with_its_brief_on_disk_refuses_and_says_how_to_start_over(tmp_path: Path) -> None:
    brief = tmp_path / "brief.md"
    brief.write_text(BRIEF)
    history = [_row("r1", "succeeded")]
    with pytest.raises(ConfigError, match=r'the last run \(r1\) succeeded; .* start over with --new "again"$'):
        decide(history, {}, FLAGS, text="again", brief=brief)
    with pytest.raises(ConfigError, match='--new "what to do"$'):
        decide(history, {}, FLAGS, text="", brief=brief)
    brief.unlink()
    assert decide(history, {}, FLAGS, text="again", brief=brief) is None  # no brief left: a fresh run


def test_a_live_run_refuses_and_names_the_commands_that_reach_it(tmp_path: Path) -> None:
    refuse_live([_row("r1", "interrupted")], tmp_path)
    with pytest.raises(ConfigError, match=f"run r2 is running in another process; .*flower say {tmp_path} TEXT"):
        refuse_live([_row("r1", "running"), _row("r2", "running")], tmp_path)


def test_state_is_recorded_and_read_back(tmp_path: Path) -> None:
    assert read_state(tmp_path) == {}
    record(tmp_path, Path("/ws"), FLAGS, None, "the request")
    assert read_state(tmp_path) == {"request": "the request", "wakes": 0, "workspace": "/ws", "options": FLAGS}
    record(tmp_path, Path("/ws"), FLAGS, Wake("r1", 2, "the request"), "the request")
    assert read_state(tmp_path)["wakes"] == 2


@pytest.mark.parametrize("content", ["not json", "[1, 2]", ""])
def test_a_damaged_state_reads_as_none(tmp_path: Path, content: str) -> None:
    (tmp_path / STATE).write_text(content)
    assert read_state(tmp_path) == {}


def test_archive_moves_brief_goal_rounds_and_state(tmp_path: Path) -> None:
    notes, runs = tmp_path / "notes", tmp_path / "runs"
    notes.mkdir()
    runs.mkdir()
    for name in ("brief.md", "goal.md", "work-round1.md", "keep.md"):
        (notes / name).write_text(name)
    record(runs, tmp_path, FLAGS, None, "x")
    where = archive(notes, runs)
    assert where is not None and where.parent == notes / "archive"
    assert sorted(p.name for p in where.iterdir()) == sorted(["brief.md", "goal.md", STATE, "work-round1.md"])
    assert (notes / "keep.md").exists() and not (runs / STATE).exists()
    assert archive(notes, runs) is None  # nothing left to move


def test_archive_refuses_a_symlinked_archive_and_moves_nothing(tmp_path: Path) -> None:
    notes, outside = tmp_path / "notes", tmp_path / "outside"
    notes.mkdir()
    outside.mkdir()
    (notes / "brief.md").write_text(BRIEF)
    os.symlink(outside, notes / "archive")
    with pytest.raises(ConfigError, match="symlink or not a folder"):
        archive(notes, tmp_path)
    assert (notes / "brief.md").exists() and list(outside.iterdir()) == []


def test_start_over_archives_and_leaves_ended_runs_alone(tmp_path: Path) -> None:
    (tmp_path / "brief.md").write_text(BRIEF)
    where = start_over(tmp_path, tmp_path, [_row("r1", "succeeded")])
    assert where is not None and (where / "brief.md").exists()


def test_plan_without_a_run_store_is_fresh_and_new_archives(tmp_path: Path) -> None:
    notes, runs = tmp_path / "notes", tmp_path / "runs"
    notes.mkdir()
    runs.mkdir()
    (notes / "brief.md").write_text(BRIEF)
    assert plan(runs, tmp_path, notes, FLAGS, new=False, text="x").wake is None
    started = plan(runs, tmp_path, notes, FLAGS, new=True, text="x")
    assert started.wake is None and started.archived is not None and (started.archived / "brief.md").exists()


def test_banner_says_what_is_resumed(tmp_path: Path) -> None:
    (tmp_path / "brief.md").write_text(BRIEF)
    (tmp_path / "manifest.json").write_text(json.dumps([
        {"step": "clarify", "session_id": "aaaaaaaa-1"},
        {"step": "work#round2", "session_id": "0123456789abcdef", "context": 12345},
    ]))
    lines = banner(Wake("r1", 2, "x"), tmp_path, tmp_path)
    assert lines == ["<- waking run r1 (wake 2)", "   brief: confirmed", "   goal: not set yet",
                     "   work session 01234567 at 12,345 tokens of context"]
    (tmp_path / "manifest.json").write_text("{broken")
    assert banner(Wake("r1", 1, "x"), tmp_path, tmp_path)[-1] == "   goal: not set yet"


def test_a_failed_last_run_is_woken_to_retry_its_failed_step(tmp_path: Path) -> None:
    brief = tmp_path / "brief.md"
    brief.write_text(BRIEF)  # its brief and answers stay: waking keeps them
    state = {"request": "the first sentence", "wakes": 0, "options": FLAGS}
    history = [_row("r1", "interrupted"), _row("r2", "failed")]
    assert decide(history, state, FLAGS, text="", brief=brief) == Wake("r2", 1, "the first sentence", failed=True)
    # a failed run that is not the last one is not woken: its retry (the last run) is what continues
    with pytest.raises(ConfigError, match=r"the last run \(r3\) finished"):
        decide([_row("r2", "failed"), _row("r3", "finished")], state, FLAGS, text="", brief=brief)


def test_the_banner_says_a_failed_run_is_retried(tmp_path: Path) -> None:
    lines = banner(Wake("r2", 1, "x", failed=True), tmp_path, tmp_path)
    assert lines[0] == "<- waking run r2 (wake 1): retrying its failed step"
