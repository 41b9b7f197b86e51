"""Reading transcript entries for the report: API messages, usage, visible characters, tool calls.

Pure functions over entries as a `SessionStore` returns them (dicts, one JSONL line each); nothing here
trusts a field's type. See `flower.report.analysis` for the invariants they serve: usage once per API message
(grouped by `message.id`, else `requestId`; the last entry of a group is complete), each block and each
tool call counted once, synthetic messages never a turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flower.stores._transcript import message_key

__all__ = [
    "Entry",
    "TokenUsage",
    "add_usage",
    "api_messages",
    "cost_state",
    "dedupe_across",
    "fallbacks",
    "is_reply",
    "keyed_replies",
    "last_model",
    "tool_uses",
    "usage_of",
    "visible_chars",
]

Entry = Mapping[str, Any]
_USAGE_FIELDS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens")


@dataclass(frozen=True)
class TokenUsage:
    """Tokens summed over distinct API messages."""

    input: int = 0
    """Uncached input tokens."""
    cache_read: int = 0
    cache_creation: int = 0
    output: int = 0

    @property
    def prompt(self) -> int:
        """Every input token a request carried: uncached + cache read + cache written."""
        return self.input + self.cache_read + self.cache_creation

    @property
    def cache_hit_rate(self) -> float | None:
        return self.cache_read / self.prompt if self.prompt else None


def add_usage(*usages: TokenUsage) -> TokenUsage:
    return TokenUsage(
        *(
            sum(getattr(u, name) for u in usages)
            for name in ("input", "cache_read", "cache_creation", "output")
        )
    )


def message_of(entry: Entry) -> Mapping[str, Any] | None:
    message = entry.get("message")
    return message if isinstance(message, Mapping) else None


def is_reply(entry: Entry) -> bool:
    """A real model reply (not one the CLI synthesised)."""
    message = message_of(entry)
    return (
        entry.get("type") == "assistant"
        and message is not None
        and entry.get("isApiErrorMessage") is not True
        and message.get("model") != "<synthetic>"
    )


def api_messages(entries: Iterable[Entry]) -> list[tuple[str, Entry]]:
    """`(key, last entry)` once per real API reply, in order of first appearance (module invariants)."""
    last: dict[str, Entry] = {}
    for position, entry in enumerate(entries):
        if is_reply(entry):
            last[message_key(entry, position)] = entry
    return list(last.items())


def usage_of(entry: Entry) -> TokenUsage:
    raw = (message_of(entry) or {}).get("usage")
    if not isinstance(raw, Mapping):
        return TokenUsage()
    values = [raw.get(name) for name in _USAGE_FIELDS]
    return TokenUsage(*(v if isinstance(v, int) and v > 0 else 0 for v in values))


def blocks_of(entry: Entry) -> list[Any]:
    content = (message_of(entry) or {}).get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def result_chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(
            len(part["text"])
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        )
    return 0


def block_chars(block: Mapping[str, Any]) -> int:
    kind = block.get("type")
    if kind == "text":
        return len(str(block.get("text") or ""))
    if kind == "thinking":
        return len(str(block.get("thinking") or ""))
    if kind == "tool_use":
        return len(json.dumps(block.get("input") or {}, ensure_ascii=False))
    if kind == "tool_result":
        return result_chars(block.get("content"))
    return 0  # images, documents, redacted thinking: not characters


def block_key(entry: Entry, position: int, index: int, block: Mapping[str, Any]) -> str:
    kind = block.get("type")
    call, answered = block.get("id"), block.get("tool_use_id")
    if kind == "tool_use" and isinstance(call, str):
        return "use:" + call
    if kind == "tool_result" and isinstance(answered, str):
        return "result:" + answered
    if entry.get("type") == "assistant":
        return f"{message_key(entry, position)}:{json.dumps(block, sort_keys=True, default=str)}"
    uuid = entry.get("uuid")
    return f"{uuid if isinstance(uuid, str) else '#' + str(position)}:{index}"


def visible_chars(entries: Iterable[Entry], seen: set[str] | None = None) -> int:
    """Model-visible characters of user and assistant messages, each block once (`seen` spans calls)."""
    seen = set() if seen is None else seen
    total = 0
    for position, entry in enumerate(entries):
        if entry.get("type") not in ("user", "assistant") or (
            entry.get("type") == "assistant" and not is_reply(entry)
        ):
            continue
        for index, block in enumerate(blocks_of(entry)):
            if not isinstance(block, Mapping):
                continue
            key = block_key(entry, position, index, block)
            if key not in seen:
                seen.add(key)
                total += block_chars(block)
    return total


def tool_uses(entries: Iterable[Entry]) -> dict[str, str]:
    """`tool_use id -> tool name` over real replies."""
    found: dict[str, str] = {}
    for entry in entries:
        if is_reply(entry):
            for block in blocks_of(entry):
                if (
                    isinstance(block, Mapping)
                    and block.get("type") == "tool_use"
                    and isinstance(block.get("id"), str)
                ):
                    found.setdefault(block["id"], str(block.get("name") or "?"))
    return found


def keyed_replies(entries: Sequence[Entry]) -> list[tuple[str, Entry]]:
    return [(message_key(e, i), e) for i, e in enumerate(entries) if is_reply(e)]


def dedupe_across(transcripts: Mapping[str, Sequence[Entry]]) -> dict[str, list[Entry]]:
    """Each transcript without the replies an earlier one already holds (a fork copies its parent's history,
    ids and all): every API message counts once, for the first transcript that has it. Only a message's own
    id (or request id) matches across transcripts; an entry with neither is its transcript's own."""
    seen: set[str] = set()
    out: dict[str, list[Entry]] = {}
    for name, entries in transcripts.items():
        keys = {id(entry): key for key, entry in keyed_replies(entries) if not key.startswith("#entry-")}
        out[name] = [e for e in entries if id(e) not in keys or keys[id(e)] not in seen]
        seen.update(keys.values())
    return out


def last_model(entries: Iterable[Entry]) -> str | None:
    model = None
    for entry in entries:
        if is_reply(entry):
            value = (message_of(entry) or {}).get("model")
            model = value if isinstance(value, str) and value else model
    return model


def fallbacks(entries: Iterable[Entry]) -> list[dict[str, str]]:
    """The CLI's switches to the fallback model, from its `system/model_fallback` entries, in order."""
    found = []
    for entry in entries:
        if isinstance(entry, Mapping) and entry.get("type") == "system" and entry.get("subtype") == "model_fallback":
            found.append({"model": str(entry.get("originalModel") or "?"),
                          "fallback_model": str(entry.get("fallbackModel") or "?"),
                          "trigger": str(entry.get("trigger") or ""), "timestamp": str(entry.get("timestamp") or "")})
    return found


def cost_state(main: Mapping[str, Sequence[Entry]]) -> float | None:
    """Sum over sessions of each session's last `cost-state` (the CLI's cumulative total for it)."""
    total, found = 0.0, False
    for entries in main.values():
        last = None
        for entry in entries:
            if entry.get("type") == "cost-state" and isinstance(entry.get("totalCostUSD"), (int, float)):
                last = float(entry["totalCostUSD"])
        if last is not None:
            total, found = total + last, True
    return total if found else None
