"""The walls, called with hook-input dicts shaped as in docs/sdk-notes.md#hook-inputs (issue #3, S-3, S-5,
S-7, B-1, L-1)."""

from __future__ import annotations

from typing import Any

import pytest

from flower import texts
from flower.agent.options import build_options, spec_guards
from flower.agent.roles import coordinator, worker
from flower.agent.spec import AgentSpec
from flower.errors import ConfigError
from flower.walls.guard import approve_subagents, delegate_guard, merge_hooks, whitelist_guard
from tests.support.hooks import SUBAGENT_ID, hook_input

pytestmark = pytest.mark.anyio

def model_command(line: str) -> str:
    """The model's command inside the confined line the wall hands the CLI (the line itself if unconfined)."""
    import shlex

    if "/bin/bash -c " not in line:
        return line
    tail = line.split("/bin/bash -c ", 1)[1].split("; __flower_rc=", 1)[0]
    return shlex.split(tail)[0].split("\n", 1)[1]


def main_call(tool: str, **tool_input: Any) -> dict[str, Any]:
    return hook_input("PreToolUse", tool, tool_input)


def sub_call(tool: str, agent_type: str = "worker", **tool_input: Any) -> dict[str, Any]:
    return hook_input("PreToolUse", tool, tool_input, agent=SUBAGENT_ID, agent_type=agent_type)


async def decide(matcher: Any, data: dict[str, Any]) -> dict[str, Any]:
    (hook,) = matcher.hooks
    result: dict[str, Any] = await hook(data, data.get("tool_use_id"), {"signal": None})
    return result


def denial(result: dict[str, Any]) -> str | None:
    out = result.get("hookSpecificOutput") or {}
    return out.get("permissionDecisionReason") if out.get("permissionDecision") == "deny" else None


async def test_delegate_guard_denies_hands_on_tools_on_main_and_names_artifacts() -> None:
    guard = delegate_guard(allow_glance=True, artifacts="/ws/.flower/artifacts")
    assert guard.matcher == "Bash|Write|Edit|NotebookEdit|Monitor|PowerShell"
    for data in (main_call("Write", file_path="/ws/a.py", content="x"),
                 main_call("Edit", file_path="/ws/a.py", old_string="a", new_string="b"),
                 main_call("NotebookEdit", notebook_path="/ws/n.ipynb", new_source="x"),
                 # the other ways to run a command: a background watcher and the CLI's other shell
                 main_call("Monitor", command="until [ -f x ]; do sleep 2; done; rm -rf /ws", description="w"),
                 main_call("PowerShell", command="Remove-Item -Recurse /ws")):
        reason = denial(await decide(guard, data))
        assert reason and "Agent tool" in reason and "/ws/.flower/artifacts" in reason


async def test_delegate_guard_lets_every_subagent_through() -> None:
    guard = delegate_guard(allow_glance=False)
    assert await decide(guard, sub_call("Bash", command="rm -rf build")) == {}
    assert await decide(guard, sub_call("Write", file_path="/ws/a", content="x")) == {}


async def test_glance_bash_runs_on_main_and_a_mutating_one_is_denied_with_why() -> None:
    guard = delegate_guard(allow_glance=True)
    assert denial(await decide(guard, main_call("Bash", command="ls -la && pwd"))) is None
    reason = denial(await decide(guard, main_call("Bash", command="pytest -q")))
    assert reason and reason.startswith(texts.DELEGATE_DENIAL.format(where=texts.DELEGATE_DENIAL_WHERE))
    assert "glance" in reason


async def test_without_glance_even_a_read_only_bash_is_denied_on_main() -> None:
    guard = delegate_guard(allow_glance=False)
    assert denial(await decide(guard, main_call("Bash", command="ls")))


async def test_leads_are_walled_like_the_main_thread() -> None:
    """L-1: a sub-lead that dispatches further subagents stays hands-off; its hands are not."""
    guard = delegate_guard(allow_glance=True, leads=["sublead"])
    assert denial(await decide(guard, sub_call("Write", agent_type="sublead", file_path="/a", content="")))
    assert await decide(guard, sub_call("Write", agent_type="hands", file_path="/a", content="")) == {}


