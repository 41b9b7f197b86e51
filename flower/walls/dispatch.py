"""Rewrites of the Agent tool's input on the main thread, chained into ONE PreToolUse hook (L-13, B-4).

The CLI lets each hook's `updatedInput` replace the whole tool input, so two hooks rewriting the same
Agent call would race and one rewrite would be lost. Every rewrite is therefore a pure function
`(tool_input) -> new input | None` and `dispatch_guard` applies them in order.

Isolation (L-13) is a role property: `worker(isolate=True)` marks the definition, and every dispatch of
that worker type gets `isolation: "worktree"` (the Agent tool's own git worktree isolation; no prompt
text mentions it). A model's explicit `isolation` is respected. A workspace that is not inside a git
work tree is refused before any session starts, since the CLI would only fail the dispatch later.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from claude_agent_sdk import AgentDefinition, HookContext, HookInput, HookJSONOutput, HookMatcher

__all__ = ["MARK", "Rewrite", "dispatch_guard", "isolation_input", "mark_isolated"]

Rewrite = Callable[[Mapping[str, Any]], "dict[str, Any] | None"]
MARK = "_flower_isolate"  # an instance attribute, not a dataclass field: the SDK never sends it to the CLI


def mark_isolated(definition: AgentDefinition) -> AgentDefinition:
    """Mark a worker definition so that its dispatches run in their own git worktree."""
    object.__setattr__(definition, MARK, True)
    return definition


def isolation_input(tool_input: Mapping[str, Any], isolated: Collection[str]) -> dict[str, Any] | None:
    """The Agent input with `isolation: "worktree"` for an isolated worker type, else None."""
    if tool_input.get("subagent_type") not in isolated or tool_input.get("isolation") == "worktree":
        return None
    return {**tool_input, "isolation": "worktree"}  # the role decides: a model cannot opt out


def dispatch_guard(rewrites: list[Rewrite]) -> HookMatcher:
    """PreToolUse on Agent: apply `rewrites` in order and return one `updatedInput` (no decision)."""

    async def _dispatch_guard(input_data: HookInput, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
        tool_input = input_data.get("tool_input")
        if not isinstance(tool_input, Mapping):
            return {}
        current: Mapping[str, Any] = tool_input
        for rewrite in rewrites:
            current = rewrite(current) or current
        if current is tool_input:
            return {}
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": dict(current)}}

    return HookMatcher(matcher="Agent", hooks=[_dispatch_guard])
