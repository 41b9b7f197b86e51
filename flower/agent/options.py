"""`build_options`: compiling an `AgentSpec` (`flower.agent.spec`) into the SDK's `ClaudeAgentOptions`
(S-25, S-26).

Invariants:
- Instructions (and a prelude) are appended to the `claude_code` preset, never replacing it (S-25).
- Portable by default: the CLI reads no user or project settings (S-26).
- The walls follow from the spec (B-1): `build_options` always installs `spec_guards(spec)`, so a
  coordinator compiled without any runtime or workbench is still walled.
- `fork` or `resume_at` without `resume` is an error, not a silent no-op.
- Lean by default: the CLI's optional built-in tools that neither the spec nor any of its agents names
  (`OPTIONAL_BUILTINS`: Workflow, ScheduleWakeup, ReportFindings, ListAgents, Skill; about 17,000 chars
  of definitions plus their system-prompt text) are left out of the session with `disallowed_tools`.
  Nothing anyone asked for is removed, and an agent that inherits every tool (`tools=None`) keeps them
  all. This is not a wall (S-5: walls are hooks): it only stops paying for tools nobody can use.
  A lean delegating spec also drops the CLI's built-in agent types (`BUILTIN_AGENTS`) it does not name,
  so the coordinator's listing shows its own workers only and it cannot dispatch around their rules, and
  the core tools its main thread does not use and no agent names (`COORDINATOR_UNUSED`: the hands-on
  Write/Edit/NotebookEdit, walled there anyway, and the CLI's deferred tools; with none deferred the
  CLI also drops ToolSearch), and turns off the CLI's auto memory, whose prompt section tells the main
  thread to Write files it may not write, and its periodic main-thread reminders (`LEAN_ENV`). Measured in `python -m bench --only economy`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from claude_agent_sdk import ClaudeAgentOptions, HookMatcher, SessionStore

from flower.agent.output import OutputType, output_env, output_format
from flower.agent.spec import AgentSpec
from flower.errors import ConfigError
from flower.walls.dispatch import MARK
from flower.walls.guard import Hooks, delegate_guard, fork_guard, mcp_guard, merge_hooks, whitelist_guard

__all__ = [
    "BUILTIN_AGENTS", "COORDINATOR_UNUSED", "LEAN_ENV", "OPTIONAL_BUILTINS", "build_options", "check_isolation", "isolated_types",
    "lean_env", "require_git", "spec_guards", "unused_builtins",
]

OPTIONAL_BUILTINS = ("Workflow", "ScheduleWakeup", "ReportFindings", "ListAgents", "Skill")
"""Built-in tools of the bundled CLI that a flower spec never needs unless it names them."""
BUILTIN_AGENTS = ("claude", "Explore", "general-purpose", "Plan", "statusline-setup")
"""The bundled CLI's own agent types, listed to the main thread unless denied as `Agent(<type>)`."""
COORDINATOR_UNUSED = (
    "Write", "Edit", "NotebookEdit",  # hands-on: walled on a delegating main thread anyway
    # the CLI's deferred tools (named in every request, loaded through ToolSearch): scheduling, worktree
    # switching, script monitors, agent messaging, stopping background tasks; the task list itself
    # (TodoWrite's successor) is the coordinator's own (`roles.COORDINATOR_TOOLS`) and is never cut
    "CronCreate", "CronDelete", "CronList", "EnterWorktree", "ExitWorktree", "Monitor", "SendMessage",
    "TaskStop", "WebFetch", "WebSearch",
)
"""Core tools of the bundled CLI that a coordinator's main thread does not use: a lean delegating spec
leaves out those no agent names. Left out, the rest of the deferred set goes too: with nothing deferred,
the CLI drops ToolSearch and its placeholder (an MCP server's tools are deferred, so it keeps them)."""


def unused_builtins(spec: AgentSpec) -> list[str]:
    """The optional built-in tools nobody in `spec` names (none when an agent inherits every tool), and for a
    delegating spec the `COORDINATOR_UNUSED` tools nobody names and the built-in agent types it does not
    name, as `Agent(<type>)` rules."""
    if not spec.lean:
        return []
    needed = set(spec.allowed_tools) | set(spec.tools or ())
    for agent in (spec.agents or {}).values():
        if agent.tools is None:
            return []
        needed.update(agent.tools)
        if agent.skills:
            needed.add("Skill")
    unused = [tool for tool in OPTIONAL_BUILTINS if tool not in needed]
    if spec.delegate_only:
        unused += [tool for tool in COORDINATOR_UNUSED if tool not in needed]
        unused += [f"Agent({kind})" for kind in BUILTIN_AGENTS if kind not in (spec.agents or {})]
    return unused


LEAN_ENV = {
    "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1",
    "CLAUDE_CODE_SILENT_TURN_REMINDER": "0",
    "CLAUDE_CODE_TODO_REMINDER_MODE": "off",
}
"""The bundled CLI's switches for a lean delegating spec: no auto-memory section (about 2,100 chars; its
memory would be written with the walled Write), no "The user hasn't heard from you in a while" reminder
and no "The task tools haven't been used recently" reminder, which land in the main thread's history
every few turns (about 60 chars a turn measured over 40 turns) and would be carried by every later turn."""