async def test_whitelist_guard_makes_allowed_tools_exclusive_on_main_only() -> None:
    guard = whitelist_guard(["Read", "Bash"], name="judge")
    assert guard is not None and guard.matcher == "Write|Edit|NotebookEdit|Monitor|PowerShell"
    reason = denial(await decide(guard, main_call("Write", file_path="/a", content="")))
    assert reason and "judge" in reason and "Write" in reason
    assert await decide(guard, sub_call("Write", file_path="/a", content="")) == {}
    assert whitelist_guard(["Bash", "Write", "Edit", "NotebookEdit", "Monitor", "PowerShell"]) is None


def test_spec_guards_follow_the_spec_not_the_workbench() -> None:
    """B-1: a delegate-only spec is walled whatever the runtime's workbench setting."""
    lead = coordinator("lead", "goal", {"w": worker("does work", "work")})
    matcher, mcp, fork = spec_guards(lead)["PreToolUse"]
    assert fork.matcher == "Agent|Task"
    assert matcher.matcher == "Bash|Write|Edit|NotebookEdit|Monitor|PowerShell"
    assert mcp.matcher is None  # the MCP wall sees every tool and keys on the mcp__ prefix
    plain = AgentSpec(name="reader", instructions="read", allowed_tools=["Read"])
    (matcher,) = spec_guards(plain)["PreToolUse"]
    assert matcher.matcher == "Bash|Write|Edit|NotebookEdit|Monitor|PowerShell"
    hands = AgentSpec(name="hands", instructions="x", allowed_tools=["Bash", "Write", "Edit", "NotebookEdit", "Monitor",
                                                                        "PowerShell"])
    assert spec_guards(hands) == {}


def test_merge_hooks_concatenates_in_order_and_drops_empties() -> None:
    a, b, c = whitelist_guard(["Read"]), whitelist_guard(["Bash"]), delegate_guard()
    merged = merge_hooks({"PreToolUse": [a]}, None, {"PreToolUse": [b], "PostToolUse": []}, {"PreToolUse": [c]})
    assert merged == {"PreToolUse": [a, b, c]}


def test_coordinator_tools_and_web_merge() -> None:
    """S-2, S-6: Agent/TodoWrite (and the task list that replaces it)/Read (+Bash for glance) and the workers'
    web tools, never Write/Edit."""
    web = worker("researches", "research", tools=["Read", "WebFetch", "Write", "Bash"])
    lead = coordinator("lead", "goal", {"web": web})
    assert lead.allowed_tools == ["Agent", "TodoWrite", "TaskCreate", "TaskGet", "TaskList", "TaskUpdate", "Read",
                                  "Bash", "WebFetch"]
    assert lead.delegate_only and lead.glance and lead.agents == {"web": web}
    no_glance = coordinator("lead", "goal", {"web": web}, glance=False)
    assert "Bash" not in no_glance.allowed_tools


def test_worker_inherits_the_model_and_gets_the_rules() -> None:
    definition = worker("does work", "You do work.")
    assert definition.model == "inherit"
    assert definition.prompt.startswith("You do work.") and definition.prompt.endswith(texts.WORKER_RULES)
    assert worker("d", "p", discipline=False).prompt == "p"


def test_build_options_appends_to_the_preset_and_is_portable() -> None:
    lead = coordinator("lead", "Goal: ship it.", {"w": worker("does work", "work")})
    options = build_options(lead, cwd="/ws", prelude="PRELUDE-TEXT")
    assert options.system_prompt["type"] == "preset" and options.system_prompt["preset"] == "claude_code"
    assert options.system_prompt["append"].startswith(texts.COORDINATOR_RULES)
    assert options.system_prompt["append"].endswith("Goal: ship it.\n\nPRELUDE-TEXT")
    assert options.setting_sources == [] and options.tools is None
    assert options.hooks and options.hooks["PreToolUse"][0].matcher == "Bash|Write|Edit|NotebookEdit|Monitor|PowerShell"


def test_build_options_refuses_fork_or_resume_at_without_resume() -> None:
    spec = AgentSpec(name="a", instructions="x")
    with pytest.raises(ConfigError, match="need resume"):
        build_options(spec, fork=True)
    with pytest.raises(ConfigError, match="need resume"):
        build_options(spec, resume_at="uuid")
    options = build_options(spec, resume="sid", fork=True, resume_at="u1")
    assert (options.resume, options.fork_session, options.resume_session_at) == ("sid", True, "u1")


def test_delegating_spec_may_not_set_session_wide_tools() -> None:
    with pytest.raises(ConfigError, match="session-wide"):
        AgentSpec(name="a", instructions="x", delegate_only=True, tools=["Read"])


