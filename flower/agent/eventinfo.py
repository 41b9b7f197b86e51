"""What an event's text or payload says, read the same way by every consumer (live view, tracing, logs).

Pure functions over `Event` data: the spill pointer a tool result carries, whether a result is a denial,
the worker a dispatch names, and the four usage numbers of an API message.

Invariants:
- A spill is recognised from the pointer line `texts.SPILL_POINTER` (placeholders match anything), wherever
  it sits in the result.
- A denial is recognised by the CLI's own framing of a hook refusal (`PreToolUse:<Tool> hook error: ...`,
  docs/sdk-notes.md#denials), never by flower's wording, which changes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from flower import texts

__all__ = ["USAGE_KEYS", "denial_reason", "dispatch_of", "spill_of", "spill_pattern", "usage_of"]

USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
DISPATCH_TOOLS = frozenset({"Agent", "Task"})


def spill_pattern(template: str = texts.SPILL_POINTER) -> re.Pattern[str]:
    """A regex for the pointer line a spill leaves, built from its template (placeholders match anything)."""
    parts = re.split(r"\{[a-z_]+\}", template)
    names = re.findall(r"\{([a-z_]+)\}", template)
    pattern = re.escape(parts[0])
    for name, literal in zip(names, parts[1:]):
        field = r"\d[\d,]*" if name == "chars" else r"[^\n]+?"
        pattern += f"(?P<{name}>{field})" + re.escape(literal)
    return re.compile(pattern)


_SPILL = spill_pattern()
_DENIAL = re.compile(r"^(?:Error: )?PreToolUse:[\w.-]+ hook error: ?(?P<reason>.*)", re.DOTALL)


def spill_of(text: str | None) -> tuple[int, str] | None:
    """(chars, path) of the spill pointer in a tool result, or None."""
    match = _SPILL.search(text or "")
    if match is None:
        return None
    found = match.groupdict()
    chars = int((found.get("chars") or "0").replace(",", "") or 0)
    return chars, found.get("path") or ""


def denial_reason(text: str | None, is_error: bool = True) -> str | None:
    """The reason of a hook denial (the CLI's `PreToolUse:<Tool> hook error: <reason>`), or None."""
    if not is_error:
        return None
    match = _DENIAL.match((text or "").strip())
    return match.group("reason").strip() if match else None


def dispatch_of(tool: str | None, payload: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(worker type, description, brief) of an Agent/Task call, or None for any other tool."""
    if tool not in DISPATCH_TOOLS:
        return None
    raw = payload.get("input")
    data: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    return (str(data.get("subagent_type") or "general-purpose"), str(data.get("description") or ""),
            str(data.get("prompt") or ""))


def usage_of(payload: Mapping[str, Any]) -> dict[str, int]:
    """The four usage numbers of an event's API message (zeros when the event carries none)."""
    raw = payload.get("usage")
    usage: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    return {key: int(usage.get(key) or 0) for key in USAGE_KEYS}
