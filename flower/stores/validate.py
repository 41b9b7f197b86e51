"""Is a transcript something the CLI can resume and the API accept? (B-7)

`validate(entries)` lists problems in two families, each message starting with its family:

* `chain:` every `parentUuid` is null or names an entry that is present. Problems are reported once per
  missing uuid, in words that do not depend on which entries point at it, so "problems after a rewrite"
  can be compared with "problems before" as sets (a rewrite relinks children of removed entries onto the
  same ancestor, so an already missing parent stays the same problem).
* `pairing:` over what the CLI would send: the conversation thread (the main thread; in a subagent file,
  its only thread), `user`/`assistant` entries in file order, CLI-written API-error messages skipped
  (they are never sent, docs/sdk-notes.md#errors-and-interrupts), and a compaction boundary starting afresh
  (nothing before it is sent). Every `tool_use` of an assistant message must be answered by exactly one
  `tool_result` in the user entries that follow, before the next assistant message with a different
  `message.id`; every `tool_result` must answer a call of the assistant message before it. Parallel results
  may come in any order (completion order, docs/sdk-notes.md#transcript-order); only `tool_use_id` counts.

Real transcripts can be broken before anyone rewrites them (excerpts, glued lines, entries the CLI itself
drops), so callers compare problem sets rather than expect an empty list.
"""

from __future__ import annotations

from typing import Any

from flower.stores._transcript import Entry, blocks_of, is_api_error, is_compact_boundary, message_key

__all__ = ["validate"]


def validate(entries: list[Entry]) -> list[str]:
    """Problems that would make a resume of `entries` fail or lose history; an empty list means sound."""
    entries = [entry for entry in entries if isinstance(entry, dict)]
    return _chain_problems(entries) + _pairing_problems(_conversation(entries))


def _chain_problems(entries: list[Entry]) -> list[str]:
    present = {entry["uuid"] for entry in entries if isinstance(entry.get("uuid"), str)}
    missing: dict[str, None] = {}
    for entry in entries:
        parent = entry.get("parentUuid")
        if parent is not None and parent not in present:
            missing.setdefault(str(parent), None)
    return [f"chain: parentUuid {parent} is not in the transcript" for parent in missing]


def _conversation(entries: list[Entry]) -> list[tuple[int, Entry]]:
    """The thread the CLI would send, in file order: main-thread entries, or all of a subagent file."""
    messages = [(i, e) for i, e in enumerate(entries) if e.get("type") in ("user", "assistant", "system")]
    has_main = any(e.get("isSidechain") is not True for _, e in messages if e.get("type") != "system")
    if has_main:
        return [(i, e) for i, e in messages if e.get("isSidechain") is not True]
    return messages


class _Turn:
    """The assistant message being answered, and what has answered it so far."""

    def __init__(self, key: str | None = None) -> None:
        self.key = key
        self.calls: dict[str, str] = {}
        self.answered: set[str] = set()

    def unanswered(self) -> list[str]:
        return [
            f"pairing: tool_use {call} ({name}) has no tool_result before the next assistant message"
            for call, name in self.calls.items()
            if call not in self.answered
        ]


def _pairing_problems(conversation: list[tuple[int, Entry]]) -> list[str]:
    problems: list[str] = []
    turn = _Turn()
    seen_calls: set[str] = set()
    for position, entry in conversation:
        kind = entry.get("type")
        if kind == "system":
            if is_compact_boundary(entry):
                turn = _Turn()
            continue
        if kind == "assistant":
            if is_api_error(entry):
                continue
            key = message_key(entry, position)
            if key != turn.key:
                problems += turn.unanswered()
                turn = _Turn(key)
            _add_calls(entry, turn, seen_calls, problems)
        else:
            _answer(entry, turn, problems)
    return problems + turn.unanswered()


def _add_calls(entry: Entry, turn: _Turn, seen: set[str], problems: list[str]) -> None:
    for block in _blocks(entry, "tool_use"):
        call = block.get("id")
        if not isinstance(call, str):
            problems.append("pairing: a tool_use block has no id")
            continue
        if call in seen:
            problems.append(f"pairing: tool_use id {call} is used more than once")
            continue
        seen.add(call)
        name = block.get("name")
        turn.calls[call] = name if isinstance(name, str) else "?"


def _answer(entry: Entry, turn: _Turn, problems: list[str]) -> None:
    for block in _blocks(entry, "tool_result"):
        call = block.get("tool_use_id")
        if call not in turn.calls:
            problems.append(
                f"pairing: tool_result for {call} does not answer a call of the message before it"
            )
        elif call in turn.answered:
            problems.append(f"pairing: tool_use {call} has more than one tool_result")
        else:
            turn.answered.add(call)


def _blocks(entry: Entry, kind: str) -> list[dict[str, Any]]:
    blocks = blocks_of(entry) or []
    return [block for block in blocks if isinstance(block, dict) and block.get("type") == kind]
