"""Two ways around the coordinator's wall, through the real CLI (issue #19 review; S-3, S-5): Monitor, and
a fork of the coordinator itself.

Monitor runs a shell command as a background watcher. The bundled CLI already puts its command through the
Bash permission hooks, so the glance rules applied to it; but a glance never runs in the background (a
glance `run_in_background` is refused), and a watcher is exactly that. So Monitor is hands-on: denied on the
main thread whatever its command, the way a mutating Bash command is.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from flower.agent.options import build_options
from flower.agent.roles import coordinator, worker
from flower.testing import ScriptedAPI, collect, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def test_a_coordinator_cannot_start_a_monitor_even_with_a_glance_command(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    # a worker names Monitor, so the session offers it (deferred, loaded through ToolSearch)
    lead = coordinator("lead", "Goal: watch.", {"w": worker("watches", "You watch.", tools=["Bash", "Monitor"])})
    steps = [tool_use("ToolSearch", {"query": "select:Monitor"}),
             tool_use("Monitor", {"command": "ls", "description": "watch the folder"}), text("done")]
    with ScriptedAPI(steps, check_tools=False) as api:
        options = build_options(lead, cwd=workspace)
        options.env = {**options.env, **api.cli_env(tmp_path / "home")}
        run = await collect("watch the folder", options)
        assert run.result.result == "done"
        loaded, answered = api.main_requests[1:3]
    assert "Monitor" in [tool["name"] for tool in answered.body["tools"]]  # it was really on offer
    assert '"tool_name": "Monitor"' in json.dumps(loaded.body["messages"][-1])
    result = answered.body["messages"][-1]["content"][0]
    assert result["is_error"] is True
    assert "does not do hands-on work" in json.dumps(result) and "glance" not in json.dumps(result)


@pytest.mark.parametrize("spelling", ["fork", "FORK", " Fork "])
async def test_a_coordinator_cannot_do_hands_on_work_through_a_fork_of_itself(tmp_path: Path, spelling: str) -> None:
    """`subagent_type: "fork"` would run the coordinator as a subagent with every session tool and no worker
    rules (seen on the bundled CLI: its `touch` ran), and the CLI takes "FORK" or " Fork " for it too. The fork
    guard denies every spelling; the workers stay the hands."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    lead = coordinator("lead", "Goal: read.", {"reader": worker("reads", "You read.", tools=["Read"])})
    fork = tool_use("Agent", {"description": "f", "prompt": "make the file", "subagent_type": spelling,
                              "run_in_background": False})
    with ScriptedAPI([fork, text("done")], check_tools=False) as api:
        options = build_options(lead, cwd=workspace)
        options.env = {**options.env, **api.cli_env(tmp_path / "home")}
        run = await collect("go", options)
        assert run.result.result == "done"
        answer = json.dumps(api.main_requests[1].body["messages"][-1])
        assert api.subagent_requests() == []  # no fork ever asked the model for its first step
    assert "does not fork itself" in answer


@pytest.mark.parametrize("kind", ["general-purpose", None])
async def test_a_coordinator_dispatches_only_its_own_workers(tmp_path: Path, kind: str | None) -> None:
    """The CLI's built-in `general-purpose` (its default when the type is missing) has Bash and Write and
    none of a worker's rules: on a spec that is not lean (so the CLI still lists it) the wall denies it."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    lead = replace(coordinator("lead", "Goal: read.", {"reader": worker("reads", "You read.", tools=["Read"])}),
                   lean=False)
    call = {"description": "f", "prompt": "make the file", "run_in_background": False}
    dispatch = tool_use("Agent", call if kind is None else {**call, "subagent_type": kind})
    with ScriptedAPI([dispatch, text("done")], check_tools=False) as api:
        options = build_options(lead, cwd=workspace)
        options.env = {**options.env, **api.cli_env(tmp_path / "home")}
        run = await collect("go", options)
        assert run.result.result == "done"
        answer = json.dumps(api.main_requests[1].body["messages"][-1])
        assert api.subagent_requests() == []
    assert "is not one of your workers" in answer and "reader" in answer
