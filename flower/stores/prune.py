"""Rewrites 3 and 4 of S-19: old denied calls go, disconnect residue is cleaned up.

**Denials** (`keep_denials=1`). A denied call is recognised only by the CLI's structural marker: its result
entry has `toolDenialKind == "permission-rule"` (hook, `can_use_tool` and dontAsk denials,
docs/sdk-notes.md#denials) — never by wording, which is ours or a hook's and changes. All but the newest
`keep_denials` go, each as a pair: its `tool_use` block and its `tool_result` block. Sibling blocks of the
same assistant message stay (a parallel Read and its result are untouched); an entry left with no blocks is
removed and its children relinked. The newest denial stays: it is what stops the model retrying the same call
in the same turn.

**API errors.** Assistant entries with `isApiErrorMessage: true` (the CLI's `<synthetic>` "API Error: …"
after retries ran out, docs/sdk-notes.md#errors-and-interrupts) are removed and their children relinked: they
are not the model's words and the CLI does not send them anyway.
The `<synthetic>` "No response requested." is deliberately KEPT. It is not an error: it is the closing half
of the CLI's own repair of an interrupted call (docs/sdk-notes.md#session-stores), it is sent to the model
as-is, it costs four words, and removing it would only merge two user turns and move the history away from
what was actually sent (P-4). Only the structural flag decides; the synthetic model name alone does not.

**Interrupts.** A call stopped by the user leaves a `tool_result` telling the model to "STOP … and wait for
the user", followed in the same turn by the harness row `[Request interrupted by user for tool use]`.
Resumed unattended, that text makes the model wait for nobody. Its body is replaced by a neutral note (the
call was interrupted, may have run in part, not a fault, check state first); `is_error` and the harness row
stay. Recognised by the marker `toolDenialKind == "user-rejected"` plus the row; in transcripts written
before the marker existed, by the row plus the CLI's fixed rejection sentence (`toolUseResult` or body).

**Orphans.** A `tool_use` with no `tool_result` anywhere after it (the session stopped mid-call) gets one:
a healing user entry inserted right after the last entry of that assistant message, holding an `is_error`
result with a neutral note for each orphan of the message. It takes over the children of that entry, so it
lies on every path through it. Its uuid derives from the call id, so healing twice adds nothing.

Nothing here touches compaction summaries or meta entries, or removes a block without its partner.
"""

from __future__ import annotations

import hashlib
import json
import uuid as uuidlib
from typing import Any

from flower import texts
from flower.errors import ConfigError
from flower.stores._plan import Plan, RewriteDetail, RewriteReport, run_alone
from flower.stores._transcript import (
    Entry,
    Thread,
    ToolUse,
    TranscriptIndex,
    blocks_of,
    is_api_error,
    is_protected,
    message_key,
    result_text,
    thread_of,
)

__all__ = [
    "check_keep_denials",
    "drop_api_errors",
    "find_interrupted",
    "heal_orphans",
    "neutralise_interrupts",
    "plan_api_errors",
    "plan_denials",
    "plan_interrupts",
    "plan_orphans",
    "prune_denials",
]

DENIAL_MARKER = "permission-rule"
REJECTED_MARKER = "user-rejected"
INTERRUPT_ROW = "[Request interrupted by user for tool use]"
_CLI_REJECTION = "The user doesn't want to proceed with this tool use."
"""The first sentence of the CLI's rejection result; only consulted for entries older than the marker."""
_CLI_REJECTION_RESULTS = ("User rejected tool use", "Error: " + _CLI_REJECTION)
_HEAL_NAMESPACE = uuidlib.UUID("6f1c2a47-5b0e-4f43-9d8e-2a7c4b1e9f30")
_HEAL_COPIED = (
    "isSidechain",
    "agentId",
    "userType",
    "entrypoint",
    "cwd",
    "sessionId",
    "version",
    "gitBranch",
    "slug",
)


