"""The fixed part of a coordinator's requests (issue #19, S-25): which CLI tools and switches a lean spec drops.

Not a wall (S-5): only what nobody in the spec can use goes; the walls stay hooks (`tests/unit/walls/test_guard.py`).
"""

from __future__ import annotations

from flower.agent.options import COORDINATOR_UNUSED, build_options, lean_env, unused_builtins
from flower.agent.roles import coordinator, worker
from flower.agent.spec import AgentSpec

MEMORY_OFF = {"CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1", "CLAUDE_CODE_SILENT_TURN_REMINDER": "0",
              "CLAUDE_CODE_TODO_REMINDER_MODE": "off"}


def _lead(*tool_lists: list[str] | None, **kwargs: object) -> AgentSpec:
    workers = {f"w{i}": worker(f"works {i}", "work", tools=tools) for i, tools in enumerate(tool_lists)}
    return coordinator("lead", "goal", workers, **kwargs)  # type: ignore[arg-type]


def test_a_coordinator_drops_the_core_tools_no_worker_names() -> None:
    cut = unused_builtins(_lead(["Bash", "Read"]))
    assert [tool for tool in cut if tool in COORDINATOR_UNUSED] == list(COORDINATOR_UNUSED)
    assert not {"Agent", "Bash", "Read", "ToolSearch"} & set(cut)


def test_a_tool_any_worker_names_stays_for_the_whole_session() -> None:
    """disallowed_tools is session-wide (docs/sdk-notes.md#session-wide-tools): a tool one worker names must
    stay for everyone."""
    cut = unused_builtins(_lead(["Bash", "Read"], ["Edit", "SendMessage"], ["TaskCreate"]))
    assert {"Edit", "SendMessage", "TaskCreate"}.isdisjoint(cut)
    assert {"Write", "NotebookEdit", "TaskStop", "Monitor"} <= set(cut)


def test_a_workers_default_tools_keep_the_hands_on_and_web_tools() -> None:
    cut = unused_builtins(_lead(None))  # worker() without tools= gets WORKER_TOOLS
    assert {"Write", "Edit", "WebFetch", "WebSearch"}.isdisjoint(cut)
    assert {"NotebookEdit", "SendMessage", "TaskStop"} <= set(cut)


def test_the_coordinators_task_list_is_never_cut() -> None:
    """The seed gives the coordinator TodoWrite; the bundled CLI offers the task list in its place."""
    cut = unused_builtins(_lead(["Read"]))
    assert {"TodoWrite", "TaskCreate", "TaskGet", "TaskList", "TaskUpdate"}.isdisjoint(cut)
    assert {"TaskCreate", "TaskUpdate"} <= set(_lead(["Read"]).allowed_tools)


def test_an_agent_that_inherits_every_tool_keeps_everything() -> None:
    lead = _lead(["Read"])
    assert lead.agents is not None
    lead.agents["w0"].tools = None
    assert unused_builtins(lead) == [] and lean_env(lead) == MEMORY_OFF


def test_non_delegating_and_non_lean_specs_keep_the_core_tools() -> None:
    solo = AgentSpec(name="a", instructions="x", allowed_tools=["Read"])
    assert set(COORDINATOR_UNUSED).isdisjoint(unused_builtins(solo)) and lean_env(solo) == {}
    fat = _lead(["Read"])
    fat.lean = False
    assert unused_builtins(fat) == [] and lean_env(fat) == {}
    assert "CLAUDE_CODE_DISABLE_AUTO_MEMORY" not in build_options(fat).env


def test_the_memory_switch_reaches_the_cli_and_the_spec_env_overrides_it() -> None:
    assert build_options(_lead(["Read"])).env["CLAUDE_CODE_DISABLE_AUTO_MEMORY"] == "1"
    kept = _lead(["Read"], env={"CLAUDE_CODE_DISABLE_AUTO_MEMORY": "0"})
    assert build_options(kept).env["CLAUDE_CODE_DISABLE_AUTO_MEMORY"] == "0"


def test_the_preset_is_still_appended_to() -> None:
    """S-25: the cuts go through disallowed_tools and env, never by replacing the preset."""
    prompt = build_options(_lead(["Read"])).system_prompt
    assert isinstance(prompt, dict) and prompt["type"] == "preset" and prompt["preset"] == "claude_code"
    assert prompt["append"].startswith("## How you work")
