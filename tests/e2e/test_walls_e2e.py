"""The walls through the real CLI (issue #3, S-3, S-7, B-1, docs/sdk-notes.md#denials).

The coordinator is compiled with `build_options` alone: no Runtime, no workbench (B-1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import InMemorySessionStore

from flower.agent.options import build_options
from flower.agent.roles import coordinator, worker
from flower.agent.spec import AgentSpec
from flower.testing import ScriptedAPI, collect, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def _denial_entries(store: InMemorySessionStore) -> list[dict[str, Any]]:
    entries = [e for key, rows in store._store.items() for e in rows]  # noqa: SLF001 - reading a test double
    return [e for e in entries if e.get("toolDenialKind")]


async def test_coordinator_main_thread_is_walled_and_glance_runs(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    target = workspace / "made-by-main.txt"
    forbidden = f"echo hands-on > {target}"
    scripted_api.script(
        [
            tool_use("Write", {"file_path": str(target), "content": "x"}),
            tool_use("Edit", {"file_path": str(workspace / "seed.txt"), "old_string": "a", "new_string": "b"}),
            tool_use("Bash", {"command": forbidden}),
            tool_use("Bash", {"command": "ls && git status 2>&1 | head -3"}),
            tool_use("Agent", {"description": "do it", "prompt": "HANDS-TASK: write the file",
                               "subagent_type": "hands", "run_in_background": False}),
            text("coordinated"),
        ],
        subagents={"HANDS-TASK": [tool_use("Bash", {"command": forbidden}), text("wrote it")]},
    )
    (workspace / "seed.txt").write_text("a\n")
    lead = coordinator("lead", "Goal: get the file written.", {"hands": worker("does the work", "You work.")})
    store = InMemorySessionStore()
    options = build_options(lead, cwd=workspace, session_store=store)
    options.env = scripted_api.cli_env(tmp_path / "home")
    run = await collect("start", options)

    assert run.result.result == "coordinated"
    main = scripted_api.main_requests
    for request in main[1:4]:
        assert "Dispatch a subagent with the Agent tool" in request.result_text()
    assert "glance" in main[3].result_text()
    assert "seed.txt" in main[4].result_text()  # the glance ran: ls listed the workspace
    assert target.read_text() == "hands-on\n"  # written by the worker, not by the main thread
    assert (workspace / "seed.txt").read_text() == "a\n"
    kinds = [e["toolDenialKind"] for e in _denial_entries(store)]
    assert kinds == ["permission-rule"] * 3


async def test_non_delegating_spec_gets_write_denied_by_the_whitelist(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    target = workspace / "nope.txt"
    scripted_api.script([tool_use("Write", {"file_path": str(target), "content": "x"}), text("gave up")])
    spec = AgentSpec(name="reader", instructions="Only read.", allowed_tools=["Read"], permission_mode="acceptEdits")
    options = build_options(spec, cwd=workspace)
    options.env = scripted_api.cli_env(tmp_path / "home")
    run = await collect("write something", options)
    assert run.result.result == "gave up"
    assert not target.exists()
    assert "not among the tools this agent (reader) may use" in scripted_api.requests[1].result_text()


@pytest.mark.parametrize("merged", [True, False])
async def test_a_workers_webfetch_is_approved_through_the_coordinator(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path, https_page: tuple[str, Path], merged: bool
) -> None:
    """S-6: the coordinator carries its workers' web tools in allowed_tools; without that, an unattended
    worker's WebFetch needs an approval nobody gives (the control case, merged=False)."""
    url, cert = https_page
    scripted_api.script(
        [tool_use("Agent", {"description": "fetch", "prompt": "FETCH-TASK: read the page",
                            "subagent_type": "web", "run_in_background": False}),
         text("coordinated")],
        subagents={"FETCH-TASK": [
            tool_use("WebFetch", {"url": url, "prompt": "summarise"}),
            *([text("the page lists 200 paragraphs")] if merged else []),  # WebFetch's own model call
            text("reported")]},
    )
    lead = coordinator("lead", "Goal: read a page.", {"web": worker("reads the web", "You read.",
                                                                     tools=["WebFetch", "Read"])})
    if not merged:
        lead.allowed_tools.remove("WebFetch")
    options = build_options(lead, cwd=workspace)
    options.env = scripted_api.cli_env(tmp_path / "home", NODE_EXTRA_CA_CERTS=str(cert))
    options.settings = '{"skipWebFetchPreflight": true}'
    run = await collect("go", options)
    assert run.result.result == "coordinated"
    seen = scripted_api.subagent_requests()[-1].result_text()
    if merged:
        assert "WebFetch" in coordinator("l", "g", {"web": worker("d", "p", tools=["WebFetch"])}).allowed_tools
        assert "200 paragraphs" in seen
    else:
        assert "200 paragraphs" not in seen and "permission" in seen.lower()