def test_rule_lengths_are_permanent_context_cost() -> None:
    """S-4: printed so the cost is visible; bounded so it cannot silently grow."""
    sizes = {"COORDINATOR_RULES": len(texts.COORDINATOR_RULES), "WORKER_RULES": len(texts.WORKER_RULES),
             "DELEGATE_DENIAL": len(texts.DELEGATE_DENIAL)}
    print("rule lengths (chars):", sizes)
    assert sizes["COORDINATOR_RULES"] < 1500 and sizes["WORKER_RULES"] < 700
    rules = texts.COORDINATOR_RULES
    assert "specific to this task" in rules and "Do not restate" in rules and "artifacts" in rules


async def test_unattended_approval_covers_subagents_only() -> None:
    approver = approve_subagents(leads=["sublead"])
    allowed = await decide(approver, sub_call("Bash", command="make"))
    assert allowed["hookSpecificOutput"]["permissionDecision"] == "allow"
    assert await decide(approver, main_call("Bash", command="make")) == {}
    assert await decide(approver, sub_call("Bash", agent_type="sublead", command="make")) == {}


def test_lean_specs_leave_out_optional_builtins_nobody_names() -> None:
    """Not a wall (S-5): only tools that neither the spec nor any agent names are left out."""
    from flower.agent.options import BUILTIN_AGENTS, COORDINATOR_UNUSED, OPTIONAL_BUILTINS, unused_builtins

    lead = coordinator("lead", "goal", {"w": worker("works", "work", tools=["Read", "Write", "Bash"])})
    agents = [f"Agent({kind})" for kind in BUILTIN_AGENTS]
    core = [tool for tool in COORDINATOR_UNUSED if tool != "Write"]
    assert build_options(lead).disallowed_tools == list(OPTIONAL_BUILTINS) + core + agents
    named = coordinator("lead", "goal", {"Explore": worker("explores", "explore", tools=["Read"])})
    assert "Agent(Explore)" not in unused_builtins(named) and "Agent(Plan)" in unused_builtins(named)
    solo = AgentSpec(name="a", instructions="x", allowed_tools=["Read"])
    assert not any(rule.startswith("Agent(") for rule in unused_builtins(solo))
    skilled = coordinator("lead", "goal", {"w": worker("works", "work", tools=["Read"], skills=["pdf"])})
    assert "Skill" not in unused_builtins(skilled)
    asked = coordinator("lead", "goal", {"w": worker("works", "work", tools=["Read", "ListAgents"])})
    assert "ListAgents" not in unused_builtins(asked) and "Workflow" in unused_builtins(asked)
    inherits = AgentSpec(name="a", instructions="x", agents={"any": worker("d", "p", tools=None)})
    inherits.agents["any"].tools = None  # type: ignore[index]
    assert unused_builtins(inherits) == []
    assert unused_builtins(AgentSpec(name="a", instructions="x", lean=False)) == []


# --- issue #16: background glances, git pins, the MCP wall --------------------------------------------


async def test_a_glance_in_the_background_is_denied() -> None:
    """Issue #16 item 4: a background glance would outlive the Bash timeout."""
    guard = delegate_guard(allow_glance=True)
    reason = denial(await decide(guard, main_call("Bash", command="ls", run_in_background=True)))
    assert reason and texts.GLANCE_WHY["background"] in reason
    assert denial(await decide(guard, main_call("Bash", command="ls", run_in_background=False))) is None


async def test_a_git_glance_runs_with_the_repositorys_programs_pinned_off(tmp_path: Any) -> None:
    """Issue #16 item 5: the wall hands the CLI a hardened git command as updatedInput, keeping the
    other input fields, and names every filter driver the repository defines."""
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "config", "filter.evil.clean", "touch marker"], check=True)
    guard = delegate_guard(allow_glance=True)
    data = main_call("Bash", command="git status && git log -p -1", description="look")
    data["cwd"] = str(tmp_path)
    out = (await decide(guard, data))["hookSpecificOutput"]
    assert "permissionDecision" not in out
    updated = out["updatedInput"]
    assert updated["description"] == "look"
    command = updated["command"]
    assert command.count("-c core.fsmonitor=false") == 2 and "-c filter.evil.clean=" in command
    assert "log --no-ext-diff --no-textconv --ignore-submodules=all -p -1" in command


