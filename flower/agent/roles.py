"""Roles: `worker()` defines a subagent, `coordinator()` a main thread that only plans and dispatches (S-1, S-2, S-6).

Roles attach no hooks themselves: the walls follow from the spec (`delegate_only`, `glance`) when it is
compiled (`flower.agent.options.spec_guards`).

Invariants:
- Workers are never downgraded: `model="inherit"` unless asked otherwise (S-1).
- The coordinator's approved tools are exactly Agent, TodoWrite, Read, plus Bash when `glance` (gated by
  the glance predicate), plus its workers' read-only web tools (S-6), plus the MCP tools it declares
  read-only (`glance_tools`) — never Write or Edit.
- The coordinator runs in `acceptEdits` mode by default: its own edits are walled by the hook, and its
  workers' file edits inside the workspace need no human to approve them in an unattended run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from claude_agent_sdk import AgentDefinition, HookMatcher

from flower import texts
from flower.agent.compact import CompactPolicy
from flower.agent.spec import AgentSpec, Effort, PermissionMode, check_common, check_tools
from flower.errors import ConfigError
from flower.walls.approval import Predicate, check_rules, mark_approve
from flower.walls.dispatch import mark_isolated
from flower.walls.guard import merge_hooks

__all__ = ["COORDINATOR_TOOLS", "WEB_TOOLS", "WORKER_TOOLS", "ToolChannel", "coordinator", "worker"]

COORDINATOR_TOOLS = ("Agent", "TodoWrite", "TaskCreate", "TaskGet", "TaskList", "TaskUpdate", "Read")
"""The seed's coordinator tools (Agent, TodoWrite, Read; the glance Bash is added apart). The bundled CLI
offers the task list (TaskCreate/Get/List/Update) in place of TodoWrite, so both spellings are named:
a coordinator keeps its plan whichever one the CLI has."""
WEB_TOOLS = ("WebFetch", "WebSearch")
WORKER_TOOLS = ("Read", "Write", "Edit", "Bash", "Glob", "Grep", "WebFetch", "WebSearch")


class ToolChannel(Protocol):
    """What `coordinator(channel=...)` needs of a channel (`flower.human.HumanChannel` is one): its MCP
    server and the full names of its tools, all safe on the main thread."""

    @property
    def tool_names(self) -> tuple[str, ...]: ...

    def mcp_servers(self) -> Mapping[str, Any]: ...

    def tool_env(self) -> Mapping[str, str]: ...

    def hooks(self) -> Mapping[str, list[HookMatcher]]: ...


def worker(
    description: str,
    prompt: str,
    *,
    tools: Sequence[str] | None = None,
    model: str = "inherit",
    effort: Effort | None = None,
    max_turns: int | None = None,
    permission_mode: PermissionMode | None = None,
    skills: Sequence[str] | None = None,
    discipline: bool = True,
    isolate: bool = False,
    approve: Sequence[str | Predicate] | None = None,
) -> AgentDefinition:
    """A subagent: `description` is what the coordinator chooses by; the worker rules are appended to `prompt`.

    `isolate=True` runs each of its dispatches in its own git worktree (L-13, `flower.walls.dispatch`).
    `approve` rules (L-15, `flower.walls.approval`) make this worker's matching calls wait for a human's yes
    on the coordinator's channel.
    """
    if not isinstance(description, str) or not isinstance(prompt, str) or not description.strip() \
            or not prompt.strip():
        raise ConfigError("worker() needs a non-empty description and prompt (both strings)")
    owner = f"worker {description.strip()[:40]!r}"
    names = check_tools(owner, "tools", tools, optional=True)
    check_common(owner, model=model, effort=effort, max_turns=max_turns, permission_mode=permission_mode)
    if skills is not None and (isinstance(skills, str) or not all(isinstance(x, str) for x in skills)):
        raise ConfigError(f"{owner}: skills must be a list of skill names, not {skills!r}")
    for flag, value in (("discipline", discipline), ("isolate", isolate)):
        if not isinstance(value, bool):
            raise ConfigError(f"{owner}: {flag} must be True or False, not {value!r}")
    if isinstance(approve, (list, tuple)):  # a typo in a tool name first, with its suggestion
        check_tools(owner, "approve", [rule for rule in approve if isinstance(rule, str)])
    rules = check_rules(owner, approve)
    body = prompt.strip() + ("\n\n" + texts.WORKER_RULES if discipline else "")
    definition = AgentDefinition(
        description=description.strip(),
        prompt=body,
        tools=names if names is not None else list(WORKER_TOOLS),
        model=model,
        effort=effort,
        maxTurns=max_turns,
        permissionMode=permission_mode,
        skills=list(skills) if skills is not None else None,
    )
    if rules:
        mark_approve(definition, rules)
    return mark_isolated(definition) if isolate else definition


def _merged_web_tools(workers: Mapping[str, AgentDefinition]) -> list[str]:
    return [tool for tool in WEB_TOOLS if any(tool in (w.tools or ()) for w in workers.values())]


def _check_coordinator(name: str, instructions: object, workers: object, glance_tools: object) -> None:
    """One line naming the coordinator for each argument of the wrong kind, before anything is built."""
    if not isinstance(workers, Mapping):
        raise ConfigError(f"coordinator {name!r}: workers must be a mapping of name -> worker(...), not "
                          f"{type(workers).__name__}")
    if not workers:
        raise ConfigError(f"coordinator {name!r} needs at least one worker to dispatch to")
    for key, value in workers.items():
        if not isinstance(key, str) or not key.strip():
            raise ConfigError(f"coordinator {name!r}: worker names must be non-empty strings, not {key!r}")
        if not isinstance(value, AgentDefinition):
            raise ConfigError(f"coordinator {name!r}: worker {key!r} is a {type(value).__name__}, expected "
                              "worker(description, prompt, ...) (an AgentDefinition)")
    if not isinstance(instructions, str):
        raise ConfigError(f"coordinator {name!r}: instructions must be a string, not {type(instructions).__name__}")
    if isinstance(glance_tools, str):
        raise ConfigError(f"coordinator {name!r}: glance_tools must be a list of MCP tool names, not the string "
                          f"{glance_tools!r}")


def coordinator(
    name: str,
    instructions: str,
    workers: Mapping[str, AgentDefinition],
    *,
    glance: bool = True,
    model: str | None = None,
    fallback_model: str | None = None,
    effort: Effort | None = None,
    max_turns: int | None = None,
    max_budget_usd: float | None = None,
    permission_mode: PermissionMode = "acceptEdits",
    compact: CompactPolicy | None = None,
    hooks: dict[str, list[HookMatcher]] | None = None,
    env: Mapping[str, str] | None = None,
    leads: Sequence[str] = (),
    mcp_servers: Mapping[str, Any] | None = None,
    glance_tools: Sequence[str] = (),
    channel: ToolChannel | None = None,
    approve: Sequence[str | Predicate] = (),
) -> AgentSpec:
    """A delegate-only main thread over `workers`; the coordinator rules precede `instructions`.

    `glance_tools` names the MCP tools (`mcp__server__tool`) that only read: the main thread may call
    those itself (they join `allowed_tools`); every other MCP tool is denied there (S-8).

    `channel` (a `HumanChannel`) gives the main thread its ask and inbox tools: its server joins
    `mcp_servers`, its tools are approved and named glance-safe, so the main-thread wall lets them through
    while it denies every other MCP tool. Asking is a main-thread act: a worker that needs a decision reports it.

    `fallback_model` is the model the session switches to when `model` is overloaded or unavailable; the
    CLI applies it to the workers too (a worker on its own model falls back to it as well).

    `approve` rules (L-15) make every matching call of the session, the workers' included, wait for a human's
    yes on `channel`; a worker's own rules (`worker(approve=)`) cover only its calls.
    """
    _check_coordinator(name, instructions, workers, glance_tools)
    allowed = list(COORDINATOR_TOOLS) + (["Bash"] if glance else []) + _merged_web_tools(workers)
    allowed += [tool for tool in glance_tools if tool not in allowed]
    servers, extra_env = dict(mcp_servers or {}), dict(env or {})
    if channel is not None:
        allowed += [tool for tool in channel.tool_names if tool not in allowed]
        servers.update(channel.mcp_servers())
        extra_env = {**channel.tool_env(), **extra_env}
        hooks = merge_hooks(channel.hooks(), hooks)
    return AgentSpec(
        name=name,
        instructions=texts.COORDINATOR_RULES + "\n\n" + instructions.strip(),
        allowed_tools=allowed,
        model=model,
        fallback_model=fallback_model,
        effort=effort,
        max_turns=max_turns,
        max_budget_usd=max_budget_usd,
        permission_mode=permission_mode,
        agents=dict(workers),
        mcp_servers=servers,
        hooks=hooks,
        compact=compact,
        env=extra_env,
        glance=glance,
        delegate_only=True,
        workbench=True,
        leads=tuple(leads),
        glance_tools=tuple(glance_tools) + (tuple(channel.tool_names) if channel is not None else ()),
        channel=channel,
        approve=tuple(approve) if isinstance(approve, (list, tuple)) else approve,  # type: ignore[arg-type]
    )
