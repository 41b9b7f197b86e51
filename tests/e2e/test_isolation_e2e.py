"""Isolated workers through the real CLI: each dispatch in its own git worktree (issue #15, L-13)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from flower.agent.roles import coordinator, worker
from flower.errors import ConfigError
from flower.runtime.runtime import Runtime
from flower.testing import ScriptedAPI, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def _git(ws: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(ws), "-c", "user.email=t@t", "-c", "user.name=t", *args],
                          check=True, capture_output=True, text=True).stdout


def _dispatch(marker: str) -> dict[str, object]:
    # No `isolation` here: the runtime's hook adds it because the worker type is isolated.
    return {"description": marker, "prompt": f"{marker}: change your file", "subagent_type": "coder",
            "run_in_background": False}


async def test_two_isolated_coders_change_files_in_their_own_worktrees(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("a\n")
    (workspace / "b.txt").write_text("b\n")
    _git(workspace, "init", "-q")
    _git(workspace, "add", "a.txt", "b.txt")
    _git(workspace, "commit", "-qm", "init")
    wb_note = workspace / ".flower" / "artifacts" / "from-worktree.txt"
    scripted_api.script(
        [tool_use("Agent", _dispatch("ISO-A")), tool_use("Agent", _dispatch("ISO-B")), text("both done")],
        subagents={
            "ISO-A": [tool_use("Bash", {"command": f"echo A2 > a.txt && pwd && echo seen > {wb_note}"}),
                      text("a changed")],
            "ISO-B": [tool_use("Bash", {"command": "echo B2 > b.txt && pwd"}), text("b changed")],
        },
    )
    lead = coordinator("lead", "Goal: change both files.", {"coder": worker("codes", "You code.", isolate=True)})
    rt = Runtime(workspace, run_dir=tmp_path / "runs", env=scripted_api.cli_env(tmp_path / "home"))
    result = await rt.run(lead, "change a and b")

    assert result.ok, result.error
    # The main checkout is untouched; each change sits in a worktree of its own.
    assert (workspace / "a.txt").read_text() == "a\n" and (workspace / "b.txt").read_text() == "b\n"
    trees = [Path(line.split()[0]) for line in _git(workspace, "worktree", "list").splitlines()[1:]]
    assert len(trees) == 2 and all(".claude/worktrees" in str(t) for t in trees)
    changed = sorted(_git(t, "status", "--porcelain").strip() for t in trees)
    assert changed == ["M a.txt", "M b.txt"]
    # Each worker ran inside its worktree, and the workbench (absolute path) stayed reachable from there.
    cwds = [r.result_text() for r in scripted_api.requests if r.is_subagent and "/.claude/worktrees/" in r.result_text()]
    assert len(cwds) == 2
    assert wb_note.read_text() == "seen\n"
    # The script never asked for isolation: the hook added it, and no prompt text mentions worktrees.
    assert not any("worktree" in r.system_text for r in scripted_api.requests)


async def test_a_non_git_workspace_is_refused_before_any_request(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    lead = coordinator("lead", "Goal.", {"coder": worker("codes", "You code.", isolate=True)})
    rt = Runtime(workspace, run_dir=tmp_path / "runs", env=scripted_api.cli_env(tmp_path / "home"))
    with pytest.raises(ConfigError, match="not a git work tree") as caught:
        await rt.run(lead, "go")
    assert "\n" not in str(caught.value)
    assert scripted_api.requests == []
