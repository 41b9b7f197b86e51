"""Request validation as strict as the real Messages API.

The CLI builds each request from stored history, so a broken history rewrite shows up here first. The real
API answers such a request with a 400 `invalid_request_error`; so does the fake, with a message in the
real API's words naming the offending ids, and the server records the violation so a test fails even when
the CLI swallows the error.

Rules checked (each one a 400 on the real API):
- every `tool_use` id in an assistant message is answered by a `tool_result` in the next message, which
  must be a user message;
- every `tool_result` answers a `tool_use` of the message right before it;
- `tool_use` ids are unique in a request;
- no message has empty content, and text blocks are non-empty (an empty final assistant message, the
  prefill form, is allowed);
- `tool_use` blocks have an id matching `^[a-zA-Z0-9_-]+$` and an object `input`; thinking blocks carry a
  signature.
The CLI itself repairs unpaired calls before sending (docs/sdk-notes.md#session-stores), so pairing faults
rarely get this far; field-level faults in stored history do.
The CLI places `role: "system"` messages among the messages (docs/sdk-notes.md#threads-on-the-wire); they are
skipped when looking for "the next message".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["request_problems"]

_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def _blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, Mapping)]


def _ids(message: Mapping[str, Any], kind: str, key: str) -> list[str]:
    return [str(b.get(key)) for b in _blocks(message) if b.get("type") == kind]


def _empty_content(index: int, message: Mapping[str, Any], last: bool) -> str | None:
    content = message.get("content")
    if content in ("", [], None):
        if last and message.get("role") == "assistant":
            return None
        return f"messages.{index}: all messages must have non-empty content except for the optional final assistant message"
    for j, block in enumerate(_blocks(message)):
        if block.get("type") == "text" and not str(block.get("text", "")).strip() and isinstance(content, list):
            return f"messages.{index}.content.{j}.text: text content blocks must contain non-whitespace text"
    return None


def _block_problems(index: int, message: Mapping[str, Any]) -> list[str]:
    problems = []
    for j, block in enumerate(_blocks(message)):
        where = f"messages.{index}.content.{j}"
        if block.get("type") == "tool_use":
            if not _ID.match(str(block.get("id", ""))):
                problems.append(f"{where}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'")
            if not isinstance(block.get("input"), Mapping):
                problems.append(f"{where}.tool_use.input: Input should be a valid dictionary")
        elif block.get("type") == "thinking" and not block.get("signature"):
            problems.append(f"{where}.thinking.signature: Field required")
    return problems


def request_problems(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The 400 messages the real API would give for `messages` (empty when the request is valid)."""
    problems: list[str] = []
    convo = [(i, m) for i, m in enumerate(messages) if m.get("role") != "system"]
    seen_uses: set[str] = set()
    for pos, (index, message) in enumerate(convo):
        empty = _empty_content(index, message, last=index == len(messages) - 1)
        if empty:
            problems.append(empty)
        problems.extend(_block_problems(index, message))
        if message.get("role") == "assistant":
            uses = _ids(message, "tool_use", "id")
            dupes = sorted(u for u in uses if u in seen_uses or uses.count(u) > 1)
            if dupes:
                problems.append(f"messages.{index}: `tool_use` ids must be unique: {', '.join(sorted(set(dupes)))}")
            seen_uses.update(uses)
            nxt = convo[pos + 1][1] if pos + 1 < len(convo) else None
            answered = set(_ids(nxt, "tool_result", "tool_use_id")) if nxt and nxt.get("role") == "user" else set()
            missing = [u for u in uses if u not in answered]
            if missing and nxt is not None:
                problems.append(
                    f"messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                    f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block "
                    "in the next message."
                )
        elif message.get("role") == "user":
            prev = convo[pos - 1][1] if pos > 0 else None
            offered = set(_ids(prev, "tool_use", "id")) if prev and prev.get("role") == "assistant" else set()
            stray = [r for r in _ids(message, "tool_result", "tool_use_id") if r not in offered]
            if stray:
                problems.append(
                    f"messages.{index}: unexpected `tool_use_id` found in `tool_result` blocks: {', '.join(stray)}. "
                    "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                )
    return problems
