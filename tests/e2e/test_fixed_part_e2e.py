"""The fixed part of a coordinator's requests through the real CLI (issue #19, S-25, S-5).

A lean coordinator leaves out the core tools nobody in its tree names and the CLI's auto-memory section;
a worker that names a tool still gets it, the walls (hooks) still deny, and the preset is appended to.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from flower.agent.options import build_options
from flower.agent.roles import coordinator, worker
from flower.testing import ScriptedAPI, collect, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

CUT = {"Write"}
DEFERRED = ("NotebookEdit", "SendMessage", "TaskStop", "Monitor")  # named in a listing, loaded via ToolSearch
PLAN = ("TaskCreate", "TaskUpdate")  # the coordinator's task list (TodoWrite's successor) stays deferred
LISTING = "deferred tools are now available via ToolSearch"


async def test_a_lean_coordinator_request_lacks_the_cut_tools_and_its_worker_keeps_its_own(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    seed = workspace / "seed.txt"
    named: dict[bool, set[str]] = {}
    deferred: dict[bool, str] = {}
    for lean in (False, True):
        seed.write_text("a\n")
        scripted_api.script(
            [tool_use("Edit", {"file_path": str(seed), "old_string": "a", "new_string": "main"}),
             tool_use("Agent", {"description": "edit", "prompt": f"EDIT-{lean}: edit the seed", "subagent_type": "w",
                                "run_in_background": False}),
             text("done")],
            subagents={f"EDIT-{lean}": [tool_use("Edit", {"file_path": str(seed), "old_string": "a",
                                                          "new_string": "worker"}), text("edited")]},
        )
        lead = coordinator("lead", "Goal: an edited seed.", {"w": worker("edits", "You edit.", tools=["Edit", "Read"])})
        lead.lean = lean
        options = build_options(lead, cwd=workspace)
        options.env = {**options.env, **scripted_api.cli_env(tmp_path / f"home-{lean}")}
        first = len(scripted_api.main_requests)
        run = await collect("go", options)

        assert run.result.result == "done"
        main = scripted_api.main_requests[first]
        named[lean] = set(main.tool_names)
        deferred[lean] = main.text[main.text.find(LISTING):][:400] if LISTING in main.text else ""
        assert "You are Claude Code" in main.system_text and "## How you work" in main.system_text  # S-25
        assert ("# Memory" in main.system_text) is not lean
        # the wall is a hook, whatever the tool list: the main thread's Edit is denied, the worker's runs
        assert "Dispatch a subagent with the Agent tool" in scripted_api.main_requests[first + 1].result_text()
        assert seed.read_text() == "worker\n"
        sub = [r for r in scripted_api.subagent_requests() if f"EDIT-{lean}" in r.text][0]
        assert sorted(sub.tool_names) == ["Edit", "Read"]
    assert CUT <= named[False]  # the bundled CLI offers them all to a coordinator that is not lean
    assert not CUT & named[True]
    assert all(f"\n{tool}\n" in deferred[False] for tool in DEFERRED)
    assert not any(f"\n{tool}\n" in deferred[True] for tool in DEFERRED)
    assert all(f"\n{tool}" in deferred[True] for tool in PLAN)
    assert {"Agent", "Bash", "Read", "Edit"} <= named[True]


@pytest.mark.parametrize("lean", [True, False])
async def test_a_lean_coordinator_carries_no_periodic_reminders(tmp_path: Path, lean: bool) -> None:
    """Issue #27: the CLI adds "The user hasn't heard from you in a while" and "The task tools haven't been
    used recently" to the main thread every few turns; a lean coordinator's 40 glances carry neither (the
    non-lean control shows the CLI does add them)."""
    from dataclasses import replace

    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("x")
    lead = replace(coordinator("lead", "Goal: look.", {"hands": worker("w", "You work.")}), lean=lean)
    steps = [tool_use("Read", {"file_path": str(workspace / "a.txt")}) for _ in range(40)] + [text("ok")]
    with ScriptedAPI(steps, check_tools=False) as api:
        options = build_options(lead, cwd=workspace)
        options.env = {**options.env, **api.cli_env(tmp_path / "home")}
        await collect("go", options)
        history = api.main_requests[-1].text
    reminders = history.count("heard from you") + history.count("haven't been used")
    assert (reminders == 0) if lean else (reminders >= 4)
