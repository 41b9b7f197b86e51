"""The walls: PreToolUse hooks that keep hands-on work off the coordinator's main thread (S-3, S-5, S-7, B-1).

Enforcement is by mechanism, never by prompt (P-2). The main thread is told apart from subagents by the
hook input: subagent calls carry `agent_id`, main-thread calls never do (docs/sdk-notes.md#hook-inputs). Walls
are hooks, never `disallowed_tools` or `tools=`: both are session-wide and strip the tool from subagents too
(S-5).

Invariants:
- `spec_guards(spec)` (in the options compiler) derives the walls from the spec alone (B-1): a `delegate_only` spec always gets
  `delegate_guard`, whether or not a workbench exists; a non-delegating spec gets `whitelist_guard` for
  the hands-on tools its `allowed_tools` do not grant. One wall per spec, one wording.
- The coordinator's glance Bash is judged by `flower.walls.glance.judge.is_ephemeral`, the same predicate that
  expires its results on resume (S-8); the wall adds the Bash call's working directory, so a word
  naming a FIFO or a symlink to a device is refused too. A glance never runs in the background (it
  would outlive the Bash timeout), and a glance's git commands run with the repository's programs
  pinned off: the hook returns the hardened command as `updatedInput` (checked end to end: the CLI
  runs the rewritten command, and the transcript keeps the model's own). A `timeout` over
  `GLANCE_TIMEOUT_MS` is lowered to it the same way.
- Defence in depth: the judge can be wrong, so what it lets through runs confined
  (`flower.walls.confine`: read-only, no network, bounded, killed before its timeout); on a machine
  without the mechanism only the fallback programs run, and flower says so once.
- MCP tools (S-8, issue #16): on a walled main thread every `mcp__*` tool is denied except the ones the
  spec lists in `glance_tools` (read-only by the spec's word). The wall is keyed on the tool name's
  prefix, not on a list of known tools, so a server added later is walled too.
- Nested delegation (L-1): agent types listed in `leads` are walled like the main thread, so a sub-lead
  that dispatches further subagents stays hands-off too.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from claude_agent_sdk import HookContext, HookInput, HookJSONOutput, HookMatcher

from flower import texts

__all__ = [
    "HANDS_ON",
    "Hooks",
    "approve_subagents",
    "delegate_guard",
    "fork_guard",
    "mcp_guard",
    "merge_hooks",
    "whitelist_guard",
]

HANDS_ON = ("Bash", "Write", "Edit", "NotebookEdit", "Monitor", "PowerShell")
"""Tools that change the world or run a command. Monitor runs a shell command as a background watcher: the CLI
checks its command with the Bash hooks too, but a glance never runs in the background, so Monitor is denied
whatever its command. PowerShell is the CLI's other shell (not offered on this platform; denied by name)."""
GLANCE_TIMEOUT_MS = 120_000
"""The longest a glance may run (the Bash tool's default timeout); a longer `timeout` is lowered to it."""
Hooks = dict[str, list[HookMatcher]]


def _deny(reason: str) -> HookJSONOutput:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


def tool_input_of(input_data: HookInput) -> dict[str, Any]:
    """The tool call's input of a hook event (a copy), {} for an event without one."""
    tool_input = input_data.get("tool_input")
    return dict(tool_input) if isinstance(tool_input, Mapping) else {}


def _on_main(input_data: HookInput, leads: Collection[str]) -> bool:
    if not input_data.get("agent_id"):
        return True
    return input_data.get("agent_type") in leads