async def test_git_dash_c_through_a_symlink_out_of_the_workspace_is_denied(tmp_path: Any) -> None:
    """Issue #16 item 5: `git -C DIR` must stay inside the workspace, symlinks resolved."""
    outside = tmp_path / "outside"
    outside.mkdir()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "link").symlink_to(outside)
    (ws / "sub").mkdir()
    guard = delegate_guard(allow_glance=True)
    data = main_call("Bash", command="git -C link status")
    data["cwd"] = str(ws)
    reason = denial(await decide(guard, data))
    assert reason and "leaves the workspace" in reason
    (ws / "sub" / "up").symlink_to(outside)
    data = main_call("Bash", command="git -C sub -C up status")  # git -C a -C b works in a/b
    data["cwd"] = str(ws)
    assert "leaves the workspace" in (denial(await decide(guard, data)) or "")
    data = main_call("Bash", command="git -C sub status")
    data["cwd"] = str(ws)
    assert denial(await decide(guard, data)) is None


async def test_the_wall_refuses_words_that_lead_to_devices_or_pipes_on_disk(tmp_path: Any) -> None:
    """Issue #16 item 4: a symlink to /dev/zero, a FIFO, or a glob matching either, in the workspace."""
    import os

    (tmp_path / "zero").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "plain.txt").write_text("x")
    (tmp_path / "-n").write_text("x")
    guard = delegate_guard(allow_glance=True)
    for command in ("cat zero", "head -c 5 pipe", "wc -l < pipe", "cat p*", "cat ./z?ro", "ls -la; grep x zero"):
        data = main_call("Bash", command=command)
        data["cwd"] = str(tmp_path)
        reason = denial(await decide(guard, data))
        assert reason and "device, pipe or socket" in reason, command
    data = main_call("Bash", command="cat *")
    data["cwd"] = str(tmp_path)
    assert "matches -n" in (denial(await decide(guard, data)) or "")
    data = main_call("Bash", command="cat plain.txt pl*.txt")
    data["cwd"] = str(tmp_path)
    assert denial(await decide(guard, data)) is None


async def test_the_mcp_wall_denies_all_but_the_declared_read_only_tools_on_main() -> None:
    """Issue #16 item 7: every mcp__ tool on the main thread (and sub-leads) is denied unless the spec
    lists it in glance_tools; subagents and built-in tools are untouched."""
    lead = coordinator("lead", "goal", {"w": worker("does work", "work"), "sub": worker("leads", "lead")},
                       glance_tools=["mcp__notes__read"], leads=["sub"])
    assert lead.glance_tools == ("mcp__notes__read",)
    _, wall, _ = spec_guards(lead)["PreToolUse"]
    reason = denial(await decide(wall, main_call("mcp__notes__write", text="x")))
    assert reason and "mcp__notes__write" in reason
    assert denial(await decide(wall, sub_call("mcp__notes__write", agent_type="sub", text="x")))
    assert await decide(wall, main_call("mcp__notes__read")) == {}
    assert await decide(wall, sub_call("mcp__notes__write", text="x")) == {}
    assert await decide(wall, main_call("Read", file_path="/a")) == {}
    plain = AgentSpec(name="reader", instructions="read", allowed_tools=["Read", "mcp__x__y"])
    assert all(m.matcher is not None for m in spec_guards(plain).get("PreToolUse", []))


async def test_filter_driver_names_cannot_break_out_of_the_hardened_command(tmp_path: Any) -> None:
    """Issue #16 item 5: a driver name is repository data; it is quoted, never pasted into the shell."""
    import subprocess

    marker = tmp_path / "pwned"
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    hostile = f"x;touch {marker};y"
    subprocess.run(["git", "-C", str(tmp_path), "config", f"filter.{hostile}.clean", "cat"], check=True)
    guard = delegate_guard(allow_glance=True)
    data = main_call("Bash", command="git status")
    data["cwd"] = str(tmp_path)
    command = model_command((await decide(guard, data))["hookSpecificOutput"]["updatedInput"]["command"])
    assert f"-c 'filter.{hostile}.clean='" in command
    subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, check=False)
    assert not marker.exists()


async def test_an_option_value_naming_a_fifo_is_refused(tmp_path: Any) -> None:
    """Issue #16 item 4: `--opt=VALUE` words are looked up on disk by their value too."""
    import os

    os.mkfifo(tmp_path / "names")
    guard = delegate_guard(allow_glance=True)
    data = main_call("Bash", command="du --files0-from=names")
    data["cwd"] = str(tmp_path)
    assert "device, pipe or socket" in (denial(await decide(guard, data)) or "")


