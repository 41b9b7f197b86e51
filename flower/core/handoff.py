"""Generations instead of compaction (S-22..S-24).

The main thread grows monotonically even with every layer on; before the window fills, the same session
writes a handoff document and a fresh session continues from it plus the workbench. Nothing is
summarised away behind the model's back: the handoff is written by the model that knows the work, saved
to `notes/`, and readable by people.

Invariants:
- Only the main thread counts: the context of a main-thread API message is input + cache read + cache
  creation tokens, and each API message is counted once however many SDK messages carry it.
- Threshold = window - max(50k, 25% of window) unless `headroom` is given; a warning 20k earlier.
- The window comes from `HandoffPolicy.window`, else `FLOWER_WINDOW`, else the model name, else 1M (the
  bundled CLI's default window).
- A handoff needs the sections `doing` and `next`; a reply without them is retried once, then replaced by a
  degraded handoff built from what the runtime knows.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from flower.core import texts
from flower.core.compact import CompactMode, CompactPolicy
from flower.core.confined import Confined
from flower.errors import ConfigError

__all__ = [
    "CompactMode",
    "CompactPolicy",
    "ContextMeter",
    "HandoffPolicy",
    "is_context_overflow",
    "parse_handoff",
    "save_handoff",
]

DEFAULT_WINDOW = 1_000_000
_MODEL_WINDOWS = (("haiku", 200_000), ("claude-3", 200_000))
REQUIRED = ("doing", "next")
SECTIONS = ("doing", "decided", "dead ends", "next", "scene")


@dataclass(frozen=True)
class HandoffPolicy:
    """When a run hands over to a fresh session."""

    window: int | None = None
    """Context window in tokens; None reads FLOWER_WINDOW, then the model name, then 1M."""
    headroom: int | None = None
    """Tokens kept free below the window; None means max(50k, 25% of the window)."""
    max_generations: int = 8
    """More generations than this in one step stop the step with a diagnostic."""

    def __post_init__(self) -> None:
        if self.window is not None and self.window <= 0:
            raise ConfigError(f"HandoffPolicy window must be positive, not {self.window}")
        if self.headroom is not None and self.headroom < 0:
            raise ConfigError(f"HandoffPolicy headroom must not be negative, not {self.headroom}")
        if self.max_generations < 1:
            raise ConfigError("HandoffPolicy max_generations must be at least 1")

    def resolve_window(self, model: str | None = None) -> int:
        if self.window is not None:
            return self.window
        env = os.environ.get("FLOWER_WINDOW", "").strip().lower().replace("_", "")
        if env:
            match = re.fullmatch(r"(\d+)(k|m)?", env)
            if not match:
                raise ConfigError(f"FLOWER_WINDOW must be a token count like 200000 or 200k, not {env!r}")
            scale = {"k": 1_000, "m": 1_000_000}.get(match.group(2) or "", 1)
            return int(match.group(1)) * scale
        name = (model or "").lower()
        return next((size for marker, size in _MODEL_WINDOWS if marker in name), DEFAULT_WINDOW)

    def threshold(self, model: str | None = None) -> int:
        window = self.resolve_window(model)
        headroom = self.headroom if self.headroom is not None else max(50_000, window // 4)
        if headroom >= window:
            raise ConfigError(f"handoff headroom {headroom:,} leaves nothing of a {window:,}-token window")
        return window - headroom

    def warning(self, model: str | None = None) -> int:
        return max(0, self.threshold(model) - 20_000)


CONTEXT_FIELDS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def message_context(usage: Mapping[str, Any] | None) -> int:
    """Tokens of context one API message saw: input + cache read + cache creation (S-24). The one
    definition: the runtime, the stores' `last_context`, the live view and the report all use it."""
    if not isinstance(usage, Mapping):
        return 0
    return sum(value for value in (usage.get(k) for k in CONTEXT_FIELDS) if isinstance(value, int))


@dataclass
class ContextMeter:
    """Main-thread context per API message, each message counted once."""

    per_message: list[int] = field(default_factory=list)
    """Context of each distinct main-thread API message, in order."""
    warned: bool = False
    """The near-threshold warning was given."""
    _seen: set[str] = field(default_factory=set)

    def observe(self, message_id: str | None, usage: Mapping[str, Any] | None) -> bool:
        """Record a main-thread assistant message; False when it was already counted or has no usage."""
        size = message_context(usage)
        if not size or (message_id is not None and message_id in self._seen):
            return False
        if message_id is not None:
            self._seen.add(message_id)
        self.per_message.append(size)
        return True

    @property
    def current(self) -> int:
        return self.per_message[-1] if self.per_message else 0


_OVERFLOW = re.compile(r"prompt is too long|context (length|window)|too many tokens|exceeds? the context",
                       re.IGNORECASE)


def is_context_overflow(text: str | None) -> bool:
    """Whether an error text says the context no longer fits."""
    return bool(text and _OVERFLOW.search(text))


def parse_handoff(text: str) -> dict[str, str]:
    """The sections of a handoff document, keyed by lower-case heading; {} when a required one is missing."""
    sections: dict[str, str] = {}
    current: str | None = None
    for line in text.splitlines():
        heading = re.match(r"^\s*#{1,6}\s*(.+?)\s*:?\s*$", line)
        if heading and heading.group(1).strip().lower() in SECTIONS:
            current = heading.group(1).strip().lower()
            sections[current] = ""
        elif current is not None:
            sections[current] += line + "\n"
    sections = {k: v.strip() for k, v in sections.items()}
    return sections if all(sections.get(k) for k in REQUIRED) else {}


def save_handoff(notes: Path | Confined, step: str, text: str) -> Path:
    """Write `notes/handoff-<step>.md`, archiving an earlier one under notes/handoffs/.

    Given a `Confined` folder (the workbench's notes), no symlink below its anchor is followed; a plain
    `Path` is its own anchor."""
    if not isinstance(notes, Confined):
        notes.mkdir(parents=True, exist_ok=True)
        notes = Confined(os.path.realpath(notes))
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", step).strip("-") or "step"
    name = f"handoff-{slug}.md"
    with notes.open() as fd:
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            info = None
    if info is not None:
        stamp = datetime.fromtimestamp(info.st_mtime, timezone.utc).strftime("%Y%m%dT%H%M%S%f")
        notes.replace(name, notes.child("handoffs"), f"handoff-{slug}-{stamp}.md")
    notes.write_atomic(name, (text if text.endswith("\n") else text + "\n").encode("utf-8"), prefix=f".{name}.")
    return notes.path / name


def degraded_handoff(prompt: str, last_text: str, reason: str) -> str:
    """A handoff the runtime writes itself when the session cannot (its context overflowed)."""
    return texts.HANDOFF_DEGRADED.format(reason=reason, prompt=prompt.strip(),
                                         last=last_text.strip() or "(nothing)")