def delegate_guard(
    *,
    allow_glance: bool = True,
    artifacts: str | Path | None = None,
    leads: Collection[str] = (),
) -> HookMatcher:
    """Deny the `HANDS_ON` tools on the main thread (and in `leads`), pointing to a subagent.

    With `allow_glance`, a Bash command that `is_ephemeral` passes runs. `artifacts` names the real
    artifacts folder in the denial reason when a workbench is known.
    """
    where = str(artifacts) if artifacts is not None else texts.DELEGATE_DENIAL_WHERE
    reason = texts.DELEGATE_DENIAL.format(where=where)
    lead_types = frozenset(leads)

    async def guard(input_data: HookInput, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
        if not _on_main(input_data, lead_types):
            return {}
        if input_data.get("tool_name") == "Bash" and allow_glance:
            return _glance(input_data, reason)
        return _deny(reason)

    return HookMatcher(matcher="|".join(HANDS_ON), hooks=[guard])


def _glance(input_data: HookInput, reason: str) -> HookJSONOutput:
    """Let a main-thread Bash glance run (git pinned), or deny it with the reason it is not one."""
    # Imported on the first Bash call: the shell parser's tables cost ~150 ms to build.
    from flower.walls import confine
    from flower.walls.glance.git import filter_pins
    from flower.walls.glance.judge import describe_refusal, harden_git, programs
    from flower.walls.glance.options import Refusal

    tool_input = tool_input_of(input_data)
    command = str(tool_input.get("command", ""))
    if tool_input.get("run_in_background"):
        return _deny(reason + texts.GLANCE_REFUSAL.format(why=texts.GLANCE_WHY["background"]))
    cwd = input_data.get("cwd")
    if not cwd:
        # Without a working directory no word can be looked up on disk: fail closed, never skip the look.
        return _deny(reason + texts.GLANCE_REFUSAL.format(why=texts.GLANCE_WHY["nocwd"]))
    cwd = str(cwd)
    why = describe_refusal(command, cwd=cwd)
    if why is not None:
        return _deny(reason + texts.GLANCE_REFUSAL.format(why=why))
    updated = dict(tool_input)
    try:
        updated["command"] = harden_git(command, lambda directory: filter_pins(os.path.join(cwd, directory)))
    except Refusal as refusal:
        why = texts.GLANCE_WHY[refusal.code].format(what=refusal.what)
        return _deny(reason + texts.GLANCE_REFUSAL.format(why=why))
    timeout = tool_input.get("timeout")
    wait = int(timeout) if isinstance(timeout, (int, float)) and timeout > 0 else GLANCE_TIMEOUT_MS
    wait = min(wait, GLANCE_TIMEOUT_MS)  # a glance is quick; it may not ask to wait ten minutes
    bwrap = confine.mechanism()
    if bwrap is None:
        confine.notice_once()
        outside = [name for name in programs(command) if name not in confine.FALLBACK_PROGRAMS]
        if outside:
            why = texts.GLANCE_WHY["unconfined"].format(what=outside[0])
            return _deny(reason + texts.GLANCE_REFUSAL.format(why=why))
        if isinstance(timeout, (int, float)) and timeout > GLANCE_TIMEOUT_MS:
            updated["timeout"] = GLANCE_TIMEOUT_MS
    else:
        try:
            updated["command"] = confine.confine(updated["command"], bwrap=bwrap, cwd=cwd, timeout_ms=wait)
        except OSError:  # the filter could not be written: never run the glance without it
            why = texts.GLANCE_WHY["unconfined"].format(what=(programs(command) or ["it"])[0])
            return _deny(reason + texts.GLANCE_REFUSAL.format(why=why))
        updated["timeout"] = wait
    if updated == tool_input:
        return {}
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": updated}}


def mcp_guard(glance_tools: Collection[str] = (), *, leads: Collection[str] = ()) -> HookMatcher:
    """Deny every MCP tool (`mcp__*`) on the main thread (and in `leads`) except `glance_tools`."""
    allowed, lead_types = frozenset(glance_tools), frozenset(leads)

    async def guard(input_data: HookInput, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
        tool = str(input_data.get("tool_name") or "")
        if not tool.startswith("mcp__") or tool in allowed or not _on_main(input_data, lead_types):
            return {}
        return _deny(texts.MCP_DENIAL.format(tool=tool))

    return HookMatcher(matcher=None, hooks=[guard])


def whitelist_guard(allowed: Iterable[str], *, name: str = "this agent") -> HookMatcher | None:
    """Make `allowed` exclusive for the hands-on tools on the main thread; None when it grants them all."""
    granted = set(allowed)
    banned = [tool for tool in HANDS_ON if tool not in granted]
    if not banned:
        return None

    async def guard(input_data: HookInput, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
        if input_data.get("agent_id"):
            return {}
        return _deny(texts.WHITELIST_DENIAL.format(tool=input_data.get("tool_name"), name=name))

    return HookMatcher(matcher="|".join(banned), hooks=[guard])


def approve_subagents(*, leads: Collection[str] = ()) -> HookMatcher:
    """PreToolUse: approve every subagent call, for unattended runs where nobody can click "allow".

    The CLI only offers a subagent the tools of its definition, and the walls are hooks of their own (a
    deny from any hook wins over this allow). Main-thread calls and `leads` get no opinion, so the normal
    permission rules apply to them. A hook, not `can_use_tool`: with a permission callback the CLI adds
    its AskUserQuestion tool (about 4,600 chars) to every main-thread request, for good.
    """
    lead_types = frozenset(leads)

    async def approve(input_data: HookInput, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
        if _on_main(input_data, lead_types):
            return {}
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                                       "permissionDecisionReason": "flower: unattended subagent"}}

    return HookMatcher(matcher=None, hooks=[approve])


def merge_hooks(*groups: Mapping[Any, Iterable[HookMatcher]] | None) -> Hooks:
    """Concatenate hook groups per event, in order; None groups are skipped, empty events dropped."""
    merged: Hooks = {}
    for group in groups:
        for event, matchers in (group or {}).items():
            merged.setdefault(event, []).extend(matchers)
    return {event: matchers for event, matchers in merged.items() if matchers}


def _names_fork(kind: object) -> bool:
    """Whether the CLI would take `kind` for its fork agent type. The bundled CLI compares names after NFKC,
    lowercasing and removing every blank, dash and underscore anywhere in them ("fo rk", "f-o-r-k", "ｆｏｒｋ"
    are all its fork); so does this, erring towards a denial where Python's classes are wider."""
    if not isinstance(kind, str):
        return False
    folded = unicodedata.normalize("NFKC", kind).lower()
    return "".join(ch for ch in folded if not _dropped(ch)) == "fork"


def _dropped(ch: str) -> bool:
    return ch.isspace() or ch in "_\ufeff\u200b" or unicodedata.category(ch) == "Pd"


def fork_guard(agents: Collection[str] = (), *, leads: Collection[str] = ()) -> HookMatcher:
    """Deny, on the main thread (and in `leads`), every Agent dispatch whose `subagent_type` is not one of
    `agents` as written: the fork (the coordinator itself as a subagent, with every tool of the session and
    none of a worker's rules or whitelist) in every spelling the CLI takes for it, also when the spec names an
    agent so (the CLI tests for its fork before it looks a name up), and the CLI's built-in types
    (`general-purpose`, the default when the type is missing, `Explore`, `Plan`, ...), which would do
    hands-on work outside the workers' rules as well."""
    lead_types = frozenset(leads)
    workers = frozenset(agents)

    async def guard(input_data: HookInput, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
        kind = tool_input_of(input_data).get("subagent_type")
        if not _on_main(input_data, lead_types):
            return {}
        if _names_fork(kind):
            return _deny(texts.FORK_DENIAL)
        if not isinstance(kind, str) or kind not in workers:
            names = ", ".join(sorted(workers)[:8]) or "none"
            return _deny(texts.AGENT_TYPE_DENIAL.format(kind=str(kind)[:40], names=names))
        return {}

    return HookMatcher(matcher="Agent|Task", hooks=[guard])
