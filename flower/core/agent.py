"""`AgentSpec` and `build_options`: compiling a spec into the SDK's `ClaudeAgentOptions` (S-25, S-26).

Invariants:
- Instructions (and a prelude) are appended to the `claude_code` preset, never replacing it (S-25).
- Portable by default: the CLI reads no user or project settings (S-26).
- The walls follow from the spec (B-1): `build_options` always installs `spec_guards(spec)`, so a
  coordinator compiled without any runtime or workbench is still walled.
- `fork` or `resume_at` without `resume` is an error, not a silent no-op.
- A delegating spec may not set `tools`: the CLI's tool list is session-wide and would strip its
  subagents too (checked with the real CLI: a worker's Write became "disabled for this session").
- Lean by default: the CLI's optional built-in tools that neither the spec nor any of its agents names
  (`OPTIONAL_BUILTINS`: Workflow, ScheduleWakeup, ReportFindings, ListAgents, Skill; about 17,000 chars
  of definitions plus their system-prompt text) are left out of the session with `disallowed_tools`.
  Nothing anyone asked for is removed, and an agent that inherits every tool (`tools=None`) keeps them
  all. This is not a wall (S-5: walls are hooks): it only stops paying for tools nobody can use.
  A lean delegating spec also drops the CLI's built-in agent types (`BUILTIN_AGENTS`) it does not name,
  so the coordinator's listing shows its own workers only and it cannot dispatch around their rules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from claude_agent_sdk import AgentDefinition, ClaudeAgentOptions, HookMatcher, SessionStore

from flower.core.compact import CompactPolicy
from flower.core.guard import merge_hooks, spec_guards
from flower.errors import ConfigError

__all__ = ["BUILTIN_AGENTS", "OPTIONAL_BUILTINS", "AgentSpec", "build_options", "unused_builtins"]

OPTIONAL_BUILTINS = ("Workflow", "ScheduleWakeup", "ReportFindings", "ListAgents", "Skill")
"""Built-in tools of the bundled CLI that a flower spec never needs unless it names them."""
BUILTIN_AGENTS = ("claude", "Explore", "general-purpose", "Plan", "statusline-setup")
"""The bundled CLI's own agent types, listed to the main thread unless denied as `Agent(<type>)`."""

Effort = Literal["low", "medium", "high", "xhigh", "max"]
PermissionMode = Literal["default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto"]


@dataclass
class AgentSpec:
    """What one main thread is: its instructions, tools, subagents and walls."""

    name: str
    """A short name, used in denial reasons, step names and reports."""
    instructions: str
    """Appended to the Claude Code system prompt preset."""
    tools: list[str] | None = None
    """The tools offered at all (the CLI's `--tools`). Session-wide: it strips subagents too, so a
    delegating spec leaves it None."""
    allowed_tools: list[str] = field(default_factory=lambda: ["Read", "Glob", "Grep"])
    """Tools approved without asking. Not exclusive by itself; `whitelist_guard` makes it so for
    Bash/Write/Edit/NotebookEdit on non-delegating specs."""
    model: str | None = None
    """Model id or alias; None lets the CLI choose."""
    effort: Effort | None = None
    """Reasoning effort."""
    max_turns: int | None = None
    """Turn cap of one query."""
    max_budget_usd: float | None = None
    """Spend cap of one query."""
    permission_mode: PermissionMode | None = None
    """The CLI's permission mode; None keeps its default."""
    agents: dict[str, AgentDefinition] | None = None
    """Subagents this spec may dispatch, by name."""
    mcp_servers: dict[str, Any] = field(default_factory=dict)
    """MCP servers, as the SDK takes them."""
    hooks: dict[str, list[HookMatcher]] | None = None
    """Extra hooks, merged after flower's walls."""
    compact: CompactPolicy | None = None
    """The CLI's compaction switches; None lets the runtime decide (generations force no_summary)."""
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment for the CLI process."""
    glance: bool = False
    """A delegating spec may run read-only glance Bash commands itself."""
    delegate_only: bool = False
    """The main thread only plans and dispatches; hands-on tools are walled by a hook."""
    workbench: bool = True
    """Deliver the workbench block (rules and listing) to this spec when the runtime has a workbench."""
    leads: tuple[str, ...] = ()
    """Agent types walled like the main thread: sub-leads that dispatch further subagents (L-1)."""
    lean: bool = True
    """Leave out the CLI's optional built-in tools that neither this spec nor its agents names."""

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ConfigError("AgentSpec name must not be empty")
        if self.delegate_only and self.tools is not None:
            raise ConfigError(
                f"AgentSpec {self.name!r}: a delegating spec cannot set tools= (it is session-wide and would "
                "strip its subagents); use allowed_tools"
            )
        unknown = [lead for lead in self.leads if lead not in (self.agents or {})]
        if unknown:
            raise ConfigError(f"AgentSpec {self.name!r}: leads {unknown} are not among its agents")


def unused_builtins(spec: AgentSpec) -> list[str]:
    """The optional built-in tools nobody in `spec` names (none when an agent inherits every tool), and for a
    delegating spec the built-in agent types it does not name, as `Agent(<type>)` rules."""
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
        unused += [f"Agent({kind})" for kind in BUILTIN_AGENTS if kind not in (spec.agents or {})]
    return unused


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
) -> ClaudeAgentOptions:
    """Compile `spec` into `ClaudeAgentOptions`.

    `hooks` are the runtime's own (spill, index, relay), merged after the walls and before `spec.hooks`;
    `artifacts` names the real artifacts folder in denial reasons; `env` is overlaid on the spec's.
    """
    if (fork or resume_at is not None) and resume is None:
        raise ConfigError("fork and resume_at need resume=<session id>: there is nothing to fork or rewind")
    options = ClaudeAgentOptions(
        system_prompt=_system_prompt(spec, prelude),  # type: ignore[arg-type]
        allowed_tools=list(spec.allowed_tools),
        setting_sources=[] if portable else ["user", "project", "local"],
        hooks=merge_hooks(spec_guards(spec, artifacts=artifacts), hooks, spec.hooks) or None,  # type: ignore[arg-type]
        env={**spec.env, **(spec.compact.env() if spec.compact else {}), **(env or {})},
        mcp_servers=dict(spec.mcp_servers),
        add_dirs=[str(d) for d in add_dirs],
        disallowed_tools=unused_builtins(spec),
    )
    optional: dict[str, Any] = {
        "tools": list(spec.tools) if spec.tools is not None else None,
        "model": spec.model,
        "effort": spec.effort,
        "max_turns": spec.max_turns,
        "max_budget_usd": spec.max_budget_usd,
        "permission_mode": spec.permission_mode,
        "agents": dict(spec.agents) if spec.agents else None,
        "cwd": str(cwd) if cwd is not None else None,
        "resume": resume,
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
