"""The coordinator's glance wall through the real CLI (issue #16 items 1, 2, 4, 5, 7; S-8, S-9).

Each test plants something that would leave a marker file if the wall let it through, drives a real
coordinator (built with `build_options` alone, B-1) against the scripted API, and checks the marker is
absent. Where the plant itself could be wrong, a control run outside the wall shows it does fire.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import InMemorySessionStore, create_sdk_mcp_server, tool

from flower import texts
from flower.agent.options import build_options
from flower.agent.roles import coordinator, worker
from flower.testing import ScriptedAPI, collect, text, tool_use
from flower.walls.glance.judge import is_ephemeral

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def _run_main(scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path, calls: list[Any],
                    approve: tuple[str, ...] = (), store: InMemorySessionStore | None = None,
                    **lead_kwargs: Any) -> list[str]:
    """Run a coordinator whose main thread makes `calls` (Bash inputs, or (tool, input) pairs) one per turn;
    return the tool-result text each call got back."""
    steps = [tool_use(*call) if isinstance(call, tuple) else tool_use("Bash", call) for call in calls]
    scripted_api.script([*steps, text("looked")])
    lead = coordinator("lead", "Goal: look around.", {"hands": worker("does the work", "You work.")},
                       **lead_kwargs)
    lead.allowed_tools.extend(approve)
    options = build_options(lead, cwd=workspace, session_store=store)
    options.env = scripted_api.cli_env(tmp_path / "home")
    run = await collect("go", options)
    assert run.result.result == "looked"
    main = scripted_api.main_requests
    return [main[i].result_text() for i in range(1, len(calls) + 1)]


async def test_options_after_the_first_operand_do_not_make_command_a_lookup(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """Item 1: `command rm -v FILE` deletes and `command env -v -- sh -c ...` runs anything: bash stops
    options at the first operand, so neither has `-v`; the wall refuses both."""
    victim = workspace / "victim.txt"
    victim.write_text("keep me\n")
    marker = workspace / "marker-item1"
    results = await _run_main(scripted_api, tmp_path, workspace, [
        {"command": f"command rm -v {victim}"},
        {"command": f"command env -v -- sh -c 'touch {marker}'"},
        {"command": "command -v ls"},
    ])
    assert victim.read_text() == "keep me\n"
    assert not marker.exists()
    assert "Dispatch a subagent" in results[0] and "Dispatch a subagent" in results[1]
    assert "/ls" in results[2]  # a real lookup still runs


async def test_no_argument_reaches_a_subscript_evaluation(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """Item 2: bash evaluates the subscript of `test -v NAME[...]`, running the `$(...)` inside."""
    markers = [workspace / f"marker-item2-{i}" for i in range(3)]
    results = await _run_main(scripted_api, tmp_path, workspace, [
        {"command": f"test -v 'a[$(touch {markers[0]})]'"},
        {"command": f"[ -v 'a[$(touch {markers[1]})]' ] || echo no"},
        {"command": f"test -n x -a ! -v 'a[`touch {markers[2]}`]'"},
    ])
    assert [m.exists() for m in markers] == [False, False, False]
    assert all("evaluates an array subscript" in r for r in results)
    # control: the same word outside the wall does run its substitution
    subprocess.run(["bash", "-c", f"test -v 'a[$(touch {markers[0]})]'"], check=False)
    assert markers[0].exists()


async def test_a_glance_never_runs_in_the_background(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """Item 4: a background glance would outlive the Bash timeout; the wall refuses it, and the same
    command in the foreground runs."""
    (workspace / "seen.txt").write_text("x")
    results = await _run_main(scripted_api, tmp_path, workspace, [
        {"command": "ls", "run_in_background": True},
        {"command": "ls", "run_in_background": False},
    ])
    assert texts.GLANCE_WHY["background"] in results[0]
    assert "seen.txt" not in results[0] and "seen.txt" in results[1]


async def test_an_endless_device_is_refused_whatever_its_spelling(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """Item 4: /dev/zero through a glob, a dot path or a symlink planted in the workspace."""
    (workspace / "data").symlink_to("/dev/zero")
    results = await _run_main(scripted_api, tmp_path, workspace, [
        {"command": "head -c 5 /d?v/zero | wc -c"},
        {"command": "wc -c < //dev/./zero"},
        {"command": "head -c 5 data | wc -c"},
    ])
    assert all("device, pipe or socket" in r for r in results), results


def _hostile_repo(root: Path, markers: Path) -> dict[str, Path]:
    """A repository whose config and attributes run a program from status, diff, log -p and show."""
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "a@b.c")
    git("config", "user.name", "a")
    (root / "f.txt").write_text("one\n")
    (root / ".gitattributes").write_text("* filter=evil diff=evil\n")
    git("add", ".")
    git("commit", "-qm", "init")
    planted = {name: markers / f"ran-{name}" for name in ("fsmonitor", "external", "textconv", "filter")}
    git("config", "core.fsmonitor", f"touch {planted['fsmonitor']}; false")
    git("config", "diff.external", f"touch {planted['external']}; true")
    git("config", "diff.evil.textconv", f"touch {planted['textconv']}; cat")
    git("config", "filter.evil.clean", f"touch {planted['filter']}; cat")
    (root / "f.txt").write_text("two\n")
    os.utime(root / "f.txt", (1_000_000_000, 1_000_000_000))
    return planted


GIT_GLANCES = ["git status", "git diff", "git log -p -1", "git show", "git diff HEAD --stat",
               "git log --oneline -1"]


async def test_a_hostile_repositorys_programs_do_not_run_from_git_glances(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """Item 5: core.fsmonitor, diff.external, a textconv and a clean filter all run from plain git in
    this repository (the control); from the coordinator's glances (hardened by the wall through
    updatedInput) none of them does. (gpg via `%G` is refused by the predicate; see test_glance.)"""
    markers = tmp_path / "markers"
    markers.mkdir()
    planted = _hostile_repo(workspace, markers)
    store = InMemorySessionStore()
    results = await _run_main(scripted_api, tmp_path, workspace, [{"command": c} for c in GIT_GLANCES], store=store)
    assert sorted(p.name for p in markers.iterdir()) == []
    assert "f.txt" in results[0] and "two" in results[1]  # the glances did run and show the work tree
    # S-8: the transcript keeps the model's own command, so the resume rewrite still expires it.
    entries = [e for rows in store._store.values() for e in rows]  # noqa: SLF001 - reading a test double
    stored = [block["input"]["command"] for e in entries for block in (e.get("message") or {}).get("content") or []
              if isinstance(block, dict) and block.get("type") == "tool_use"]
    assert stored == GIT_GLANCES and all(is_ephemeral(command) for command in stored)
    for command in GIT_GLANCES:
        subprocess.run(command, shell=True, cwd=workspace, capture_output=True, check=False)
    assert sorted(p.name for p in markers.iterdir()) == sorted(p.name for p in planted.values())


def _repo_with_named_programs(root: Path, markers: Path) -> dict[str, Path]:
    """A repository whose filter is spelled "Evil" (git's subsection names keep their case) and whose merge
    driver runs from a remerge diff, which `log.diffMerges=remerge` makes the meaning of `-m`."""
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("config", "user.email", "a@b.c")
    git("config", "user.name", "a")
    (root / "f.txt").write_text("base\n")
    git("add", ".")
    git("commit", "-qm", "base")
    git("checkout", "-qb", "side")
    (root / "f.txt").write_text("side\n")
    git("commit", "-qam", "side")
    git("checkout", "-q", "main")
    (root / "f.txt").write_text("main\n")
    git("commit", "-qam", "main")
    subprocess.run(["git", "merge", "-q", "side"], cwd=root, capture_output=True, check=False)  # a conflict
    (root / "f.txt").write_text("resolved\n")
    git("commit", "-qam", "merge")
    planted = {name: markers / f"ran-{name}" for name in ("filter", "merge")}
    (root / ".gitattributes").write_text("* filter=Evil merge=Evil\n")
    git("config", "filter.Evil.clean", f"touch {planted['filter']}; cat")
    git("config", "merge.Evil.driver", f"touch {planted['merge']}; false")
    git("config", "log.diffMerges", "remerge")
    (root / "f.txt").write_text("changed\n")
    os.utime(root / "f.txt", (1_000_000_000, 1_000_000_000))
    return planted


NAMED_GLANCES = ["git diff --stat", "git log -m -p -1", "git show -m HEAD", "git log -p --diff-merges=remerge -1"]


async def test_programs_a_repository_names_in_any_case_or_through_a_remerge_do_not_run(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """A filter pinned by its lowered name left `[filter "Evil"]` running on `git diff`, and a remerge diff (asked
    for, or made the meaning of `-m` by `log.diffMerges`) ran the repository's merge driver. The pins keep names
    as written, pin `-m` to git's default and every merge driver to `true`; `--diff-merges=remerge` is refused."""
    markers = tmp_path / "markers"
    markers.mkdir()
    planted = _repo_with_named_programs(workspace, markers)
    results = await _run_main(scripted_api, tmp_path, workspace, [{"command": c} for c in NAMED_GLANCES])
    assert sorted(p.name for p in markers.iterdir()) == []
    assert "f.txt" in results[0] and "resolved" in results[1]  # the glances ran and showed the repository
    assert "--diff-merges=remerge" in results[3] and "not an allowed flag" in results[3]
    for command in NAMED_GLANCES:  # the control: unhardened, the same commands run both programs
        subprocess.run(command, shell=True, cwd=workspace, capture_output=True, check=False)
    assert sorted(p.name for p in markers.iterdir()) == sorted(p.name for p in planted.values())


async def test_git_dash_c_outside_the_workspace_is_refused(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """Item 5: `git -C DIR` may only name a directory inside the workspace."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    markers = tmp_path / "markers"
    markers.mkdir()
    _hostile_repo(elsewhere, markers)
    (workspace / "door").symlink_to(elsewhere)
    results = await _run_main(scripted_api, tmp_path, workspace, [
        {"command": f"git -C {elsewhere} status"},
        {"command": "git -C door status"},
    ])
    assert all("leaves the workspace" in r for r in results), results
    assert list(markers.iterdir()) == []


async def test_the_mcp_wall_lets_only_declared_read_only_tools_run_on_main(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """Item 7: an SDK MCP tool handed to a coordinator is walled on the main thread unless the spec
    declares it read-only (glance_tools). The writing tool is even approved in allowed_tools, so only
    the wall stands between it and the marker; the declared one is approved by coordinator() itself."""
    marker = workspace / "marker-item7"

    @tool("write_note", "Write a note", {"text": str})
    async def write_note(args: dict[str, Any]) -> dict[str, Any]:
        marker.write_text(args["text"])
        return {"content": [{"type": "text", "text": "written"}]}

    @tool("read_note", "Read the note", {})
    async def read_note(args: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": "NOTE-CONTENT-42"}]}

    server = create_sdk_mcp_server("notes", tools=[write_note, read_note])
    results = await _run_main(
        scripted_api, tmp_path, workspace,
        [("mcp__notes__write_note", {"text": "hands-on"}), ("mcp__notes__read_note", {})],
        approve=("mcp__notes__write_note",), mcp_servers={"notes": server}, glance_tools=["mcp__notes__read_note"],
    )
    assert not marker.exists()
    assert texts.MCP_DENIAL.format(tool="mcp__notes__write_note") in results[0]
    assert "NOTE-CONTENT-42" in results[1]
