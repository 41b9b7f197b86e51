"""Reading Claude Code transcript entries without trusting them, and one index per rewrite.

A transcript is a list of entries (dicts, one JSONL line each) as the CLI writes them and a `SessionStore`
returns them. The shapes that matter here (docs/sdk-notes.md#session-stores, #errors-and-interrupts,
#transcript-order):

* `assistant` entries hold one content block each (thinking, text, one `tool_use`); one API reply is spread
  over several entries sharing `message.id`. They are ONE message: a round, a group, a unit of pairing.
* `user` entries hold a prompt (string content) or blocks; each parallel tool result is its own user entry,
  written in completion order, so results pair with calls by `tool_use_id`, never by position.
* Entries are threaded by `uuid`/`parentUuid`; old CLIs (1.0.x) keep subagent turns inline as
  `isSidechain: true` entries, so "the next assistant message" is always the next one on the same thread.

Invariants: nothing here mutates an entry; building the index is one pass over entries and blocks (O(n));
malformed entries (non-dict message, non-list content, blocks that are not objects) are skipped, never fatal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Entry = dict[str, Any]
Thread = tuple[bool, str]
"""`(isSidechain, agentId)`: entries of one conversation thread inside one transcript."""

COMPACT_BOUNDARY = "compact_boundary"
SYNTHETIC_MODEL = "<synthetic>"


def blocks_of(entry: Entry) -> list[Any] | None:
    """`message.content` when it is a list of blocks, else None (string prompts, odd shapes)."""
    message = entry.get("message")
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    return content if isinstance(content, list) else None


def is_protected(entry: Entry) -> bool:
    """Compaction summaries and meta entries are never changed or removed (S-20)."""
    return entry.get("isCompactSummary") is True or entry.get("isMeta") is True


def is_api_error(entry: Entry) -> bool:
    return entry.get("type") == "assistant" and entry.get("isApiErrorMessage") is True


def is_synthetic(entry: Entry) -> bool:
    """An assistant entry the CLI wrote itself (API errors, "No response requested."), not a model reply."""
    message = entry.get("message")
    return is_api_error(entry) or (isinstance(message, dict) and message.get("model") == SYNTHETIC_MODEL)


def is_compact_boundary(entry: Entry) -> bool:
    return entry.get("type") == "system" and entry.get("subtype") == COMPACT_BOUNDARY


def thread_of(entry: Entry) -> Thread:
    agent = entry.get("agentId")
    return (entry.get("isSidechain") is True, agent if isinstance(agent, str) else "")


def message_key(entry: Mapping[str, Any], index: int) -> str:
    """The API message an assistant entry belongs to: its message id, else its request id; an entry with
    neither is its own message. One reply is spread over several entries
    (docs/sdk-notes.md#transcript-order)."""
    message = entry.get("message")
    for value in (message.get("id") if isinstance(message, Mapping) else None, entry.get("requestId")):
        if isinstance(value, str) and value:
            return value
    return f"#entry-{index}"


def result_text(block: dict[str, Any]) -> str | None:
    """The plain text of a tool_result's content, or None when it holds anything but text (images, documents)."""
    content = block.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    parts: list[str] = []
    for item in content:
        if not isinstance(item, dict) or item.get("type") != "text" or not isinstance(item.get("text"), str):
            return None
        parts.append(item["text"])
    return "\n".join(parts)


def replace_block(entry: Entry, position: int, block: dict[str, Any]) -> Entry:
    """A copy of `entry` with content block `position` replaced; everything else is shared, not copied."""
    message = dict(entry["message"])
    content = list(message["content"])
    content[position] = block
    message["content"] = content
    copy = dict(entry)
    copy["message"] = message
    return copy


@dataclass
class ToolUse:
    id: str
    name: str
    input: Any
    entry: int
    block: int
    round: int
    """How many real assistant messages its thread had when this call was made (its own included)."""
    thread: Thread


@dataclass
class ToolResult:
    tool_use_id: str
    entry: int
    block: int


@dataclass
class TranscriptIndex:
    """Everything the rewrites look up, built in one pass; positions are indexes into the indexed list."""

    uses: dict[str, ToolUse] = field(default_factory=dict)
    results: dict[str, list[ToolResult]] = field(default_factory=dict)
    ordered_results: list[ToolResult] = field(default_factory=list)
    rounds: dict[Thread, int] = field(default_factory=dict)
    """Real assistant messages per thread over the whole transcript."""
    group_last: dict[int, int] = field(default_factory=dict)
    """Assistant entry -> the last entry of its message on its thread (where that message's turn begins)."""
    by_uuid: dict[str, int] = field(default_factory=dict)

    @classmethod
    def build(cls, entries: list[Entry]) -> TranscriptIndex:
        index = cls()
        runs: dict[Thread, tuple[str, list[int]]] = {}
        for position, entry in enumerate(entries):
            if not isinstance(entry, dict):
                continue
            uuid = entry.get("uuid")
            if isinstance(uuid, str):
                index.by_uuid.setdefault(uuid, position)
            kind = entry.get("type")
            if kind == "assistant":
                index._add_assistant(entries, position, runs)
            elif kind == "user":
                index._add_user(entry, position)
        for _, members in runs.values():
            index._close_run(members)
        return index

    def _add_assistant(
        self, entries: list[Entry], position: int, runs: dict[Thread, tuple[str, list[int]]]
    ) -> None:
        entry = entries[position]
        thread = thread_of(entry)
        key = message_key(entry, position)
        run = runs.get(thread)
        if run is None or run[0] != key:
            if run is not None:
                self._close_run(run[1])
            run = (key, [])
            runs[thread] = run
            if not is_synthetic(entry):
                self.rounds[thread] = self.rounds.get(thread, 0) + 1
        run[1].append(position)
        blocks = blocks_of(entry)
        if blocks is None:
            return
        for number, block in enumerate(blocks):
            if (
                isinstance(block, dict)
                and block.get("type") == "tool_use"
                and isinstance(block.get("id"), str)
                and block["id"] not in self.uses
            ):
                name = block.get("name")
                self.uses[block["id"]] = ToolUse(
                    block["id"],
                    name if isinstance(name, str) else "",
                    block.get("input"),
                    position,
                    number,
                    self.rounds.get(thread, 0),
                    thread,
                )

    def _close_run(self, members: list[int]) -> None:
        last = members[-1]
        for member in members:
            self.group_last[member] = last

    def _add_user(self, entry: Entry, position: int) -> None:
        blocks = blocks_of(entry)
        if blocks is None:
            return
        for number, block in enumerate(blocks):
            if isinstance(block, dict) and block.get("type") == "tool_result":
                tool_use_id = block.get("tool_use_id")
                if isinstance(tool_use_id, str):
                    result = ToolResult(tool_use_id, position, number)
                    self.results.setdefault(tool_use_id, []).append(result)
                    self.ordered_results.append(result)

    def age(self, use: ToolUse) -> int:
        """Rounds (real assistant messages on the call's thread) since the message that made the call."""
        return self.rounds.get(use.thread, 0) - use.round