async def test_a_glance_may_not_ask_for_a_long_timeout_or_read_a_huge_file(tmp_path: Any) -> None:
    """Issue #16 item 4: the Bash tool's `timeout` is lowered to two minutes for a glance, and a reader
    may not open a (sparse) file over 2 GiB."""
    from flower.walls.guard import GLANCE_TIMEOUT_MS

    guard = delegate_guard(allow_glance=True)
    out = await decide(guard, main_call("Bash", command="ls", timeout=600_000))
    assert out["hookSpecificOutput"]["updatedInput"]["timeout"] == GLANCE_TIMEOUT_MS
    assert model_command(out["hookSpecificOutput"]["updatedInput"]["command"]) == "ls"
    with open(tmp_path / "huge.log", "wb") as handle:
        handle.truncate(3 << 30)
    data = main_call("Bash", command="wc -l huge.log")
    data["cwd"] = str(tmp_path)
    assert "over 2 GiB" in (denial(await decide(guard, data)) or "")
    data = main_call("Bash", command="ls -l huge.log")
    data["cwd"] = str(tmp_path)
    assert denial(await decide(guard, data)) is None


def test_glance_tools_must_be_mcp_tool_names() -> None:
    """Issue #16 item 7: a bare string or a built-in name is a configuration error, named."""
    with pytest.raises(ConfigError, match="glance_tools"):
        coordinator("lead", "goal", {"w": worker("does work", "work")}, glance_tools="mcp__a__b")
    with pytest.raises(ConfigError, match="glance_tools"):
        coordinator("lead", "goal", {"w": worker("does work", "work")}, glance_tools=["Write"])


def _repo(path: Any, *config: tuple[str, str]) -> None:
    import subprocess

    subprocess.run(["git", "init", "-q", str(path)], check=True)
    for key, value in config:
        subprocess.run(["git", "-C", str(path), "config", key, value], check=True)


async def test_git_glances_in_a_partial_clone_or_with_a_side_file_on_a_device_are_denied(tmp_path: Any) -> None:
    """Issue #16 item 1 (S-9): no pin stops a partial clone's lazy fetch through a repository-chosen
    transport, and `blame.ignoreRevsFile` is read before any pin clears it: such repositories refuse."""
    guard = delegate_guard(allow_glance=True)
    cases = {
        "partial": [("remote.origin.url", "ext::sh -c touch% PWN"), ("remote.origin.promisor", "true")],
        "ext": [("extensions.partialClone", "origin")],
        "revs": [("blame.ignoreRevsFile", "/dev/zero")],
        "excl": [("core.excludesFile", "/dev/zero")],
    }
    for name, config in cases.items():
        _repo(tmp_path / name, *config)
        data = main_call("Bash", command="git log -1")
        data["cwd"] = str(tmp_path / name)
        assert "cannot be made safe" in (denial(await decide(guard, data)) or ""), name
    _repo(tmp_path / "proto", ("protocol.ext.allow", "always"))
    data = main_call("Bash", command="git status")
    data["cwd"] = str(tmp_path / "proto")
    command = (await decide(guard, data))["hookSpecificOutput"]["updatedInput"]["command"]
    assert "-c protocol.ext.allow=never" in command and "status --ignore-submodules=all" in command


async def test_a_glance_without_a_working_directory_is_denied() -> None:
    """Issue #16 item 6: with no `cwd` the wall cannot look at the disk, so it refuses."""
    data = main_call("Bash", command="cat z")
    data.pop("cwd", None)
    reason = denial(await decide(delegate_guard(allow_glance=True), data))
    assert reason and texts.GLANCE_WHY["nocwd"] in reason


async def test_attached_option_values_and_git_dash_c_paths_are_looked_up_on_disk(tmp_path: Any) -> None:
    """Issue #16 item 2-3: a short option's attached value (`-fz`), any `=VALUE`, a path under
    `git -C DIR`, and every match of a glob (never the first 256 only) go through the disk check."""
    (tmp_path / "z").symlink_to("/dev/zero")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "zz").symlink_to("/dev/zero")
    guard = delegate_guard(allow_glance=True)
    for command in ("grep -fz x plain", "du -Xz .", "git diff -Oz HEAD~0", "git blame -Sz plain",
                    "tar -tf z", "file -mz plain", "git -C a hash-object zz", "git -C a grep -f zz"):
        data = main_call("Bash", command=command)
        data["cwd"] = str(tmp_path)
        assert "device, pipe or socket" in (denial(await decide(guard, data)) or ""), command
    many = tmp_path / "many"
    many.mkdir()
    for k in range(300):
        (many / f"f{k:03}").write_text("x")
    data = main_call("Bash", command="cat many/*")
    data["cwd"] = str(tmp_path)
    assert texts.GLANCE_WHY["long"] in (denial(await decide(guard, data)) or "")


