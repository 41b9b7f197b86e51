"""The workbench through the Runtime and the real CLI (issue #4, S-11, S-12, S-13, B-3, B-4,
docs/sdk-notes.md#system-prompts).

What the model saw is read from the requests the CLI sent to the scripted API: the system prompt
(`Request.system_text`), the first user message of a step, the subagent's first request. Sizes are
printed as `workbench-e2e` lines (`pytest -s` shows them).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from flower.agent.roles import coordinator, worker
from flower.agent.spec import AgentSpec
from flower.runtime.runtime import Runtime
from flower.testing import Request, ScriptedAPI, collect, text, tool_use
from flower.workbench.bench import Workbench

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def runtime(api: ScriptedAPI, tmp_path: Path, workspace: Path, **kwargs: Any) -> Runtime:
    return Runtime(workspace, run_dir=tmp_path / "runs", env=api.cli_env(tmp_path / "home"), handoff=False,
                   resilience=False, **kwargs)


def solo() -> AgentSpec:
    return AgentSpec(name="solo", instructions="Work alone.", allowed_tools=["Bash", "Read"])


def lead() -> AgentSpec:
    return coordinator("lead", "Goal: keep a check script.", {"hands": worker("does the work", "You work.")})


def dispatch(prompt: str) -> dict[str, Any]:
    return {"description": "do it", "prompt": prompt, "subagent_type": "hands", "run_in_background": False}


def common_prefix(a: str, b: str) -> int:
    return len(os.path.commonprefix([a, b]))


def prompt_blocks(request: Request) -> str:
    """The system prompt without its first block, the billing header: the CLI derives that header's
    `cc_version` suffix from the first user message, so it differs between sessions whatever flower does."""
    blocks = request.body.get("system") or []
    assert isinstance(blocks, list) and blocks[0]["text"].startswith("x-anthropic-billing-header")
    return "\n".join(str(b.get("text", "")) for b in blocks[1:])


# --- S-11: a worker's write into scripts/ refreshes INDEX.md -----------------------------------------


async def test_a_worker_writing_a_script_refreshes_the_index(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """S-11: the index_guard runs on the worker's Write (PostToolUse, inside the workbench), so INDEX.md
    lists the script with its `# desc:` after the run although the Runtime refreshes only before a step."""
    rt = runtime(scripted_api, tmp_path, workspace)
    assert rt.workbench is not None
    script = rt.workbench.scripts / "check_parser.py"
    scripted_api.script(
        [tool_use("Agent", dispatch("INDEX-TASK: write a parser check")), text("lead done")],
        subagents={"INDEX-TASK": [
            tool_use("Write", {"file_path": str(script),
                               "content": "# desc: Round-trips every sample through the parser\nprint('ok')\n"}),
            text("wrote scripts/check_parser.py"),
        ]},
    )
    index = rt.workbench.index_path
    result = await rt.run(lead(), "keep a parser check")
    assert result.ok and result.text == "lead done"
    assert script.exists()
    assert "- scripts/check_parser.py \N{EM DASH} Round-trips every sample through the parser (" in index.read_text()
    # The Runtime's own refresh ran before the step, when the script did not exist yet.
    assert "check_parser" not in scripted_api.main_requests[0].last_user_text()


# --- B-3: the system prompt stays byte-identical across steps; the listing rides in the message ------


async def _two_steps(api: ScriptedAPI, rt: Runtime, *, resume: bool) -> tuple[Request, Request]:
    api.script([text("step one done"), text("step two done")])
    first = await rt.run(solo(), "FIRST-STEP: survey")
    assert first.ok
    assert rt.workbench is not None
    (rt.workbench.scripts / "added.py").write_text("# desc: ADDED-BETWEEN-STEPS probe\n")
    second = await rt.run(solo(), "SECOND-STEP: continue", resume=first.session_id if resume else None)
    assert second.ok and second.text == "step two done"
    assert (second.session_id == first.session_id) is resume
    one, two = api.main_requests
    assert "FIRST-STEP" in one.last_user_text() and "SECOND-STEP" in two.last_user_text()
    return one, two


@pytest.mark.parametrize("resume", [True, False], ids=["resumed", "new-session"])
async def test_cache_stable_placement_keeps_the_system_prompt_identical_between_steps(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path, resume: bool
) -> None:
    """B-3, S-12: a file added between two steps changes the second step's first user message, never
    the system prompt, whether the step resumes the session or starts a new one."""
    rt = runtime(scripted_api, tmp_path, workspace)
    one, two = await _two_steps(scripted_api, rt, resume=resume)
    assert one.system_text == two.system_text  # byte-identical: the whole cached prefix survives
    assert rt.workbench is not None
    rules = rt.workbench.prompt_block()
    assert rules in one.system_text and "ADDED-BETWEEN-STEPS" not in two.system_text
    assert "added.py" not in one.text
    assert "- scripts/added.py \N{EM DASH} ADDED-BETWEEN-STEPS probe (" in two.last_user_text()
    listing = rt.workbench.listing_block()
    print(f"workbench-e2e B-3 user placement ({'resumed' if resume else 'new session'}): system prompt "
          f"{len(two.system_text)} chars, identical between steps (common prefix "
          f"{common_prefix(one.system_text, two.system_text)}); rules block {len(rules)} chars; "
          f"listing block {len(listing)} chars")


async def test_seed_placement_puts_the_listing_in_the_system_prompt(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """B-3: placement="system" (the seed's) is still available; there the new file lands in the next
    session's system prompt, so the two steps' system prompts differ from the listing on."""
    rt = runtime(scripted_api, tmp_path, workspace, placement="system")
    one, two = await _two_steps(scripted_api, rt, resume=False)
    assert one.system_text != two.system_text
    assert "ADDED-BETWEEN-STEPS" in two.system_text and "ADDED-BETWEEN-STEPS" not in one.system_text
    assert "added.py" not in two.last_user_text()
    assert rt.workbench is not None
    head = rt.workbench.listing_block().splitlines()[0]
    assert head in one.system_text and head not in one.last_user_text()
    a, b = prompt_blocks(one), prompt_blocks(two)
    shared = common_prefix(a, b)
    assert a.index(head) < shared < len(a)  # everything before the listing is still shared
    print(f"workbench-e2e B-3 system placement: system prompts differ (billing block aside) after "
          f"{shared} of {len(b)} chars; the {len(b) - shared} chars after it are re-cached")


async def test_seed_placement_on_resume_never_shows_the_new_file(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """B-3, found with CLI 2.1.332: a resumed session keeps the system prompt of its first spawn (the
    transcript's `prompt_snapshot` attachment), whatever `append` the new spawn passes. With the seed's
    placement a resumed step therefore sees a stale listing; the user placement does not have that gap."""
    rt = runtime(scripted_api, tmp_path, workspace, placement="system")
    one, two = await _two_steps(scripted_api, rt, resume=True)
    assert rt.workbench is not None
    assert "ADDED-BETWEEN-STEPS" in rt.workbench.system_append("system")  # what the new spawn passed
    assert two.system_text == one.system_text  # ...and what the model got: the first spawn's
    assert "added.py" not in two.system_text and "added.py" not in two.text


# --- B-4: the Agent prompt carries the workbench line; the coordinator's context does not -------------


async def test_relay_line_reaches_the_subagent_and_not_the_coordinator(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """B-4, S-13: the PreToolUse updatedInput appends the workbench line to the Agent prompt. The worker's
    first request holds it; the coordinator's next request does not (its history keeps the call as the
    model wrote it)."""
    rt = runtime(scripted_api, tmp_path, workspace)
    assert rt.workbench is not None
    relay = rt.workbench.relay_line()
    brief = "RELAY-TASK: count the files"
    scripted_api.script([tool_use("Agent", dispatch(brief)), text("lead done")],
                        subagents={"RELAY-TASK": [text("there are 3 files")]})
    result = await rt.run(lead(), "count files")
    assert result.ok and result.text == "lead done"
    assert relay not in brief
    (agent_id,) = scripted_api.subagent_ids
    (sub_first,) = scripted_api.subagent_requests(agent_id)
    sub_prompt = sub_first.last_user_text()
    assert f"{brief}\n\n{relay}" in sub_prompt
    assert relay not in sub_first.system_text  # subagents never see the coordinator's system prompt
    after = scripted_api.main_requests[-1]
    assert "there are 3 files" in after.result_text()
    assert relay not in after.text and str(rt.workbench.root) + ":" not in after.text
    added = len(f"\n\n{relay}")
    print(f"workbench-e2e B-4 relay: line {len(relay)} chars; {added} chars added per dispatch "
          f"(workbench path {len(str(rt.workbench.root))} chars); 0 chars in the coordinator's context")


def test_workbench_of_the_runtime_is_the_default_location(tmp_path: Path, workspace: Path) -> None:
    """S-10: the Runtime's workbench is `<workspace>/.flower`, created up front."""
    rt = Runtime(workspace, run_dir=tmp_path / "runs")
    assert isinstance(rt.workbench, Workbench) and rt.workbench.root == workspace.resolve() / ".flower"
    assert rt.workbench.scripts.is_dir() and rt.workbench.spill.is_dir()


async def test_workspace_grep_skips_spill_copies_but_a_spill_file_is_still_searchable(
    scripted_api: ScriptedAPI, make_options: Any, workspace: Path
) -> None:
    """The workbench's `.ignore` keeps spilled copies out of workspace-wide searches (no doubled hits,
    no doubled context), while the pointer's "Grep it" on the spill file itself still works."""
    wb = Workbench(workspace).ensure()
    (workspace / "src.txt").write_text("MARKER-XYZ in source\n")
    copy = wb.spill / "abc.txt"
    copy.write_text("MARKER-XYZ in a spilled copy\n")
    scripted_api.script([
        tool_use("Grep", {"pattern": "MARKER-XYZ", "output_mode": "content"}),
        tool_use("Grep", {"pattern": "MARKER-XYZ", "path": str(copy), "output_mode": "content"}),
        text("done"),
    ])
    await collect("search", make_options(tools=["Grep", "Read"], allowed_tools=["Grep", "Read"]))
    workspace_wide, direct = scripted_api.requests[1].result_text(), scripted_api.requests[2].result_text()
    assert "in source" in workspace_wide and "spilled copy" not in workspace_wide
    assert "spilled copy" in direct
