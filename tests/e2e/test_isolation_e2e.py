"""Isolated workers through the real CLI: each dispatch in its own git worktree (issue #15, L-13)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from flower.agent.roles import coordinator, worker
from flower.errors import ConfigError
from flower.runtime.runtime import Runtime
from flower.testing import ScriptedAPI, text, tool_use
from flower.workbench.bench import outside_checkout

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def _git(ws: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(ws), "-c", "user.email=t@t", "-c", "user.name=t", *args],
                          check=True, capture_output=True, text=True).stdout


def _dispatch(marker: str) -> dict[str, object]:
    # No `isolation` here: the runtime's hook adds it because the worker type is isolated.
    return {"description": marker, "prompt": f"{marker}: change your file", "subagent_type": "coder",
            "run_in_background": False}


@pytest.fixture(autouse=True)
def _state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # where the isolated workbench goes


def _repo(workspace: Path, *names: str) -> None:
    for name in names:
        (workspace / name).write_text(name[0] + "\n")
    _git(workspace, "init", "-q")
    _git(workspace, "add", *names)
    _git(workspace, "commit", "-qm", "init")


async def test_two_isolated_coders_change_files_in_their_own_worktrees(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    _repo(workspace, "a.txt", "b.txt")
    wb_note = outside_checkout(workspace) / "artifacts" / "from-worktree.txt"
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


async def test_an_isolated_worker_writes_and_edits_the_shared_workbench_with_write_and_edit(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """Issue #26 item 11: the CLI refuses an isolated agent's Write or Edit anywhere in the shared checkout,
    so the workbench of a run with isolated workers lives outside it; the worker's Write and Edit land in
    it, and the shared index lists the new file."""
    _repo(workspace, "a.txt")
    lead = coordinator("lead", "Goal.", {"coder": worker("codes", "You code.", isolate=True)})
    events: list[str] = []
    rt = Runtime(workspace, run_dir=tmp_path / "runs", env=scripted_api.cli_env(tmp_path / "home"))
    bench = outside_checkout(workspace)
    plan = bench / "notes" / "plan.md"
    plan.parent.mkdir(parents=True)
    plan.write_text("# Plan\nstep one: TODO\n")
    note = bench / "notes" / "found.md"
    scripted_api.script(
        [tool_use("Agent", _dispatch("ISO-W")), text("noted")],
        subagents={"ISO-W": [
            tool_use("Write", {"file_path": str(note), "content": "# desc: what the coder found\nquoting is RFC\n"}),
            tool_use("Read", {"file_path": str(plan)}),
            tool_use("Edit", {"file_path": str(plan), "old_string": "step one: TODO", "new_string": "step one: done"}),
            text("wrote and edited"),
        ]},
    )
    result = await rt.run(lead, "note what you find", on_event=lambda e: events.append(e.text))

    assert result.ok, result.error
    assert rt.workbench is not None and rt.workbench.root == bench.resolve()
    results = [r.result_text() for r in scripted_api.subagent_requests()]
    assert not any("isolated in the worktree" in text for text in results), results
    assert note.read_text() == "# desc: what the coder found\nquoting is RFC\n"
    assert plan.read_text() == "# Plan\nstep one: done\n"
    assert "notes/found.md" in (bench / "INDEX.md").read_text()  # indexed in the shared workbench
    assert not (workspace / ".flower" / "notes" / "found.md").exists()
    assert any(f"the workbench is {bench.resolve()}" in line for line in events)
    # The relay line named the shared workbench outside the checkout in the worker's prompt.
    (dispatched,) = [r for r in scripted_api.subagent_requests() if "ISO-W" in r.text][:1]
    assert str(bench.resolve()) in dispatched.text


def test_go_isolate_keeps_the_brief_in_the_workbench_outside_the_checkout(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    import sys

    _repo(workspace, "a.txt")
    brief = ("## Goal\nG.\n## Acceptance criteria\n- a.txt says b\n## Bounds\nNone.\n"
             "## Unknowns and assumptions\nNone.\n")
    scripted_api.script([text(brief)])
    env = scripted_api.cli_env(tmp_path / "home", XDG_STATE_HOME=str(tmp_path / "state"))
    ran = subprocess.run([sys.executable, "-m", "flower", "go", "--isolate", "--clarify-only", "make a say b"],
                         cwd=workspace, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                         timeout=180)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    bench = tmp_path / "state" / "flower" / "workbenches"
    (root,) = bench.iterdir()
    assert "G." in (root / "notes" / "brief.md").read_text()
    assert not (workspace / ".flower" / "notes" / "brief.md").exists()
    assert str(root / "notes" / "brief.md") in ran.stdout.replace("\n  ", "")  # the summary names it
