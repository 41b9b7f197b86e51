"""`AgentSpec`: what one main thread is, as plain data (S-25, S-26, L-1).

The spec sits below everything that reads it: the walls (`flower.core.guard`) derive from it and
`flower.core.agent.build_options` compiles it, so neither imports the other for its type.

Invariants (checked when a spec is made):
- A name is not empty.
- A delegating spec may not set `tools`: the CLI's tool list is session-wide and would strip its
  subagents too (checked with the real CLI: a worker's Write became "disabled for this session").
- Every agent type named in `leads` is one of the spec's own agents.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from claude_agent_sdk import AgentDefinition, HookMatcher

from flower.core.compact import CompactPolicy
from flower.errors import ConfigError

__all__ = ["AgentSpec", "Effort", "PermissionMode"]

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
    glance_tools: tuple[str, ...] = ()
    """MCP tools (full names, mcp__server__tool) that only read: allowed on a walled main thread; every other MCP tool is denied there (S-8)."""

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
