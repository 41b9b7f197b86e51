"""Every opener of a run-dir file refuses a symlink or a non-regular file at it, in one line (issue #30)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flower.errors import FlowerError, UnsafePathError
from flower.human.mailbox import open_mailbox
from flower.runtime.steps import append_manifest
from flower.util.rundir import checked_path, checked_sqlite


def test_a_regular_file_and_a_missing_one_pass(tmp_path: Path) -> None:
    (tmp_path / "human.db").write_bytes(b"")
    assert checked_sqlite(tmp_path / "human.db", tmp_path) == tmp_path / "human.db"
    assert checked_path(tmp_path / "locks" / "a.lock", tmp_path) == tmp_path / "locks" / "a.lock"
    (tmp_path / "locks").mkdir()
    assert checked_path(tmp_path / "locks", tmp_path, directory=True) == tmp_path / "locks"


def test_a_link_at_the_file_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_text("x")
    run = tmp_path / "runs"
    run.mkdir()
    (run / "sessions.db").symlink_to(outside)
    with pytest.raises(UnsafePathError, match=r"sessions\.db is a symlink") as info:
        checked_sqlite(run / "sessions.db", run)
    assert "\n" not in str(info.value) and isinstance(info.value, FlowerError)


def test_a_dangling_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "human.db").symlink_to(tmp_path / "nowhere" / "authorized_keys2")
    with pytest.raises(UnsafePathError, match="human.db is a symlink"):
        checked_sqlite(tmp_path / "human.db")
    assert not (tmp_path / "nowhere").exists()


def test_a_link_at_a_sqlite_side_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "dbos.sqlite-wal").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsafePathError, match="dbos.sqlite-wal is a symlink"):
        checked_sqlite(tmp_path / "dbos.sqlite")


def test_a_link_at_a_folder_in_between_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = tmp_path / "runs"
    run.mkdir()
    (run / "locks").symlink_to(elsewhere)
    with pytest.raises(UnsafePathError, match=r"locks is a symlink"):
        checked_path(run / "locks" / "r.lock", run)


def test_a_file_in_place_of_a_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "locks").write_text("")
    with pytest.raises(UnsafePathError, match="not a folder"):
        checked_path(tmp_path / "locks" / "r.lock", tmp_path)


def test_a_fifo_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / ".manifest.lock")
    with pytest.raises(UnsafePathError, match="is a FIFO, not a regular file"):
        checked_path(tmp_path / ".manifest.lock", tmp_path)


def test_a_folder_where_a_file_belongs_is_refused(tmp_path: Path) -> None:
    (tmp_path / "human.db").mkdir()
    with pytest.raises(UnsafePathError, match="is a directory, not a regular file"):
        checked_sqlite(tmp_path / "human.db")


def test_a_path_outside_its_anchor_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnsafePathError, match="not inside"):
        checked_path(tmp_path.parent / "x", tmp_path)
    with pytest.raises(UnsafePathError, match="leaves"):
        checked_path(tmp_path / ".." / "x", tmp_path)


def test_the_mailbox_refuses_a_linked_human_db_and_creates_nothing(tmp_path: Path) -> None:
    target = tmp_path / "home" / "authorized_keys2"
    target.parent.mkdir()
    run = tmp_path / "runs"
    run.mkdir()
    (run / "human.db").symlink_to(target)
    with pytest.raises(UnsafePathError, match="human.db is a symlink"):
        open_mailbox(run)
    assert not target.exists()


def test_the_manifest_refuses_a_linked_lock(tmp_path: Path) -> None:
    (tmp_path / ".manifest.lock").symlink_to(tmp_path / "gone" / "lock")
    with pytest.raises(UnsafePathError, match=r"\.manifest\.lock is a symlink"):
        append_manifest(tmp_path, {"step": "s"})
    assert not (tmp_path / "gone").exists() and not (tmp_path / "manifest.json").exists()


def test_the_manifest_still_appends(tmp_path: Path) -> None:
    append_manifest(tmp_path, {"step": "a"})
    append_manifest(tmp_path, {"step": "b"})
    assert '"b"' in (tmp_path / "manifest.json").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".manifest.lock", "manifest.json"]


def test_a_linked_workspaces_folder_gets_no_branch_workspace(tmp_path: Path) -> None:
    from flower.flow.isolation import isolated_workspace

    ws, run, elsewhere = tmp_path / "ws", tmp_path / "runs", tmp_path / "elsewhere"
    for folder in (ws, run, elsewhere):
        folder.mkdir()
    (run / "workspaces").symlink_to(elsewhere)
    with pytest.raises(UnsafePathError, match="workspaces is a symlink"):
        isolated_workspace(ws, run, "r1", "a")
    assert list(elsewhere.iterdir()) == []


def test_a_run_dir_that_is_itself_a_link_is_refused(tmp_path: Path) -> None:
    """Every check of the files in a run dir is anchored at it, so a committed `runs -> elsewhere` is refused
    before anything is created, in one line naming it."""
    from flower.errors import UnsafePathError
    from flower.util.rundir import make_run_dir

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "runs").symlink_to(elsewhere)
    with pytest.raises(UnsafePathError) as caught:
        make_run_dir(tmp_path / "runs")
    assert "symbolic link" in str(caught.value) and "\n" not in str(caught.value)
    assert list(elsewhere.iterdir()) == []
    assert make_run_dir(tmp_path / "real") == (tmp_path / "real").resolve()