def plan_denials(entries: list[Entry], index: TranscriptIndex, plan: Plan, keep_denials: int) -> None:
    """Remove all but the newest `keep_denials` permission-rule denials, each call with its result."""
    denials: dict[str, ToolUse] = {}  # by call id, in the order of their (first) denial result
    for result in index.ordered_results:
        entry = entries[result.entry]
        if entry.get("toolDenialKind") != DENIAL_MARKER or is_protected(entry):
            continue
        use = index.uses.get(result.tool_use_id)
        if use is None or use.entry > result.entry or is_protected(entries[use.entry]) or use.id in denials:
            continue
        denials[use.id] = use
    ordered = list(denials.values())
    old = ordered[: len(ordered) - keep_denials] if keep_denials < len(ordered) else []
    touched: set[int] = set()
    for use in old:
        chars = len(use.name) + len(json.dumps(use.input, ensure_ascii=False, default=str))
        plan.blocks[(use.entry, use.block)] = None
        touched.add(use.entry)
        first_uuid = None
        for result in index.results.get(use.id, ()):
            block = entries[result.entry]["message"]["content"][result.block]
            chars += len(result_text(block) or "")
            plan.blocks[(result.entry, result.block)] = None
            touched.add(result.entry)
            first_uuid = first_uuid or entries[result.entry].get("uuid")
        plan.note(RewriteDetail("denial", first_uuid, use.id, chars, use.name))
    _settle_emptied(entries, plan, touched)


def _settle_emptied(entries: list[Entry], plan: Plan, touched: set[int]) -> None:
    """Remove entries left without blocks; a surviving denial entry loses its copies of the removed result."""
    for position in touched:
        blocks = blocks_of(entries[position]) or []
        if all(
            (position, number) in plan.blocks and plan.blocks[(position, number)] is None
            for number in range(len(blocks))
        ):
            plan.drop.add(position)
        elif entries[position].get("type") == "user":
            plan.strip[position] = ("toolUseResult", "toolDenialKind", "permissionDecision")


def plan_api_errors(entries: list[Entry], plan: Plan) -> None:
    """Remove the CLI's synthetic API-error messages (never "No response requested.", see module doc)."""
    for position, entry in enumerate(entries):
        if isinstance(entry, dict) and is_api_error(entry) and not is_protected(entry):
            plan.drop.add(position)
            chars = sum(len(b.get("text", "")) for b in blocks_of(entry) or () if isinstance(b, dict))
            plan.note(RewriteDetail("api_error", entry.get("uuid"), None, chars, str(entry.get("error", ""))))


def find_interrupted(entries: list[Entry]) -> set[tuple[int, int]]:
    """(entry, block) of every result of a call the user interrupted (see module doc)."""
    found: set[tuple[int, int]] = set()
    pending: dict[Thread, list[tuple[int, int]]] = {}
    message: dict[Thread, str] = {}
    for position, entry in enumerate(entries):
        kind = entry.get("type") if isinstance(entry, dict) else None
        if kind == "assistant" and is_api_error(entry) and not is_protected(entry):
            continue  # removed by this rewrite: seen or not, the turn is the same (idempotence)
        if kind == "assistant":
            # A new message starts a new turn; more entries of the same message (results of its earlier
            # calls can sit between them, docs/sdk-notes.md#transcript-order) continue the current one.
            thread, key = thread_of(entry), message_key(entry, position)
            if message.get(thread) != key:
                message[thread], pending[thread] = key, []
        elif kind == "user":
            turn = pending.setdefault(thread_of(entry), [])
            blocks = blocks_of(entry)
            if blocks is None:
                continue
            for number, block in enumerate(blocks):
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    turn.append((position, number))
            if any(
                isinstance(b, dict) and b.get("type") == "text" and b.get("text") == INTERRUPT_ROW
                for b in blocks
            ):
                found.update(
                    key
                    for key in turn
                    if _rejected(entries[key[0]], entries[key[0]]["message"]["content"][key[1]])
                )
                turn.clear()
    return found


def _rejected(entry: Entry, block: dict[str, Any]) -> bool:
    if is_protected(entry):
        return False
    if "toolDenialKind" in entry:
        return bool(entry["toolDenialKind"] == REJECTED_MARKER)
    if block.get("is_error") is not True:
        return False
    body = result_text(block) or ""
    return (
        entry.get("toolUseResult") in _CLI_REJECTION_RESULTS
        or body.startswith(_CLI_REJECTION)
        or body == texts.INTERRUPTED_RESULT
    )


def plan_interrupts(entries: list[Entry], plan: Plan, interrupted: set[tuple[int, int]]) -> None:
    """Replace the stop-and-wait body of each interrupted call's result with the neutral note."""
    for position, number in sorted(interrupted):
        block = entries[position]["message"]["content"][number]
        old = result_text(block)
        if old == texts.INTERRUPTED_RESULT:
            continue
        plan.blocks[(position, number)] = {**block, "content": texts.INTERRUPTED_RESULT}
        plan.note(
            RewriteDetail(
                "interrupt",
                entries[position].get("uuid"),
                block.get("tool_use_id"),
                len(old or "") - len(texts.INTERRUPTED_RESULT),
            )
        )


