"""`AgentSpec`: what one main thread is, as plain data (S-25, S-26, L-1).

The spec sits below everything that reads it: the walls (`flower.walls.guard`) derive from it and
`flower.agent.options.build_options` compiles it, so neither imports the other for its type.

Invariants (checked when a spec is made):
- A name is not empty.
- A delegating spec may not set `tools`: the CLI's tool list is session-wide and would strip its
  subagents too (checked with the real CLI: a worker's Write became "disabled for this session").
- Every agent type named in `leads` is one of the spec's own agents.
- Approval rules (`approve`, and a worker's) are read when the spec is made, and need a `channel` that can
  ask (one with an `approve` method, as `flower.human.HumanChannel`) to put their questions on (L-15).
- Every field has the type it says (a bare string where a list of tool names belongs is an error, not a
  list of letters), and every tool name is one the bundled CLI knows (`CLI_TOOLS`; `mcp__…` names and
  permission rules like `Bash(git:*)` are checked by their tool part). Errors name the field.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from claude_agent_sdk import AgentDefinition, HookMatcher

from flower.agent.compact import CompactPolicy
from flower.errors import ConfigError
from flower.walls.approval import Predicate, Rule, check_rules, worker_rules

__all__ = ["CLI_TOOLS", "AgentSpec", "Effort", "PermissionMode", "check_tools"]

Effort = Literal["low", "medium", "high", "xhigh", "max"]
PermissionMode = Literal["default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto"]

CLI_TOOLS = frozenset({
    # offered by the bundled CLI 2.1.332 (its init message, and `tools=` for Glob/Grep)
    "Agent", "Task", "Bash", "Read", "Write", "Edit", "Glob", "Grep", "NotebookEdit", "WebFetch", "WebSearch",
    "TodoWrite", "ToolSearch", "Monitor", "SendMessage", "TaskStop", "CronCreate", "CronDelete", "CronList",
    "EnterWorktree", "ExitWorktree", "ListAgents", "ReportFindings", "ScheduleWakeup", "Skill", "Workflow",
    # named by the same binary, offered in other modes or versions
    "AskUserQuestion", "ExitPlanMode", "EnterPlanMode", "MultiEdit", "LS", "BashOutput", "KillShell",
    "NotebookRead", "TaskCreate", "TaskGet", "TaskList", "TaskUpdate", "TaskOutput", "LSP", "PowerShell",
})
"""Tool names the bundled CLI knows; a name outside it is a typo, not a tool the session silently lacks."""


def check_tools(owner: str, field_name: str, value: Any, *, optional: bool = False) -> list[str] | None:
    """`value` as a list of known tool names, or a ConfigError naming `owner`'s `field_name`."""
    if value is None and optional:
        return None
    if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)):
        shown = f"the string {value!r} (write [{value!r}])" if isinstance(value, str) else type(value).__name__
        raise ConfigError(f"{owner}: {field_name} must be a list of tool names, not {shown}")
    names = list(value)
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"{owner}: {field_name} holds {name!r}, not a tool name")
        base = name.split("(", 1)[0].strip()
        if base.startswith("mcp__") or base in CLI_TOOLS:
            continue
        close = difflib.get_close_matches(base, sorted(CLI_TOOLS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"{owner}: {field_name} names {name!r}, which is not a tool of the Claude Code CLI{hint}")
    return names


def _check_type(owner: str, field_name: str, value: Any, kinds: type | tuple[type, ...], what: str) -> None:
    if value is not None and (not isinstance(value, kinds) or isinstance(value, bool) and bool not in
                              (kinds if isinstance(kinds, tuple) else (kinds,))):
        raise ConfigError(f"{owner}: {field_name} must be {what}, not {type(value).__name__} {value!r}"[:300])


def check_common(owner: str, *, model: Any = None, effort: Any = None, max_turns: Any = None,
                 permission_mode: Any = None) -> None:
    """The fields a spec and a worker share."""
    _check_type(owner, "model", model, str, "a model id or alias (str)")
    if effort is not None and effort not in get_args(Effort):
        raise ConfigError(f"{owner}: effort must be one of {', '.join(get_args(Effort))}, not {effort!r}")
    _check_type(owner, "max_turns", max_turns, int, "a positive int")
    if isinstance(max_turns, int) and max_turns < 1:
        raise ConfigError(f"{owner}: max_turns must be at least 1, not {max_turns}")
    if permission_mode is not None and permission_mode not in get_args(PermissionMode):
        raise ConfigError(f"{owner}: permission_mode must be one of {', '.join(get_args(PermissionMode))}, "
                          f"not {permission_mode!r}")


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
    fallback_model: str | None = None
    """The model the CLI switches to when `model` is overloaded, failing or unavailable (its
    `--fallback-model`): for the rest of that turn, for the main thread and every worker (the CLI has no
    per-worker fallback); the next turn tries `model` again. It must differ from `model`."""
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
    """Leave out the CLI's optional built-in tools that neither this spec nor its agents names; a delegating
    spec also the core tools its main thread does not use and no agent names, the CLI's agent types it does
    not name, and the auto-memory prompt section (`flower.agent.options.unused_builtins`, `lean_env`). Not a wall."""
    glance_tools: tuple[str, ...] = ()
    """MCP tools (full names, mcp__server__tool) that only read: allowed on a walled main thread; every other MCP tool is denied there (S-8)."""
    channel: Any = None
    """The human channel whose tools this spec carries (`coordinator(channel=)`, the clarifier): the `Runtime`
    that runs the spec binds it to itself (`channel.bind(runtime)`: its run dir's or store's mailbox, its run
    id), so `flower asks / answer / say` reach it; a channel bound already keeps its binding."""
    approve: tuple[str | Predicate | Rule, ...] = ()
    """Approval rules (L-15, `flower.walls.approval`): a call of this session (the main thread's or any
    worker's) that one matches waits for a human's yes on `channel`; a no or no answer denies it. Tool names,
    scoped rules such as "Bash(git push:*)", or predicates f(tool_name, tool_input) -> bool; read into `Rule`s."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError(f"AgentSpec name must be a non-empty string, not {self.name!r}")
        self._check_fields()
        if self.delegate_only and self.tools is not None:
            raise ConfigError(
                f"AgentSpec {self.name!r}: a delegating spec cannot set tools= (it is session-wide and would "
                "strip its subagents); use allowed_tools"
            )
        unknown = [lead for lead in self.leads if lead not in (self.agents or {})]
        if unknown:
            raise ConfigError(f"AgentSpec {self.name!r}: leads {unknown} are not among its agents")
        self._check_approve()

    def _check_approve(self) -> None:
        owner = f"AgentSpec {self.name!r}"
        if isinstance(self.approve, (list, tuple)):  # a typo in a tool name first, with its suggestion
            check_tools(owner, "approve", [rule for rule in self.approve if isinstance(rule, str)])
        self.approve = check_rules(owner, self.approve)
        asking = [f"worker {name!r}" for name, d in (self.agents or {}).items() if worker_rules(d)]
        if self.approve:
            asking.insert(0, "it")
        if asking and not callable(getattr(self.channel, "approve", None)):
            raise ConfigError(f"{owner}: {', '.join(asking)} has approval rules, which ask a human: give it a "
                              "channel (channel=HumanChannel(), or coordinator(..., channel=...))")

    def _check_fields(self) -> None:
        owner = f"AgentSpec {self.name!r}"
        _check_type(owner, "instructions", self.instructions, str, "a string")
        check_tools(owner, "tools", self.tools, optional=True)
        check_tools(owner, "allowed_tools", self.allowed_tools)
        check_common(owner, model=self.model, effort=self.effort, max_turns=self.max_turns,
                     permission_mode=self.permission_mode)
        _check_type(owner, "fallback_model", self.fallback_model, str, "a model id or alias (str)")
        if self.fallback_model is not None and self.fallback_model == self.model:
            raise ConfigError(f"{owner}: fallback_model is the same as model ({self.model!r}); name another model")
        _check_type(owner, "max_budget_usd", self.max_budget_usd, (int, float), "a positive number of dollars")
        if self.max_budget_usd is not None and self.max_budget_usd <= 0:
            raise ConfigError(f"{owner}: max_budget_usd must be positive, not {self.max_budget_usd}")
        if self.agents is not None:
            if not isinstance(self.agents, Mapping):
                raise ConfigError(f"{owner}: agents must be a mapping of name -> worker(...), not "
                                  f"{type(self.agents).__name__}")
            for agent_name, agent in self.agents.items():
                if not isinstance(agent, AgentDefinition):
                    raise ConfigError(f"{owner}: agent {agent_name!r} is a {type(agent).__name__}, not a "
                                      "worker(...) (an AgentDefinition)")
                check_tools(f"{owner}, agent {agent_name!r}", "tools", agent.tools, optional=True)
        _check_type(owner, "mcp_servers", self.mcp_servers, Mapping, "a mapping of name -> server")
        _check_type(owner, "hooks", self.hooks, Mapping, "a mapping of event -> [HookMatcher]")
        _check_type(owner, "compact", self.compact, CompactPolicy, "a CompactPolicy")
        if not isinstance(self.env, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in self.env.items()):
            raise ConfigError(f"{owner}: env must be a mapping of str -> str")
        for flag in ("glance", "delegate_only", "workbench", "lean"):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigError(f"{owner}: {flag} must be True or False, not {getattr(self, flag)!r}")
        if isinstance(self.leads, str) or not isinstance(self.leads, (list, tuple)):
            raise ConfigError(f"{owner}: leads must be a list of agent names, not {self.leads!r}")
        self.leads = tuple(self.leads)
        if isinstance(self.glance_tools, str) or not isinstance(self.glance_tools, (list, tuple)) or not all(
                isinstance(tool, str) and tool.startswith("mcp__") for tool in self.glance_tools):
            raise ConfigError(f"{owner}: glance_tools must be a list of MCP tool names (mcp__server__tool), "
                              f"not {self.glance_tools!r}"[:300])
        self.glance_tools = tuple(self.glance_tools)