async def test_a_separate_option_value_naming_a_huge_file_is_refused(tmp_path: Any) -> None:
    """Issue #16 item 3: `du -X FILE` reads FILE in full, so a separate value is size-checked like `-XFILE`."""
    with open(tmp_path / "huge", "wb") as handle:
        handle.truncate(3 << 30)
    guard = delegate_guard(allow_glance=True)
    for command in ("du -X huge .", "du -Xhuge .", "file -m huge x", "grep -f huge x plain"):
        data = main_call("Bash", command=command)
        data["cwd"] = str(tmp_path)
        assert "over 2 GiB" in (denial(await decide(guard, data)) or ""), command
    data = main_call("Bash", command="ls -l huge")
    data["cwd"] = str(tmp_path)
    assert denial(await decide(guard, data)) is None


async def test_a_coordinator_cannot_fork_itself() -> None:
    """A fork is the coordinator as a subagent, with every session tool and no worker rules: denied on the
    main thread and in leads; subagents are not walled. A worker the spec itself calls "fork" is denied too: the
    CLI tests for its own fork before it looks the name up among the spec's agents."""
    from flower.walls.guard import fork_guard

    guard = fork_guard({"w": None}, leads=["sublead"])
    fork = {"description": "f", "prompt": "p", "subagent_type": "fork"}
    assert denial(await decide(guard, main_call("Agent", **fork))) == texts.FORK_DENIAL
    assert denial(await decide(guard, sub_call("Agent", agent_type="sublead", **fork))) == texts.FORK_DENIAL
    assert await decide(guard, sub_call("Agent", agent_type="w", **fork)) == {}
    assert await decide(guard, main_call("Agent", **{**fork, "subagent_type": "w"})) == {}
    assert denial(await decide(fork_guard({"fork": None}), main_call("Agent", **fork))) == texts.FORK_DENIAL


@pytest.mark.parametrize("spelling", ["Fork", "FORK", " fork", "fork ", "\tfOrK\n", "\ufefffork", "\u00a0fork\u3000",
                                      "fo rk", "for_k", "f-o-r-k", "fork\u2014", "\uff46\uff4f\uff52\uff4b"])
async def test_every_spelling_of_fork_is_denied(spelling: str) -> None:
    """The CLI matches the fork type after NFKC, lowercasing and dropping blanks, dashes and underscores, so the
    wall does too, whatever agents the spec names."""
    from flower.walls.guard import fork_guard

    call = main_call("Agent", description="f", prompt="p", subagent_type=spelling)
    assert denial(await decide(fork_guard({"w": None}), call)) == texts.FORK_DENIAL
    assert denial(await decide(fork_guard({"fork": None}), call)) == texts.FORK_DENIAL
    assert denial(await decide(fork_guard({spelling: None}), call)) == texts.FORK_DENIAL


@pytest.mark.parametrize("kind", ["forks", "frok", "work", "fork2", None, 7, ["fork"], "general-purpose", "Explore",
                                  "Plan", "statusline-setup", "claude", "W", "w ", ""])
async def test_every_type_but_the_specs_workers_is_denied_on_the_main_thread(kind: object) -> None:
    """Not the fork, yet no worker either: the CLI's built-in types (and `general-purpose`, its default when the
    type is missing) would do hands-on work outside the workers' rules; a subagent's own dispatches are not walled."""
    from flower.walls.guard import fork_guard

    call = main_call("Agent", description="f", prompt="p", subagent_type=kind)
    reason = denial(await decide(fork_guard({"w": None}), call))
    assert reason.startswith(f"`{str(kind)[:40]}` is not one of your workers") and reason.endswith(": w.")
    assert await decide(fork_guard({"w": None}), sub_call("Agent", agent_type="w", **call["tool_input"])) == {}


async def test_a_named_worker_is_dispatched() -> None:
    from flower.walls.guard import fork_guard

    for kind in ("w", "forks", "general-purpose"):
        call = main_call("Agent", description="f", prompt="p", subagent_type=kind)
        assert await decide(fork_guard({"w": None, "forks": None, "general-purpose": None}), call) == {}