def plan_orphans(entries: list[Entry], index: TranscriptIndex, plan: Plan) -> None:
    """Give every call without a later result a healing result, right after its message."""
    by_anchor: dict[int, list[ToolUse]] = {}
    for use in index.uses.values():
        if use.entry in plan.drop or (use.entry, use.block) in plan.blocks:
            continue
        if any(
            r.entry > use.entry and plan.blocks.get((r.entry, r.block), r) is not None
            for r in index.results.get(use.id, ())
        ):
            continue
        anchor = _anchor(entries, index, plan, use)
        by_anchor.setdefault(anchor, []).append(use)
    for anchor, orphans in by_anchor.items():
        heal = _healing_entry(entries, anchor, orphans)
        plan.after.setdefault(anchor, []).append(heal)
        for use in orphans:
            plan.note(RewriteDetail("orphan", heal["uuid"], use.id, -len(texts.ORPHAN_RESULT), use.name))


def _anchor(entries: list[Entry], index: TranscriptIndex, plan: Plan, use: ToolUse) -> int:
    """The last surviving entry of the call's assistant message on its thread: where its answer begins."""
    position = index.group_last.get(use.entry, use.entry)
    key = entries[use.entry].get("message", {}).get("id")
    while position > use.entry:
        entry = entries[position]
        if (
            position not in plan.drop
            and entry.get("type") == "assistant"
            and thread_of(entry) == use.thread
            and entry.get("message", {}).get("id") == key
        ):
            return position
        position -= 1
    return use.entry


def _heal_uuid(tool_use_id: str) -> str:
    """uuid5 of the call id; an id holding a lone surrogate (JavaScript strings can) is hashed through its
    surrogate-escaped bytes instead of failing: same id, same uuid, on every load."""
    try:
        return str(uuidlib.uuid5(_HEAL_NAMESPACE, tool_use_id))
    except UnicodeEncodeError:
        raw = tool_use_id.encode("utf-8", "surrogatepass")
        digest = hashlib.sha1(_HEAL_NAMESPACE.bytes + raw, usedforsecurity=False).digest()
        return str(uuidlib.UUID(bytes=digest[:16], version=5))


def _healing_entry(entries: list[Entry], anchor: int, orphans: list[ToolUse]) -> Entry:
    parent = entries[anchor]
    heal: Entry = {"parentUuid": parent.get("uuid")}
    heal.update((name, parent[name]) for name in _HEAL_COPIED if name in parent)
    heal["type"] = "user"
    heal["message"] = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": use.id, "content": texts.ORPHAN_RESULT, "is_error": True}
            for use in orphans
        ],
    }
    heal["uuid"] = _heal_uuid(orphans[0].id)
    if "timestamp" in parent:
        heal["timestamp"] = parent["timestamp"]
    source = entries[orphans[0].entry].get("uuid")
    if source is not None:
        heal["sourceToolAssistantUUID"] = source
    return heal


# --- one rewrite at a time ----------------------------------------------------------------------------


def check_keep_denials(keep_denials: int | None) -> None:
    if keep_denials is not None and (not isinstance(keep_denials, int) or keep_denials < 0):
        raise ConfigError(f"keep_denials must be an int >= 0 or None, got {keep_denials!r}")


def prune_denials(entries: list[Entry], keep_denials: int = 1) -> tuple[list[Entry], RewriteReport]:
    """Rewrite 3 alone: all but the newest `keep_denials` denied calls go, each with its result."""
    check_keep_denials(keep_denials)
    return run_alone(entries, lambda index, plan: plan_denials(entries, index, plan, keep_denials))


def drop_api_errors(entries: list[Entry]) -> tuple[list[Entry], RewriteReport]:
    """Rewrite 4a alone: the CLI's synthetic API-error messages go."""
    return run_alone(entries, lambda index, plan: plan_api_errors(entries, plan))


def neutralise_interrupts(entries: list[Entry]) -> tuple[list[Entry], RewriteReport]:
    """Rewrite 4b alone: interrupted calls' stop-and-wait results get a neutral note."""
    return run_alone(entries, lambda index, plan: plan_interrupts(entries, plan, find_interrupted(entries)))


def heal_orphans(entries: list[Entry]) -> tuple[list[Entry], RewriteReport]:
    """Rewrite 4c alone: every call without a result gets a healing one."""
    return run_alone(entries, lambda index, plan: plan_orphans(entries, index, plan))