def lean_env(spec: AgentSpec) -> dict[str, str]:
    """The CLI switches a lean spec sets (its own `env` overrides them): `LEAN_ENV` for a delegating main
    thread."""
    if spec.lean and spec.delegate_only:
        return dict(LEAN_ENV)
    return {}


def _system_prompt(spec: AgentSpec, prelude: str) -> dict[str, str]:
    append = "\n\n".join(part.strip() for part in (spec.instructions, prelude) if part and part.strip())
    return {"type": "preset", "preset": "claude_code", "append": append}


def build_options(
    spec: AgentSpec,
    *,
    cwd: str | Path | None = None,
    session_store: SessionStore | None = None,
    resume: str | None = None,
    fork: bool = False,
    resume_at: str | None = None,
    prelude: str = "",
    add_dirs: Sequence[str | Path] = (),
    portable: bool = True,
    flush: Literal["eager", "batched"] = "eager",
    hooks: Mapping[str, list[HookMatcher]] | None = None,
    artifacts: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    output_type: OutputType | None = None,
) -> ClaudeAgentOptions:
    """Compile `spec` into `ClaudeAgentOptions`.

    `hooks` are the runtime's own (spill, index, relay), merged after the walls and before `spec.hooks`;
    `artifacts` names the real artifacts folder in denial reasons; `env` is overlaid on the spec's;
    `output_type` is what the final reply must satisfy (`flower.agent.output`).
    """
    if (fork or resume_at is not None) and resume is None:
        raise ConfigError("fork and resume_at need resume=<session id>: there is nothing to fork or rewind")
    options = ClaudeAgentOptions(
        system_prompt=_system_prompt(spec, prelude),  # type: ignore[arg-type]
        allowed_tools=list(spec.allowed_tools),
        setting_sources=[] if portable else ["user", "project", "local"],
        hooks=merge_hooks(spec_guards(spec, artifacts=artifacts), hooks, spec.hooks) or None,  # type: ignore[arg-type]
        env={**lean_env(spec), **spec.env, **(spec.compact.env() if spec.compact else {}), **(env or {}),
             **(output_env() if output_type is not None else {})},
        mcp_servers=dict(spec.mcp_servers),
        add_dirs=[str(d) for d in add_dirs],
        disallowed_tools=unused_builtins(spec),
    )
    optional: dict[str, Any] = {
        "tools": list(spec.tools) if spec.tools is not None else None,
        "model": spec.model,
        "fallback_model": spec.fallback_model,
        "effort": spec.effort,
        "max_turns": spec.max_turns,
        "max_budget_usd": spec.max_budget_usd,
        "permission_mode": spec.permission_mode,
        "agents": dict(spec.agents) if spec.agents else None,
        "cwd": str(cwd) if cwd is not None else None,
        "resume": resume,
        "output_format": output_format(output_type) if output_type is not None else None,
    }
    for name, value in optional.items():
        if value is not None:
            setattr(options, name, value)
    if resume is not None:
        options.fork_session = fork
        options.resume_session_at = resume_at
    if session_store is not None:
        options.session_store = session_store
        options.session_store_flush = flush
    return options


def spec_guards(spec: AgentSpec, *, artifacts: str | Path | None = None) -> Hooks:
    """The walls a spec calls for, derived from the spec alone (B-1)."""
    if spec.delegate_only:
        return {"PreToolUse": [delegate_guard(allow_glance=spec.glance, artifacts=artifacts, leads=spec.leads),
                               mcp_guard(spec.glance_tools, leads=spec.leads),
                               fork_guard(spec.agents or {}, leads=spec.leads)]}
    matcher = whitelist_guard(spec.allowed_tools, name=spec.name)
    return {"PreToolUse": [matcher]} if matcher else {}


def isolated_types(spec: AgentSpec) -> frozenset[str]:
    """The worker types of `spec` whose dispatches are isolated."""
    return frozenset(name for name, d in (spec.agents or {}).items() if getattr(d, MARK, False))


def check_isolation(spec: AgentSpec, workspace: Path) -> None:
    """Refuse, in one line, isolated workers over a workspace that is not inside a git work tree."""
    names = isolated_types(spec)
    if names:
        require_git(workspace, names)


def require_git(workspace: Path, names: Collection[str]) -> None:
    """Refuse, in one line, a workspace that is not a git work tree with a commit: isolated workers (`names`)
    run in git worktrees."""
    try:
        probe = subprocess.run(["git", "-C", str(workspace), "rev-parse", "--is-inside-work-tree"],
                               capture_output=True, text=True, timeout=30, check=False)
        inside = probe.returncode == 0 and probe.stdout.strip() == "true"
        head = subprocess.run(["git", "-C", str(workspace), "rev-parse", "--verify", "--quiet", "HEAD"],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        inside, head = False, None
    if inside and head is not None and head.returncode != 0:
        raise ConfigError(f"workspace {workspace} has no commit yet: a git worktree starts from one; commit "
                          "first, or do not isolate the workers")
    if not inside:
        raise ConfigError(
            f"workspace {workspace} is not a git work tree: isolated workers ({', '.join(sorted(names))}) "
            "run in git worktrees; run `git init` there and commit, or do not isolate them"
        )