async def test_a_lean_coordinator_pays_only_for_tools_someone_names(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """The optional built-ins nobody names leave every main request; the worker's own tools stay."""
    from flower.agent.options import OPTIONAL_BUILTINS

    made = workspace / "made.txt"
    sizes = {}
    for lean in (False, True):
        scripted_api.script(
            [tool_use("Agent", {"description": "write", "prompt": f"WRITE-{lean}: write it", "subagent_type": "w",
                                "run_in_background": False}), text("done")],
            subagents={f"WRITE-{lean}": [tool_use("Write", {"file_path": str(made), "content": str(lean)}),
                                         text("written")]},
        )
        lead = coordinator("lead", "Goal: a file.", {"w": worker("writes", "You write.", tools=["Write", "Read"])})
        lead.lean = lean
        options = build_options(lead, cwd=workspace)
        options.env = scripted_api.cli_env(tmp_path / "home")
        run = await collect("go", options)
        assert run.result.result == "done" and made.read_text() == str(lean)
        main = scripted_api.main_requests[-2]
        sizes[lean] = main.size
        offered = [tool for tool in OPTIONAL_BUILTINS if tool in main.tool_names]
        assert offered == ([] if lean else list(OPTIONAL_BUILTINS))  # the bundled CLI offers them all
        assert {"Agent", "Read", "Write"} <= set(main.tool_names)
        listing = main.text[main.text.find("Available agent types"):]
        assert ("- Explore:" in listing) is not lean and "- w: writes" in listing
    print(f"main request bytes: {sizes[False]:,} -> {sizes[True]:,}")
    assert sizes[True] < sizes[False] - 10_000


async def test_a_sub_lead_is_walled_while_its_own_hands_work(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """L-1: a lead named in `leads` may dispatch further subagents but is denied hands-on tools itself."""
    target = workspace / "by-hands.txt"
    scripted_api.script(
        [tool_use("Agent", {"description": "lead it", "prompt": "LEAD-TASK: get the file made",
                            "subagent_type": "sublead", "run_in_background": False}),
         text("coordinated")],
        subagents={
            "LEAD-TASK": [tool_use("Bash", {"command": f"touch {target}"}),
                          tool_use("Agent", {"description": "make it", "prompt": "HANDS-TASK: touch the file",
                                             "subagent_type": "hands", "run_in_background": False}),
                          text("lead done")],
            "HANDS-TASK": [tool_use("Bash", {"command": f"echo made > {target}"}), text("made")],
        },
    )
    sublead = worker("Leads a part of the work.", "You lead.", tools=["Agent", "Read", "Bash"])
    hands = worker("Does the work.", "You work.", tools=["Bash"])
    lead = coordinator("lead", "Goal: the file.", {"sublead": sublead, "hands": hands}, leads=["sublead"])
    options = build_options(lead, cwd=workspace)
    options.env = scripted_api.cli_env(tmp_path / "home")
    run = await collect("go", options)
    assert run.result.result == "coordinated"
    lead_id, hands_id = scripted_api.subagent_ids
    assert "Dispatch a subagent" in scripted_api.subagent_requests(lead_id)[1].result_text()
    assert target.read_text() == "made\n"
    assert "made" in scripted_api.subagent_requests(lead_id)[-1].result_text()
